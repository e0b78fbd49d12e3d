// Results of spindle-bench and their two renderings: aligned text tables and one JSON
// document (written by hand; strings escaped, non-finite numbers as null).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <spindle/inspect/graph_features.hpp>

#include "compile_latency.hpp"
#include "roofline.hpp"

namespace bench {

struct SystemResult {
  std::string name;   // "spindle", "eigen", "spindle-csr", "graphblas", "mkl"
  std::string label;  // how it was run
  double median_s = NAN, min_s = NAN;
  int reps = 0;
  double gflops = NAN, gbs = NAN, roofline = NAN;
  double ratio = NAN;      // this system's time / Spindle's time (> 1: Spindle faster)
  double rel_error = NAN;  // vs Eigen (Eigen's own entry: 0)
  bool ok = true;
};

struct CaseResult {
  std::string matrix, op;
  std::int64_t rows = 0, cols = 0, nnz = 0, feat = 0;
  int threads = 1;
  double flops = 0, bytes = 0, triad_gbs = 0;
  // spgemm / spadd: entries of B and of the result C, and spgemm's multiply-adds.
  std::int64_t nnz_b = 0, nnz_out = 0, mult_adds = 0;
  std::vector<SystemResult> systems;  // spindle first
};

struct MatrixInfo {
  std::string name, source;
  std::int64_t rows = 0, cols = 0, nnz = 0;
  double load_s = 0;
  spindle::GraphFeatures features;
};

struct KernelInfo {
  std::string op, code_source;
  double lower_us = 0, load_us = 0;
};

// The 1-minute load average (/proc/loadavg), NaN when unknown.
inline double load_average() {
  double v = NAN;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &v) != 1) v = NAN;
    std::fclose(f);
  }
  return v;
}

struct Report {
  std::string dtype, engine, graphblas_version, mkl_version, timing;
  int hardware_threads = 0;
  double load_before = NAN, load_after = NAN;  // 1-minute load averages around the run
  double tolerance = 0;
  bool eigen_openmp = false;
  std::vector<MatrixInfo> matrices;
  std::vector<TriadResult> triads;
  std::vector<KernelInfo> kernels;
  std::vector<CompileLatency> compile;
  std::vector<CaseResult> cases;
  int mismatches = 0;
};

