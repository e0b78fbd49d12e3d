// `spindle-bench --backend cuda`: Spindle's GPU build of spindle::ops::spmm<T>() and
// sddmm<T>() (the same definitions the CPU backend runs) against cuSPARSE (cusparseSpMM with
// its CSR algorithms, cusparseSDDMM) in the same run, on one stream:
//
//   1. NVRTC compile latency (cuda_compile_latency.hpp), with or without a GPU;
//   2. without a usable GPU: say why (spindle::cuda_unavailable_reason()) and stop; exit 0;
//   3. with one: device properties, the HBM roofline (cuda_roofline.hpp), cuSPARSE (missing:
//      the peer is reported unavailable with the reason, the rest runs), then per matrix,
//      operator and feature size: operands uploaded once, Spindle's CPU result as reference,
//      one checked call of every system (outputs poisoned with NaN bytes first), then event
//      timing (cuda_timing.hpp) and GFLOP/s (2 nnz K for both operators), effective GB/s
//      (the CPU benchmark's traffic model) and the fraction of the copy roofline.
//
// Correctness (normwise relative error, max |x - ref| / max |ref|, against --tolerance,
// 1e-4 for f32): Spindle's GPU result against Spindle's CPU result and against cuSPARSE's
// (its default algorithm, or the first that ran), and every cuSPARSE algorithm against the
// CPU result. cuSPARSE's SDDMM does not scale by A's values (peers_cusparse.hpp): its result
// is multiplied by them on the host before the comparison.
//
// Exit status: 0, or 1 when a result differs beyond the tolerance or an NVRTC compile failed
// (an unavailable NVRTC is not a failure).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/spindle.hpp>

#include "cli.hpp"
#include "cuda_compile_latency.hpp"
#include "cuda_report.hpp"
#include "cuda_roofline.hpp"
#include "cuda_timing.hpp"
#include "matrices.hpp"
#include "peers_cusparse.hpp"
#include "peers_eigen.hpp"
#include "roofline.hpp"

namespace bench {

namespace cudabench {

using spindle::cuda::CUdeviceptr;
using spindle::cuda::CUstream;

inline void* as_ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(p)); }

// Every byte of [p, p + bytes) set to 0xFF (a NaN for f32 and f64), on the stream.
inline void poison(spindle::cuda::CudaContext& ctx, CUdeviceptr p, std::size_t bytes, CUstream s) {
  if (bytes == 0) return;
  ctx.make_current();
  ctx.check(ctx.api().cuMemsetD8Async(p, 0xFF, bytes, s), "cuMemsetD8Async (poisoning an output)");
}

template <class T>
std::vector<T> download(const spindle::cuda::DeviceBuffer& b, std::size_t count, spindle::cuda::CudaStream& s) {
  std::vector<T> v(count);
  b.download(v.data(), count * sizeof(T), &s);
  s.synchronize();
  return v;
}

// One system of a case: how it is enqueued, where its output is, and how to get it.
struct System {
  std::string name, label;
  std::string unavailable;
  std::function<void(CUstream)> enqueue;
  std::function<void()> poison;
  std::function<std::vector<double>()> result;  // the output (as compared), after a sync
};

}  // namespace cudabench

// The kernels of a run, defined once: their CPU build gives the reference results, their GPU
// build (compile_cuda(), kept by the kernel object) is what is measured.
template <class T>
struct CudaKernels {
  decltype(spindle::ops::spmm<T>()) spmm = spindle::ops::spmm<T>();
  decltype(spindle::ops::sddmm<T>()) sddmm = spindle::ops::sddmm<T>();
};

