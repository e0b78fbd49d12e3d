// Shared pieces of the CUDA runtime tests: skip helpers (NVRTC missing, no GPU), small
// hand-written kernels (extern "C" __global__, no #include), and a fake driver library
// built with the system C compiler to exercise the driver-probe error paths on machines
// without a GPU.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include "../runtime/runtime_test_support.hpp"
#include "spindle/runtime/cuda/cuda.hpp"

namespace spindle::cuda::test {

// True when NVRTC loads. Otherwise warns and returns false (the caller skips), or fails
// the test when the environment variable CI is set (CI must run the NVRTC compile checks).
inline bool nvrtc_ready(const CudaOptions& options = CudaOptions::from_env()) {
  try {
    nvrtc_api(options);
    return true;
  } catch (const Error& e) {
    if (std::getenv("CI")) FAIL("NVRTC is required when CI is set: " << e.what());
    WARN("NVRTC not available, skipped: " << e.what());
    return false;
  }
}

// True when a GPU is usable; otherwise warns with cuda_unavailable_reason() (the caller skips).
inline bool gpu_ready() {
  if (cuda_available()) return true;
  WARN("no usable GPU, skipped: " << cuda_unavailable_reason());
  return false;
}

// y[i] = a * x[i] + y[i] for i < n.
inline std::string axpy_source(const std::string& symbol, const std::string& salt = "") {
  return "// " + salt + "\n"
         "extern \"C\" __global__ void " + symbol +
         "(float* __restrict__ y, const float* __restrict__ x, float a, long long n) {\n"
         "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i < n) y[i] = a * x[i] + y[i];\n"
         "}\n";
}

inline bool has_elf_magic(const std::vector<std::uint8_t>& bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F';
}

inline bool contains_bytes(const std::vector<std::uint8_t>& bytes, const std::string& needle) {
  return std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end()) != bytes.end();
}

// A shared library that exports every driver symbol Spindle binds; cuInit returns
// `init_result` and cuDeviceGetCount reports `device_count`. Every other entry point fails
// with CUDA_ERROR_NOT_INITIALIZED (none is called on the probe paths). Empty string when
// the system C compiler is missing (the caller skips).
inline std::string build_fake_driver(const std::string& dir, int init_result, int device_count) {
  std::string c = dir + "/fake_cuda.c", so = dir + "/libfake_cuda.so";
  std::ofstream(c) << "typedef int CUresult;\n"
                      "CUresult cuInit(unsigned f) { return " << init_result << "; }\n"
                      "CUresult cuDriverGetVersion(int* v) { *v = 12040; return 0; }\n"
                      "CUresult cuDeviceGetCount(int* n) { *n = " << device_count << "; return 0; }\n"
                      "CUresult cuGetErrorName(CUresult r, const char** s) {\n"
                      "  *s = r == 100 ? \"CUDA_ERROR_NO_DEVICE\" : \"CUDA_ERROR_UNKNOWN\"; return 0; }\n"
                      "CUresult cuGetErrorString(CUresult r, const char** s) {\n"
                      "  *s = r == 100 ? \"no CUDA-capable device is detected\" : \"unknown error\"; return 0; }\n";
  std::ofstream out(c, std::ios::app);
  for (const char* name :
       {"cuDeviceGet", "cuDeviceGetName", "cuDeviceGetAttribute", "cuDeviceTotalMem_v2", "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease_v2", "cuCtxSetCurrent", "cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2",
        "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyDtoD_v2", "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync_v2",
        "cuMemcpyDtoDAsync_v2", "cuMemsetD8_v2", "cuMemsetD8Async", "cuMemGetInfo_v2", "cuModuleLoadData",
        "cuModuleUnload", "cuModuleGetFunction", "cuLaunchKernel", "cuFuncGetAttribute", "cuStreamCreate",
        "cuStreamDestroy_v2", "cuStreamSynchronize", "cuEventCreate", "cuEventRecord", "cuEventSynchronize",
        "cuEventElapsedTime", "cuEventDestroy_v2"})
    out << "CUresult " << name << "(void) { return 3; }\n";
  out.close();
  auto r = runtime::posix::run_process({"cc", "-shared", "-fPIC", "-o", so, c});
  if (r.spawn_errno != 0) return {};
  REQUIRE(r.exit_code == 0);
  return so;
}

}  // namespace spindle::cuda::test
