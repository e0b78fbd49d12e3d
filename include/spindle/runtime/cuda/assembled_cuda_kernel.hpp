// A kernel that assembles a sparse output (docs/language.md §4.6), on the GPU: the same two
// phases as runtime/assembled_kernel.hpp, each lowered for CUDA (assemble_rows, then the
// generic schedule: one GPU thread per block of rows, its own marker, workspace and column
// list in device memory), and the steps between them:
//
//   1. symbolic launch -> per-row counts (device), copied to the host
//   2. host: row_ptr = prefix sums, nnz checked against the index type; the output's arrays
//      are allocated in device memory and row_ptr uploaded
//   3. numeric launch (blocks re-balanced by the counts); its counts must equal the symbolic
//      phase's (InternalError otherwise)
//   4. a sort launch (codegen/cuda_sort_rows.hpp): each row by column, one thread per row
//
// The number of GPU workers (blocks of rows) T is bounded by a scratch budget: T * columns *
// 20 bytes (marker, workspace slot, list entry) <= AssemblyDevice::scratch_budget(), and T <=
// rows, T <= 32768. The caller's DeviceCsr receives the arrays only when every step succeeded.
//
// assemble_on() runs the steps on any AssemblyDevice: the driver's (AssembledCudaKernel::call)
// or the tests' CUDA emulator (tests/support/emulated_cuda_call.hpp), so the machines without
// a GPU check the very steps a GPU runs.
//
// This header is light (pimpl); the implementation is in assembled_cuda_kernel_impl.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/runtime/assembled_kernel.hpp"
#include "spindle/runtime/call_arg.hpp"
#include "spindle/runtime/cuda/compiled_cuda_kernel.hpp"
#include "spindle/support/linkage.hpp"

namespace spindle::lower {
struct AssemblyPhase;
}
namespace spindle::codegen {
struct SortRowsSource;
}
namespace spindle::runtime {
struct AssemblyPlan;
}

namespace spindle::cuda {

class CudaContext;

// Where the GPU steps of an assembled kernel run.
class AssemblyDevice {
 public:
  virtual ~AssemblyDevice() = default;
  // Whether allocate() gives device memory (the phases' scratch views are then on_device).
  virtual bool device_memory() const = 0;
  // The most bytes of per-worker scratch (markers, workspaces, lists) one call may use.
  virtual std::int64_t scratch_budget() const = 0;
  // Memory that lives as long as this object (null for 0 bytes).
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void fill(void* p, std::size_t bytes, unsigned char byte) = 0;
  virtual void upload(void* dst, const void* host, std::size_t bytes) = 0;
  virtual void download(void* host, const void* src, std::size_t bytes) = 0;  // complete on return
  // Runs one phase (lower::split_assembly) on `args` and waits for it.
  virtual void run_phase(const lower::AssemblyPhase& phase, const std::vector<runtime::CallArg>& args) = 0;
  // Runs the row sort on `rows` rows (row_ptr: rows + 1 int64 offsets) and waits for it.
  virtual void sort_rows(const codegen::SortRowsSource& sort, std::int64_t rows, void* row_ptr, void* indices,
                         void* values) = 0;
};

// The steps (see the top of this file) of one call on `dev`. `target` allocates the output's
// arrays where `dev` runs (device memory for the driver) and gets them on success.
SPINDLE_DECL void assemble_on(AssemblyDevice& dev, const runtime::AssemblyPlan& plan,
                              const std::vector<runtime::CallArg>& args, runtime::AssemblyTarget& target);

class AssembledCudaKernel {
 public:
  // Lowers both phases for CUDA now (no GPU needed); their modules compile on first use.
  SPINDLE_DECL AssembledCudaKernel(const ir::Function& stage1, CudaRuntime& rt);
  SPINDLE_DECL ~AssembledCudaKernel();
  AssembledCudaKernel(const AssembledCudaKernel&) = delete;
  AssembledCudaKernel& operator=(const AssembledCudaKernel&) = delete;

  // `args` in the lambda's order, device containers; at output_arg() the DeviceCsr view of the
  // output (its shape counts, its pattern and values are replaced through `out`).
  SPINDLE_DECL void call(const std::vector<runtime::CallArg>& args, runtime::AssemblyTarget& out) const;

  SPINDLE_DECL int output_arg() const;
  SPINDLE_DECL const runtime::AssemblyPlan& plan() const;
  SPINDLE_DECL const CompiledCudaKernel& symbolic() const;
  SPINDLE_DECL const CompiledCudaKernel& numeric() const;
  SPINDLE_DECL CudaContext& context() const;  // where the output's arrays are allocated
  SPINDLE_DECL std::string explain() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spindle::cuda

#ifndef SPINDLE_SEPARATE_COMPILATION
#include "spindle/runtime/cuda/assembled_cuda_kernel_impl.hpp"
#endif
