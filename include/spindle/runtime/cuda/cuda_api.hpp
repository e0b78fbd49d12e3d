// The CUDA driver API and NVRTC as tables of function pointers, loaded at run time with
// dlopen, so that a Spindle build runs (and compiles CUDA to cubin) on machines with no
// driver and no GPU. No CUDA header is included: the few types, enum values and function
// signatures used are declared here, in namespace spindle::cuda (so that they never clash
// with cuda.h in a user TU), with the ABI of cuda.h / nvrtc.h of CUDA 12 and 13.
//
//   const DriverApi& driver_api(const CudaOptions&);  // libcuda.so.1 or SPINDLE_CUDA_DRIVER_LIBRARY
//   const NvrtcApi&  nvrtc_api(const CudaOptions&);   // see CudaOptions::nvrtc_candidates()
//
// Each library is loaded once per process and list of candidate paths (thread-safe) and
// never unloaded. A failure is not remembered: the next call tries again. It raises
// UnavailableError naming every path tried with its dlerror(), or the missing symbol.
// Where the driver exports versioned names (cuMemAlloc_v2, ...) those are bound, as
// cuda.h does with its #defines; the members keep the versioned names.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "spindle/runtime/cuda/cuda_options.hpp"
#include "spindle/support/error.hpp"

namespace spindle::cuda {

// --- driver API types (cuda.h) ----------------------------------------------------------
using CUresult = int;  // an enum in cuda.h, int-sized
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUmodule = CUmod_st*;
using CUfunction = CUfunc_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;

// CUdevice_attribute
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
inline constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36;      // kHz
inline constexpr int CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37;  // bits
inline constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
inline constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute
inline constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
inline constexpr int CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;
inline constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
inline constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;

inline constexpr unsigned CU_STREAM_DEFAULT = 0;  // synchronises with the legacy default stream
inline constexpr unsigned CU_EVENT_DEFAULT = 0;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;

// --- NVRTC types (nvrtc.h) ------------------------------------------------------------
using nvrtcResult = int;
struct _nvrtcProgram;
using nvrtcProgram = _nvrtcProgram*;
inline constexpr nvrtcResult NVRTC_SUCCESS = 0;
inline constexpr nvrtcResult NVRTC_ERROR_COMPILATION = 6;

struct DriverApi {
  std::string path;  // the file that was loaded (as named in the candidate list)
  void* handle = nullptr;

  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem_v2)(std::size_t* bytes, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease_v2)(CUdevice device) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc_v2)(CUdeviceptr* ptr, std::size_t bytes) = nullptr;
  CUresult (*cuMemFree_v2)(CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr dst, const void* src, std::size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoH_v2)(void* dst, CUdeviceptr src, std::size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes) = nullptr;
  CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr dst, const void* src, std::size_t bytes, CUstream s) = nullptr;
  CUresult (*cuMemcpyDtoHAsync_v2)(void* dst, CUdeviceptr src, std::size_t bytes, CUstream s) = nullptr;
  CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream s) = nullptr;
  CUresult (*cuMemsetD8_v2)(CUdeviceptr dst, unsigned char value, std::size_t count) = nullptr;
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, std::size_t count, CUstream s) = nullptr;
  CUresult (*cuMemGetInfo_v2)(std::size_t* free, std::size_t* total) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction* fn, CUmodule module, const char* name) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, CUstream s,
                             void** params, void** extra) = nullptr;
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction fn) = nullptr;
  CUresult (*cuStreamCreate)(CUstream* s, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy_v2)(CUstream s) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream s) = nullptr;
  CUresult (*cuEventCreate)(CUevent* e, unsigned flags) = nullptr;
  CUresult (*cuEventRecord)(CUevent e, CUstream s) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent e) = nullptr;
  CUresult (*cuEventElapsedTime)(float* ms, CUevent start, CUevent end) = nullptr;  // _v2 where exported
  CUresult (*cuEventDestroy_v2)(CUevent e) = nullptr;

  // "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; never throws.
  std::string error_text(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName) cuGetErrorName(r, &name);
    if (cuGetErrorString) cuGetErrorString(r, &text);
    return message(name ? name : "CUDA error", " ", r, " (", text ? text : "no description", ")");
  }
};

struct NvrtcApi {
  std::string path;      // the candidate that was loaded
  std::string resolved;  // the real file behind it (names the exact version), via dladdr
  void* handle = nullptr;

  nvrtcResult (*nvrtcVersion)(int* major, int* minor) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int* count) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int* archs) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* prog, const char* src, const char* name, int num_headers,
                                    const char* const* headers, const char* const* include_names) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options, const char* const* options) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, std::size_t* size) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char* log) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, std::size_t* size) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char* cubin) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, std::size_t* size) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char* ptx) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* prog) = nullptr;
  const char* (*nvrtcGetErrorString)(nvrtcResult r) = nullptr;

  std::string error_text(nvrtcResult r) const {
    const char* s = nvrtcGetErrorString ? nvrtcGetErrorString(r) : nullptr;
    return message(s ? s : "NVRTC error", " (", r, ")");
  }
};

