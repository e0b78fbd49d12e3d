// lower_sparse_buffer: stage II -> III flattening (seed 002 §3.4.1, seed 003 variant).
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

namespace {
std::string shape_of(const sp::ir::Function& f, const std::string& buffer) {
  for (auto& b : f.buffers)
    if (b.buffer->name == buffer) return sp::ir::IRPrinter().list(b.buffer->shape);
  return "<none>";
}
}  // namespace

TEST_CASE("lower_sparse_buffer: CSR values flatten to nnz, dense stays 2-D", "[lower][lower_sparse_buffer]") {
  auto f = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto s3 = stage3(f);
  CHECK(s3.stage == sp::ir::Stage::flat);
  CHECK(shape_of(s3, "a") == "J_nnz");
  CHECK(shape_of(s3, "b") == "J_len, K_len");
  CHECK(shape_of(s3, "c") == "I_len, K_len");
  CHECK(shape_of(s3, "J_indptr") == "I_len + 1");
  CHECK(shape_of(s3, "J_indices") == "J_nnz");
  for (auto& b : s3.buffers) CHECK(b.buffer->axes.empty());
}

TEST_CASE("lower_sparse_buffer: BSR keeps its block dimensions", "[lower][lower_sparse_buffer]") {
  auto f = sp::define_kernel("bsr", [](sp::in<float, I, J, BI, BJ> a, sp::in<float, sp::dense<J>, BJ, K> b,
                                       sp::out<float, I, BI, K> c, sp::iter<I> i, sp::iter<BI> bi, sp::iter<J> j,
                                       sp::iter<BJ> bj, sp::iter<K> k) { c(i, bi, k) += a(i, j, bi, bj) * b(j, bj, k); });
  auto s3 = stage3(f);
  CHECK(shape_of(s3, "a") == "J_nnz, BI_len, BJ_len");
  CHECK(body(s3) == R"(  block bsr:
    for i in [0, I_len):  # axis I
      for bi in [0, BI_len):  # axis BI
        for k in [0, K_len):  # axis K
          c[i, bi, k] = 0.0f
        for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
          for bj in [0, BJ_len) reduction:  # axis BJ
            for k in [0, K_len):  # axis K
              c[i, bi, k] += a[J_indptr[i] + j, bi, bj] * b[i64(J_indices[J_indptr[i] + j]), bj, k]
)");
}

TEST_CASE("lower_sparse_buffer: ELL offsets are row * nnz_per_row + position", "[lower][lower_sparse_buffer]") {
  auto f = sp::define_kernel("ell", [](sp::in<float, I, E> a, sp::in<float, sp::dense<E>> x, sp::out<float, I> y,
                                       sp::iter<I> i, sp::iter<E> e) { y(i) += a(i, e) * x(e); });
  auto s3 = stage3(f);
  CHECK(shape_of(s3, "a") == "I_len * 4");
  CHECK(body(s3) == R"(  block ell:
    for i in [0, I_len):  # axis I
      c[i] = 0.0f
      for e in [0, 4) reduction:  # axis E
        c[i] += a[i * 4 + e] * b[i64(E_indices[i * 4 + e])]
)");
}

TEST_CASE("lower_sparse_buffer: CSF offsets chain through both indptr arrays", "[lower][lower_sparse_buffer]") {
  auto f = sp::define_kernel("csf", [](sp::in<float, I, J, L> a, sp::out<float, I, J> y, sp::iter<I> i, sp::iter<J> j,
                                       sp::iter<L> l) { y(i, j) += a(i, j, l); });
  auto s3 = stage3(f);
  CHECK(shape_of(s3, "a") == "L_nnz");
  CHECK(shape_of(s3, "L_indptr") == "J_nnz + 1");
  CHECK(body(s3) == R"(  block csf:
    for i in [0, I_len):  # axis I
      for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
        b[J_indptr[i] + j] = 0.0f
        for l in [0, L_indptr[J_indptr[i] + (j + 1)] - L_indptr[J_indptr[i] + j]) reduction:  # axis L
          b[J_indptr[i] + j] += a[L_indptr[J_indptr[i] + j] + l]
)");
}

TEST_CASE("lower_sparse_buffer: ragged rows flatten, trailing features stay", "[lower][lower_sparse_buffer]") {
  auto f = sp::define_kernel("rag", [](sp::in<float, Bt, R, K> a, sp::out<float, Bt, R> c, sp::iter<Bt> b, sp::iter<R> r,
                                       sp::iter<K> k) { c(b, r) += a(b, r, k); });
  auto s3 = stage3(f);
  CHECK(shape_of(s3, "a") == "R_nnz, K_len");
  CHECK(body(s3) == R"(  block rag:
    for bt in [0, Bt_len):  # axis Bt
      for r in [0, R_indptr[bt + 1] - R_indptr[bt]):  # axis R
        b[R_indptr[bt] + r] = 0.0f
        for k in [0, K_len) reduction:  # axis K
          b[R_indptr[bt] + r] += a[R_indptr[bt] + r, k]
)");
}

TEST_CASE("lower_sparse_buffer: a search gets the absolute fiber range", "[lower][lower_sparse_buffer]") {
  auto f = sp::define_kernel("dj", [](sp::in<float, I, J> a, sp::out<float, I, sp::dense<J>> d, sp::iter<I> i,
                                      sp::iter<sp::dense<J>> j) { d(i, j) = a(i, j); });
  CHECK(body(stage3(f)) == R"(  block dj:
    for i in [0, I_len):  # axis I
      for j_dense in [0, J_len):  # axis J_dense
        let J_pos: i64 = find(J_indices, J_indptr[i], J_indptr[i + 1], j_dense)
        b[i, j_dense] = select(J_pos >= 0, a[J_indptr[i] + J_pos], 0.0f)
)");
}
