// The Intel MKL peer of spindle-bench (built when SPINDLE_BENCH_HAVE_MKL: scripts/install-peers.sh
// puts MKL from PyPI in .peers/venv, or MKLROOT names an installation).
//
// Inspector-executor sparse BLAS, as MKL recommends for repeated calls. Setup (untimed), for
// each case and thread count: a fresh CSR handle over the peer's copy of A's arrays (0-based),
// the call it will run hinted (mkl_sparse_set_mm_hint / set_mv_hint with a large expected call
// count, row-major dense operands), then mkl_sparse_optimize, whose plan depends on the thread
// count. Timed:
//   spmm   mkl_sparse_?_mm(NON_TRANSPOSE, 1, A, GENERAL, ROW_MAJOR, X, K, K, 0, Y, K)
//   spmv   mkl_sparse_?_mv(NON_TRANSPOSE, 1, A, GENERAL, x, 0, y)
//   spgemm mkl_sparse_spmm(NON_TRANSPOSE, A, B, &C)      (C's previous handle destroyed first)
//   spadd  mkl_sparse_?_add(NON_TRANSPOSE, A, 1, B, &C)  (likewise)
// For spgemm/spadd A is a fresh handle without hints and B a handle over the peer's copy of
// B's arrays. mkl_sparse_spmm leaves most rows of its result unsorted (mkl_sparse_?_add returned
// them sorted when tried): the untimed check sorts them (mkl_sparse_order) before
// mkl_sparse_?_export_csr.
// MKL has no SDDMM: that op runs without it. The thread count is mkl_set_num_threads; MKL uses
// its GNU OpenMP threading layer (libgomp, as Eigen here), because the Intel one needs
// libiomp5 on the loader's path. Without MKL the peer reports that it is unavailable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#ifdef SPINDLE_BENCH_HAVE_MKL
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <mkl_service.h>
#include <mkl_spblas.h>
#endif

#include <spindle/format/csr.hpp>

#include "peers_eigen.hpp"  // CsrResult

