// order_iterations (stage I -> stage I): picks the loop order of every innermost sparse
// iteration from a cost model, so that the order in which a user lists the iterators does
// not decide the speed (Scorch, seed 001, Algorithm 1: SpMM written i,k,j or SDDMM
// written k,i,j ran 5-30x slower than i,j,k).
//
// Which orders are candidates (docs/passes/order_iterations.md has the reasoning):
//  * only iterations with no nested iteration inside (their body is the innermost loop);
//  * a child axis comes after its parent (the language's only ordering rule, §3);
//  * nothing may tell the orders apart but the association of reductions, which the
//    language leaves to the schedules (§4.3). So an iteration is left alone when it writes
//    a local declared outside it (`t = t * 2 + a(i, j)` depends on the order of points);
//    when its body reads a buffer it writes, its reduction axes keep their relative order
//    (each element then sees its updates in the written order); and when it carries a
//    per-element init, no spatial axis after the first reduction axis may hang under a
//    reduction axis (lower_sparse_iter loops over them to place the init).
// The cost of an order: each access costs at the deepest loop it varies in, by how it
// moves there (invariant, unit stride, gather/stride, search), weighted by an estimate of
// that loop's executions (16 per level); writes cost twice a read, a reduction whose
// target stays in registers across the loop outside (register_tile) a quarter; a top-level
// iteration whose outermost loop is a reduction cannot run in parallel. The written order
// wins ties. Iterations of more than 7 axes keep their order (7! = 5040 candidates).
// Nothing is reordered under SPINDLE_LOOP_ORDER=written, for a phase of an assembling
// kernel, or under a user schedule with loop steps or a sparse_fuse step (docs/schedules.md).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/context.hpp"

namespace spindle::autosched {

namespace order_detail {

// The accesses of a leaf iteration's body and whether reordering it can change a result.
struct BodyFacts : ir::IRVisitor {
  struct Access {
    const ir::BufferNode* buffer;
    std::vector<ir::Expr> indices;
    bool write = false;
    bool reduce = false;
    bool search = false;  // set by the caller: see searches()
  };
  std::vector<Access> accesses;
  std::set<const ir::BufferNode*> written, read, local_allocs;
  bool nested = false;         // holds another sparse iteration
  bool writes_outer_local = false;
  std::vector<const ir::BufferNode*> local_writes;

