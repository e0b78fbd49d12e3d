// 03_spmm_dense_iteration: iterate every column of A (iter<dense<J>>) instead of its
// nonzeros. a(i, j) is then found by a binary search in row i (the rows must be sorted)
// and reads 0 where row i has no entry j. Same result as 02, a different loop nest.
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};

int main() {
  const auto A = sp::Csr<float>::random(500, 300, /*avg nnz per row=*/6, /*seed=*/3);  // sorted rows
  const auto B = sp::Tensor<float>::random({A.cols(), 8}, 4);
  auto C = sp::Tensor<float>::zeros({A.rows(), 8});

  auto spmm_dense_j = sp::kernel("spmm_dense_j",
                                 [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                    sp::iter<I> i, sp::iter<sp::dense<J>> j, sp::iter<K> k) {
                                   c(i, k) += a(i, j) * b(j, k);  // j is a column, not a position
                                 });
  spmm_dense_j(A, B, C);

  const auto D = A.to_dense();  // reference: dense A times B
  double max_err = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r)
    for (std::int64_t f = 0; f < 8; ++f) {
      double s = 0;
      for (std::int64_t c = 0; c < A.cols(); ++c) s += static_cast<double>(D(r, c)) * B(c, f);
      max_err = std::max(max_err, std::abs(s - C(r, f)));
    }
  std::printf("A: %lld x %lld, nnz %lld (sorted rows: %s)\n", (long long)A.rows(), (long long)A.cols(),
              (long long)A.nnz(), A.sorted() ? "yes" : "no");
  std::printf("C[1, 0..3] = %.4f %.4f %.4f %.4f\n", C(1, 0), C(1, 1), C(1, 2), C(1, 3));
  std::printf("max |C - dense loop| = %.3g -> %s\n", max_err, max_err < 1e-4 ? "OK" : "MISMATCH");
  return max_err < 1e-4 ? 0 : 1;
}