// One (matrix, op, feat) on the GPU.
template <class T>
GpuCaseResult run_cuda_case(const Config& cfg, const Loaded<T>& m, CudaKernels<T>& kernels, const std::string& op, int feat,
                            spindle::cuda::CudaContext& ctx, spindle::cuda::CudaStream& stream,
                            const spindle::cuda::DeviceCsr<T>& da, CusparsePeer<T>* peer, const LaunchGate* gate,
                            CudaReport& report) {
  using namespace cudabench;
  using spindle::cuda::DeviceBuffer;
  using spindle::cuda::DeviceTensor;
  const spindle::Csr<T>& a = m.a;
  const std::int64_t rows = a.rows(), cols = a.cols(), nnz = a.nnz(), k = feat;
  const std::uint64_t seed = cfg.seed * 1000003 + static_cast<std::uint64_t>(feat);
  const CUstream s = stream.handle();

  GpuCaseResult r;
  r.matrix = m.info.name;
  r.op = op;
  r.rows = rows, r.cols = cols, r.nnz = nnz, r.feat = k;
  r.flops = 2.0 * static_cast<double>(nnz) * static_cast<double>(k);
  r.bytes = model_bytes(CaseShape{op, rows, cols, nnz, k, static_cast<int>(sizeof(T)), 4});
  r.hbm_gbs = report.hbm.best_gbs;

  std::vector<double> reference;  // Spindle's CPU result
  std::vector<System> systems;
  // Operands; they must outlive the timing below.
  DeviceTensor<T> dx, dy, out, out_peer;
  DeviceBuffer cvals, cvals_peer;
  std::vector<spindle::runtime::CallArg> args;
  const spindle::cuda::CompiledCudaKernel* gk = nullptr;
  auto widen = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };

  if (op == "spmm") {
    auto x = spindle::Tensor<T>::random({cols, k}, seed, -1.0, 1.0);
    auto yref = spindle::Tensor<T>::zeros({rows, k});
    auto& kernel = kernels.spmm;
    kernel(a, x, yref);
    reference.assign(yref.data(), yref.data() + yref.size());
    dx = DeviceTensor<T>::from_host(x, &stream);
    stream.synchronize();  // x (host) goes out of scope below
    out = DeviceTensor<T>({rows, k}, ctx);
    out_peer = DeviceTensor<T>({rows, k}, ctx);
    gk = &kernel.compile_cuda();
    args = {spindle::detail::make_call_arg(std::as_const(da)), spindle::detail::make_call_arg(std::as_const(dx)),
            spindle::detail::make_call_arg(out)};
    const std::size_t count = static_cast<std::size_t>(rows * k);
    systems.push_back({"spindle", "spindle::ops::spmm (default GPU schedule, GE-SpMM style)", "",
                       [&, gk](CUstream st) { gk->call_async(args, st); },
                       [&] { poison(ctx, out.device_ptr(), out.bytes(), s); },
                       [&, count] { return widen(download<T>(out.buffer(), count, stream)); }});
    if (peer) {
      peer->prepare_spmm(da, dx, out_peer);
      for (const auto& alg : cusparse::spmm_algorithms()) {
        System sys{std::string("cusparse-") + alg.short_name,
                   std::string("cusparseSpMM ") + alg.name + " (CSR, row-major X and C, preprocessed)",
                   peer->spmm_setup(alg), {}, {}, {}};
        sys.enqueue = [peer, alg](CUstream) { peer->spmm(alg); };
        sys.poison = [&] { poison(ctx, out_peer.device_ptr(), out_peer.bytes(), s); };
        sys.result = [&, count] { return widen(download<T>(out_peer.buffer(), count, stream)); };
        systems.push_back(std::move(sys));
      }
    }
  } else {  // sddmm: C = A .* (X Y^T) on A's pattern
    auto x = spindle::Tensor<T>::random({rows, k}, seed, -1.0, 1.0);
    auto y = spindle::Tensor<T>::random({cols, k}, seed + 7, -1.0, 1.0);
    std::vector<T> cref(static_cast<std::size_t>(nnz), T(0));
    spindle::CsrView<T> cview(rows, cols, nnz, a.indptr().data(), a.indices().data(), cref.data(), "C");
    auto& kernel = kernels.sddmm;
    kernel(a, x, y, cview);
    reference.assign(cref.begin(), cref.end());
    dx = DeviceTensor<T>::from_host(x, &stream);
    dy = DeviceTensor<T>::from_host(y, &stream);
    stream.synchronize();  // x and y (host) go out of scope below
    cvals = DeviceBuffer(ctx, static_cast<std::size_t>(nnz) * sizeof(T));
    cvals_peer = DeviceBuffer(ctx, static_cast<std::size_t>(nnz) * sizeof(T));
    gk = &kernel.compile_cuda();
    // C shares A's device structure (as the CPU benchmark's CsrView shares A's host arrays).
    spindle::runtime::CallArg c;
    c.view = const_cast<spindle::cuda::DeviceCsr<T>&>(da).storage();
    c.view.data = as_ptr(cvals.get());
    c.view.writable = true;
    c.view.name = "C";
    args = {spindle::detail::make_call_arg(std::as_const(da)), spindle::detail::make_call_arg(std::as_const(dx)),
            spindle::detail::make_call_arg(std::as_const(dy)), c};
    const std::size_t count = static_cast<std::size_t>(nnz);
    systems.push_back({"spindle", "spindle::ops::sddmm (default GPU schedule, PRedS style)", "",
                       [&, gk](CUstream st) { gk->call_async(args, st); },
                       [&, count] { poison(ctx, cvals.get(), count * sizeof(T), s); },
                       [&, count] { return widen(download<T>(cvals, count, stream)); }});
    if (peer) {
      System sys{"cusparse-default",
                 std::string("cusparseSDDMM ") + cusparse::kSddmmDefault.name +
                     " (X Y^T on A's pattern, row-major X and Y, Y transposed, preprocessed; no scaling by A)",
                 peer->prepare_sddmm(da, dx, dy, cvals_peer.get()), {}, {}, {}};
      sys.enqueue = [peer](CUstream) { peer->sddmm(); };
      sys.poison = [&, count] { poison(ctx, cvals_peer.get(), count * sizeof(T), s); };
      // Scaled by A's values on the host, to compare with C = A .* (X Y^T).
      sys.result = [&, count] {
        std::vector<T> v = download<T>(cvals_peer, count, stream);
        std::vector<double> w(count);
        for (std::size_t q = 0; q < count; ++q) w[q] = static_cast<double>(v[q]) * static_cast<double>(a.values()[q]);
        return w;
      };
      systems.push_back(std::move(sys));
    }
  }
  stream.synchronize();

  // Checked calls: the first Spindle call also compiles (or loads) the variant.
  std::vector<double> peer_result;
  std::vector<GpuSystemResult> results;
  for (auto& sys : systems) {
    GpuSystemResult x;
    x.name = sys.name;
    x.label = sys.label;
    if (!sys.unavailable.empty()) {
      x.available = false;
      x.unavailable = sys.unavailable;
      results.push_back(x);
      continue;
    }
    try {
      sys.poison();
      sys.enqueue(s);
      std::vector<double> got = sys.result();
      x.error_vs_cpu = relative_error(got.data(), reference.data(), static_cast<std::int64_t>(got.size()));
      if (x.name != "spindle" && peer_result.empty()) peer_result = std::move(got);
      if (x.name == "spindle") {
        auto st = gk->last_stats();
        r.code_source = spindle::runtime::code_source_name(st.source);
        r.first_call_compile_us = st.load_micros;
        r.variant = gk->lower_variant(k).variant.describe();
        if (cfg.explain) std::fprintf(stderr, "%s\n", gk->explain().c_str());
      }
    } catch (const std::exception& e) {
      // A system that fails is not timed; a failing Spindle call counts as a mismatch.
      x.available = false;
      x.unavailable = std::string("failed: ") + e.what();
      std::fprintf(stderr, "[bench] %s %s %s K=%d failed: %s\n", x.name.c_str(), m.info.name.c_str(), op.c_str(),
                   feat, e.what());
      if (x.name == "spindle") {
        x.ok = false;
        ++report.mismatches;
      }
    }
    results.push_back(x);
  }
  // Spindle vs cuSPARSE: Spindle's output is still on the device.
  if (!peer_result.empty() && results[0].available) {
    std::vector<double> mine = systems[0].result();
    results[0].error_vs_peer = relative_error(mine.data(), peer_result.data(), static_cast<std::int64_t>(mine.size()));
  }

  // Timing.
  std::vector<GpuContender> cont;
  for (std::size_t q = 0; q < systems.size(); ++q)
    if (results[q].available) cont.push_back({systems[q].name, systems[q].enqueue, {}, NAN, 0});
  std::vector<GpuContender*> ptrs;
  for (auto& c : cont) ptrs.push_back(&c);
  measure_gpu_interleaved(ctx, stream, ptrs, {cfg.warmup, cfg.reps, cfg.min_reps, cfg.max_reps, cfg.min_time}, gate);

  for (auto& x : results) {
    for (auto& c : cont) {
      if (c.name != x.name) continue;
      x.median_s = c.samples.median();
      x.min_s = c.samples.min();
      x.reps = static_cast<int>(c.samples.seconds.size());
      x.host_enqueue_s = c.host_enqueue_s;
      x.gate_overruns = c.gate_overruns;
      x.gflops = r.flops / x.median_s * 1e-9;
      x.gbs = r.bytes / x.median_s * 1e-9;
      x.roofline = r.hbm_gbs > 0 ? x.gbs / r.hbm_gbs : NAN;
    }
    if (x.available) {
      x.ok = x.error_vs_cpu <= cfg.tolerance && (std::isnan(x.error_vs_peer) || x.error_vs_peer <= cfg.tolerance);
      if (!x.ok) {
        ++report.mismatches;
        std::fprintf(stderr, "[bench] MISMATCH: %s %s %s K=%d: relative error %.3g vs Spindle's CPU result, %.3g vs "
                             "cuSPARSE\n", x.name.c_str(), m.info.name.c_str(), op.c_str(), feat, x.error_vs_cpu,
                     x.error_vs_peer);
      }
    }
  }
  for (auto& x : results) x.ratio = x.median_s / results[0].median_s;
  for (auto& x : results)
    if (x.name != "spindle" && x.available && (r.best_peer.empty() || x.ratio < r.best_ratio)) {
      r.best_peer = x.name;
      r.best_ratio = x.ratio;
    }
  r.systems = std::move(results);
  return r;
}

