// The runtime object: everything stateful that running kernels needs, owned in one place.
//
//   Runtime rt(options);            // or Runtime::default_instance() (Options::from_env())
//   auto module = rt.load(request); // kernel cache: memory -> disk -> compile
//   auto entry = reinterpret_cast<codegen::KernelEntry>(module->entry());
//   entry(buffers, scalars, rt.abi());
//
// The engine, the kernel cache and the thread pool are created on first use, so a
// program that never runs a kernel starts no threads and never looks for a compiler.
// Engine choice (Options::engine / SPINDLE_ENGINE): "orc" (in-process Clang + ORC, the
// default when built with SPINDLE_WITH_ORC) or "system" (system C compiler + dlopen).
// With Options::debug (SPINDLE_DEBUG) the engine choice and the disk-cache directory are
// logged to stderr when the engine is created, and the kernel cache logs every lookup.
// There is no mutable global state besides default_instance(). It reads the environment
// on its first use, which is the first kernel call on the default runtime (never a static
// initializer): a bad variable raises its UserError from that call, and the next call
// reads the environment again.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/runtime/engine.hpp"
#include "spindle/runtime/kernel_cache.hpp"
#include "spindle/runtime/system_engine.hpp"
#include "spindle/runtime/thread_pool.hpp"
#include "spindle/support/error.hpp"
#include "spindle/support/options.hpp"

namespace spindle::runtime {

inline std::string default_engine_name() {
#ifdef SPINDLE_WITH_ORC
  return "orc";
#else
  return "system";
#endif
}

// The engine named by options.engine ("" = default_engine_name()).
inline std::unique_ptr<Engine> make_engine(const Options& options) {
  std::string name = options.engine.empty() ? default_engine_name() : options.engine;
  if (name == "system") return make_system_engine(options);
  if (name == "orc") {
#ifdef SPINDLE_WITH_ORC
    return make_orc_engine(options);
#else
    throw UnavailableError(
        "engine 'orc' was requested (SPINDLE_ENGINE / Options::engine) but this build of Spindle "
        "has no LLVM: SPINDLE_WITH_ORC is not defined (looked for LLVM/Clang 19 at configure time)"
        "\n  hint: use SPINDLE_ENGINE=system, or configure with SPINDLE_WITH_LLVM=ON and "
        "SPINDLE_LLVM_ROOT pointing at LLVM 19");
#endif
  }
  throw UserError(message("unknown engine '", name, "' (SPINDLE_ENGINE / Options::engine)",
                          "\n  hint: use 'orc' or 'system'"));
}

namespace detail {

// One "spindle:" line per fact for SPINDLE_DEBUG: the engine and where kernels are cached.
inline void log_runtime_choice(const Options& options, const Engine& engine, const KernelCache& cache) {
  std::string why = options.engine.empty() ? "the default of this build; SPINDLE_ENGINE unset"
                                           : "SPINDLE_ENGINE / Options::engine";
  std::fprintf(stderr, "spindle: engine %s (%s)\n", engine.name().c_str(), why.c_str());
  if (!options.disk_cache)
    std::fprintf(stderr, "spindle: kernel cache: memory only (SPINDLE_DISK_CACHE=0 / Options::disk_cache)\n");
  else if (cache.directory().empty())
    std::fprintf(stderr, "spindle: kernel cache: memory only (no SPINDLE_CACHE_DIR, XDG_CACHE_HOME or HOME)\n");
  else
    std::fprintf(stderr, "spindle: kernel cache: memory and disk '%s'\n", cache.directory().c_str());
}

}  // namespace detail

class Runtime {
 public:
  Runtime() : Runtime(Options::from_env()) {}
  explicit Runtime(Options options) : options_(std::move(options)) {}
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process-wide runtime, configured from the environment on first use. A bad
  // variable throws here (UserError naming it); the static is then not initialised and
  // the next call tries again.
  static Runtime& default_instance() {
    static Runtime instance(Options::from_env());
    return instance;
  }

  const Options& options() const { return options_; }

  // Throws UnavailableError (engine not built in) or UserError (unknown engine name);
  // a later call tries again.
  Engine& engine() { return cache().engine(); }

  KernelCache& cache() {
    if (KernelCache* c = cache_ptr_.load(std::memory_order_acquire)) return *c;
    std::lock_guard<std::mutex> lock(init_mutex_);
    if (!cache_) {
      auto engine = make_engine(options_);
      cache_ = std::make_unique<KernelCache>(*engine, options_.cache_dir, options_.disk_cache, options_.debug);
      if (options_.debug) detail::log_runtime_choice(options_, *engine, *cache_);
      engine_ = std::move(engine);
      cache_ptr_.store(cache_.get(), std::memory_order_release);
    }
    return *cache_;
  }

  ThreadPool& pool() {
    abi();
    return *pool_;
  }

  // The runtime argument of every kernel call; its pool is this runtime's pool.
  const codegen::KernelRuntimeAbi* abi() {
    if (const codegen::KernelRuntimeAbi* a = abi_ptr_.load(std::memory_order_acquire)) return a;
    std::lock_guard<std::mutex> lock(init_mutex_);
    if (!pool_) {
      pool_ = std::make_unique<ThreadPool>(options_.num_threads);
      abi_ = pool_->abi();
      abi_ptr_.store(&abi_, std::memory_order_release);
    }
    return &abi_;
  }

  // The loaded module for `request`, through the kernel cache.
  std::shared_ptr<LoadedModule> load(const CompileRequest& request) { return cache().get(request); }

 private:
  Options options_;
  // Lazily created parts; std::call_once is avoided because make_engine may throw.
  std::mutex init_mutex_;
  std::atomic<KernelCache*> cache_ptr_{nullptr};
  std::atomic<const codegen::KernelRuntimeAbi*> abi_ptr_{nullptr};
  // Declaration order = reverse destruction order: the cache (and the modules it holds)
  // goes before the engine it refers to.
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<KernelCache> cache_;
  std::unique_ptr<ThreadPool> pool_;
  codegen::KernelRuntimeAbi abi_{nullptr, nullptr};
};

}  // namespace spindle::runtime
