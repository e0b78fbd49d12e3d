// The SuiteSparse:GraphBLAS peer of spindle-bench (built when SPINDLE_BENCH_HAVE_GRAPHBLAS).
//
// Setup (untimed): A is imported once as a CSR GrB_Matrix (held by row); the dense
// operands are copied into full GrB_Matrix objects held by row (GxB_Matrix_pack_FullR),
// SpMV's x into a full GrB_Vector. Timed calls, each until GrB_wait(MATERIALIZE):
//   spmm   GrB_mxm(C, -, PLUS, PLUS_TIMES, A, X) into a full C held by row, zeroed in the
//          timed call (GraphBLAS's in-place saxpy5 path; a new empty C took 5-30x longer)
//   spmv   GrB_mxv(y, -, -, PLUS_TIMES, A, x)
//   sddmm  GrB_mxm(S<A, struct, replace>, PLUS_TIMES, X, Y')   (descriptor GrB_DESC_RST1:
//          masked dot products on A's pattern) then GrB_eWiseMult(S, TIMES, S, A)
//   spgemm GrB_mxm(C, -, -, PLUS_TIMES, A, B)     B imported once like A (CSR, by row)
//   spadd  GrB_eWiseAdd(C, -, -, PLUS, A, B)      (alpha = beta = 1)
//   spmul  GrB_eWiseMult(C, -, -, TIMES, A, B)
//   prune  GrB_select(C, -, -, op, A, t) with a user-defined GrB_IndexUnaryOp |x| > t
//          (GraphBLAS has no built-in magnitude test; 7.x calls it through a pointer)
//   dense2csr  GrB_select(C, -, -, GrB_VALUENE, D, 0) with D a full GrB_Matrix (packed once)
// The thread count is the global GxB_NTHREADS. Without GraphBLAS the peer reports that it
// is unavailable and the tool runs without it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#ifdef SPINDLE_BENCH_HAVE_GRAPHBLAS
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
extern "C" {
#include <GraphBLAS.h>
}
#endif

#include <spindle/format/csr.hpp>

#include "peers_eigen.hpp"  // CsrResult

