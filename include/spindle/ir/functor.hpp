// Traversals over the IR, generated from the node lists in node_kinds.hpp:
//   IRVisitor   - read-only walk; override visit_<Node> for the nodes you care about
//   IRMutator   - rebuilds nodes whose children changed; override mutate_<Node>
//   StrictExprFunctor / StrictStmtFunctor - every node must be handled (backends)
#pragma once

#include <type_traits>

#include <memory>
#include <utility>
#include <vector>

#include "spindle/ir/ops.hpp"

namespace spindle::ir {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;

  virtual void visit(const Expr& e) {
    if (!e.defined()) return;
    switch (e.kind()) {
#define SPINDLE_X(name) \
  case ExprKind::name: visit_##name(static_cast<const name##Node*>(e.get())); break;
      SPINDLE_EXPR_NODES(SPINDLE_X)
#undef SPINDLE_X
    }
  }
  virtual void visit(const Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
#define SPINDLE_X(name) \
  case StmtKind::name: visit_##name(static_cast<const name##Node*>(s.get())); break;
      SPINDLE_STMT_NODES(SPINDLE_X)
#undef SPINDLE_X
    }
  }

 protected:
  virtual void visit_IntImm(const IntImmNode*) {}
  virtual void visit_FloatImm(const FloatImmNode*) {}
  virtual void visit_Var(const VarNode*) {}
  virtual void visit_Binary(const BinaryNode* n) { visit(n->a); visit(n->b); }
  virtual void visit_Unary(const UnaryNode* n) { visit(n->a); }
  virtual void visit_Select(const SelectNode* n) { visit(n->cond); visit(n->t); visit(n->f); }
  virtual void visit_Cast(const CastNode* n) { visit(n->value); }
  virtual void visit_Call(const CallNode* n) { for (auto& a : n->args) visit(a); }
  virtual void visit_Load(const LoadNode* n) { for (auto& i : n->indices) visit(i); }
  virtual void visit_FindPos(const FindPosNode* n) {
    for (auto& p : n->prefix) visit(p);
    visit(n->begin);
    visit(n->end);
    visit(n->value);
  }
  virtual void visit_Store(const StoreNode* n) {
    for (auto& i : n->indices) visit(i);
    visit(n->value);
  }
  virtual void visit_Reduce(const ReduceNode* n) {
    for (auto& i : n->indices) visit(i);
    visit(n->value);
  }
  virtual void visit_LetStmt(const LetStmtNode* n) { visit(n->value); visit(n->body); }
  virtual void visit_IfThenElse(const IfThenElseNode* n) {
    visit(n->cond);
    visit(n->then_case);
    visit(n->else_case);
  }
  virtual void visit_For(const ForNode* n) { visit(n->min); visit(n->extent); visit(n->body); }
  virtual void visit_CoIterate(const CoIterateNode* n) {
    for (auto& o : n->operands) {
      visit(o.extent);
      visit(o.key);
    }
    visit(n->body);
  }
  virtual void visit_Seq(const SeqNode* n) { for (auto& s : n->stmts) visit(s); }
  virtual void visit_Block(const BlockNode* n) { visit(n->body); }
  virtual void visit_Barrier(const BarrierNode*) {}
  virtual void visit_Prefetch(const PrefetchNode* n) {
    for (auto& i : n->indices) visit(i);
  }
  virtual void visit_SparseIteration(const SparseIterationNode* n) {
    visit(n->init);
    visit(n->body);
  }
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;

  virtual Expr mutate(const Expr& e) {
    if (!e.defined()) return e;
    switch (e.kind()) {
#define SPINDLE_X(name) \
  case ExprKind::name: return mutate_##name(static_cast<const name##Node*>(e.get()), e);
      SPINDLE_EXPR_NODES(SPINDLE_X)
#undef SPINDLE_X
    }
    return e;
  }
  virtual Stmt mutate(const Stmt& s) {
    if (!s.defined()) return s;
    switch (s.kind()) {
#define SPINDLE_X(name) \
  case StmtKind::name: return mutate_##name(static_cast<const name##Node*>(s.get()), s);
      SPINDLE_STMT_NODES(SPINDLE_X)
#undef SPINDLE_X
    }
    return s;
  }
  // Buffers referenced by loads, stores and allocations pass through here.
  virtual Buffer mutate_buffer(const Buffer& b) { return b; }

 protected:
  bool mutate_all(const std::vector<Expr>& in, std::vector<Expr>& out) {
    bool changed = false;
    out.reserve(in.size());
    for (auto& e : in) {
      out.push_back(mutate(e));
      changed |= !out.back().same_as(e);
    }
    return changed;
  }

  virtual Expr mutate_IntImm(const IntImmNode*, const Expr& self) { return self; }
  virtual Expr mutate_FloatImm(const FloatImmNode*, const Expr& self) { return self; }
  virtual Expr mutate_Var(const VarNode*, const Expr& self) { return self; }
  virtual Expr mutate_Binary(const BinaryNode* n, const Expr& self) {
    Expr a = mutate(n->a), b = mutate(n->b);
    if (a.same_as(n->a) && b.same_as(n->b)) return self;
    return binary(n->op, a, b);
  }
  virtual Expr mutate_Unary(const UnaryNode* n, const Expr& self) {
    Expr a = mutate(n->a);
    return a.same_as(n->a) ? self : unary(n->op, a);
  }
  virtual Expr mutate_Select(const SelectNode* n, const Expr& self) {
    Expr c = mutate(n->cond), t = mutate(n->t), f = mutate(n->f);
    if (c.same_as(n->cond) && t.same_as(n->t) && f.same_as(n->f)) return self;
    return select(c, t, f);
  }
  virtual Expr mutate_Cast(const CastNode* n, const Expr& self) {
    Expr v = mutate(n->value);
    return v.same_as(n->value) ? self : cast(n->dtype, v);
  }
  virtual Expr mutate_Call(const CallNode* n, const Expr& self) {
    std::vector<Expr> args;
    if (!mutate_all(n->args, args)) return self;
    return call(n->fn, std::move(args));
  }
  virtual Expr mutate_Load(const LoadNode* n, const Expr& self) {
    std::vector<Expr> idx;
    bool changed = mutate_all(n->indices, idx);
    Buffer b = mutate_buffer(n->buffer);
    if (!changed && b == n->buffer) return self;
    return load(b, std::move(idx));
  }
  virtual Expr mutate_FindPos(const FindPosNode* n, const Expr& self) {
    std::vector<Expr> prefix;
    bool changed = mutate_all(n->prefix, prefix);
    Expr lo = mutate(n->begin), hi = mutate(n->end), v = mutate(n->value);
    Buffer b = mutate_buffer(n->indices);
    if (!changed && lo.same_as(n->begin) && hi.same_as(n->end) && v.same_as(n->value) &&
        b == n->indices)
      return self;
    return Expr(std::make_shared<FindPosNode>(b, std::move(prefix), lo, hi, v, n->mode));
  }

  virtual Stmt mutate_Store(const StoreNode* n, const Stmt& self) {
    std::vector<Expr> idx;
    bool changed = mutate_all(n->indices, idx);
    Expr v = mutate(n->value);
    Buffer b = mutate_buffer(n->buffer);
    if (!changed && v.same_as(n->value) && b == n->buffer) return self;
    return store(b, std::move(idx), v, n->loc);
  }
  virtual Stmt mutate_Reduce(const ReduceNode* n, const Stmt& self) {
    std::vector<Expr> idx;
    bool changed = mutate_all(n->indices, idx);
    Expr v = mutate(n->value);
    Buffer b = mutate_buffer(n->buffer);
    if (!changed && v.same_as(n->value) && b == n->buffer) return self;
    return reduce(b, std::move(idx), n->op, v, n->loc, n->atomic);
  }
  virtual Stmt mutate_LetStmt(const LetStmtNode* n, const Stmt& self) {
    Expr v = mutate(n->value);
    Stmt b = mutate(n->body);
    if (v.same_as(n->value) && b.same_as(n->body)) return self;
    return let_stmt(n->var, v, b, n->loc);
  }
  virtual Stmt mutate_IfThenElse(const IfThenElseNode* n, const Stmt& self) {
    Expr c = mutate(n->cond);
    Stmt t = mutate(n->then_case), e = mutate(n->else_case);
    if (c.same_as(n->cond) && t.same_as(n->then_case) && e.same_as(n->else_case)) return self;
    return if_then_else(c, t, e, n->loc);
  }
  virtual Stmt mutate_For(const ForNode* n, const Stmt& self) {
    Expr lo = mutate(n->min), ext = mutate(n->extent);
    Stmt b = mutate(n->body);
    if (lo.same_as(n->min) && ext.same_as(n->extent) && b.same_as(n->body)) return self;
    return for_loop(n->var, lo, ext, n->for_kind, n->iter_kind, n->axis, b, n->loc);
  }
  virtual Stmt mutate_CoIterate(const CoIterateNode* n, const Stmt& self) {
    std::vector<CoIterOperand> ops = n->operands;
    bool changed = false;
    for (auto& o : ops) {
      Expr e = mutate(o.extent), k = mutate(o.key);
      changed |= !e.same_as(o.extent) || !k.same_as(o.key);
      o.extent = e;
      o.key = k;
    }
    Stmt b = mutate(n->body);
    if (!changed && b.same_as(n->body)) return self;
    return co_iterate(n->var, n->op, std::move(ops), n->iter_kind, n->axis, b, n->loc);
  }
  virtual Stmt mutate_Seq(const SeqNode* n, const Stmt& self) {
    std::vector<Stmt> out;
    bool changed = false;
    for (auto& s : n->stmts) {
      out.push_back(mutate(s));
      changed |= !out.back().same_as(s);
    }
    return changed ? seq(std::move(out), n->loc) : self;
  }
  virtual Stmt mutate_Block(const BlockNode* n, const Stmt& self) {
    std::vector<Buffer> allocs;
    bool changed = false;
    for (auto& a : n->allocs) {
      allocs.push_back(mutate_buffer(a));
      changed |= allocs.back() != a;
    }
    Stmt b = mutate(n->body);
    if (!changed && b.same_as(n->body)) return self;
    return block(n->name, std::move(allocs), b, n->loc);
  }
  virtual Stmt mutate_Barrier(const BarrierNode*, const Stmt& self) { return self; }
  virtual Stmt mutate_Prefetch(const PrefetchNode* n, const Stmt& self) {
    std::vector<Expr> idx;
    bool changed = false;
    for (auto& i : n->indices) {
      idx.push_back(mutate(i));
      changed |= !idx.back().same_as(i);
    }
    Buffer b = mutate_buffer(n->buffer);
    if (!changed && b == n->buffer) return self;
    return prefetch(b, std::move(idx), n->loc);
  }
  virtual Stmt mutate_SparseIteration(const SparseIterationNode* n, const Stmt& self) {
    Stmt i = mutate(n->init), b = mutate(n->body);
    if (i.same_as(n->init) && b.same_as(n->body)) return self;
    return n->with_body(i, b);
  }
};

