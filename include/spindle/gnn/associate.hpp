// Association trees and primitive compositions (GRANII, seed 004 §IV-C, Algorithm 1).
//
// An association tree brackets every product of an expression; each inner node is one
// sparse or dense primitive chosen by the operands' attributes:
//
//   diagonal · diagonal            diag_product    -> diagonal           cost rows
//   diagonal · sparse · diagonal   sparse_scale    -> sparse weighted    cost nnz  (g-SDDMM: D·A·D in one pass)
//   diagonal · sparse, sparse · diagonal           -> sparse weighted    cost nnz
//   diagonal · dense               row_broadcast   -> dense              cost rows·cols
//   dense · diagonal               column_broadcast-> dense              cost rows·cols
//   sparse · dense                 spmm (weighted / unweighted)          cost nnz·cols
//   dense · dense                  gemm                                  cost rows·inner·cols
//   sum of dense terms             dense_add                             cost (terms-1)·rows·cols
//   sum of sparse/diagonal terms   sparse_add      -> sparse weighted    cost Σ nnz
// sparse · sparse (SpGEMM) and dense · sparse are not GNN primitives and are not formed.
//
// `enumerate_compositions(expr)` enumerates the trees of every equivalent form
// (rewrite.hpp), each distinct tree once, and turns each into a `Composition`: a list of
// steps in execution order where a value computed twice is computed once (common
// sub-expression elimination) and a value the layer already holds (`available`, e.g. GAT's
// Θ = H·W from the attention stage) costs nothing.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "spindle/gnn/matrix_ir.hpp"
#include "spindle/gnn/rewrite.hpp"