namespace bench {

#ifdef SPINDLE_BENCH_HAVE_GRAPHBLAS

inline void grb_check(GrB_Info info, const char* what) {
  if (info != GrB_SUCCESS && info != GrB_NO_VALUE)
    throw std::runtime_error(std::string("GraphBLAS: ") + what + " failed (GrB_Info " + std::to_string(info) + ")");
}

inline bool graphblas_available() { return true; }

inline std::string graphblas_version() {
  return std::to_string(GxB_IMPLEMENTATION_MAJOR) + "." + std::to_string(GxB_IMPLEMENTATION_MINOR) + "." +
         std::to_string(GxB_IMPLEMENTATION_SUB);
}

inline bool& graphblas_initialised() {
  static bool done = false;
  return done;
}

inline void graphblas_init() {
  if (graphblas_initialised()) return;
  grb_check(GrB_init(GrB_NONBLOCKING), "GrB_init");
  graphblas_initialised() = true;
  // SPINDLE_BENCH_GRB_BURBLE=1: GraphBLAS logs the method it picks for every call.
  if (const char* b = std::getenv("SPINDLE_BENCH_GRB_BURBLE"); b && *b && *b != '0')
    grb_check(GxB_Global_Option_set_INT32(GxB_BURBLE, 1), "GxB_BURBLE");
}

inline void graphblas_finalize() {
  if (graphblas_initialised()) GrB_finalize();
  graphblas_initialised() = false;
}

inline void graphblas_set_threads(int t) {
  graphblas_init();
  grb_check(GxB_Global_Option_set_INT32(static_cast<GxB_Option_Field>(GxB_NTHREADS), t), "GxB_NTHREADS");
}

template <class T>
struct GrbT;
template <>
struct GrbT<float> {
  static GrB_Type type() { return GrB_FP32; }
  static GrB_Semiring plus_times() { return GrB_PLUS_TIMES_SEMIRING_FP32; }
  static GrB_BinaryOp times() { return GrB_TIMES_FP32; }
  static GrB_BinaryOp plus() { return GrB_PLUS_FP32; }
  static GrB_Info import_csr(GrB_Matrix* a, GrB_Index m, GrB_Index n, const GrB_Index* p, const GrB_Index* i,
                             const float* x, GrB_Index nnz) {
    return GrB_Matrix_import_FP32(a, GrB_FP32, m, n, p, i, x, m + 1, nnz, nnz, GrB_CSR_FORMAT);
  }
  static GrB_Info tuples(GrB_Index* i, GrB_Index* j, float* x, GrB_Index* n, GrB_Matrix a) {
    return GrB_Matrix_extractTuples_FP32(i, j, x, n, a);
  }
  static GrB_Info build(GrB_Matrix c, const GrB_Index* i, const GrB_Index* j, const float* x, GrB_Index n) {
    return GrB_Matrix_build_FP32(c, i, j, x, n, GrB_PLUS_FP32);
  }
  static GrB_Info tuples(GrB_Index* i, float* x, GrB_Index* n, GrB_Vector v) {
    return GrB_Vector_extractTuples_FP32(i, x, n, v);
  }
  static GrB_IndexUnaryOp value_ne() { return GrB_VALUENE_FP32; }
  static GrB_Info select(GrB_Matrix c, GrB_IndexUnaryOp op, GrB_Matrix a, float t) {
    return GrB_Matrix_select_FP32(c, nullptr, nullptr, op, a, t, nullptr);
  }
};
template <>
struct GrbT<double> {
  static GrB_Type type() { return GrB_FP64; }
  static GrB_Semiring plus_times() { return GrB_PLUS_TIMES_SEMIRING_FP64; }
  static GrB_BinaryOp times() { return GrB_TIMES_FP64; }
  static GrB_BinaryOp plus() { return GrB_PLUS_FP64; }
  static GrB_Info import_csr(GrB_Matrix* a, GrB_Index m, GrB_Index n, const GrB_Index* p, const GrB_Index* i,
                             const double* x, GrB_Index nnz) {
    return GrB_Matrix_import_FP64(a, GrB_FP64, m, n, p, i, x, m + 1, nnz, nnz, GrB_CSR_FORMAT);
  }
  static GrB_Info tuples(GrB_Index* i, GrB_Index* j, double* x, GrB_Index* n, GrB_Matrix a) {
    return GrB_Matrix_extractTuples_FP64(i, j, x, n, a);
  }
  static GrB_Info build(GrB_Matrix c, const GrB_Index* i, const GrB_Index* j, const double* x, GrB_Index n) {
    return GrB_Matrix_build_FP64(c, i, j, x, n, GrB_PLUS_FP64);
  }
  static GrB_IndexUnaryOp value_ne() { return GrB_VALUENE_FP64; }
  static GrB_Info select(GrB_Matrix c, GrB_IndexUnaryOp op, GrB_Matrix a, double t) {
    return GrB_Matrix_select_FP64(c, nullptr, nullptr, op, a, t, nullptr);
  }
  static GrB_Info tuples(GrB_Index* i, double* x, GrB_Index* n, GrB_Vector v) {
    return GrB_Vector_extractTuples_FP64(i, x, n, v);
  }
};

template <class T>
class GraphBlasPeer {
  using G = GrbT<T>;

 public:
  explicit GraphBlasPeer(const spindle::Csr<T>& a) : rows_(a.rows()), cols_(a.cols()), a_csr_(&a) {
    graphblas_init();
    std::vector<GrB_Index> p(a.indptr().begin(), a.indptr().end()), i(a.indices().begin(), a.indices().end());
    grb_check(G::import_csr(&a_, rows_, cols_, p.data(), i.data(), a.values().data(), a.nnz()), "import A");
    grb_check(GxB_Matrix_Option_set(a_, GxB_FORMAT, GxB_BY_ROW), "A by row");
    grb_check(GrB_Matrix_wait(a_, GrB_MATERIALIZE), "wait A");
  }
  GraphBlasPeer(const GraphBlasPeer&) = delete;
  GraphBlasPeer& operator=(const GraphBlasPeer&) = delete;
  ~GraphBlasPeer() {
    release();
    GrB_Matrix_free(&b_);
    GrB_Matrix_free(&a_);
    GrB_IndexUnaryOp_free(&abs_gt_);
  }

