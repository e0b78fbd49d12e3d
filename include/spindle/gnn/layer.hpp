// GNN layers that choose their composition from the input (GRANII's online stage).
//
//   auto model = gnn::default_cost_model();          // SPINDLE_GNN_COST_MODEL or op counts
//   gnn::GCNConv<float> conv(W, model);              // W: [K_in, K_out]
//   Tensor<float> out = conv(A, H);                   // D^-1/2 A D^-1/2 H W, composition chosen
//   std::cout << conv.explain();                      // candidates, predicted ms, the choice
//
// `AdaptiveLayer` is the general form over any LayerExpr: the offline stage (enumerate +
// prune) runs once at construction; each call binds the operands, and the first call for a
// (graph, sizes) pair featurizes the graph and selects; later calls reuse the choice.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>

#include "spindle/gnn/cost_model.hpp"
#include "spindle/gnn/execute.hpp"
#include "spindle/gnn/layers.hpp"
#include "spindle/inspect/graph_features.hpp"

namespace spindle::gnn {

// The model named by SPINDLE_GNN_COST_MODEL (a file written by spindle-profile), else an
// empty model (every primitive by its operation count).
inline CostModel default_cost_model() {
  const char* p = std::getenv("SPINDLE_GNN_COST_MODEL");
  if (p && *p) return CostModel::load(p);
  return {};
}

// What a choice depends on: the graph (by its arrays and shape) and every symbol's value.
struct ChoiceKey {
  const void* indptr = nullptr;
  const void* indices = nullptr;
  std::int64_t rows = 0, nnz = 0;
  std::map<std::string, double> symbols;
  bool operator<(const ChoiceKey& o) const {
    return std::tie(indptr, indices, rows, nnz, symbols) < std::tie(o.indptr, o.indices, o.rows, o.nnz, o.symbols);
  }
};

template <class T>
class AdaptiveLayer {
 public:
  explicit AdaptiveLayer(LayerExpr layer, CostModel model = default_cost_model())
      : cands_(candidates(layer)), model_(std::move(model)) {}

  // Runs the layer; `graph` names the sparse operand whose features drive the choice.
  Tensor<T> operator()(const Bindings<T>& b, const std::string& graph = "A") {
    const TensorView<const T> r = run(b, graph);
    return Tensor<T>::from(std::vector<T>(r.values().begin(), r.values().end()), r.shape());
  }
  // The same without a copy: a view of the result in the layer's workspace, valid until the
  // next call (intermediates and the result are reused between calls with the same shapes).
  TensorView<const T> run(const Bindings<T>& b, const std::string& graph = "A") {
    const Composition& c = chosen(b, graph);
    std::lock_guard<std::mutex> lock(run_mutex_);
    return execute(c, b, workspaces_[last_]);
  }

  // The composition this call would run (selecting it if needed).
  const Composition& chosen(const Bindings<T>& b, const std::string& graph = "A") {
    const Csr<T>* a = b.find_sparse(graph);
    SPINDLE_CHECK(a != nullptr, ShapeError, "gnn: ", cands_.layer.name, ": no sparse operand '", graph, "'");
    ChoiceKey key{a->indptr().data(), a->indices().data(), a->rows(), a->nnz(), symbol_values(b)};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = choices_.find(key);
    if (it == choices_.end()) {
      Timer t;
      GraphFeatures f;
      const std::size_t i = select_composition(cands_, model_, key.symbols, [&] {
        f = inspect::graph_features(*a);
        return f;
      });
      last_select_seconds_ = t.seconds();
      last_features_ = f;
      last_symbols_ = key.symbols;
      it = choices_.emplace(key, i).first;
    }
    last_ = it->second;
    return cands_.ranked[it->second].composition;
  }

  const LayerCandidates& compositions() const { return cands_; }
  const CostModel& model() const { return model_; }
  // Featurize + select time of the last new choice.
  double last_select_seconds() const { return last_select_seconds_; }

