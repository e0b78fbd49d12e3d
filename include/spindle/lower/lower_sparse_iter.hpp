// lower_sparse_iter: stage I (coordinate space) -> stage II (position space).
// Seed 002 §3.3.1, in three steps:
//  1. auxiliary buffer materialisation: each variable axis A gets A_indptr (over the chain
//     of A's parent, one extra element), each sparse axis A_indices (over A's chain);
//  2. nested loop generation: one loop per iteration axis, from 0 to the axis's extent
//     (length, nnz_per_row, or indptr[p+1] - indptr[p] for variable axes), each iteration
//     wrapped in a named block; the init of a reduction is placed before the outermost
//     reduction loop, with its own loops over the spatial axes nested below it;
//  3. coordinate translation: every buffer access is rewritten from coordinates to
//     positions. An iterator that indexes a slot of its own axis under the same ancestors
//     uses its loop position directly; otherwise the coordinate is computed (decompress:
//     indices[...] for sparse iterators) and compressed into the slot's axis: dense axes
//     take the coordinate (guarded to [0, extent) unless it comes from an iterator of the
//     same coordinate space), sparse axes search the fiber (FindPos, a binary search);
//     an absent coordinate reads the buffer's default value and drops writes.
// A chain of axes that sparse_fuse fused (SparseIterationNode::fused) becomes one loop over
// the positions of its last axis; the others' positions are recovered per iteration
// (fused_loop below).
// Pre: stage I, body made of sparse iterations, locals and stores.
// Post: stage II, no SparseIteration nodes; function buffers include the aux buffers used.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/lower/context.hpp"

namespace spindle::lower {

namespace detail {

class SparseIterLowering : public ir::IRMutator {
 public:
  explicit SparseIterLowering(const LowerContext& ctx) : ctx_(ctx) {}

  ir::Function run(const ir::Function& f) {
    SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::coordinate, "lower_sparse_iter", "expects stage I");
    for (auto& a : f.axes) make_aux(a);
    ir::Function out = f;
    out.stage = ir::Stage::position;
    out.body = mutate(f.body);
    for (auto& a : f.axes) {
      auto& aux = aux_.at(a.get());
      if (aux.indptr && used_.count(aux.indptr.get()))
        out.buffers.push_back({aux.indptr, {ir::ParamOrigin::indptr, -1, a}});
      if (aux.indices && used_.count(aux.indices.get()))
        out.buffers.push_back({aux.indices, {ir::ParamOrigin::indices, -1, a}});
    }
    return out;
  }

 protected:
  // --- step 2: loops -----------------------------------------------------------------
  ir::Stmt mutate_SparseIteration(const ir::SparseIterationNode* n, const ir::Stmt&) override {
    const std::size_t depth = scope_.size(), count = n->axes.size();
    std::vector<ir::Var> pos;
    std::vector<ir::Expr> extents;
    int first_reduction = -1;
    for (std::size_t k = 0; k < count; ++k) {
      const ir::Axis& a = n->axes[k];
      for (std::size_t q = 0; q < k; ++q)
        SPINDLE_CHECK(n->axes[q] != a, UserError, "kernel '", ctx_.kernel, "': iteration '", n->name,
                      "' lists axis ", a->name, " twice");
      if (a->parent)
        SPINDLE_CHECK(find_parent(*a), UserError, "kernel '", ctx_.kernel, "': iteration '",
                      n->name, "' iterates axis ", a->name, " without its parent ", a->parent->name,
                      "; hint: iterate ", a->parent->name, " before ", a->name,
                      " (in the same iteration or an enclosing one)");
      if (a->merge == ir::MergeOp::none) extents.push_back(extent_of(a));
      else extents.emplace_back();  // a co-iteration: its operands' extents (make_loop)
      pos.emplace_back(n->vars[k].name(), DType::i64);
      bind(n->vars[k], a, pos.back(), n->name);
      if (first_reduction < 0 && n->kinds[k] == ir::IterKind::reduction) first_reduction = static_cast<int>(k);
    }
    ir::Stmt body = mutate(n->body);
    ir::Stmt init;
    if (n->init.defined()) {
      if (first_reduction < 0) {
        body = ir::seq({mutate(n->init), body}, n->loc);
      } else {
        init = init_nest(n, static_cast<std::size_t>(first_reduction), depth);
      }
    }
    ir::Stmt s = body;
    for (std::size_t k = count; k-- > 0;) {
      std::size_t first = k;  // a fused chain (schedule/sparse_fuse.hpp): its axes first..k, one loop
      while (first > 0 && n->fused_with_next(first - 1)) --first;
      if (first < k)
        s = fused_loop(depth + first, k - first, extents[first], n->kinds[k], s, n->loc);
      else if (k == 0 && n->gaps_of)
        s = gap_loop(depth, n->gaps_of, extents[0], n->kinds[0], s, n->loc);
      else
        s = make_loop(depth + k, extents[k], n->kinds[k], s, n->loc);
      if (static_cast<int>(first) == first_reduction && init.defined()) s = ir::seq({init, s}, n->loc);
      k = first;
    }
    scope_.resize(depth);
    return ir::block(n->name, {}, s, n->loc);
  }

