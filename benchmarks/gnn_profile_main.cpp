// spindle-profile: times the GNN primitives (gnn/associate.hpp) over graphs and embedding
// sizes, writes the samples (CSV) and fits the per-primitive cost models
// (gnn/cost_model.hpp) that GNN layers select their composition with.
//
//   spindle-profile [--graphs gnn/cora,...,rmat:14:8] [--k 16,32,...] [--threads T]
//                   [--reps R] [--min-ms MS] [--samples FILE.csv] [--model FILE] [--data DIR]
//
// Each primitive is timed inside a one-primitive composition run by gnn::execute (the same
// code path the layers take), median of at least R calls after one untimed call, more while
// they add up to less than MS milliseconds (default 150). A progress bar goes to
// stderr. Defaults: the shared GNN graphs and matrices plus two R-MAT graphs, K in
// {16, 32, 64, 128, 256, 512}, 2 threads, 3 repetitions.
#include <cstdio>
#include <array>
#include <fstream>
#include <set>
#include <iostream>

#include "gnn_common.hpp"

namespace {

using namespace gnnbench;

struct Config {
  std::vector<std::string> graphs = {"gnn/cora",          "gnn/citeseer",         "gnn/pubmed",
                                     "gnn/ppi-graphsaint", "gnn/ogbn-arxiv",      "matrices/wiki-Vote",
                                     "matrices/astro-ph",  "matrices/luxembourg_osm", "matrices/delaunay_n16",
                                     "matrices/bcsstk25",  "rmat:14:8",           "rmat:16:16"};
  std::vector<int> ks = {16, 32, 64, 128, 256, 512};
  int threads = 2, reps = 3;
  double min_ms = kMinTimedMs;
  int trees = gnn::xgboost::available() ? 100 : 0;  // XGBoost rounds per primitive (0: log-linear only)
  std::string from;                                 // refit from a samples CSV instead of timing
  std::string samples = "gnn-samples.csv", model = "gnn-cost-model.txt";
  std::string data = SPINDLE_PROFILE_DATA_DIR;
};

// The one-primitive expressions that are profiled, with the symbol values they need.
struct Probe {
  std::string what;
  gnn::Expr expr;
  int k_in = 0, k_out = 0;
};

std::vector<Probe> probes(const std::vector<int>& ks) {
  auto A = gnn::sparse("A", "N", "N");
  auto alpha = gnn::sparse("alpha", "N", "N", true);
  auto D = gnn::diagonal("D", "N");
  auto S = gnn::diagonal("S", "N");
  auto H = gnn::dense("H", "N", "K_in");
  auto H2 = gnn::dense("Hb", "N", "K_in");  // a second N x K_in operand
  auto W = gnn::weight("W", "K_in", "K_out");
  std::vector<Probe> p = {{"sparse_scale (pattern)", D * A * D},
                          {"sparse_scale (weighted)", D * alpha * D},
                          {"diag_product", D * S},
                          {"sparse_add", A + S}};
  for (int k : ks) {
    p.push_back({"spmm_unweighted K=" + std::to_string(k), A * H, k, k});
    p.push_back({"spmm_weighted K=" + std::to_string(k), alpha * H, k, k});
    p.push_back({"row_broadcast K=" + std::to_string(k), D * H, k, k});
    p.push_back({"dense_add K=" + std::to_string(k), H + H2, k, k});
    for (int k2 : ks) p.push_back({"gemm " + std::to_string(k) + "x" + std::to_string(k2), H * W, k, k2});
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) try {
  Config c;
  Args a(argc, argv, "spindle-profile");
  while (a.next()) {
    const std::string& s = a.flag;
    auto next = [&] { return a.value(); };
    if (s == "--graphs") c.graphs = split(next());
    else if (s == "--k") c.ks = a.ints();
    else if (s == "--threads") c.threads = std::stoi(next());
    else if (s == "--reps") c.reps = std::stoi(next());
    else if (s == "--min-ms") c.min_ms = std::stod(next());
    else if (s == "--trees") c.trees = std::stoi(next());
    else if (s == "--from-samples") c.from = next();
    else if (s == "--samples") c.samples = next();
    else if (s == "--model") c.model = next();
    else if (s == "--data") c.data = next();
    else {
      std::fprintf(stderr,
                   "usage: spindle-profile [--graphs LIST] [--k LIST] [--threads T] [--reps R] [--min-ms MS] [--trees ROUNDS] "
                   "[--samples CSV] [--model FILE] [--data DIR] [--from-samples CSV]\n");
      return s == "--help" || s == "-h" ? 0 : 2;
    }
  }
  sp::runtime::Runtime::default_instance().pool().set_num_threads(c.threads);
  const auto ps = probes(c.ks);
  std::vector<gnn::CostSample> samples;
  const std::size_t total = c.graphs.size() * ps.size();
  std::size_t done = 0;
  sp::Timer wall;
  if (!c.from.empty()) {
    samples = read_samples(c.from);
    std::set<std::string> gs;
    for (const auto& s : samples) gs.insert(s.graph);
    c.graphs.assign(gs.begin(), gs.end());
  }
  for (const std::string& spec : c.from.empty() ? c.graphs : std::vector<std::string>{}) {
    progress("loading " + spec, done, total);
    const Graph g = load_graph(spec, c.data);
    for (const Probe& p : ps) {
      progress(spec + ": " + p.what, done, total);
      const int kin = p.k_in ? p.k_in : 1, kout = p.k_out ? p.k_out : 1;
      Operands o = make_operands(g, kin, kout);
      o.dense.emplace("Hb", sp::Tensor<float>::random({g.a.rows(), kin}, 77, -1, 1));
      auto b = o.bind(g);
      const auto comps = gnn::enumerate_compositions(p.expr);
      const gnn::Composition& comp = comps.front();
      const std::map<std::string, double> sym = {{"N", double(g.a.rows())}, {"E", double(g.a.nnz())},
                                                 {"K_in", double(kin)}, {"K_out", double(kout)}};
      std::vector<std::vector<double>> runs;
      gnn::Workspace<float> ws;  // outputs reused between calls, as a layer does
      time_ms(
          [&] {
            std::vector<double> ms;
            gnn::detail::run_steps(comp, b, &ms, &ws);
            runs.push_back(ms);
          },
          c.reps, c.min_ms);
      // The median over the timed runs (the first, untimed run is dropped) of the primitive step.
      const auto inputs = gnn::primitive_inputs(comp, sym, g.features);
      std::size_t q = 0;
      for (std::size_t s = 0; s < comp.steps.size(); ++s) {
        if (comp.steps[s].prim == gnn::Primitive::input) continue;
        std::vector<double> t;
        for (std::size_t r = 1; r < runs.size(); ++r) t.push_back(runs[r][s]);
        if (t.empty()) t.push_back(runs[0][s]);
        std::sort(t.begin(), t.end());
        samples.push_back({inputs[q++], t[t.size() / 2], g.name});
      }
      ++done;
    }
  }
  if (c.from.empty()) progress("done", total, total);
  if (c.from.empty()) {
    std::ofstream f(c.samples);
    f << csv_header() << "\n";
    for (const auto& s : samples) f << csv_line(s) << "\n";
  }
  auto model = gnn::CostModel::fit(samples, 1e-3, c.trees);
  // Both learners, on the training samples and leave-one-graph-out (fitted without the graph).
  std::map<gnn::Primitive, std::array<std::vector<double>, 4>> err;
  std::set<std::string> names;
  for (const auto& s : samples) names.insert(s.graph);
  for (const std::string& held : names) {
    std::vector<gnn::CostSample> rest;
    for (const auto& s : samples)
      if (s.graph != held) rest.push_back(s);
    const auto logo = gnn::CostModel::fit(rest, 1e-3, c.trees);
    for (const auto& s : samples) {
      if (s.graph != held) continue;
      err[s.input.prim][2].push_back(std::abs(logo.predict_loglinear_ms(s.input) / s.ms - 1.0));
      err[s.input.prim][3].push_back(std::abs(logo.predict_ms(s.input) / s.ms - 1.0));
    }
  }
  for (const auto& s : samples) {
    err[s.input.prim][0].push_back(std::abs(model.predict_loglinear_ms(s.input) / s.ms - 1.0));
    err[s.input.prim][1].push_back(std::abs(model.predict_ms(s.input) / s.ms - 1.0));
  }
  // Per primitive, the learner with the smaller median leave-one-graph-out error is kept.
  auto median = [](std::vector<double> v) {
    if (v.empty()) return std::nan("");
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::string kept;
  for (auto& [p, e] : err)
    if (model.has_trees(p)) {
      const bool trees_better = median(e[3]) < median(e[2]);
      if (!trees_better) model.drop_trees(p);
      kept += std::string(kept.empty() ? "" : ", ") + gnn::primitive_name(p) + (trees_better ? " trees" : " log-linear");
    }
  {
    std::ofstream f(c.model);
    f << "# spindle-profile: " << samples.size() << " samples, " << c.graphs.size() << " graphs, " << c.threads
      << " threads; learner per primitive (smaller leave-one-graph-out error): " << kept << "\n"
      << model.serialize();
  }
  std::printf("spindle-profile: %zu samples over %zu graphs in %.1f s -> %s, %s (%s)\n", samples.size(),
              c.graphs.size(), wall.seconds(), c.samples.c_str(), c.model.c_str(),
              c.trees > 0 ? "XGBoost trees + log-linear" : "log-linear only");
  std::printf("median |predicted / measured - 1|    fit: log-linear  %-8s  leave-one-graph-out: log-linear  %s\n",
              c.trees > 0 ? "trees" : "(same)", c.trees > 0 ? "trees" : "(same)");
  for (auto& [p, e] : err)
    std::printf("  %-18s %5zu samples   %9.1f%%  %8.1f%%   %28.1f%%  %8.1f%%   -> %s\n", gnn::primitive_name(p),
                e[0].size(), 100 * median(e[0]), 100 * median(e[1]), 100 * median(e[2]), 100 * median(e[3]),
                model.has_trees(p) ? "trees" : "log-linear");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "\nspindle-profile: %s\n", e.what());
  return 1;
}
