// Per-primitive cost models and input-aware selection (GRANII, seed 004 §IV-D, §IV-E).
//
// A composition's cost is the sum of its primitives' predicted times. Each primitive has its
// own model, fed with the step's sizes (rows, inner, columns, stored entries) and, for the
// sparse primitives, the graph's features (inspect/graph_features.hpp): degree variation,
// Gini coefficient, locality, empty rows, load imbalance.
//
// Two learned models per primitive, fitted on profiled samples (spindle-profile): gradient-
// boosted trees of the log time (XGBoost, the seed's choice; xgboost.hpp loads it with dlopen
// to train), and a log-linear one, log t = w · [1, log sizes..., graph features...], fitted by
// ridge least squares: small, dependency-free, extrapolating as a power law. Prediction uses
// the trees where the file has them (evaluated in process by tree_ensemble.hpp: no XGBoost
// needed to predict), else the log-linear weights; a primitive with neither falls back to its
// operation count (cost polynomial) at a nominal rate, so a missing or partial model file
// still selects by work.
//
// Selection (`select_composition`) first keeps the promoted compositions annotated for the
// call's embedding relation (K_in > K_out or K_in < K_out; both when equal: the seed's
// size-only conditions), then takes the one of least predicted cost.
//
// Model file (text; `#` comments):
//   spindle-gnn-cost-model 1
//   <primitive> <n> w0 w1 ... w(n-1)          log-linear weights
//   xgboost <primitive> <bytes>\n<JSON>        an XGBoost booster (bytes of JSON follow)
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "spindle/gnn/associate.hpp"
#include "spindle/gnn/layers.hpp"
#include "spindle/gnn/tree_ensemble.hpp"
#include "spindle/gnn/xgboost.hpp"
#include "spindle/inspect/graph_features.hpp"

namespace spindle::gnn {

// What a primitive's time depends on.
struct PrimitiveInput {
  Primitive prim = Primitive::gemm;
  double rows = 0, inner = 0, cols = 0, nnz = 0;
  // Graph features (0 for dense primitives).
  double degree_cv = 0, degree_gini = 0, near_diagonal = 0, empty_row_fraction = 0, max_to_mean = 0;
};

inline bool is_sparse_primitive(Primitive p) {
  return p == Primitive::spmm_weighted || p == Primitive::spmm_unweighted || p == Primitive::sparse_scale ||
         p == Primitive::sparse_add;
}

// The design vector of a primitive's model.
inline std::vector<double> model_features(const PrimitiveInput& x) {
  auto lg = [](double v) { return std::log(v + 1.0); };
  std::vector<double> f{1.0, lg(x.rows), lg(x.inner), lg(x.cols)};
  if (is_sparse_primitive(x.prim)) {
    f.insert(f.end(), {lg(x.nnz), x.degree_cv, x.degree_gini, x.near_diagonal, x.empty_row_fraction,
                       lg(x.max_to_mean)});
  }
  return f;
}

// The step's operation count, as the cost polynomials of associate.hpp count it.
inline double operation_count_of(const PrimitiveInput& x) {
  switch (x.prim) {
    case Primitive::input: return 0;
    case Primitive::diag_product: return x.rows;
    case Primitive::sparse_scale:
    case Primitive::sparse_add: return x.nnz;
    case Primitive::row_broadcast:
    case Primitive::column_broadcast:
    case Primitive::dense_add: return x.rows * x.cols;
    case Primitive::spmm_weighted:
    case Primitive::spmm_unweighted: return x.nnz * x.cols;
    case Primitive::gemm: return x.rows * x.inner * x.cols;
  }
  return 0;
}

// The inputs of a primitive's tree model (XGBoost): every size in log scale and the graph
// features, for every primitive (trees ignore what does not split the data).
inline std::vector<float> tree_features(const PrimitiveInput& x) {
  auto lg = [](double v) { return static_cast<float>(std::log(v + 1.0)); };
  return {lg(x.rows),
          lg(x.inner),
          lg(x.cols),
          lg(x.nnz),
          lg(operation_count_of(x)),
          static_cast<float>(x.degree_cv),
          static_cast<float>(x.degree_gini),
          static_cast<float>(x.near_diagonal),
          static_cast<float>(x.empty_row_fraction),
          lg(x.max_to_mean)};
}

struct CostSample {
  PrimitiveInput input;
  double ms = 0;
  std::string graph;  // where it was measured (leave-one-graph-out evaluation)
};

class CostModel {
 public:
  // Nominal rate of the operation-count fallback: 1 ns per operation.
  static constexpr double fallback_ns_per_op = 1.0;

