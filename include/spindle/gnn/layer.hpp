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
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "spindle/gnn/backward.hpp"
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
  std::set<std::string> training;  // empty: inference
  bool operator<(const ChoiceKey& o) const {
    return std::tie(indptr, indices, rows, nnz, symbols, training) <
           std::tie(o.indptr, o.indices, o.rows, o.nnz, o.symbols, o.training);
  }
};

template <class T>
class AdaptiveLayer {
 public:
  explicit AdaptiveLayer(LayerExpr layer, CostModel model = default_cost_model())
      : cands_(candidates(layer)), model_(std::move(model)) {
    std::vector<Expr> leaves;
    collect_leaves(cands_.layer.expr, leaves);
    for (const Expr& l : leaves) has_sparse_leaf_ |= is_sparse(l->info.kind);
  }

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
    last_run_ = last_;
    return execute(c, b, workspaces_[last_]);
  }

  // The gradients of the operands named in `wrt` for the last run (backward.hpp), given
  // d_out = dLoss/d(result); views into the layer's workspace, valid until its next call.
  // The operands bound for that run must still be alive and unchanged.
  std::map<std::string, TensorView<const T>> backward(TensorView<const T> d_out, const std::set<std::string>& wrt) {
    std::lock_guard<std::mutex> lock(run_mutex_);
    SPINDLE_CHECK(last_run_ != kNone, UserError, cands_.layer.name, ": backward before any forward run");
    return gnn::backward(cands_.ranked[last_run_].composition, workspaces_[last_run_], d_out, wrt);
  }

  // The composition this call would run (selecting it if needed).
  const Composition& chosen(const Bindings<T>& b, const std::string& graph = "A") {
    const Csr<T>* a = b.find_sparse(graph);
    SPINDLE_CHECK(a != nullptr || !has_sparse_leaf_, ShapeError, "gnn: ", cands_.layer.name, ": no sparse operand '",
                  graph, "'");
    std::lock_guard<std::mutex> lock(mutex_);
    ChoiceKey key{a ? a->indptr().data() : nullptr, a ? a->indices().data() : nullptr, a ? a->rows() : 0,
                  a ? a->nnz() : 0, symbol_values(b), training_};
    auto it = choices_.find(key);
    if (it == choices_.end()) {
      Timer t;
      GraphFeatures f;
      // Only compositions whose operands are all bound can run (GAT bound with its held
      // Θ = "(H·W)" but without H and W runs alpha·(H·W) only).
      const LayerCandidates* among = &cands_;
      LayerCandidates runnable_only;
      if (!all_promoted_runnable(b)) {
        runnable_only = cands_;
        for (auto& r : runnable_only.ranked) r.promoted = r.promoted && runnable(r.composition, b);
        among = &runnable_only;
      }
      const std::size_t i = select_composition(
          *among, model_, key.symbols,
          [&] {
            if (a) f = inspect::graph_features_kept(*a);  // a dense-only layer has one composition
            return f;
          },
          training_.empty() ? nullptr : &training_);
      last_select_seconds_ = t.seconds();
      last_features_ = f;
      last_symbols_ = key.symbols;
      last_training_ = key.training;
      it = choices_.emplace(key, i).first;
    }
    last_ = it->second;
    return cands_.ranked[it->second].composition;
  }

  // Choose for training: the cost of a composition is its forward plus its backward for the
  // gradients of `wrt` (e.g. {"W"} for a first layer, {"W", "H"} for a hidden one); an empty
  // set (the default) chooses for inference. Later calls choose again for the new mode.
  void set_training(std::set<std::string> wrt) {
    std::lock_guard<std::mutex> lock(mutex_);
    training_ = std::move(wrt);
  }
  const std::set<std::string>& training() const { return training_; }

  // The composition of the last run; nullptr before the first.
  const Composition* last_run() const { return last_run_ == kNone ? nullptr : &cands_.ranked[last_run_].composition; }
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
      if (!last_symbols_.empty()) {
        os << predict_ms(r.composition, model_, last_symbols_, last_features_);
        if (!last_training_.empty())
          os << " + " << predict_backward_ms(r.composition, model_, last_symbols_, last_features_, last_training_);
        os << " ms  ";
      }
      os << r.composition.describe() << "\n";
    }
    return os.str();
  }

 private:
  // N, K_in, K_out, ... from the bound operands; E, E1, ... from the sparse leaves' nnz.
  static bool runnable(const Composition& c, const Bindings<T>& b) {
    for (const Step& st : c.steps) {
      if (st.prim != Primitive::input) continue;
      const MatrixKind k = st.value->info.kind;
      const std::string name = st.reused ? st.value->key : st.value->name;
      const bool bound = st.reused || is_dense(k) ? b.find_dense(name) != nullptr
                         : k == MatrixKind::diagonal ? b.find_diagonal(name) != nullptr
                                                     : b.find_sparse(name) != nullptr;
      if (!bound) return false;
    }
    return true;
  }
  bool all_promoted_runnable(const Bindings<T>& b) const {
    for (const auto& r : cands_.ranked)
      if (r.promoted && !runnable(r.composition, b)) return false;
    return true;
  }

  // Every size symbol of the compositions that can run (their operands agreeing: ShapeError
  // otherwise); when none can, the first promoted one's ShapeError names a missing operand.
  std::map<std::string, double> symbol_values(const Bindings<T>& b) const {
    std::map<std::string, double> sym;
    const Composition* first = nullptr;
    for (const auto& r : cands_.ranked) {
      if (!r.promoted) continue;
      if (!first) first = &r.composition;
      if (!runnable(r.composition, b)) continue;
      for (const auto& [s, v] : detail::bind_symbols(r.composition, b)) {
        auto [it, fresh] = sym.emplace(s, static_cast<double>(v));
        SPINDLE_CHECK(fresh || it->second == static_cast<double>(v), ShapeError, "gnn: ", cands_.layer.name,
                      ": the operands give ", s, " = ", it->second, " and ", v);
      }
    }
    if (sym.empty() && first) (void)detail::bind_symbols(*first, b);
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
  bool has_sparse_leaf_ = false;
  std::mutex mutex_;
  std::map<ChoiceKey, std::size_t> choices_;
  std::mutex run_mutex_;
  std::map<std::size_t, Workspace<T>> workspaces_;  // per composition
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t last_ = kNone;
  std::size_t last_run_ = kNone;
  double last_select_seconds_ = 0;
  GraphFeatures last_features_;
  std::map<std::string, double> last_symbols_;
  std::set<std::string> training_, last_training_;
};

