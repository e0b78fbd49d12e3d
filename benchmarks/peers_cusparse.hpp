// The cuSPARSE peer of `spindle-bench --backend cuda`, loaded at run time with dlopen like
// the CUDA driver (runtime/cuda/cuda_api.hpp), so that the benchmark builds and runs on
// machines without cuSPARSE or a GPU. No CUDA or cuSPARSE header is included: the handful
// of types, enum values and signatures used are declared here with the ABI of cusparse.h
// 12.x / library_types.h (values checked against CUDA 13.0's cusparse.h, cuSPARSE 12.6.3).
//
//   const CusparseApi& cusparse_api(cuda_options)   libcusparse.so.12, libcusparse.so, then
//                                                   $CUDA_HOME/lib64/ of both; UnavailableError
//                                                   naming every path tried with dlerror()
//   CusparsePeer<T> peer(api, context, stream)      a handle bound to the stream
//   peer.prepare_spmm(A, X, C)                      C[m,K] = A X, row-major X and C
//   peer.spmm_setup(alg) -> "" or why not           buffer size, buffer, preprocess (untimed)
//   peer.spmm(alg)                                  enqueues cusparseSpMM (no wait)
//   peer.prepare_sddmm(A, X, Y, c_values)           C = (X Y^T) on A's pattern, C's values
//   peer.sddmm()                                    in c_values, structure shared with A
//
// cuSPARSE's SDDMM computes C = alpha (op(X) op(Y)) .* spy(C) + beta C: it does not scale by
// A's values as spindle::ops::sddmm does (C = A .* (X Y^T)). The benchmark multiplies
// cuSPARSE's result by A's values on the host before comparing; the timed cuSPARSE call does
// not include that scaling (it reads neither A's values nor C's, beta = 0).
//
// Every failing call raises spindle::RuntimeError "cuSPARSE: <call> (<algorithm>) failed:
// <status name> (<text>)". cuSPARSE runs on the context current to the thread (the
// benchmark's primary context, made current before each call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include <spindle/runtime/cuda/cuda.hpp>

namespace bench {

namespace cusparse {

// cusparse.h
using Status = int;  // cusparseStatus_t
struct Context;
struct SpMatDescr;
struct DnMatDescr;
using Handle = Context*;
using SpMat = SpMatDescr*;
using DnMat = DnMatDescr*;
using ConstSpMat = const SpMatDescr*;
using ConstDnMat = const DnMatDescr*;

inline constexpr Status CUSPARSE_STATUS_SUCCESS = 0;
inline constexpr Status CUSPARSE_STATUS_NOT_SUPPORTED = 10;

inline constexpr int CUSPARSE_INDEX_BASE_ZERO = 0;            // cusparseIndexBase_t
inline constexpr int CUSPARSE_OPERATION_NON_TRANSPOSE = 0;     // cusparseOperation_t
inline constexpr int CUSPARSE_OPERATION_TRANSPOSE = 1;
inline constexpr int CUSPARSE_ORDER_ROW = 2;                   // cusparseOrder_t
inline constexpr int CUSPARSE_INDEX_32I = 2;                   // cusparseIndexType_t
inline constexpr int CUSPARSE_SPMM_ALG_DEFAULT = 0;            // cusparseSpMMAlg_t
inline constexpr int CUSPARSE_SPMM_CSR_ALG1 = 4;
inline constexpr int CUSPARSE_SPMM_CSR_ALG2 = 6;
inline constexpr int CUSPARSE_SDDMM_ALG_DEFAULT = 0;           // cusparseSDDMMAlg_t
// library_types.h
inline constexpr int CUDA_R_32F = 0;  // cudaDataType
inline constexpr int CUDA_R_64F = 1;
inline constexpr int MAJOR_VERSION = 0, MINOR_VERSION = 1, PATCH_LEVEL = 2;  // libraryPropertyType

struct Algorithm {
  int value;
  const char* name;  // the enumerator
  const char* short_name;
};

// The CSR algorithms of cusparseSpMM that the benchmark measures, and SDDMM's one.
inline const std::vector<Algorithm>& spmm_algorithms() {
  static const std::vector<Algorithm> a{{CUSPARSE_SPMM_ALG_DEFAULT, "CUSPARSE_SPMM_ALG_DEFAULT", "default"},
                                        {CUSPARSE_SPMM_CSR_ALG1, "CUSPARSE_SPMM_CSR_ALG1", "csr_alg1"},
                                        {CUSPARSE_SPMM_CSR_ALG2, "CUSPARSE_SPMM_CSR_ALG2", "csr_alg2"}};
  return a;
}
inline const Algorithm kSddmmDefault{CUSPARSE_SDDMM_ALG_DEFAULT, "CUSPARSE_SDDMM_ALG_DEFAULT", "default"};

}  // namespace cusparse

struct CusparseApi {
  std::string path;  // the candidate that loaded
  void* handle = nullptr;
  using S = cusparse::Status;
  using H = cusparse::Handle;