namespace detail {

// dlopen()s the first candidate that loads; on failure throws UnavailableError listing
// every candidate with its dlerror().
inline void* open_first(const std::vector<std::string>& candidates, const char* what, const std::string& hint,
                        std::string* loaded) {
  std::string tried;
  for (const std::string& c : candidates) {
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *loaded = c;
      return h;
    }
    const char* e = ::dlerror();
    tried += message("\n    ", c, ": ", e ? e : "unknown dlopen error");
  }
  throw UnavailableError(message(what, " could not be loaded; tried:", tried, "\n  hint: ", hint));
}

// Binds `fn` to the first of `names` the library exports; throws UnavailableError
// naming the library and the symbols when none is.
template <class F>
void bind(void* handle, const std::string& library, F& fn, std::initializer_list<const char*> names) {
  ::dlerror();
  for (const char* n : names) {
    if (void* p = ::dlsym(handle, n)) {
      fn = reinterpret_cast<F>(p);
      return;
    }
  }
  std::string list;
  for (const char* n : names) list += (list.empty() ? "" : " / ") + std::string(n);
  throw UnavailableError(message("'", library, "' does not export ", list,
                                 "\n  hint: the library is too old or not the expected one; "
                                 "Spindle needs the CUDA 12 or 13 driver API and NVRTC"));
}

inline std::string key_of(const std::vector<std::string>& candidates) {
  std::string k;
  for (const auto& c : candidates) k += c + '\n';
  return k;
}

}  // namespace detail

// The registries below are never destroyed (nor the libraries closed): device memory and
// modules owned by other static objects may still be released during static destruction.
inline const DriverApi& driver_api(const CudaOptions& options) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<DriverApi>>* loaded = new std::map<std::string, std::unique_ptr<DriverApi>>();
  std::vector<std::string> candidates = options.driver_candidates();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*loaded)[detail::key_of(candidates)];
  if (slot) return *slot;
  auto api = std::make_unique<DriverApi>();
  api->handle = detail::open_first(candidates, "the CUDA driver library",
                                   "install the NVIDIA driver, or set SPINDLE_CUDA_DRIVER_LIBRARY to the "
                                   "path of libcuda.so.1",
                                   &api->path);
  try {
    auto& a = *api;
    const std::string& l = a.path;
    detail::bind(a.handle, l, a.cuInit, {"cuInit"});
    detail::bind(a.handle, l, a.cuDriverGetVersion, {"cuDriverGetVersion"});
    detail::bind(a.handle, l, a.cuGetErrorName, {"cuGetErrorName"});
    detail::bind(a.handle, l, a.cuGetErrorString, {"cuGetErrorString"});
    detail::bind(a.handle, l, a.cuDeviceGet, {"cuDeviceGet"});
    detail::bind(a.handle, l, a.cuDeviceGetCount, {"cuDeviceGetCount"});
    detail::bind(a.handle, l, a.cuDeviceGetName, {"cuDeviceGetName"});
    detail::bind(a.handle, l, a.cuDeviceGetAttribute, {"cuDeviceGetAttribute"});
    detail::bind(a.handle, l, a.cuDeviceTotalMem_v2, {"cuDeviceTotalMem_v2"});
    detail::bind(a.handle, l, a.cuDevicePrimaryCtxRetain, {"cuDevicePrimaryCtxRetain"});
    detail::bind(a.handle, l, a.cuDevicePrimaryCtxRelease_v2, {"cuDevicePrimaryCtxRelease_v2"});
    detail::bind(a.handle, l, a.cuCtxSetCurrent, {"cuCtxSetCurrent"});
    detail::bind(a.handle, l, a.cuCtxSynchronize, {"cuCtxSynchronize"});
    detail::bind(a.handle, l, a.cuMemAlloc_v2, {"cuMemAlloc_v2"});
    detail::bind(a.handle, l, a.cuMemFree_v2, {"cuMemFree_v2"});
    detail::bind(a.handle, l, a.cuMemcpyHtoD_v2, {"cuMemcpyHtoD_v2"});
    detail::bind(a.handle, l, a.cuMemcpyDtoH_v2, {"cuMemcpyDtoH_v2"});
    detail::bind(a.handle, l, a.cuMemcpyDtoD_v2, {"cuMemcpyDtoD_v2"});
    detail::bind(a.handle, l, a.cuMemcpyHtoDAsync_v2, {"cuMemcpyHtoDAsync_v2"});
    detail::bind(a.handle, l, a.cuMemcpyDtoHAsync_v2, {"cuMemcpyDtoHAsync_v2"});
    detail::bind(a.handle, l, a.cuMemcpyDtoDAsync_v2, {"cuMemcpyDtoDAsync_v2"});
    detail::bind(a.handle, l, a.cuMemsetD8_v2, {"cuMemsetD8_v2"});
    detail::bind(a.handle, l, a.cuMemsetD8Async, {"cuMemsetD8Async"});
    detail::bind(a.handle, l, a.cuMemGetInfo_v2, {"cuMemGetInfo_v2"});
    detail::bind(a.handle, l, a.cuModuleLoadData, {"cuModuleLoadData"});
    detail::bind(a.handle, l, a.cuModuleUnload, {"cuModuleUnload"});
    detail::bind(a.handle, l, a.cuModuleGetFunction, {"cuModuleGetFunction"});
    detail::bind(a.handle, l, a.cuLaunchKernel, {"cuLaunchKernel"});
    detail::bind(a.handle, l, a.cuFuncGetAttribute, {"cuFuncGetAttribute"});
    detail::bind(a.handle, l, a.cuStreamCreate, {"cuStreamCreate"});
    detail::bind(a.handle, l, a.cuStreamDestroy_v2, {"cuStreamDestroy_v2"});
    detail::bind(a.handle, l, a.cuStreamSynchronize, {"cuStreamSynchronize"});
    detail::bind(a.handle, l, a.cuEventCreate, {"cuEventCreate"});
    detail::bind(a.handle, l, a.cuEventRecord, {"cuEventRecord"});
    detail::bind(a.handle, l, a.cuEventSynchronize, {"cuEventSynchronize"});
    // cuEventElapsedTime_v2 appeared with CUDA 12.8 drivers (same signature).
    detail::bind(a.handle, l, a.cuEventElapsedTime, {"cuEventElapsedTime_v2", "cuEventElapsedTime"});
    detail::bind(a.handle, l, a.cuEventDestroy_v2, {"cuEventDestroy_v2"});
  } catch (...) {
    ::dlclose(api->handle);
    throw;
  }
  slot = std::move(api);
  return *slot;
}