  // The init of iteration n placed before its loop r: loops over the spatial axes after r.
  ir::Stmt init_nest(const ir::SparseIterationNode* n, std::size_t r, std::size_t depth) {
    std::vector<Bound> saved(scope_.begin() + static_cast<long>(depth + r), scope_.end());
    scope_.resize(depth + r);
    std::vector<std::size_t> spatial;
    std::vector<ir::Var> pos;
    std::vector<ir::Expr> extents;
    for (std::size_t k = r + 1; k < n->axes.size(); ++k) {
      if (n->kinds[k] != ir::IterKind::spatial) continue;
      const ir::Axis& a = n->axes[k];
      SPINDLE_CHECK(!a->parent || find_parent(*a), UserError, "kernel '", ctx_.kernel,
                    "': cannot initialise the output of iteration '", n->name, "': spatial axis ", a->name,
                    " depends on reduction axis ", a->parent->name,
                    "; hint: declare the output inout and initialise it before the call");
      if (a->merge == ir::MergeOp::none) extents.push_back(extent_of(a));
      else extents.emplace_back();
      pos.emplace_back(n->vars[k].name(), DType::i64);
      bind(n->vars[k], a, pos.back(), n->name);
      spatial.push_back(k);
    }
    // An init under a condition that no iterator of n enters (iteration_inference's "R's
    // indices ascend") tests it once, around its loops: `if (c) for k: C[x, k] = 0`, the form
    // schedule/register_tile.hpp starts a tile from.
    ir::Stmt init = n->init;
    ir::Expr when;
    if (auto* c = init.as<ir::IfThenElseNode>(); c && !c->else_case.defined()) {
      bool invariant = true;
      for (auto& v : n->vars) invariant = invariant && !ir::uses_var(c->cond, v.get());
      for (auto& b : scope_) invariant = invariant && !ir::uses_var(c->cond, b.iter);
      if (invariant) when = c->cond, init = c->then_case;
    }
    ir::Stmt s = mutate(init);
    for (std::size_t q = spatial.size(); q-- > 0;)
      s = make_loop(depth + r + q, extents[q], ir::IterKind::spatial, s, n->loc);
    if (when.defined()) s = ir::if_then_else(mutate(when), s, ir::Stmt(), n->loc);
    scope_.resize(depth + r);
    scope_.insert(scope_.end(), saved.begin(), saved.end());
    return s;
  }

  // --- step 3: coordinate translation -------------------------------------------------
  ir::Expr mutate_Load(const ir::LoadNode* n, const ir::Expr& self) override {
    if (n->buffer->scope == ir::BufferScope::local && n->indices.empty()) return self;
    Access acc = translate(n->buffer, n->indices);
    ir::Expr value = ir::load(n->buffer, acc.pos);
    if (!acc.guard.defined()) return value;
    return ir::select(acc.guard, value, ir::make_const(n->buffer->dtype, n->buffer->default_value));
  }

  ir::Expr mutate_Var(const ir::VarNode* n, const ir::Expr& self) override {
    if (const Bound* b = find_iter(n)) return b->coord;
    return self;
  }

  ir::Stmt mutate_Store(const ir::StoreNode* n, const ir::Stmt&) override {
    return with_lets([&] {
      Access acc = translate(n->buffer, n->indices);
      ir::Stmt s = ir::store(n->buffer, acc.pos, mutate(n->value), n->loc);
      return acc.guard.defined() ? ir::if_then_else(acc.guard, s, ir::Stmt(), n->loc) : s;
    });
  }

  ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt&) override {
    return with_lets([&] {
      Access acc = translate(n->buffer, n->indices);
      ir::Stmt s = ir::reduce(n->buffer, acc.pos, n->op, mutate(n->value), n->loc);
      return acc.guard.defined() ? ir::if_then_else(acc.guard, s, ir::Stmt(), n->loc) : s;
    });
  }