namespace spindle::gnn {

enum class Primitive {
  input,  // a leaf or an available value: no work
  diag_product,
  sparse_scale,
  row_broadcast,
  column_broadcast,
  spmm_weighted,
  spmm_unweighted,
  gemm,
  dense_add,
  sparse_add,
};

inline const char* primitive_name(Primitive p) {
  switch (p) {
    case Primitive::input: return "input";
    case Primitive::diag_product: return "diag_product";
    case Primitive::sparse_scale: return "sparse_scale";
    case Primitive::row_broadcast: return "row_broadcast";
    case Primitive::column_broadcast: return "column_broadcast";
    case Primitive::spmm_weighted: return "spmm_weighted";
    case Primitive::spmm_unweighted: return "spmm_unweighted";
    case Primitive::gemm: return "gemm";
    case Primitive::dense_add: return "dense_add";
    case Primitive::sparse_add: return "sparse_add";
  }
  return "?";
}

constexpr std::size_t kPrimitiveCount = static_cast<std::size_t>(Primitive::sparse_add) + 1;

// The primitive printed as `name` by primitive_name, if any (model files, sample CSVs).
inline std::optional<Primitive> primitive_from_name(const std::string& name) {
  for (std::size_t k = 0; k < kPrimitiveCount; ++k)
    if (name == primitive_name(static_cast<Primitive>(k))) return static_cast<Primitive>(k);
  return std::nullopt;
}

struct TreeNode;
using Tree = std::shared_ptr<const TreeNode>;
struct TreeNode {
  Primitive prim = Primitive::input;
  std::vector<Tree> kids;
  Expr value;        // the (flattened) expression this node computes
  std::string text;  // bracketed form, e.g. "(D·(A·(D·(H·W))))"
};

// One step of a composition: out = prim(args...).
struct Step {
  Primitive prim = Primitive::input;
  std::vector<int> args;  // earlier step indices
  Expr value;             // what it computes; value->info is its kind and shape
  Size cost;              // multiply-adds (or element operations); 0 for inputs
  bool reused = false;    // input: a value the layer already holds, not a leaf
};

struct Composition {
  std::string text;  // the association tree, bracketed
  std::vector<Step> steps;
  int result = -1;
  // The non-input steps as (primitive, cost), in execution order.
  std::vector<std::pair<Primitive, Size>> primitives() const {
    std::vector<std::pair<Primitive, Size>> r;
    for (const Step& s : steps)
      if (s.prim != Primitive::input) r.emplace_back(s.prim, s.cost);
    return r;
  }
  std::string describe() const {
    std::string r = text + "  {";
    bool first = true;
    for (const auto& [p, c] : primitives()) {
      r += std::string(first ? "" : ", ") + primitive_name(p) + " " + c.str();
      first = false;
    }
    return r + "}";
  }
};

namespace detail {

inline Tree make_tree(Primitive p, std::vector<Tree> kids, Expr value, std::string text) {
  auto t = std::make_shared<TreeNode>();
  t->prim = p;
  t->kids = std::move(kids);
  t->value = std::move(value);
  t->text = std::move(text);
  return t;
}

// The primitive that multiplies l by r, or nothing when the pair is not formed.
inline std::optional<Primitive> product_primitive(MatrixKind l, MatrixKind r) {
  const bool ld = l == MatrixKind::diagonal, rd = r == MatrixKind::diagonal;
  if (ld && rd) return Primitive::diag_product;
  if ((ld && is_sparse(r)) || (is_sparse(l) && rd)) return Primitive::sparse_scale;
  if (ld && is_dense(r)) return Primitive::row_broadcast;
  if (is_dense(l) && rd) return Primitive::column_broadcast;
  if (is_sparse(l) && is_dense(r))
    return l == MatrixKind::sparse_weighted ? Primitive::spmm_weighted : Primitive::spmm_unweighted;
  if (is_dense(l) && is_dense(r)) return Primitive::gemm;
  return std::nullopt;
}

// The kind of a computed value (products and sums of the IR are typed dense by default).
inline MatrixKind result_kind(Primitive p, MatrixKind fallback) {
  switch (p) {
    case Primitive::diag_product: return MatrixKind::diagonal;
    case Primitive::sparse_scale:
    case Primitive::sparse_add: return MatrixKind::sparse_weighted;
    case Primitive::input: return fallback;
    default: return MatrixKind::dense_data;
  }
}

// `value` re-typed as the primitive's result (sparse results keep their stored count).
inline Expr typed_value(const Expr& value, Primitive p, const Size& nnz) {
  const MatrixKind k = result_kind(p, value->info.kind);
  if (k == value->info.kind && !is_sparse(k)) return value;
  auto n = std::make_shared<ExprNode>(*value);
  n->info.kind = k;
  if (is_sparse(k)) n->info.nnz = nnz;
  return n;
}

inline Size sparse_nnz(const std::vector<Tree>& parts) {
  for (const Tree& t : parts)
    if (is_sparse(t->value->info.kind)) return t->value->info.nnz;
  return parts.front()->value->info.nnz;
}

class TreeEnumerator {
 public:
  std::vector<Tree> trees(const Expr& e) {
    auto it = memo_.find(e->key);
    if (it != memo_.end()) return it->second;
    std::vector<Tree> out;
    if (e->op == ExprNode::Op::leaf) {
      out.push_back(make_tree(Primitive::input, {}, e, e->name));
    } else if (e->op == ExprNode::Op::sum) {
      out = sum_trees(e);
    } else {
      out = product_trees(e);
    }
    memo_[e->key] = out;
    return out;
  }

 private:
  std::vector<Tree> sum_trees(const Expr& e) {
    std::vector<std::vector<Tree>> per;
    for (const Expr& t : e->children) per.push_back(trees(t));
    std::vector<Tree> out;
    std::vector<Tree> pick(per.size());
    std::function<void(std::size_t)> rec = [&](std::size_t k) {
      if (k == per.size()) {
        // Terms all sparse or diagonal: a sparse sum; all dense: a dense sum; a mix would
        // densify a sparse operand and is not formed.
        bool any_dense = false, any_sparse = false;
        for (const Tree& p : pick) (is_dense(p->value->info.kind) ? any_dense : any_sparse) = true;
        if (any_dense && any_sparse) return;
        const bool all_sparse = !any_dense;
        std::vector<Expr> vals;
        std::string text = "(";
        Size nnz;
        for (std::size_t i = 0; i < pick.size(); ++i) {
          vals.push_back(pick[i]->value);
          text += (i ? " + " : "") + pick[i]->text;
          nnz = nnz + pick[i]->value->info.nnz;
        }
        const Primitive p = all_sparse ? Primitive::sparse_add : Primitive::dense_add;
        out.push_back(make_tree(p, pick, typed_value(sum(vals), p, nnz), text + ")"));
        return;
      }
      for (const Tree& t : per[k]) {
        pick[k] = t;
        rec(k + 1);
      }
    };
    rec(0);
    return out;
  }

