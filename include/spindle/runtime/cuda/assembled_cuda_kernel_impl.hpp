// Implementation of AssembledCudaKernel and assemble_on (see assembled_cuda_kernel.hpp).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>

#include "spindle/codegen/cuda_sort_rows.hpp"
#include "spindle/runtime/assembly_steps.hpp"
#include "spindle/runtime/cuda/assembled_cuda_kernel.hpp"
#include "spindle/runtime/cuda/cuda_runtime.hpp"
#include "spindle/runtime/cuda/device_buffer.hpp"
#include "spindle/runtime/cuda/launch.hpp"

namespace spindle::cuda {

namespace assembly_detail {

inline constexpr std::int64_t kMaxWorkers = 32768;
inline constexpr std::int64_t kScratchBytesPerColumn = 20;  // marker (4) + workspace slot (8) + list entry (8)

// The driver's device: arrays in the runtime's context, every step on its stream.
class DriverDevice final : public AssemblyDevice {
 public:
  DriverDevice(CudaRuntime& rt, const CompiledCudaKernel& sym, const CompiledCudaKernel& num,
               std::function<CudaModule&(const codegen::SortRowsSource&)> sort_module)
      : rt_(rt), sym_(sym), num_(num), sort_module_(std::move(sort_module)) {}

  bool device_memory() const override { return true; }
  std::int64_t scratch_budget() const override {
    // A quarter of the free memory, at most 1 GiB.
    CudaContext& c = rt_.context();
    c.make_current();
    std::size_t free = 0, total = 0;
    c.check(c.api().cuMemGetInfo_v2(&free, &total), "cuMemGetInfo");
    return std::min<std::int64_t>(static_cast<std::int64_t>(free / 4), std::int64_t{1} << 30);
  }
  void* allocate(std::size_t bytes) override {
    if (bytes == 0) return nullptr;
    buffers_.emplace_back(rt_.context(), bytes);
    return ptr(buffers_.back().get());
  }
  void fill(void* p, std::size_t bytes, unsigned char byte) override {
    if (bytes == 0) return;
    CudaContext& c = rt_.context();
    c.make_current();
    c.check(c.api().cuMemsetD8Async(dev(p), byte, bytes, rt_.stream().handle()), "cuMemsetD8Async");
  }
  void upload(void* dst, const void* host, std::size_t bytes) override {
    if (bytes == 0) return;
    CudaContext& c = rt_.context();
    c.make_current();
    c.check(c.api().cuMemcpyHtoDAsync_v2(dev(dst), host, bytes, rt_.stream().handle()), "cuMemcpyHtoDAsync");
    rt_.stream().synchronize();  // the host array may change or die after this returns
  }
  void download(void* host, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    CudaContext& c = rt_.context();
    c.make_current();
    c.check(c.api().cuMemcpyDtoHAsync_v2(host, dev(src), bytes, rt_.stream().handle()), "cuMemcpyDtoHAsync");
    rt_.stream().synchronize();
  }
  void run_phase(const lower::AssemblyPhase& phase, const std::vector<runtime::CallArg>& args) override {
    (phase.context.phase == lower::AssemblyContext::symbolic ? sym_ : num_).call(args);
  }
  void sort_rows(const codegen::SortRowsSource& sort, std::int64_t rows, void* row_ptr, void* indices,
                 void* values) override {
    CudaModule& m = sort_module_(sort);
    const codegen::CudaLaunch& l = sort.source.launches.at(0);
    void* params[] = {&row_ptr, &indices, &values, &rows};
    launch(rt_, m.function(l.symbol), l, params, {sort.rows}, &rows, rt_.stream().handle());
    rt_.stream().synchronize();
  }

