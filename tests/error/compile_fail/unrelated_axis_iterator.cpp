// expect: spindle: a buffer is indexed by an iterator of an unrelated axis
// The column slot of a(i, j) indexed by an iterator over K.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};
struct K : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("unrelated", [](spindle::in<float, I, J> a, spindle::out<float, I> y, spindle::iter<I> i,
                                           spindle::iter<K> k) { y(i) += a(i, k); });
  (void)k;
}