  ir::Stmt mutate_IfThenElse(const ir::IfThenElseNode* n, const ir::Stmt& self) override {
    return with_lets([&] { return ir::IRMutator::mutate_IfThenElse(n, self); });
  }

 private:
  struct Bound {
    const ir::VarNode* iter;
    ir::Axis axis;
    ir::Var pos;
    ir::Expr coord;
    std::vector<ir::Expr> prefix;  // the ancestor positions the loop runs under (its fiber)
    struct Operand {               // a co-iteration (axis->merge): each operand's position
      ir::Axis axis;
      ir::Var pos, present;
      ir::Expr extent, key;
      std::vector<ir::Expr> prefix;
    };
    std::vector<Operand> merged;
  };
  struct Aux {
    ir::Buffer indptr, indices;
  };
  struct Access {
    std::vector<ir::Expr> pos;
    ir::Expr guard;
  };

  void make_aux(const ir::Axis& a) {
    Aux aux;
    if (a->is_variable()) {
      ir::BufferNode b;
      b.name = a->name + "_indptr";
      b.dtype = a->index_dtype;
      b.axes = ir::axis_chain(a->parent);
      b.role = ir::BufferRole::aux;
      b.extra_storage = 1;
      aux.indptr = ir::make_buffer(std::move(b));
    }
    if (a->is_sparse()) {
      ir::BufferNode b;
      b.name = a->name + "_indices";
      b.dtype = a->index_dtype;
      b.axes = ir::axis_chain(a);
      b.role = ir::BufferRole::aux;
      aux.indices = ir::make_buffer(std::move(b));
    }
    aux_[a.get()] = aux;
  }

  ir::Expr use(const ir::Buffer& b, std::vector<ir::Expr> idx) {
    used_.insert(b.get());
    for (auto& a : b->axes)
      if (a->is_variable()) used_.insert(aux_.at(a.get()).indptr.get());
    return ir::load(b, std::move(idx));
  }

  const Bound* find_iter(const ir::VarNode* v) const {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (it->iter == v) return &*it;
    return nullptr;
  }
  const Bound* find_axis(const ir::AxisNode* a) const {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (it->axis.get() == a) return &*it;
    return nullptr;
  }

  // The innermost iterator over the coordinate space of root dense axis `a` (§3: a child of a
  // root dense axis that is not iterated takes its fiber at such an iterator's coordinate).
  const Bound* find_space(const ir::AxisNode* a) const {
    if (a->parent || a->kind != ir::AxisKind::dense_fixed) return nullptr;
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (ir::coordinate_space(it->axis) == ir::coordinate_space(a)) return &*it;
    return nullptr;
  }
  bool find_parent(const ir::AxisNode& a) const {
    return find_axis(a.parent.get()) || (ir::parent_by_coordinate(a) && find_space(a.parent.get()));
  }

  // The positions of the ancestors of `a` (root first, excluding `a`) that a loop over `a`
  // runs under: those its parent's loop ran under, then the parent's position. A root dense
  // parent that no loop iterates is at the coordinate of the innermost iterator over its
  // coordinates (§3; the very expression translate() computes for that slot). Each loop keeps
  // the prefix it was made with (Bound::prefix): an ancestor iterated again further in (a
  // dense<X> loop inside) does not move the fiber a bound iterator belongs to.
  std::vector<ir::Expr> ancestor_positions(const ir::Axis& a) const {
    if (!a->parent) return {};
    if (const Bound* b = find_axis(a->parent.get())) {
      std::vector<ir::Expr> out = b->prefix;
      out.push_back(b->pos);
      return out;
    }
    const Bound* c = find_space(a->parent.get());
    SPINDLE_INTERNAL_CHECK(c && ir::parent_by_coordinate(*a), "lower_sparse_iter", "the parent ", a->parent->name,
                           " of ", a->name, " is unbound");
    return {c->coord};
  }