inline std::string fmt(const char* f, double v) {
  if (!std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

inline std::string ms(double s) { return fmt(s < 1e-3 ? "%.4f" : s < 1 ? "%.3f" : "%.1f", s * 1e3); }

inline void print_tables(std::FILE* out, const Report& r) {
  std::fprintf(out, "\nspindle-bench: dtype %s, engine %s, %d hardware threads, Eigen %d.%d.%d%s, GraphBLAS %s, MKL %s\n",
               r.dtype.c_str(), r.engine.empty() ? "not used" : r.engine.c_str(), r.hardware_threads, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
               EIGEN_MINOR_VERSION, r.eigen_openmp ? " (OpenMP)" : " (no OpenMP)",
               r.graphblas_version.empty() ? "not measured" : r.graphblas_version.c_str(),
               r.mkl_version.empty() ? "not measured" : r.mkl_version.c_str());
  std::fprintf(out, "timing: %s\n", r.timing.c_str());
  std::fprintf(out, "machine load (1-min average): %.2f before, %.2f after the run\n", r.load_before, r.load_after);
  if (r.load_before > 0.5 || r.load_after > 0.5)
    std::fprintf(out, "  note: other processes were running; times with several threads are unreliable, and OpenMP\n"
                      "  peers suffer most (their barriers wait for descheduled threads)\n");
  for (auto& m : r.matrices)
    std::fprintf(out, "matrix %-22s %9lld x %-9lld nnz %-10lld (%s, %.2f s to load)\n", m.name.c_str(),
                 (long long)m.rows, (long long)m.cols, (long long)m.nnz, m.source.c_str(), m.load_s);
  for (auto& m : r.matrices)
    std::fprintf(out, "features %-20s %s (%.2f ms)\n", m.name.c_str(), m.features.describe().c_str(),
                 m.features.seconds * 1e3);
  for (auto& t : r.triads)
    std::fprintf(out, "roofline: triad with %d thread(s): %.1f GB/s best, %.1f GB/s median (3 x %.0f MiB arrays)\n",
                 t.threads, t.best_gbs, t.median_gbs, t.array_mib);
  for (auto& k : r.kernels)
    std::fprintf(out, "spindle kernel %-6s first compile in this process: lowering %.0f us, code from %s in %.0f us\n",
                 k.op.c_str(), k.lower_us, k.code_source.c_str(), k.load_us);

  if (!r.compile.empty()) {
    std::fprintf(out, "\ncompile latency (us; medians)\n");
    std::fprintf(out, "%-6s %7s %9s %8s %10s %10s %10s %9s %9s %9s %9s %11s %9s\n", "op", "IR", "lower+cg",
                 "engine", "cold 1st", "cold med", "(compile", "load)", "mem hit", "compile()", "redefine",
                 "disk hit*", "(get)");
    for (auto& c : r.compile) {
      if (!c.ok) {
        std::fprintf(out, "%-6s FAILED: %s\n", c.op.c_str(), c.error.c_str());
        continue;
      }
      std::fprintf(out, "%-6s %7.1f %9.1f %8.0f %10.0f %10.0f %10.0f %9.0f %9.3f %9.4f %9.1f %11.0f %9.0f\n",
                   c.op.c_str(), c.ir_build_us, c.lower_codegen_us, c.engine_create_us, c.cold_first_us,
                   c.cold_median_us, c.cold_compile_us, c.cold_load_us, c.memory_hit_us, c.kernel_compile_us,
                   c.redefine_us, c.disk_hit_us, c.disk_get_us);
    }
    std::fprintf(out,
                 "  * disk hit in a fresh process: new Runtime + engine creation + get() (engine %s); the child's\n"
                 "    whole wall time incl. exec and loading the libraries:",
                 r.compile.front().engine.c_str());
    for (auto& c : r.compile) std::fprintf(out, " %s %.0f ms", c.op.c_str(), c.disk_process_wall_us / 1e3);
    std::fprintf(out, "\n");
  }

  if (r.cases.empty()) return;
  std::fprintf(out, "\nruns: median ms (min ms), GFLOP/s, effective GB/s, %% of triad roofline, x = peer time / "
                    "spindle time (> 1: spindle faster)\n");
  // A header whenever the contenders change (SDDMM has no MKL, BSR/ELL add spindle-csr).
  auto names = [](const CaseResult& c) {
    std::string n;
    for (auto& x : c.systems) n += x.name + ",";
    return n;
  };
  std::string shown;
  for (auto& c : r.cases) {
    if (names(c) != shown) {
      shown = names(c);
      std::string head = "matrix                 op      K thr | spindle  ms   min    GF/s   GB/s  roof";
      for (std::size_t s = 1; s < c.systems.size(); ++s) {
        char b[128];
        std::snprintf(b, sizeof b, " | %-9s ms    GF/s   GB/s  roof      x", c.systems[s].name.c_str());
        head += b;
      }
      head += " | check";
      std::fprintf(out, "%s\n%s\n", head.c_str(), std::string(head.size(), '-').c_str());
    }
    const bool no_k = spmv_op(c.op) || sparse_result_op(c.op);
    std::fprintf(out, "%-22.22s %-5s %4s %3d", c.matrix.c_str(), c.op.c_str(),
                 no_k ? "-" : std::to_string(c.feat).c_str(), c.threads);
    for (std::size_t s = 0; s < c.systems.size(); ++s) {
      const SystemResult& x = c.systems[s];
      if (s == 0)
        std::fprintf(out, " | %11s %5s %7s %6s %4s%%", ms(x.median_s).c_str(), ms(x.min_s).c_str(),
                     fmt("%.1f", x.gflops).c_str(), fmt("%.1f", x.gbs).c_str(), fmt("%.0f", x.roofline * 100).c_str());
      else
        std::fprintf(out, " | %11s %7s %6s %4s%% %6s", ms(x.median_s).c_str(), fmt("%.1f", x.gflops).c_str(),
                     fmt("%.1f", x.gbs).c_str(), fmt("%.0f", x.roofline * 100).c_str(), fmt("%.2f", x.ratio).c_str());
    }
    bool ok = true;
    for (auto& x : c.systems) ok = ok && x.ok;
    std::fprintf(out, " | %s (%s)\n", ok ? "ok" : "MISMATCH", fmt("%.0e", c.systems[0].rel_error).c_str());
  }
  std::vector<std::string> seen;
  for (auto& c : r.cases)
    for (auto& x : c.systems) {
      std::string line = x.name + " " + c.op;
      if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
      seen.push_back(line);
      std::fprintf(out, "  %-9s %-5s = %s\n", x.name.c_str(), c.op.c_str(), x.label.c_str());
    }
  seen.clear();
  for (auto& c : r.cases) {
    if (!sparse_result_op(c.op)) continue;
    const std::string key = c.matrix + " " + c.op;
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    std::fprintf(out, "  sparse result %s %s: nnz(A) %lld, nnz(B) %lld, nnz(C) %lld", c.matrix.c_str(), c.op.c_str(),
                 (long long)c.nnz, (long long)c.nnz_b, (long long)c.nnz_out);
    if (c.op == "spgemm") std::fprintf(out, ", multiply-adds %lld", (long long)c.mult_adds);
    std::fprintf(out, "\n");
  }
  if (r.mismatches) std::fprintf(out, "\n%d result(s) differ from Eigen beyond the tolerance %.0e\n", r.mismatches, r.tolerance);
}

// ---- JSON ------------------------------------------------------------------------------

inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += static_cast<char>(ch);
    else if (ch == '\n') o += "\\n";
    else if (ch == '\t') o += "\\t";
    else if (ch < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", ch);
      o += b;
    } else o += static_cast<char>(ch);
  }
  return o + "\"";
}