// What a layer's backward returns: its weights' gradients by name and dLoss/dH (empty when
// not asked for); views into the layer's buffers, valid until its next call.
template <class T>
struct LayerGradients {
  std::map<std::string, TensorView<const T>> weights;
  TensorView<const T> input;
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

// d(i) = 1 / (stored entries of row i), 0 for an empty row (mean aggregation).
template <class T>
Tensor<T> inverse_degree(const Csr<T>& a) {
  auto d = Tensor<T>::zeros({a.rows()});
  for (std::int64_t i = 0; i < a.rows(); ++i) {
    const auto n = a.indptr()[i + 1] - a.indptr()[i];
    d.values()[i] = n > 0 ? static_cast<T>(1.0 / static_cast<double>(n)) : T(0);
  }
  return d;
}

namespace detail {
// The degree normalisations of a graph, kept with its structure (Csr::memo(): computed on
// the first layer call on the graph, shared by its copies, gone with the last of them).
template <class T>
struct KeptInverseSqrtDegree {
  std::shared_ptr<const Tensor<T>> d;
};
template <class T>
struct KeptInverseDegree {
  std::shared_ptr<const Tensor<T>> d;
};
}  // namespace detail

// inverse_sqrt_degree / inverse_degree of `a`, computed once per graph structure.
template <class T>
std::shared_ptr<const Tensor<T>> kept_inverse_sqrt_degree(const Csr<T>& a) {
  return a.memo()
      .template get<detail::KeptInverseSqrtDegree<T>>([&] {
        return detail::KeptInverseSqrtDegree<T>{std::make_shared<const Tensor<T>>(inverse_sqrt_degree(a))};
      })
      .d;
}
template <class T>
std::shared_ptr<const Tensor<T>> kept_inverse_degree(const Csr<T>& a) {
  return a.memo()
      .template get<detail::KeptInverseDegree<T>>([&] {
        return detail::KeptInverseDegree<T>{std::make_shared<const Tensor<T>>(inverse_degree(a))};
      })
      .d;
}

// A graph convolution with trainable weights over one graph operand "A" (read as a
// pattern) and node features "H": the base of GCNConv, SAGEConv and GINConv. The diagonal
// operands derived from the graph (degree normalisations) are computed on the first call on
// a graph and kept with its structure (Csr::memo()); the composition is chosen once per
// graph and sizes (AdaptiveLayer).
//
//   out = conv(A, H);                       // forward (keeps what backward needs)
//   auto g = conv.backward(d_out);          // g.weights["W"], g.input (dLoss/dH)
//   conv.weight("W") -= lr * g.weights["W"] // (with your optimiser)
template <class T>
class GraphConv {
 public:
  using Gradients = LayerGradients<T>;

