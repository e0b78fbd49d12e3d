// An outside project using an installed Spindle: SpMM on a Matrix Market graph, checked
// against a plain loop.
#include <spindle/spindle.hpp>

#include <cmath>
#include <cstdio>

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};

int main(int argc, char** argv) {
  auto A = argc > 1 ? sp::read_matrix_market<float>(argv[1]) : sp::Csr<float>::random(500, 400, 6.0, 7);
  auto X = sp::Tensor<float>::random({A.cols(), 32}, 1);
  auto Y = sp::Tensor<float>::zeros({A.rows(), 32});
  auto spmm = sp::kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                    sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  spmm(A, X, Y);
  double worst = 0;
  for (std::int64_t r = 0; r < A.rows(); ++r)
    for (std::int64_t f = 0; f < 32; ++f) {
      double s = 0;
      for (auto p = A.indptr()[r]; p < A.indptr()[r + 1]; ++p) s += A.values()[p] * X(A.indices()[p], f);
      worst = std::fmax(worst, std::fabs(s - Y(r, f)));
    }
  std::printf("consumer: spmm on %lldx%lld (nnz %lld) via %s engine, max error %.3g\n",
              static_cast<long long>(A.rows()), static_cast<long long>(A.cols()), static_cast<long long>(A.nnz()),
              sp::runtime::Runtime::default_instance().engine().name().c_str(), worst);
  return worst < 1e-3 ? 0 : 1;
}