 private:
  static void* ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }
  static CUdeviceptr dev(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

  CudaRuntime& rt_;
  const CompiledCudaKernel& sym_;
  const CompiledCudaKernel& num_;
  std::function<CudaModule&(const codegen::SortRowsSource&)> sort_module_;
  std::vector<DeviceBuffer> buffers_;
};

}  // namespace assembly_detail

SPINDLE_DECL void assemble_on(AssemblyDevice& dev, const runtime::AssemblyPlan& p,
                              const std::vector<runtime::CallArg>& args, runtime::AssemblyTarget& target) {
  using runtime::phase_arg;
  const bool on_dev = dev.device_memory();
  const auto [rows, cols] = p.output_extent(args, on_dev);
  std::vector<runtime::CallArg> base = p.inputs(args);

  // Workers (blocks of rows): as many as the scratch budget holds, at most one per row.
  std::int64_t workers = assembly_detail::kMaxWorkers;
  if (cols > 0) workers = std::min(workers, dev.scratch_budget() / (assembly_detail::kScratchBytesPerColumn * cols));
  workers = std::max<std::int64_t>(1, std::min(workers, rows));
  const auto cells = static_cast<std::size_t>(workers) * static_cast<std::size_t>(cols);
  const auto words = [](std::int64_t n) { return static_cast<std::size_t>(n) * 8; };

  std::vector<std::int64_t> bounds = runtime::even_blocks(rows, workers);
  void* d_bounds = dev.allocate(words(workers + 1));
  void* d_mark = dev.allocate(cells * 4);
  void* d_counts = dev.allocate(words(rows));
  dev.upload(d_bounds, bounds.data(), words(workers + 1));
  dev.fill(d_mark, cells * 4, 0xFF);  // -1: no column marked yet
  dev.fill(d_counts, words(rows), 0);  // rows no block visits (a kernel whose writes never run) count 0
  std::vector<runtime::CallArg> a = base;
  a.push_back(phase_arg(d_bounds, DType::i64, {workers + 1}, false, on_dev));
  a.push_back(phase_arg(d_mark, DType::i32, {workers, cols}, true, on_dev));
  a.push_back(phase_arg(d_counts, DType::i64, {rows}, true, on_dev));
  try {
    dev.run_phase(p.symbolic, a);
  } catch (const ShapeError& e) {
    throw p.with_shape_hint(e, rows, cols);
  }
  std::vector<std::int64_t> counts(static_cast<std::size_t>(rows));
  dev.download(counts.data(), d_counts, words(rows));

  std::vector<std::int64_t> row_ptr = p.row_offsets(counts);
  const std::int64_t nnz = row_ptr.back();
  void* out_indices = nullptr;
  void* out_values = nullptr;
  target.allocate(nnz, row_ptr, out_indices, out_values);

  runtime::rebalance(bounds, row_ptr);
  dev.upload(d_bounds, bounds.data(), words(workers + 1));
  dev.fill(d_mark, cells * 4, 0xFF);
  void* d_counts2 = dev.allocate(words(rows));
  dev.fill(d_counts2, words(rows), 0);
  void* d_workspace = dev.allocate(cells * 8);  // 8-byte slots
  void* d_list = dev.allocate(cells * 8);
  void* d_row_ptr = dev.allocate(words(rows + 1));
  dev.upload(d_row_ptr, row_ptr.data(), words(rows + 1));
  a = std::move(base);
  a.push_back(phase_arg(d_bounds, DType::i64, {workers + 1}, false, on_dev));
  a.push_back(phase_arg(d_mark, DType::i32, {workers, cols}, true, on_dev));
  a.push_back(phase_arg(d_counts2, DType::i64, {rows}, true, on_dev));
  a.push_back(phase_arg(d_workspace, p.value_dtype, {workers, cols}, true, on_dev));
  a.push_back(phase_arg(d_list, p.index_dtype, {workers, cols}, true, on_dev));
  a.push_back(phase_arg(d_row_ptr, DType::i64, {rows + 1}, false, on_dev));
  a.push_back(phase_arg(out_indices, p.index_dtype, {nnz}, true, on_dev));
  a.push_back(phase_arg(out_values, p.value_dtype, {nnz}, true, on_dev));
  dev.run_phase(p.numeric, a);
  std::vector<std::int64_t> counts2(static_cast<std::size_t>(rows));
  dev.download(counts2.data(), d_counts2, words(rows));
  p.check_same_pattern(counts, counts2);

  if (rows > 0) dev.sort_rows(codegen::cuda_sort_rows(p.index_dtype, p.value_dtype), rows, d_row_ptr, out_indices,
                              out_values);
  target.commit();
}

struct AssembledCudaKernel::Impl {
  Impl(const ir::Function& f, CudaRuntime& r)
      : rt(&r), plan(f), sym(plan.symbolic.function, r, plan.symbolic.context),
        num(plan.numeric.function, r, plan.numeric.context) {}

  CudaModule& sort_module(const codegen::SortRowsSource& sort) {
    std::lock_guard<std::mutex> lock(mutex);
    auto& m = sort_modules[sort.source.module_symbol];
    if (!m) {
      runtime::CacheResult res = rt->lookup({sort.source.source, sort.source.module_symbol, sort.source.module_symbol});
      m = std::static_pointer_cast<CudaModule>(res.module);
    }
    return *m;
  }

  CudaRuntime* rt;
  runtime::AssemblyPlan plan;
  CompiledCudaKernel sym, num;
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<CudaModule>> sort_modules;
};

SPINDLE_DECL AssembledCudaKernel::AssembledCudaKernel(const ir::Function& stage1, CudaRuntime& rt)
    : impl_(std::make_unique<Impl>(stage1, rt)) {}

SPINDLE_DECL AssembledCudaKernel::~AssembledCudaKernel() = default;

SPINDLE_DECL void AssembledCudaKernel::call(const std::vector<runtime::CallArg>& args,
                                            runtime::AssemblyTarget& out) const {
  assembly_detail::DriverDevice dev(*impl_->rt, impl_->sym, impl_->num,
                                    [this](const codegen::SortRowsSource& s) -> CudaModule& {
                                      return impl_->sort_module(s);
                                    });
  assemble_on(dev, impl_->plan, args, out);
}

SPINDLE_DECL int AssembledCudaKernel::output_arg() const { return impl_->plan.output_arg(); }
SPINDLE_DECL const runtime::AssemblyPlan& AssembledCudaKernel::plan() const { return impl_->plan; }
SPINDLE_DECL const CompiledCudaKernel& AssembledCudaKernel::symbolic() const { return impl_->sym; }
SPINDLE_DECL const CompiledCudaKernel& AssembledCudaKernel::numeric() const { return impl_->num; }
SPINDLE_DECL CudaContext& AssembledCudaKernel::context() const { return impl_->rt->context(); }

SPINDLE_DECL std::string AssembledCudaKernel::explain() const {
  const runtime::AssemblyPlan& p = impl_->plan;
  std::string s = message("# assembled output '", p.output, "' [", p.rows_axis, ", columns of ", p.cols_axis,
                          "] on the GPU: symbolic phase (one thread per block of rows), row offsets by prefix sums "
                          "on the host, numeric phase (a dense workspace per block of rows in device memory), rows "
                          "sorted by column (one thread per row)\n");
  return s + impl_->sym.explain() + impl_->num.explain();
}

}  // namespace spindle::cuda