  // Forward: a view of the result in the layer's workspace, valid until the next call. `a`
  // and `h` must stay alive and unchanged until backward (if it is called).
  TensorView<const T> forward(const Csr<T>& a, TensorView<const T> h) {
    Bindings<T> b;
    b.sparse("A", a).dense("H", h);
    for (const auto& [name, w] : weights_) b.dense(name, w.view());
    std::lock_guard<std::mutex> lock(mutex_);
    // Kept with the graph's structure, not keyed by its address (which another graph
    // allocated in its place could reuse); held here until the next call (backward reads them).
    for (const auto& [name, make] : diagonal_makers_) {
      diagonals_[name] = make(a);
      b.diagonal(name, diagonals_[name]->view());
    }
    return layer_.run(b);
  }
  Tensor<T> operator()(const Csr<T>& a, TensorView<const T> h) {
    const auto r = forward(a, h);
    return Tensor<T>::from(std::vector<T>(r.values().begin(), r.values().end()), r.shape());
  }

  // The weights' gradients (and dLoss/dH with `input_gradient`) for the last forward run.
  Gradients backward(TensorView<const T> d_out, bool input_gradient = true) {
    std::set<std::string> wrt;
    for (const auto& [name, w] : weights_) wrt.insert(name);
    if (input_gradient) wrt.insert("H");
    auto g = layer_.backward(d_out, wrt);
    Gradients r;
    for (const auto& [name, w] : weights_) r.weights[name] = g.at(name);
    if (input_gradient) r.input = g.at("H");
    return r;
  }

  Tensor<T>& weight(const std::string& name) {
    auto it = weights_.find(name);
    SPINDLE_CHECK(it != weights_.end(), UserError, layer_.compositions().layer.name, ": no weight '", name, "'");
    return it->second;
  }
  std::map<std::string, Tensor<T>>& weights() { return weights_; }

  // Choose the composition for training (forward + backward of the weights, and of H with
  // `input_gradient`: a hidden layer) or, after set_inference(), for the forward alone.
  void set_training(bool input_gradient = true) {
    std::set<std::string> wrt;
    for (const auto& [name, w] : weights_) wrt.insert(name);
    if (input_gradient) wrt.insert("H");
    layer_.set_training(std::move(wrt));
  }
  void set_inference() { layer_.set_training({}); }
  AdaptiveLayer<T>& adaptive() { return layer_; }
  std::string explain() const { return layer_.explain(); }

 protected:
  using DiagonalMaker = std::function<std::shared_ptr<const Tensor<T>>(const Csr<T>&)>;
  GraphConv(LayerExpr expr, std::map<std::string, Tensor<T>> weights, std::map<std::string, DiagonalMaker> diagonals,
            CostModel model)
      : weights_(std::move(weights)), diagonal_makers_(std::move(diagonals)), layer_(std::move(expr), std::move(model)) {
    std::int64_t k_in = -1, k_out = -1;
    for (const auto& [name, w] : weights_) {
      SPINDLE_CHECK(w.rank() == 2, ShapeError, layer_.compositions().layer.name, ": weight '", name,
                    "' must be [K_in, K_out], got rank ", w.rank());
      SPINDLE_CHECK(k_in < 0 || (w.dim(0) == k_in && w.dim(1) == k_out), ShapeError, layer_.compositions().layer.name,
                    ": weight '", name, "' is [", w.dim(0), ", ", w.dim(1), "] but another weight is [", k_in, ", ",
                    k_out, "]");
      k_in = w.dim(0);
      k_out = w.dim(1);
    }
  }