  void visit_SparseIteration(const ir::SparseIterationNode*) override { nested = true; }
  void visit_Block(const ir::BlockNode* n) override {
    for (auto& b : n->allocs) local_allocs.insert(b.get());
    ir::IRVisitor::visit_Block(n);
  }
  void visit_Load(const ir::LoadNode* n) override {
    ir::IRVisitor::visit_Load(n);
    if (n->buffer->scope == ir::BufferScope::local) return;
    read.insert(n->buffer.get());
    accesses.push_back({n->buffer.get(), n->indices, false, false});
  }
  void visit_Store(const ir::StoreNode* n) override {
    ir::IRVisitor::visit_Store(n);
    note_write(n->buffer, n->indices, false);
  }
  void visit_Reduce(const ir::ReduceNode* n) override {
    ir::IRVisitor::visit_Reduce(n);
    note_write(n->buffer, n->indices, true);
  }
  void note_write(const ir::Buffer& b, const std::vector<ir::Expr>& idx, bool reduce) {
    if (b->scope == ir::BufferScope::local) {
      local_writes.push_back(b.get());
      return;
    }
    written.insert(b.get());
    accesses.push_back({b.get(), idx, true, reduce});
  }
  void finish() {
    for (auto* l : local_writes)
      if (!local_allocs.count(l)) writes_outer_local = true;
  }
};

// Does expression e mention variable v?
struct Mentions : ir::IRVisitor {
  const ir::VarNode* v;
  bool found = false;
  explicit Mentions(const ir::VarNode* var) : v(var) {}
  void visit_Var(const ir::VarNode* n) override { found |= n == v; }
};

inline bool mentions(const ir::Expr& e, const ir::VarNode* v) {
  Mentions m(v);
  m.visit(e);
  return m.found;
}

// How an access moves when the loop over iterator v (of axis x) steps.
enum class Motion { invariant, unit, strided, search };

inline Motion motion(const BodyFacts::Access& a, const ir::VarNode* v, const ir::Axis& x) {
  int slot = -1, uses = 0;
  bool bare = true;
  for (std::size_t s = 0; s < a.indices.size(); ++s) {
    if (!mentions(a.indices[s], v)) continue;
    ++uses;
    slot = static_cast<int>(s);
    bare = bare && a.indices[s].get() == static_cast<const ir::ExprNode*>(v);
  }
  if (uses == 0) return Motion::invariant;
  if (uses > 1 || !bare) return Motion::strided;
  const ir::Axis& sa = a.buffer->axes[static_cast<std::size_t>(slot)];
  bool last = slot + 1 == static_cast<int>(a.indices.size());
  if (sa.get() == x.get()) return last ? Motion::unit : Motion::strided;  // positions
  if (sa->is_sparse()) return Motion::search;       // a coordinate looked up in a fiber
  if (x->is_sparse()) return Motion::strided;       // stored coordinates: a gather
  return last ? Motion::unit : Motion::strided;     // dense over dense
}

// Does the access index a sparse slot by anything but that axis' own iterator (a search
// in the fiber, whichever loop moves)?
inline bool searches(const BodyFacts::Access& a, const std::map<const ir::VarNode*, const ir::AxisNode*>& var_axis) {
  for (std::size_t s = 0; s < a.indices.size(); ++s) {
    const ir::Axis& sa = a.buffer->axes[s];
    if (sa->is_dense()) continue;
    const auto* v = a.indices[s].as<ir::VarNode>();
    auto it = v ? var_axis.find(v) : var_axis.end();
    if (it == var_axis.end() || it->second != sa.get()) return true;
  }
  return false;
}

inline double motion_cost(Motion m) {
  switch (m) {
    case Motion::invariant: return 0;
    case Motion::unit: return 1;
    case Motion::strided: return 8;
    case Motion::search: return 32;
  }
  return 0;
}

// The cost of running iteration n with its axes in order `perm` (see the file comment).
inline double order_cost(const ir::SparseIterationNode* n, const BodyFacts& facts, const std::vector<std::size_t>& perm,
                         bool top_level, int num_threads) {
  constexpr double kTrips = 16;
  const std::size_t levels = perm.size();
  double cost = 0;
  for (const auto& a : facts.accesses) {
    int deepest = -1;
    Motion m = Motion::invariant;
    for (std::size_t l = levels; l-- > 0;) {
      std::size_t k = perm[l];
      Motion here = motion(a, n->vars[k].node(), n->axes[k]);
      if (here == Motion::invariant) continue;
      deepest = static_cast<int>(l);
      m = here;
      break;
    }
    if (deepest < 0) continue;
    if (a.search) m = Motion::search;  // every execution looks a coordinate up
    double c = motion_cost(m) * std::pow(kTrips, deepest);
    if (a.write) {
      c *= 2;
      // register_tile: a reduction over a dense spatial innermost loop whose target does
      // not move with the reduction loop just outside it stays in registers.
      std::size_t inner = perm[levels - 1];
      if (a.reduce && levels >= 2 && deepest == static_cast<int>(levels) - 1 && m == Motion::unit &&
          n->axes[inner]->is_dense() && n->kinds[inner] == ir::IterKind::spatial &&
          n->kinds[perm[levels - 2]] == ir::IterKind::reduction &&
          motion(a, n->vars[perm[levels - 2]].node(), n->axes[perm[levels - 2]]) == Motion::invariant)
        c *= 0.25;
    }
    cost += c;
  }
  if (top_level && num_threads > 1 && n->kinds[perm[0]] == ir::IterKind::reduction)
    cost *= std::min(num_threads, 8);
  return cost;
}

// Why iteration n may not run in order `perm` ("" when it may). `bound` holds the axes of
// enclosing iterations.
inline std::string order_problem(const ir::SparseIterationNode* n, const std::vector<std::size_t>& perm,
                                 const std::set<const ir::AxisNode*>& bound, bool keep_reduction_order) {
  std::vector<int> at(perm.size());
  for (std::size_t l = 0; l < perm.size(); ++l) at[perm[l]] = static_cast<int>(l);
  auto position_of = [&](const ir::AxisNode* a) {
    for (std::size_t k = 0; k < n->axes.size(); ++k)
      if (n->axes[k].get() == a) return at[k];
    return -1;
  };
  for (std::size_t k = 0; k < n->axes.size(); ++k) {
    const ir::Axis& p = n->axes[k]->parent;
    if (p && !bound.count(p.get()) && position_of(p.get()) > at[k])
      return "axis " + n->axes[k]->name + " comes before its parent " + p->name;
  }
  if (keep_reduction_order) {
    int last = -1;
    const ir::AxisNode* last_axis = nullptr;
    for (std::size_t k = 0; k < n->axes.size(); ++k) {
      if (n->kinds[k] != ir::IterKind::reduction) continue;
      if (at[k] < last)
        return "the reduction axes " + last_axis->name + " and " + n->axes[k]->name +
               " change their relative order, and the body reads a buffer it writes (each element must see its "
               "updates in the written order)";
      last = at[k];
      last_axis = n->axes[k].get();
    }
  }
  if (n->init.defined()) {
    // lower_sparse_iter runs the init before the first reduction loop, over the spatial
    // axes after it: none of them may hang under a reduction axis.
    int first_reduction = -1;
    for (std::size_t l = 0; l < perm.size() && first_reduction < 0; ++l)
      if (n->kinds[perm[l]] == ir::IterKind::reduction) first_reduction = static_cast<int>(l);
    if (first_reduction >= 0)
      for (std::size_t l = static_cast<std::size_t>(first_reduction) + 1; l < perm.size(); ++l) {
        const ir::Axis& a = n->axes[perm[l]];
        if (n->kinds[perm[l]] != ir::IterKind::spatial || !a->parent || bound.count(a->parent.get())) continue;
        int pp = position_of(a->parent.get());
        if (pp < 0 || n->kinds[perm[static_cast<std::size_t>(pp)]] == ir::IterKind::reduction)
          return "the iteration has an init, and its spatial axis " + a->name +
                 " would hang under the reduction axis " + n->axes[perm[static_cast<std::size_t>(pp)]]->name;
      }
  }
  return {};
}

// May iteration n run in order `perm`? `bound` holds the axes of enclosing iterations.
inline bool order_allowed(const ir::SparseIterationNode* n, const std::vector<std::size_t>& perm,
                          const std::set<const ir::AxisNode*>& bound, bool keep_reduction_order) {
  return order_problem(n, perm, bound, keep_reduction_order).empty();
}

// Why iteration n must keep its written order ("" when its axes may be permuted, subject to
// order_problem). `bound` holds the axes of enclosing iterations.
inline std::string fixed_order_reason(const ir::SparseIterationNode* n, const BodyFacts& facts,
                                      const std::vector<const ir::AxisNode*>& bound) {
  if (facts.nested) return "it holds another iteration (only innermost iterations are reordered)";
  if (facts.writes_outer_local)
    return "it writes a local declared outside it (its result depends on the order of the points)";
  for (std::size_t k = 0; k < n->axes.size(); ++k)  // iter<fuse<...>> (or an earlier sparse_fuse)
    if (n->fused_with_next(k))
      return "axes " + n->axes[k]->name + " and " + n->axes[k + 1]->name + " are fused (one loop)";
  for (std::size_t k = 0; k < n->axes.size(); ++k) {
    const ir::Axis& a = n->axes[k];
    // A co-iteration (§3.1) needs its operands' parents iterated first, and reads its
    // operands at the merge's positions: it keeps the written order.
    if (a->merge != ir::MergeOp::none) return "axis " + a->name + " co-iterates sparse operands";
    // An axis whose parent is named by the coordinate of another iterator (§3: the innermost
    // one over the parent's coordinates) keeps the written order: reordering could change
    // which iterator that is.
    auto parent_at = std::find(n->axes.begin(), n->axes.end(), a->parent);
    if (ir::parent_by_coordinate(*a) && std::find(bound.begin(), bound.end(), a->parent.get()) == bound.end() &&
        (parent_at == n->axes.end() || parent_at - n->axes.begin() > static_cast<long>(k)))
      return "the parent of axis " + a->name + " is named by the coordinate of another iterator";
  }
  return {};
}

// Whether the body reads a buffer it writes (its reduction axes then keep their relative
// order: order_problem's keep_reduction_order).
inline bool reads_what_it_writes(const BodyFacts& facts) {
  for (auto* b : facts.written)
    if (facts.read.count(b)) return true;
  return false;
}

inline bool is_identity(const std::vector<std::size_t>& perm) {
  for (std::size_t k = 0; k < perm.size(); ++k)
    if (perm[k] != k) return false;
  return true;
}

// Iteration `self` (a SparseIterationNode) with its axes in order `perm`; itself when `perm`
// is the identity.
inline ir::Stmt permuted(const ir::Stmt& self, const std::vector<std::size_t>& perm) {
  if (is_identity(perm)) return self;
  const auto* n = self.as<ir::SparseIterationNode>();
  std::vector<ir::Axis> axes;
  std::vector<ir::Var> vars;
  std::vector<ir::IterKind> kinds;
  for (std::size_t k : perm) {
    axes.push_back(n->axes[k]);
    vars.push_back(n->vars[k]);
    kinds.push_back(n->kinds[k]);
  }
  return n->edited([&](ir::SparseIterationNode& c) {
    c.axes = std::move(axes);
    c.vars = std::move(vars);
    c.kinds = std::move(kinds);
  });
}

class OrderIterations : public ir::IRMutator {
 public:
  explicit OrderIterations(int num_threads) : threads_(num_threads) {}

