// simplify: local algebraic simplification, at any stage.
//   constant folding of integer and boolean arithmetic and comparisons, casts of constants;
//   identities x+0, x-0, x*1, 1*x, x/1, integer x*0, x-x, (x+c1)+c2, (x+c)-x;
//   select/if with a constant condition; loops with a constant zero extent vanish.
// Floating-point expressions are only folded where the result is exact (identities), so
// the generated code computes what the user wrote.
// Pre/post: any stage; semantics preserved.
#pragma once

#include <optional>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/context.hpp"

namespace spindle::lower {

namespace detail {

class Simplifier : public ir::IRMutator {
 protected:
  static const ir::IntImmNode* as_int(const ir::Expr& e) { return e.as<ir::IntImmNode>(); }
  static bool is_int_const(const ir::Expr& e, std::int64_t v) {
    auto* n = as_int(e);
    return n && n->dtype != DType::boolean && n->value == v;
  }
  static bool is_float_const(const ir::Expr& e, double v) {
    auto* n = e.as<ir::FloatImmNode>();
    return n && n->value == v;
  }

  static std::optional<std::int64_t> fold(ir::BinOp op, std::int64_t a, std::int64_t b) {
    switch (op) {
      case ir::BinOp::add: return a + b;
      case ir::BinOp::sub: return a - b;
      case ir::BinOp::mul: return a * b;
      case ir::BinOp::div: return b == 0 ? std::nullopt : std::optional<std::int64_t>(a / b);
      case ir::BinOp::mod: return b == 0 ? std::nullopt : std::optional<std::int64_t>(a % b);
      case ir::BinOp::min: return a < b ? a : b;
      case ir::BinOp::max: return a > b ? a : b;
      case ir::BinOp::eq: return a == b;
      case ir::BinOp::ne: return a != b;
      case ir::BinOp::lt: return a < b;
      case ir::BinOp::le: return a <= b;
      case ir::BinOp::gt: return a > b;
      case ir::BinOp::ge: return a >= b;
      case ir::BinOp::land: return a && b;
      case ir::BinOp::lor: return a || b;
    }
    return std::nullopt;
  }

  ir::Expr mutate_Binary(const ir::BinaryNode* n, const ir::Expr& self) override {
    ir::Expr e = ir::IRMutator::mutate_Binary(n, self);
    auto* b = e.as<ir::BinaryNode>();
    if (!b) return e;
    const ir::Expr &x = b->a, &y = b->b;
    DType t = e.dtype();
    auto *cx = as_int(x), *cy = as_int(y);
    if (cx && cy) {
      if (auto v = fold(b->op, cx->value, cy->value)) return ir::make_const(t, static_cast<double>(*v));
    }
    bool integer = is_int(t);
    switch (b->op) {
      case ir::BinOp::add:
        if (is_int_const(y, 0) || is_float_const(y, 0.0)) return x;
        if (is_int_const(x, 0) || is_float_const(x, 0.0)) return y;
        if (cy && x.kind() == ir::ExprKind::Binary) {  // (z + c1) + c2
          auto* xb = x.as<ir::BinaryNode>();
          if (auto* c1 = as_int(xb->b); c1 && (xb->op == ir::BinOp::add || xb->op == ir::BinOp::sub)) {
            std::int64_t c = xb->op == ir::BinOp::add ? c1->value + cy->value : cy->value - c1->value;
            return mutate(xb->a + ir::int_imm(c, t));
          }
        }
        if (cx && !cy) return mutate(y + x);  // constants to the right
        break;
      case ir::BinOp::sub:
        if (is_int_const(y, 0) || is_float_const(y, 0.0)) return x;
        if (integer && ir::equal(x, y)) return ir::int_imm(0, t);
        if (integer && cy) return mutate(x + ir::int_imm(-cy->value, t));
        if (integer && x.kind() == ir::ExprKind::Binary) {  // (y + c) - y
          auto* xb = x.as<ir::BinaryNode>();
          if (xb->op == ir::BinOp::add && ir::equal(xb->a, y)) return xb->b;
        }
        break;
      case ir::BinOp::mul:
        if (is_int_const(y, 1) || is_float_const(y, 1.0)) return x;
        if (is_int_const(x, 1) || is_float_const(x, 1.0)) return y;
        if (integer && (is_int_const(x, 0) || is_int_const(y, 0))) return ir::int_imm(0, t);
        if (cx && !cy) return mutate(y * x);
        break;
      case ir::BinOp::div:
        if (is_int_const(y, 1) || is_float_const(y, 1.0)) return x;
        break;
      case ir::BinOp::land:
        if (cx) return cx->value ? y : x;
        if (cy) return cy->value ? x : y;
        break;
      case ir::BinOp::lor:
        if (cx) return cx->value ? x : y;
        if (cy) return cy->value ? y : x;
        break;
      default:
        break;
    }
    return e;
  }

  ir::Expr mutate_Cast(const ir::CastNode* n, const ir::Expr& self) override {
    ir::Expr v = mutate(n->value);
    if (auto* c = as_int(v)) return ir::make_const(n->dtype, static_cast<double>(c->value));
    if (auto* f = v.as<ir::FloatImmNode>(); f && is_float(n->dtype)) return ir::make_const(n->dtype, f->value);
    return v.same_as(n->value) ? self : ir::cast(n->dtype, v);
  }

  ir::Expr mutate_Select(const ir::SelectNode* n, const ir::Expr& self) override {
    ir::Expr c = mutate(n->cond);
    if (auto* k = as_int(c)) return mutate(k->value ? n->t : n->f);
    ir::Expr t = mutate(n->t), f = mutate(n->f);
    if (c.same_as(n->cond) && t.same_as(n->t) && f.same_as(n->f)) return self;
    return ir::select(c, t, f);
  }

  ir::Stmt mutate_IfThenElse(const ir::IfThenElseNode* n, const ir::Stmt& self) override {
    ir::Expr c = mutate(n->cond);
    if (auto* k = as_int(c)) return mutate(k->value ? n->then_case : n->else_case);
    ir::Stmt s = ir::IRMutator::mutate_IfThenElse(n, self);
    auto* i = s.as<ir::IfThenElseNode>();
    if (i && !i->then_case.defined() && !i->else_case.defined()) return ir::Stmt();
    return s;
  }

  // Statements left with nothing to do (a loop of extent 0 inside them, removed) go too.
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt s = ir::IRMutator::mutate_For(n, self);
    if (auto* f = s.as<ir::ForNode>(); f && (is_int_const(f->extent, 0) || !f->body.defined())) return ir::Stmt();
    return s;
  }
  ir::Stmt mutate_LetStmt(const ir::LetStmtNode* n, const ir::Stmt& self) override {
    ir::Stmt s = ir::IRMutator::mutate_LetStmt(n, self);
    if (auto* l = s.as<ir::LetStmtNode>(); l && !l->body.defined()) return ir::Stmt();
    return s;
  }
  ir::Stmt mutate_Block(const ir::BlockNode* n, const ir::Stmt& self) override {
    ir::Stmt s = ir::IRMutator::mutate_Block(n, self);
    if (auto* b = s.as<ir::BlockNode>(); b && !b->body.defined()) return ir::Stmt();
    return s;
  }
};

}  // namespace detail

inline ir::Expr simplify(const ir::Expr& e) { return detail::Simplifier().mutate(e); }
inline ir::Stmt simplify(const ir::Stmt& s) { return detail::Simplifier().mutate(s); }

inline ir::Function simplify(const ir::Function& f, const LowerContext&) {
  ir::Function out = f;
  out.body = simplify(f.body);
  return out;
}

}  // namespace spindle::lower