 private:
  std::map<std::string, Tensor<T>> weights_;
  std::map<std::string, DiagonalMaker> diagonal_makers_;
  AdaptiveLayer<T> layer_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const Tensor<T>>> diagonals_;  // of the last forward (backward reads them)
};

// GCN layer (Kipf & Welling, symmetric normalisation): D^-1/2 A D^-1/2 H W with D the row
// degrees of A as given (add self loops to A first for the usual Ã = A + I). A is read as a
// pattern (unweighted). PyG: GCNConv(add_self_loops=False, bias=False) on the same edges.
template <class T>
class GCNConv : public GraphConv<T> {
 public:
  explicit GCNConv(Tensor<T> weight, CostModel model = default_cost_model())
      : GraphConv<T>(layers::gcn(), {{"W", std::move(weight)}}, {{"D", kept_inverse_sqrt_degree<T>}}, std::move(model)) {}
};

// GraphSAGE layer, mean aggregator: H Wself + D^-1 A H Wneigh (a node without neighbours
// aggregates 0). PyG: SAGEConv(aggr='mean', bias=False), lin_r = Wself^T, lin_l = Wneigh^T.
template <class T>
class SAGEConv : public GraphConv<T> {
 public:
  SAGEConv(Tensor<T> w_self, Tensor<T> w_neigh, CostModel model = default_cost_model())
      : GraphConv<T>(layers::sage_mean(), {{"Wself", std::move(w_self)}, {"Wneigh", std::move(w_neigh)}},
                     {{"Dinv", kept_inverse_degree<T>}}, std::move(model)) {}
};

// GIN layer (Xu et al.), the first linear map of its MLP: ((1 + eps) H + A H) W (sum
// aggregation). PyG: GINConv(Linear(K_in, K_out, bias=False), eps).
template <class T>
class GINConv : public GraphConv<T> {
 public:
  GINConv(Tensor<T> weight, double eps = 0.0, CostModel model = default_cost_model())
      : GraphConv<T>(layers::gin(), {{"W", std::move(weight)}},
                     {{"S",
                       [eps, kept = std::shared_ptr<const Tensor<T>>()](const Csr<T>& a) mutable {
                         // (1 + eps) per node: depends on the row count only, kept while it holds
                         if (!kept || kept->dim(0) != a.rows())
                           kept = std::make_shared<const Tensor<T>>(
                               Tensor<T>::full({a.rows()}, static_cast<T>(1.0 + eps)));
                         return kept;
                       }}},
                     std::move(model)) {}
};

// GAT layer (Velickovic et al.), one head, no bias: Θ = H W; el = Θ a_left, er = Θ a_right;
// alpha = row softmax over A's pattern of LeakyReLU(el(i) + er(j)) (slope 0.2); out = alpha Θ,
// the aggregation chosen by GRANII (alpha·(H·W) reusing Θ, or (alpha·H)·W). A should hold
// self loops (GAT attends over a node and its neighbours). Weights "W" [K_in, K_out],
// "a_left", "a_right" [K_out]. Every stage runs on Spindle kernels, forward and backward.
// PyG: GATConv(heads=1, bias=False, add_self_loops=False, negative_slope=0.2) on the same A.
template <class T>
class GATConv {
 public:
  using Gradients = LayerGradients<T>;

  GATConv(Tensor<T> w, Tensor<T> a_left, Tensor<T> a_right, CostModel model = default_cost_model())
      : layer_(layers::gat(), std::move(model)) {
    SPINDLE_CHECK(w.rank() == 2, ShapeError, "GATConv: W must be [K_in, K_out], got rank ", w.rank());
    for (const Tensor<T>* v : {&a_left, &a_right})
      SPINDLE_CHECK(v->rank() == 1 && v->dim(0) == w.dim(1), ShapeError, "GATConv: ",
                    v == &a_left ? "a_left" : "a_right", " must be a vector of K_out = ", w.dim(1), " entries");
    weights_.emplace("W", std::move(w));
    weights_.emplace("a_left", std::move(a_left));
    weights_.emplace("a_right", std::move(a_right));
  }

  // A view into the layer's buffers, valid until its next call; `a` and `h` must stay alive
  // and unchanged until backward.
  TensorView<const T> forward(const Csr<T>& a, TensorView<const T> h) {
    static const auto scores = kernels::gat_scores<T>();
    static const auto softmax = ops::softmax<T>();
    const Tensor<T>& w = weights_.at("W");
    SPINDLE_CHECK(a.rows() == a.cols(), ShapeError, "GATConv: the graph must be square, got ", a.rows(), "x", a.cols());
    SPINDLE_CHECK(h.rank() == 2 && h.dim(0) == a.rows() && h.dim(1) == w.dim(0), ShapeError, "GATConv: H must be [",
                  a.rows(), ", ", w.dim(0), "]");
    const std::int64_t n = a.rows(), k = w.dim(1);
    a_ = &a;
    h_ = h;
    theta_ = ws_.dense(slot(0), {n, k});
    detail::matmul<T>(h, w.view(), *theta_, ws_, slot(20));
    el_ = ws_.dense(slot(1), {n, 1});
    er_ = ws_.dense(slot(2), {n, 1});
    detail::matmul<T>(theta_->view(), column("a_left"), *el_, ws_, slot(21));
    detail::matmul<T>(theta_->view(), column("a_right"), *er_, ws_, slot(22));
    scores_ = ws_.pattern_of(slot(3), a);
    alpha_ = ws_.pattern_of(slot(4), a);
    scores(a, vec(*el_), vec(*er_), *scores_);
    softmax(*scores_, *alpha_);
    Bindings<T> b;
    b.sparse("alpha", *alpha_).dense("H", h).dense("W", w.view()).value("(H·W)", theta_->view());
    return layer_.run(b, "alpha");
  }

