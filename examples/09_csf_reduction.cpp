// 09_csf_reduction: a 3-level compressed sparse fiber tensor A(i, j, l) (I dense, J
// compressed under I, L compressed under J) contracted with a vector:
// y(i) = sum_{j, l} A(i, j, l) x(l).
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct L : sp::sparse_variable<J> {};

int main() {
  const auto A = sp::Csf<float>::random({40, 30, 20}, /*density=*/0.02, /*seed=*/10, -1, 1);
  const auto x = sp::Tensor<float>::random({20}, 11, -1, 1);
  auto y = sp::Tensor<float>::zeros({40});

  auto reduce = sp::kernel("csf_reduce", [](sp::in<float, I, J, L> a, sp::in<float, sp::dense<L>> x,
                                            sp::out<float, I> y, sp::iter<I> i, sp::iter<J> j,
                                            sp::iter<L> l) { y(i) += a(i, j, l) * x(l); });
  reduce(A, x, y);

  // Reference: walk the fibers level by level.
  double max_err = 0;
  for (std::int64_t i = 0; i < A.dim(0); ++i) {
    double s = 0;
    for (auto p = A.indptr(1)[i]; p < A.indptr(1)[i + 1]; ++p)
      for (auto e = A.indptr(2)[p]; e < A.indptr(2)[p + 1]; ++e) s += A.values()[e] * x(A.indices(2)[e]);
    max_err = std::max(max_err, std::abs(s - y(i)));
  }
  std::printf("A: %lld x %lld x %lld, nnz %lld, %lld (i, j) fibers\n", (long long)A.dim(0), (long long)A.dim(1),
              (long long)A.dim(2), (long long)A.nnz(), (long long)A.positions(1));
  std::printf("y[0..4] = %.4f %.4f %.4f %.4f %.4f\n", y(0), y(1), y(2), y(3), y(4));
  std::printf("max |y - loop| = %.3g -> %s\n", max_err, max_err < 1e-5 ? "OK" : "MISMATCH");
  return max_err < 1e-5 ? 0 : 1;
}