  // The promoted candidates with their predicted times for the last choice, the choice marked.
  std::string explain() const {
    std::ostringstream os;
    os << cands_.layer.name << ": " << cands_.total() << " compositions, " << cands_.pruned() << " pruned\n";
    for (std::size_t i = 0; i < cands_.ranked.size(); ++i) {
      const auto& r = cands_.ranked[i];
      if (!r.promoted) continue;
      os << (i == last_ ? "  * " : "    ");
      if (!last_symbols_.empty()) os << predict_ms(r.composition, model_, last_symbols_, last_features_) << " ms  ";
      os << r.composition.describe() << "\n";
    }
    return os.str();
  }

 private:
  // N, K_in, K_out, ... from the bound operands; E, E1, ... from the sparse leaves' nnz.
  std::map<std::string, double> symbol_values(const Bindings<T>& b) const {
    std::map<std::string, double> sym;
    const Composition& any = cands_.ranked.front().composition;
    for (const auto& [s, v] : detail::bind_symbols(any, b)) sym[s] = static_cast<double>(v);
    std::vector<Expr> leaves;
    collect_leaves(cands_.layer.expr, leaves);
    for (const Expr& l : leaves)
      if (is_sparse(l->info.kind) && l->info.nnz.terms().size() == 1 &&
          l->info.nnz.terms()[0].powers.size() == 1) {
        const Csr<T>* a = b.find_sparse(l->name);
        if (a) sym[l->info.nnz.terms()[0].powers.begin()->first] = static_cast<double>(a->nnz());
      }
    return sym;
  }

  LayerCandidates cands_;
  CostModel model_;
  std::mutex mutex_;
  std::map<ChoiceKey, std::size_t> choices_;
  std::mutex run_mutex_;
  std::map<std::size_t, Workspace<T>> workspaces_;  // per composition
  std::size_t last_ = static_cast<std::size_t>(-1);
  double last_select_seconds_ = 0;
  GraphFeatures last_features_;
  std::map<std::string, double> last_symbols_;
};

// d(i) = (stored entries of row i)^-1/2, 0 for an empty row.
template <class T>
Tensor<T> inverse_sqrt_degree(const Csr<T>& a) {
  auto d = Tensor<T>::zeros({a.rows()});
  for (std::int64_t i = 0; i < a.rows(); ++i) {
    const auto n = a.indptr()[i + 1] - a.indptr()[i];
    d.values()[i] = n > 0 ? static_cast<T>(1.0 / std::sqrt(static_cast<double>(n))) : T(0);
  }
  return d;
}

// GCN layer (Kipf & Welling, symmetric normalisation): D^-1/2 A D^-1/2 H W with D the row
// degrees of A as given (add self loops to A first for the usual Ã = A + I). A is read as a
// pattern (unweighted). The composition is chosen per graph and sizes.
template <class T>
class GCNConv {
 public:
  GCNConv(Tensor<T> weight, CostModel model = default_cost_model())
      : w_(std::move(weight)), layer_(layers::gcn(), std::move(model)) {
    SPINDLE_CHECK(w_.rank() == 2, ShapeError, "GCNConv: the weight must be [K_in, K_out], got rank ", w_.rank());
  }
  Tensor<T> operator()(const Csr<T>& a, TensorView<const T> h) {
    const Tensor<T>& d = degrees(a);
    Bindings<T> b;
    b.sparse("A", a).diagonal("D", d.view()).dense("H", h).dense("W", w_.view());
    return layer_(b);
  }
  AdaptiveLayer<T>& adaptive() { return layer_; }
  std::string explain() const { return layer_.explain(); }

 private:
  const Tensor<T>& degrees(const Csr<T>& a) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_tuple(static_cast<const void*>(a.indptr().data()), a.rows(), a.nnz());
    auto it = degrees_.find(key);
    if (it == degrees_.end()) it = degrees_.emplace(key, inverse_sqrt_degree(a)).first;
    return it->second;
  }
  Tensor<T> w_;
  AdaptiveLayer<T> layer_;
  std::mutex mutex_;
  std::map<std::tuple<const void*, std::int64_t, std::int64_t>, Tensor<T>> degrees_;
};

}  // namespace spindle::gnn
