// fuse: a perfectly nested pair of loops becomes one loop over the product of their extents.
//
//   for o in [mo, mo + no):                 for o_i_f in [0, no * ni):
//     for i in [mi(o), mi(o) + ni):   ->      S(o := mo + o_i_f / ni, i := mi(o) + o_i_f % ni)
//       S(o, i)
//
// The inner extent must not depend on the outer loop (a ragged inner loop cannot be
// flattened this way), and the two loops must be both spatial or both reduction. The fused
// loop is named `<o>_<i>_f`, takes the outer loop's axis when both loops share it and
// "<outer axis>*<inner axis>" otherwise, and keeps the loop kind of whichever loop is not
// serial (binding both loops first is an error: fuse, then bind). Extents are assumed
// non-negative (as every loop the lowering produces).
// Pre/post: stage II or III; semantics preserved (iterations run in the same order).
#pragma once

#include "spindle/schedule/reorder.hpp"

namespace spindle::schedule {

inline ir::Stmt fuse(const ir::Stmt& body, const std::string& outer, const std::string& inner) {
  SPINDLE_CHECK(outer != inner, UserError, "fuse: the outer and inner loop are both '", outer,
                "'; hint: name two directly nested loops");
  auto band = detail::find_band(body, {outer, inner}, "fuse");
  const ir::ForNode* o = band[0];
  const ir::ForNode* i = band[1];
  SPINDLE_CHECK(o->var.name() == outer, UserError, "fuse: loop '", outer, "' is inside loop '", inner,
                "', not around it; hint: call fuse(body, \"", inner, "\", \"", outer, "\")");
  SPINDLE_CHECK(!ir::uses_var(i->extent, o->var.get()), UserError, "fuse: the extent of loop '", inner, "' (",
                ir::to_string(i->extent), ") depends on loop '", outer,
                "'; hint: only loops with a rectangular iteration space can be fused (a ragged row cannot be "
                "flattened by division)");
  SPINDLE_CHECK(o->iter_kind == i->iter_kind, UserError, "fuse: loop '", outer, "' is ",
                o->iter_kind == ir::IterKind::spatial ? "spatial" : "a reduction", " and loop '", inner, "' is ",
                i->iter_kind == ir::IterKind::spatial ? "spatial" : "a reduction",
                "; hint: a fused loop must be one or the other, so fuse only loops of the same kind");
  SPINDLE_CHECK(o->for_kind == ir::ForKind::serial || i->for_kind == ir::ForKind::serial, UserError,
                "fuse: loops '", outer, "' (", ir::for_kind_name(o->for_kind), ") and '", inner, "' (",
                ir::for_kind_name(i->for_kind), ") both have a loop kind; hint: fuse first, then bind the fused loop");
  std::string name = outer + "_" + inner + "_f";
  detail::check_fresh_name(body, name, "fuse");
  DType t = ir::wider_int(is_int(o->var.dtype()) ? o->var.dtype() : DType::i64,
                          is_int(i->var.dtype()) ? i->var.dtype() : DType::i64);
  ir::Var f(name, t);
  ir::Expr ov = lower::simplify(o->min + ir::Expr(f) / i->extent);
  ir::Expr imin = lower::simplify(ir::substitute(i->min, o->var, ov));
  ir::Expr iv = lower::simplify(imin + ir::Expr(f) % i->extent);
  ir::Substituter sub;
  sub.add(o->var, ov);
  sub.add(i->var, iv);
  ir::Stmt s = sub.mutate(i->body);
  ir::ForKind kind = o->for_kind != ir::ForKind::serial ? o->for_kind : i->for_kind;
  std::string axis = o->axis == i->axis ? o->axis : o->axis + "*" + i->axis;
  ir::Stmt fused = ir::for_loop(f, ir::int_imm(0, t), lower::simplify(o->extent * i->extent), kind, o->iter_kind,
                                axis, s, o->loc);
  return detail::replace_stmt(body, o, fused);
}

inline ir::Function fuse(const ir::Function& fn, const std::string& outer, const std::string& inner) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return fuse(b, outer, inner); });
}

}  // namespace spindle::schedule