namespace bench {

#ifdef SPINDLE_BENCH_HAVE_MKL

inline void mkl_check(sparse_status_t s, const char* what) {
  if (s != SPARSE_STATUS_SUCCESS)
    throw std::runtime_error(std::string("MKL: ") + what + " failed (sparse_status_t " + std::to_string(s) + ")");
}

inline bool mkl_available() { return true; }

inline void mkl_init() {
  static const bool done = [] {
    mkl_set_threading_layer(MKL_THREADING_GNU);
    return true;
  }();
  (void)done;
}

inline std::string mkl_version() {
  mkl_init();
  char buf[256] = {};
  mkl_get_version_string(buf, sizeof buf);
  std::string v(buf);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\n')) v.pop_back();
  return v;
}

inline void mkl_set_threads(int t) {
  mkl_init();
  mkl_set_num_threads(t);
  if (mkl_get_max_threads() != t)
    throw std::runtime_error("MKL: mkl_set_num_threads(" + std::to_string(t) + ") left " +
                             std::to_string(mkl_get_max_threads()) + " threads");
}

// The s/d entry points for T = float / double.
template <class T>
struct MklT {
  static constexpr bool f32 = std::is_same_v<T, float>;
  static sparse_status_t create(sparse_matrix_t* a, MKL_INT m, MKL_INT n, MKL_INT* ptr, MKL_INT* idx, T* x) {
    if constexpr (f32) return mkl_sparse_s_create_csr(a, SPARSE_INDEX_BASE_ZERO, m, n, ptr, ptr + 1, idx, x);
    else return mkl_sparse_d_create_csr(a, SPARSE_INDEX_BASE_ZERO, m, n, ptr, ptr + 1, idx, x);
  }
  static sparse_status_t create_coo(sparse_matrix_t* a, MKL_INT m, MKL_INT n, MKL_INT nnz, MKL_INT* row, MKL_INT* col,
                                    T* x) {
    if constexpr (f32) return mkl_sparse_s_create_coo(a, SPARSE_INDEX_BASE_ZERO, m, n, nnz, row, col, x);
    else return mkl_sparse_d_create_coo(a, SPARSE_INDEX_BASE_ZERO, m, n, nnz, row, col, x);
  }
  static sparse_status_t mm(sparse_matrix_t a, matrix_descr d, const T* x, MKL_INT k, T* y) {
    const auto op = SPARSE_OPERATION_NON_TRANSPOSE;
    const auto layout = SPARSE_LAYOUT_ROW_MAJOR;
    if constexpr (f32) return mkl_sparse_s_mm(op, 1.0f, a, d, layout, x, k, k, 0.0f, y, k);
    else return mkl_sparse_d_mm(op, 1.0, a, d, layout, x, k, k, 0.0, y, k);
  }
  static sparse_status_t add(sparse_matrix_t a, T alpha, sparse_matrix_t b, sparse_matrix_t* c) {
    if constexpr (f32) return mkl_sparse_s_add(SPARSE_OPERATION_NON_TRANSPOSE, a, alpha, b, c);
    else return mkl_sparse_d_add(SPARSE_OPERATION_NON_TRANSPOSE, a, alpha, b, c);
  }
  static sparse_status_t export_csr(sparse_matrix_t a, sparse_index_base_t* base, MKL_INT* m, MKL_INT* n,
                                    MKL_INT** start, MKL_INT** end, MKL_INT** idx, T** x) {
    if constexpr (f32) return mkl_sparse_s_export_csr(a, base, m, n, start, end, idx, x);
    else return mkl_sparse_d_export_csr(a, base, m, n, start, end, idx, x);
  }
  static sparse_status_t mv(sparse_matrix_t a, matrix_descr d, const T* x, T* y) {
    if constexpr (f32) return mkl_sparse_s_mv(SPARSE_OPERATION_NON_TRANSPOSE, 1.0f, a, d, x, 0.0f, y);
    else return mkl_sparse_d_mv(SPARSE_OPERATION_NON_TRANSPOSE, 1.0, a, d, x, 0.0, y);
  }
};

template <class T>
class MklPeer {
  using M = MklT<T>;

 public:
  // MKL keeps pointers to the arrays (it reads them in every call): the peer owns copies in
  // MKL_INT, so the Csr's index type does not matter.
  explicit MklPeer(const spindle::Csr<T>& a)
      : ptr_(a.indptr().begin(), a.indptr().end()),
        idx_(a.indices().begin(), a.indices().end()),
        val_(a.values().begin(), a.values().end()) {
    mkl_init();
    if (a.rows() > std::numeric_limits<MKL_INT>::max() || a.nnz() > std::numeric_limits<MKL_INT>::max())
      throw std::runtime_error("MKL: the matrix is too large for 32-bit MKL_INT");
    descr_.type = SPARSE_MATRIX_TYPE_GENERAL;
    descr_.mode = SPARSE_FILL_MODE_FULL;
    descr_.diag = SPARSE_DIAG_NON_UNIT;
    // A matrix with no rows still needs one valid indptr entry for MKL's pointers.
    if (ptr_.empty()) ptr_.push_back(0);
    rows_ = static_cast<MKL_INT>(a.rows());
    cols_ = static_cast<MKL_INT>(a.cols());
  }
  MklPeer(const MklPeer&) = delete;
  MklPeer& operator=(const MklPeer&) = delete;
  ~MklPeer() {
    if (c_) mkl_sparse_destroy(c_);
    if (b_) mkl_sparse_destroy(b_);
    if (a_) mkl_sparse_destroy(a_);
    if (coo_) mkl_sparse_destroy(coo_);
  }

