// accumulate_locally (cache_write to a register): a reduction whose target element does
// not change across a loop accumulates into a local scalar instead of memory:
//   C[x] = 0                         acc = 0
//   for v: C[x] += f(v)       ->     for v: acc += f(v)
//                                    C[x] = acc
// It applies at the outermost loop over which C[x] is invariant, when the loop touches C
// nowhere else. Without a preceding init store (inout buffers accumulate) the local starts
// from the reduction's identity and C[x] op= acc follows the loop. The local lets the C
// compiler keep the sum in a register and vectorise the reduction.
// Pre/post: stage III (flat buffers); semantics preserved up to floating-point
// reassociation done later by the vectoriser.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"

namespace spindle::schedule {

namespace detail {

class LocalAccumulation : public ir::IRMutator {
 protected:
  ir::Stmt mutate_Seq(const ir::SeqNode* n, const ir::Stmt&) override {
    std::vector<ir::Stmt> out;
    for (std::size_t k = 0; k < n->stmts.size(); ++k) {
      const ir::Stmt& s = n->stmts[k];
      auto* loop = s.as<ir::ForNode>();
      auto* init = !out.empty() ? out.back().as<ir::StoreNode>() : nullptr;
      if (loop) {
        if (auto c = candidate(loop)) {
          if (init && init->buffer == c->buffer && ir::equal(init->indices, c->indices) &&
              !ir::uses_var(init->value, loop->var.get())) {
            ir::Expr start = init->value;
            out.pop_back();
            out.push_back(mutate(rewrite(loop, *c, start)));
            continue;
          }
        }
      }
      out.push_back(mutate(s));
    }
    return ir::seq(std::move(out), n->loc);
  }

  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    if (auto c = candidate(n)) return mutate(rewrite(n, *c, ir::Expr()));
    return ir::IRMutator::mutate_For(n, self);
  }

 private:
  struct Target {
    ir::Buffer buffer;
    std::vector<ir::Expr> indices;
    ir::ReduceOp op;
  };

  // Collects the accesses of a loop body: reductions and every other use of a buffer.
  struct Accesses : ir::IRVisitor {
    std::vector<const ir::ReduceNode*> reduces;
    std::vector<const ir::BufferNode*> others;
    std::set<const ir::ExprNode*> inner_vars;  // bound inside the loop
    void visit_Reduce(const ir::ReduceNode* n) override {
      reduces.push_back(n);
      for (auto& i : n->indices) visit(i);
      visit(n->value);
    }
    void visit_Store(const ir::StoreNode* n) override {
      others.push_back(n->buffer.get());
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Load(const ir::LoadNode* n) override {
      others.push_back(n->buffer.get());
      ir::IRVisitor::visit_Load(n);
    }
    void visit_For(const ir::ForNode* n) override {
      inner_vars.insert(n->var.get());
      ir::IRVisitor::visit_For(n);
    }
    void visit_LetStmt(const ir::LetStmtNode* n) override {
      inner_vars.insert(n->var.get());
      ir::IRVisitor::visit_LetStmt(n);
    }
    void visit_CoIterate(const ir::CoIterateNode* n) override {
      for (auto* v : ir::co_iterate_vars(*n)) inner_vars.insert(v);
      ir::IRVisitor::visit_CoIterate(n);
    }
  };

  static std::optional<Target> candidate(const ir::ForNode* loop) {
    if (loop->for_kind == ir::ForKind::parallel) return std::nullopt;
    Accesses acc;
    acc.visit(loop->body);
    for (auto* r : acc.reduces) {
      if (r->buffer->scope != ir::BufferScope::global) continue;
      bool ok = true;
      for (auto& i : r->indices) {
        if (ir::uses_var(i, loop->var.get())) ok = false;
        for (auto* v : acc.inner_vars)
          if (ir::uses_var(i, v)) ok = false;
      }
      for (auto* b : acc.others)
        if (b == r->buffer.get()) ok = false;
      for (auto* q : acc.reduces)
        if (q->buffer == r->buffer && (q->op != r->op || !ir::equal(q->indices, r->indices))) ok = false;
      if (ok) return Target{r->buffer, r->indices, r->op};
    }
    return std::nullopt;
  }

  struct Redirect : ir::IRMutator {
    const Target* t;
    ir::Buffer local;
    ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
      if (n->buffer == t->buffer && ir::equal(n->indices, t->indices))
        return ir::reduce(local, {}, n->op, mutate(n->value), n->loc);
      return ir::IRMutator::mutate_Reduce(n, self);
    }
  };

  ir::Stmt rewrite(const ir::ForNode* loop, const Target& t, ir::Expr start) {
    ir::Buffer local = ir::local_buffer(t.buffer->name + "_acc", t.buffer->dtype);
    Redirect r;
    r.t = &t;
    r.local = local;
    ir::Stmt body = r.mutate(loop->body);
    // Without an init store the local starts from the identity and is combined into C[x] once
    // at the end (a reduction), so the chain of the loop does not wait for the load of C[x]
    // (rows of hyb parts adding into y: the next row's chain can start before this row's
    // store): C[x] op= (t1 op t2 ...), a re-association that §4.3 of the language allows.
    const bool from_identity = !start.defined();
    if (from_identity) start = ir::reduce_identity(t.op, t.buffer->dtype);
    ir::Stmt writeback = from_identity ? ir::reduce(t.buffer, t.indices, t.op, ir::load(local, {}), loop->loc)
                                       : ir::store(t.buffer, t.indices, ir::load(local, {}), loop->loc);
    ir::Stmt s = ir::seq({ir::store(local, {}, start, loop->loc),
                          ir::for_loop(loop->var, loop->min, loop->extent, loop->for_kind, loop->iter_kind,
                                       loop->axis, body, loop->loc),
                          writeback},
                         loop->loc);
    return ir::block(t.buffer->name + "_accumulate", {local}, s, loop->loc);
  }
};

}  // namespace detail

inline ir::Stmt accumulate_locally(const ir::Stmt& s) { return detail::LocalAccumulation().mutate(s); }

}  // namespace spindle::schedule
