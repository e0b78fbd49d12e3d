// split: one loop becomes two nested loops, the inner one of a constant extent.
//
//   for v in [min, min + n): S(v)        for v_o in [0, ceil(n / f)):
//                                 ->       for v_i in [0, f):
//                                            if v_o * f + v_i < n:          (guard)
//                                              S(min + v_o * f + v_i)
//
// The body sees v = min + v_o * f + v_i (substituted, so later passes and the emitters see
// the index arithmetic directly, e.g. a contiguous access in v_i). The guard is left out
// when n is a constant multiple of f. Both loops keep the loop's axis and iter_kind.
// Loop kinds: the outer loop keeps the loop's kind (a parallel or GPU-bound loop stays so
// over the tiles) and the inner loop is serial, except that vectorized and unrolled loops
// move that kind to the inner loop (the constant-extent one). Extents are assumed
// non-negative (as every loop the lowering produces); a zero extent gives zero tiles.
// Pre/post: stage II or III; semantics preserved.
#pragma once

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

inline ir::Stmt split(const ir::Stmt& body, const std::string& loop, std::int64_t factor) {
  SPINDLE_CHECK(factor >= 1, UserError, "split: the factor for loop '", loop, "' must be at least 1, got ", factor,
                "; hint: the factor is the extent of the new inner loop");
  const ir::ForNode* f = detail::find_loop(body, loop, "split");
  detail::check_fresh_name(body, loop + "_o", "split");
  detail::check_fresh_name(body, loop + "_i", "split");
  DType t = is_int(f->var.dtype()) ? f->var.dtype() : DType::i64;
  ir::Var outer(loop + "_o", t), inner(loop + "_i", t);
  ir::Expr fac = ir::int_imm(factor, t);
  ir::Expr local = lower::simplify(ir::Expr(outer) * fac + inner);
  ir::Expr v = lower::simplify(f->min + local);
  ir::Stmt s = detail::substitute(f->body, f->var, v);
  auto n = detail::const_int(f->extent);
  bool exact = n && *n % factor == 0;
  if (!exact) s = ir::if_then_else(local < f->extent, s, ir::Stmt(), f->loc);
  bool inner_kind = f->for_kind == ir::ForKind::vectorized || f->for_kind == ir::ForKind::unrolled;
  ir::ForKind outer_k = inner_kind ? ir::ForKind::serial : f->for_kind;
  ir::ForKind inner_k = inner_kind ? f->for_kind : ir::ForKind::serial;
  ir::Stmt in = ir::for_loop(inner, ir::int_imm(0, t), fac, inner_k, f->iter_kind, f->axis, s, f->loc);
  ir::Stmt out = ir::for_loop(outer, ir::int_imm(0, t), detail::ceil_div(f->extent, factor), outer_k, f->iter_kind,
                              f->axis, in, f->loc);
  return detail::replace_stmt(body, f, out);
}

inline ir::Function split(const ir::Function& fn, const std::string& loop, std::int64_t factor) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return split(b, loop, factor); });
}

}  // namespace spindle::schedule
