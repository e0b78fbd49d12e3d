// Structural equality of expressions (variables and buffers by identity).
#pragma once

#include "spindle/ir/expr.hpp"

namespace spindle::ir {

inline bool equal(const Expr& x, const Expr& y);

inline bool equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!equal(a[i], b[i])) return false;
  return true;
}

inline bool equal(const Expr& x, const Expr& y) {
  if (x.same_as(y)) return true;
  if (!x.defined() || !y.defined()) return false;
  if (x.kind() != y.kind() || x.dtype() != y.dtype()) return false;
  switch (x.kind()) {
    case ExprKind::IntImm: return x.as<IntImmNode>()->value == y.as<IntImmNode>()->value;
    case ExprKind::FloatImm: return x.as<FloatImmNode>()->value == y.as<FloatImmNode>()->value;
    case ExprKind::Var: return false;  // identity only, handled by same_as
    case ExprKind::Binary: {
      auto *a = x.as<BinaryNode>(), *b = y.as<BinaryNode>();
      return a->op == b->op && equal(a->a, b->a) && equal(a->b, b->b);
    }
    case ExprKind::Unary: {
      auto *a = x.as<UnaryNode>(), *b = y.as<UnaryNode>();
      return a->op == b->op && equal(a->a, b->a);
    }
    case ExprKind::Select: {
      auto *a = x.as<SelectNode>(), *b = y.as<SelectNode>();
      return equal(a->cond, b->cond) && equal(a->t, b->t) && equal(a->f, b->f);
    }
    case ExprKind::Cast: return equal(x.as<CastNode>()->value, y.as<CastNode>()->value);
    case ExprKind::Call: {
      auto *a = x.as<CallNode>(), *b = y.as<CallNode>();
      return a->fn == b->fn && equal(a->args, b->args);
    }
    case ExprKind::Load: {
      auto *a = x.as<LoadNode>(), *b = y.as<LoadNode>();
      return a->buffer == b->buffer && equal(a->indices, b->indices);
    }
    case ExprKind::FindPos: {
      auto *a = x.as<FindPosNode>(), *b = y.as<FindPosNode>();
      return a->indices == b->indices && a->mode == b->mode && equal(a->prefix, b->prefix) && equal(a->begin, b->begin) &&
             equal(a->end, b->end) && equal(a->value, b->value);
    }
  }
  return false;
}

}  // namespace spindle::ir
