// GPU timing of `spindle-bench --backend cuda`: the median kernel time of each system, from
// CUDA events on one stream, after warm-up, with the systems interleaved.
//
// Method (the same for every system):
//   1. warm-up: `warmup` untimed calls, then 5 calls, each followed by an event, give the
//      GPU time per call (events) and the host time to enqueue one call plus its event;
//   2. rounds: in every round each system that still needs samples (the order rotates)
//      runs one batch: the stream is first held by a launch gate (a one-thread kernel that
//      spins on %globaltimer for about twice the host time of enqueueing the batch), then
//      one untimed lead-in call, an event, and `batch` calls each followed by an event; then
//      the host waits for the last event. The sample of call b is the time between event b
//      and event b + 1: with the stream held, every call is already queued when the GPU
//      reaches it, so the sample is the GPU time of the call (its kernels and the gaps
//      between them), not the host's launch overhead. A batch whose host enqueue took longer
//      than the gate is discarded and redone with a longer gate (at most 4 times; later
//      overruns are kept and counted in gate_overruns). A batch lasts about 2 ms of GPU time
//      (1..256 calls);
//   3. a system is done after `reps` samples (fixed mode) or, adaptively, once it has at
//      least min_reps samples and min_time seconds of sampled GPU time (max_reps caps it).
// Without a gate (its kernel could not be built) the samples may include launch gaps; the
// report says so.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/support/timer.hpp>

#include "timing.hpp"

namespace bench {

// Holds a stream for a given time: spindle_bench_gate(ns) spins one GPU thread on the
// global nanosecond timer. Compiled by NVRTC through the CUDA runtime's kernel cache.
class LaunchGate {
 public:
  static constexpr const char* kSymbol = "spindle_bench_gate";
  static constexpr const char* kSource =
      "extern \"C\" __global__ void spindle_bench_gate(unsigned long long ns) {\n"
      "  unsigned long long start, now;\n"
      "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(start));\n"
      "  do {\n"
      "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(now));\n"
      "  } while (now - start < ns);\n"
      "}\n";

  explicit LaunchGate(spindle::cuda::CudaRuntime& rt) : context_(&rt.context()) {
    module_ = rt.load({kSource, kSymbol, "launch gate"});
    function_ = static_cast<spindle::cuda::CUfunction>(module_->function(kSymbol));
  }

  // Enqueues the spin kernel on `stream` for `seconds`.
  void hold(spindle::cuda::CUstream stream, double seconds) const {
    unsigned long long ns = static_cast<unsigned long long>(std::max(seconds, 0.0) * 1e9);
    void* params[] = {&ns};
    context_->make_current();
    context_->check(context_->api().cuLaunchKernel(function_, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr),
                    "cuLaunchKernel (spindle_bench_gate, grid 1x1x1, block 1x1x1)");
  }

 private:
  spindle::cuda::CudaContext* context_;
  std::shared_ptr<spindle::cuda::CudaModule> module_;
  spindle::cuda::CUfunction function_ = nullptr;
};

struct GpuContender {
  std::string name;
  std::function<void(spindle::cuda::CUstream)> enqueue;  // one call, no wait
  Samples samples;                                       // GPU seconds per call (events)
  double host_enqueue_s = NAN;                           // host time to enqueue one call + event
  int gate_overruns = 0;                                 // batches kept although the host was late
};

inline void measure_gpu_interleaved(spindle::cuda::CudaContext& ctx, spindle::cuda::CudaStream& stream,
                                    std::vector<GpuContender*> cs, const TimingPolicy& p, const LaunchGate* gate) {
  using spindle::cuda::CudaEvent;
  constexpr double kBatchGpuSeconds = 0.002;
  constexpr int kMaxBatch = 256, kEstimateCalls = 5, kMaxRetries = 4;
  constexpr double kMaxGateSeconds = 0.1;
  std::vector<CudaEvent> ev;
  ev.reserve(kMaxBatch + 1);
  for (int k = 0; k <= kMaxBatch; ++k) ev.emplace_back(ctx);
  const spindle::cuda::CUstream s = stream.handle();

  const std::size_t n = cs.size();
  std::vector<int> batch(n, 1);
  std::vector<double> est_gpu(n);
  for (std::size_t c = 0; c < n; ++c) {
    for (int w = 0; w < p.warmup; ++w) cs[c]->enqueue(s);
    stream.synchronize();
    ev[0].record(s);
    spindle::Timer host;
    for (int k = 1; k <= kEstimateCalls; ++k) {
      cs[c]->enqueue(s);
      ev[static_cast<std::size_t>(k)].record(s);
    }
    cs[c]->host_enqueue_s = host.seconds() / kEstimateCalls;
    est_gpu[c] = std::max(CudaEvent::elapsed_ms(ev[0], ev[kEstimateCalls]) * 1e-3 / kEstimateCalls, 1e-7);
    batch[c] = static_cast<int>(std::clamp(std::ceil(kBatchGpuSeconds / est_gpu[c]), 1.0, double(kMaxBatch)));
  }
  auto done = [&](std::size_t c) {
    const Samples& x = cs[c]->samples;
    const int count = static_cast<int>(x.seconds.size());
    if (p.reps > 0) return count >= p.reps;
    return count >= p.max_reps || (count >= p.min_reps && x.total() >= p.min_time);
  };
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t q = 0; q < n; ++q) {
      const std::size_t c = (round + q) % n;
      if (done(c)) continue;
      any = true;
      GpuContender& x = *cs[c];
      int count = batch[c];
      if (p.reps > 0) count = std::min(count, p.reps - static_cast<int>(x.samples.seconds.size()));
      for (int attempt = 0;; ++attempt) {
        // The gate covers the enqueue of the lead-in call and the batch, twice over.
        const double gate_s = std::min(2.0 * (count + 1) * x.host_enqueue_s + 50e-6, kMaxGateSeconds);
        spindle::Timer host;
        if (gate) gate->hold(s, gate_s);
        x.enqueue(s);  // lead-in, untimed
        ev[0].record(s);
        for (int b = 0; b < count; ++b) {
          x.enqueue(s);
          ev[static_cast<std::size_t>(b) + 1].record(s);
        }
        const double host_s = host.seconds();
        ev[static_cast<std::size_t>(count)].synchronize();
        if (gate && host_s > gate_s) {
          if (attempt < kMaxRetries && gate_s < kMaxGateSeconds) {
            x.host_enqueue_s = std::max(x.host_enqueue_s * 2, host_s / (count + 1));
            continue;  // discard: some calls may have waited for the host
          }
          ++x.gate_overruns;
        }
        for (int b = 0; b < count; ++b)
          x.samples.seconds.push_back(CudaEvent::elapsed_ms(ev[static_cast<std::size_t>(b)],
                                                            ev[static_cast<std::size_t>(b) + 1]) * 1e-3);
        break;
      }
    }
    if (!any) break;
  }
}

}  // namespace bench
