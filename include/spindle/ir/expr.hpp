// Expression nodes of the runtime IR. Nodes are immutable and shared (shared_ptr to
// const); passes rebuild what they change. Variables are compared by identity.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spindle/ir/dtype.hpp"
#include "spindle/ir/node_kinds.hpp"

namespace spindle::ir {

struct ExprNode {
  const ExprKind kind;
  const DType dtype;
  virtual ~ExprNode() = default;

 protected:
  ExprNode(ExprKind k, DType t) : kind(k), dtype(t) {}
};

// A nullable handle to an expression node.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  bool defined() const { return node_ != nullptr; }
  ExprKind kind() const { return node_->kind; }
  DType dtype() const { return node_->dtype; }
  const ExprNode* get() const { return node_.get(); }
  template <class T>
  const T* as() const {
    return node_ && node_->kind == T::static_kind ? static_cast<const T*>(node_.get()) : nullptr;
  }
  bool same_as(const Expr& o) const { return node_ == o.node_; }

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct BufferNode;
using Buffer = std::shared_ptr<const BufferNode>;

struct IntImmNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::IntImm;
  std::int64_t value;
  IntImmNode(std::int64_t v, DType t) : ExprNode(static_kind, t), value(v) {}
};

struct FloatImmNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::FloatImm;
  double value;
  FloatImmNode(double v, DType t) : ExprNode(static_kind, t), value(v) {}
};

// A named scalar: a symbolic shape parameter, a loop variable, a let-bound value or an
// iterator of a sparse iteration (stage I, in coordinate space).
struct VarNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Var;
  std::string name;
  VarNode(std::string n, DType t) : ExprNode(static_kind, t), name(std::move(n)) {}
};

// A handle that is known to point at a VarNode.
class Var : public Expr {
 public:
  Var() = default;
  Var(std::string name, DType t) : Expr(std::make_shared<VarNode>(std::move(name), t)) {}
  static Var from(const Expr& e) { return e.as<VarNode>() ? Var(e) : Var(); }
  const VarNode* node() const { return as<VarNode>(); }
  const std::string& name() const { return node()->name; }

 private:
  explicit Var(const Expr& e) : Expr(e) {}
};

enum class BinOp : std::uint8_t { add, sub, mul, div, mod, min, max, eq, ne, lt, le, gt, ge, land, lor };
enum class UnOp : std::uint8_t { neg, lnot };
// exp/log/sqrt/abs/tanh take one argument, pow two. warp_sum(x, width) (GPU only) is the
// sum of x over the `width` consecutive lanes of a warp holding it (a butterfly of warp
// shuffles); every lane of the group gets the sum. width is a constant power of two <= 32.
enum class Intrinsic : std::uint8_t { exp, log, sqrt, abs, tanh, pow, warp_sum };

inline bool is_comparison(BinOp op) {
  return op == BinOp::eq || op == BinOp::ne || op == BinOp::lt || op == BinOp::le ||
         op == BinOp::gt || op == BinOp::ge || op == BinOp::land || op == BinOp::lor;
}

struct BinaryNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Binary;
  BinOp op;
  Expr a, b;
  BinaryNode(BinOp o, Expr x, Expr y, DType t)
      : ExprNode(static_kind, t), op(o), a(std::move(x)), b(std::move(y)) {}
};

struct UnaryNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Unary;
  UnOp op;
  Expr a;
  UnaryNode(UnOp o, Expr x, DType t) : ExprNode(static_kind, t), op(o), a(std::move(x)) {}
};

struct SelectNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Select;
  Expr cond, t, f;
  SelectNode(Expr c, Expr x, Expr y)
      : ExprNode(static_kind, x.dtype()), cond(std::move(c)), t(std::move(x)), f(std::move(y)) {}
};

struct CastNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Cast;
  Expr value;
  CastNode(DType t, Expr v) : ExprNode(static_kind, t), value(std::move(v)) {}
};

struct CallNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Call;
  Intrinsic fn;
  std::vector<Expr> args;
  CallNode(Intrinsic f, std::vector<Expr> a, DType t)
      : ExprNode(static_kind, t), fn(f), args(std::move(a)) {}
};

// Reads one element. Stage I: indices are coordinates, one per buffer axis. Stage II:
// positions, one per buffer axis. Stage III: indices into the flat buffer's shape.
struct LoadNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::Load;
  Buffer buffer;
  std::vector<Expr> indices;
  LoadNode(Buffer b, std::vector<Expr> i, DType t)
      : ExprNode(static_kind, t), buffer(std::move(b)), indices(std::move(i)) {}
};

// What a search looks for (FindPosNode::mode).
//  exact:   the position of coordinate `value` in a sorted fiber of indices, or -1.
//  segment: the last position r of a non-decreasing array (an indptr) with X[r] <= value,
//           i.e. the parent position whose fiber holds child position `value` (a fused
//           loop over a chain of axes recovers its outer positions this way:
//           schedule/sparse_fuse.hpp); begin - 1 when X[begin] > value.
enum class FindMode : std::uint8_t { exact, segment };

// Position of coordinate `value` inside one fiber of a sparse axis, relative to the start
// of the fiber, or -1 when the coordinate is absent (coordinate translation, seed 002
// §3.3.1 eq. 4). Stage II: `indices` is the materialised indices buffer of the axis and
// `prefix` holds the positions of the axis's ancestors; `begin`/`end` are undefined.
// Stage III: the flat indices buffer and the absolute range [begin, end) of the fiber.
// A segment search (FindMode::segment) is always in the flat form, also in stage II (its
// range is one of absolute positions), and its result is relative to `begin` as well.
struct FindPosNode : ExprNode {
  static constexpr ExprKind static_kind = ExprKind::FindPos;
  Buffer indices;
  std::vector<Expr> prefix;
  Expr begin, end;
  Expr value;
  FindMode mode = FindMode::exact;
  FindPosNode(Buffer b, std::vector<Expr> p, Expr lo, Expr hi, Expr v, FindMode m = FindMode::exact)
      : ExprNode(static_kind, DType::i64), indices(std::move(b)), prefix(std::move(p)),
        begin(std::move(lo)), end(std::move(hi)), value(std::move(v)), mode(m) {}
};

}  // namespace spindle::ir
