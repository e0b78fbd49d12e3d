// GNN layers as matrix expressions (GRANII, seed 004 §III; the models of its evaluation plus
// GraphSAGE-mean and RGCN). Each `LayerExpr` is the re-associable part of one layer: the
// expression between barriers (non-linearities, softmax), the values the layer already
// holds when it is computed, and the composition that DGL / PyG run by default.
//
// Symbols: N nodes, E stored edges of A, K_in / K_out embedding sizes.
// Leaves: A (sparse, unweighted adjacency with self loops where the model uses them),
// D (diagonal D^-1/2), Dinv (diagonal D^-1), S ((1+eps)·I), H (node features), W* weights.
#pragma once

#include <string>
#include <vector>

#include "spindle/gnn/associate.hpp"
#include "spindle/gnn/prune.hpp"

namespace spindle::gnn {

struct LayerExpr {
  std::string name;
  Expr expr;
  std::set<std::string> available;  // expression keys computed before this expression
  // DGL's default composition (it reorders by the embedding sizes): for K_in > K_out and
  // for K_in <= K_out.
  std::string default_wide_in, default_narrow_in;
  // PyTorch Geometric's composition: one fixed order whatever the sizes.
  std::string default_fixed;
  const std::string& default_for(double k_in, double k_out) const {
    return k_in > k_out ? default_wide_in : default_narrow_in;
  }
};

namespace layers {

inline Expr A() { return sparse("A", "N", "N"); }
inline Expr D() { return diagonal("D", "N"); }
inline Expr H() { return dense("H", "N", "K_in"); }
inline Expr W(const std::string& name = "W") { return weight(name, "K_in", "K_out"); }

// GCN (Kipf & Welling): D^-1/2 A D^-1/2 H W. DGL GraphConv(norm='both'): scale, multiply by
// W first when K_in > K_out, aggregate, scale.
inline LayerExpr gcn() {
  return {"GCN", D() * A() * D() * H() * W(), {}, "(D·(A·(D·(H·W))))", "((D·(A·(D·H)))·W)",
          // PyG GCNConv: gcn_norm edge weights (D·A·D once), the linear map, then propagate.
          "([D·A·D]·(H·W))"};
}

// GIN (Xu et al.): ((1+eps)·H + A·H) · W (the first linear map of the MLP; the rest is after
// a barrier). DGL GINConv: sum aggregation, add the scaled self term, then the MLP.
inline LayerExpr gin() {
  Expr S = diagonal("S", "N");
  return {"GIN", (S * H() + A() * H()) * W(), {}, "(((A·H) + (S·H))·W)", "(((A·H) + (S·H))·W)",
          "(((A·H) + (S·H))·W)"};
}

// GAT (Velickovic et al.), aggregation with the attention scores alpha (sparse, weighted, on
// A's pattern): alpha · H · W, where Θ = H·W is already computed for the attention scores.
// DGL GATConv aggregates Θ.
inline LayerExpr gat() {
  Expr alpha = sparse("alpha", "N", "N", true);
  return {"GAT", alpha * H() * W(), {"(H·W)"}, "(alpha·(H·W))", "(alpha·(H·W))", "(alpha·(H·W))"};
}

// SGC (Wu et al.) with k hops: (D^-1/2 A D^-1/2)^k H W. DGL SGConv propagates k hops (with
// the normalisation as row broadcasts), then applies the linear map.
inline LayerExpr sgc(int k = 2) {
  std::vector<Expr> f;
  for (int i = 0; i < k; ++i) f.insert(f.end(), {D(), A(), D()});
  f.push_back(H());
  f.push_back(W());
  std::string prop = "H";
  for (int i = 0; i < k; ++i) prop = "(D·(A·(D·" + prop + ")))";
  // PyG SGConv: k propagations with the gcn_norm edge weights, then the linear map.
  std::string fixed = "H";
  for (int i = 0; i < k; ++i) fixed = "([D·A·D]·" + fixed + ")";
  return {"SGC", product(f), {}, "(" + prop + "·W)", "(" + prop + "·W)", "(" + fixed + "·W)"};
}

// TAGCN (Du et al.) with k hops: sum_{i=0..k} (D^-1/2 A D^-1/2)^i H W_i. DGL TAGConv
// propagates the hops, concatenates and applies one linear map (= the sum of products).
inline LayerExpr tagcn(int k = 2) {
  std::vector<Expr> terms;
  std::string text;
  std::vector<std::string> parts;
  for (int i = 0; i <= k; ++i) {
    std::vector<Expr> f;
    std::string prop = "H";
    for (int j = 0; j < i; ++j) {
      f.insert(f.end(), {D(), A(), D()});
      prop = "(D·(A·(D·" + prop + ")))";
    }
    f.push_back(H());
    f.push_back(W("W" + std::to_string(i)));
    terms.push_back(product(f));
    parts.push_back("(" + prop + "·W" + std::to_string(i) + ")");
  }
  // The default's text: the sum's terms in canonical (sorted) order.
  Expr e = sum(terms);
  std::sort(parts.begin(), parts.end());
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i ? " + " : "") + parts[i];
  // PyG TAGConv: propagate with the gcn_norm edge weights hop by hop, one linear map per hop.
  std::vector<std::string> fixed_parts;
  for (int i = 0; i <= k; ++i) {
    std::string prop = "H";
    for (int j = 0; j < i; ++j) prop = "([D·A·D]·" + prop + ")";
    fixed_parts.push_back("(" + prop + "·W" + std::to_string(i) + ")");
  }
  std::sort(fixed_parts.begin(), fixed_parts.end());
  std::string fixed;
  for (std::size_t i = 0; i < fixed_parts.size(); ++i) fixed += (i ? " + " : "") + fixed_parts[i];
  return {"TAGCN", e, {}, "(" + text + ")", "(" + text + ")", "(" + fixed + ")"};
}

// GraphSAGE, mean aggregator: H W_self + D^-1 A H W_neigh. PyG SAGEConv / DGL SAGEConv
// ('mean'): multiply by W_neigh before aggregating when K_in > K_out.
inline LayerExpr sage_mean() {
  Expr Dinv = diagonal("Dinv", "N");
  Expr e = H() * W("Wself") + Dinv * A() * H() * W("Wneigh");
  // PyG SAGEConv: mean aggregation, then lin_l; plus lin_r of the node itself.
  return {"SAGE-mean", e, {}, "((Dinv·(A·(H·Wneigh))) + (H·Wself))", "(((Dinv·(A·H))·Wneigh) + (H·Wself))",
          "(((Dinv·(A·H))·Wneigh) + (H·Wself))"};
}

// RGCN (Schlichtkrull et al.) with two relations, right-normalised: sum_r Dinv_r A_r H W_r
// + H W_0. DGL RelGraphConv aggregates per relation after the per-relation linear map.
inline LayerExpr rgcn() {
  Expr e = H() * W("W0");
  for (int r = 1; r <= 2; ++r) {
    const std::string s = std::to_string(r);
    e = e + diagonal("Dinv" + s, "N") * sparse("A" + s, "N", "N", false, Size::symbol("E" + s)) * H() *
                W("W" + s);
  }
  // PyG RGCNConv: mean aggregation per relation, then the relation's weight.
  return {"RGCN", e, {}, "((Dinv1·(A1·(H·W1))) + (Dinv2·(A2·(H·W2))) + (H·W0))",
          "((Dinv1·(A1·(H·W1))) + (Dinv2·(A2·(H·W2))) + (H·W0))",
          "(((Dinv1·(A1·H))·W1) + ((Dinv2·(A2·H))·W2) + (H·W0))"};
}

// One relation of an RGCN layer, right-normalised mean aggregation: Dinv A H W. RGCNConv
// (layer.hpp) sums one per relation, each choosing its composition from its own graph.
// A may be rectangular (M receivers x N senders): RGCNConv runs each relation on its graph
// restricted to the rows it writes and the columns it reads.
inline LayerExpr mean_aggregate() {
  Expr e = diagonal("Dinv", "M") * sparse("A", "M", "N") * H() * W();
  // DGL RelGraphConv multiplies by the relation's weight first; PyG RGCNConv aggregates first.
  return {"RGCN-relation", e, {}, "(Dinv·(A·(H·W)))", "(Dinv·(A·(H·W)))", "((Dinv·(A·H))·W)"};
}

// A dense linear map H W (a layer's self term).
inline LayerExpr linear(const std::string& weight_name = "W") {
  return {"linear", H() * W(weight_name), {}, "(H·" + weight_name + ")", "(H·" + weight_name + ")",
          "(H·" + weight_name + ")"};
}

inline std::vector<LayerExpr> all() { return {gcn(), gin(), gat(), sgc(), tagcn(), sage_mean(), rgcn()}; }

}  // namespace layers

// A layer's compositions, pruned; the summary line prints "total / pruned".
struct LayerCandidates {
  LayerExpr layer;
  std::vector<RankedComposition> ranked;
  std::size_t total() const { return ranked.size(); }
  std::size_t pruned() const {
    std::size_t n = 0;
    for (const auto& r : ranked) n += r.promoted ? 0 : 1;
    return n;
  }
  // The promoted compositions (copies: safe to iterate over a temporary's result).
  std::vector<RankedComposition> promoted() const {
    std::vector<RankedComposition> r;
    for (const auto& c : ranked)
      if (c.promoted) r.push_back(c);
    return r;
  }
  // Index of the composition with this text; -1 when there is none.
  int find(const std::string& text) const {
    for (std::size_t i = 0; i < ranked.size(); ++i)
      if (ranked[i].composition.text == text) return static_cast<int>(i);
    return -1;
  }
};

inline LayerCandidates candidates(const LayerExpr& layer, const std::vector<Scenario>& scenarios = default_scenarios()) {
  LayerCandidates c{layer, prune(enumerate_compositions(layer.expr, layer.available), scenarios)};
  return c;
}

}  // namespace spindle::gnn