  // Interval enumeration over the factors: every binary bracketing whose pairs form a
  // primitive, with a diagonal·sparse·diagonal interval formed as one sparse_scale.
  std::vector<Tree> product_trees(const Expr& e) {
    const auto& f = e->children;
    const std::size_t n = f.size();
    std::vector<std::vector<std::vector<Tree>>> t(n, std::vector<std::vector<Tree>>(n));
    for (std::size_t i = 0; i < n; ++i) t[i][i] = trees(f[i]);
    for (std::size_t len = 2; len <= n; ++len)
      for (std::size_t i = 0; i + len <= n; ++i) {
        const std::size_t j = i + len - 1;
        auto& cell = t[i][j];
        if (len == 3 && f[i]->info.kind == MatrixKind::diagonal && is_sparse(f[i + 1]->info.kind) &&
            f[j]->info.kind == MatrixKind::diagonal) {
          for (const Tree& a : t[i][i])
            for (const Tree& b : t[i + 1][i + 1])
              for (const Tree& c : t[j][j])
                cell.push_back(make_tree(Primitive::sparse_scale, {a, b, c},
                                         typed_value(product({a->value, b->value, c->value}),
                                                     Primitive::sparse_scale, b->value->info.nnz),
                                         "[" + a->text + "·" + b->text + "·" + c->text + "]"));
          continue;
        }
        for (std::size_t s = i; s < j; ++s)
          for (const Tree& l : t[i][s])
            for (const Tree& r : t[s + 1][j]) {
              auto p = product_primitive(l->value->info.kind, r->value->info.kind);
              if (!p) continue;
              cell.push_back(make_tree(*p, {l, r},
                                       typed_value(product({l->value, r->value}), *p, sparse_nnz({l, r})),
                                       "(" + l->text + "·" + r->text + ")"));
            }
      }
    return t[0][n - 1];
  }