inline std::string json_num(double v) {
  if (!std::isfinite(v)) return "null";
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

// Builds one JSON object from "key": value pairs given in order.
class JsonObject {
 public:
  JsonObject& str(const char* k, const std::string& v) { return raw(k, json_str(v)); }
  JsonObject& num(const char* k, double v) { return raw(k, json_num(v)); }
  JsonObject& boolean(const char* k, bool v) { return raw(k, v ? "true" : "false"); }
  JsonObject& raw(const char* k, const std::string& v) {
    s_ += (s_.empty() ? "" : ", ") + json_str(k) + ": " + v;
    return *this;
  }
  std::string done() const { return "{" + s_ + "}"; }

 private:
  std::string s_;
};

template <class V, class F>
std::string json_array(const std::vector<V>& v, F&& f, const char* sep = ",\n    ") {
  std::string s = "[";
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? sep : "") + f(v[k]);
  return s + "]";
}

inline std::string to_json(const Report& r) {
  JsonObject top;
  top.str("tool", "spindle-bench").str("dtype", r.dtype).str("engine", r.engine)
      .num("hardware_threads", r.hardware_threads).num("load_before", r.load_before).num("load_after", r.load_after).str("timing", r.timing).num("tolerance", r.tolerance)
      .boolean("eigen_openmp", r.eigen_openmp)
      .raw("graphblas", r.graphblas_version.empty() ? "null" : json_str(r.graphblas_version))
      .raw("mkl", r.mkl_version.empty() ? "null" : json_str(r.mkl_version));
  top.raw("matrices", json_array(r.matrices, [](const MatrixInfo& m) {
    JsonObject features;
    for (auto& [name, x] : m.features.to_vector()) features.num(name.c_str(), x);
    features.num("seconds", m.features.seconds);
    return JsonObject().str("name", m.name).str("source", m.source).num("rows", m.rows).num("cols", m.cols)
        .num("nnz", m.nnz).num("load_s", m.load_s).raw("features", features.done()).done();
  }));
  top.raw("triad", json_array(r.triads, [](const TriadResult& t) {
    return JsonObject().num("threads", t.threads).num("best_gbs", t.best_gbs).num("median_gbs", t.median_gbs)
        .num("array_mib", t.array_mib).num("reps", t.reps).done();
  }));
  top.raw("kernels", json_array(r.kernels, [](const KernelInfo& k) {
    return JsonObject().str("op", k.op).str("code_source", k.code_source).num("lower_us", k.lower_us)
        .num("load_us", k.load_us).done();
  }));
  top.raw("compile_latency", json_array(r.compile, [](const CompileLatency& c) {
    return JsonObject().str("op", c.op).str("engine", c.engine).boolean("ok", c.ok).str("error", c.error)
        .num("ir_build_us", c.ir_build_us).num("lower_codegen_us", c.lower_codegen_us)
        .num("engine_create_us", c.engine_create_us).num("cold_jit_first_us", c.cold_first_us)
        .num("cold_jit_median_us", c.cold_median_us).num("cold_compile_us", c.cold_compile_us)
        .num("cold_load_us", c.cold_load_us).num("memory_hit_us", c.memory_hit_us)
        .num("kernel_compile_call_us", c.kernel_compile_us).num("redefine_us", c.redefine_us)
        .num("disk_hit_fresh_process_us", c.disk_hit_us).num("disk_hit_engine_create_us", c.disk_engine_us)
        .num("disk_hit_get_us", c.disk_get_us).num("disk_hit_child_wall_us", c.disk_process_wall_us)
        .str("disk_hit_event", c.disk_event).done();
  }));
  top.raw("cases", json_array(r.cases, [](const CaseResult& c) {
    JsonObject o;
    o.str("matrix", c.matrix).str("op", c.op).num("rows", c.rows).num("cols", c.cols).num("nnz", c.nnz)
        .num("feat", c.feat).num("threads", c.threads).num("flops", c.flops).num("bytes", c.bytes)
        .num("triad_gbs", c.triad_gbs);
    if (sparse_result_op(c.op)) o.num("nnz_b", c.nnz_b).num("nnz_out", c.nnz_out);
    if (c.op == "spgemm") o.num("mult_adds", c.mult_adds);
    o.raw("systems", json_array(c.systems, [](const SystemResult& x) {
      return JsonObject().str("name", x.name).str("label", x.label).num("median_s", x.median_s)
          .num("min_s", x.min_s).num("reps", x.reps).num("gflops", x.gflops).num("gbs", x.gbs)
          .num("roofline_fraction", x.roofline).num("time_ratio_vs_spindle", x.ratio)
          .num("rel_error_vs_eigen", x.rel_error).boolean("ok", x.ok).done();
    }, ", "));
    return o.done();
  }));
  top.num("mismatches", r.mismatches);
  std::string s = top.done();
  return s + "\n";
}

}  // namespace bench