  // A fresh handle, hinted for SpMM with K columns and optimized for the current thread count
  // (untimed; a handle hinted and optimized again keeps the older plans: measured 2.4x slower
  // SpMV on ppi), then y = A x on row-major x, y.
  void prepare_spmm(std::int64_t k) {
    recreate();
    mkl_check(mkl_sparse_set_mm_hint(a_, SPARSE_OPERATION_NON_TRANSPOSE, descr_, SPARSE_LAYOUT_ROW_MAJOR,
                                     static_cast<MKL_INT>(k), kExpectedCalls),
              "set_mm_hint");
    mkl_check(mkl_sparse_optimize(a_), "optimize");
  }
  void spmm(const T* x, std::int64_t k, T* y) { mkl_check(M::mm(a_, descr_, x, static_cast<MKL_INT>(k), y), "mm"); }

  void prepare_spmv() {
    recreate();
    mkl_check(mkl_sparse_set_mv_hint(a_, SPARSE_OPERATION_NON_TRANSPOSE, descr_, kExpectedCalls), "set_mv_hint");
    mkl_check(mkl_sparse_optimize(a_), "optimize");
  }
  void spmv(const T* x, T* y) { mkl_check(M::mv(a_, descr_, x, y), "mv"); }

  // spgemm / spadd: B's handle over copies of its arrays, then a fresh A handle (no hints).
  void set_b(const spindle::Csr<T>& b) {
    if (c_) mkl_sparse_destroy(c_);
    if (b_) mkl_sparse_destroy(b_);
    c_ = b_ = nullptr;
    if (b.rows() > std::numeric_limits<MKL_INT>::max() || b.nnz() > std::numeric_limits<MKL_INT>::max())
      throw std::runtime_error("MKL: B is too large for 32-bit MKL_INT");
    b_ptr_.assign(b.indptr().begin(), b.indptr().end());
    b_idx_.assign(b.indices().begin(), b.indices().end());
    b_val_.assign(b.values().begin(), b.values().end());
    if (b_ptr_.empty()) b_ptr_.push_back(0);
    mkl_check(M::create(&b_, static_cast<MKL_INT>(b.rows()), static_cast<MKL_INT>(b.cols()), b_ptr_.data(),
                        b_idx_.data(), b_val_.data()),
              "create_csr B");
  }
  void prepare_sparse() { recreate(); }
  void spgemm() {
    if (c_) mkl_sparse_destroy(c_);
    c_ = nullptr;
    mkl_check(mkl_sparse_spmm(SPARSE_OPERATION_NON_TRANSPOSE, a_, b_, &c_), "spmm");
  }
  // The same product with its rows sorted in the call (what Spindle, Eigen and GraphBLAS return).
  void spgemm_sorted() {
    spgemm();
    mkl_check(mkl_sparse_order(c_), "order");
  }
  void spadd() {
    if (c_) mkl_sparse_destroy(c_);
    c_ = nullptr;
    mkl_check(M::add(a_, T(1), b_, &c_), "add");
  }
  void transpose() {
    if (c_) mkl_sparse_destroy(c_);
    c_ = nullptr;
    mkl_check(mkl_sparse_convert_csr(a_, SPARSE_OPERATION_TRANSPOSE, &c_), "convert_csr transpose");
  }
  // coo2csr: a COO handle over copies of the triplets (untimed), then C = its conversion to
  // CSR with the rows sorted by mkl_sparse_order in the timed call (like for like with the
  // systems whose rows come sorted).
  void set_coo(const std::vector<std::int32_t>& row, const std::vector<std::int32_t>& col, const std::vector<T>& val) {
    if (coo_) mkl_sparse_destroy(coo_);
    coo_ = nullptr;
    if (val.size() > static_cast<std::size_t>(std::numeric_limits<MKL_INT>::max()))
      throw std::runtime_error("MKL: too many entries for 32-bit MKL_INT");
    coo_row_.assign(row.begin(), row.end());
    coo_col_.assign(col.begin(), col.end());
    coo_val_.assign(val.begin(), val.end());
    mkl_check(M::create_coo(&coo_, rows_, cols_, static_cast<MKL_INT>(coo_val_.size()), coo_row_.data(), coo_col_.data(),
                            coo_val_.data()),
              "create_coo");
  }
  void coo2csr() {
    if (c_) mkl_sparse_destroy(c_);
    c_ = nullptr;
    mkl_check(mkl_sparse_convert_csr(coo_, SPARSE_OPERATION_NON_TRANSPOSE, &c_), "convert_csr");
    mkl_check(mkl_sparse_order(c_), "order");
  }
  // The last spgemm/spadd result, rows sorted by mkl_sparse_order (untimed); *unsorted: how
  // many rows MKL had left unsorted.
  CsrResult<T> sparse_result(std::int64_t* unsorted = nullptr) {
    sparse_index_base_t base{};
    MKL_INT m = 0, n = 0, *start = nullptr, *end = nullptr, *idx = nullptr;
    T* x = nullptr;
    mkl_check(M::export_csr(c_, &base, &m, &n, &start, &end, &idx, &x), "export_csr");
    const MKL_INT off = base == SPARSE_INDEX_BASE_ONE ? 1 : 0;
    if (unsorted) {
      *unsorted = 0;
      for (MKL_INT i = 0; i < m; ++i) *unsorted += !std::is_sorted(idx + (start[i] - off), idx + (end[i] - off));
    }
    mkl_check(mkl_sparse_order(c_), "order");
    mkl_check(M::export_csr(c_, &base, &m, &n, &start, &end, &idx, &x), "export_csr");
    CsrResult<T> r;
    r.rows = m, r.cols = n;
    r.ptr.assign(static_cast<std::size_t>(m) + 1, 0);
    for (MKL_INT i = 0; i < m; ++i) {
      for (MKL_INT p = start[i] - off; p < end[i] - off; ++p) r.idx.push_back(idx[p] - off), r.val.push_back(x[p]);
      r.ptr[static_cast<std::size_t>(i) + 1] = r.nnz();
    }
    return r;
  }

