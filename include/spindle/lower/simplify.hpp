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

  // Integer arithmetic of the kernel language wraps (docs/language.md §2): fold in 64-bit
  // two's complement; int_imm then wraps an i32 result to 32 bits. Division by zero and the
  // one overflowing division (INT64_MIN / -1) are left to run time.
  static std::int64_t wrapping(std::uint64_t v) { return static_cast<std::int64_t>(v); }
  static std::optional<std::int64_t> fold(ir::BinOp op, std::int64_t a, std::int64_t b) {
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    switch (op) {
      case ir::BinOp::add: return wrapping(ua + ub);
      case ir::BinOp::sub: return wrapping(ua - ub);
      case ir::BinOp::mul: return wrapping(ua * ub);
      case ir::BinOp::div:
      case ir::BinOp::mod:
        if (b == 0 || (b == -1 && a == INT64_MIN)) return std::nullopt;
        return op == ir::BinOp::div ? a / b : a % b;
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
      // An i32 division that overflows (INT32_MIN / -1) traps at run time in C: keep it.
      const bool i32_overflow = t == DType::i32 && (b->op == ir::BinOp::div || b->op == ir::BinOp::mod) &&
                                cx->value == INT32_MIN && cy->value == -1;
      if (auto v = fold(b->op, cx->value, cy->value); v && !i32_overflow) return ir::int_imm(*v, t);
    }
    bool integer = is_int(t);
    switch (b->op) {
      case ir::BinOp::add:
        if (is_int_const(y, 0) || is_float_const(y, 0.0)) return x;
        if (is_int_const(x, 0) || is_float_const(x, 0.0)) return y;
        if (cy && x.kind() == ir::ExprKind::Binary) {  // (z + c1) + c2
          auto* xb = x.as<ir::BinaryNode>();
          if (auto* c1 = as_int(xb->b); c1 && (xb->op == ir::BinOp::add || xb->op == ir::BinOp::sub)) {
            const auto u1 = static_cast<std::uint64_t>(c1->value), u2 = static_cast<std::uint64_t>(cy->value);
            std::int64_t c = wrapping(xb->op == ir::BinOp::add ? u1 + u2 : u2 - u1);
            return mutate(xb->a + ir::int_imm(c, t));
          }
        }
        if (cx && !cy) return mutate(y + x);  // constants to the right
        break;
      case ir::BinOp::sub:
        if (is_int_const(y, 0) || is_float_const(y, 0.0)) return x;
        if (integer && ir::equal(x, y)) return ir::int_imm(0, t);
        if (integer && cy) return mutate(x + ir::int_imm(wrapping(0 - static_cast<std::uint64_t>(cy->value)), t));
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
    if (auto* c = as_int(v)) {  // as C converts: integers wrap, floats round once
      if (is_int(n->dtype) || n->dtype == DType::boolean) return ir::int_imm(c->value, n->dtype);
      if (n->dtype == DType::f32) return ir::float_imm(static_cast<float>(c->value), n->dtype);
      return ir::float_imm(static_cast<double>(c->value), n->dtype);
    }
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
