// expect: spindle: wrong number of indices
// A buffer over [I, J] indexed with a single iterator.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};

int main() {
  auto k = spindle::kernel("arity", [](spindle::in<float, I, J> a, spindle::out<float, I> y, spindle::iter<I> i,
                                       spindle::iter<J> j) { y(i) += a(i); });
  (void)k;
}
