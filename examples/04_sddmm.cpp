// 04_sddmm: sampled dense-dense product, the attention scores of a graph layer:
// C(i, j) = A(i, j) * <X(i, :), Y(j, :)> computed only on the edges of A. The output has
// the structure of A (a copy of A here); only its values are written.
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};

int main(int argc, char** argv) {
  const auto A = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  const std::int64_t F = 8;
  const auto X = sp::Tensor<float>::random({A.rows(), F}, 5, -1, 1);
  const auto Y = sp::Tensor<float>::random({A.cols(), F}, 6, -1, 1);
  auto C = A;  // same structure, values overwritten

  auto sddmm = sp::kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x, sp::in<float, sp::dense<J>, K> y,
                                      sp::out<float, I, J> c, sp::iter<I> i, sp::iter<J> j,
                                      sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  sddmm(A, X, Y, C);

  double max_err = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r)
    for (auto q = A.indptr()[r]; q < A.indptr()[r + 1]; ++q) {
      double dot = 0;
      for (std::int64_t f = 0; f < F; ++f) dot += static_cast<double>(X(r, f)) * Y(A.indices()[q], f);
      max_err = std::max(max_err, std::abs(A.values()[q] * dot - C.values()[q]));
    }
  std::printf("edges: %lld; scores of row 0:", (long long)C.nnz());
  for (float v : C.row_values(0)) std::printf(" %.4f", v);
  std::printf("\nmax |C - loop| = %.3g -> %s\n", max_err, max_err < 1e-4 ? "OK" : "MISMATCH");
  return max_err < 1e-4 ? 0 : 1;
}
