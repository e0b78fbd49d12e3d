// Results of `spindle-bench --backend cuda` and their two renderings: aligned text tables and
// one JSON document, in the style of the CPU report (report.hpp: seconds in JSON, non-finite
// numbers as null, strings escaped).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_compile_latency.hpp"
#include "cuda_roofline.hpp"
#include "report.hpp"

namespace bench {

struct GpuSystemResult {
  std::string name;   // "spindle", "cusparse-default", "cusparse-csr_alg1", ...
  std::string label;  // how it was run
  bool available = true;
  std::string unavailable;  // why not (cuSPARSE status), when !available
  double median_s = NAN, min_s = NAN;
  int reps = 0;
  double gflops = NAN, gbs = NAN, roofline = NAN;
  double ratio = NAN;           // this system's time / Spindle's time (> 1: Spindle faster)
  double error_vs_cpu = NAN;    // vs Spindle's CPU result of the same definition
  double error_vs_peer = NAN;   // Spindle only: vs cuSPARSE's result
  double host_enqueue_s = NAN;  // host time to enqueue one call
  int gate_overruns = 0;
  bool ok = true;
};

struct GpuCaseResult {
  std::string matrix, op;
  std::int64_t rows = 0, cols = 0, nnz = 0, feat = 0;
  double flops = 0, bytes = 0, hbm_gbs = 0;
  std::string variant;      // Spindle's default GPU schedule variant
  std::string code_source;  // where the variant's module came from on its first call
  double first_call_compile_us = NAN;
  std::vector<GpuSystemResult> systems;  // spindle first
  std::string best_peer;                 // fastest available cuSPARSE system
  double best_ratio = NAN;               // its time / Spindle's time
};

struct CudaReport {
  std::string dtype, timing;
  double tolerance = 0;
  double load_before = NAN, load_after = NAN;
  // NVRTC
  std::string nvrtc_version, nvrtc_library, nvrtc_error;
  // GPU
  bool gpu = false;
  std::string gpu_reason;  // cuda_unavailable_reason() when !gpu
  std::string device_name;
  int cc_major = 0, cc_minor = 0, sm_count = 0;
  double memory_gib = 0;
  std::string driver_version;
  double context_create_us = NAN;
  bool hbm_measured = false;
  HbmResult hbm;
  // cuSPARSE
  std::string cusparse_version, cusparse_library, cusparse_error;
  bool gate = false;
  std::string gate_error;
  bool ran_gpu_cases = false;
  std::string compile_target;
  std::vector<MatrixInfo> matrices;
  std::vector<CudaCompileLatency> compile;
  std::vector<GpuCaseResult> cases;
  int mismatches = 0;
  int compile_failures = 0;
};

inline std::string us(double s) { return fmt(s < 1e-3 ? "%.2f" : s < 1e-1 ? "%.1f" : "%.0f", s * 1e6); }

inline void print_cuda_tables(std::FILE* out, const CudaReport& r) {
  std::fprintf(out, "\nspindle-bench --backend cuda: dtype %s, NVRTC %s, cuSPARSE %s\n", r.dtype.c_str(),
               r.nvrtc_version.empty() ? ("unavailable: " + r.nvrtc_error).c_str()
                                       : (r.nvrtc_version + " (" + r.nvrtc_library + ")").c_str(),
               !r.cusparse_version.empty() ? (r.cusparse_version + " (" + r.cusparse_library + ")").c_str()
               : !r.cusparse_error.empty() ? ("unavailable: " + r.cusparse_error).c_str()
               : r.gpu ? "not loaded" : "not loaded (no GPU)");
  std::fprintf(out, "machine load (1-min average): %.2f before, %.2f after the run\n", r.load_before, r.load_after);
  if (r.gpu) {
    std::fprintf(out, "device: %s, compute capability %d.%d (sm_%d%d), %d SMs, %.1f GiB, driver API %s; context "
                      "created in %.0f ms\n",
                 r.device_name.c_str(), r.cc_major, r.cc_minor, r.cc_major, r.cc_minor, r.sm_count, r.memory_gib,
                 r.driver_version.c_str(), r.context_create_us / 1e3);
    if (r.hbm_measured)
      std::fprintf(out, "roofline: device-to-device copy of %.0f MiB: %.0f GB/s best, %.0f GB/s median (bytes read + "
                        "written); theoretical peak %s GB/s\n",
                   r.hbm.copy_mib, r.hbm.best_gbs, r.hbm.median_gbs, fmt("%.0f", r.hbm.peak_gbs > 0 ? r.hbm.peak_gbs : NAN).c_str());
    if (r.ran_gpu_cases) {
      std::fprintf(out, "timing: %s\n", r.timing.c_str());
      if (!r.gate) std::fprintf(out, "  note: no launch gate (%s): samples may include launch gaps\n", r.gate_error.c_str());
    }
  } else {
    std::fprintf(out, "GPU part not run: %s\n", r.gpu_reason.c_str());
    std::fprintf(out, "GPU figures: not measured (no GPU)%s\n",
                 r.compile.empty() ? "" : "; the NVRTC compile latency below needs none");
  }
  for (auto& m : r.matrices)
    std::fprintf(out, "matrix %-22s %9lld x %-9lld nnz %-10lld (%s, %.2f s to load)\n", m.name.c_str(),
                 (long long)m.rows, (long long)m.cols, (long long)m.nnz, m.source.c_str(), m.load_s);

  if (!r.compile.empty()) {
    std::fprintf(out, "\nNVRTC compile latency (us; medians), target %s\n", r.compile_target.c_str());
    std::fprintf(out, "%-6s %4s %-34s %9s %10s %10s %10s %10s %8s %9s %10s %9s %9s %8s\n", "op", "K", "variant",
                 "lower+cg", "nvrtc init", "cold 1st", "cold med", "(compile", "load)", "mem hit", "disk hit*",
                 "(engine", "get)", "bytes");
    for (auto& c : r.compile) {
      if (!c.ok) {
        std::fprintf(out, "%-6s %4lld %s: %s\n", c.op.c_str(), (long long)c.feat, c.unavailable ? "UNAVAILABLE" : "FAILED",
                     c.error == r.nvrtc_error ? "NVRTC could not be loaded (see above)" : c.error.c_str());
        continue;
      }
      std::fprintf(out, "%-6s %4lld %-34.34s %9.0f %10.0f %10.0f %10.0f %10.0f %8s %9.2f %10.0f %9.0f %9.0f %8.0f\n",
                   c.op.c_str(), (long long)c.feat, c.variant.c_str(), c.lower_codegen_us, c.nvrtc_init_us,
                   c.cold_first_us, c.cold_median_us, c.cold_compile_us,
                   c.gpu ? fmt("%.0f", c.cold_load_us).c_str() : "needsGPU", c.memory_hit_us, c.disk_hit_us,
                   c.disk_engine_us, c.disk_get_us, c.artifact_bytes);
    }
    for (auto& c : r.compile)
      for (auto f : c.same_module_feats)
        std::fprintf(out, "%-6s %4lld same module as K=%lld (%s)\n", c.op.c_str(), (long long)f, (long long)c.feat,
                     c.module.c_str());
    bool gpu = !r.compile.empty() && r.compile.front().gpu, any = false;
    for (auto& c : r.compile) any = any || c.ok;
    if (any) std::fprintf(out,
                 "  * disk hit in a fresh process: new NvrtcEngine + KernelCache (engine: identity, loads NVRTC) and\n"
                 "    lookup() = %s; the child's whole wall time incl. exec, libraries, lowering:",
                 gpu ? "read + validate + cuModuleLoadData"
                     : "read + validate the entry (loading the module needs a GPU: not measured)");
    for (auto& c : r.compile)
      if (c.ok) std::fprintf(out, " %s/%lld %.0f ms", c.op.c_str(), (long long)c.feat, c.disk_child_wall_us / 1e3);
    if (any) std::fprintf(out, "\n");
  }

  if (r.cases.empty()) return;
  std::fprintf(out, "\nruns: median us (min us), GFLOP/s, effective GB/s, %% of the copy roofline; x = cuSPARSE time / "
                    "spindle time (> 1: spindle faster)\n");
  char b[256];
  std::snprintf(b, sizeof b, "%-22s %-5s %4s | %11s %6s %7s %6s %5s | %-13s %8s %6s", "matrix", "op", "K",
                "spindle us", "min", "GF/s", "GB/s", "roof", "cusparse best", "us", "x");
  std::string head = b;
  const std::vector<std::string> algs{"default", "csr_alg1", "csr_alg2"};
  for (auto& a : algs) {
    std::snprintf(b, sizeof b, " | %11s %6s", (a + " us").c_str(), "x");
    head += b;
  }
  head += " | check";
  std::fprintf(out, "%s\n%s\n", head.c_str(), std::string(head.size(), '-').c_str());
  for (auto& c : r.cases) {
    const GpuSystemResult& s = c.systems[0];
    std::fprintf(out, "%-22.22s %-5s %4lld | %11s %6s %7s %6s %4s%%", c.matrix.c_str(), c.op.c_str(), (long long)c.feat,
                 us(s.median_s).c_str(), us(s.min_s).c_str(), fmt("%.0f", s.gflops).c_str(), fmt("%.0f", s.gbs).c_str(),
                 fmt("%.0f", s.roofline * 100).c_str());
    const GpuSystemResult* best = nullptr;
    for (auto& x : c.systems)
      if (x.name == c.best_peer) best = &x;
    std::fprintf(out, " | %-13s %8s %6s", best ? best->name.substr(9).c_str() : "-", best ? us(best->median_s).c_str() : "-",
                 fmt("%.2f", c.best_ratio).c_str());
    for (auto& a : algs) {
      const GpuSystemResult* x = nullptr;
      for (auto& y : c.systems)
        if (y.name == "cusparse-" + a) x = &y;
      if (!x)
        std::fprintf(out, " | %11s %6s", "", "");
      else if (!x->available)
        std::fprintf(out, " | %11s %6s", "n/a", "");
      else
        std::fprintf(out, " | %11s %6s", us(x->median_s).c_str(), fmt("%.2f", x->ratio).c_str());
    }
    bool ok = true;
    for (auto& x : c.systems) ok = ok && x.ok;
    std::fprintf(out, " | %s (%s cpu, %s cusparse)\n", ok ? "ok" : "MISMATCH", fmt("%.0e", s.error_vs_cpu).c_str(),
                 fmt("%.0e", s.error_vs_peer).c_str());
  }
  std::vector<std::string> seen;
  for (auto& c : r.cases) {
    for (auto& x : c.systems) {
      std::string line = x.name + " " + c.op;
      if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
      seen.push_back(line);
      std::fprintf(out, "  %-17s %-5s = %s\n", x.name.c_str(), c.op.c_str(), x.label.c_str());
    }
    for (auto& x : c.systems)
      if (!x.available)
        std::fprintf(out, "  %s %s K=%lld not run: %s\n", x.name.c_str(), c.op.c_str(), (long long)c.feat,
                     x.unavailable.c_str());
  }
  for (auto& c : r.cases)
    std::fprintf(out, "  spindle %s K=%lld: variant %s, module from %s (%.0f us on its first call)\n", c.op.c_str(),
                 (long long)c.feat, c.variant.c_str(), c.code_source.c_str(), c.first_call_compile_us);
  int overruns = 0;
  for (auto& c : r.cases)
    for (auto& x : c.systems) overruns += x.gate_overruns;
  if (overruns)
    std::fprintf(out, "  note: %d batch(es) kept although the host enqueued slower than the launch gate held the stream\n",
                 overruns);
  if (r.mismatches)
    std::fprintf(out, "\n%d result(s) differ beyond the tolerance %.0e\n", r.mismatches, r.tolerance);
}

inline std::string cuda_to_json(const CudaReport& r) {
  auto opt_str = [](const std::string& s) { return s.empty() ? std::string("null") : json_str(s); };
  JsonObject top;
  top.str("tool", "spindle-bench").str("backend", "cuda").str("dtype", r.dtype).num("load_before", r.load_before)
      .num("load_after", r.load_after).str("timing", r.timing).num("tolerance", r.tolerance);
  top.raw("nvrtc", JsonObject().raw("version", opt_str(r.nvrtc_version)).raw("library", opt_str(r.nvrtc_library))
                       .raw("error", opt_str(r.nvrtc_error)).done());
  JsonObject gpu;
  gpu.boolean("available", r.gpu);
  if (r.gpu) {
    gpu.str("name", r.device_name).str("compute_capability", std::to_string(r.cc_major) + "." + std::to_string(r.cc_minor))
        .num("arch", r.cc_major * 10 + r.cc_minor).num("sm_count", r.sm_count).num("memory_gib", r.memory_gib)
        .str("driver_api_version", r.driver_version).num("context_create_us", r.context_create_us);
  } else {
    gpu.str("reason", r.gpu_reason);
  }
  top.raw("gpu", gpu.done());
  top.raw("hbm", r.hbm_measured ? JsonObject().num("copy_mib", r.hbm.copy_mib).num("best_gbs", r.hbm.best_gbs)
                                      .num("median_gbs", r.hbm.median_gbs).num("peak_gbs", r.hbm.peak_gbs > 0 ? r.hbm.peak_gbs : NAN)
                                      .num("reps", r.hbm.reps).str("method", "cuMemcpyDtoDAsync, bytes read + written, best of reps")
                                      .done()
                                : "null");
  top.raw("cusparse", JsonObject().boolean("available", !r.cusparse_version.empty())
                          .raw("version", opt_str(r.cusparse_version)).raw("library", opt_str(r.cusparse_library))
                          .raw("reason", opt_str(r.cusparse_error)).done());
  top.boolean("launch_gate", r.gate).raw("launch_gate_error", opt_str(r.gate_error));
  top.raw("matrices", json_array(r.matrices, [](const MatrixInfo& m) {
    return JsonObject().str("name", m.name).str("source", m.source).num("rows", m.rows).num("cols", m.cols)
        .num("nnz", m.nnz).num("load_s", m.load_s).done();
  }));
  top.str("compile_target", r.compile_target);
  top.raw("compile_latency", json_array(r.compile, [](const CudaCompileLatency& c) {
    return JsonObject().str("op", c.op).num("feat", static_cast<double>(c.feat))
        .raw("same_module_feats", json_array(c.same_module_feats, [](std::int64_t f) { return json_num(static_cast<double>(f)); }, ", "))
        .str("variant", c.variant)
        .str("module", c.module).str("target", c.target).boolean("gpu", c.gpu).boolean("ok", c.ok)
        .boolean("unavailable", c.unavailable).str("error", c.error).num("lower_codegen_us", c.lower_codegen_us)
        .num("nvrtc_init_us", c.nvrtc_init_us).num("cold_first_us", c.cold_first_us)
        .num("cold_median_us", c.cold_median_us).num("cold_compile_us", c.cold_compile_us)
        .raw("cold_load_us", c.gpu ? json_num(c.cold_load_us) : json_str("needs GPU"))
        .num("memory_hit_us", c.memory_hit_us).num("disk_hit_fresh_process_us", c.disk_hit_us)
        .num("disk_hit_engine_us", c.disk_engine_us).num("disk_hit_get_us", c.disk_get_us)
        .num("disk_hit_child_wall_us", c.disk_child_wall_us).str("disk_hit_event", c.disk_event)
        .str("disk_hit_measures", c.gpu ? "read + validate + cuModuleLoadData"
                                        : "read + validate (module load needs GPU)")
        .num("artifact_bytes", c.artifact_bytes).done();
  }));
  top.raw("cases", json_array(r.cases, [](const GpuCaseResult& c) {
    JsonObject o;
    o.str("matrix", c.matrix).str("op", c.op).num("rows", c.rows).num("cols", c.cols).num("nnz", c.nnz)
        .num("feat", c.feat).num("flops", c.flops).num("bytes", c.bytes).num("hbm_gbs", c.hbm_gbs)
        .str("spindle_variant", c.variant).str("spindle_code_source", c.code_source)
        .num("spindle_first_call_us", c.first_call_compile_us).raw("best_cusparse", c.best_peer.empty() ? "null" : json_str(c.best_peer))
        .num("best_cusparse_ratio", c.best_ratio);
    o.raw("systems", json_array(c.systems, [](const GpuSystemResult& x) {
      return JsonObject().str("name", x.name).str("label", x.label).boolean("available", x.available)
          .str("unavailable", x.unavailable).num("median_s", x.median_s).num("min_s", x.min_s).num("reps", x.reps)
          .num("gflops", x.gflops).num("gbs", x.gbs).num("roofline_fraction", x.roofline)
          .num("time_ratio_vs_spindle", x.ratio).num("rel_error_vs_cpu", x.error_vs_cpu)
          .num("rel_error_vs_cusparse", x.error_vs_peer).num("host_enqueue_s", x.host_enqueue_s)
          .num("gate_overruns", x.gate_overruns).boolean("ok", x.ok).done();
    }, ", "));
    return o.done();
  }));
  top.num("mismatches", r.mismatches).num("compile_failures", r.compile_failures);
  return top.done() + "\n";
}

}  // namespace bench