  bool has(Primitive p) const { return weights_.count(p) != 0; }
  bool has_trees(Primitive p) const { return trees_.count(p) != 0; }
  // Keeps the log-linear model only for `p` (where the trees predict worse held-out graphs).
  void drop_trees(Primitive p) { trees_.erase(p); }
  bool empty() const { return weights_.empty() && trees_.empty(); }

  // The tree model where there is one, else the log-linear one, else the operation count.
  double predict_ms(const PrimitiveInput& x) const {
    if (x.prim == Primitive::input) return 0;
    if (auto t = trees_.find(x.prim); t != trees_.end()) return std::exp(static_cast<double>(predict_log_ms(t->second, x)));
    return predict_loglinear_ms(x);
  }
  double predict_loglinear_ms(const PrimitiveInput& x) const {
    if (x.prim == Primitive::input) return 0;
    auto it = weights_.find(x.prim);
    if (it == weights_.end()) return operation_count_of(x) * fallback_ns_per_op * 1e-6;
    const auto f = model_features(x);
    double s = 0;
    for (std::size_t i = 0; i < f.size() && i < it->second.size(); ++i) s += f[i] * it->second[i];
    return std::exp(s);
  }

  // Log-linear weights per primitive (ridge least squares on log times; primitives with
  // fewer samples than features keep the fallback) and, with `trees` > 0 rounds, an XGBoost
  // regressor of the log time per primitive (UnavailableError without XGBoost).
  static CostModel fit(const std::vector<CostSample>& samples, double ridge = 1e-3, int trees = 0,
                       int tree_depth = 4) {
    CostModel m = fit_loglinear(samples, ridge);
    if (trees > 0) {
      std::map<Primitive, std::vector<const CostSample*>> by;
      for (const CostSample& s : samples)
        if (s.ms > 0) by[s.input.prim].push_back(&s);
      for (const auto& [p, list] : by) {
        if (list.size() < 8) continue;
        std::vector<float> x, y;
        std::size_t cols = 0;
        for (const CostSample* s : list) {
          const auto f = tree_features(s->input);
          cols = f.size();
          x.insert(x.end(), f.begin(), f.end());
          y.push_back(static_cast<float>(std::log(s->ms)));
        }
        std::string json = xgboost::Booster::train(x, list.size(), cols, y, trees, tree_depth, 0.2).save();
        m.trees_.emplace(p, Trees::read(std::move(json), std::string("the XGBoost model trained for ") + primitive_name(p)));
      }
    }
    return m;
  }

  static CostModel fit_loglinear(const std::vector<CostSample>& samples, double ridge = 1e-3) {
    std::map<Primitive, std::vector<const CostSample*>> by;
    for (const CostSample& s : samples)
      if (s.ms > 0) by[s.input.prim].push_back(&s);
    CostModel m;
    for (const auto& [p, list] : by) {
      const std::size_t d = model_features(list.front()->input).size();
      if (list.size() < d) continue;
      std::vector<std::vector<double>> a(d, std::vector<double>(d + 1, 0.0));
      for (const CostSample* s : list) {
        const auto f = model_features(s->input);
        const double y = std::log(s->ms);
        for (std::size_t i = 0; i < d; ++i) {
          for (std::size_t j = 0; j < d; ++j) a[i][j] += f[i] * f[j];
          a[i][d] += f[i] * y;
        }
      }
      for (std::size_t i = 1; i < d; ++i) a[i][i] += ridge * static_cast<double>(list.size());
      if (auto w = solve(a)) m.weights_[p] = *w;
    }
    return m;
  }

