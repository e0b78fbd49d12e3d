// spindle-gnn-bench: GRANII's evaluation on this machine. For every graph, layer and
// embedding pair it times every promoted composition of the layer, the framework default
// (DGL / PyG order) and the composition the cost model selects, and reports per layer
//   - how often the selection is within 10 % of the best promoted composition,
//   - the geomean speedup of the selection over the default (and of the best over it),
//   - the selection overhead (featurize + select) against one layer execution: a layer's
//     first call for its sizes; the graph's structure features are computed on the first
//     such call on the graph and kept with it (graph_features_kept), so a graph's first
//     case pays the featurizer and the others the values scan and the prediction,
//   - with --samples, the same for leave-one-graph-out models (fitted without the graph
//     they rank).
// With --pyg it instead times Spindle's GCNConv, SAGEConv, GINConv and GATConv (forward, and forward
// + backward) against PyTorch Geometric's in the same run and checks that the outputs and
// gradients agree (gnn_pyg.hpp; default graphs: the five GNN graphs); with --layers ...,rgcn
// also RGCNConv on the typed graphs (rgcn/aifb, rgcn/mutag added to the default graphs).
//
//   spindle-gnn-bench [--graphs LIST] [--layers gcn,gin,gat,sgc,tagcn,sage,rgcn]
//                     [--pairs 32:256,256:32,...] [--threads T] [--reps R] [--min-ms MS]
//                     [--model FILE] [--samples CSV] [--verbose]
//   spindle-gnn-bench --pyg [--graphs LIST] [--layers gcn,sage,gin,gat,rgcn] [--pairs ...] [--python PATH]
//
// Each time is the median of at least R calls (after one untimed call), more while they add
// up to less than MS milliseconds (default 150; the PyG peer gets the same budget). The
// compositions of one case are timed in interleaved rounds (time_interleaved_ms), so load on
// a shared host falls on all of them alike.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <set>

#include "gnn_common.hpp"
#include "gnn_pyg.hpp"

namespace {

using namespace gnnbench;

struct Config {
  std::vector<std::string> graphs = {"gnn/cora", "gnn/citeseer", "gnn/pubmed", "gnn/ppi-graphsaint",
                                     "gnn/ogbn-arxiv", "matrices/wiki-Vote", "matrices/luxembourg_osm"};
  std::vector<std::string> layers = {"gcn", "gin", "gat", "sgc", "sage"};
  std::vector<std::pair<int, int>> pairs = {{32, 256}, {256, 32}, {64, 512}, {512, 64}, {128, 128}, {32, 32}};
  int threads = 2, reps = 5;
  double min_ms = kMinTimedMs;
  int trees = gnn::xgboost::available() ? 200 : 0;  // rounds of the leave-one-graph-out models
  std::string model = SPINDLE_GNN_DEFAULT_MODEL, samples, data = SPINDLE_PROFILE_DATA_DIR;
  bool verbose = false, pyg = false, graphs_given = false, layers_given = false;
  std::string python = SPINDLE_PEERS_PYTHON, pyg_script = SPINDLE_PYG_SCRIPT;
};

gnn::LayerExpr layer_by_name(const std::string& n) {
  if (n == "gcn") return gnn::layers::gcn();
  if (n == "gin") return gnn::layers::gin();
  if (n == "gat") return gnn::layers::gat();
  if (n == "sgc") return gnn::layers::sgc();
  if (n == "tagcn") return gnn::layers::tagcn();
  if (n == "sage") return gnn::layers::sage_mean();
  if (n == "rgcn") return gnn::layers::rgcn();
  SPINDLE_CHECK(false, sp::UserError, "unknown layer '", n, "' (gcn, gin, gat, sgc, tagcn, sage, rgcn)");
  return {};
}

struct Case {
  std::string graph, layer;
  int k_in, k_out;
  double best, dflt, pyg, selected, overhead, logo = NAN;
};

double geomean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::log(x);
  return v.empty() ? NAN : std::exp(s / static_cast<double>(v.size()));
}

}  // namespace

