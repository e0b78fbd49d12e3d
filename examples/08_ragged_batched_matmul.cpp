// 08_ragged_batched_matmul: a batch of graphs with different node counts, each multiplied
// by its own weight matrix: C[b] = A[b] W[b]. R is a dense_variable axis under the batch
// axis B: block b has its own number of rows (Ragged stores them back to back).
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sp = spindle;

struct B : sp::dense_fixed {};
struct R : sp::dense_variable<B> {};  // rows of block b: 0 .. rows(b)-1
struct K : sp::dense_fixed {};
struct N : sp::dense_fixed {};

int main() {
  const std::vector<std::int64_t> rows{5, 0, 12, 3};  // block 1 is empty
  const std::int64_t in_f = 6, out_f = 4;
  const auto A = sp::Ragged<float>::random(rows, {in_f}, 8, -1, 1);
  const auto W = sp::Tensor<float>::random({static_cast<std::int64_t>(rows.size()), in_f, out_f}, 9, -1, 1);
  auto C = sp::Ragged<float>::zeros(rows, {out_f});

  auto bmm = sp::kernel("ragged_matmul", [](sp::in<float, B, R, K> a, sp::in<float, B, K, N> w,
                                            sp::out<float, B, R, N> c, sp::iter<B> b, sp::iter<R> r,
                                            sp::iter<K> k, sp::iter<N> n) { c(b, r, n) += a(b, r, k) * w(b, k, n); });
  bmm(A, W, C);

  double max_err = 0;
  for (std::int64_t b = 0; b < A.batch(); ++b)
    for (std::int64_t r = 0; r < A.rows(b); ++r)
      for (std::int64_t n = 0; n < out_f; ++n) {
        double s = 0;
        for (std::int64_t k = 0; k < in_f; ++k) s += static_cast<double>(A(b, r, k)) * W(b, k, n);
        max_err = std::max(max_err, std::abs(s - C(b, r, n)));
      }
  std::printf("batch of %lld blocks, rows per block: %lld %lld %lld %lld (max %lld)\n", (long long)A.batch(),
              (long long)A.rows(0), (long long)A.rows(1), (long long)A.rows(2), (long long)A.rows(3),
              (long long)A.max_rows());
  std::printf("C[2][0, 0..3] = %.4f %.4f %.4f %.4f\n", C(2, 0, 0), C(2, 0, 1), C(2, 0, 2), C(2, 0, 3));
  std::printf("max |C - loop| = %.3g -> %s\n", max_err, max_err < 1e-5 ? "OK" : "MISMATCH");
  return max_err < 1e-5 ? 0 : 1;
}