  // Number of positions of `a` under the parent positions `prefix`.
  ir::Expr extent_under(const ir::Axis& a, std::vector<ir::Expr> prefix) {
    switch (a->kind) {
      case ir::AxisKind::dense_fixed: return a->length;
      case ir::AxisKind::sparse_fixed: return a->nnz_per_row;
      default: {
        auto& indptr = aux_.at(a.get()).indptr;
        std::vector<ir::Expr> next = prefix;
        next.back() = next.back() + 1;
        return use(indptr, std::move(next)) - use(indptr, std::move(prefix));
      }
    }
  }
  ir::Expr extent_of(const ir::Axis& a) { return extent_under(a, ancestor_positions(a)); }

  // The loop of scope_[b] around `body`: a For over its positions, or for a co-iteration
  // (docs/language.md §3.1) the merge of its operands' fibers (ir::CoIterateNode).
  ir::Stmt make_loop(std::size_t b, const ir::Expr& extent, ir::IterKind kind, ir::Stmt body, ir::SourceLoc loc) {
    const Bound& bd = scope_.at(b);
    if (bd.merged.empty())
      return ir::for_loop(bd.pos, ir::int_imm(0), extent, ir::ForKind::serial, kind, bd.axis->name, body, loc);
    std::vector<ir::CoIterOperand> ops;
    for (auto& o : bd.merged) ops.push_back({o.pos, o.present, o.extent, o.key});
    return ir::co_iterate(bd.pos, bd.axis->merge, std::move(ops), kind, bd.axis->name, body, loc);
  }

  // The loop of scope_[b], a root dense axis over the coordinates of sparse root `root`,
  // visiting only the coordinates `root` does not store (SparseIterationNode::gaps_of): with
  // R's indices strictly ascending (the caller tests it), gap g of the n + 1 lies between
  // index g - 1 and index g (the first from 0, the last up to the extent):
  //   for g in [0, n + 1): let lo = g == 0 ? 0 : idx[g - 1] + 1; let hi = g < n ? idx[g] : extent
  //     for x in [lo, hi): body
  // The gaps are disjoint, so the outer loop is as parallel as the plain one.
  ir::Stmt gap_loop(std::size_t b, const ir::Axis& root, const ir::Expr& extent, ir::IterKind kind, ir::Stmt body,
                    ir::SourceLoc loc) {
    const Bound& bd = scope_.at(b);
    SPINDLE_INTERNAL_CHECK(!root->parent && root->kind == ir::AxisKind::sparse_fixed && !bd.axis->parent &&
                               bd.axis->kind == ir::AxisKind::dense_fixed && bd.merged.empty() &&
                               ir::coordinate_space(bd.axis) == ir::coordinate_space(root),
                           "lower_sparse_iter", "gaps of ", root->name, " over axis ", bd.axis->name);
    const ir::Expr n = extent_under(root, {});
    const ir::Buffer& idx = aux_.at(root.get()).indices;
    ir::Var g(bd.pos.name() + "_gap", DType::i64), lo(bd.pos.name() + "_lo", DType::i64),
        hi(bd.pos.name() + "_hi", DType::i64);
    ir::Expr first = ir::binary(ir::BinOp::eq, ir::Expr(g), ir::int_imm(0));
    ir::Expr lo_value = ir::select(first, ir::int_imm(0), ir::cast(DType::i64, use(idx, {ir::Expr(g) - ir::int_imm(1)})) + ir::int_imm(1));
    ir::Expr hi_value = ir::select(ir::Expr(g) < n, ir::cast(DType::i64, use(idx, {ir::Expr(g)})), extent);
    ir::Stmt rows = ir::for_loop(bd.pos, lo, ir::Expr(hi) - ir::Expr(lo), ir::ForKind::serial, kind, bd.axis->name,
                                 std::move(body), loc);
    return ir::for_loop(g, ir::int_imm(0), n + ir::int_imm(1), ir::ForKind::serial, kind, bd.axis->name,
                        ir::let_stmt(lo, lo_value, ir::let_stmt(hi, hi_value, rows, loc), loc), loc);
  }