  // dLoss/dW, dLoss/da_left, dLoss/da_right (and dLoss/dH with `input_gradient`) for the last
  // forward, given dOut.
  Gradients backward(TensorView<const T> d_out, bool input_gradient = true) {
    static const auto scores_back = kernels::gat_scores_backward<T>();
    static const auto row_sum = ops::row_sum<T>();
    static const auto add = kernels::dense_add<T>();
    SPINDLE_CHECK(a_ != nullptr && layer_.last_run(), UserError, "GATConv: backward before any forward run");
    const Composition& c = *layer_.last_run();
    std::set<std::string> wrt{"alpha"};
    for (const Step& st : c.steps)
      if (st.prim == Primitive::input && st.reused) wrt.insert(st.value->key);
    const bool reuses_theta = wrt.count("(H·W)") > 0;
    if (!reuses_theta) {
      wrt.insert("W");
      if (input_gradient) wrt.insert("H");
    }
    const auto g = layer_.backward(d_out, wrt);
    const std::int64_t n = a_->rows(), k = theta_->dim(1);

    // Softmax and LeakyReLU backward on the pattern, then the attention terms' gradients.
    auto dalpha = ws_.pattern_of(slot(5), *a_);
    const auto ga = g.at("alpha");
    std::copy(ga.values().begin(), ga.values().end(), dalpha->values().begin());
    auto de = ws_.pattern_of(slot(6), *a_);
    scores_back(*alpha_, *dalpha, *scores_, *de);
    auto del = ws_.dense(slot(7), {n, 1}), der = ws_.dense(slot(8), {n, 1});
    row_sum(*de, vec_out(*del));
    row_sum(ws_.transpose_of(slot(9), *de, true), vec_out(*der));  // column sums
    auto da_left = ws_.dense(slot(10), {k, 1}), da_right = ws_.dense(slot(11), {k, 1});
    detail::matmul_tn<T>(theta_->view(), del->view(), *da_left, ws_, slot(23), slot(24));
    detail::matmul_tn<T>(theta_->view(), der->view(), *da_right, ws_, slot(25), slot(26));

    // dΘ = del a_left^T + der a_right^T (+ the aggregation's, when it reused Θ).
    auto t1 = ws_.dense(slot(12), {n, k}), t2 = ws_.dense(slot(13), {n, k}), dtheta = ws_.dense(slot(14), {n, k});
    detail::matmul<T>(del->view(), row("a_left"), *t1, ws_, slot(27));
    detail::matmul<T>(der->view(), row("a_right"), *t2, ws_, slot(28));
    add(t1->view(), t2->view(), *dtheta);
    if (reuses_theta) {
      add(dtheta->view(), g.at("(H·W)"), *t1);
      std::swap(t1, dtheta);
    }
    // Through Θ = H W.
    const Tensor<T>& w = weights_.at("W");
    auto dw = ws_.dense(slot(15), w.shape());
    detail::matmul_tn<T>(h_, dtheta->view(), *dw, ws_, slot(29), slot(30));
    Gradients r;
    if (!reuses_theta) {
      auto sum = ws_.dense(slot(16), w.shape());
      add(dw->view(), g.at("W"), *sum);
      dw = sum;
    }
    r.weights["W"] = dw->view();
    r.weights["a_left"] = TensorView<const T>(da_left->values().data(), {k});
    r.weights["a_right"] = TensorView<const T>(da_right->values().data(), {k});
    if (input_gradient) {
      auto dh = ws_.dense(slot(17), h_.shape());
      detail::matmul_transposed<T>(dtheta->view(), w.view(), *dh, ws_, slot(31));
      if (!reuses_theta) {
        auto sum = ws_.dense(slot(18), h_.shape());
        add(dh->view(), g.at("H"), *sum);
        dh = sum;
      }
      r.input = dh->view();
    }
    return r;
  }

