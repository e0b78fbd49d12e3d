// expect: spindle: union_of / intersection_of needs axes over one coordinate space
// K's columns are not J's coordinates (no coordinates_of<J>): there is nothing to merge.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};
struct K : spindle::sparse_variable<I> {};
using M = spindle::intersection_of<J, K>;

int main() {
  auto k = spindle::kernel("two_spaces", [](spindle::in<float, I, J> a, spindle::in<float, I, K> b,
                                            spindle::out<float, I> y, spindle::iter<I> i, spindle::iter<M> m) {
    y(i) += a(i, m) * b(i, m);
  });
  (void)k;
}