  // The loop over the fused chain scope_[b .. b + n] (axes A_0 .. A_n, each the parent of the
  // next; schedule/sparse_fuse.hpp) around `body`: one loop over the absolute positions of A_n
  // under A_0's fiber. Absolute positions of level q under that fiber form the range
  // [S_q, E_q): S_0 = A_0's first position (0 for a root axis, indptr[prefix] for a
  // variable one), E_0 = S_0 + extent0; a variable level's range is its indptr at the outer
  // ends (loaded with positions (prefix, 0, .., 0) and (prefix, extent0, 0, .., 0), which
  // flatten to S_{q-1} and E_{q-1}), a sparse_fixed level's the outer range times its width.
  // Each iteration recovers the absolute position f_q of every outer level from f_{q+1}: a
  // segment search of A_{q+1}'s indptr over [S_q, E_q) (the last r with indptr[r] <= f_{q+1}),
  // or a division by a sparse_fixed width; then the positions the other loops would have
  // had: p_0 = f_0 - S_0, p_q = f_q - A_q's indptr at (prefix, p_0 .. p_{q-1}) (or f_q modulo
  // the width). The same points in the same order as the nested loops.
  // Positions of axis `a` over the whole tensor.
  static ir::Expr level_size(const ir::Axis& a) {
    switch (a->kind) {
      case ir::AxisKind::dense_fixed: return a->length;
      case ir::AxisKind::sparse_fixed: return a->parent ? level_size(a->parent) * a->nnz_per_row : a->nnz_per_row;
      default: return a->nnz;
    }
  }

  ir::Stmt fused_loop(std::size_t b, std::size_t n, const ir::Expr& extent0, ir::IterKind kind, ir::Stmt body,
                      ir::SourceLoc loc) {
    auto i64 = [](ir::Expr e) { return ir::cast(DType::i64, std::move(e)); };
    const std::vector<ir::Expr> prefix = scope_.at(b).prefix;
    std::vector<ir::Axis> axes;
    std::string name, axis;
    for (std::size_t q = 0; q <= n; ++q) {
      const Bound& bd = scope_.at(b + q);
      axes.push_back(bd.axis);
      name += (q ? "_" : "") + std::string(bd.iter->name);
      axis += (q ? "*" : "") + bd.axis->name;
    }
    auto indptr = [&](std::size_t q) { return aux_.at(axes[q].get()).indptr; };
    auto at = [&](std::vector<ir::Expr> tail) {
      std::vector<ir::Expr> idx = prefix;
      idx.insert(idx.end(), tail.begin(), tail.end());
      return idx;
    };
    std::vector<ir::Expr> S(n + 1), E(n + 1);
    if (!axes[0]->parent) {
      // A chain from a root axis covers every position of each level: [0, total) (an
      // indptr starts at 0 and ends at the level's nnz: the containers validate it), so the
      // host knows the loop's extent (a GPU grid over it).
      for (std::size_t q = 0; q <= n; ++q) {
        S[q] = ir::int_imm(0);
        E[q] = i64(level_size(axes[q]));
      }
    } else {
      SPINDLE_INTERNAL_CHECK(axes[0]->is_variable(), "lower_sparse_iter", "fused chain starts at fixed child ",
                             axes[0]->name);
      S[0] = i64(use(indptr(0), prefix));
      E[0] = S[0] + i64(extent0);
      for (std::size_t q = 1; q <= n; ++q) {
        if (axes[q]->is_variable()) {
          std::vector<ir::Expr> lo(q, ir::int_imm(0)), hi(q, ir::int_imm(0));
          hi[0] = i64(extent0);
          S[q] = i64(use(indptr(q), at(lo)));
          E[q] = i64(use(indptr(q), at(hi)));
        } else {
          S[q] = S[q - 1] * i64(axes[q]->nnz_per_row);
          E[q] = E[q - 1] * i64(axes[q]->nnz_per_row);
        }
      }
    }
    ir::Var loop(name, DType::i64);
    std::vector<ir::Var> flat;
    for (std::size_t q = 0; q <= n; ++q) flat.emplace_back(axes[q]->name + "_abs", DType::i64);
    std::vector<ir::Expr> fval(n + 1);
    fval[n] = S[n] + ir::Expr(loop);
    for (std::size_t q = n; q >= 1; --q) {
      if (axes[q]->is_variable()) {
        used_.insert(indptr(q).get());
        fval[q - 1] = S[q - 1] + ir::find_segment(indptr(q), S[q - 1], E[q - 1], flat[q]);
      } else {
        fval[q - 1] = ir::Expr(flat[q]) / i64(axes[q]->nnz_per_row);
      }
    }
    std::vector<ir::Expr> pval(n + 1);
    pval[0] = ir::Expr(flat[0]) - S[0];
    for (std::size_t q = 1; q <= n; ++q) {
      if (axes[q]->is_variable()) {
        std::vector<ir::Expr> outer;
        for (std::size_t r = 0; r < q; ++r) outer.push_back(scope_.at(b + r).pos);
        pval[q] = ir::Expr(flat[q]) - i64(use(indptr(q), at(outer)));
      } else {
        pval[q] = ir::Expr(flat[q]) % i64(axes[q]->nnz_per_row);
      }
    }
    ir::Stmt s = std::move(body);
    for (std::size_t q = n + 1; q-- > 0;) s = ir::let_stmt(scope_.at(b + q).pos, pval[q], s, loc);
    for (std::size_t q = 0; q <= n; ++q) s = ir::let_stmt(flat[q], fval[q], s, loc);
    return ir::for_loop(loop, ir::int_imm(0), E[n] - S[n], ir::ForKind::serial, kind, axis, s, loc);
  }

