// Runs a GPU-scheduled stage-III function (emit_cuda) in the CPU emulator of CUDA
// (tests/support/cuda_emulator.hpp: faithful barriers, warp shuffles and atomics), so the
// GPU-only primitives (cache_read, rfactor, atomic_writeback) can be compared with the
// unscheduled kernel run through emit_c on the same random data.
#pragma once

#include <spindle/codegen/cuda_emitter.hpp>
#include <spindle/runtime/cuda/launch.hpp>

#include "support/cuda_emulator.hpp"
#include "unit/schedule/schedule_exec_util.hpp"

namespace sched_test {

class Emulated {
 public:
  explicit Emulated(const ir::Function& f) : fn_(f), src_(spindle::codegen::emit_cuda(f)), emu_(src_) {}

  const spindle::codegen::CudaSource& source() const { return src_; }

  // Runs every launch on a copy of `call` (kernel parameters: the buffers, then the scalars)
  // and returns every buffer afterwards, as doubles.
  std::vector<std::vector<double>> run(Call call) {
    std::vector<void*> bufs;
    for (auto& b : call.buffers) bufs.push_back(b.data());
    std::vector<std::int64_t> scalars(call.scalars.begin(), call.scalars.end());
    std::vector<void*> params;
    for (auto& b : bufs) params.push_back(&b);
    for (auto& s : scalars) params.push_back(&s);
    std::vector<ir::Var> vars;
    for (auto& s : fn_.scalars) vars.push_back(s.var);
    for (auto& l : src_.launches) {
      std::array<std::int64_t, 3> grid{};
      for (int d = 0; d < 3; ++d) grid[d] = spindle::cuda::evaluate_int(l.grid[d], vars, scalars.data());
      if (grid[0] > 0 && grid[1] > 0 && grid[2] > 0) emu_.launch(l, grid, params.data());
    }
    std::vector<std::vector<double>> out;
    for (std::size_t q = 0; q < call.buffers.size(); ++q) {
      DType t = fn_.buffers[q].buffer->dtype;
      std::size_t n = call.buffers[q].size() / spindle::dtype_bytes(t);
      std::vector<double> v(n);
      for (std::size_t k = 0; k < n; ++k) v[k] = get_value(call.buffers[q], t, k);
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  ir::Function fn_;
  spindle::codegen::CudaSource src_;
  spindle::test::CudaEmulator emu_;
};

// The worst difference between the emulated GPU schedule and the unscheduled reference (C)
// over random data of the given sizes.
inline double compare_emulated(const ir::Function& reference, const ir::Function& scheduled,
                               const std::vector<Sizes>& sizes) {
  ir::verify(scheduled, "schedule test");
  Compiled ref(reference);
  Emulated gpu(scheduled);
  double worst = 0;
  std::uint32_t seed = 1;
  for (auto& s : sizes) {
    Call call = make_call(reference, s, seed++);
    worst = std::max(worst, max_difference(gpu.run(call), ref.run(call)));
  }
  return worst;
}

// Sizes for the GPU runs: rows with up to 40 nonzeros (more than one tile of 32), feature
// sizes below, at and above a warp, and zero extents.
inline std::vector<Sizes> gpu_sizes() {
  return {{0, 0, 0, 0}, {1, 1, 1, 1}, {5, 50, 7, 40}, {9, 64, 32, 40}, {6, 45, 45, 40}, {3, 0, 5, 0}, {7, 30, 0, 40},
          {10, 80, 70, 70}};
}

}  // namespace sched_test