 private:
  void recreate() {
    if (a_) mkl_sparse_destroy(a_);
    a_ = nullptr;
    mkl_check(M::create(&a_, rows_, cols_, ptr_.data(), idx_.data(), val_.data()), "create_csr");
  }

  static constexpr MKL_INT kExpectedCalls = 100000;
  MKL_INT rows_ = 0, cols_ = 0;
  std::vector<MKL_INT> ptr_, idx_;
  std::vector<T> val_;
  std::vector<MKL_INT> b_ptr_, b_idx_;
  std::vector<T> b_val_;
  std::vector<MKL_INT> coo_row_, coo_col_;
  std::vector<T> coo_val_;
  sparse_matrix_t a_ = nullptr, b_ = nullptr, c_ = nullptr, coo_ = nullptr;
  matrix_descr descr_{};
};

#else  // no MKL in this build

inline bool mkl_available() { return false; }
inline std::string mkl_version() { return ""; }
inline void mkl_set_threads(int) {}

template <class T>
class MklPeer {
 public:
  explicit MklPeer(const spindle::Csr<T>&) {}
  void prepare_spmm(std::int64_t) {}
  void spmm(const T*, std::int64_t, T*) {}
  void prepare_spmv() {}
  void spmv(const T*, T*) {}
  void set_b(const spindle::Csr<T>&) {}
  void prepare_sparse() {}
  void spgemm() {}
  void spgemm_sorted() {}
  void spadd() {}
  void transpose() {}
  void set_coo(const std::vector<std::int32_t>&, const std::vector<std::int32_t>&, const std::vector<T>&) {}
  void coo2csr() {}
  CsrResult<T> sparse_result(std::int64_t* = nullptr) { return {}; }
};

#endif

}  // namespace bench
