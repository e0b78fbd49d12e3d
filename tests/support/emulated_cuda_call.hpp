// Runs the CUDA build of a kernel on host arguments in the CUDA emulator (no GPU needed),
// the way CompiledCudaKernel would on a device: lower for CUDA, pick the schedule variant
// from the call's feature size, emit, compile every launch with the emulator, launch with
// the grids evaluated from the bound scalars. With an NvrtcCheck, each module is also
// compiled by NVRTC to an sm_80 cubin (the emulator compiles with the host compiler; this
// checks that the real CUDA compiler accepts the source too).
//
//   spindle::test::NvrtcCheck nvrtc;
//   spindle::test::run_cuda_emulated(kernel.ir(), call_args, &nvrtc);
//
// Shared by the random-kernel fuzzers and the tests (tests/support).
#pragma once

#include <array>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "spindle/codegen/cuda_sort_rows.hpp"
#include "spindle/driver/pipeline.hpp"
#include "spindle/runtime/assembly_steps.hpp"
#include "spindle/runtime/cuda/assembled_cuda_kernel.hpp"
#include "spindle/runtime/bind_args.hpp"
#include "spindle/runtime/cuda/cuda.hpp"
#include "support/cuda_emulator.hpp"
#include "support/device_mirror.hpp"

namespace spindle::test {

// NVRTC compiles every generated CUDA module to an sm_80 cubin, when NVRTC loads.
// With ptx_only, NVRTC stops at PTX (no ptxas: several times faster on large modules;
// the CUDA front end and NVVM still see the whole source).
struct NvrtcCheck {
  bool available = true;
  bool ptx_only = false;
  long compiled = 0;
  std::set<std::string> done;  // module symbols (a hash of the source) already compiled
  void check(const codegen::CudaSource& src) {
    if (!available || !done.insert(src.module_symbol).second) return;
    try {
      // An architecture newer than any NVRTC knows makes it emit PTX for its newest one.
      auto bytes = cuda::compile_cuda_for_arch(src.source, src.module_symbol, ptx_only ? 9990 : 80);
      const bool elf = bytes.size() >= 4 && bytes[0] == 0x7f && bytes[1] == 'E';
      const bool ptx = std::string(bytes.begin(), bytes.end()).find(".entry") != std::string::npos;
      if (ptx_only ? !ptx : !elf) throw InternalError(ptx_only ? "NVRTC output is not PTX" : "NVRTC output is not an ELF cubin");
      ++compiled;
    } catch (const UnavailableError& e) {
      available = false;
      std::cout << "spindle: NVRTC unavailable, no cubin checks: " << e.what() << "\n";
    }
  }
};

// The CUDA source the default GPU schedule generates for `stage1` called with `call`.
// `assembly`: a phase of an assembling kernel (lower/split_assembly.hpp), lowered as
// CompiledCudaKernel lowers it.
inline codegen::CudaSource emulated_cuda_source(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                                               std::vector<void*>& bufs, std::vector<std::int64_t>& scalars,
                                               std::vector<ir::Var>& vars,
                                               const lower::AssemblyContext* assembly = nullptr,
                                               const Schedule* schedule = nullptr) {
  driver::PipelineOptions o;
  o.context.kernel = stage1.name;
  if (schedule) o.context.schedule = *schedule;
  if (assembly) o.context.assembly = *assembly, o.context.keep_loop_order = true;
  auto prepared = driver::lower_for_cuda(stage1, o);
  runtime::ArgBinder binder(prepared.stage1, prepared.unscheduled);
  bufs.assign(prepared.unscheduled.buffers.size(), nullptr);
  scalars.assign(prepared.unscheduled.scalars.size(), 0);
  binder.bind(call, bufs.data(), scalars.data());
  vars.clear();
  for (auto& s : prepared.unscheduled.scalars) vars.push_back(s.var);
  autosched::CudaVariant v;
  if (prepared.plan.pattern != autosched::CudaPattern::generic) {
    bool aligned = true;
    for (void* b : bufs) aligned = aligned && reinterpret_cast<std::uintptr_t>(b) % 16 == 0;
    v = autosched::cuda_variant(prepared.plan.pattern, cuda::evaluate_int(prepared.plan.feature, vars, scalars.data()),
                                aligned, cuda::CudaOptions::from_env().sddmm_by_rows,
                                cuda::CudaOptions::from_env().spmm_by_nonzeros);  // as CompiledCudaKernel does
  }
  return driver::schedule_and_emit_cuda(prepared, o, v).source;
}

// Compiled emulator modules by module symbol (a hash of the source), so that calling one
// kernel on several inputs compiles it once.
struct EmulatorCache {
  std::map<std::string, std::unique_ptr<CudaEmulator>> modules;
  std::map<std::string, std::unique_ptr<cuda::CompiledCudaKernel>> gpu;  // by printed stage-I IR (fuzzers free kernels: an address may be reused)
  CudaEmulator& get(const codegen::CudaSource& source) {
    auto& m = modules[source.module_symbol];
    if (!m) m = std::make_unique<CudaEmulator>(source);
    return *m;
  }
};

// Runs the CUDA build of `stage1` in the emulator; the out/inout arguments are written.
inline void run_cuda_emulated(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                              NvrtcCheck* nvrtc = nullptr, EmulatorCache* cache = nullptr,
                              const lower::AssemblyContext* assembly = nullptr, const Schedule* schedule = nullptr) {
  std::vector<void*> bufs;
  std::vector<std::int64_t> scalars;
  std::vector<ir::Var> vars;
  codegen::CudaSource source = emulated_cuda_source(stage1, call, bufs, scalars, vars, assembly, schedule);
  if (nvrtc) nvrtc->check(source);
  std::unique_ptr<CudaEmulator> own;
  if (!cache) own = std::make_unique<CudaEmulator>(source);
  CudaEmulator& emu = cache ? cache->get(source) : *own;
  std::vector<void*> params;
  for (auto& b : bufs) params.push_back(&b);
  for (auto& s : scalars) params.push_back(&s);
  for (auto& l : source.launches) {
    std::array<std::int64_t, 3> grid{};
    for (int d = 0; d < 3; ++d) grid[d] = cuda::evaluate_int(l.grid[d], vars, scalars.data());
    if (grid[0] && grid[1] && grid[2]) emu.launch(l, grid, params.data());
  }
}

// Whether run_cuda_build runs on the GPU: a GPU is present and SPINDLE_TEST_NO_GPU is unset
// (set it to check the emulator on a machine with a GPU).
inline bool gpu_runs() {
  static const bool yes = !std::getenv("SPINDLE_TEST_NO_GPU") && cuda_available();
  return yes;
}
inline const char* cuda_engine_name() { return gpu_runs() ? "gpu" : "cuda"; }

// Runs the CUDA build of `stage1` where it can run: on the GPU when gpu_runs() (host
// arguments mirrored into device memory, the kernel compiled by NVRTC for the device and
// called through CompiledCudaKernel, outputs copied back), else in the emulator (with the
// NVRTC cubin check when `nvrtc` is given). `schedule`: a user GPU schedule (not cached on
// the GPU).
inline void run_cuda_build(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                           NvrtcCheck* nvrtc = nullptr, EmulatorCache* cache = nullptr,
                           const Schedule* schedule = nullptr) {
  if (!gpu_runs()) return run_cuda_emulated(stage1, call, nvrtc, cache, nullptr, schedule);
  if (schedule) return call_on_gpu(stage1, cuda::CompiledCudaKernel(stage1, cuda::default_cuda_runtime(), *schedule), call);
  if (!cache) return call_on_gpu(stage1, cuda::CompiledCudaKernel(stage1, cuda::default_cuda_runtime()), call);
  auto& k = cache->gpu[ir::to_string(stage1)];
  if (!k) k = std::make_unique<cuda::CompiledCudaKernel>(stage1, cuda::default_cuda_runtime());
  call_on_gpu(stage1, *k, call);
}

// The GPU steps of an assembled kernel (cuda::assemble_on, what AssembledCudaKernel runs) in
// the emulator: "device" memory is host memory, each phase runs through run_cuda_emulated,
// the row sort module is compiled by the emulator (and by NVRTC with an NvrtcCheck).
class EmulatedAssemblyDevice final : public cuda::AssemblyDevice {
 public:
  EmulatedAssemblyDevice(NvrtcCheck* nvrtc, EmulatorCache* cache, std::int64_t scratch_budget)
      : nvrtc_(nvrtc), cache_(cache), budget_(scratch_budget) {}
  bool device_memory() const override { return false; }
  std::int64_t scratch_budget() const override { return budget_; }
  void* allocate(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    memory_.emplace_back(new std::int64_t[(bytes + 7) / 8]);
    return memory_.back().get();
  }
  void fill(void* p, std::size_t bytes, unsigned char byte) override {
    if (bytes) std::memset(p, byte, bytes);
  }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void run_phase(const lower::AssemblyPhase& phase, const std::vector<runtime::CallArg>& args) override {
    run_cuda_emulated(phase.function, args, nvrtc_, cache_, &phase.context);
  }
  void sort_rows(const codegen::SortRowsSource& sort, std::int64_t rows, void* row_ptr, void* indices,
                 void* values) override {
    if (nvrtc_) nvrtc_->check(sort.source);
    std::unique_ptr<CudaEmulator> own;
    if (!cache_) own = std::make_unique<CudaEmulator>(sort.source);
    CudaEmulator& emu = cache_ ? cache_->get(sort.source) : *own;
    const codegen::CudaLaunch& l = sort.source.launches.at(0);
    std::array<std::int64_t, 3> grid{};
    for (int d = 0; d < 3; ++d) grid[d] = cuda::evaluate_int(l.grid[d], {sort.rows}, &rows);
    void* params[] = {&row_ptr, &indices, &values, &rows};
    if (grid[0] > 0) emu.launch(l, grid, params);
  }

