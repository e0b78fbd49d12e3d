// atomic_writeback: lets a reduction loop run concurrently (bound to GPU blocks/threads or
// the CPU pool) by making the updates that its iterations share atomic.
//
//   for j in [0, n) reduction:                     for j in [0, n):                (now spatial)
//     c[i, k] += v(j)                     ->         atomic c[i, k] += v(j)
//
// Every reduction inside the loop whose target element is not provably distinct per
// iteration (no index of the form e + j, e free of j and of the loops inside) becomes
// atomic (ReduceNode::atomic: CUDA atomicAdd/atomicMin/atomicMax); the loop becomes
// spatial, so bind() accepts it. Only +=, min= and max= have atomic forms: *= is an error. Also errors,
// since the loop could not run concurrently: a plain store to an element shared by the
// iterations, a read of a buffer that is updated atomically (it would see partial sums), a
// write to a local buffer allocated outside the loop (each thread has its own copy).
// Locals allocated inside the loop (cache_write / rfactor partial sums) are per iteration
// and stay plain; cache_write's partial mode writes them back with a reduction, which then
// becomes atomic here. The caller orders the target's initialisation before the atomic
// updates (an init in the same loop nest would race with the updates of other blocks).
// Pre/post: stage II or III; semantics preserved up to the order of the (commutative)
// updates; stage III code with atomics only compiles for the GPU (emit_c rejects it).
#pragma once

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

inline ir::Stmt atomic_writeback(const ir::Stmt& body, const std::string& loop) {
  const ir::ForNode* f = detail::find_loop(body, loop, "atomic_writeback");
  SPINDLE_CHECK(f->iter_kind == ir::IterKind::reduction, UserError, "atomic_writeback: loop '", loop,
                "' is spatial: its iterations write distinct elements and need no atomics; hint: bind it directly");

  struct Scan : ir::IRVisitor {
    const ir::ForNode* loop;
    std::set<const ir::ExprNode*> derived;        // the loop variable and lets computed from it
    std::set<const ir::ExprNode*> inner;          // variables bound inside the loop
    std::set<const ir::BufferNode*> inside;       // allocated inside the loop
    std::set<const ir::ReduceNode*> to_atomic;
    std::set<const ir::BufferNode*> atomic_buffers;
    std::vector<const ir::LoadNode*> loads;

    bool distinct(const std::vector<ir::Expr>& indices) const {
      for (auto& idx : indices) {
        auto e = detail::unit_offset(idx, loop->var);
        if (e && !detail::uses_any(*e, derived) && !detail::uses_any(*e, inner)) return true;
      }
      return false;
    }
    void visit_LetStmt(const ir::LetStmtNode* n) override {
      if (detail::uses_any(n->value, derived)) derived.insert(n->var.get());
      ir::IRVisitor::visit_LetStmt(n);
    }
    void visit_Block(const ir::BlockNode* n) override {
      for (auto& a : n->allocs) inside.insert(a.get());
      ir::IRVisitor::visit_Block(n);
    }
    void check_local(const ir::BufferNode& b, const char* what) {
      SPINDLE_CHECK(b.scope != ir::BufferScope::local, UserError, "atomic_writeback: loop '", loop->var.name(), "' ",
                    what, " local buffer '", b.name,
                    "', which is allocated outside it: concurrent iterations would each update their own copy; "
                    "hint: apply atomic_writeback before cache_write, or cache_write inside this loop");
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      ir::IRVisitor::visit_Reduce(n);
      if (inside.count(n->buffer.get())) return;
      check_local(*n->buffer, "reduces into");
      if (distinct(n->indices)) return;
      SPINDLE_CHECK(n->op == ir::ReduceOp::add || n->op == ir::ReduceOp::min || n->op == ir::ReduceOp::max,
                    UserError, "atomic_writeback: the reduction '", n->buffer->name, " ", ir::reduce_op_name(n->op),
                    " ...' inside loop '", loop->var.name(),
                    "' has no atomic form (only +=, min= and max= do); hint: keep the loop serial");
      to_atomic.insert(n);
      atomic_buffers.insert(n->buffer.get());
    }
    void visit_Store(const ir::StoreNode* n) override {
      ir::IRVisitor::visit_Store(n);
      if (inside.count(n->buffer.get())) return;
      check_local(*n->buffer, "stores to");
      SPINDLE_CHECK(distinct(n->indices), UserError, "atomic_writeback: loop '", loop->var.name(),
                    "' stores to '", n->buffer->name,
                    "' at an element that every iteration writes (a plain store cannot be combined); hint: move the "
                    "store (an init or a write-back) out of the loop, or use cache_write's partial mode, whose "
                    "write-back is a reduction");
    }
    void visit_Load(const ir::LoadNode* n) override {
      loads.push_back(n);
      ir::IRVisitor::visit_Load(n);
    }
  } scan;
  scan.loop = f;
  scan.derived.insert(f->var.get());
  scan.inner = detail::bound_vars(f->body);
  scan.visit(f->body);
  for (auto* l : scan.loads) {
    SPINDLE_CHECK(!scan.atomic_buffers.count(l->buffer.get()), UserError, "atomic_writeback: loop '", loop,
                  "' reads '", l->buffer->name,
                  "', which its iterations update atomically (a read would see partial sums); hint: keep the loop "
                  "serial");
  }

  struct Mark : ir::IRMutator {
    const std::set<const ir::ReduceNode*>* targets;
    ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
      if (!targets->count(n)) return ir::IRMutator::mutate_Reduce(n, self);
      return ir::reduce(n->buffer, n->indices, n->op, n->value, n->loc, /*atomic=*/true);
    }
  } mark;
  mark.targets = &scan.to_atomic;
  ir::Stmt b = mark.mutate(f->body);
  ir::Stmt out = ir::for_loop(f->var, f->min, f->extent, f->for_kind, ir::IterKind::spatial, f->axis, b, f->loc);
  return detail::replace_stmt(body, f, out);
}

inline ir::Function atomic_writeback(const ir::Function& fn, const std::string& loop) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return atomic_writeback(b, loop); });
}

}  // namespace spindle::schedule
