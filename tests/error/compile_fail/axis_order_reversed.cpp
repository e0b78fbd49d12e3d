// expect: spindle: every axis with a parent must directly follow its parent
// A buffer over [J, I]: the child is listed before its parent.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};

int main() {
  auto k = spindle::kernel("reversed", [](spindle::in<float, J, I> a, spindle::out<float, I> y, spindle::iter<I> i,
                                          spindle::iter<J> j) { y(i) += a(j, i); });
  (void)k;
}