// Backends derive from these: a node kind without an override is a compile error.
template <class R>
class StrictExprFunctor {
 public:
  virtual ~StrictExprFunctor() = default;
  R dispatch(const Expr& e) {
    switch (e.kind()) {
#define SPINDLE_X(name) \
  case ExprKind::name: return on_##name(static_cast<const name##Node*>(e.get()));
      SPINDLE_EXPR_NODES(SPINDLE_X)
#undef SPINDLE_X
    }
    throw InternalError("unknown expression kind");
  }

 protected:
#define SPINDLE_X(name) virtual R on_##name(const name##Node* n) = 0;
  SPINDLE_EXPR_NODES(SPINDLE_X)
#undef SPINDLE_X
};

template <class R>
class StrictStmtFunctor {
 public:
  virtual ~StrictStmtFunctor() = default;
  R dispatch(const Stmt& s) {
    if (!s.defined()) {  // an empty body (everything simplified away) prints nothing
      if constexpr (std::is_void_v<R>) return;
      else return R();
    }
    switch (s.kind()) {
#define SPINDLE_X(name) \
  case StmtKind::name: return on_##name(static_cast<const name##Node*>(s.get()));
      SPINDLE_STMT_NODES(SPINDLE_X)
#undef SPINDLE_X
    }
    throw InternalError("unknown statement kind");
  }

