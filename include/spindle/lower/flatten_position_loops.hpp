// flatten_position_loops: a loop over a compressed level's fibers whose body reads only the
// positions becomes one loop over those positions.
//
//   for i in [a, a + n):                          let lo = P[a], hi = P[a + n]
//     for j in [0, P[i + 1] - P[i]):      ->      for q in [lo, hi):
//       body(P[i] + j)                              body(q)
//
// where P is the indptr of a compressed axis (ParamOrigin::indptr, validated non-decreasing by
// the containers), both loops are serial, the outer loop's body is the inner loop alone, and
// the body mentions i and j only as P[i] + j. The positions are visited in the same order, so
// the result is the same bit for bit; what goes is the inner loop's start and mispredicted exit
// once per fiber — on a graph's rows of a few entries most of the loop's time (the symbolic
// phase of a transpose counts each position's row: 1.6-2.0 -> 0.6-0.8 ms on ogbn-arxiv's
// 169k rows, one thread).
// Run on the phases of a kernel whose rows are scattered, after assemble_scattered (the blocks
// stay blocks of rows, as the numeric phase's, whose counts must agree): the symbolic phase of
// c(j, i) = a(i, j) counts rows without reading i, the numeric phase stores i and keeps its nest.
// Pre: stage III. Post: stage III; no loop or let variable removed from scope that remains used.
#pragma once

#include <set>
#include <string>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/lower/fiber_loop.hpp"

namespace spindle::lower {

namespace detail {

class FlattenPositionLoops : public ir::IRMutator {
 public:
  explicit FlattenPositionLoops(const ir::Function& f) {
    for (const ir::FuncBuffer& b : f.buffers)
      if (b.origin.kind == ir::ParamOrigin::indptr) indptr_.insert(b.buffer.get());
  }

 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt out = IRMutator::mutate_For(n, self);
    auto* outer = out.as<ir::ForNode>();
    auto* inner = outer ? outer->body.as<ir::ForNode>() : nullptr;
    if (!inner || outer->for_kind != ir::ForKind::serial || inner->for_kind != ir::ForKind::serial) return out;
    // The inner loop runs over the fiber [P[i], P[i + 1]) of an indptr P.
    const ir::Expr base = fiber_loop_start(*inner, [&](const ir::BufferNode* b) { return indptr_.count(b) > 0; });
    auto* start = base.defined() ? base.as<ir::LoadNode>() : nullptr;
    if (!start || !start->indices[0].same_as(outer->var)) return out;
    const ir::Var q("spindle_pos", DType::i64);
    Positions sub(base, inner->var, q);
    const ir::Stmt body = sub.mutate(inner->body);
    if (ir::uses_var(body, outer->var.get()) || ir::uses_var(body, inner->var.get())) return out;
    const ir::Buffer ptr = start->buffer;
    const ir::Var lo("spindle_pos_lo", DType::i64), hi("spindle_pos_hi", DType::i64);
    const ir::IterKind kind = outer->iter_kind == ir::IterKind::reduction || inner->iter_kind == ir::IterKind::reduction
                                  ? ir::IterKind::reduction
                                  : ir::IterKind::spatial;
    ir::Stmt loop = ir::for_loop(q, lo, ir::Expr(hi) - ir::Expr(lo), ir::ForKind::serial, kind, inner->axis, body,
                                 inner->loc);
    loop = ir::let_stmt(hi, ir::cast(DType::i64, ir::load(ptr, {outer->min + outer->extent})), loop, outer->loc);
    return ir::let_stmt(lo, ir::cast(DType::i64, ir::load(ptr, {outer->min})), loop, outer->loc);
  }

 private:
  // Replaces base + j (base = P[i]) by the position q, in q's type where the sum had another.
  struct Positions : ir::IRMutator {
    Positions(ir::Expr b, ir::Var inner, ir::Var pos) : base(std::move(b)), j(std::move(inner)), q(std::move(pos)) {}
    ir::Expr mutate_Binary(const ir::BinaryNode* n, const ir::Expr& self) override {
      if (n->op == ir::BinOp::add && n->b.same_as(j) && ir::equal(n->a, base))
        return n->dtype == DType::i64 ? ir::Expr(q) : ir::cast(n->dtype, q);
      return IRMutator::mutate_Binary(n, self);
    }
    ir::Expr base;
    ir::Var j, q;
  };

  std::set<const ir::BufferNode*> indptr_;
};

}  // namespace detail

inline ir::Function flatten_position_loops(const ir::Function& f, const LowerContext&) {
  ir::Function out = f;
  out.body = detail::FlattenPositionLoops(f).mutate(f.body);
  return out;
}

}  // namespace spindle::lower
