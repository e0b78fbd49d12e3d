// The CUDA runtime object: everything stateful that running CUDA kernels needs, owned in one
// place, like runtime::Runtime for the CPU.
//
//   CudaRuntime& rt = default_cuda_runtime();       // Options + CudaOptions from the environment
//   auto module = rt.load(request);                  // kernel cache: memory -> disk -> NVRTC
//   void* fn = module->function("spindle_spmm_..."); // CUfunction
//   cuda::launch(rt, fn, launch, params, vars, scalars, rt.stream().handle());
//
// The NVRTC engine, the KernelCache (disk directory Options::cache_dir, switched by
// Options::disk_cache, entries "<hex>.nvrtc.bin"), the context and the default stream are
// created on first use: a program that never runs a CUDA kernel never loads a CUDA library.
// Without a GPU, context(), stream() and load() raise UnavailableError; with a fixed
// architecture, engine().compile() still works.
//
//   compile_cuda_for_arch(source, name, 80)  compile-only (no GPU, no cache): the cubin or
//                                            PTX bytes NVRTC produces for sm_80
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "spindle/runtime/cuda/device.hpp"
#include "spindle/runtime/cuda/nvrtc_engine.hpp"
#include "spindle/runtime/cuda/stream.hpp"
#include "spindle/runtime/kernel_cache.hpp"
#include "spindle/support/options.hpp"

namespace spindle::cuda {

class CudaRuntime {
 public:
  CudaRuntime() : CudaRuntime(Options::from_env(), CudaOptions::from_env()) {}
  // arch: a fixed target architecture for the engine (nullopt: the device's).
  CudaRuntime(Options options, CudaOptions cuda, std::optional<int> arch = std::nullopt)
      : options_(std::move(options)), cuda_(std::move(cuda)), arch_(arch) {}
  CudaRuntime(const CudaRuntime&) = delete;
  CudaRuntime& operator=(const CudaRuntime&) = delete;

  const Options& options() const { return options_; }
  const CudaOptions& cuda_options() const { return cuda_; }

  // The process-wide context of cuda_options().device; UnavailableError without a GPU.
  CudaContext& context() {
    if (CudaContext* c = context_ptr_.load(std::memory_order_acquire)) return *c;
    CudaContext& c = CudaContext::process(cuda_);
    context_ptr_.store(&c, std::memory_order_release);
    return c;
  }
  const CudaDevice& device() { return context().device(); }

  NvrtcEngine& engine() {
    cache();
    return *engine_;
  }

  runtime::KernelCache& cache() {
    if (runtime::KernelCache* c = cache_ptr_.load(std::memory_order_acquire)) return *c;
    std::lock_guard<std::mutex> lock(init_mutex_);
    if (!cache_) {
      engine_ = std::make_unique<NvrtcEngine>(cuda_, arch_);
      cache_ = std::make_unique<runtime::KernelCache>(*engine_, options_.cache_dir, options_.disk_cache,
                                                      options_.debug);
      cache_ptr_.store(cache_.get(), std::memory_order_release);
    }
    return *cache_;
  }

  // The default stream of this runtime (created on first use).
  CudaStream& stream() {
    if (CudaStream* s = stream_ptr_.load(std::memory_order_acquire)) return *s;
    CudaContext& c = context();
    std::lock_guard<std::mutex> lock(init_mutex_);
    if (!stream_) {
      stream_ = std::make_unique<CudaStream>(c);
      stream_ptr_.store(stream_.get(), std::memory_order_release);
    }
    return *stream_;
  }

  // The loaded module for `request` (symbol = module name), through the kernel cache.
  std::shared_ptr<CudaModule> load(const runtime::CompileRequest& request) {
    return std::static_pointer_cast<CudaModule>(cache().get(request));
  }
  // Like load(), and says where the module came from and how long it took.
  runtime::CacheResult lookup(const runtime::CompileRequest& request) { return cache().lookup(request); }

  // Waits for the default stream (when it exists) and the whole context.
  void synchronize() {
    if (CudaStream* s = stream_ptr_.load(std::memory_order_acquire)) s->synchronize();
    context().synchronize();
  }

 private:
  Options options_;
  CudaOptions cuda_;
  std::optional<int> arch_;
  std::mutex init_mutex_;
  std::atomic<CudaContext*> context_ptr_{nullptr};
  std::atomic<runtime::KernelCache*> cache_ptr_{nullptr};
  std::atomic<CudaStream*> stream_ptr_{nullptr};
  // Declaration order = reverse destruction order: stream, then the cache (and the modules
  // it holds), then the engine the cache refers to.
  std::unique_ptr<NvrtcEngine> engine_;
  std::unique_ptr<runtime::KernelCache> cache_;
  std::unique_ptr<CudaStream> stream_;
};

// The process-wide CUDA runtime, configured from the environment on first use. Never
// destroyed: kernels may still be released by other static objects at exit.
inline CudaRuntime& default_cuda_runtime() {
  static CudaRuntime* instance = new CudaRuntime(Options::from_env(), CudaOptions::from_env());
  return *instance;
}

// Compile-only, no GPU and no cache: the artifact NVRTC produces for `arch` (cubin, or PTX
// when arch is newer than NVRTC supports). CompileError on a compile failure,
// UnavailableError without NVRTC or for an arch older than NVRTC supports.
inline std::vector<std::uint8_t> compile_cuda_for_arch(const std::string& source, const std::string& name, int arch,
                                                       const CudaOptions& options = CudaOptions::from_env()) {
  NvrtcEngine engine(options, arch);
  return engine.compile(runtime::CompileRequest{source, name, name});
}

}  // namespace spindle::cuda

namespace spindle {
using cuda::default_cuda_runtime;
}  // namespace spindle
