// GNN cost models: the fit recovers a known power law, the fallback counts operations, the
// model file round-trips and a malformed one is a FormatError naming the line; selection
// keeps to the candidates annotated for the embedding relation and takes the cheapest.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "spindle/gnn/cost_model.hpp"

namespace gnn = spindle::gnn;

namespace {

gnn::PrimitiveInput spmm(double rows, double nnz, double k, double cv) {
  gnn::PrimitiveInput x;
  x.prim = gnn::Primitive::spmm_weighted;
  x.rows = rows;
  x.inner = rows;
  x.cols = k;
  x.nnz = nnz;
  x.degree_cv = cv;
  x.degree_gini = cv / 3;
  x.near_diagonal = 0.1 * cv;
  x.max_to_mean = 10 * cv;
  return x;
}

}  // namespace

TEST_CASE("gnn cost model: the fit recovers a power law in the sizes", "[gnn]") {
  // t = 2e-6 * nnz^1.0 * K^0.8 ms, independent of the graph features.
  std::vector<gnn::CostSample> samples;
  for (double n : {1e3, 1e4, 1e5})
    for (double deg : {2.0, 8.0, 30.0})
      for (double k : {16.0, 64.0, 256.0})
        for (double cv : {0.2, 1.5}) {
          auto x = spmm(n, n * deg, k, cv);
          samples.push_back({x, 2e-6 * std::pow(x.nnz + 1, 1.0) * std::pow(k + 1, 0.8), "g"});
        }
  const auto m = gnn::CostModel::fit(samples, 1e-9);
  REQUIRE(m.has(gnn::Primitive::spmm_weighted));
  for (const auto& s : samples) CHECK(m.predict_ms(s.input) == Approx(s.ms).epsilon(0.02));
  // Extrapolates as a power law.
  auto big = spmm(1e6, 3e7, 128, 0.7);
  CHECK(m.predict_ms(big) == Approx(2e-6 * (3e7 + 1) * std::pow(129.0, 0.8)).epsilon(0.05));
}

TEST_CASE("gnn cost model: without a fitted primitive, time follows the operation count", "[gnn]") {
  gnn::CostModel empty;
  gnn::PrimitiveInput g;
  g.prim = gnn::Primitive::gemm;
  g.rows = 1000;
  g.inner = 64;
  g.cols = 32;
  CHECK(empty.predict_ms(g) == Approx(1000.0 * 64 * 32 * 1e-6));
  gnn::PrimitiveInput in;
  in.prim = gnn::Primitive::input;
  CHECK(empty.predict_ms(in) == 0);
}

TEST_CASE("gnn cost model: file round trip and malformed files", "[gnn]") {
  std::vector<gnn::CostSample> samples;
  for (double n : {1e3, 1e4, 1e5, 3e5, 1e6, 3e6})
    for (double c : {8.0, 64.0}) {
      gnn::PrimitiveInput x;
      x.prim = gnn::Primitive::row_broadcast;
      x.rows = n;
      x.inner = n;
      x.cols = c;
      samples.push_back({x, 1e-6 * n * c, "g"});
    }
  const auto m = gnn::CostModel::fit(samples);
  const auto again = gnn::CostModel::parse(m.serialize());
  for (const auto& s : samples) CHECK(again.predict_ms(s.input) == Approx(m.predict_ms(s.input)).epsilon(1e-12));
  using Catch::Contains;
  CHECK_THROWS_AS(gnn::CostModel::parse(""), spindle::FormatError);
  CHECK_THROWS_WITH(gnn::CostModel::parse("hello 1\n"), Contains(":1: expected the header"));
  CHECK_THROWS_WITH(gnn::CostModel::parse("spindle-gnn-cost-model 1\nfoo 1 2\n"), Contains(":2: unknown primitive 'foo'"));
  CHECK_THROWS_WITH(gnn::CostModel::parse("spindle-gnn-cost-model 1\ngemm 4 1 2 3\n"), Contains("needs 4 finite weights"));
  CHECK_THROWS_WITH(gnn::CostModel::parse("spindle-gnn-cost-model 1\ngemm 3 1 2 3\n"), Contains("its model has 4 features"));
  CHECK_THROWS_WITH(gnn::CostModel::parse("spindle-gnn-cost-model 1\ngemm 4 1 2 nan 3\n"), Contains("finite"));
  CHECK_THROWS_AS(gnn::CostModel::load("/nonexistent/model.txt"), spindle::IOError);
}