  Tensor<T>& weight(const std::string& name) {
    auto it = weights_.find(name);
    SPINDLE_CHECK(it != weights_.end(), UserError, "GATConv: no weight '", name, "' (W, a_left, a_right)");
    return it->second;
  }
  AdaptiveLayer<T>& adaptive() { return layer_; }
  std::string explain() const { return layer_.explain(); }

 private:
  static std::size_t slot(std::size_t role) { return Workspace<T>::slot(3, role, 0); }
  TensorView<const T> column(const std::string& name) const {
    const Tensor<T>& v = weights_.at(name);
    return TensorView<const T>(v.values().data(), {v.dim(0), 1});
  }
  TensorView<const T> row(const std::string& name) const {
    const Tensor<T>& v = weights_.at(name);
    return TensorView<const T>(v.values().data(), {1, v.dim(0)});
  }
  static TensorView<const T> vec(const Tensor<T>& x) { return TensorView<const T>(x.values().data(), {x.dim(0)}); }
  static TensorView<T> vec_out(Tensor<T>& x) { return TensorView<T>(x.values().data(), {x.dim(0)}); }

  std::map<std::string, Tensor<T>> weights_;
  AdaptiveLayer<T> layer_;
  Workspace<T> ws_;
  const Csr<T>* a_ = nullptr;
  TensorView<const T> h_;
  std::shared_ptr<Tensor<T>> theta_, el_, er_;
  std::shared_ptr<Csr<T>> scores_, alpha_;
};

// A relation's graph restricted to what it touches: the rows it writes (receivers with at
// least one edge) and the columns it reads (senders of at least one edge). A typed graph's
// relations are small next to the graph (AIFB: 78 relations write 22,934 rows in all, R N = 566,436), so
// running each relation's layer on all N rows would cost R full-size GEMMs; on its support a
// relation costs O(its rows + its columns). A side is kept whole (`rows` / `cols` null) when it
// covers more than 3/4 of the nodes: there gathering would cost more than it saves.
template <class T>
struct RelationSupport {
  std::shared_ptr<const Csr<T>> a;                     // rows x cols pattern; null: no edges
  std::shared_ptr<const Tensor<std::int32_t>> rows, cols;  // the nodes kept, ascending; null: all
  std::shared_ptr<const Tensor<T>> dinv;               // inverse row degrees of `a`
};

namespace detail {
template <class T>
struct KeptRelationSupport {
  std::shared_ptr<const RelationSupport<T>> s;
};

template <class T>
RelationSupport<T> relation_support(const Csr<T>& g) {
  RelationSupport<T> s;
  if (g.nnz() == 0) return s;
  const std::int64_t n_rows = g.rows(), n_cols = g.cols();
  const auto ip = g.indptr();
  const auto ix = g.indices();
  std::vector<std::int32_t> rows, col_of(static_cast<std::size_t>(n_cols), -1), cols;
  for (std::int64_t i = 0; i < n_rows; ++i)
    if (ip[i + 1] > ip[i]) rows.push_back(static_cast<std::int32_t>(i));
  for (std::int64_t q = 0; q < g.nnz(); ++q) col_of[static_cast<std::size_t>(ix[q])] = 0;
  for (std::int64_t j = 0; j < n_cols; ++j)
    if (col_of[static_cast<std::size_t>(j)] == 0) {
      col_of[static_cast<std::size_t>(j)] = static_cast<std::int32_t>(cols.size());
      cols.push_back(static_cast<std::int32_t>(j));
    }
  const bool keep_rows = 4 * static_cast<std::int64_t>(rows.size()) <= 3 * n_rows;
  const bool keep_cols = 4 * static_cast<std::int64_t>(cols.size()) <= 3 * n_cols;
  // The restricted pattern: rows in order, columns renumbered by a monotone map (a sorted row
  // stays sorted).
  std::vector<std::int32_t> indptr{0}, indices;
  indices.reserve(static_cast<std::size_t>(g.nnz()));
  auto add_row = [&](std::int64_t i) {
    for (auto q = ip[i]; q < ip[i + 1]; ++q)
      indices.push_back(keep_cols ? col_of[static_cast<std::size_t>(ix[q])] : static_cast<std::int32_t>(ix[q]));
    indptr.push_back(static_cast<std::int32_t>(indices.size()));
  };
  if (keep_rows)
    for (std::int32_t i : rows) add_row(i);
  else
    for (std::int64_t i = 0; i < n_rows; ++i) add_row(i);
  const std::int64_t m = keep_rows ? static_cast<std::int64_t>(rows.size()) : n_rows;
  const std::int64_t k = keep_cols ? static_cast<std::int64_t>(cols.size()) : n_cols;
  auto a = std::make_shared<const Csr<T>>(
      Csr<T>::pattern(m, k, std::move(indptr), std::move(indices), g.name().empty() ? "" : g.name() + " (support)"));
  auto index_tensor = [](std::vector<std::int32_t>& v) {
    const auto len = static_cast<std::int64_t>(v.size());
    return std::make_shared<const Tensor<std::int32_t>>(Tensor<std::int32_t>::from(std::move(v), {len}));
  };
  if (keep_rows) s.rows = index_tensor(rows);
  if (keep_cols) s.cols = index_tensor(cols);
  s.dinv = std::make_shared<const Tensor<T>>(inverse_degree(*a));
  s.a = std::move(a);
  return s;
}
}  // namespace detail

// relation_support of `g`, computed once per graph structure (kept in Csr::memo()).
template <class T>
std::shared_ptr<const RelationSupport<T>> kept_relation_support(const Csr<T>& g) {
  return g.memo()
      .template get<detail::KeptRelationSupport<T>>([&] {
        return detail::KeptRelationSupport<T>{
            std::make_shared<const RelationSupport<T>>(detail::relation_support(g))};
      })
      .s;
}

// RGCN layer (Schlichtkrull et al.), right-normalised: H W0 + sum_r D_r^-1 A_r H W_r over the
// relations' graphs A_r (patterns; D_r their row degrees, 0 for an empty row). Each relation
// runs on its support (RelationSupport: the rows it writes and the columns it reads; H's rows
// gathered, its output added into its rows) and chooses its composition from its own graph
// and the sizes (a sparse relation and a dense one of the same layer can aggregate in
// different orders); the terms are summed. A relation without edges is skipped (its weight's
// gradient is 0). Weights "W0" (self) and "W1" ... "WR". PyG: RGCNConv(aggr='mean',
// root_weight=True, bias=False).
template <class T>
class RGCNConv {
 public:
  using Gradients = LayerGradients<T>;

