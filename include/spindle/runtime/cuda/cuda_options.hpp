// Options of the CUDA runtime layer: which NVRTC and driver libraries to load and which
// device to use. Read once from the environment by CudaOptions::from_env(); like
// support/options.hpp for the CPU runtime, this is the only place the CUDA layer reads
// environment variables, and every entry point also takes an explicit CudaOptions.
//
//   SPINDLE_NVRTC_LIBRARY        path of the libnvrtc to load; when set, only that file is
//                                tried (default: libnvrtc.so.13, .so.12, .so on the loader
//                                path, then the same names under $CUDA_HOME/lib64)
//   SPINDLE_CUDA_DRIVER_LIBRARY  path of the driver library (default: libcuda.so.1)
//   SPINDLE_CUDA_DEVICE          ordinal of the device to use (default: 0)
//   SPINDLE_CUDA_SDDMM           default GPU schedule of SDDMM-shaped kernels over a CSR:
//                                "nonzeros" (default: the nonzeros split evenly across the
//                                threads) or "rows" (a warp per row); for measuring
//   SPINDLE_CUDA_SPMM            default GPU schedule of SpMM-shaped kernels over a CSR:
//                                "rows" (default: GE-SpMM, a warp per row) or "nonzeros"
//                                (chunks of nonzeros per warp, atomic row updates: long
//                                rows split across warps)
//   CUDA_HOME                    toolkit root searched for NVRTC (default: /usr/local/cuda)
#pragma once

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "spindle/support/error.hpp"

namespace spindle::cuda {

struct CudaOptions {
  std::string nvrtc_library;   // "" = search the default names (see nvrtc_candidates())
  std::string driver_library;  // "" = libcuda.so.1
  int device = 0;              // device ordinal
  std::string cuda_home = "/usr/local/cuda";
  bool sddmm_by_rows = false;  // SPINDLE_CUDA_SDDMM=rows
  bool spmm_by_nonzeros = false;  // SPINDLE_CUDA_SPMM=nonzeros

  // Throws UserError when SPINDLE_CUDA_DEVICE is not a non-negative integer or
  // SPINDLE_CUDA_SDDMM or SPINDLE_CUDA_SPMM is not one of its values.
  static CudaOptions from_env() {
    CudaOptions o;
    auto get = [](const char* name) -> std::string {
      const char* v = std::getenv(name);
      return v ? std::string(v) : std::string();
    };
    o.nvrtc_library = get("SPINDLE_NVRTC_LIBRARY");
    o.driver_library = get("SPINDLE_CUDA_DRIVER_LIBRARY");
    if (std::string home = get("CUDA_HOME"); !home.empty()) o.cuda_home = home;
    if (std::string d = get("SPINDLE_CUDA_DEVICE"); !d.empty()) {
      char* end = nullptr;
      errno = 0;
      long v = std::strtol(d.c_str(), &end, 10);
      SPINDLE_CHECK(errno == 0 && end && *end == '\0' && v >= 0 && v <= 1 << 20, UserError,
                    "SPINDLE_CUDA_DEVICE='", d, "' is not a device ordinal",
                    "\n  hint: use a non-negative integer such as 0");
      o.device = static_cast<int>(v);
    }
    if (std::string m = get("SPINDLE_CUDA_SDDMM"); !m.empty()) {
      SPINDLE_CHECK(m == "nonzeros" || m == "rows", UserError, "SPINDLE_CUDA_SDDMM='", m,
                    "' is not a GPU SDDMM schedule: the accepted values are 'nonzeros' (the nonzeros split "
                    "evenly across the threads, the default) and 'rows' (a warp per row)");
      o.sddmm_by_rows = m == "rows";
    }
    if (std::string m = get("SPINDLE_CUDA_SPMM"); !m.empty()) {
      SPINDLE_CHECK(m == "nonzeros" || m == "rows", UserError, "SPINDLE_CUDA_SPMM='", m,
                    "' is not a GPU SpMM schedule: the accepted values are 'rows' (a warp per row, the default) "
                    "and 'nonzeros' (chunks of nonzeros per warp, atomic row updates)");
      o.spmm_by_nonzeros = m == "nonzeros";
    }
    return o;
  }

  // Where NVRTC is looked for, in order.
  std::vector<std::string> nvrtc_candidates() const {
    if (!nvrtc_library.empty()) return {nvrtc_library};
    std::string home = cuda_home.empty() ? std::string("/usr/local/cuda") : cuda_home;
    while (home.size() > 1 && home.back() == '/') home.pop_back();
    std::vector<std::string> c;
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) c.push_back(n);
    for (const char* n : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) c.push_back(home + "/lib64/" + n);
    return c;
  }

  // Where the driver library is looked for.
  std::vector<std::string> driver_candidates() const {
    if (!driver_library.empty()) return {driver_library};
    return {"libcuda.so.1"};
  }
};

}  // namespace spindle::cuda
