// Implementation of CompiledCudaKernel (see compiled_cuda_kernel.hpp).
#pragma once

#include <array>
#include <map>
#include <mutex>

#include "spindle/driver/pipeline.hpp"
#include "spindle/runtime/bind_args.hpp"
#include "spindle/runtime/cuda/compiled_cuda_kernel.hpp"
#include "spindle/runtime/cuda/cuda_runtime.hpp"
#include "spindle/runtime/cuda/launch.hpp"
#include "spindle/support/timer.hpp"

namespace spindle::cuda {

struct CompiledCudaKernel::Impl {
  struct Variant {
    driver::CudaLowered lowered;
    std::shared_ptr<CudaModule> module;
    std::vector<void*> functions;  // one per launch
    runtime::CompileStats stats;
  };

  Impl(const ir::Function& stage1, CudaRuntime& r, const lower::AssemblyContext& assembly, const Schedule& schedule)
      : rt(&r), options(pipeline_options(stage1.name, r, assembly, schedule)), prepared(driver::lower_for_cuda(stage1, options)),
        binder(prepared.stage1, prepared.unscheduled, /*device=*/true) {
    for (auto& s : prepared.unscheduled.scalars) scalar_vars.push_back(s.var);
  }

  static driver::PipelineOptions pipeline_options(const std::string& kernel, const CudaRuntime& r,
                                                  const lower::AssemblyContext& assembly,
                                                  const Schedule& schedule) {
    driver::PipelineOptions o;
    o.context.schedule = schedule;
    o.context.kernel = kernel;
    o.context.keep_loop_order = assembly.phase != lower::AssemblyContext::none;  // as the CPU phases
    o.context.assembly = assembly;
    o.debug = r.options().debug;
    o.dump_dir = r.options().dump_dir;
    return o;
  }

  // The variant for this call's scalars and buffer addresses, compiled on first use.
  const Variant& variant(void* const* bufs, const std::int64_t* scalars) {
    autosched::CudaVariant v;
    if (prepared.plan.pattern != autosched::CudaPattern::generic) {
      bool aligned = true;
      for (std::size_t k = 0; k < prepared.unscheduled.buffers.size(); ++k)
        aligned = aligned && reinterpret_cast<std::uintptr_t>(bufs[k]) % 16 == 0;
      std::int64_t feature = evaluate_int(prepared.plan.feature, scalar_vars, scalars);
      v = autosched::cuda_variant(prepared.plan.pattern, feature, aligned, rt->cuda_options().sddmm_by_rows,
                                  rt->cuda_options().spmm_by_nonzeros);
    }
    std::lock_guard<std::mutex> lock(mutex);
    auto it = variants.find(v.key());
    if (it == variants.end()) it = variants.emplace(v.key(), build(v)).first;
    last = &it->second;
    return it->second;
  }

  Variant build(const autosched::CudaVariant& v) {
    Variant out;
    Timer t;
    out.lowered = driver::schedule_and_emit_cuda(prepared, options, v);
    out.stats.lower_micros = t.micros();
    t.reset();
    runtime::CacheResult res = rt->lookup({out.lowered.source.source, out.lowered.source.module_symbol,
                                           prepared.stage1.name});
    out.module = std::static_pointer_cast<CudaModule>(res.module);
    out.stats.load_micros = t.micros();
    out.stats.source = res.event == runtime::CacheEvent::memory_hit ? runtime::CodeSource::memory_cache
                       : res.event == runtime::CacheEvent::disk_hit ? runtime::CodeSource::disk_cache
                                                                    : runtime::CodeSource::compiled;
    for (auto& l : out.lowered.source.launches) out.functions.push_back(out.module->function(l.symbol));
    return out;
  }

  void run(const std::vector<runtime::CallArg>& args, CUstream stream) {
    const std::size_t nb = prepared.unscheduled.buffers.size(), ns = prepared.unscheduled.scalars.size();
    std::vector<void*> bufs(nb);
    std::vector<std::int64_t> scalars(ns);
    std::vector<runtime::ArgBinder::IndexCheck> checks;
    binder.bind(args, bufs.data(), scalars.data(), &checks);
    check_indices_on_host(checks, stream);
    const Variant& v = variant(bufs.data(), scalars.data());
    std::vector<void*> params;
    params.reserve(nb + ns);
    for (auto& b : bufs) params.push_back(&b);
    for (auto& s : scalars) params.push_back(&s);
    for (std::size_t k = 0; k < v.functions.size(); ++k)
      launch(*rt, v.functions[k], v.lowered.source.launches[k], params.data(), scalar_vars, scalars.data(), stream);
  }

