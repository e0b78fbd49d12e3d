// expect: spindle::sqrt takes a floating-point value
// sqrt of an integer scalar parameter.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("int_sqrt", [](spindle::param<std::int32_t> n, spindle::out<float, I> y,
                                          spindle::iter<I> i) { y(i) = spindle::cast<float>(spindle::sqrt(n)); });
  (void)k;
}
