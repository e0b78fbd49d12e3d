// lower_sparse_iter: stage I -> II. Before (a kernel lambda) / Expected (stage-II body).
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

TEST_CASE("lower_sparse_iter: CSR SpMM gets loops, aux buffers and a gather", "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto s2 = stage2(f);
  CHECK(s2.stage == sp::ir::Stage::position);
  CHECK(body(s2) == R"(  block spmm:
    for i in [0, I_len):  # axis I
      for k in [0, K_len):  # axis K
        c[i, k] = 0.0f
      for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
        for k in [0, K_len):  # axis K
          c[i, k] += a[i, j] * b[i64(J_indices[i, j]), k]
)");
  // Step 1: the indptr and indices of J are materialised as buffers over I and [I, J].
  REQUIRE(s2.buffers.size() == 5);
  CHECK(s2.buffers[3].buffer->name == "J_indptr");
  CHECK(s2.buffers[3].buffer->extra_storage == 1);
  CHECK(s2.buffers[3].origin.kind == sp::ir::ParamOrigin::indptr);
  CHECK(s2.buffers[4].buffer->name == "J_indices");
  CHECK(s2.buffers[4].buffer->axes.size() == 2);
}

TEST_CASE("lower_sparse_iter: dense_variable (ragged) axis", "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("rag", [](sp::in<float, Bt, R, K> a, sp::out<float, Bt, R> c, sp::iter<Bt> b, sp::iter<R> r,
                                       sp::iter<K> k) { c(b, r) += a(b, r, k); });
  CHECK(body(stage2(f)) == R"(  block rag:
    for bt in [0, Bt_len):  # axis Bt
      for r in [0, R_indptr[bt + 1] - R_indptr[bt]):  # axis R
        b[bt, r] = 0.0f
        for k in [0, K_len) reduction:  # axis K
          b[bt, r] += a[bt, r, k]
)");
}

TEST_CASE("lower_sparse_iter: sparse_fixed (ELL) axis loops over nnz_per_row", "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("ell", [](sp::in<float, I, E> a, sp::in<float, sp::dense<E>> x, sp::out<float, I> y,
                                       sp::iter<I> i, sp::iter<E> e) { y(i) += a(i, e) * x(e); });
  CHECK(body(stage2(f)) == R"(  block ell:
    for i in [0, I_len):  # axis I
      c[i] = 0.0f
      for e in [0, 4) reduction:  # axis E
        c[i] += a[i, e] * b[i64(E_indices[i, e])]
)");
}

TEST_CASE("lower_sparse_iter: a dense iterator over a sparse axis becomes a binary search",
          "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("dj", [](sp::in<float, I, J> a, sp::out<float, I, sp::dense<J>> d, sp::iter<I> i,
                                      sp::iter<sp::dense<J>> j) { d(i, j) = a(i, j); });
  // An absent coordinate reads the default value (0), never another element.
  CHECK(body(stage2(f)) == R"(  block dj:
    for i in [0, I_len):  # axis I
      for j_dense in [0, J_len):  # axis J_dense
        let J_pos: i64 = find(J_indices[i], j_dense)
        b[i, j_dense] = select(J_pos >= 0, a[i, J_pos], 0.0f)
)");
}

TEST_CASE("lower_sparse_iter: writes that could miss the pattern never reach lowering", "[lower][lower_sparse_iter]") {
  // They used to be dropped silently (issue 8 §1.4); the front end rejects them now.
  CHECK_THROWS_WITH(sp::define_kernel("scatter", [](sp::in<float, I, sp::dense<J>> d, sp::out<float, I, J> a,
                                                    sp::iter<I> i, sp::iter<sp::dense<J>> j) { a(i, j) = d(i, j); }),
                    Catch::Contains("sparsity pattern"));
}

TEST_CASE("lower_sparse_iter: affine indices into dense axes are bounds-guarded", "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("affine", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i) { y(i) = x(i + 1) * 2.0f; });
  CHECK(body(stage2(f)) == R"(  block affine:
    for i in [0, I_len):  # axis I
      b[i] = select(0 <= i + 1 && i + 1 < I_len, a[i + 1], 0.0f) * 2.0f
)");
}

TEST_CASE("lower_sparse_iter: init of a reduction-first iteration gets its own nest", "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("rfirst", [](sp::in<float, I, J> a, sp::in<float, I, K> x, sp::in<float, sp::dense<J>, K> y,
                                          sp::out<float, I, J> c, sp::iter<K> k, sp::iter<I> i,
                                          sp::iter<J> j) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  CHECK(body(stage2(f)) == R"(  block rfirst:
    for i in [0, I_len):  # axis I
      for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
        d[i, j] = 0.0f
    for k in [0, K_len) reduction:  # axis K
      for i in [0, I_len):  # axis I
        for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
          d[i, j] += a[i, j] * b[i, k] * c[i64(J_indices[i, j]), k]
)");
}

