// expect: spindle::fuse<A, B, ...>: each axis must be the child of the one before it
// K is a dense root axis, not a child of J: rows-and-nonzeros fusion needs a parent chain.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};
struct K : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("not_a_chain", [](spindle::in<float, I, J> a, spindle::in<float, spindle::dense<J>, K> x,
                                             spindle::out<float, I, J> y, spindle::iter<I> i,
                                             spindle::iter<spindle::fuse<J, K>> jk) {
    auto [j, kk] = jk;
    y(i, j) += a(i, j) * x(j, kk);
  });
  (void)k;
}