 private:
  NvrtcCheck* nvrtc_;
  EmulatorCache* cache_;
  std::int64_t budget_;
  std::vector<std::unique_ptr<std::int64_t[]>> memory_;
};

// A target whose arrays are made in device memory; on commit their host copies go to `host`.
class DownloadingTarget final : public runtime::AssemblyTarget {
 public:
  DownloadingTarget(runtime::AssemblyTarget& host, DType index, DType value) : host_(host), index_(index), value_(value) {}
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices, void*& values) override {
    host_.allocate(nnz, row_ptr, host_indices_, host_values_);
    auto& ctx = cuda::default_cuda_runtime().context();
    index_bytes_ = static_cast<std::size_t>(nnz) * static_cast<std::size_t>(dtype_bytes(index_));
    value_bytes_ = static_cast<std::size_t>(nnz) * static_cast<std::size_t>(dtype_bytes(value_));
    indices_ = cuda::DeviceBuffer(ctx, index_bytes_);
    values_ = cuda::DeviceBuffer(ctx, value_bytes_);
    indices = reinterpret_cast<void*>(static_cast<std::uintptr_t>(indices_.get()));
    values = reinterpret_cast<void*>(static_cast<std::uintptr_t>(values_.get()));
  }
  void commit() override {
    indices_.download(host_indices_, index_bytes_);
    values_.download(host_values_, value_bytes_);
    host_.commit();
  }