  // Frees the operands and results of the previous case.
  void release() {
    GrB_Matrix_free(&x_);
    GrB_Matrix_free(&y_);
    GrB_Matrix_free(&c_);
    GrB_Vector_free(&xv_);
    GrB_Vector_free(&yv_);
  }

  // C is a full matrix held by row, zeroed and accumulated into (C += A X): GraphBLAS's fast
  // path for a sparse times a full matrix (saxpy5 on its transposed, by-column view; with a
  // new, empty C it computed a bitmap C with one thread, 5-30x slower). The zeroing is timed:
  // every system writes its whole output.
  void prepare_spmm(const T* x, std::int64_t k) {
    release();
    x_ = full_matrix(x, cols_, k);
    c_k_ = k;
    std::vector<T> zero(static_cast<std::size_t>(rows_) * static_cast<std::size_t>(k), T(0));
    c_ = full_matrix(zero.data(), rows_, k);
  }
  void spmm() {
    void* buf = nullptr;
    GrB_Index size = 0;
    grb_check(GxB_Matrix_unpack_FullR(c_, &buf, &size, nullptr, nullptr), "unpack C");
    std::memset(buf, 0, bytes(static_cast<std::int64_t>(rows_) * c_k_));
    grb_check(GxB_Matrix_pack_FullR(c_, &buf, size, false, nullptr), "pack C");
    grb_check(GrB_mxm(c_, nullptr, G::plus(), G::plus_times(), a_, x_, nullptr), "GrB_mxm");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }

  void prepare_spmv(const T* x) {
    release();
    grb_check(GrB_Vector_new(&xv_, G::type(), cols_), "new x");
    void* buf = copy_of(x, cols_);
    grb_check(GxB_Vector_pack_Full(xv_, &buf, bytes(cols_), false, nullptr), "pack x");
    grb_check(GrB_Vector_new(&yv_, G::type(), rows_), "new y");
  }
  void spmv() {
    grb_check(GrB_mxv(yv_, nullptr, nullptr, G::plus_times(), a_, xv_, nullptr), "GrB_mxv");
    grb_check(GrB_Vector_wait(yv_, GrB_MATERIALIZE), "wait y");
  }

  // x: rows x k, y: cols x k (row-major).
  void prepare_sddmm(const T* x, const T* y, std::int64_t k) {
    release();
    x_ = full_matrix(x, rows_, k);
    y_ = full_matrix(y, cols_, k);
    grb_check(GrB_Matrix_new(&c_, G::type(), rows_, cols_), "new S");
  }
  void sddmm() {
    grb_check(GrB_mxm(c_, a_, nullptr, G::plus_times(), x_, y_, GrB_DESC_RST1), "masked GrB_mxm");
    grb_check(GrB_Matrix_eWiseMult_BinaryOp(c_, nullptr, nullptr, G::times(), c_, a_, nullptr), "GrB_eWiseMult");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait S");
  }