  RGCNConv(Tensor<T> w_self, std::vector<Tensor<T>> w_relations, const CostModel& model = default_cost_model())
      : self_(layers::linear("W"), model) {
    SPINDLE_CHECK(w_self.rank() == 2, ShapeError, "RGCNConv: W0 must be a matrix, got rank ", w_self.rank());
    weights_.emplace("W0", std::move(w_self));
    for (std::size_t r = 0; r < w_relations.size(); ++r) {
      const auto& w = w_relations[r];
      const auto& w0 = weights_.at("W0");
      SPINDLE_CHECK(w.rank() == 2 && w.dim(0) == w0.dim(0) && w.dim(1) == w0.dim(1), ShapeError,
                    "RGCNConv: relation ", r + 1, "'s weight must be [", w0.dim(0), ", ", w0.dim(1), "] like W0");
      weights_.emplace("W" + std::to_string(r + 1), std::move(w_relations[r]));
      relations_.push_back(std::make_unique<AdaptiveLayer<T>>(layers::mean_aggregate(), model));
    }
    const std::size_t n = relations_.size();
    support_.resize(n);
    h_rows_.resize(n);
    d_rows_.resize(n);
    zero_grad_ = Tensor<T>::zeros(weights_.at("W0").shape());
  }

  // The sum over the relations; `graphs[r]` is relation r + 1's graph, N x N for N = H's rows.
  // A view into the layer's buffers, valid until its next call; graphs and h must stay alive and
  // unchanged until backward.
  TensorView<const T> forward(const std::vector<const Csr<T>*>& graphs, TensorView<const T> h) {
    SPINDLE_CHECK(graphs.size() == relations_.size(), ShapeError, "RGCNConv: ", relations_.size(),
                  " relations but ", graphs.size(), " graphs");
    SPINDLE_CHECK(h.rank() == 2, ShapeError, "RGCNConv: H must be a matrix, got rank ", h.rank());
    for (std::size_t r = 0; r < graphs.size(); ++r) {
      SPINDLE_CHECK(graphs[r] != nullptr, ShapeError, "RGCNConv: relation ", r + 1, " has no graph");
      SPINDLE_CHECK(graphs[r]->rows() == h.dim(0) && graphs[r]->cols() == h.dim(0), ShapeError, "RGCNConv: relation ",
                    r + 1, "'s graph is ", graphs[r]->rows(), " x ", graphs[r]->cols(), " but H has ", h.dim(0),
                    " rows (nodes)");
    }
    Bindings<T> b;
    b.dense("H", h).dense("W", weights_.at("W0").view());
    Tensor<T>& acc = copy_into(sums_[0], self_.run(b));
    for (std::size_t r = 0; r < relations_.size(); ++r) {
      support_[r] = kept_relation_support(*graphs[r]);
      const RelationSupport<T>& s = *support_[r];
      if (!s.a) continue;
      Bindings<T> br;
      br.sparse("A", *s.a).diagonal("Dinv", s.dinv->view()).dense("H", rows_of(h, s.cols.get(), h_rows_[r])).dense(
          "W", weights_.at("W" + std::to_string(r + 1)).view());
      add_rows(relations_[r]->run(br), s.rows.get(), acc);
    }
    return acc.view();
  }