  S (*cusparseCreate)(H* handle) = nullptr;
  S (*cusparseDestroy)(H handle) = nullptr;
  S (*cusparseSetStream)(H handle, spindle::cuda::CUstream stream) = nullptr;
  const char* (*cusparseGetErrorName)(S status) = nullptr;
  const char* (*cusparseGetErrorString)(S status) = nullptr;
  S (*cusparseCreateCsr)(cusparse::SpMat* descr, std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                         void* row_offsets, void* col_ind, void* values, int row_offsets_type, int col_ind_type,
                         int index_base, int value_type) = nullptr;
  S (*cusparseCreateDnMat)(cusparse::DnMat* descr, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                           void* values, int value_type, int order) = nullptr;
  S (*cusparseDestroySpMat)(cusparse::ConstSpMat descr) = nullptr;
  S (*cusparseDestroyDnMat)(cusparse::ConstDnMat descr) = nullptr;
  S (*cusparseSpMM_bufferSize)(H, int op_a, int op_b, const void* alpha, cusparse::ConstSpMat a, cusparse::ConstDnMat b,
                               const void* beta, cusparse::DnMat c, int compute_type, int alg,
                               std::size_t* bytes) = nullptr;
  S (*cusparseSpMM)(H, int op_a, int op_b, const void* alpha, cusparse::ConstSpMat a, cusparse::ConstDnMat b,
                    const void* beta, cusparse::DnMat c, int compute_type, int alg, void* buffer) = nullptr;
  S (*cusparseSDDMM_bufferSize)(H, int op_a, int op_b, const void* alpha, cusparse::ConstDnMat a,
                                cusparse::ConstDnMat b, const void* beta, cusparse::SpMat c, int compute_type, int alg,
                                std::size_t* bytes) = nullptr;
  S (*cusparseSDDMM)(H, int op_a, int op_b, const void* alpha, cusparse::ConstDnMat a, cusparse::ConstDnMat b,
                     const void* beta, cusparse::SpMat c, int compute_type, int alg, void* buffer) = nullptr;
  // Optional (null when the library does not export them).
  S (*cusparseSpMM_preprocess)(H, int op_a, int op_b, const void* alpha, cusparse::ConstSpMat a,
                               cusparse::ConstDnMat b, const void* beta, cusparse::DnMat c, int compute_type, int alg,
                               void* buffer) = nullptr;
  S (*cusparseSDDMM_preprocess)(H, int op_a, int op_b, const void* alpha, cusparse::ConstDnMat a,
                                cusparse::ConstDnMat b, const void* beta, cusparse::SpMat c, int compute_type,
                                int alg, void* buffer) = nullptr;
  S (*cusparseGetProperty)(int type, int* value) = nullptr;

