// Implementation of CompiledKernel (see compiled_kernel.hpp): runs the pipeline, loads the
// code through the kernel cache, binds arguments and calls the entry point.
#pragma once

#include <array>

#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/driver/pipeline.hpp"
#include "spindle/runtime/bind_args.hpp"
#include "spindle/runtime/compiled_kernel.hpp"
#include "spindle/runtime/host.hpp"
#include "spindle/runtime/runtime.hpp"
#include "spindle/support/timer.hpp"

namespace spindle::runtime {

struct CompiledKernel::Impl {
  Impl(const ir::Function& stage1, Runtime& rt, const lower::AssemblyContext& assembly, const Schedule& schedule)
      : rt(&rt), binder(init(stage1, rt, assembly, schedule)) {}

  ArgBinder init(const ir::Function& stage1, Runtime& r, const lower::AssemblyContext& assembly,
                 const Schedule& schedule) {
    Timer t;
    driver::PipelineOptions o;
    o.context.kernel = stage1.name;
    o.context.num_threads = r.options().num_threads;
    o.context.vector_bits = host_vector_bits();
    o.context.l2_bytes = host_l2_bytes();
    o.context.keep_loop_order = r.options().keep_loop_order || assembly.phase != lower::AssemblyContext::none;
    o.context.assembly = assembly;
    o.context.schedule = schedule;
    this->schedule = schedule;
    o.debug = r.options().debug;
    o.dump_dir = r.options().dump_dir;
    lowered = driver::lower_to_c(stage1, o);
    stats.lower_micros = t.micros();
    t.reset();
    CacheResult res = r.cache().lookup({lowered.source.source, lowered.source.symbol, stage1.name});
    module = res.module;
    stats.load_micros = t.micros();
    stats.source = res.event == CacheEvent::memory_hit ? CodeSource::memory_cache
                   : res.event == CacheEvent::disk_hit ? CodeSource::disk_cache
                                                       : CodeSource::compiled;
    entry = reinterpret_cast<codegen::KernelEntry>(module->entry());
    nbuffers = lowered.stage3.buffers.size();
    nscalars = lowered.stage3.scalars.size();
    return ArgBinder(lowered.stage1, lowered.stage3);
  }

  Runtime* rt;
  Schedule schedule;
  driver::Lowered lowered;
  std::shared_ptr<LoadedModule> module;
  codegen::KernelEntry entry = nullptr;
  std::size_t nbuffers = 0, nscalars = 0;
  CompileStats stats;
  ArgBinder binder;
};

SPINDLE_DECL CompiledKernel::CompiledKernel(const ir::Function& stage1, Runtime& rt)
    : impl_(std::make_unique<Impl>(stage1, rt, lower::AssemblyContext{}, Schedule{})) {}

SPINDLE_DECL CompiledKernel::CompiledKernel(const ir::Function& stage1, Runtime& rt, const Schedule& schedule)
    : impl_(std::make_unique<Impl>(stage1, rt, lower::AssemblyContext{}, schedule)) {}

SPINDLE_DECL CompiledKernel::CompiledKernel(const ir::Function& stage1, Runtime& rt,
                                            const lower::AssemblyContext& assembly)
    : impl_(std::make_unique<Impl>(stage1, rt, assembly, Schedule{})) {}

SPINDLE_DECL CompiledKernel::~CompiledKernel() = default;

SPINDLE_DECL void CompiledKernel::call(const std::vector<CallArg>& args) const {
  CheckedIndexValues none;
  call(args, none);
}

SPINDLE_DECL void CompiledKernel::call(const std::vector<CallArg>& args, CheckedIndexValues& checked) const {
  constexpr std::size_t kInline = 32;
  std::array<void*, kInline> buf_small{};
  std::array<std::int64_t, kInline> sc_small{};
  std::vector<void*> buf_big;
  std::vector<std::int64_t> sc_big;
  void** bufs = buf_small.data();
  std::int64_t* scalars = sc_small.data();
  if (impl_->nbuffers > kInline) {
    buf_big.resize(impl_->nbuffers);
    bufs = buf_big.data();
  }
  if (impl_->nscalars > kInline) {
    sc_big.resize(impl_->nscalars);
    scalars = sc_big.data();
  }
  // A call from inside a parallel region runs its parallel loops serially (thread_pool.hpp):
  // one owner then covers every row, instead of each of the pool's threads' owners in turn.
  const std::int64_t threads = ThreadPool::in_parallel_region() ? 1 : impl_->rt->pool().num_threads();
  bool serial = false;
  impl_->binder.bind(args, bufs, scalars, nullptr, threads, &checked, &serial);
  const codegen::KernelRuntimeAbi* abi = impl_->rt->abi();
  codegen::KernelRuntimeAbi one_thread{abi->parallel_for, nullptr};  // a null pool runs serially
  impl_->entry(bufs, scalars, serial ? &one_thread : abi);  // serial: a sparse root repeats a written coordinate
}

SPINDLE_DECL const driver::Lowered& CompiledKernel::lowered() const { return impl_->lowered; }
SPINDLE_DECL const std::string& CompiledKernel::source() const { return impl_->lowered.source.source; }
SPINDLE_DECL const std::string& CompiledKernel::symbol() const { return impl_->lowered.source.symbol; }
SPINDLE_DECL const CompileStats& CompiledKernel::stats() const { return impl_->stats; }
SPINDLE_DECL int CompiledKernel::num_args() const { return impl_->binder.num_args(); }
SPINDLE_DECL Runtime& CompiledKernel::runtime() const { return *impl_->rt; }

SPINDLE_DECL std::string CompiledKernel::explain() const {
  const driver::Lowered& l = impl_->lowered;
  std::string s = "== kernel " + l.stage1.name + " ==\n";
  s += autosched::describe_loop_orders(l.written, l.stage1);
  if (!impl_->schedule.empty()) s += "# schedule: " + impl_->schedule.to_string() + "\n";
  s += ir::to_string(l.stage1) + ir::to_string(l.stage2) + ir::to_string(l.stage3);
  s += "# passes:";
  for (auto& p : l.passes) s += " " + p.pass + "(" + std::to_string(static_cast<long>(p.micros)) + "us)";
  s += "\n# code: " + std::string(code_source_name(impl_->stats.source)) + ", engine " +
       impl_->rt->engine().name() + "\n";
  s += "# generated source (" + l.source.symbol + "):\n" + l.source.source;
  return s;
}

SPINDLE_DECL Runtime& default_runtime() { return Runtime::default_instance(); }

}  // namespace spindle::runtime