  // The index arrays of indirect writes live in device memory: copy each to the host (after
  // the stream's earlier work, which may have written it) and check its values before the
  // launch, so that an out-of-range index raises a FormatError and writes nothing.
  void check_indices_on_host(const std::vector<runtime::ArgBinder::IndexCheck>& checks, CUstream stream) {
    for (auto& k : checks) {
      if (k.count == 0) continue;
      CudaContext& c = rt->context();
      c.make_current();
      std::vector<std::int64_t> host(static_cast<std::size_t>(k.count));  // room for i32 or i64 values
      std::size_t bytes = static_cast<std::size_t>(k.count) * static_cast<std::size_t>(dtype_bytes(k.dtype));
      c.check(c.api().cuMemcpyDtoHAsync_v2(host.data(), static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(k.data)),
                                           bytes, stream),
              "cuMemcpyDtoHAsync (indirect write indices)");
      c.check(c.api().cuStreamSynchronize(stream), "cuStreamSynchronize (indirect write indices)");
      runtime::ArgBinder::check_index_values(k, host.data());
    }
  }

  CudaRuntime* rt;
  driver::PipelineOptions options;
  driver::CudaLowered prepared;
  runtime::ArgBinder binder;
  std::vector<ir::Var> scalar_vars;
  std::mutex mutex;
  std::map<int, Variant> variants;
  const Variant* last = nullptr;
};

SPINDLE_DECL CompiledCudaKernel::CompiledCudaKernel(const ir::Function& stage1, CudaRuntime& rt)
    : impl_(std::make_unique<Impl>(stage1, rt, lower::AssemblyContext{}, Schedule{})) {}

SPINDLE_DECL CompiledCudaKernel::CompiledCudaKernel(const ir::Function& stage1, CudaRuntime& rt,
                                                    const Schedule& schedule)
    : impl_(std::make_unique<Impl>(stage1, rt, lower::AssemblyContext{}, schedule)) {}

SPINDLE_DECL CompiledCudaKernel::CompiledCudaKernel(const ir::Function& stage1, CudaRuntime& rt,
                                                    const lower::AssemblyContext& assembly)
    : impl_(std::make_unique<Impl>(stage1, rt, assembly, Schedule{})) {}

SPINDLE_DECL CompiledCudaKernel::~CompiledCudaKernel() = default;

SPINDLE_DECL void CompiledCudaKernel::call(const std::vector<runtime::CallArg>& args) const {
  CudaStream& s = impl_->rt->stream();
  impl_->run(args, s.handle());
  s.synchronize();
}

SPINDLE_DECL void CompiledCudaKernel::call_async(const std::vector<runtime::CallArg>& args, void* stream) const {
  impl_->run(args, stream ? static_cast<CUstream>(stream) : impl_->rt->stream().handle());
}

SPINDLE_DECL driver::CudaLowered CompiledCudaKernel::lower_variant(std::int64_t feature, bool aligned) const {
  auto v = autosched::cuda_variant(impl_->prepared.plan.pattern, feature, aligned,
                                   impl_->rt->cuda_options().sddmm_by_rows, impl_->rt->cuda_options().spmm_by_nonzeros);
  return driver::schedule_and_emit_cuda(impl_->prepared, impl_->options, v);
}

SPINDLE_DECL std::string CompiledCudaKernel::pattern() const {
  return autosched::cuda_pattern_name(impl_->prepared.plan.pattern);
}

SPINDLE_DECL runtime::CompileStats CompiledCudaKernel::last_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->last ? impl_->last->stats : runtime::CompileStats{};
}

SPINDLE_DECL std::string CompiledCudaKernel::explain() const {
  const driver::CudaLowered& p = impl_->prepared;
  std::string s = "== kernel " + p.stage1.name + " (CUDA) ==\n";
  s += autosched::describe_loop_orders(p.written, p.stage1);
  if (!impl_->options.context.schedule.empty())
    s += "# schedule: " + impl_->options.context.schedule.to_string() + "\n";
  s += ir::to_string(p.stage1) + ir::to_string(p.stage2) + "# unscheduled stage III\n" + ir::to_string(p.unscheduled);
  if (impl_->options.context.schedule.has_loop_steps())
    s += "# user GPU schedule: " + impl_->options.context.schedule.to_string();
  else
    s += "# default GPU schedule: " + pattern();
  if (p.plan.feature.defined()) s += ", variant chosen per call from the feature size " + ir::to_string(p.plan.feature);
  s += "\n";
  std::lock_guard<std::mutex> lock(impl_->mutex);
  for (auto& [key, v] : impl_->variants) {
    s += "# variant " + v.lowered.variant.describe() + " (" + v.lowered.source.module_symbol + ", " +
         runtime::code_source_name(v.stats.source) + ")\n" + ir::to_string(v.lowered.stage3) + v.lowered.source.source;
  }
  return s;
}

SPINDLE_DECL CudaRuntime& CompiledCudaKernel::runtime() const { return *impl_->rt; }

SPINDLE_DECL CudaRuntime& default_runtime() { return default_cuda_runtime(); }

}  // namespace spindle::cuda