  // "CUSPARSE_STATUS_NOT_SUPPORTED (operation not supported)"; never throws.
  std::string status_text(S s) const {
    const char* name = cusparseGetErrorName ? cusparseGetErrorName(s) : nullptr;
    const char* text = cusparseGetErrorString ? cusparseGetErrorString(s) : nullptr;
    std::string n = name ? std::string(name) : spindle::message("cuSPARSE status ", s);
    return spindle::message(n, " (", text ? text : "no description", ")");
  }
  // "12.6.3", or "unknown".
  std::string version() const {
    int v[3] = {0, 0, 0};
    if (!cusparseGetProperty) return "unknown";
    for (int k = 0; k < 3; ++k)
      if (cusparseGetProperty(k, &v[k]) != cusparse::CUSPARSE_STATUS_SUCCESS) return "unknown";
    return spindle::message(v[0], ".", v[1], ".", v[2]);
  }
};

// Where cuSPARSE is looked for, in order.
inline std::vector<std::string> cusparse_candidates(const spindle::cuda::CudaOptions& options) {
  std::string home = options.cuda_home.empty() ? std::string("/usr/local/cuda") : options.cuda_home;
  while (home.size() > 1 && home.back() == '/') home.pop_back();
  return {"libcusparse.so.12", "libcusparse.so", home + "/lib64/libcusparse.so.12", home + "/lib64/libcusparse.so"};
}

// Loads cuSPARSE once per process (a failure is retried on the next call); UnavailableError
// naming every path tried, or the missing symbol.
inline const CusparseApi& cusparse_api(const spindle::cuda::CudaOptions& options) {
  namespace d = spindle::cuda::detail;
  static std::mutex mutex;
  static CusparseApi* loaded = nullptr;  // never unloaded (handles may outlive main's scope)
  std::lock_guard<std::mutex> lock(mutex);
  if (loaded) return *loaded;
  auto api = std::make_unique<CusparseApi>();
  api->handle = d::open_first(cusparse_candidates(options), "cuSPARSE",
                              "install the CUDA toolkit's cuSPARSE (libcusparse.so.12) or set CUDA_HOME to the "
                              "toolkit root",
                              &api->path);
  try {
    auto& a = *api;
    const std::string& l = a.path;
    d::bind(a.handle, l, a.cusparseCreate, {"cusparseCreate"});
    d::bind(a.handle, l, a.cusparseDestroy, {"cusparseDestroy"});
    d::bind(a.handle, l, a.cusparseSetStream, {"cusparseSetStream"});
    d::bind(a.handle, l, a.cusparseGetErrorName, {"cusparseGetErrorName"});
    d::bind(a.handle, l, a.cusparseGetErrorString, {"cusparseGetErrorString"});
    d::bind(a.handle, l, a.cusparseCreateCsr, {"cusparseCreateCsr"});
    d::bind(a.handle, l, a.cusparseCreateDnMat, {"cusparseCreateDnMat"});
    d::bind(a.handle, l, a.cusparseDestroySpMat, {"cusparseDestroySpMat"});
    d::bind(a.handle, l, a.cusparseDestroyDnMat, {"cusparseDestroyDnMat"});
    d::bind(a.handle, l, a.cusparseSpMM_bufferSize, {"cusparseSpMM_bufferSize"});
    d::bind(a.handle, l, a.cusparseSpMM, {"cusparseSpMM"});
    d::bind(a.handle, l, a.cusparseSDDMM_bufferSize, {"cusparseSDDMM_bufferSize"});
    d::bind(a.handle, l, a.cusparseSDDMM, {"cusparseSDDMM"});
    a.cusparseSpMM_preprocess = reinterpret_cast<decltype(a.cusparseSpMM_preprocess)>(
        ::dlsym(a.handle, "cusparseSpMM_preprocess"));
    a.cusparseSDDMM_preprocess = reinterpret_cast<decltype(a.cusparseSDDMM_preprocess)>(
        ::dlsym(a.handle, "cusparseSDDMM_preprocess"));
    a.cusparseGetProperty = reinterpret_cast<decltype(a.cusparseGetProperty)>(::dlsym(a.handle, "cusparseGetProperty"));
  } catch (...) {
    ::dlclose(api->handle);
    throw;
  }
  loaded = api.release();
  return *loaded;
}

template <class T>
constexpr int cusparse_value_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "cuSPARSE peer: f32 or f64");
  return std::is_same_v<T, float> ? cusparse::CUDA_R_32F : cusparse::CUDA_R_64F;
}

template <class T>
class CusparsePeer {
  using CUdeviceptr = spindle::cuda::CUdeviceptr;

 public:
  CusparsePeer(const CusparseApi& api, spindle::cuda::CudaContext& context, spindle::cuda::CUstream stream)
      : api_(api), context_(context) {
    context_.make_current();
    check(api_.cusparseCreate(&handle_), "cusparseCreate", "");
    check(api_.cusparseSetStream(handle_, stream), "cusparseSetStream", "");
  }
  CusparsePeer(const CusparsePeer&) = delete;
  CusparsePeer& operator=(const CusparsePeer&) = delete;
  ~CusparsePeer() {
    release();
    if (handle_) api_.cusparseDestroy(handle_);
  }