  Gradients backward(TensorView<const T> d_out, bool input_gradient = true) {
    std::set<std::string> wrt{"W"};
    if (input_gradient) wrt.insert("H");
    Gradients g;
    auto gs = self_.backward(d_out, wrt);
    g.weights["W0"] = gs.at("W");
    Tensor<T>& dh = sums_[1];
    if (input_gradient) copy_into(dh, gs.at("H"));
    for (std::size_t r = 0; r < relations_.size(); ++r) {
      const std::string name = "W" + std::to_string(r + 1);
      SPINDLE_CHECK(support_[r] != nullptr, UserError, "RGCNConv: backward before any forward run");
      const RelationSupport<T>& s = *support_[r];
      if (!s.a) {
        g.weights[name] = zero_grad_.view();
        continue;
      }
      auto gr = relations_[r]->backward(rows_of(d_out, s.rows.get(), d_rows_[r]), wrt);
      g.weights[name] = gr.at("W");
      if (input_gradient) add_rows(gr.at("H"), s.cols.get(), dh);
    }
    if (input_gradient) g.input = dh.view();
    return g;
  }

  Tensor<T>& weight(const std::string& name) {
    auto it = weights_.find(name);
    SPINDLE_CHECK(it != weights_.end(), UserError, "RGCNConv: no weight '", name, "'");
    return it->second;
  }
  // As GraphConv::set_training / set_inference, for every relation and the self term.
  void set_training(bool input_gradient = true) {
    std::set<std::string> wrt{"W"};
    if (input_gradient) wrt.insert("H");
    self_.set_training(wrt);
    for (auto& r : relations_) r->set_training(wrt);
  }
  void set_inference() {
    self_.set_training({});
    for (auto& r : relations_) r->set_training({});
  }
  std::size_t relation_count() const { return relations_.size(); }
  AdaptiveLayer<T>& relation(std::size_t r) { return *relations_.at(r); }
  // The support relation r ran on in the last forward (null before one).
  std::shared_ptr<const RelationSupport<T>> support(std::size_t r) const { return support_.at(r); }

 private:
  // x's rows that `rows` picks, gathered into buf (x itself when rows is null: all of them).
  static TensorView<const T> rows_of(TensorView<const T> x, const Tensor<std::int32_t>* rows, Tensor<T>& buf) {
    static const auto gather = kernels::gather_rows<T>();
    if (!rows) return x;
    const std::vector<std::int64_t> shape{rows->dim(0), x.dim(1)};
    if (buf.shape() != shape) buf = Tensor<T>::zeros(shape);
    gather(x, *rows, buf);
    return buf.view();
  }
  // acc's rows that `rows` names += y's rows (all of acc += y when rows is null).
  static void add_rows(TensorView<const T> y, const Tensor<std::int32_t>* rows, Tensor<T>& acc) {
    static const auto scatter = kernels::scatter_add_rows<T>();
    static const auto accumulate = kernels::dense_accumulate<T>();
    if (rows)
      scatter(y, *rows, acc);
    else
      accumulate(y, acc);
  }
  static Tensor<T>& copy_into(Tensor<T>& buf, TensorView<const T> x) {
    if (buf.shape() != x.shape()) buf = Tensor<T>::zeros(x.shape());
    std::copy(x.values().begin(), x.values().end(), buf.values().begin());
    return buf;
  }

  std::map<std::string, Tensor<T>> weights_;
  AdaptiveLayer<T> self_;
  std::vector<std::unique_ptr<AdaptiveLayer<T>>> relations_;
  std::vector<std::shared_ptr<const RelationSupport<T>>> support_;  // per relation, of the last forward
  std::vector<Tensor<T>> h_rows_, d_rows_;  // H's rows a relation reads; d_out's rows it wrote
  Tensor<T> zero_grad_;                     // the gradient of a relation without edges
  Tensor<T> sums_[2];                       // forward's sum, backward's dH
};

}  // namespace spindle::gnn
