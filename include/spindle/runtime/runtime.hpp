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
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/runtime/engine.hpp"
#include "spindle/runtime/kernel_cache.hpp"
#include "spindle/runtime/system_engine.hpp"
#include "spindle/runtime/thread_pool.hpp"
#include "spindle/support/error.hpp"
#include "spindle/support/linkage.hpp"
#include "spindle/support/options.hpp"

namespace spindle::runtime {

// The engine this build uses when none is named: "orc" with LLVM, else "system".
SPINDLE_DECL std::string default_engine_name();

// The engine named by options.engine ("" = default_engine_name()).
SPINDLE_DECL std::unique_ptr<Engine> make_engine(const Options& options);

namespace detail {
// One "spindle:" line per fact for SPINDLE_DEBUG: the engine and where kernels are cached.
SPINDLE_DECL void log_runtime_choice(const Options& options, const Engine& engine, const KernelCache& cache);
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
  SPINDLE_DECL static Runtime& default_instance();

  const Options& options() const { return options_; }

  // Throws UnavailableError (engine not built in) or UserError (unknown engine name);
  // a later call tries again.
  Engine& engine() { return cache().engine(); }

  SPINDLE_DECL KernelCache& cache();

  ThreadPool& pool() {
    abi();
    return *pool_;
  }

  // The runtime argument of every kernel call; its pool is this runtime's pool.
  SPINDLE_DECL const codegen::KernelRuntimeAbi* abi();

  // The loaded module for `request`, through the kernel cache.
  std::shared_ptr<LoadedModule> load(const CompileRequest& request) { return cache().get(request); }

  // State a front end keeps per runtime (einsum's plans, which hold kernels compiled with
  // this runtime): made by `make()` on the first request for `key`, destroyed with the
  // runtime before its cache, engine and pool.
  template <class T, class Make>
  std::shared_ptr<T> attached(const std::string& key, Make&& make) {
    std::lock_guard<std::mutex> lock(attached_mutex_);
    auto& slot = attached_[key];
    if (!slot) slot = std::shared_ptr<T>(make());
    return std::static_pointer_cast<T>(slot);
  }

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
  // Declared last: destroyed first, while the cache and engine its kernels use still exist.
  std::mutex attached_mutex_;
  std::map<std::string, std::shared_ptr<void>> attached_;
};

}  // namespace spindle::runtime

#ifndef SPINDLE_SEPARATE_COMPILATION
#include "spindle/runtime/runtime_impl.hpp"
#endif