  // C[m, K] = A[m, n] X[n, K]; X and C row-major (leading dimension K). The descriptors point
  // at the device arrays, which must outlive the calls.
  void prepare_spmm(const spindle::DeviceCsr<T>& a, const spindle::DeviceTensor<T>& x, spindle::DeviceTensor<T>& c) {
    release();
    context_.make_current();
    const std::int64_t k = x.dim(1);
    for (const auto& alg : cusparse::spmm_algorithms()) {
      PerAlg p;
      p.alg = alg;
      check(api_.cusparseCreateCsr(&p.a, a.rows(), a.cols(), a.nnz(), ptr(a.indptr_ptr()), ptr(a.indices_ptr()),
                                   ptr(a.values_ptr()), cusparse::CUSPARSE_INDEX_32I, cusparse::CUSPARSE_INDEX_32I,
                                   cusparse::CUSPARSE_INDEX_BASE_ZERO, cusparse_value_type<T>()),
            "cusparseCreateCsr", alg.name);
      spmm_.push_back(std::move(p));
    }
    check(api_.cusparseCreateDnMat(&b_, x.dim(0), k, k, ptr(x.device_ptr()), cusparse_value_type<T>(),
                                   cusparse::CUSPARSE_ORDER_ROW),
          "cusparseCreateDnMat (X)", "");
    check(api_.cusparseCreateDnMat(&c_, c.dim(0), c.dim(1), c.dim(1), ptr(c.device_ptr()), cusparse_value_type<T>(),
                                   cusparse::CUSPARSE_ORDER_ROW),
          "cusparseCreateDnMat (C)", "");
  }

  // Buffer size, workspace and preprocessing of one SpMM algorithm (untimed). Returns "" when
  // the algorithm runs on these operands, else why not (the cuSPARSE status).
  std::string spmm_setup(const cusparse::Algorithm& alg) {
    PerAlg& p = find(alg);
    context_.make_current();
    const T one = 1, zero = 0;
    std::size_t bytes = 0;
    cusparse::Status s = api_.cusparseSpMM_bufferSize(handle_, op_n(), op_n(), &one, p.a, b_, &zero, c_,
                                                       cusparse_value_type<T>(), alg.value, &bytes);
    if (s != cusparse::CUSPARSE_STATUS_SUCCESS) return p.unavailable = "cusparseSpMM_bufferSize: " + api_.status_text(s);
    p.buffer = spindle::cuda::DeviceBuffer(context_, bytes);
    if (api_.cusparseSpMM_preprocess) {
      s = api_.cusparseSpMM_preprocess(handle_, op_n(), op_n(), &one, p.a, b_, &zero, c_, cusparse_value_type<T>(),
                                       alg.value, ptr(p.buffer.get()));
      if (s != cusparse::CUSPARSE_STATUS_SUCCESS)
        return p.unavailable = "cusparseSpMM_preprocess: " + api_.status_text(s);
    }
    p.ready = true;
    return "";
  }

  // Enqueues C = A X with `alg` on the stream.
  void spmm(const cusparse::Algorithm& alg) {
    PerAlg& p = find(alg);
    SPINDLE_CHECK(p.ready, spindle::InternalError, "cuSPARSE peer: ", alg.name, " used before spmm_setup succeeded");
    context_.make_current();
    const T one = 1, zero = 0;
    check(api_.cusparseSpMM(handle_, op_n(), op_n(), &one, p.a, b_, &zero, c_, cusparse_value_type<T>(), alg.value,
                            ptr(p.buffer.get())),
          "cusparseSpMM", alg.name);
  }