template <class T>
int run_cuda(const Config& cfg) {
  CudaReport report;
  report.dtype = cfg.dtype;
  report.tolerance = cfg.tolerance;
  report.load_before = load_average();
  report.timing = (cfg.reps > 0 ? std::to_string(cfg.reps) + " timed calls per system and case"
                                : "adaptive, >= " + std::to_string(cfg.min_reps) + " calls and >= " +
                                      fmt("%g", cfg.min_time) + " s of GPU time per system and case") +
                  ", " + std::to_string(cfg.warmup) +
                  " warm-up calls; CUDA events around each call on one stream held by a launch gate while a batch "
                  "is enqueued; systems interleaved in rotating rounds";
  const auto options = spindle::cuda::CudaOptions::from_env();

  report.gpu = spindle::cuda_available(options);
  if (!report.gpu) report.gpu_reason = spindle::cuda_unavailable_reason(options);
  spindle::cuda::CudaContext* ctx = nullptr;
  if (report.gpu) {
    spindle::Timer t;
    ctx = &spindle::cuda::CudaContext::process(options);
    report.context_create_us = t.micros();
  }

  if (cfg.compile_latency) {
    std::map<std::string, std::size_t> seen;  // module symbol -> entry
    for (const std::string& op : cfg.ops)
      for (int feat : cfg.feats) {
        std::string module;
        try {
          auto stage1 = with_op_kernel<T>(op, [](auto kk) { return kk.ir(); });
          module = cuda_compile_request(stage1, feat).symbol;
        } catch (const std::exception&) {
          module = op + std::to_string(feat);  // measured (and failing) below
        }
        if (auto it = seen.find(module); it != seen.end()) {  // the variant of an earlier feature size
          report.compile[it->second].same_module_feats.push_back(feat);
          continue;
        }
        seen.emplace(module, report.compile.size());
        std::fprintf(stderr, "[bench] NVRTC compile latency of %s K=%d\n", op.c_str(), feat);
        report.compile.push_back(measure_cuda_compile_latency<T>(op, feat, report.gpu, cfg.cuda_arch));
        const auto& c = report.compile.back();
        if (!c.ok && !c.unavailable) ++report.compile_failures;
        if (c.ok && report.compile_target.empty()) report.compile_target = c.target;
      }
    if (report.compile_target.empty())
      report.compile_target = report.gpu ? "the device's" : spindle::message("sm_", cfg.cuda_arch, " (fixed: no GPU)");
  }
  try {
    spindle::cuda::NvrtcEngine engine(options, report.gpu ? std::nullopt : std::optional<int>(cfg.cuda_arch));
    auto [major, minor] = engine.nvrtc_version();
    report.nvrtc_version = spindle::message(major, ".", minor);
    report.nvrtc_library = engine.nvrtc().resolved;
  } catch (const std::exception& e) {
    report.nvrtc_error = e.what();
  }

  if (report.gpu) {
    const spindle::cuda::CudaDevice& dev = ctx->device();
    report.device_name = dev.name;
    report.cc_major = dev.cc_major;
    report.cc_minor = dev.cc_minor;
    report.sm_count = dev.sm_count;
    report.memory_gib = static_cast<double>(dev.global_memory) / (1024.0 * 1024.0 * 1024.0);
    int v = 0;
    if (ctx->api().cuDriverGetVersion(&v) == spindle::cuda::CUDA_SUCCESS)
      report.driver_version = spindle::message(v / 1000, ".", (v % 1000) / 10);
  }
  if (report.gpu && !cfg.compile_latency_only) {
    spindle::cuda::CudaRuntime& rt = spindle::default_cuda_runtime();
    SPINDLE_CHECK(&rt.context() == ctx, spindle::InternalError,
                  "spindle-bench: the default CUDA runtime uses another context than the benchmark");
    spindle::cuda::CudaStream stream(*ctx);
    std::fprintf(stderr, "[bench] HBM roofline (device-to-device copy)\n");
    report.hbm = measure_hbm(*ctx, stream);
    report.hbm_measured = true;

    const CusparseApi* api = nullptr;
    if (cfg.cusparse) {
      try {
        api = &cusparse_api(options);
        report.cusparse_version = api->version();
        report.cusparse_library = api->path;
      } catch (const std::exception& e) {
        report.cusparse_error = e.what();
        std::fprintf(stderr, "[bench] cuSPARSE is not measured: %s\n", e.what());
      }
    } else {
      report.cusparse_error = "left out (--no-cusparse)";
    }
    std::unique_ptr<LaunchGate> gate;
    try {
      gate = std::make_unique<LaunchGate>(rt);
      report.gate = true;
    } catch (const std::exception& e) {
      report.gate_error = e.what();
    }

    auto matrices = load_matrices<T>(cfg);
    for (auto& m : matrices) report.matrices.push_back(m.info);
    report.ran_gpu_cases = true;
    CudaKernels<T> kernels;
    for (auto& m : matrices) {
      auto da = spindle::cuda::DeviceCsr<T>::from_host(m.a, &stream);
      stream.synchronize();
      std::unique_ptr<CusparsePeer<T>> peer;
      if (api) peer = std::make_unique<CusparsePeer<T>>(*api, *ctx, stream.handle());
      for (const std::string& op : cfg.ops)
        for (int feat : cfg.feats) {
          std::fprintf(stderr, "[bench] %s %s K=%d on the GPU\n", m.info.name.c_str(), op.c_str(), feat);
          report.cases.push_back(run_cuda_case<T>(cfg, m, kernels, op, feat, *ctx, stream, da, peer.get(), gate.get(), report));
        }
    }
  }

  report.load_after = load_average();
  if (cfg.json)
    std::fputs(cuda_to_json(report).c_str(), stdout);
  else
    print_cuda_tables(stdout, report);
  if (!cfg.json_file.empty()) {
    std::FILE* f = std::fopen(cfg.json_file.c_str(), "w");
    if (!f || std::fputs(cuda_to_json(report).c_str(), f) < 0 || std::fclose(f) != 0)
      throw std::runtime_error("cannot write " + cfg.json_file);
  }
  return report.mismatches || report.compile_failures ? 1 : 0;
}

}  // namespace bench