  ir::Stmt mutate_SparseIteration(const ir::SparseIterationNode* n, const ir::Stmt& self) override {
    const bool top_level = depth_ == 0;
    for (std::size_t k = 0; k < n->axes.size(); ++k) var_axis_[n->vars[k].node()] = n->axes[k].get();
    for (auto& a : n->axes) bound_.push_back(a.get());
    ++depth_;
    ir::Stmt body = mutate(n->body);
    --depth_;
    bound_.resize(bound_.size() - n->axes.size());
    ir::Stmt out = body.same_as(n->body) ? self : n->with_body(n->init, body);
    return permuted(out, choose(out.as<ir::SparseIterationNode>(), top_level));
  }

 private:
  std::vector<std::size_t> choose(const ir::SparseIterationNode* n, bool top_level) const {
    std::vector<std::size_t> written(n->axes.size());
    std::iota(written.begin(), written.end(), 0);
    if (n->axes.size() < 2 || n->axes.size() > 7) return written;
    BodyFacts facts;
    facts.visit(n->body);
    facts.finish();
    for (auto& a : facts.accesses) a.search = searches(a, var_axis_);
    if (!fixed_order_reason(n, facts, bound_).empty()) return written;
    const bool reads_written = reads_what_it_writes(facts);
    std::set<const ir::AxisNode*> bound(bound_.begin(), bound_.end());
    std::vector<std::size_t> best = written, perm = written;
    double best_cost = order_cost(n, facts, written, top_level, threads_);
    while (std::next_permutation(perm.begin(), perm.end())) {
      if (!order_allowed(n, perm, bound, reads_written)) continue;
      double c = order_cost(n, facts, perm, top_level, threads_);
      if (c < best_cost * (1 - 1e-9)) {
        best_cost = c;
        best = perm;
      }
    }
    return best;
  }