TEST_CASE("lower_sparse_iter: CSF child of a sparse axis indexes indptr by the parent's position",
          "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("csf", [](sp::in<float, I, J, L> a, sp::out<float, I, J> y, sp::iter<I> i, sp::iter<J> j,
                                       sp::iter<L> l) { y(i, j) += a(i, j, l); });
  CHECK(body(stage2(f)) == R"(  block csf:
    for i in [0, I_len):  # axis I
      for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
        b[i, j] = 0.0f
        for l in [0, L_indptr[i, j + 1] - L_indptr[i, j]) reduction:  # axis L
          b[i, j] += a[i, j, l]
)");
}

TEST_CASE("lower_sparse_iter: nested iteration sees the outer iterator, inout has no init",
          "[lower][lower_sparse_iter]") {
  auto f = sp::define_kernel("nested", [](sp::in<float, I, J> a, sp::inout<float, I> y, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { y(i) += a(i, j); });
  });
  CHECK(body(stage2(f)) == R"(  block nested:
    for i in [0, I_len):  # axis I
      block nested1:
        for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
          b[i] += a[i, j]
)");
}

TEST_CASE("lower_sparse_iter: errors name the kernel, iteration, buffer and axis", "[lower][lower_sparse_iter][error]") {
  auto orphan = sp::define_kernel("orphan", [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { y(i) += a(i, j); });
  });
  CHECK_NOTHROW(stage2(orphan));
  // Found when the kernel is defined now (before: at lowering).
  CHECK_THROWS_WITH(sp::define_kernel("no_parent", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>> y,
                                                      sp::iter<J> j) { y(j) = a(0, j); }),
                    Catch::Contains("kernel 'no_parent'") && Catch::Contains("iterates axis J without its parent I"));
  auto unrelated = sp::define_kernel("unrelated", [](sp::in<float, I, K> x, sp::out<float, I> y, sp::iter<I> i,
                                                     sp::iter<K> k) {
    sp::Value<std::int64_t> as_value = k;  // the type system no longer sees the axis
    y(i) += x(as_value, k);
  });
  CHECK_THROWS_AS(stage2(unrelated), sp::UserError);
  CHECK_THROWS_WITH(stage2(unrelated), Catch::Contains("buffer 'a' axis I") && Catch::Contains("iterator 'k' of axis K"));
}

TEST_CASE("lower_sparse_iter: a union and an intersection become merge loops whose operands read at their positions",
          "[lower][lower_sparse_iter][coiteration]") {
  struct J2 : sp::sparse_variable<I>, sp::coordinates_of<J> {};
  using U = sp::union_of<J, J2>;
  using X = sp::intersection_of<J2, J>;
  auto f = sp::define_kernel("merge", [](sp::in<float, I, J> a, sp::in<float, I, J2> b,
                                         sp::out<float, I, sp::dense<J>> c, sp::out<float, I> y, sp::iter<I> i) {
    sp::for_each<U>([&](sp::iter<U> u) { c(i, u) = a(i, u) - b(i, u); });
    sp::for_each<X>([&](sp::iter<X> x) { y(i) += a(i, x) * b(i, x); });
  });
  CHECK(body(stage2(f)) == R"(  block merge_fill_c:
    for i_fill in [0, I_len):  # axis I
      for j_dense_fill in [0, J_len):  # axis J_dense
        c[i_fill, j_dense_fill] = 0.0f
  block merge:
    for i in [0, I_len):  # axis I
      block merge1:
        union j_or_j2 of [J_pos in [0, J_indptr[i + 1] - J_indptr[i]) key i64(J_indices[i, J_pos]) present J_has, J2_pos in [0, J2_indptr[i + 1] - J2_indptr[i]) key i64(J2_indices[i, J2_pos]) present J2_has]:  # axis J_or_J2
          c[i, j_or_j2] = select(J_has, a[i, J_pos], 0.0f) - select(J2_has, b[i, J2_pos], 0.0f)
      block merge2:
        d[i] = 0.0f
        intersection j2_and_j of [J2_pos in [0, J2_indptr[i + 1] - J2_indptr[i]) key i64(J2_indices[i, J2_pos]) present J2_has, J_pos in [0, J_indptr[i + 1] - J_indptr[i]) key i64(J_indices[i, J_pos]) present J_has] reduction:  # axis J2_and_J
          d[i] += a[i, J_pos] * b[i, J2_pos]
)");
}
