// expect: spindle::iter<A>: A must be an axis type
// An iterator over a type that is not an axis.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("not_axis_iter", [](spindle::in<float, I> x, spindle::out<float, I> y, spindle::iter<I> i,
                                               spindle::iter<int> n) { y(i) = x(i); });
  (void)k;
}
