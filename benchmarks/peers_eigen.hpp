// The Eigen 3.4 peer of spindle-bench and the shared dense operands.
//
//   spmm   Y.noalias() = A * X    A: SparseMatrix<T, RowMajor, int>, X/Y: row-major dense
//   spmv   y.noalias() = A * x    dense column vectors
//   sddmm  Eigen has no SDDMM; the natural Eigen code is a loop over the rows of A and,
//          per nonzero (i, j), C(i, j) = A(i, j) * X.row(i).dot(Y.row(j)) (vectorised
//          .dot() of two contiguous rows). Its row loop runs with OpenMP like Eigen's own
//          sparse x dense products (schedule(dynamic), same chunking), so it uses the
//          thread count of the case. Labelled "eigen (row loop + .dot)".
//   spgemm C = A * B              SparseMatrix<T, RowMajor, int> times the same (Eigen's
//          conservative sparse product: no pruning, rows sorted); single-threaded, Eigen has
//          no parallel sparse x sparse product
//   spadd  C = A + B              sparse sum of two row-major matrices (union pattern);
//   spmul  C = A .* B             cwiseProduct of two row-major matrices (intersection pattern);
//          single-threaded
// Eigen's sparse x dense products parallelise their row loop with OpenMP when the build
// has OpenMP and Eigen::setNbThreads(t) > 1 (and the product has > 20000 nonzero-terms,
// Eigen's own threshold).
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
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

  // spgemm / spadd: B (a copy, compressed) and the sparse result C = A * B or C = A + B.
  void set_b(const spindle::Csr<T>& b) {
    b_ = spindle::to_eigen(b);
    b_.makeCompressed();
  }
  void spgemm() { c_ = a_ * b_; }
  void spadd() { c_ = a_ + b_; }
  void spmul() { c_ = a_.cwiseProduct(b_); }
  void transpose() { c_ = a_.transpose(); }  // row-major from row-major: a real transposition
  // coo2csr: C (rows x cols, row-major) from triplets in any order, duplicates summed.
  void set_coo(std::vector<Eigen::Triplet<T, int>> t) { coo_ = std::move(t); }
  void coo_to_csr() {
    c_.resize(a_.rows(), a_.cols());
    c_.setFromTriplets(coo_.begin(), coo_.end());
  }
  // The entries with |a| > t: a copy of A pruned in place (Eigen's prune keeps what the
  // predicate accepts, compacting the rows).
  void dense_to_sparse(const DenseRM<T>& d) { c_ = d.sparseView(); }  // drops the exact zeros
  void prune(T t) {
    c_ = a_;
    c_.prune([t](Eigen::Index, Eigen::Index, const T& v) { return std::abs(v) > t; });
  }
  const Sparse& sparse_result() const { return c_; }

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
  Sparse a_, b_, c_;
  std::vector<Eigen::Triplet<T, int>> coo_;
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

// A sparse result in CSR (row offsets from 0, column indices, values), copied out of a
// system's own container for the correctness guard (untimed).
template <class T>
struct CsrResult {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> ptr{0}, idx;
  std::vector<T> val;
  std::int64_t nnz() const { return static_cast<std::int64_t>(idx.size()); }
};

template <class T, class P, class I, class V>
CsrResult<T> csr_result(std::int64_t rows, std::int64_t cols, const P* ptr, const I* idx, const V* val) {
  CsrResult<T> r;
  r.rows = rows, r.cols = cols;
  r.ptr.assign(ptr, ptr + rows + 1);
  const std::int64_t base = r.ptr[0], n = r.ptr[static_cast<std::size_t>(rows)] - base;
  for (auto& p : r.ptr) p -= base;
  r.idx.assign(idx + base, idx + base + n);
  r.val.assign(val + base, val + base + n);
  return r;
}

template <class T, class I>
CsrResult<T> csr_result(const spindle::Csr<T, I>& c) {
  return csr_result<T>(c.rows(), c.cols(), c.indptr().data(), c.indices().data(), c.values().data());
}

