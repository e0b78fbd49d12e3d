// A kernel compiled for the GPU: the shared stage-I..III lowering, then one CUDA module per
// schedule variant (the default GPU schedules pick their parameters from the feature size,
// see autosched/cuda_default.hpp), compiled by NVRTC through the cubin cache on first use
// and launched through the driver. Built once per kernel definition by spindle::Kernel when
// it is called with device arguments (DeviceTensor / DeviceCsr).
//
// Like compiled_kernel.hpp this header is light; the implementation is in
// compiled_cuda_kernel_impl.hpp (compiled once in spindle/impl/spindle.cpp under
// SPINDLE_SEPARATE_COMPILATION).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/runtime/call_arg.hpp"
#include "spindle/runtime/compiled_kernel.hpp"
#include "spindle/support/linkage.hpp"

namespace spindle::driver {
struct CudaLowered;
}

namespace spindle::cuda {

class CudaRuntime;

class CompiledCudaKernel {
 public:
  // Lowers to unscheduled stage III (no GPU needed); variants compile on first use.
  SPINDLE_DECL CompiledCudaKernel(const ir::Function& stage1, CudaRuntime& rt);
  // One phase of a kernel that assembles a sparse output (runtime/cuda/assembled_cuda_kernel.hpp):
  // the function and context made by lower/split_assembly.hpp.
  SPINDLE_DECL CompiledCudaKernel(const ir::Function& stage1, CudaRuntime& rt, const lower::AssemblyContext& assembly);
  // Under a user's schedule (schedule/user_schedule.hpp): its loop steps replace the default
  // GPU schedules (one variant for every call).
  SPINDLE_DECL CompiledCudaKernel(const ir::Function& stage1, CudaRuntime& rt, const Schedule& schedule);
  SPINDLE_DECL ~CompiledCudaKernel();
  CompiledCudaKernel(const CompiledCudaKernel&) = delete;
  CompiledCudaKernel& operator=(const CompiledCudaKernel&) = delete;

  // Checks and binds the device arguments, then launches on the runtime's stream and
  // waits for it. RuntimeError names the kernel and the launch configuration.
  SPINDLE_DECL void call(const std::vector<runtime::CallArg>& args) const;
  // Launches on `stream` (a CUstream; null = the runtime's stream) without waiting.
  SPINDLE_DECL void call_async(const std::vector<runtime::CallArg>& args, void* stream) const;

  // The lowering of the variant the given feature size selects (compiles nothing).
  SPINDLE_DECL driver::CudaLowered lower_variant(std::int64_t feature, bool aligned = true) const;
  // The pattern the default schedule recognised ("spmm (GE-SpMM)", "sddmm (PRedS)", "generic").
  SPINDLE_DECL std::string pattern() const;
  // Where the code of the most recent call came from, and the compile time of that variant.
  SPINDLE_DECL runtime::CompileStats last_stats() const;
  SPINDLE_DECL std::string explain() const;
  SPINDLE_DECL CudaRuntime& runtime() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide CUDA runtime (cuda::default_cuda_runtime()), reachable from light headers.
SPINDLE_DECL CudaRuntime& default_runtime();

}  // namespace spindle::cuda

#ifndef SPINDLE_SEPARATE_COMPILATION
#include "spindle/runtime/cuda/compiled_cuda_kernel_impl.hpp"
#endif
