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
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "spindle/driver/pipeline.hpp"
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
inline codegen::CudaSource emulated_cuda_source(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                                               std::vector<void*>& bufs, std::vector<std::int64_t>& scalars,
                                               std::vector<ir::Var>& vars) {
  driver::PipelineOptions o;
  o.context.kernel = stage1.name;
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
                              NvrtcCheck* nvrtc = nullptr, EmulatorCache* cache = nullptr) {
  std::vector<void*> bufs;
  std::vector<std::int64_t> scalars;
  std::vector<ir::Var> vars;
  codegen::CudaSource source = emulated_cuda_source(stage1, call, bufs, scalars, vars);
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
// NVRTC cubin check when `nvrtc` is given).
inline void run_cuda_build(const ir::Function& stage1, const std::vector<runtime::CallArg>& call,
                           NvrtcCheck* nvrtc = nullptr, EmulatorCache* cache = nullptr) {
  if (!gpu_runs()) return run_cuda_emulated(stage1, call, nvrtc, cache);
  if (!cache) return call_on_gpu(stage1, cuda::CompiledCudaKernel(stage1, cuda::default_cuda_runtime()), call);
  auto& k = cache->gpu[ir::to_string(stage1)];
  if (!k) k = std::make_unique<cuda::CompiledCudaKernel>(stage1, cuda::default_cuda_runtime());
  call_on_gpu(stage1, *k, call);
}

}  // namespace spindle::test