inline const NvrtcApi& nvrtc_api(const CudaOptions& options) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<NvrtcApi>>* loaded = new std::map<std::string, std::unique_ptr<NvrtcApi>>();
  std::vector<std::string> candidates = options.nvrtc_candidates();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = (*loaded)[detail::key_of(candidates)];
  if (slot) return *slot;
  auto api = std::make_unique<NvrtcApi>();
  api->handle = detail::open_first(candidates, "NVRTC (the CUDA runtime compiler)",
                                   options.nvrtc_library.empty()
                                       ? "install the CUDA toolkit's NVRTC (libnvrtc.so.12 or .13), set CUDA_HOME, "
                                         "or set SPINDLE_NVRTC_LIBRARY to the path of libnvrtc.so"
                                       : "SPINDLE_NVRTC_LIBRARY / CudaOptions::nvrtc_library names a file that "
                                         "does not load; fix or unset it",
                                   &api->path);
  try {
    auto& a = *api;
    const std::string& l = a.path;
    detail::bind(a.handle, l, a.nvrtcVersion, {"nvrtcVersion"});
    detail::bind(a.handle, l, a.nvrtcGetNumSupportedArchs, {"nvrtcGetNumSupportedArchs"});
    detail::bind(a.handle, l, a.nvrtcGetSupportedArchs, {"nvrtcGetSupportedArchs"});
    detail::bind(a.handle, l, a.nvrtcCreateProgram, {"nvrtcCreateProgram"});
    detail::bind(a.handle, l, a.nvrtcCompileProgram, {"nvrtcCompileProgram"});
    detail::bind(a.handle, l, a.nvrtcGetProgramLogSize, {"nvrtcGetProgramLogSize"});
    detail::bind(a.handle, l, a.nvrtcGetProgramLog, {"nvrtcGetProgramLog"});
    detail::bind(a.handle, l, a.nvrtcGetCUBINSize, {"nvrtcGetCUBINSize"});
    detail::bind(a.handle, l, a.nvrtcGetCUBIN, {"nvrtcGetCUBIN"});
    detail::bind(a.handle, l, a.nvrtcGetPTXSize, {"nvrtcGetPTXSize"});
    detail::bind(a.handle, l, a.nvrtcGetPTX, {"nvrtcGetPTX"});
    detail::bind(a.handle, l, a.nvrtcDestroyProgram, {"nvrtcDestroyProgram"});
    detail::bind(a.handle, l, a.nvrtcGetErrorString, {"nvrtcGetErrorString"});
    Dl_info info{};
    if (::dladdr(reinterpret_cast<void*>(a.nvrtcVersion), &info) && info.dli_fname) {
      char real[4096];
      a.resolved = ::realpath(info.dli_fname, real) ? real : info.dli_fname;
    } else {
      a.resolved = a.path;
    }
  } catch (...) {
    ::dlclose(api->handle);
    throw;
  }
  slot = std::move(api);
  return *slot;
}

}  // namespace spindle::cuda
