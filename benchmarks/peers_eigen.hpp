// The Eigen 3.4 peer of spindle-bench and the shared dense operands.
//
//   spmm   Y.noalias() = A * X    A: SparseMatrix<T, RowMajor, int>, X/Y: row-major dense
//   spmv   y.noalias() = A * x    dense column vectors
//   sddmm  Eigen has no SDDMM; the natural Eigen code is a loop over the rows of A and,
//          per nonzero (i, j), C(i, j) = A(i, j) * X.row(i).dot(Y.row(j)) (vectorised
//          .dot() of two contiguous rows). Its row loop runs with OpenMP like Eigen's own
//          sparse x dense products (schedule(dynamic), same chunking), so it uses the
//          thread count of the case. Labelled "eigen (row loop + .dot)".
// Eigen's sparse x dense products parallelise their row loop with OpenMP when the build
// has OpenMP and Eigen::setNbThreads(t) > 1 (and the product has > 20000 nonzero-terms,
// Eigen's own threshold).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include <spindle/eigen.hpp>
#include <spindle/format/csr.hpp>
#include <spindle/format/random.hpp>

namespace bench {

template <class T>
using DenseRM = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using DenseVec = Eigen::Matrix<T, Eigen::Dynamic, 1>;

template <class T>
DenseRM<T> random_dense(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  DenseRM<T> m(rows, cols);
  spindle::Rng rng(seed);
  for (std::int64_t k = 0; k < m.size(); ++k) m.data()[k] = rng.value<T>(-1.0, 1.0);
  return m;
}

template <class T>
DenseVec<T> random_vector(std::int64_t n, std::uint64_t seed) {
  DenseVec<T> v(n);
  spindle::Rng rng(seed);
  for (std::int64_t k = 0; k < n; ++k) v[k] = rng.value<T>(-1.0, 1.0);
  return v;
}

inline void eigen_set_threads(int t) { Eigen::setNbThreads(t); }

inline bool eigen_has_openmp() {
#ifdef EIGEN_HAS_OPENMP
  return true;
#else
  return false;
#endif
}

template <class T>
class EigenPeer {
 public:
  using Sparse = Eigen::SparseMatrix<T, Eigen::RowMajor, int>;

  explicit EigenPeer(const spindle::Csr<T>& a) : a_(spindle::to_eigen(a)) { a_.makeCompressed(); }

  const Sparse& matrix() const { return a_; }

  void spmm(const DenseRM<T>& x, DenseRM<T>& y) const { y.noalias() = a_ * x; }
  void spmv(const DenseVec<T>& x, DenseVec<T>& y) const { y.noalias() = a_ * x; }

  // out[p] for the p-th stored entry of A (row-major order).
  void sddmm(const DenseRM<T>& x, const DenseRM<T>& y, T* out, int threads) const {
    const Eigen::Index m = a_.rows();
    const int* outer = a_.outerIndexPtr();
    const int* inner = a_.innerIndexPtr();
    const T* val = a_.valuePtr();
    const Eigen::Index chunk = std::max<Eigen::Index>(1, (m + threads * 4 - 1) / (threads * 4));
    (void)chunk;
#ifdef EIGEN_HAS_OPENMP
#pragma omp parallel for schedule(dynamic, chunk) num_threads(threads) if (threads > 1)
#endif
    for (Eigen::Index i = 0; i < m; ++i) {
      const auto xi = x.row(i);
      for (int p = outer[i]; p < outer[i + 1]; ++p) out[p] = val[p] * xi.dot(y.row(inner[p]));
    }
  }

 private:
  Sparse a_;
};

// max |got - want| / max |want| (NaN and shape mismatches give +inf): the normwise
// relative error used by the correctness guard.
template <class T>
double relative_error(const T* got, const T* want, std::int64_t n) {
  double err = 0, scale = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    const double d = std::abs(static_cast<double>(got[k]) - static_cast<double>(want[k]));
    if (!(d == d)) return INFINITY;
    err = std::max(err, d);
    scale = std::max(scale, std::abs(static_cast<double>(want[k])));
  }
  if (scale == 0) return err == 0 ? 0 : INFINITY;
  return err / scale;
}

}  // namespace bench