  std::string serialize() const {
    std::ostringstream os;
    os.precision(17);
    os << "spindle-gnn-cost-model 1\n";
    for (const auto& [p, w] : weights_) {
      os << primitive_name(p) << " " << w.size();
      for (double v : w) os << " " << v;
      os << "\n";
    }
    // Tree models: "xgboost <primitive> <bytes>", then that many bytes of XGBoost JSON.
    for (const auto& [p, t] : trees_)
      os << "xgboost " << primitive_name(p) << " " << t.json.size() << "\n" << t.json << "\n";
    return os.str();
  }

  // FormatError naming the line on a malformed file.
  static CostModel parse(const std::string& text, const std::string& where = "cost model") {
    std::istringstream is(text);
    std::string line;
    int no = 0;
    CostModel m;
    bool header = false;
    while (std::getline(is, line)) {
      ++no;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string name;
      ls >> name;
      if (!header) {
        int version = 0;
        ls >> version;
        SPINDLE_CHECK(name == "spindle-gnn-cost-model" && version == 1, FormatError, where, ":", no,
                      ": expected the header 'spindle-gnn-cost-model 1'");
        header = true;
        continue;
      }
      const bool tree = name == "xgboost";
      if (tree) ls >> name;
      const std::optional<Primitive> p = primitive_from_name(name);
      SPINDLE_CHECK(p.has_value(), FormatError, where, ":", no, ": unknown primitive '", name, "'");
      if (tree) {
        const int header_line = no;
        std::size_t bytes = 0;
        SPINDLE_CHECK(static_cast<bool>(ls >> bytes) && bytes > 0 && bytes < (std::size_t{1} << 30), FormatError,
                      where, ":", no, ": expected a byte count after 'xgboost ", name, "'");
        std::string json(bytes, '\0');
        SPINDLE_CHECK(static_cast<bool>(is.read(json.data(), static_cast<std::streamsize>(bytes))), FormatError,
                      where, ":", no, ": the XGBoost model of '", name, "' is cut short (", bytes, " bytes expected)");
        std::string rest;
        std::getline(is, rest);  // the newline after the JSON
        ++no;
        no += static_cast<int>(std::count(json.begin(), json.end(), '\n'));
        m.trees_.insert_or_assign(
            *p, Trees::read(std::move(json), where + ":" + std::to_string(header_line) + ": the XGBoost model of '" + name + "'"));
        continue;
      }
      std::size_t n = 0;
      SPINDLE_CHECK(static_cast<bool>(ls >> n) && n > 0 && n <= 64, FormatError, where, ":", no,
                    ": expected a weight count after '", name, "'");
      std::vector<double> w(n);
      for (double& v : w)
        SPINDLE_CHECK(static_cast<bool>(ls >> v) && std::isfinite(v), FormatError, where, ":", no, ": '", name,
                      "' needs ", n, " finite weights");
      PrimitiveInput probe;
      probe.prim = *p;
      SPINDLE_CHECK(n == model_features(probe).size(), FormatError, where, ":", no, ": '", name, "' has ", n,
                    " weights, its model has ", model_features(probe).size(), " features");
      m.weights_[*p] = std::move(w);
    }
    SPINDLE_CHECK(header, FormatError, where, ": empty (no 'spindle-gnn-cost-model 1' header)");
    return m;
  }
  static CostModel load(const std::string& path) {
    std::ifstream f(path);
    SPINDLE_CHECK(f.good(), IOError, "cannot read the GNN cost model '", path, "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return parse(ss.str(), path);
  }

 private:
  static std::optional<std::vector<double>> solve(std::vector<std::vector<double>> a) {
    const std::size_t d = a.size();
    for (std::size_t c = 0; c < d; ++c) {
      std::size_t piv = c;
      for (std::size_t r = c + 1; r < d; ++r)
        if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
      if (std::abs(a[piv][c]) < 1e-12) return std::nullopt;
      std::swap(a[c], a[piv]);
      for (std::size_t r = 0; r < d; ++r) {
        if (r == c) continue;
        const double k = a[r][c] / a[c][c];
        for (std::size_t j = c; j <= d; ++j) a[r][j] -= k * a[c][j];
      }
    }
    std::vector<double> w(d);
    for (std::size_t i = 0; i < d; ++i) w[i] = a[i][d] / a[i][i];
    return w;
  }
  std::map<Primitive, std::vector<double>> weights_;
  // A primitive's trees, evaluated in process, and the XGBoost JSON they were read from (what
  // serialize writes back).
  struct Trees {
    TreeEnsemble ensemble;
    std::string json;
    static Trees read(std::string json, const std::string& where) {
      Trees t{TreeEnsemble::from_xgboost_json(json, where), std::move(json)};
      PrimitiveInput probe;
      SPINDLE_CHECK(static_cast<std::size_t>(t.ensemble.features()) == tree_features(probe).size(), FormatError,
                    where, " reads ", t.ensemble.features(), " features, the tree models have ",
                    tree_features(probe).size());
      return t;
    }
  };
  static float predict_log_ms(const Trees& t, const PrimitiveInput& x) {
    const auto f = tree_features(x);
    return t.ensemble.predict(f.data());
  }
  std::map<Primitive, Trees> trees_;
};

// The inputs of a composition's primitives for concrete symbol values and graph features.
inline std::vector<PrimitiveInput> primitive_inputs(const Composition& c, const std::map<std::string, double>& sym,
                                                    const GraphFeatures& g) {
  std::vector<PrimitiveInput> out;
  auto ev = [&](const std::string& s) { return Size::symbol(s).eval(sym); };
  for (const Step& st : c.steps) {
    if (st.prim == Primitive::input) continue;
    PrimitiveInput x;
    x.prim = st.prim;
    x.rows = ev(st.value->info.rows);
    x.cols = ev(st.value->info.cols);
    const auto& first = c.steps[static_cast<std::size_t>(st.args.at(0))].value->info;
    x.inner = ev(first.cols);
    if (is_sparse_primitive(st.prim)) {
      x.nnz = st.prim == Primitive::sparse_add || st.prim == Primitive::sparse_scale
                  ? st.value->info.nnz.eval(sym)
                  : first.nnz.eval(sym);
      x.degree_cv = g.degree_cv;
      x.degree_gini = g.degree_gini;
      x.near_diagonal = g.near_diagonal;
      x.empty_row_fraction = g.empty_row_fraction;
      x.max_to_mean = g.max_to_mean;
    }
    out.push_back(x);
  }
  return out;
}

// Predictions of primitive inputs of one graph, each made once: compositions share steps
// (the same GEMM, the same SpMM). The graph features are the same for every input of one
// graph, so the key leaves them out: one memo serves one graph.
class PredictionMemo {
 public:
  double operator()(const CostModel& m, const PrimitiveInput& x) {
    const std::array<double, 5> key{static_cast<double>(x.prim), x.rows, x.inner, x.cols, x.nnz};
    auto it = memo_.find(key);
    if (it == memo_.end()) it = memo_.emplace(key, m.predict_ms(x)).first;
    return it->second;
  }

