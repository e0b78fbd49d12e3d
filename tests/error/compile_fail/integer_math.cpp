// expect: spindle::exp takes a floating-point value
// exp of an iterator's coordinate, which is an integer value.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("int_exp", [](spindle::out<float, I> y, spindle::iter<I> i) {
    y(i) = spindle::cast<float>(spindle::exp(i));
  });
  (void)k;
}