  void bind(const ir::Var& iter, const ir::Axis& a, const ir::Var& pos, const std::string& iteration) {
    if (a->merge != ir::MergeOp::none) {
      Bound b{iter.node(), a, pos, pos, {}, {}};
      for (auto& o : a->merge_operands) {
        if (o->parent)
          SPINDLE_CHECK(find_parent(*o), UserError, "kernel '", ctx_.kernel, "': iteration '", iteration,
                        "' iterates ", a->name, " (", ir::merge_op_name(a->merge), " of the fibers of ", o->name,
                        ", ...) without the parent ", o->parent->name, " of ", o->name, "; hint: iterate ",
                        o->parent->name, " before it (in the same iteration or an enclosing one)");
        Bound::Operand op;
        op.axis = o;
        op.prefix = ancestor_positions(o);
        op.extent = extent_under(o, op.prefix);
        op.pos = ir::Var(o->name + "_pos", DType::i64);
        op.present = ir::Var(o->name + "_has", DType::boolean);
        std::vector<ir::Expr> idx = op.prefix;
        idx.push_back(op.pos);
        op.key = ir::cast(DType::i64, use(aux_.at(o.get()).indices, std::move(idx)));
        b.merged.push_back(std::move(op));
      }
      scope_.push_back(std::move(b));
      return;
    }
    ir::Expr coord = pos;
    std::vector<ir::Expr> prefix = ancestor_positions(a);
    if (a->is_sparse()) {
      std::vector<ir::Expr> idx = prefix;
      idx.push_back(pos);
      // An iterator's value is its coordinate as an int64_t (docs/language.md §3), whatever
      // the index type: `j * j` or a store of `j` into an int64 local must not be int32.
      coord = ir::cast(DType::i64, use(aux_.at(a.get()).indices, std::move(idx)));
    }
    scope_.push_back({iter.node(), a, pos, coord, std::move(prefix), {}});
  }

  static ir::Expr conj(const ir::Expr& a, const ir::Expr& b) { return a.defined() ? (a && b) : b; }