 private:
  std::map<std::array<double, 5>, double> memo_;
};

inline double predict_sum_ms(const std::vector<PrimitiveInput>& xs, const CostModel& m, PredictionMemo* memo) {
  double t = 0;
  for (const PrimitiveInput& x : xs) t += memo ? (*memo)(m, x) : m.predict_ms(x);
  return t;
}

// The primitives that execute runs for `c`'s forward: every step's (primitive_inputs, which
// spindle-profile pairs with per-step times) but a dense sum whose terms are all GEMM products
// computed inside it (sum_of_gemms_only): its GEMMs are charged as before (a pair pass costs
// about one GEMM over the concatenated inner axis: execute.hpp, matmul_pair), its add is no pass
// of its own and costs nothing; and a row broadcast folded into an SpMM (broadcasts_folded),
// which costs as the SpMM alone.
inline std::vector<PrimitiveInput> forward_inputs(const Composition& c, const std::map<std::string, double>& sym,
                                                  const GraphFeatures& g) {
  const std::vector<PrimitiveInput> all = primitive_inputs(c, sym, g);
  const std::vector<bool> into = gemms_into_sums(c);
  const std::vector<int> computed_by = broadcasts_folded(c);
  std::vector<PrimitiveInput> out;
  std::size_t f = 0;  // index into `all` (the non-input steps in order)
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const Step& st = c.steps[s];
    if (st.prim == Primitive::input) continue;
    const PrimitiveInput& x = all[f++];
    if (sum_of_gemms_only(c, into, s)) continue;
    // A broadcast folded into an SpMM, either side of it, is no pass of its own.
    if (st.prim == Primitive::row_broadcast &&
        (computed_by[s] >= 0 || computed_by[static_cast<std::size_t>(st.args.at(1))] == static_cast<int>(s)))
      continue;
    out.push_back(x);
  }
  return out;
}

// Predicted forward time of `c` (`memo`, when given, is one graph's: `g`).
inline double predict_ms(const Composition& c, const CostModel& m, const std::map<std::string, double>& sym,
                         const GraphFeatures& g, PredictionMemo* memo = nullptr) {
  return predict_sum_ms(forward_inputs(c, sym, g), m, memo);
}

// The kernels of the backward pass (backward.hpp) of `c` for the gradients of the operands
// in `wrt`, each as the forward primitive of the same shape class and work that stands for
// it in the cost model: a GEMM's input gradient dC W^T and weight gradient X^T dC as GEMMs
// of N x K_out x K_in, an SpMM's input gradient (SpMM with the transpose, same nnz) as the
// same SpMM and its values' gradient (SDDMM on the pattern) as a weighted SpMM, a broadcast's
// gradients as broadcasts of the same size, a sparse scaling's as scalings. Sums pass the
// gradient through (no kernel). Only steps on a path from a requested operand count: a first
// layer trained for its weights alone does not propagate through its aggregation when the
// aggregation comes before the weight.
inline std::vector<PrimitiveInput> backward_inputs(const Composition& c, const std::map<std::string, double>& sym,
                                                   const GraphFeatures& g, const std::set<std::string>& wrt) {
  const std::vector<PrimitiveInput> fwd = primitive_inputs(c, sym, g);
  std::vector<char> needs(c.steps.size(), 0);
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const Step& st = c.steps[s];
    if (st.prim == Primitive::input)
      needs[s] = wrt.count(st.reused ? st.value->key : st.value->name) &&
                 st.value->info.kind != MatrixKind::sparse_unweighted;
    else
      for (int a : st.args) needs[s] |= needs[static_cast<std::size_t>(a)];
  }
  const std::vector<GradientFold> folds = gradient_broadcast_folds(c, needs);  // their dX: inside an SpMM pass
  std::vector<PrimitiveInput> out;
  std::size_t f = 0;  // index into fwd (the non-input steps in order)
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const Step& st = c.steps[s];
    if (st.prim == Primitive::input) continue;
    const PrimitiveInput x = fwd[f++];
    if (!needs[s]) continue;
    for (std::size_t k = 0; k < st.args.size(); ++k) {
      const std::size_t a = static_cast<std::size_t>(st.args[k]);
      if (!needs[a]) continue;
      const MatrixKind ak = c.steps[a].value->info.kind;
      PrimitiveInput b = x;
      switch (st.prim) {
        case Primitive::gemm:  // dX = dC W^T or dW = X^T dC: N x K_out x K_in
          b.inner = x.cols;
          b.cols = x.inner;
          out.push_back(b);
          break;
        case Primitive::spmm_weighted:
        case Primitive::spmm_unweighted:
          if (k == 1) out.push_back(b);  // A^T dC
          else if (ak == MatrixKind::sparse_weighted) b.prim = Primitive::spmm_weighted, out.push_back(b);
          break;
        case Primitive::dense_add:
          break;
        case Primitive::row_broadcast:  // dX = D dC (free when an SpMM forms it), dD = rowwise dot
          if (k == 1 && folds[s] != GradientFold::none) break;
          out.push_back(b);
          break;
        default:  // column broadcasts, scalings, sparse sums, diagonal products: one kernel of the same size
          out.push_back(b);
          break;
      }
    }
  }
  return out;
}