TEST_CASE("gnn selection: embedding relation first, then the least predicted cost", "[gnn]") {
  const auto cands = gnn::candidates(gnn::layers::gcn());
  spindle::GraphFeatures f;
  f.degree_cv = 1;
  const gnn::CostModel ops;  // operation counts
  auto pick = [&](double kin, double kout, double e) {
    const std::map<std::string, double> sym = {{"N", 10000}, {"E", e}, {"K_in", kin}, {"K_out", kout}};
    return cands.ranked[gnn::select_composition(cands, ops, sym, f)].composition.text;
  };
  // Wider input: multiply by W first; narrower: aggregate first. By operation count the
  // row broadcasts folded into the SpMM (broadcasts_folded) cost nothing, so they beat the
  // precomputed normalisation (one sparse_scale of E) on every graph.
  CHECK(pick(256, 32, 50000) == "(D·(A·(D·(H·W))))");
  CHECK(pick(32, 256, 50000) == "((D·(A·(D·H)))·W)");
  CHECK(pick(256, 2, 5e6) == "(D·(A·(D·(H·W))))");
  // Every selection is a promoted composition.
  for (double kin : {8.0, 64.0, 512.0})
    for (double kout : {8.0, 64.0, 512.0}) {
      const std::map<std::string, double> sym = {{"N", 1000}, {"E", 9000}, {"K_in", kin}, {"K_out", kout}};
      CHECK(cands.ranked[gnn::select_composition(cands, ops, sym, f)].promoted);
    }
}

TEST_CASE("gnn cost model: XGBoost trees fit, round-trip through the model file, and a cut file is an error", "[gnn]") {
  if (!gnn::xgboost::available()) {
    WARN("XGBoost not available, tree models not tested: " << gnn::xgboost::unavailable_reason());
    return;
  }
  std::vector<gnn::CostSample> samples;
  for (double n : {1e3, 3e3, 1e4, 3e4, 1e5})
    for (double deg : {2.0, 8.0, 30.0})
      for (double k : {16.0, 64.0, 256.0})
        for (double cv : {0.2, 1.5}) {
          auto x = spmm(n, n * deg, k, cv);
          // The irregular graphs (cv 1.5) run 3x slower: a feature effect trees should find.
          samples.push_back({x, 2e-6 * x.nnz * std::pow(k, 0.8) * (cv > 1 ? 3.0 : 1.0), "g"});
        }
  const auto m = gnn::CostModel::fit(samples, 1e-3, 300);
  REQUIRE(m.has_trees(gnn::Primitive::spmm_weighted));
  for (const auto& s : samples) CHECK(m.predict_ms(s.input) == Approx(s.ms).epsilon(0.15));
  const std::string text = m.serialize();
  CHECK(text.find("xgboost spmm_weighted ") != std::string::npos);
  const auto again = gnn::CostModel::parse(text);
  REQUIRE(again.has_trees(gnn::Primitive::spmm_weighted));
  for (const auto& s : samples) CHECK(again.predict_ms(s.input) == Approx(m.predict_ms(s.input)).epsilon(1e-6));
  const auto cut = text.substr(0, text.size() - 100);
  CHECK_THROWS_AS(gnn::CostModel::parse(cut), spindle::FormatError);
  CHECK_THROWS_WITH(gnn::CostModel::parse(cut), Catch::Contains("cut short"));
}

