// expect: spindle: cannot write into an `in` buffer
// Issue 8 §1.3: an assignment into an `in` buffer used to compile and be lost.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("write_in", [](spindle::in<float, I> a, spindle::out<float, I> y, spindle::iter<I> i) {
    a(i) = y(i) + 1.0f;
  });
  (void)k;
}