inline double predict_backward_ms(const Composition& c, const CostModel& m, const std::map<std::string, double>& sym,
                                  const GraphFeatures& g, const std::set<std::string>& wrt,
                                  PredictionMemo* memo = nullptr) {
  return predict_sum_ms(backward_inputs(c, sym, g, wrt), m, memo);
}

// The promoted compositions annotated for the call's embedding relation (K_in > K_out or
// K_in < K_out; all promoted ones when equal or when none is annotated for it).
inline std::vector<std::size_t> fitting_compositions(const LayerCandidates& cands,
                                                     const std::map<std::string, double>& sym) {
  const double k_in = sym.count("K_in") ? sym.at("K_in") : 0, k_out = sym.count("K_out") ? sym.at("K_out") : 0;
  const std::string want = k_in > k_out ? "K_in > K_out" : "K_in < K_out";
  std::vector<std::size_t> out;
  for (int pass = 0; pass < 2 && out.empty(); ++pass)
    for (std::size_t i = 0; i < cands.ranked.size(); ++i) {
      const auto& r = cands.ranked[i];
      if (!r.promoted) continue;
      if (k_in == k_out || pass == 1 ||
          std::find(r.profitable_in.begin(), r.profitable_in.end(), want) != r.profitable_in.end())
        out.push_back(i);
    }
  SPINDLE_CHECK(!out.empty(), ShapeError, "gnn: layer ", cands.layer.name, " has no promoted composition");
  return out;
}