TEST_CASE("gnn cost model: the backward pass's kernels follow the gradients asked for", "[gnn]") {
  const auto c = gnn::candidates(gnn::layers::gcn());
  const std::map<std::string, double> sym{{"N", 1000}, {"E", 8000}, {"K_in", 64}, {"K_out", 16}};
  const spindle::GraphFeatures g;
  auto kinds = [&](const std::string& text, const std::set<std::string>& wrt) {
    std::multiset<std::string> r;
    for (const auto& x : gnn::backward_inputs(c.ranked.at(static_cast<std::size_t>(c.find(text))).composition, sym, g,
                                              wrt))
      r.insert(gnn::primitive_name(x.prim));
    return r;
  };
  using S = std::multiset<std::string>;
  // Aggregate first: the weight's gradient is one GEMM; H's adds the way back through the
  // aggregation (GEMM and the SpMM with the transpose, both broadcasts folded into it).
  CHECK(kinds("((D·(A·(D·H)))·W)", {"W"}) == S{"gemm"});
  CHECK(kinds("((D·(A·(D·H)))·W)", {"W", "H"}) == S{"gemm", "gemm", "spmm_unweighted"});
  // GEMM first: even the weight's gradient goes back through the aggregation.
  CHECK(kinds("(D·(A·(D·(H·W))))", {"W"}) == S{"spmm_unweighted", "gemm"});
  // D differentiated: the inner broadcast keeps its kernel (and D's two rowwise dots are
  // charged as broadcasts); the outer one still folds into the SpMM.
  CHECK(kinds("(D·(A·(D·(H·W))))", {"W", "D"}) ==
        S{"row_broadcast", "row_broadcast", "row_broadcast", "spmm_unweighted", "gemm"});
  CHECK(kinds("([D·A·D]·(H·W))", {"W"}) == S{"spmm_weighted", "gemm"});
  CHECK(kinds("([D·A·D]·(H·W))", {}).empty());
  // Shapes: the GEMM gradients are N x K_out x K_in.
  const auto x = gnn::backward_inputs(c.ranked.at(static_cast<std::size_t>(c.find("((D·(A·(D·H)))·W)"))).composition,
                                      sym, g, {"W"});
  REQUIRE(x.size() == 1);
  CHECK(x[0].rows == 1000);
  CHECK(x[0].inner == 16);
  CHECK(x[0].cols == 64);
  // Selection for training adds the backward's predicted time.
  gnn::CostModel ops;  // operation counts
  const auto fwd_only = gnn::select_composition(c, ops, sym, g);
  const std::set<std::string> wrt{"W"};
  const auto train = gnn::select_composition(c, ops, sym, [&] { return g; }, &wrt);
  double best = INFINITY;
  for (std::size_t i : gnn::fitting_compositions(c, sym))
    best = std::min(best, gnn::predict_ms(c.ranked[i].composition, ops, sym, g) +
                              gnn::predict_backward_ms(c.ranked[i].composition, ops, sym, g, wrt));
  CHECK(gnn::predict_ms(c.ranked[train].composition, ops, sym, g) +
            gnn::predict_backward_ms(c.ranked[train].composition, ops, sym, g, wrt) ==
        Approx(best));
  CHECK(c.ranked[fwd_only].promoted);
}