 protected:
#define SPINDLE_X(name) virtual R on_##name(const name##Node* n) = 0;
  SPINDLE_STMT_NODES(SPINDLE_X)
#undef SPINDLE_X
};

// Replaces variables by expressions (by identity).
class Substituter : public IRMutator {
 public:
  void add(const Var& v, Expr e) { map_.push_back({v.get(), std::move(e)}); }
  bool empty() const { return map_.empty(); }

 protected:
  Expr mutate_Var(const VarNode* n, const Expr& self) override {
    for (auto& [k, v] : map_)
      if (k == n) return v;
    return self;
  }

 private:
  std::vector<std::pair<const ExprNode*, Expr>> map_;
};

inline Expr substitute(const Expr& e, const Var& v, const Expr& by) {
  Substituter s;
  s.add(v, by);
  return s.mutate(e);
}

// The variables a co-iteration binds for its body: the coordinate, each operand's position
// and presence flag.
inline std::vector<const ExprNode*> co_iterate_vars(const CoIterateNode& n) {
  std::vector<const ExprNode*> vars{n.var.get()};
  for (auto& o : n.operands) {
    vars.push_back(o.pos.get());
    vars.push_back(o.present.get());
  }
  return vars;
}

// Does the expression or statement `node` mention variable v?
template <class Node>
bool uses_var(const Node& node, const ExprNode* v) {
  struct Finder : IRVisitor {
    const ExprNode* v = nullptr;
    bool found = false;
    void visit_Var(const VarNode* n) override { found |= (n == v); }
  } f;
  f.v = v;
  f.visit(node);
  return f.found;
}

}  // namespace spindle::ir