template <class T>
CsrResult<T> csr_result(const Eigen::SparseMatrix<T, Eigen::RowMajor, int>& c) {
  Eigen::SparseMatrix<T, Eigen::RowMajor, int> m = c;
  m.makeCompressed();
  return csr_result<T>(m.rows(), m.cols(), m.outerIndexPtr(), m.innerIndexPtr(), m.valuePtr());
}

// Sorts every row by column (for peers whose rows may come unsorted: a pattern is a set).
template <class T>
void sort_rows(CsrResult<T>& r) {
  std::vector<std::pair<std::int64_t, T>> tmp;
  for (std::int64_t i = 0; i < r.rows; ++i) {
    const std::size_t b = static_cast<std::size_t>(r.ptr[i]), e = static_cast<std::size_t>(r.ptr[i + 1]);
    if (std::is_sorted(r.idx.begin() + b, r.idx.begin() + e)) continue;
    tmp.clear();
    for (std::size_t p = b; p < e; ++p) tmp.emplace_back(r.idx[p], r.val[p]);
    std::sort(tmp.begin(), tmp.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (std::size_t p = b; p < e; ++p) r.idx[p] = tmp[p - b].first, r.val[p] = tmp[p - b].second;
  }
}

// The sparse guard: +inf when `got`'s shape, row offsets or column indices differ from
// `want`'s (rows compared as stored: an unsorted row is a mismatch; what differs goes to
// stderr, prefixed with `who`), else the normwise relative error of the values.
template <class T>
double sparse_result_error(const CsrResult<T>& got, const CsrResult<T>& want, const std::string& who) {
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "[bench] %s: sparse result pattern differs from Eigen's: %s\n", who.c_str(), why.c_str());
    return INFINITY;
  };
  if (got.rows != want.rows || got.cols != want.cols)
    return fail("shape " + std::to_string(got.rows) + "x" + std::to_string(got.cols) + ", expected " +
                std::to_string(want.rows) + "x" + std::to_string(want.cols));
  if (got.ptr.size() != want.ptr.size()) return fail("row offsets of the wrong length");
  if (got.nnz() != want.nnz() || got.ptr.back() != want.ptr.back())
    return fail("nnz " + std::to_string(got.nnz()) + " (last row offset " + std::to_string(got.ptr.back()) +
                "), expected " + std::to_string(want.nnz()));
  std::int64_t bad_rows = 0, first = -1;
  std::string first_why;
  for (std::int64_t i = 0; i < want.rows; ++i) {
    const auto gb = got.ptr[i], ge = got.ptr[i + 1], wb = want.ptr[i], we = want.ptr[i + 1];
    std::string why;
    if (ge - gb != we - wb) {
      why = std::to_string(ge - gb) + " entries, expected " + std::to_string(we - wb);
    } else if (!std::equal(got.idx.begin() + gb, got.idx.begin() + ge, want.idx.begin() + wb)) {
      std::vector<std::int64_t> g(got.idx.begin() + gb, got.idx.begin() + ge);
      std::sort(g.begin(), g.end());
      why = std::equal(g.begin(), g.end(), want.idx.begin() + wb) ? "same columns, not sorted"
                                                                   : "different column indices";
    }
    if (why.empty()) continue;
    if (bad_rows++ == 0) first = i, first_why = why;
  }
  if (bad_rows)
    return fail(std::to_string(bad_rows) + " row(s) differ, first row " + std::to_string(first) + ": " + first_why);
  return relative_error(got.val.data(), want.val.data(), want.nnz());
}

// Multiply-adds of C = A B: the sum over A's entries a_ij of nnz(row j of B).
template <class T>
std::int64_t spgemm_mult_adds(const spindle::Csr<T>& a, const spindle::Csr<T>& b) {
  std::int64_t n = 0;
  const auto bp = b.indptr();
  for (auto j : a.indices()) n += bp[j + 1] - bp[j];
  return n;
}

}  // namespace bench
