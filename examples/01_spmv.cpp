// 01_spmv: y = A x on the Cora citation graph (2708 papers, 10556 citation links).
// Axes are types: I indexes the rows; J is the compressed column axis under I (CSR).
// Usage: 01_spmv [path/to/matrix.mtx.gz]
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA;
  const auto A = sp::read_matrix_market<float>(path);
  const auto x = sp::Tensor<float>::random({A.cols()}, /*seed=*/1);
  auto y = sp::Tensor<float>::zeros({A.rows()});

  // The lambda's parameters declare the kernel: buffers (call arguments, in order) and the
  // iterators of the sparse iteration. The body records y(i) += a(i, j) * x(j).
  auto spmv = sp::kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                    sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  spmv(A, x, y);  // compiles on the first call, then runs

  // Check against a plain CSR loop.
  double max_err = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r) {
    double s = 0;
    for (auto q = A.indptr()[r]; q < A.indptr()[r + 1]; ++q) s += A.values()[q] * x(A.indices()[q]);
    max_err = std::max(max_err, std::abs(s - y(r)));
  }
  std::printf("A: %lld x %lld, nnz %lld\n", (long long)A.rows(), (long long)A.cols(), (long long)A.nnz());
  std::printf("y[0..4] = %.5f %.5f %.5f %.5f %.5f\n", y(0), y(1), y(2), y(3), y(4));
  std::printf("max |y - loop| = %.3g -> %s\n", max_err, max_err < 1e-4 ? "OK" : "MISMATCH");
  return max_err < 1e-4 ? 0 : 1;
}