TEST_CASE("gnn cost model: a sum of GEMM products computed inside it is not charged an add", "[gnn]") {
  const auto c = gnn::candidates(gnn::layers::sage_mean());
  const std::map<std::string, double> sym{{"N", 1000}, {"E", 8000}, {"K_in", 64}, {"K_out", 16}};
  const spindle::GraphFeatures g;
  auto kinds = [&](const std::string& text) {
    const auto& comp = c.ranked.at(static_cast<std::size_t>(c.find(text))).composition;
    std::multiset<std::string> fwd, all;
    for (const auto& x : gnn::forward_inputs(comp, sym, g)) fwd.insert(gnn::primitive_name(x.prim));
    for (const auto& x : gnn::primitive_inputs(comp, sym, g)) all.insert(gnn::primitive_name(x.prim));
    CHECK(all.count("dense_add") == 1);  // the per-step list (spindle-profile's) keeps every step
    CHECK(all.size() == comp.steps.size() - static_cast<std::size_t>(std::count_if(comp.steps.begin(), comp.steps.end(),
                                                                                  [](const gnn::Step& st) {
                                                                                    return st.prim == gnn::Primitive::input;
                                                                                  })));
    return fwd;
  };
  using S = std::multiset<std::string>;
  // Aggregate first: both terms are GEMMs computed inside the sum (and the mean's broadcast
  // is folded into the SpMM).
  CHECK(kinds("(((Dinv·(A·H))·Wneigh) + (H·Wself))") == S{"spmm_unweighted", "gemm", "gemm"});
  // Weight first: one GEMM term, the other term (the broadcast's result) is still added.
  CHECK(kinds("((Dinv·(A·(H·Wneigh))) + (H·Wself))") == S{"gemm", "spmm_unweighted", "gemm", "dense_add"});
  // The normalisation precomputed as a weighted graph has no broadcast to fold.
  CHECK(kinds("(((Dinv·A)·(H·Wneigh)) + (H·Wself))") == S{"sparse_scale", "gemm", "spmm_weighted", "gemm", "dense_add"});
  // The prediction is the sum over the executed primitives.
  gnn::CostModel ops;
  const auto& pair = c.ranked.at(static_cast<std::size_t>(c.find("(((Dinv·(A·H))·Wneigh) + (H·Wself))"))).composition;
  double t = 0;
  for (const auto& x : gnn::forward_inputs(pair, sym, g)) t += ops.predict_ms(x);
  CHECK(gnn::predict_ms(pair, ops, sym, g) == Approx(t));
  // A sum keeps its add exactly when some term is not a GEMM product computed inside it:
  // every TAGCN composition (sums of three terms).
  const auto tc = gnn::candidates(gnn::layers::tagcn());
  std::size_t free_sums = 0, charged_sums = 0;
  for (const auto& r : tc.ranked) {
    const auto into = gnn::gemms_into_sums(r.composition);
    for (std::size_t s = 0; s < r.composition.steps.size(); ++s) {
      const auto& st = r.composition.steps[s];
      if (st.prim != gnn::Primitive::dense_add) continue;
      bool all = true;
      for (int a : st.args) all = all && r.composition.steps[static_cast<std::size_t>(a)].prim == gnn::Primitive::gemm &&
                                  into[static_cast<std::size_t>(a)];
      CHECK(gnn::sum_of_gemms_only(r.composition, into, s) == all);
      ++(all ? free_sums : charged_sums);
    }
  }
  CHECK(free_sums > 0);
  CHECK(charged_sums > 0);
}

TEST_CASE("gnn execute plan: row broadcasts beside an SpMM fold into it, either side", "[gnn]") {
  const auto c = gnn::candidates(gnn::layers::gcn());
  const std::map<std::string, double> sym{{"N", 1000}, {"E", 8000}, {"K_in", 64}, {"K_out", 16}};
  const spindle::GraphFeatures g;
  auto plan = [&](const std::string& text) {
    const auto& comp = c.ranked.at(static_cast<std::size_t>(c.find(text))).composition;
    const auto by = gnn::broadcasts_folded(comp);
    std::multiset<std::string> folded, runs;
    for (std::size_t s = 0; s < by.size(); ++s) {
      if (by[s] < 0) continue;
      folded.insert(gnn::primitive_name(comp.steps[s].prim));
      // the step that computes it reads it
      const auto& args = comp.steps[static_cast<std::size_t>(by[s])].args;
      CHECK(std::find(args.begin(), args.end(), static_cast<int>(s)) != args.end());
    }
    for (const auto& x : gnn::forward_inputs(comp, sym, g)) runs.insert(gnn::primitive_name(x.prim));
    return std::make_pair(folded, runs);
  };
  using S = std::multiset<std::string>;
  // DGL's order: D·(A·(D·(H·W))) — the inner broadcast into the SpMM, the SpMM into the
  // outer broadcast: one pass for the aggregation.
  auto [f1, r1] = plan("(D·(A·(D·(H·W))))");
  CHECK(f1 == S{"row_broadcast", "spmm_unweighted"});
  CHECK(r1 == S{"gemm", "spmm_unweighted"});
  auto [f2, r2] = plan("((D·(A·(D·H)))·W)");
  CHECK(f2 == S{"row_broadcast", "spmm_unweighted"});
  CHECK(r2 == S{"spmm_unweighted", "gemm"});
  // The normalisation precomputed once: nothing to fold.
  auto [f3, r3] = plan("([D·A·D]·(H·W))");
  CHECK(f3.empty());
  CHECK(r3 == S{"sparse_scale", "gemm", "spmm_weighted"});
  // The result itself is never folded: every candidate's result step runs.
  for (const auto& r : c.ranked) CHECK(gnn::broadcasts_folded(r.composition).at(static_cast<std::size_t>(r.composition.result)) == -1);
}