  // spgemm / spadd: B imported once (untimed) like A; C (rows x c_cols, by row) per case.
  void set_b(const spindle::Csr<T>& b) {
    GrB_Matrix_free(&b_);
    std::vector<GrB_Index> p(b.indptr().begin(), b.indptr().end()), i(b.indices().begin(), b.indices().end());
    grb_check(G::import_csr(&b_, b.rows(), b.cols(), p.data(), i.data(), b.values().data(), b.nnz()), "import B");
    grb_check(GxB_Matrix_Option_set(b_, GxB_FORMAT, GxB_BY_ROW), "B by row");
    grb_check(GrB_Matrix_wait(b_, GrB_MATERIALIZE), "wait B");
  }
  void prepare_sparse(std::int64_t c_cols, std::int64_t c_rows) {
    release();
    grb_check(GrB_Matrix_new(&c_, G::type(), static_cast<GrB_Index>(c_rows), static_cast<GrB_Index>(c_cols)), "new C");
    grb_check(GxB_Matrix_Option_set(c_, GxB_FORMAT, GxB_BY_ROW), "C by row");
  }
  void spgemm() {
    grb_check(GrB_mxm(c_, nullptr, nullptr, G::plus_times(), a_, b_, nullptr), "GrB_mxm");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }
  void spadd() {
    grb_check(GrB_Matrix_eWiseAdd_BinaryOp(c_, nullptr, nullptr, G::plus(), a_, b_, nullptr), "GrB_eWiseAdd");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }
  void transpose() {
    grb_check(GrB_transpose(c_, nullptr, nullptr, a_, nullptr), "GrB_transpose");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }
  // coo2csr: C (prepare_sparse) built from triplets in any order, duplicates summed; C is
  // cleared first in the timed call (GrB_Matrix_build needs a matrix with no entries).
  void set_coo(std::vector<std::uint64_t> i, std::vector<std::uint64_t> j, std::vector<T> x) {
    coo_i_ = std::move(i), coo_j_ = std::move(j), coo_x_ = std::move(x);
  }
  void coo2csr() {
    grb_check(GrB_Matrix_clear(c_), "GrB_Matrix_clear");
    grb_check(G::build(c_, coo_i_.data(), coo_j_.data(), coo_x_.data(), coo_x_.size()), "GrB_Matrix_build");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }
  void spmul() {
    grb_check(GrB_Matrix_eWiseMult_BinaryOp(c_, nullptr, nullptr, G::times(), a_, b_, nullptr), "GrB_eWiseMult");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }
  void prepare_dense(const T* d) {
    release();
    x_ = full_matrix(d, rows_, cols_);
    grb_check(GrB_Matrix_new(&c_, G::type(), rows_, cols_), "new C");
    grb_check(GxB_Matrix_Option_set(c_, GxB_FORMAT, GxB_BY_ROW), "C by row");
  }
  void dense2csr() {
    grb_check(G::select(c_, G::value_ne(), x_, T(0)), "GrB_select VALUENE");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }
  void prune(T t) {
    if (!abs_gt_) {
      grb_check(GrB_IndexUnaryOp_new(&abs_gt_, reinterpret_cast<GxB_index_unary_function>(&abs_greater), GrB_BOOL,
                                     G::type(), G::type()),
                "GrB_IndexUnaryOp_new");
    }
    grb_check(G::select(c_, abs_gt_, a_, t), "GrB_select");
    grb_check(GrB_Matrix_wait(c_, GrB_MATERIALIZE), "wait C");
  }

  // The last spgemm/spadd result in CSR, rows sorted (untimed).
  CsrResult<T> sparse_result() const {
    GrB_Index nr = 0, nc = 0;
    grb_check(GrB_Matrix_nrows(&nr, c_), "nrows");
    grb_check(GrB_Matrix_ncols(&nc, c_), "ncols");
    auto [i, j, x] = tuples(c_);
    CsrResult<T> r;
    r.rows = static_cast<std::int64_t>(nr), r.cols = static_cast<std::int64_t>(nc);
    r.ptr.assign(nr + 1, 0);
    for (GrB_Index e = 0; e < x.size(); ++e) ++r.ptr[i[e] + 1];
    for (GrB_Index k = 0; k < nr; ++k) r.ptr[k + 1] += r.ptr[k];
    r.idx.resize(x.size());
    r.val.resize(x.size());
    std::vector<std::int64_t> next(r.ptr.begin(), r.ptr.end() - 1);
    for (GrB_Index e = 0; e < x.size(); ++e) {
      const auto q = static_cast<std::size_t>(next[i[e]]++);
      r.idx[q] = static_cast<std::int64_t>(j[e]), r.val[q] = x[e];
    }
    sort_rows(r);
    return r;
  }

  // The last SpMM result as a dense row-major rows x k array (missing entries are 0).
  std::vector<T> dense_result(std::int64_t k) const {
    std::vector<T> out(static_cast<std::size_t>(rows_ * k), T(0));
    auto [i, j, x] = tuples(c_);
    for (std::size_t e = 0; e < x.size(); ++e) out[i[e] * k + j[e]] = x[e];
    return out;
  }
  // The last SpMV result (missing entries are 0).
  std::vector<T> vector_result() const {
    GrB_Index n = 0;
    grb_check(GrB_Vector_nvals(&n, yv_), "nvals y");
    std::vector<GrB_Index> i(n);
    std::vector<T> x(n), out(static_cast<std::size_t>(rows_), T(0));
    grb_check(G::tuples(i.data(), x.data(), &n, yv_), "extract y");
    for (GrB_Index e = 0; e < n; ++e) out[i[e]] = x[e];
    return out;
  }
  // The last SDDMM result in the order of A's stored entries (missing entries are 0).
  std::vector<T> pattern_result() const {
    std::vector<T> out(static_cast<std::size_t>(a_csr_->nnz()), T(0));
    auto [i, j, x] = tuples(c_);
    const auto ptr = a_csr_->indptr();
    const auto idx = a_csr_->indices();
    for (std::size_t e = 0; e < x.size(); ++e) {
      const auto* lo = idx.data() + ptr[i[e]];
      const auto* hi = idx.data() + ptr[i[e] + 1];
      const auto* q = std::lower_bound(lo, hi, static_cast<std::int32_t>(j[e]));
      if (q != hi && *q == static_cast<std::int32_t>(j[e])) out[q - idx.data()] = x[e];
    }
    return out;
  }

