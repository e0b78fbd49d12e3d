// expect: spindle: cannot write into an `in` buffer
// Issue 8 §1.3: `+=` into an `in` buffer is a compile-time error too.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("acc_in", [](spindle::in<float, I> a, spindle::in<float, I> b, spindle::iter<I> i) {
    a(i) += b(i);
  });
  (void)k;
}