  int threads_;
  int depth_ = 0;
  std::vector<const ir::AxisNode*> bound_;  // axes of the enclosing iterations
  std::map<const ir::VarNode*, const ir::AxisNode*> var_axis_;  // every iterator seen so far
};

}  // namespace order_detail

inline ir::Function order_iterations(const ir::Function& f, const lower::LowerContext& ctx) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::coordinate, "order_iterations", "expects stage I");
  // A user schedule with loop steps names the loops of the written order (its sparse_reorder
  // steps change it): the cost model's choice depends on the thread count, and a schedule
  // must address the same loops on every machine. sparse_fuse names adjacent axes of the
  // written order too.
  if (ctx.keep_loop_order || ctx.schedule.has_loop_steps() || ctx.schedule.has_sparse_fuse()) return f;
  ir::Function out = f;
  out.body = order_detail::OrderIterations(ctx.num_threads).mutate(f.body);
  return out;
}

// "# loop order: spmm [I, K, J] -> [I, J, K]\n" for each iteration whose order differs
// between `written` and `ordered` (same function before and after order_iterations).
inline std::string describe_loop_orders(const ir::Function& written, const ir::Function& ordered) {
  struct Collect : ir::IRVisitor {
    std::vector<const ir::SparseIterationNode*> its;
    void visit_SparseIteration(const ir::SparseIterationNode* n) override {
      its.push_back(n);
      ir::IRVisitor::visit_SparseIteration(n);
    }
  } a, b;
  a.visit(written.body);
  b.visit(ordered.body);
  auto names = [](const ir::SparseIterationNode* n) {
    std::string s = "[";
    for (std::size_t k = 0; k < n->axes.size(); ++k) s += (k ? ", " : "") + n->axes[k]->name;
    return s + "]";
  };
  std::string out;
  for (std::size_t k = 0; k < a.its.size() && k < b.its.size(); ++k)
    if (names(a.its[k]) != names(b.its[k]))
      out += "# loop order: " + a.its[k]->name + " " + names(a.its[k]) + " -> " + names(b.its[k]) +
             " (order_iterations; SPINDLE_LOOP_ORDER=written keeps the written order)\n";
  return out;
}

}  // namespace spindle::autosched
