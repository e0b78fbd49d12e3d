// expect: spindle: buffer axes must be axis types
// A plain struct used as an axis of a buffer.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct NotAnAxis {};

int main() {
  auto k = spindle::kernel("not_axis", [](spindle::in<float, I, NotAnAxis> a, spindle::out<float, I> y,
                                          spindle::iter<I> i) { y(i) = 0.0f; });
  (void)k;
}