// The composition to run (index into cands.ranked): when the embedding sizes leave one
// candidate, that one (the graph is not inspected: `features` is not called); otherwise the
// one of least predicted cost.
// With `training`, the predicted time is forward + backward for the gradients of those
// operands (a layer that is trained).
inline std::size_t select_composition(const LayerCandidates& cands, const CostModel& m,
                                      const std::map<std::string, double>& sym,
                                      const std::function<GraphFeatures()>& features,
                                      const std::set<std::string>* training = nullptr) {
  const auto fit = fitting_compositions(cands, sym);
  if (fit.size() == 1) return fit.front();
  const GraphFeatures g = features();
  PredictionMemo memo;  // each distinct primitive input predicted once
  std::size_t best = fit.front();
  double best_ms = INFINITY;
  for (std::size_t i : fit) {
    const auto& c = cands.ranked[i].composition;
    const double t = predict_ms(c, m, sym, g, &memo) + (training ? predict_backward_ms(c, m, sym, g, *training, &memo) : 0.0);
    if (t < best_ms) best = i, best_ms = t;
  }
  return best;
}
inline std::size_t select_composition(const LayerCandidates& cands, const CostModel& m,
                                      const std::map<std::string, double>& sym, const GraphFeatures& g) {
  return select_composition(cands, m, sym, [&] { return g; });
}

}  // namespace spindle::gnn
