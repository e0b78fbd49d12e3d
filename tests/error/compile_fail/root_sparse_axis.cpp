// expect: spindle: a dense_variable or sparse_variable axis needs a parent axis
// Issue 8 §1.10: a root sparse axis (a sparse vector as sparse_variable<void>) used to
// segfault at the first call. A sparse vector is spindle::sparse_root<> (sparse_fixed<void>).
#include <spindle/spindle.hpp>

struct S : spindle::sparse_variable<void> {};
struct I : spindle::dense_fixed {};

int main() {
  auto k = spindle::kernel("root_sparse", [](spindle::in<float, S> a, spindle::out<float, I> y, spindle::iter<I> i,
                                             spindle::iter<S> s) { y(i) += a(s); });
  (void)k;
}
