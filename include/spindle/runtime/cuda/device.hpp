// Is there a usable GPU, which one, and the process-wide CUDA context on it.
//
//   spindle::cuda_available()          false (never throws) when the driver library is
//                                      missing, cuInit fails, or the device is absent
//   spindle::cuda_unavailable_reason() why, naming the paths tried and the driver results
//   CudaContext::process()             the primary context of device CudaOptions::device
//                                      (SPINDLE_CUDA_DEVICE, default 0), retained on first
//                                      use and kept for the life of the process
//
// The driver is initialised (cuInit) once per driver library; its result is remembered, as
// the driver itself does. Every driver call that needs a context is preceded by
// make_current(), which binds the context to the calling thread (cuCtxSetCurrent), so
// objects may be used from any thread.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "spindle/runtime/cuda/cuda_api.hpp"
#include "spindle/runtime/cuda/cuda_options.hpp"
#include "spindle/support/error.hpp"

namespace spindle::cuda {

// What the driver reports about one device.
struct CudaDevice {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability
  int sm_count = 0;
  std::size_t global_memory = 0;  // bytes
  int max_threads_per_block = 0;
  int max_block_dim[3] = {0, 0, 0};
  int max_grid_dim[3] = {0, 0, 0};
  int max_shared_per_block = 0;        // bytes, without opt-in
  int max_shared_per_block_optin = 0;  // bytes, with cuFuncSetAttribute opt-in
  int warp_size = 32;
  int memory_clock_khz = 0;       // peak memory clock
  int memory_bus_width_bits = 0;  // global memory bus width
  int l2_cache_bytes = 0;

  // 80 for compute capability 8.0, 90 for 9.0, 120 for 12.0.
  int arch() const { return cc_major * 10 + cc_minor; }
  // Theoretical DRAM bandwidth (double data rate) in GB/s; 0 when the driver does not say.
  double peak_bandwidth_gbs() const {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_width_bits / 8.0) / 1e9;
  }
  std::string description() const {
    return message("'", name, "' (device ", ordinal, ", sm_", arch(), ", ", sm_count, " SMs, ",
                   static_cast<double>(global_memory) / (1024.0 * 1024.0 * 1024.0), " GiB)");
  }
};

namespace detail {

struct DriverProbe {
  const DriverApi* api = nullptr;  // null when the library did not load
  std::string error;               // empty when the requested device exists
  int device_count = 0;
  int driver_version = 0;
};

// Loads the driver, runs cuInit once per library, counts devices. Never throws.
inline DriverProbe probe_driver(const CudaOptions& options) noexcept {
  DriverProbe p;
  try {
    p.api = &driver_api(options);
  } catch (const std::exception& e) {
    p.error = message("CUDA is unavailable: ", e.what());
    return p;
  }
  try {
    static std::mutex mutex;
    static std::map<const DriverApi*, CUresult>* init_results = new std::map<const DriverApi*, CUresult>();
    CUresult init;
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = init_results->find(p.api);
      if (it == init_results->end()) it = init_results->emplace(p.api, p.api->cuInit(0)).first;
      init = it->second;
    }
    p.api->cuDriverGetVersion(&p.driver_version);
    std::string driver = message("'", p.api->path, "' (driver API version ", p.driver_version / 1000, ".",
                                 (p.driver_version % 1000) / 10, ")");
    if (init != CUDA_SUCCESS) {
      p.error = message("CUDA is unavailable: cuInit(0) in ", driver, " failed: ", p.api->error_text(init),
                        "\n  hint: check that an NVIDIA GPU is present and visible (nvidia-smi, "
                        "CUDA_VISIBLE_DEVICES) and that the driver is loaded");
      return p;
    }
    CUresult r = p.api->cuDeviceGetCount(&p.device_count);
    if (r != CUDA_SUCCESS) {
      p.error = message("CUDA is unavailable: cuDeviceGetCount in ", driver, " failed: ", p.api->error_text(r));
      return p;
    }
    if (p.device_count == 0) {
      p.error = message("CUDA is unavailable: the driver ", driver, " reports no CUDA device (cuDeviceGetCount = 0)",
                        "\n  hint: check CUDA_VISIBLE_DEVICES and nvidia-smi");
    } else if (options.device >= p.device_count) {
      p.error = message("CUDA is unavailable: device ", options.device,
                        " was requested (SPINDLE_CUDA_DEVICE / CudaOptions::device) but the driver ", driver,
                        " reports ", p.device_count, " device(s)",
                        "\n  hint: use an ordinal in [0, ", p.device_count, ")");
    }
  } catch (const std::exception& e) {
    p.error = message("CUDA is unavailable: ", e.what());
  }
  return p;
}

}  // namespace detail