  // (X[m, K] Y[n, K]^T) on A's pattern into c_values (nnz values; structure shared with A).
  // Returns "" when SDDMM runs on these operands, else why not.
  std::string prepare_sddmm(const spindle::DeviceCsr<T>& a, const spindle::DeviceTensor<T>& x,
                            const spindle::DeviceTensor<T>& y, CUdeviceptr c_values) {
    release();
    context_.make_current();
    const std::int64_t k = x.dim(1);
    check(api_.cusparseCreateDnMat(&b_, x.dim(0), k, k, ptr(x.device_ptr()), cusparse_value_type<T>(),
                                   cusparse::CUSPARSE_ORDER_ROW),
          "cusparseCreateDnMat (X)", "");
    check(api_.cusparseCreateDnMat(&y_, y.dim(0), k, k, ptr(y.device_ptr()), cusparse_value_type<T>(),
                                   cusparse::CUSPARSE_ORDER_ROW),
          "cusparseCreateDnMat (Y)", "");
    check(api_.cusparseCreateCsr(&sddmm_c_, a.rows(), a.cols(), a.nnz(), ptr(a.indptr_ptr()), ptr(a.indices_ptr()),
                                 ptr(c_values), cusparse::CUSPARSE_INDEX_32I, cusparse::CUSPARSE_INDEX_32I,
                                 cusparse::CUSPARSE_INDEX_BASE_ZERO, cusparse_value_type<T>()),
          "cusparseCreateCsr (C)", "");
    const T one = 1, zero = 0;
    const auto& alg = cusparse::kSddmmDefault;
    std::size_t bytes = 0;
    cusparse::Status s = api_.cusparseSDDMM_bufferSize(handle_, op_n(), op_t(), &one, b_, y_, &zero, sddmm_c_,
                                                        cusparse_value_type<T>(), alg.value, &bytes);
    if (s != cusparse::CUSPARSE_STATUS_SUCCESS) return "cusparseSDDMM_bufferSize: " + api_.status_text(s);
    sddmm_buffer_ = spindle::cuda::DeviceBuffer(context_, bytes);
    if (api_.cusparseSDDMM_preprocess) {
      s = api_.cusparseSDDMM_preprocess(handle_, op_n(), op_t(), &one, b_, y_, &zero, sddmm_c_,
                                        cusparse_value_type<T>(), alg.value, ptr(sddmm_buffer_.get()));
      if (s != cusparse::CUSPARSE_STATUS_SUCCESS) return "cusparseSDDMM_preprocess: " + api_.status_text(s);
    }
    sddmm_ready_ = true;
    return "";
  }

  // Enqueues the SDDMM prepared above on the stream.
  void sddmm() {
    SPINDLE_CHECK(sddmm_ready_, spindle::InternalError, "cuSPARSE peer: sddmm() before prepare_sddmm succeeded");
    context_.make_current();
    const T one = 1, zero = 0;
    check(api_.cusparseSDDMM(handle_, op_n(), op_t(), &one, b_, y_, &zero, sddmm_c_, cusparse_value_type<T>(),
                             cusparse::kSddmmDefault.value, ptr(sddmm_buffer_.get())),
          "cusparseSDDMM", cusparse::kSddmmDefault.name);
  }

 private:
  struct PerAlg {
    cusparse::Algorithm alg{};
    cusparse::SpMat a = nullptr;  // one descriptor per algorithm: preprocessing is stored in it
    spindle::cuda::DeviceBuffer buffer;
    bool ready = false;
    std::string unavailable;
  };

  static int op_n() { return cusparse::CUSPARSE_OPERATION_NON_TRANSPOSE; }
  static int op_t() { return cusparse::CUSPARSE_OPERATION_TRANSPOSE; }
  static void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

  PerAlg& find(const cusparse::Algorithm& alg) {
    for (auto& p : spmm_)
      if (p.alg.value == alg.value) return p;
    throw spindle::InternalError(spindle::message("cuSPARSE peer: ", alg.name, " used before prepare_spmm"));
  }

  void check(cusparse::Status s, const char* call, const char* alg) const {
    if (s != cusparse::CUSPARSE_STATUS_SUCCESS)
      throw spindle::RuntimeError(spindle::message("cuSPARSE: ", call, *alg ? " (" : "", alg, *alg ? ")" : "",
                                                   " failed: ", api_.status_text(s), " ('", api_.path, "')"));
  }

  // Destroys the descriptors and frees the workspaces of the previous case.
  void release() noexcept {
    for (auto& p : spmm_)
      if (p.a) api_.cusparseDestroySpMat(p.a);
    spmm_.clear();
    if (b_) api_.cusparseDestroyDnMat(b_);
    if (c_) api_.cusparseDestroyDnMat(c_);
    if (y_) api_.cusparseDestroyDnMat(y_);
    if (sddmm_c_) api_.cusparseDestroySpMat(sddmm_c_);
    b_ = c_ = y_ = nullptr;
    sddmm_c_ = nullptr;
    sddmm_buffer_.reset();
    sddmm_ready_ = false;
  }

  const CusparseApi& api_;
  spindle::cuda::CudaContext& context_;
  cusparse::Handle handle_ = nullptr;
  std::vector<PerAlg> spmm_;
  cusparse::DnMat b_ = nullptr, c_ = nullptr, y_ = nullptr;
  cusparse::SpMat sddmm_c_ = nullptr;
  spindle::cuda::DeviceBuffer sddmm_buffer_;
  bool sddmm_ready_ = false;
};

}  // namespace bench
