// expect: spindle: union_of / intersection_of is an iteration, not a buffer slot
// A co-iteration (docs/language.md §3.1) names coordinates to visit; no buffer stores over it.
#include <spindle/spindle.hpp>

struct I : spindle::dense_fixed {};
struct J : spindle::sparse_variable<I> {};
struct J2 : spindle::sparse_variable<I>, spindle::coordinates_of<J> {};

int main() {
  auto k = spindle::kernel("merged_slot", [](spindle::in<float, I, J> a, spindle::in<float, I, J2> b,
                                             spindle::out<float, I, spindle::union_of<J, J2>> c, spindle::iter<I> i) {
    (void)a, (void)b, (void)c, (void)i;
  });
  (void)k;
}
