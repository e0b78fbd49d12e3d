// 02_spmm: C = A B (sparse x dense) with spindle containers, then the same kernel on
// Eigen data: spindle/eigen.hpp lets row-major Eigen matrices be passed without copies.
#include <spindle/eigen.hpp>
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};  // the feature axis

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

int main(int argc, char** argv) {
  const auto A = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  const std::int64_t F = 16;
  auto spmm = sp::kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                    sp::out<float, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                    sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });

  // 1. spindle containers
  const auto B = sp::Tensor<float>::random({A.cols(), F}, 2);
  auto C = sp::Tensor<float>::zeros({A.rows(), F});
  spmm(A, B, C);
  double err1 = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r)
    for (std::int64_t f = 0; f < F; ++f) {
      double s = 0;
      for (auto q = A.indptr()[r]; q < A.indptr()[r + 1]; ++q) s += A.values()[q] * B(A.indices()[q], f);
      err1 = std::max(err1, std::abs(s - C(r, f)));
    }
  std::printf("spindle: C[0, 0..3] = %.4f %.4f %.4f %.4f, max err vs loop %.3g\n", C(0, 0), C(0, 1), C(0, 2),
              C(0, 3), err1);

  // 2. Eigen data: a RowMajor SparseMatrix and row-major dense matrices, passed directly.
  const Eigen::SparseMatrix<float, Eigen::RowMajor, int> EA = sp::to_eigen(A);
  const RowMat EB = RowMat::Random(A.cols(), F);
  RowMat EC(A.rows(), F);
  spmm(EA, EB, EC);  // the same compiled kernel: shapes are symbolic
  const RowMat expected = EA * EB;
  const double err2 = (EC - expected).cwiseAbs().maxCoeff();
  std::printf("eigen:   C[0, 0..3] = %.4f %.4f %.4f %.4f, max err vs Eigen %.3g\n", EC(0, 0), EC(0, 1), EC(0, 2),
              EC(0, 3), err2);
  const bool ok = err1 < 1e-4 && err2 < 1e-4;
  std::printf("%s\n", ok ? "OK" : "MISMATCH");
  return ok ? 0 : 1;
}