 private:
  runtime::AssemblyTarget& host_;
  DType index_, value_;
  void* host_indices_ = nullptr;
  void* host_values_ = nullptr;
  std::size_t index_bytes_ = 0, value_bytes_ = 0;
  cuda::DeviceBuffer indices_, values_;
};

// Runs the CUDA build of an assembling kernel on host arguments where it can run: on the GPU
// when gpu_runs() (inputs mirrored into device memory, AssembledCudaKernel, the output copied
// back into `out`), else the same steps in the emulator (scratch_budget bounds the workers:
// a small one makes several rows share a worker).
inline void run_assembled_cuda_build(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                                     runtime::AssemblyTarget& out, NvrtcCheck* nvrtc = nullptr,
                                     EmulatorCache* cache = nullptr, std::int64_t scratch_budget = 1 << 20) {
  runtime::AssemblyPlan plan(stage1);
  if (!gpu_runs()) {
    EmulatedAssemblyDevice dev(nvrtc, cache, scratch_budget);
    return cuda::assemble_on(dev, plan, call, out);
  }
  cuda::AssembledCudaKernel k(stage1, cuda::default_cuda_runtime());
  std::vector<DeviceMirror> mirrors;
  DownloadingTarget target(out, plan.index_dtype, plan.value_dtype);
  k.call(mirror_call(stage1, call, mirrors), target);
}

}  // namespace spindle::test