 private:
  static std::size_t bytes(std::int64_t n) { return static_cast<std::size_t>(n) * sizeof(T); }
  static void* copy_of(const T* x, std::int64_t n) {
    void* buf = std::malloc(std::max<std::size_t>(bytes(n), 1));
    if (!buf) throw std::bad_alloc();
    std::memcpy(buf, x, bytes(n));
    return buf;  // owned by GraphBLAS after a pack (it frees with free())
  }
  GrB_Matrix full_matrix(const T* x, std::int64_t m, std::int64_t n) const {
    GrB_Matrix out = nullptr;
    grb_check(GrB_Matrix_new(&out, G::type(), m, n), "new dense");
    grb_check(GxB_Matrix_Option_set(out, GxB_FORMAT, GxB_BY_ROW), "dense by row");
    void* buf = copy_of(x, m * n);
    grb_check(GxB_Matrix_pack_FullR(out, &buf, bytes(m * n), false, nullptr), "pack dense");
    return out;
  }
  struct Tuples {
    std::vector<GrB_Index> i, j;
    std::vector<T> x;
  };
  static Tuples tuples(GrB_Matrix m) {
    GrB_Index n = 0;
    grb_check(GrB_Matrix_nvals(&n, m), "nvals");
    Tuples t{std::vector<GrB_Index>(n), std::vector<GrB_Index>(n), std::vector<T>(n)};
    grb_check(G::tuples(t.i.data(), t.j.data(), t.x.data(), &n, m), "extract");
    return t;
  }

  static void abs_greater(bool* z, const T* x, GrB_Index, GrB_Index, const T* y) { *z = std::abs(*x) > *y; }
  GrB_IndexUnaryOp abs_gt_ = nullptr;
  GrB_Index rows_, cols_;
  const spindle::Csr<T>* a_csr_;
  GrB_Matrix a_ = nullptr, b_ = nullptr, x_ = nullptr, y_ = nullptr, c_ = nullptr;
  std::int64_t c_k_ = 0;  // SpMM: the columns of the full C
  GrB_Vector xv_ = nullptr, yv_ = nullptr;
  std::vector<GrB_Index> coo_i_, coo_j_;
  std::vector<T> coo_x_;
};

#else  // no GraphBLAS in this build

inline bool graphblas_available() { return false; }
inline std::string graphblas_version() { return ""; }
inline void graphblas_set_threads(int) {}
inline void graphblas_finalize() {}

template <class T>
class GraphBlasPeer {
 public:
  explicit GraphBlasPeer(const spindle::Csr<T>&) {}
  void prepare_spmm(const T*, std::int64_t) {}
  void spmm() {}
  void prepare_spmv(const T*) {}
  void spmv() {}
  void prepare_sddmm(const T*, const T*, std::int64_t) {}
  void sddmm() {}
  std::vector<T> dense_result(std::int64_t) const { return {}; }
  std::vector<T> vector_result() const { return {}; }
  std::vector<T> pattern_result() const { return {}; }
  void set_b(const spindle::Csr<T>&) {}
  void prepare_sparse(std::int64_t, std::int64_t) {}
  void transpose() {}
  void set_coo(std::vector<std::uint64_t>, std::vector<std::uint64_t>, std::vector<T>) {}
  void coo2csr() {}
  void spgemm() {}
  void spadd() {}
  void spmul() {}
  void prune(T) {}
  void prepare_dense(const T*) {}
  void dense2csr() {}
  CsrResult<T> sparse_result() const { return {}; }
};

#endif

}  // namespace bench
