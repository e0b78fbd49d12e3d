// Constructors for IR nodes with dtype checks, and operators on ir::Expr so that passes
// read like the formulas they implement.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spindle/ir/stmt.hpp"
#include "spindle/support/error.hpp"

namespace spindle::ir {

// An integer constant of type t; the value is wrapped to t (two's complement) so that an
// i32 constant always holds an int32 value.
inline Expr int_imm(std::int64_t v, DType t = DType::i64) {
  if (t == DType::i32) v = static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(v)));
  if (t == DType::boolean) v = v != 0;
  return Expr(std::make_shared<IntImmNode>(v, t));
}
inline Expr float_imm(double v, DType t = DType::f32) {
  return Expr(std::make_shared<FloatImmNode>(v, t));
}
inline Expr bool_imm(bool v) { return Expr(std::make_shared<IntImmNode>(v ? 1 : 0, DType::boolean)); }

// A constant of dtype t with value v (integer or float as t requires).
inline Expr make_const(DType t, double v) {
  if (is_float(t)) return float_imm(v, t);
  if (t == DType::boolean) return bool_imm(v != 0);
  return int_imm(static_cast<std::int64_t>(v), t);
}

inline DType wider_int(DType a, DType b) {
  return (a == DType::i64 || b == DType::i64) ? DType::i64 : DType::i32;
}

inline Expr binary(BinOp op, Expr a, Expr b) {
  SPINDLE_INTERNAL_CHECK(a.defined() && b.defined(), "ir::binary", "undefined operand");
  DType ta = a.dtype(), tb = b.dtype();
  DType t;
  if (ta == tb) {
    t = ta;
  } else if (is_int(ta) && is_int(tb)) {
    t = wider_int(ta, tb);
  } else if (ta == DType::boolean && tb == DType::boolean) {
    t = DType::boolean;
  } else {
    throw UserError(message("mixed element types in an expression: ", dtype_name(ta), " and ",
                            dtype_name(tb), "; hint: cast one side explicitly"));
  }
  if (is_comparison(op)) t = DType::boolean;
  return Expr(std::make_shared<BinaryNode>(op, std::move(a), std::move(b), t));
}

inline Expr unary(UnOp op, Expr a) {
  DType t = op == UnOp::lnot ? DType::boolean : a.dtype();
  return Expr(std::make_shared<UnaryNode>(op, std::move(a), t));
}

inline Expr select(Expr c, Expr t, Expr f) {
  SPINDLE_CHECK(t.dtype() == f.dtype(), UserError, "select branches have different types: ",
                dtype_name(t.dtype()), " and ", dtype_name(f.dtype()));
  return Expr(std::make_shared<SelectNode>(std::move(c), std::move(t), std::move(f)));
}

inline Expr cast(DType t, Expr v) {
  if (v.dtype() == t) return v;
  return Expr(std::make_shared<CastNode>(t, std::move(v)));
}

inline Expr call(Intrinsic fn, std::vector<Expr> args) {
  DType t = args.at(0).dtype();
  SPINDLE_CHECK(is_float(t), UserError, "math intrinsics take floating-point arguments, got ",
                dtype_name(t));
  return Expr(std::make_shared<CallNode>(fn, std::move(args), t));
}

inline Expr load(Buffer b, std::vector<Expr> indices) {
  DType t = b->dtype;
  return Expr(std::make_shared<LoadNode>(std::move(b), std::move(indices), t));
}

inline Expr find_pos(Buffer indices, std::vector<Expr> prefix, Expr value) {
  return Expr(std::make_shared<FindPosNode>(std::move(indices), std::move(prefix), Expr(), Expr(),
                                            std::move(value)));
}

inline Expr find_pos_flat(Buffer indices, Expr begin, Expr end, Expr value) {
  return Expr(std::make_shared<FindPosNode>(std::move(indices), std::vector<Expr>{}, std::move(begin),
                                            std::move(end), std::move(value)));
}

// The last position r in [begin, end) of the non-decreasing array `indptr` with
// indptr[r] <= value, relative to begin (FindMode::segment).
inline Expr find_segment(Buffer indptr, Expr begin, Expr end, Expr value) {
  return Expr(std::make_shared<FindPosNode>(std::move(indptr), std::vector<Expr>{}, std::move(begin),
                                            std::move(end), std::move(value), FindMode::segment));
}

inline Expr operator+(Expr a, Expr b) { return binary(BinOp::add, std::move(a), std::move(b)); }
inline Expr operator-(Expr a, Expr b) { return binary(BinOp::sub, std::move(a), std::move(b)); }
inline Expr operator*(Expr a, Expr b) { return binary(BinOp::mul, std::move(a), std::move(b)); }
inline Expr operator/(Expr a, Expr b) { return binary(BinOp::div, std::move(a), std::move(b)); }
inline Expr operator%(Expr a, Expr b) { return binary(BinOp::mod, std::move(a), std::move(b)); }
inline Expr operator<(Expr a, Expr b) { return binary(BinOp::lt, std::move(a), std::move(b)); }
inline Expr operator<=(Expr a, Expr b) { return binary(BinOp::le, std::move(a), std::move(b)); }
inline Expr operator>(Expr a, Expr b) { return binary(BinOp::gt, std::move(a), std::move(b)); }
inline Expr operator>=(Expr a, Expr b) { return binary(BinOp::ge, std::move(a), std::move(b)); }
inline Expr operator&&(Expr a, Expr b) { return binary(BinOp::land, std::move(a), std::move(b)); }
// The constant is built before `a` is moved: argument evaluation order is unspecified, so
// `std::move(a) + int_imm(b, a.dtype())` may read a moved-from handle (it did under Clang).
inline Expr operator+(Expr a, std::int64_t b) {
  Expr c = int_imm(b, a.dtype());
  return std::move(a) + std::move(c);
}
inline Expr operator-(Expr a, std::int64_t b) {
  Expr c = int_imm(b, a.dtype());
  return std::move(a) - std::move(c);
}
inline Expr operator*(Expr a, std::int64_t b) {
  Expr c = int_imm(b, a.dtype());
  return std::move(a) * std::move(c);
}
inline Expr min(Expr a, Expr b) { return binary(BinOp::min, std::move(a), std::move(b)); }
inline Expr max(Expr a, Expr b) { return binary(BinOp::max, std::move(a), std::move(b)); }

