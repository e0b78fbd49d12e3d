// Definitions of the Runtime's out-of-line parts (runtime.hpp): inline in header-only mode,
// compiled once in libspindle_runtime (impl/spindle.cpp) under SPINDLE_SEPARATE_COMPILATION,
// so that the engine choice (which depends on how the library was built) and the one
// default runtime live in the library.
#pragma once

#include <cstdio>

#include "spindle/runtime/runtime.hpp"

namespace spindle::runtime {

SPINDLE_DECL std::string default_engine_name() {
#ifdef SPINDLE_WITH_ORC
  return "orc";
#else
  return "system";
#endif
}

// The engine named by options.engine ("" = default_engine_name()).
SPINDLE_DECL std::unique_ptr<Engine> make_engine(const Options& options) {
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
SPINDLE_DECL void log_runtime_choice(const Options& options, const Engine& engine, const KernelCache& cache) {
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

SPINDLE_DECL Runtime& Runtime::default_instance() {
  static Runtime instance(Options::from_env());
  return instance;
}

SPINDLE_DECL KernelCache& Runtime::cache() {
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

SPINDLE_DECL const codegen::KernelRuntimeAbi* Runtime::abi() {
  if (const codegen::KernelRuntimeAbi* a = abi_ptr_.load(std::memory_order_acquire)) return a;
  std::lock_guard<std::mutex> lock(init_mutex_);
  if (!pool_) {
    pool_ = std::make_unique<ThreadPool>(options_.num_threads);
    abi_ = pool_->abi();
    abi_ptr_.store(&abi_, std::memory_order_release);
  }
  return &abi_;
}

}  // namespace spindle::runtime