  std::map<std::string, std::vector<Tree>> memo_;
};

inline Size step_cost(Primitive p, const std::vector<Step>& steps, const std::vector<int>& args,
                      const MatrixInfo& out) {
  auto info = [&](int k) -> const MatrixInfo& { return steps[static_cast<std::size_t>(args[static_cast<std::size_t>(k)])].value->info; };
  switch (p) {
    case Primitive::input: return {};
    case Primitive::diag_product: return Size::symbol(out.rows);
    case Primitive::sparse_scale: return out.nnz;
    case Primitive::row_broadcast:
    case Primitive::column_broadcast: return Size::symbol(out.rows) * Size::symbol(out.cols);
    case Primitive::spmm_weighted:
    case Primitive::spmm_unweighted: return info(0).nnz * Size::symbol(out.cols);
    case Primitive::gemm: return Size::symbol(out.rows) * Size::symbol(info(0).cols) * Size::symbol(out.cols);
    case Primitive::dense_add:
      return static_cast<std::int64_t>(args.size() - 1) * (Size::symbol(out.rows) * Size::symbol(out.cols));
    case Primitive::sparse_add: return out.nnz;
  }
  return {};
}

// Steps of a tree in post-order, each distinct value once.
inline int lower_tree(const Tree& t, const std::set<std::string>& available, std::vector<Step>& steps,
                      std::map<std::string, int>& done) {
  const std::string key = t->value->key + "#" + kind_name(t->value->info.kind);
  if (auto it = done.find(key); it != done.end()) return it->second;
  Step s;
  s.value = t->value;
  if (t->prim != Primitive::input && available.count(t->value->key)) {
    s.prim = Primitive::input;
    s.reused = true;
  } else {
    s.prim = t->prim;
    for (const Tree& k : t->kids) s.args.push_back(lower_tree(k, available, steps, done));
    s.cost = step_cost(s.prim, steps, s.args, s.value->info);
  }
  steps.push_back(s);
  const int id = static_cast<int>(steps.size()) - 1;
  done[key] = id;
  return id;
}

}  // namespace detail

inline Composition composition_of(const Tree& t, const std::set<std::string>& available = {}) {
  Composition c;
  c.text = t->text;
  std::map<std::string, int> done;
  c.result = detail::lower_tree(t, available, c.steps, done);
  return c;
}

// Every composition of `e` and of its equivalent forms, each distinct tree once, in a
// deterministic order. ShapeError when no bracketing of some product forms primitives.
inline std::vector<Composition> enumerate_compositions(const Expr& e, const std::set<std::string>& available = {}) {
  detail::TreeEnumerator en;
  std::vector<Composition> out;
  std::set<std::string> seen;
  for (const Expr& form : equivalent_forms(e))
    for (const Tree& t : en.trees(form))
      if (seen.insert(t->text).second) out.push_back(composition_of(t, available));
  SPINDLE_CHECK(!out.empty(), ShapeError, "gnn: no composition of ", e->key,
                " uses only GNN primitives (a sparse·sparse or dense·sparse product cannot be formed)");
  return out;
}

// How many steps of `c` read each step's value, and (for a value read once) which step.
struct StepUses {
  std::vector<int> count, reader;
  // Read by exactly one step and not the result: a value that step may compute itself.
  bool single(const Composition& c, std::size_t s) const { return count[s] == 1 && static_cast<int>(s) != c.result; }
};
inline StepUses step_uses(const Composition& c) {
  StepUses u{std::vector<int>(c.steps.size(), 0), std::vector<int>(c.steps.size(), -1)};
  for (std::size_t s = 0; s < c.steps.size(); ++s)
    for (int a : c.steps[s].args) {
      ++u.count[static_cast<std::size_t>(a)];
      u.reader[static_cast<std::size_t>(a)] = static_cast<int>(s);
    }
  return u;
}

// The GEMM steps of `c` whose product is only a term of one dense sum (used once, by a
// dense_add, and not the result): gnn::execute computes them into the sum's buffer (the first
// two of one inner width in one pass, execute.hpp's matmul_pair; the others
// accumulating) instead of into a buffer of their own that the sum then reads. Their own
// values are not kept: backward reads a GEMM's operands, and a dense sum's adjoint passes
// through without reading its terms.
inline std::vector<bool> gemms_into_sums(const Composition& c) {
  const StepUses u = step_uses(c);
  std::vector<bool> into(c.steps.size(), false);
  for (std::size_t s = 0; s < c.steps.size(); ++s)
    into[s] = c.steps[s].prim == Primitive::gemm && u.single(c, s) &&
              c.steps[static_cast<std::size_t>(u.reader[s])].prim == Primitive::dense_add;
  return into;
}

// Whether every term of dense sum `s` of `c` is a GEMM product computed inside the sum
// (gemms_into_sums): execute then runs it as GEMMs only (a pair pass or a GEMM, then
// accumulating GEMMs), and its add is no pass of its own (the cost models charge it nothing).
inline bool sum_of_gemms_only(const Composition& c, const std::vector<bool>& into, std::size_t s) {
  const Step& st = c.steps.at(s);
  if (st.prim != Primitive::dense_add) return false;
  for (int a : st.args)
    if (!into.at(static_cast<std::size_t>(a))) return false;
  return true;
}

// The row broadcasts that gnn::execute folds into the SpMM beside them (one pass instead of
// two or three; primitives.hpp's spmm_row_scaled / spmm_column_scaled / spmm_both_scaled):
// a broadcast D·P of an SpMM P that nothing else reads (Dinv·(A·X), GCN's outer D), and a
// broadcast Q = D·X that only an SpMM reads (A·(D·X), GCN's inner D); neither the result.
// computed_by[s] is the step that computes s's value inside its own (the broadcast for a
// folded SpMM, the SpMM for a folded inner broadcast), -1 for a step that runs itself.
inline std::vector<int> broadcasts_folded(const Composition& c) {
  const std::size_t n = c.steps.size();
  const StepUses u = step_uses(c);
  std::vector<int> computed_by(n, -1);
  auto single_use = [&](std::size_t s) { return u.single(c, s); };
  auto is_spmm = [&](std::size_t s) {
    return c.steps[s].prim == Primitive::spmm_weighted || c.steps[s].prim == Primitive::spmm_unweighted;
  };
  for (std::size_t s = 0; s < n; ++s) {
    const Step& st = c.steps[s];
    if (!is_spmm(s)) continue;
    const auto x = static_cast<std::size_t>(st.args.at(1));
    if (c.steps[x].prim == Primitive::row_broadcast && single_use(x)) computed_by[x] = static_cast<int>(s);
  }
  for (std::size_t s = 0; s < n; ++s) {
    const Step& st = c.steps[s];
    if (st.prim != Primitive::row_broadcast || computed_by[s] >= 0) continue;  // a folded broadcast folds nothing
    const auto p = static_cast<std::size_t>(st.args.at(1));
    if (is_spmm(p) && single_use(p)) computed_by[p] = static_cast<int>(s);
  }
  return computed_by;
}

// How gnn::backward forms a row broadcast's input gradient diag(d)·dC (backward.hpp):
//   into_reader    X = D·Z read only by an SpMM C = A·X, D not differentiated: dZ =
//                  diag(d)·Aᵀ·dC is formed in that SpMM's pass on the transpose (GCN's inner D);
//   into_producer  B = D·P of an SpMM P that nothing else reads, P's A values not
//                  differentiated: P's pass on the transpose takes dP = diag(d)·dB's scaling
//                  (GCN's outer D, SAGE-mean's Dinv); a broadcast folded into its reader is
//                  not also folded into its producer;
//   none           a row_broadcast kernel of its own (and every step that is no row broadcast).
enum class GradientFold : char { none, into_reader, into_producer };

// gnn::backward's fold decision for every step of `c`, given `needs` (the steps on a path from
// a differentiated leaf); backward runs exactly these, and the cost models charge a folded
// broadcast's gradient nothing (backward_inputs).
inline std::vector<GradientFold> gradient_broadcast_folds(const Composition& c, const std::vector<char>& needs) {
  const std::size_t n = c.steps.size();
  const StepUses u = step_uses(c);
  std::vector<GradientFold> fold(n, GradientFold::none);
  auto is_spmm = [&](std::size_t s) {
    return c.steps[s].prim == Primitive::spmm_weighted || c.steps[s].prim == Primitive::spmm_unweighted;
  };
  auto arg = [&](std::size_t s, std::size_t k) { return static_cast<std::size_t>(c.steps[s].args.at(k)); };
  for (std::size_t s = 0; s < n; ++s) {
    if (!is_spmm(s) || !needs[s] || !needs[arg(s, 1)]) continue;
    const std::size_t x = arg(s, 1);
    if (c.steps[x].prim == Primitive::row_broadcast && u.single(c, x) && !needs[arg(x, 0)])
      fold[x] = GradientFold::into_reader;
  }
  for (std::size_t b = 0; b < n; ++b) {
    if (c.steps[b].prim != Primitive::row_broadcast || fold[b] != GradientFold::none || !needs[b]) continue;
    const std::size_t p = arg(b, 1);
    const bool da = c.steps[p].prim == Primitive::spmm_weighted && needs[arg(p, 0)];
    if (is_spmm(p) && needs[p] && u.count[p] == 1 && !da) fold[b] = GradientFold::into_producer;
  }
  return fold;
}

}  // namespace spindle::gnn