// What the driver says about device `ordinal`; RuntimeError on a driver failure.
inline CudaDevice query_device(const DriverApi& api, int ordinal) {
  auto check = [&](CUresult r, const char* what) {
    SPINDLE_CHECK(r == CUDA_SUCCESS, RuntimeError, "CUDA driver: ", what, " for device ", ordinal,
                  " failed: ", api.error_text(r));
  };
  CUdevice dev = 0;
  check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  CudaDevice d;
  d.ordinal = ordinal;
  char name[256] = {0};
  check(api.cuDeviceGetName(name, static_cast<int>(sizeof name) - 1, dev), "cuDeviceGetName");
  d.name = name;
  auto attr = [&](int a) {
    int v = 0;
    check(api.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
    return v;
  };
  d.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  d.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  d.max_block_dim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
  d.max_block_dim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
  d.max_block_dim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
  d.max_grid_dim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  d.max_grid_dim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
  d.max_grid_dim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
  d.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  d.max_shared_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  d.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  d.memory_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  d.memory_bus_width_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  d.l2_cache_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  check(api.cuDeviceTotalMem_v2(&d.global_memory, dev), "cuDeviceTotalMem");
  return d;
}

// The retained primary context of one device. Not copyable; the process-wide instances
// from process() live until the process exits.
class CudaContext {
 public:
  // Throws UnavailableError (with cuda_unavailable_reason()'s text) when there is no
  // usable device, RuntimeError when a driver call fails.
  explicit CudaContext(const CudaOptions& options) {
    detail::DriverProbe p = detail::probe_driver(options);
    if (!p.error.empty())
      throw UnavailableError(message(p.error, "\n  (a CUDA context was requested for device ", options.device, ")"));
    api_ = p.api;
    device_ = query_device(*api_, options.device);
    check(api_->cuDeviceGet(&handle_device_, options.device), "cuDeviceGet");
    check(api_->cuDevicePrimaryCtxRetain(&context_, handle_device_), "cuDevicePrimaryCtxRetain");
  }
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;
  ~CudaContext() {
    if (context_) api_->cuDevicePrimaryCtxRelease_v2(handle_device_);
  }

  // The process-wide context for CudaOptions::from_env() (read on the first call).
  static CudaContext& process() {
    static const CudaOptions env = CudaOptions::from_env();
    return process(env);
  }
  // The process-wide context for these options' driver library and device.
  static CudaContext& process(const CudaOptions& options) {
    static std::mutex mutex;
    static auto* contexts = new std::map<std::string, std::unique_ptr<CudaContext>>();
    std::string key = message(detail::key_of(options.driver_candidates()), "#", options.device);
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = (*contexts)[key];
    if (!slot) slot = std::make_unique<CudaContext>(options);
    return *slot;
  }

  const DriverApi& api() const { return *api_; }
  const CudaDevice& device() const { return device_; }
  CUcontext handle() const { return context_; }

  // Binds this context to the calling thread.
  void make_current() const { check(api_->cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }
  // Waits for all work in the context; reports asynchronous kernel faults.
  void synchronize() const {
    make_current();
    check(api_->cuCtxSynchronize(), "cuCtxSynchronize (a kernel launched earlier may have failed)");
  }
  // {free, total} bytes of device memory.
  std::pair<std::size_t, std::size_t> memory_info() const {
    make_current();
    std::size_t free = 0, total = 0;
    check(api_->cuMemGetInfo_v2(&free, &total), "cuMemGetInfo");
    return {free, total};
  }

  // RuntimeError "CUDA driver: <what> on <device> failed: <error name> (<text>)".
  void check(CUresult r, const std::string& what) const {
    if (r != CUDA_SUCCESS) [[unlikely]]
      throw RuntimeError(message("CUDA driver: ", what, " on ", device_.description(), " failed: ", api_->error_text(r)));
  }

 private:
  const DriverApi* api_ = nullptr;
  CudaDevice device_;
  CUdevice handle_device_ = 0;
  CUcontext context_ = nullptr;
};

}  // namespace spindle::cuda

namespace spindle {

// True when the driver loads, cuInit succeeds and the requested device exists. Never throws.
inline bool cuda_available(const cuda::CudaOptions& options) noexcept {
  return cuda::detail::probe_driver(options).error.empty();
}
inline bool cuda_available() noexcept {
  try {
    return cuda_available(cuda::CudaOptions::from_env());
  } catch (...) {
    return false;
  }
}

// Why cuda_available() is false (what was looked for where, and what the driver said);
// empty when it is true. Never throws.
inline std::string cuda_unavailable_reason(const cuda::CudaOptions& options) noexcept {
  try {
    return cuda::detail::probe_driver(options).error;
  } catch (...) {
    return "CUDA is unavailable: out of memory while probing the driver";
  }
}
inline std::string cuda_unavailable_reason() noexcept {
  try {
    return cuda_unavailable_reason(cuda::CudaOptions::from_env());
  } catch (const std::exception& e) {
    return message("CUDA is unavailable: ", e.what());
  }
}

}  // namespace spindle