// --- statements ----------------------------------------------------------------------

inline Stmt store(Buffer b, std::vector<Expr> idx, Expr v, SourceLoc l = {}) {
  SPINDLE_CHECK(v.dtype() == b->dtype, UserError, "cannot store a ", dtype_name(v.dtype()),
                " value into buffer '", b->name, "' of ", dtype_name(b->dtype));
  return Stmt(std::make_shared<StoreNode>(std::move(b), std::move(idx), std::move(v), l));
}
inline Stmt reduce(Buffer b, std::vector<Expr> idx, ReduceOp op, Expr v, SourceLoc l = {}, bool atomic = false) {
  SPINDLE_CHECK(v.dtype() == b->dtype, UserError, "cannot accumulate a ", dtype_name(v.dtype()),
                " value into buffer '", b->name, "' of ", dtype_name(b->dtype));
  return Stmt(std::make_shared<ReduceNode>(std::move(b), std::move(idx), op, std::move(v), l, atomic));
}
inline Stmt barrier(BarrierScope scope = BarrierScope::block, SourceLoc l = {}) {
  return Stmt(std::make_shared<BarrierNode>(scope, l));
}
inline Stmt prefetch(Buffer b, std::vector<Expr> idx, SourceLoc l = {}) {
  return Stmt(std::make_shared<PrefetchNode>(std::move(b), std::move(idx), l));
}
// Sum of x over groups of `width` lanes of a GPU warp (see Intrinsic::warp_sum).
inline Expr warp_sum(Expr x, int width = 32) {
  SPINDLE_CHECK(width >= 1 && width <= 32 && (width & (width - 1)) == 0, UserError,
                "warp_sum: width must be a power of two in [1, 32], got ", width);
  DType t = x.dtype();
  SPINDLE_CHECK(is_float(t) || t == DType::i32, UserError, "warp_sum: unsupported dtype ", dtype_name(t));
  return Expr(std::make_shared<CallNode>(Intrinsic::warp_sum, std::vector<Expr>{std::move(x), make_const(DType::i32, width)}, t));
}
inline Stmt let_stmt(Var v, Expr e, Stmt body, SourceLoc l = {}) {
  return Stmt(std::make_shared<LetStmtNode>(std::move(v), std::move(e), std::move(body), l));
}
inline Stmt if_then_else(Expr c, Stmt t, Stmt e = Stmt(), SourceLoc l = {}) {
  return Stmt(std::make_shared<IfThenElseNode>(std::move(c), std::move(t), std::move(e), l));
}
inline Stmt for_loop(Var v, Expr lo, Expr ext, ForKind k, IterKind ik, std::string axis, Stmt body,
                     SourceLoc l = {}) {
  return Stmt(std::make_shared<ForNode>(std::move(v), std::move(lo), std::move(ext), k, ik,
                                        std::move(axis), std::move(body), l));
}
inline Stmt co_iterate(Var v, MergeOp op, std::vector<CoIterOperand> operands, IterKind ik, std::string axis,
                       Stmt body, SourceLoc l = {}) {
  return Stmt(std::make_shared<CoIterateNode>(std::move(v), op, std::move(operands), ik, std::move(axis),
                                              std::move(body), l));
}
// Flattens nested sequences and drops undefined statements; a single statement is
// returned as is, an empty sequence is undefined.
inline Stmt seq(std::vector<Stmt> stmts, SourceLoc l = {}) {
  std::vector<Stmt> flat;
  for (auto& s : stmts) {
    if (!s.defined()) continue;
    if (auto* q = s.as<SeqNode>())
      flat.insert(flat.end(), q->stmts.begin(), q->stmts.end());
    else
      flat.push_back(std::move(s));
  }
  if (flat.empty()) return Stmt();
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<SeqNode>(std::move(flat), l));
}
inline Stmt block(std::string name, std::vector<Buffer> allocs, Stmt body, SourceLoc l = {}) {
  return Stmt(std::make_shared<BlockNode>(std::move(name), std::move(allocs), std::move(body), l));
}

// Identity element of a reduction, as a constant of dtype t.
inline Expr reduce_identity(ReduceOp op, DType t) {
  switch (op) {
    case ReduceOp::add: return make_const(t, 0);
    case ReduceOp::mul: return make_const(t, 1);
    case ReduceOp::min:
      return is_float(t) ? make_const(t, __builtin_inf())
                         : int_imm(t == DType::i32 ? INT32_MAX : INT64_MAX, t);
    case ReduceOp::max:
      return is_float(t) ? make_const(t, -__builtin_inf())
                         : int_imm(t == DType::i32 ? INT32_MIN : INT64_MIN, t);
  }
  return Expr();
}

// Combines an old value with an update as the reduction op does.
inline Expr reduce_combine(ReduceOp op, Expr old, Expr v) {
  switch (op) {
    case ReduceOp::add: return std::move(old) + std::move(v);
    case ReduceOp::mul: return std::move(old) * std::move(v);
    case ReduceOp::min: return min(std::move(old), std::move(v));
    case ReduceOp::max: return max(std::move(old), std::move(v));
  }
  return Expr();
}

}  // namespace spindle::ir
