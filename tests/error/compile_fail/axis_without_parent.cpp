// expect: spindle: every axis with a parent must directly follow its parent
// A buffer over [J] alone: J's parent I must come first.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};

int main() {
  auto k = spindle::kernel("orphan_buffer", [](spindle::in<float, J> a, spindle::out<float, I> y, spindle::iter<I> i,
                                               spindle::iter<J> j) { y(i) += a(j); });
  (void)k;
}
