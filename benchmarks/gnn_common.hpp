// Shared by spindle-profile and spindle-gnn-bench: graph lookup (shared data names such as
// gnn/pubmed, or rmat:SCALE:EDGE_FACTOR), the operands of every layer expression, timing.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <spindle/gnn.hpp>
#include <spindle/gnn/cost_model.hpp>
#include <spindle/gnn/execute.hpp>
#include <spindle/gnn/layer.hpp>
#include <spindle/spindle.hpp>

#include "rmat.hpp"

namespace gnnbench {

namespace sp = spindle;
namespace gnn = spindle::gnn;

inline std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, sep))
    if (!x.empty()) out.push_back(x);
  return out;
}

// Command-line flags: `while (a.next()) { if (a.flag == "--x") v = a.value(); ... }`.
struct Args {
  Args(int argc, char** argv, std::string tool) : argc_(argc), argv_(argv), tool_(std::move(tool)) {}
  bool next() {
    if (++i_ >= argc_) return false;
    flag = argv_[i_];
    return true;
  }
  // The flag's value; UserError when it is missing.
  std::string value() {
    SPINDLE_CHECK(i_ + 1 < argc_, sp::UserError, tool_, ": ", flag, " needs a value");
    return argv_[++i_];
  }
  std::vector<int> ints() {
    std::vector<int> r;
    for (const auto& x : split(value())) r.push_back(std::stoi(x));
    return r;
  }
  std::string flag;

 private:
  int argc_;
  char** argv_;
  std::string tool_;
  int i_ = 0;
};

struct Graph {
  std::string name;
  sp::Csr<float> a;
  sp::GraphFeatures features;
};

// "gnn/pubmed" -> <data>/gnn/pubmed.mtx.gz; a path is used as given; "rmat:14:8" generates.
inline Graph load_graph(const std::string& spec, const std::string& data_dir) {
  Graph g;
  if (spec.rfind("rmat:", 0) == 0) {
    const auto parts = split(spec, ':');
    SPINDLE_CHECK(parts.size() == 3, sp::UserError, "graph '", spec, "': expected rmat:SCALE:EDGE_FACTOR");
    bench::RmatParams p{std::stoi(parts[1]), std::stoi(parts[2]), 1};
    g.name = bench::rmat_name(p);
    g.a = bench::generate_rmat<float>(p);
  } else {
    std::string path = spec;
    if (!std::filesystem::exists(path)) path = data_dir + "/" + spec + ".mtx.gz";
    SPINDLE_CHECK(std::filesystem::exists(path), sp::IOError, "graph '", spec, "': no file ", path);
    g.name = spec;
    g.a = sp::read_matrix_market<float>(path);
  }
  g.features = sp::inspect::graph_features(g.a);
  return g;
}

// Operands for every layer of gnn::layers on graph g with embedding sizes k_in -> k_out.
struct Operands {
  std::map<std::string, sp::Tensor<float>> diag, dense;
  std::map<std::string, sp::Csr<float>> sparse;  // alpha (attention scores on A's pattern)
  gnn::Bindings<float> bind(const Graph& g) const {
    gnn::Bindings<float> b;
    b.sparse("A", g.a).sparse("A1", g.a).sparse("A2", g.a);
    for (const auto& [n, a] : sparse) b.sparse(n, a);
    for (const auto& [n, d] : diag) b.diagonal(n, d.view());
    for (const auto& [n, x] : dense) b.dense(n, x.view());
    return b;
  }
};

inline Operands make_operands(const Graph& g, std::int64_t k_in, std::int64_t k_out, std::uint64_t seed = 1) {
  Operands o;
  const std::int64_t n = g.a.rows();
  auto d = gnn::inverse_sqrt_degree(g.a);
  auto dinv = sp::Tensor<float>::zeros({n});
  for (std::int64_t i = 0; i < n; ++i) dinv.values()[i] = d.values()[i] * d.values()[i];
  o.diag.emplace("D", d);
  o.diag.emplace("Dinv", dinv);
  o.diag.emplace("Dinv1", dinv);
  o.diag.emplace("Dinv2", dinv);
  o.diag.emplace("S", sp::Tensor<float>::full({n}, 1.1f));
  o.dense.emplace("H", sp::Tensor<float>::random({n, k_in}, seed, -1, 1));
  for (const char* w : {"W", "W0", "W1", "W2", "Wself", "Wneigh"})
    o.dense.emplace(w, sp::Tensor<float>::random({k_in, k_out}, ++seed, -1, 1));
  auto alpha = g.a;
  sp::Rng rng(seed + 100);
  for (float& v : alpha.values()) v = rng.value<float>(0.0, 1.0);
  o.sparse.emplace("alpha", std::move(alpha));
  return o;
}

