// The HBM roofline of `spindle-bench --backend cuda`, measured in the same run: a large
// device-to-device copy (cuMemcpyDtoDAsync on the benchmark's stream) timed with CUDA events.
//
// Size: 1 GiB per buffer, or a quarter of the free device memory when that is smaller
// (rounded down to MiB), far beyond any L2. Bytes counted: read + written (2 x size per
// copy). Two warm-up copies, then kHbmReps timed ones; the roofline is the best (as the CPU
// triad), the median is reported too. The device's theoretical peak (2 x memory clock x
// bus width, from the driver's attributes) is reported beside it.
//
// The kernels' effective GB/s use the CPU benchmark's compulsory-traffic model
// (roofline.hpp, model_bytes); roofline fraction = effective GB/s / copy GB/s. A fraction
// above 1 means the working set was L2-resident (small graphs).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include <spindle/runtime/cuda/cuda.hpp>

#include "timing.hpp"

namespace bench {

struct HbmResult {
  double copy_mib = 0;  // size of one copy
  double best_gbs = 0, median_gbs = 0;
  double peak_gbs = 0;  // theoretical, from the device attributes (0: unknown)
  int reps = 0;
};

inline constexpr int kHbmReps = 10;

inline HbmResult measure_hbm(spindle::cuda::CudaContext& ctx, spindle::cuda::CudaStream& stream) {
  using spindle::cuda::CudaEvent;
  using spindle::cuda::DeviceBuffer;
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  const std::size_t free = ctx.memory_info().first;
  const std::size_t bytes = std::min<std::size_t>(std::size_t{1} << 30, free / 4) / kMiB * kMiB;
  SPINDLE_CHECK(bytes >= 64 * kMiB, spindle::RuntimeError, "HBM roofline: only ", free / kMiB,
                " MiB of device memory are free on ", ctx.device().description(), "; the copy needs 2 x 64 MiB at least");
  DeviceBuffer src(ctx, bytes), dst(ctx, bytes);
  src.fill_zero(&stream);
  dst.fill_zero(&stream);
  CudaEvent start(ctx), end(ctx);
  for (int w = 0; w < 2; ++w) dst.copy_from(src, bytes, &stream);
  Samples samples;
  for (int r = 0; r < kHbmReps; ++r) {
    start.record(stream);
    dst.copy_from(src, bytes, &stream);
    end.record(stream);
    samples.seconds.push_back(CudaEvent::elapsed_ms(start, end) * 1e-3);
  }
  stream.synchronize();
  HbmResult h;
  h.copy_mib = static_cast<double>(bytes) / kMiB;
  h.best_gbs = 2.0 * static_cast<double>(bytes) / samples.min() * 1e-9;
  h.median_gbs = 2.0 * static_cast<double>(bytes) / samples.median() * 1e-9;
  h.peak_gbs = ctx.device().peak_bandwidth_gbs();
  h.reps = kHbmReps;
  return h;
}

}  // namespace bench