  Access translate(const ir::Buffer& buf, const std::vector<ir::Expr>& idx) {
    SPINDLE_INTERNAL_CHECK(idx.size() == buf->axes.size(), "lower_sparse_iter", "buffer ", buf->name,
                           " has ", buf->axes.size(), " axes but is indexed with ", idx.size());
    Access acc;
    for (auto& a : buf->axes)  // flattening (stage III) reads the indptr of variable axes
      if (a->is_variable()) used_.insert(aux_.at(a.get()).indptr.get());
    for (std::size_t s = 0; s < idx.size(); ++s) {
      const ir::Axis& a = buf->axes[s];
      const ir::VarNode* v = idx[s].as<ir::VarNode>();
      const Bound* it = v ? find_iter(v) : nullptr;
      if (it && it->axis == a && prefix_matches(acc.pos, s, it->prefix)) {
        acc.pos.push_back(it->pos);
        continue;
      }
      // A co-iteration's iterator in a slot of one of its operands, under the fiber the merge
      // walks: the operand's position, present or not (docs/language.md §3.1).
      if (const Bound::Operand* o = it ? merged_operand(*it, a, acc.pos, s) : nullptr) {
        if (it->axis->merge == ir::MergeOp::union_) acc.guard = conj(acc.guard, o->present);
        acc.pos.push_back(o->pos);
        continue;
      }
      if (it && ir::coordinate_space(it->axis) != ir::coordinate_space(a))
        throw UserError(message("kernel '", ctx_.kernel, "': buffer '", buf->name, "' axis ", a->name,
                                " (index ", s, ") is indexed by the iterator '", v->name, "' of axis ",
                                it->axis->name, ", which ranges over a different coordinate space; hint: "
                                "index it with an iterator of ", a->name, " or of dense<", a->name, ">"));
      ir::Expr c = mutate(idx[s]);  // coordinates of iterators, translated nested loads
      std::size_t chain = ir::axis_chain(a).size() - 1;
      std::vector<ir::Expr> prefix(acc.pos.end() - static_cast<long>(chain), acc.pos.end());
      if (a->is_dense()) {
        // An iterator of the same coordinate space is in range of a dense_fixed axis; a
        // dense_variable fiber may be shorter than the one the iterator ran over.
        if (!it || a->is_variable())
          acc.guard = conj(acc.guard, ir::int_imm(0) <= c && c < extent_under(a, prefix));
        acc.pos.push_back(c);
      } else {
        // The search reads the fiber of the prefix positions: only when they are in range
        // (the guard so far), else the coordinate is absent.
        ir::Var p = find_let(a, std::move(prefix), c, acc.guard);
        acc.guard = conj(acc.guard, ir::Expr(p) >= ir::int_imm(0));
        acc.pos.push_back(p);
      }
    }
    return acc;
  }

  static const Bound::Operand* merged_operand(const Bound& it, const ir::Axis& a, const std::vector<ir::Expr>& pos,
                                              std::size_t slot) {
    for (auto& o : it.merged)
      if (o.axis == a && prefix_matches(pos, slot, o.prefix)) return &o;
    return nullptr;
  }

  // Do the buffer's positions for the ancestors of the slot's axis equal the positions the
  // iterator's loop runs under (`anc`, its Bound::prefix)?
  static bool prefix_matches(const std::vector<ir::Expr>& pos, std::size_t slot, const std::vector<ir::Expr>& anc) {
    if (anc.size() > slot) return false;
    for (std::size_t q = 0; q < anc.size(); ++q)
      if (!pos[slot - anc.size() + q].same_as(anc[q])) return false;
    return true;
  }

  ir::Var find_let(const ir::Axis& a, std::vector<ir::Expr> prefix, const ir::Expr& c, const ir::Expr& guard) {
    auto& indices = aux_.at(a.get()).indices;
    used_.insert(indices.get());
    if (a->is_variable()) used_.insert(aux_.at(a.get()).indptr.get());
    ir::Expr fp = ir::find_pos(indices, std::move(prefix), c);
    if (guard.defined()) fp = ir::select(guard, fp, ir::int_imm(-1));
    // One search per distinct (structurally equal, same variables) coordinate: two searches
    // print alike when they use different variables of one name (J_pos of coordinate 0 and
    // J_pos of coordinate 1), so compare the IR, not its text.
    for (std::size_t q = 0; q < pending_.size(); ++q)
      if (ir::equal(pending_values_[q], fp)) return pending_[q].second;
    ir::Var var(a->name + "_pos", DType::i64);
    pending_.push_back({std::string(), var});
    pending_values_.push_back(fp);
    return var;
  }

  template <class F>
  ir::Stmt with_lets(F&& make) {
    auto saved = std::move(pending_);
    auto saved_values = std::move(pending_values_);
    pending_.clear();
    pending_values_.clear();
    ir::Stmt s = make();
    for (std::size_t q = pending_.size(); q-- > 0;) s = ir::let_stmt(pending_[q].second, pending_values_[q], s, s.loc());
    pending_ = std::move(saved);
    pending_values_ = std::move(saved_values);
    return s;
  }

  const LowerContext& ctx_;
  std::vector<Bound> scope_;
  std::map<const ir::AxisNode*, Aux> aux_;
  std::set<const ir::BufferNode*> used_;
  std::vector<std::pair<std::string, ir::Var>> pending_;
  std::vector<ir::Expr> pending_values_;
};

}  // namespace detail

inline ir::Function lower_sparse_iter(const ir::Function& f, const LowerContext& ctx) {
  return detail::SparseIterLowering(ctx).run(f);
}

}  // namespace spindle::lower
