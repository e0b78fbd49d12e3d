// hoist_loop_invariants: moves work that does not change across a loop's iterations out
// of the loop, innermost loops first:
//   for v: let x = e in S      ->  let x = e in for v: S          (e invariant in v)
//   for v: if c then S         ->  if c then for v: S             (c invariant, no else)
// Coordinate translation creates such lets (the binary search of a coordinate that does
// not depend on inner loops) and guards (absent coordinates); hoisting runs each search
// once per fiber instead of once per inner iteration. A let/guard is invariant when it
// does not mention the loop variable and reads no buffer that the loop writes.
// Pre/post: stage II or III; semantics preserved (searches are side-effect free and stay
// in range, so running one for a loop with zero iterations is harmless).
#pragma once

#include <set>

#include "spindle/ir/buffer_uses.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/context.hpp"

namespace spindle::lower {

namespace detail {

class LoopInvariantHoisting : public ir::IRMutator {
 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n->body);
    const std::set<const ir::BufferNode*> w = ir::written_buffers(body);
    // Keep the peeled Let statements alive: `body` is reassigned to their bodies, and a
    // freshly mutated Let is owned by `body` alone.
    std::vector<ir::Stmt> let_owners;
    std::vector<const ir::LetStmtNode*> lets;
    std::vector<ir::Expr> guards;
    std::vector<ir::SourceLoc> guard_locs;
    while (true) {
      if (auto* l = body.as<ir::LetStmtNode>(); l && invariant(l->value, n, w)) {
        let_owners.push_back(body);
        lets.push_back(l);
        body = l->body;
        continue;
      }
      if (auto* c = body.as<ir::IfThenElseNode>(); c && !c->else_case.defined() && invariant(c->cond, n, w)) {
        guards.push_back(c->cond);
        guard_locs.push_back(c->loc);
        ir::Stmt then_case = c->then_case;
        body = then_case;
        continue;
      }
      break;
    }
    ir::Stmt s = body.same_as(n->body) ? self
                                        : ir::for_loop(n->var, n->min, n->extent, n->for_kind, n->iter_kind,
                                                       n->axis, body, n->loc);
    if (lets.empty() && guards.empty()) return s;
    // Re-wrap in the order found: lets were outermost first, then guards; a guard may use
    // the lets, so guards go inside the lets.
    for (std::size_t q = guards.size(); q-- > 0;) s = ir::if_then_else(guards[q], s, ir::Stmt(), guard_locs[q]);
    for (std::size_t q = lets.size(); q-- > 0;) s = ir::let_stmt(lets[q]->var, lets[q]->value, s, lets[q]->loc);
    return s;
  }

 private:
  struct Reads : ir::IRVisitor {
    std::set<const ir::BufferNode*> buffers;
    void visit_Load(const ir::LoadNode* n) override {
      buffers.insert(n->buffer.get());
      ir::IRVisitor::visit_Load(n);
    }
    void visit_FindPos(const ir::FindPosNode* n) override {
      buffers.insert(n->indices.get());
      ir::IRVisitor::visit_FindPos(n);
    }
  };

  static bool invariant(const ir::Expr& e, const ir::ForNode* loop, const std::set<const ir::BufferNode*>& written) {
    if (ir::uses_var(e, loop->var.get())) return false;
    Reads r;
    r.visit(e);
    for (auto* b : r.buffers)
      if (written.count(b)) return false;
    return true;
  }
};

}  // namespace detail

inline ir::Function hoist_loop_invariants(const ir::Function& f, const LowerContext&) {
  ir::Function out = f;
  out.body = detail::LoopInvariantHoisting().mutate(f.body);
  return out;
}

}  // namespace spindle::lower