int main(int argc, char** argv) try {
  Config c;
  Args a(argc, argv, "spindle-gnn-bench");
  while (a.next()) {
    const std::string& s = a.flag;
    auto next = [&] { return a.value(); };
    if (s == "--graphs") c.graphs = split(next()), c.graphs_given = true;
    else if (s == "--layers") c.layers = split(next()), c.layers_given = true;
    else if (s == "--pyg") c.pyg = true;
    else if (s == "--python") c.python = next();
    else if (s == "--pairs") {
      c.pairs.clear();
      for (const auto& p : split(next())) {
        const auto kk = split(p, ':');
        SPINDLE_CHECK(kk.size() == 2, sp::UserError, "--pairs: '", p, "' is not K_in:K_out");
        c.pairs.emplace_back(std::stoi(kk[0]), std::stoi(kk[1]));
      }
    } else if (s == "--threads") c.threads = std::stoi(next());
    else if (s == "--reps") c.reps = std::stoi(next());
    else if (s == "--min-ms") c.min_ms = std::stod(next());
    else if (s == "--model") c.model = next();
    else if (s == "--samples") c.samples = next();
    else if (s == "--trees") c.trees = std::stoi(next());
    else if (s == "--data") c.data = next();
    else if (s == "--verbose") c.verbose = true;
    else {
      std::fprintf(stderr,
                   "usage: spindle-gnn-bench [--graphs LIST] [--layers LIST] [--pairs KIN:KOUT,...] [--threads T] "
                   "[--reps R] [--min-ms MS] [--model FILE] [--samples CSV] [--trees ROUNDS] [--data DIR] [--verbose] "
                   "[--pyg [--python PATH]]\n");
      return s == "--help" || s == "-h" ? 0 : 2;
    }
  }
  sp::runtime::Runtime::default_instance().pool().set_num_threads(c.threads);
  if (c.pyg) {
    gnnbench::PygOptions o;
    o.graphs = c.graphs_given ? c.graphs
                              : std::vector<std::string>{"gnn/cora", "gnn/citeseer", "gnn/pubmed", "gnn/ppi-graphsaint",
                                                         "gnn/ogbn-arxiv"};
    o.layers = c.layers_given ? c.layers : std::vector<std::string>{"gcn", "sage", "gin", "gat"};
    // RGCN runs on the typed graphs (data/rgcn) only.
    if (!c.graphs_given && std::find(o.layers.begin(), o.layers.end(), "rgcn") != o.layers.end())
      for (const char* typed : {"rgcn/aifb", "rgcn/mutag"}) o.graphs.push_back(typed);
    o.pairs = c.pairs;
    o.threads = c.threads;
    o.reps = c.reps;
    o.min_ms = c.min_ms;
    o.data = c.data;
    o.model = c.model;
    o.python = c.python;
    o.script = c.pyg_script;
    std::string why;
    if (!gnnbench::pyg_available(o, why)) {
      std::printf("spindle-gnn-bench --pyg: PyG is not available: %s\n", why.c_str());
      return 3;
    }
    std::printf("spindle-gnn-bench --pyg: %d threads, model %s, PyG via %s\n", c.threads,
                c.model.empty() ? "(operation counts)" : c.model.c_str(), o.python.c_str());
    gnnbench::print_pyg_report(gnnbench::run_pyg_comparison(o), o.layers);
    return 0;
  }
  const gnn::CostModel model = c.model.empty() ? gnn::CostModel{} : gnn::CostModel::load(c.model);
  std::vector<gnn::CostSample> samples;
  if (!c.samples.empty()) samples = read_samples(c.samples);
  std::printf("spindle-gnn-bench: %d threads, model %s%s\n", c.threads, c.model.empty() ? "(operation counts)" : c.model.c_str(),
              samples.empty() ? "" : (", leave-one-graph-out from " + c.samples).c_str());

  std::vector<gnn::LayerCandidates> cands;
  for (const auto& n : c.layers) cands.push_back(gnn::candidates(layer_by_name(n)));

  std::vector<Case> cases;
  std::vector<std::pair<std::string, double>> featurize_ms;  // graph_features once per graph, at load
  const std::size_t total = c.graphs.size() * c.layers.size() * c.pairs.size();
  std::size_t done = 0;
  for (const std::string& spec : c.graphs) {
    const Graph g = load_graph(spec, c.data);
    featurize_ms.emplace_back(g.name, g.features.seconds * 1e3);
    std::optional<gnn::CostModel> logo;
    if (!samples.empty()) {
      std::vector<gnn::CostSample> rest;
      for (const auto& s : samples)
        if (s.graph != g.name) rest.push_back(s);
      logo = gnn::CostModel::fit(rest, 1e-3, c.trees);
    }
    for (const auto& [kin, kout] : c.pairs) {
      const Operands o = make_operands(g, kin, kout);
      auto b = o.bind(g);
      // GAT holds Θ = H·W from its attention stage.
      sp::Tensor<float> theta = sp::Tensor<float>::zeros({g.a.rows(), kout});
      b.value("(H·W)", theta.view());
      const std::map<std::string, double> sym = {{"N", double(g.a.rows())}, {"E", double(g.a.nnz())},
                                                 {"E1", double(g.a.nnz())}, {"E2", double(g.a.nnz())},
                                                 {"K_in", double(kin)}, {"K_out", double(kout)}};
      for (std::size_t l = 0; l < cands.size(); ++l) {
        const auto& cd = cands[l];
        progress(g.name + " " + cd.layer.name + " " + std::to_string(kin) + "->" + std::to_string(kout), done, total);
        const int d = cd.find(cd.layer.default_for(kin, kout));
        SPINDLE_CHECK(d >= 0, sp::InternalError, "default composition of ", cd.layer.name, " not enumerated");
        // Selection as a layer's first call does it: the graph is featurized only when the
        // embedding sizes leave more than one candidate, its structure part once per graph.
        sp::Timer t;
        const std::size_t sel =
            gnn::select_composition(cd, model, sym, [&] { return sp::inspect::graph_features_kept(g.a); });
        const double overhead = t.seconds() * 1e3;
        const int fixed = cd.find(cd.layer.default_fixed);
        SPINDLE_CHECK(fixed >= 0, sp::InternalError, "PyG composition of ", cd.layer.name, " not enumerated");
        std::optional<std::size_t> logo_sel;
        if (logo) logo_sel = gnn::select_composition(cd, *logo, sym, g.features);
        // Every composition the case compares (the promoted ones, both defaults, the two
        // selections), timed in interleaved rounds with its buffers kept between calls, as a
        // layer keeps them.
        std::set<std::size_t> timed{static_cast<std::size_t>(d), static_cast<std::size_t>(fixed), sel};
        if (logo_sel) timed.insert(*logo_sel);
        for (std::size_t i = 0; i < cd.ranked.size(); ++i)
          if (cd.ranked[i].promoted) timed.insert(i);
        std::map<std::size_t, double> ms;
        {
          std::map<std::size_t, gnn::Workspace<float>> ws;
          std::vector<std::function<void()>> calls;
          for (std::size_t i : timed) calls.push_back([&, i] { (void)gnn::execute(cd.ranked[i].composition, b, ws[i]); });
          const std::vector<double> medians = time_interleaved_ms(calls, c.reps, c.min_ms);
          std::size_t n = 0;
          for (std::size_t i : timed) ms[i] = medians[n++];
        }
        auto time_of = [&](std::size_t i) { return ms.at(i); };
        double best = INFINITY;
        for (std::size_t i = 0; i < cd.ranked.size(); ++i)
          if (cd.ranked[i].promoted) best = std::min(best, time_of(i));
        Case k{g.name,      cd.layer.name, kin, kout, best, time_of(static_cast<std::size_t>(d)),
               time_of(static_cast<std::size_t>(fixed)), time_of(sel), overhead};
        if (logo_sel) k.logo = time_of(*logo_sel);
        if (c.verbose) {
          std::fprintf(stderr, "\n");
          for (const auto& [i, t2] : ms) {
            std::fprintf(stderr, "  %9.3f ms%s%s%s %s\n", t2, i == sel ? " [selected]" : "",
                         static_cast<int>(i) == d ? " [DGL]" : "", static_cast<int>(i) == fixed ? " [PyG]" : "",
                         cd.ranked[i].composition.text.c_str());
            // Where the time goes: each step's least wall time over the repetitions.
            const auto& comp = cd.ranked[i].composition;
            gnn::Workspace<float> sws;
            std::vector<double> least(comp.steps.size(), INFINITY), step_ms;
            for (int r = 0; r < c.reps + 1; ++r) {
              (void)gnn::execute(comp, b, sws, &step_ms);
              if (r == 0) continue;  // first call: buffers allocated
              for (std::size_t s = 0; s < step_ms.size(); ++s) least[s] = std::min(least[s], step_ms[s]);
            }
            for (std::size_t s = 0; s < comp.steps.size(); ++s)
              if (comp.steps[s].prim != gnn::Primitive::input)
                std::fprintf(stderr, "               %9.3f ms  %-16s %s\n", least[s],
                             gnn::primitive_name(comp.steps[s].prim), comp.steps[s].value->key.c_str());
          }
        }
        cases.push_back(k);
        ++done;
      }
    }
  }
  progress("done", total, total);

  std::printf("\n%-24s %-9s %9s %9s %9s %9s %9s %8s %8s %8s %9s\n", "graph", "layer", "K", "best ms", "DGL ms",
              "PyG ms", "selected", "sel/best", "DGL/sel", "PyG/sel", "overhead");
  for (const auto& k : cases)
    std::printf("%-24s %-9s %4d:%-4d %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f %7.3fms\n", k.graph.c_str(),
                k.layer.c_str(), k.k_in, k.k_out, k.best, k.dflt, k.pyg, k.selected, k.selected / k.best,
                k.dflt / k.selected, k.pyg / k.selected, k.overhead);

  std::printf("\n%-9s %6s %11s %12s %12s %12s %12s %15s %13s %12s\n", "layer", "cases", "within 10%", "sel vs DGL",
              "best vs DGL", "sel vs PyG", "best vs PyG", "overhead/layer", "over 1 layer", "LOGO within");
  std::vector<std::string> names;
  for (const auto& cd : cands) names.push_back(cd.layer.name);
  names.push_back("all");
  for (const auto& n : names) {
    std::vector<double> sd, bd, sp_, bp;
    int within = 0, lw = 0, count = 0, lcount = 0, over = 0;
    double worst_overhead = 0;
    for (const auto& k : cases) {
      if (n != "all" && k.layer != n) continue;
      ++count;
      within += k.selected <= 1.1 * k.best;
      sd.push_back(k.dflt / k.selected);
      bd.push_back(k.dflt / k.best);
      sp_.push_back(k.pyg / k.selected);
      bp.push_back(k.pyg / k.best);
      worst_overhead = std::max(worst_overhead, k.overhead / k.selected);
      over += k.overhead > k.selected;
      if (!std::isnan(k.logo)) ++lcount, lw += k.logo <= 1.1 * k.best;
    }
    std::printf("%-9s %6d %10.0f%% %11.2fx %11.2fx %11.2fx %11.2fx %14.3fx %13d %12s\n", n.c_str(), count,
                100.0 * within / std::max(count, 1), geomean(sd), geomean(bd), geomean(sp_), geomean(bp), worst_overhead,
                over, lcount ? (std::to_string(100 * lw / lcount) + "%").c_str() : "-");
  }
  std::printf("\nfeaturize (graph_features, at load):");
  for (const auto& [n, ms] : featurize_ms) std::printf(" %s %.3f ms;", n.c_str(), ms);
  std::printf("\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "\nspindle-gnn-bench: %s\n", e.what());
  return 1;
}
