// hoist_loop_invariants: searches and guards leave the loops they do not depend on.
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

TEST_CASE("hoist_loop_invariants: the binary search leaves the feature loop", "[lower][hoist]") {
  auto f = sp::define_kernel("dj", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                      sp::iter<I> i, sp::iter<sp::dense<J>> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto s3 = stage3(f);
  auto h = sp::lower::hoist_loop_invariants(s3, ctx(f));
  CHECK(body(h) == R"(  block dj:
    for i in [0, I_len):  # axis I
      for k in [0, K_len):  # axis K
        c[i, k] = 0.0f
      for j_dense in [0, J_len) reduction:  # axis J_dense
        let J_pos: i64 = find(J_indices, J_indptr[i], J_indptr[i + 1], j_dense)
        for k in [0, K_len):  # axis K
          c[i, k] += select(J_pos >= 0, a[J_indptr[i] + J_pos], 0.0f) * b[j_dense, k]
)");
}

TEST_CASE("hoist_loop_invariants: invariant guards are unswitched, variant ones stay", "[lower][hoist]") {
  auto f = sp::define_kernel("scatter", [](sp::in<float, I, sp::dense<J>, K> d, sp::out<float, I, J, K> a, sp::iter<I> i,
                                           sp::iter<sp::dense<J>> j, sp::iter<K> k) { a(i, j, k) = d(i, j, k); });
  auto h = sp::lower::hoist_loop_invariants(stage3(f), ctx(f));
  CHECK(body(h) == R"(  block scatter:
    for i in [0, I_len):  # axis I
      for j_dense in [0, J_len):  # axis J_dense
        let J_pos: i64 = find(J_indices, J_indptr[i], J_indptr[i + 1], j_dense)
        if J_pos >= 0:
          for k in [0, K_len):  # axis K
            b[J_indptr[i] + J_pos, k] = a[i, j_dense, k]
)");
}