// The least total timed wall time per measurement (ms): calls that take well under a
// millisecond are repeated until they add up to this, so a few scheduler hiccups cannot move
// their median (at most kMaxTimedCalls calls). The PyG peer gets the same budget.
inline constexpr double kMinTimedMs = 150;
inline constexpr int kMaxTimedCalls = 400;

// Median wall times (ms) of functions measured against each other (the compositions of one
// case): one untimed call each, then rounds that call every function once, timed, until
// each has `reps` calls and (unless that passes kMaxTimedCalls rounds) the least total of
// one function reaches `min_ms`; fewer calls when one is slow. A burst of load on a shared
// host then falls on all of them in the same rounds instead of on whichever was being timed.
inline std::vector<double> time_interleaved_ms(const std::vector<std::function<void()>>& fs, int reps = 5,
                                               double min_ms = kMinTimedMs) {
  using clock = std::chrono::steady_clock;
  double slowest_first = 0;
  for (const auto& f : fs) {
    const auto t0 = clock::now();
    f();
    slowest_first = std::max(slowest_first, std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  reps = std::max(reps, 1);  // every median has a call (--reps 0 --min-ms 0)
  if (slowest_first > 2000) reps = 1;
  else if (slowest_first > 300) reps = std::min(reps, 3);
  std::vector<std::vector<double>> v(fs.size());
  std::vector<double> total(fs.size(), 0);
  for (int round = 0;; ++round) {
    const double least = fs.empty() ? min_ms : *std::min_element(total.begin(), total.end());
    if (round >= reps && (least >= min_ms || round >= kMaxTimedCalls)) break;
    for (std::size_t i = 0; i < fs.size(); ++i) {
      const auto t0 = clock::now();
      fs[i]();
      v[i].push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
      total[i] += v[i].back();
    }
  }
  std::vector<double> median(fs.size());
  for (std::size_t i = 0; i < fs.size(); ++i) {
    std::sort(v[i].begin(), v[i].end());
    median[i] = v[i][v[i].size() / 2];
  }
  return median;
}

// The same for one function.
inline double time_ms(const std::function<void()>& f, int reps = 5, double min_ms = kMinTimedMs) {
  return time_interleaved_ms({f}, reps, min_ms).front();
}

inline void progress(const std::string& what, std::size_t done, std::size_t total) {
  const int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %3d%%  %-40s", filled, "##############################", width - filled, "",
               total ? static_cast<int>(100 * done / total) : 100, what.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// Samples CSV: graph,primitive,rows,inner,cols,nnz,degree_cv,degree_gini,near_diagonal,
// empty_row_fraction,max_to_mean,ms
inline std::string csv_header() {
  return "graph,primitive,rows,inner,cols,nnz,degree_cv,degree_gini,near_diagonal,empty_row_fraction,max_to_mean,ms";
}
inline std::string csv_line(const gnn::CostSample& s) {
  std::ostringstream os;
  os.precision(10);
  const auto& x = s.input;
  os << s.graph << "," << gnn::primitive_name(x.prim) << "," << x.rows << "," << x.inner << "," << x.cols << ","
     << x.nnz << "," << x.degree_cv << "," << x.degree_gini << "," << x.near_diagonal << "," << x.empty_row_fraction
     << "," << x.max_to_mean << "," << s.ms;
  return os.str();
}
inline std::vector<gnn::CostSample> read_samples(const std::string& path) {
  std::ifstream f(path);
  SPINDLE_CHECK(f.good(), sp::IOError, "cannot read samples '", path, "'");
  std::vector<gnn::CostSample> out;
  std::string line;
  int no = 0;
  while (std::getline(f, line)) {
    if (++no == 1) continue;
    const auto c = split(line);
    SPINDLE_CHECK(c.size() == 12, sp::FormatError, path, ":", no, ": expected 12 fields");
    gnn::CostSample s;
    s.graph = c[0];
    const auto prim = gnn::primitive_from_name(c[1]);
    SPINDLE_CHECK(prim.has_value(), sp::FormatError, path, ":", no, ": unknown primitive '", c[1], "'");
    s.input.prim = *prim;
    double* fields[] = {&s.input.rows, &s.input.inner, &s.input.cols, &s.input.nnz, &s.input.degree_cv,
                        &s.input.degree_gini, &s.input.near_diagonal, &s.input.empty_row_fraction,
                        &s.input.max_to_mean, &s.ms};
    for (int k = 0; k < 10; ++k) *fields[k] = std::stod(c[static_cast<std::size_t>(k + 2)]);
    out.push_back(s);
  }
  return out;
}

}  // namespace gnnbench
