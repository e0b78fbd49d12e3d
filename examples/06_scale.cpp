// 06_scale: element-wise scaling of a sparse matrix with a scalar parameter and row/column
// factors: B = alpha * D^-1/2 A D^-1/2, the normalised adjacency of a GCN layer.
// spindle::param<float> is a scalar call argument; a plain number is passed for it.
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};

int main(int argc, char** argv) {
  const auto A = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  auto d = sp::Tensor<float>::zeros({A.rows()});  // d(i) = 1 / sqrt(degree(i)), 0 if isolated
  for (std::int64_t r = 0; r < A.rows(); ++r) {
    const auto deg = A.indptr()[r + 1] - A.indptr()[r];
    d(r) = deg > 0 ? 1.0f / std::sqrt(static_cast<float>(deg)) : 0.0f;
  }
  auto B = A;  // output with A's structure

  auto scale = sp::kernel("scale", [](sp::in<float, I, J> a, sp::in<float, I> r, sp::in<float, sp::dense<J>> s,
                                      sp::param<float> alpha, sp::out<float, I, J> b, sp::iter<I> i,
                                      sp::iter<J> j) { b(i, j) = alpha * r(i) * a(i, j) * s(j); });
  const float alpha = 0.5f;
  scale(A, d, d, alpha, B);

  double max_err = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r)
    for (auto q = A.indptr()[r]; q < A.indptr()[r + 1]; ++q) {
      const double expected = alpha * d(r) * A.values()[q] * d(A.indices()[q]);
      max_err = std::max(max_err, std::abs(expected - B.values()[q]));
    }
  std::printf("alpha = %.2f; row 0 of A: %zu entries, of B:", alpha, A.row_values(0).size());
  for (float v : B.row_values(0)) std::printf(" %.4f", v);
  std::printf("\nmax |B - loop| = %.3g -> %s\n", max_err, max_err < 1e-6 ? "OK" : "MISMATCH");
  return max_err < 1e-6 ? 0 : 1;
}
