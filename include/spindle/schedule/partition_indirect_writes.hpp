// partition_indirect_writes: runs a top-level loop nest that is a reduction only because of
// its scattered writes — at indirect indices (`c[b[e], k] += v`) or computed ones
// (`d[io * 4 + ii, k] += v`), docs/language.md §4.1 — in parallel on the CPU, without atomics
// and deterministically. T blocks (T = the call's thread count, the scalar `spindle_threads`
// bound at call time) each run the whole nest and apply only the updates whose index value
// falls in their share of the written axis (owner computes):
//
//   for e in [0, E) reduction:            for blk in [0, spindle_threads) parallel:
//     for k in [0, K):             ->       for e in [0, E) reduction:
//       c[b[e], k] += v                       if blk * N / T <= b[e] && b[e] < (blk + 1) * N / T:
//                                               for k in [0, K):
//                                                 c[b[e], k] += v
//
// Every element has one owner — each buffer is owned through one slot, the same for all its
// writes in the nest (owner_slots) — which applies its updates in the order of the serial loop: the
// result is bit-identical to the serial run at every thread count. Each block reads all index
// values (O(E) per thread) and does its share of the updates, which pays when an update is
// more than a few operations (a feature row) and costs little otherwise.
// Applies to a nest whose outermost loop is a serial reduction loop when every write inside
// to a buffer not allocated inside is a reduction at an indirect or computed index and the
// nest reads none of those buffers; anything else is left as it is. An ownership test moves
// out of the loops whose variables it does not use when it is their whole body (the feature
// loop above stays a clean, vectorisable loop).
// Pre/post: stage III (CPU); adds the scalar `spindle_threads` (ParamOrigin::threads).
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "spindle/ir/affine_index.hpp"
#include "spindle/ir/buffer_uses.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/indirect.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

// Whether a write index is an indirect index (a load of an index buffer), a computed one
// (iterators and constants, ir/affine_index.hpp: at stage III an expression of loop variables
// without loads that is not a bare variable), or the coordinate of a sparse iterator (a load of
// an axis's `indices`, one of `coordinates`: CSC SpMM's `y[Rw_indices[p], k]`, Aᵀ X from a
// CSR). All three lie in [0, extent) of the slot they index: the binder checks indirect index
// values and sparse indices at call time, and computed indices are proved in bounds.
inline bool is_scattered_index(const ir::Expr& e, const std::set<const ir::BufferNode*>& coordinates) {
  if (ir::indirect_index_load(e) || ir::is_computed_index(e, [](const ir::VarNode*) { return true; })) return true;
  ir::Expr inner = e;
  if (const ir::CastNode* c = e.as<ir::CastNode>()) inner = c->value;
  const ir::LoadNode* l = inner.as<ir::LoadNode>();
  return l && coordinates.count(l->buffer.get());
}

// The slot each buffer written by `nest` (and not allocated inside it) is partitioned on, when
// every such write is a reduction with at least one scattered index and the nest reads none
// of those buffers (the language forbids it there; checked again because ownership is only
// sound without such reads); empty otherwise. One slot per buffer, used by every write to
// it: two writes of one buffer owned through different slots (`c[d[e], k]` and `c[k, d[e]]`)
// would let two blocks update one element at the same time. The slot is the first one
// scattered in every write of the buffer, else the one scattered in the most writes (any
// slot keeps ownership sound; a scattered one spreads the work).
inline std::map<const ir::BufferNode*, std::size_t> owner_slots(const ir::Stmt& nest,
                                                                const std::set<const ir::BufferNode*>& coordinates) {
  struct Scan : ir::IRVisitor {
    const std::set<const ir::BufferNode*>* coordinates = nullptr;
    std::set<const ir::BufferNode*> inside, read;
    std::map<const ir::BufferNode*, std::vector<int>> written;  // per slot: writes scattered in it
    bool ok = true;
    void visit_Block(const ir::BlockNode* n) override {
      for (auto& a : n->allocs) inside.insert(a.get());
      ir::IRVisitor::visit_Block(n);
    }
    void visit_Store(const ir::StoreNode* n) override {
      ok = ok && inside.count(n->buffer.get());
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Load(const ir::LoadNode* n) override {
      read.insert(n->buffer.get());
      ir::IRVisitor::visit_Load(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      if (!inside.count(n->buffer.get())) {
        std::vector<int>& scattered = written[n->buffer.get()];
        scattered.resize(n->indices.size(), 0);
        bool any = false;
        for (std::size_t q = 0; q < n->indices.size(); ++q)
          if (is_scattered_index(n->indices[q], *coordinates)) {
            ++scattered[q];
            any = true;
          }
        ok = ok && any && !n->atomic;
      }
      ir::IRVisitor::visit_Reduce(n);
    }
  } scan;
  scan.coordinates = &coordinates;
  scan.visit(nest);
  std::map<const ir::BufferNode*, std::size_t> slots;
  for (auto& [b, scattered] : scan.written) {
    scan.ok = scan.ok && !scan.read.count(b);
    slots[b] = static_cast<std::size_t>(std::max_element(scattered.begin(), scattered.end()) - scattered.begin());
  }
  if (!scan.ok) slots.clear();
  return slots;
}

// `block * extent / threads <= index < (block + 1) * extent / threads`: whether `block` owns
// the element at `index` of a slot of that extent, written as
// `min(index - lo, hi - 1 - index) >= 0` so that both bounds are computed on every test: the
// C compiler then hoists both divisions out of the loop. As `lo <= v && v < hi` the second
// division ran only after the first comparison held, so it could not be hoisted (a division
// may trap) and cost an integer division per scattered element (hyb SpMV on delaunay_n16:
// 0.35 ms at 1 thread, against 0.20 ms for the same loop without it).
inline ir::Expr owner_test(const ir::Var& block, const ir::Var& threads, const ir::Expr& extent,
                           const ir::Expr& index) {
  ir::Expr v = ir::cast(DType::i64, index);
  ir::Expr lo = ir::Expr(block) * extent / ir::Expr(threads);
  ir::Expr hi = (ir::Expr(block) + ir::int_imm(1)) * extent / ir::Expr(threads);
  return ir::min(v - lo, hi - ir::int_imm(1) - v) >= ir::int_imm(0);
}

class OwnerGuards : public ir::IRMutator {
 public:
  OwnerGuards(ir::Var block, ir::Var threads, std::map<const ir::BufferNode*, std::size_t> slots)
      : block_(std::move(block)), threads_(std::move(threads)), slots_(std::move(slots)) {}
  std::set<const ir::BufferNode*> inside;

 protected:
  ir::Stmt mutate_Block(const ir::BlockNode* n, const ir::Stmt& self) override {
    for (auto& a : n->allocs) inside.insert(a.get());
    return ir::IRMutator::mutate_Block(n, self);
  }
  ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
    if (inside.count(n->buffer.get())) return self;
    if (auto it = slots_.find(n->buffer.get()); it != slots_.end()) {
      const std::size_t q = it->second;
      ir::Expr cond = owner_test(block_, threads_, n->buffer->shape[q], n->indices[q]);
      guards_.insert(cond.get());
      return ir::if_then_else(cond, self, ir::Stmt(), n->loc);
    }
    return self;
  }
  // `if c: if owner(e): body` -> `if owner(e): if c: body` (both only read in-range values),
  // so that the ownership test can keep moving out.
  ir::Stmt mutate_IfThenElse(const ir::IfThenElseNode* n, const ir::Stmt& self) override {
    ir::Stmt s = ir::IRMutator::mutate_IfThenElse(n, self);
    auto* outer = s.as<ir::IfThenElseNode>();
    auto* g = outer ? outer->then_case.as<ir::IfThenElseNode>() : nullptr;
    if (!g || outer->else_case.defined() || g->else_case.defined() || !guards_.count(g->cond.get())) return s;
    return ir::if_then_else(g->cond, ir::if_then_else(outer->cond, g->then_case, ir::Stmt(), outer->loc), ir::Stmt(),
                            g->loc);
  }
  // `for k: if owner(e): body` -> `if owner(e): for k: body` when the test does not use k.
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt s = ir::IRMutator::mutate_For(n, self);
    auto* f = s.as<ir::ForNode>();
    auto* g = f ? f->body.as<ir::IfThenElseNode>() : nullptr;
    if (!g || g->else_case.defined() || !guards_.count(g->cond.get()) || uses_any(g->cond, {f->var.get()}))
      return s;
    return ir::if_then_else(g->cond, ir::for_loop(f->var, f->min, f->extent, f->for_kind, f->iter_kind, f->axis,
                                                  g->then_case, f->loc),
                            ir::Stmt(), g->loc);
  }

 private:
  ir::Var block_, threads_;
  std::map<const ir::BufferNode*, std::size_t> slots_;
  std::set<const ir::ExprNode*> guards_;
};

class PartitionIndirect : public ir::IRMutator {
 public:
  PartitionIndirect(ir::Var threads, std::set<const ir::BufferNode*> coordinates)
      : threads_(std::move(threads)), coordinates_(std::move(coordinates)) {}
  bool changed = false;

 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    // Outermost loops only: this mutator does not descend into loops.
    if (n->for_kind != ir::ForKind::serial || n->iter_kind != ir::IterKind::reduction) return self;
    auto slots = owner_slots(self, coordinates_);
    if (slots.empty()) return self;
    ir::Var block("spindle_block", DType::i64);
    OwnerGuards g(block, threads_, std::move(slots));
    ir::Stmt body = g.mutate(self);
    changed = true;
    return ir::for_loop(block, ir::int_imm(0), threads_, ir::ForKind::parallel, ir::IterKind::spatial, "", body,
                        n->loc);
  }

 private:
  ir::Var threads_;
  std::set<const ir::BufferNode*> coordinates_;
};

}  // namespace detail

// Every read and write of a buffer that a partitioned nest writes (and does not allocate) lies
// inside an ownership test of that very access — the test of one of its indices, for that
// buffer's extent, with no loop or let between the test and the access rebinding a variable
// of the index. Passes that run after the partition (register_tile, accumulate_locally) may
// move the read and the store-back of an element out of its test; then two blocks would touch
// one element, and schedule_cpu_default must not use that result.
inline bool ownership_kept(const ir::Function& f) {
  ir::Var threads_var;
  for (auto& sc : f.scalars)
    if (sc.origin.kind == ir::ParamOrigin::threads) threads_var = sc.var;
  if (!threads_var.defined()) return true;  // nothing partitioned
  struct Check : ir::IRVisitor {
    ir::Var threads, block;
    std::set<const ir::BufferNode*> inside, written;
    struct Guard {
      ir::Expr cond;
      std::set<const ir::ExprNode*> bound;  // variables bound between the test and here
    };
    std::vector<Guard> guards;
    bool ok = true;

    void bind(const ir::ExprNode* v) {
      for (auto& g : guards) g.bound.insert(v);
    }
    void unbind(const ir::ExprNode* v) {
      for (auto& g : guards) g.bound.erase(v);
    }
    void access(const ir::Buffer& b, const std::vector<ir::Expr>& indices) {
      if (!block.defined() || inside.count(b.get()) || !written.count(b.get())) return;
      for (auto g = guards.rbegin(); g != guards.rend(); ++g)
        for (std::size_t q = 0; q < indices.size(); ++q)
          if (!detail::uses_any(indices[q], g->bound) &&
              ir::equal(g->cond, detail::owner_test(block, threads, b->shape[q], indices[q])))
            return;
      ok = false;
    }
    void visit_For(const ir::ForNode* n) override {
      if (!block.defined() && n->for_kind == ir::ForKind::parallel && n->extent.same_as(ir::Expr(threads))) {
        // a partitioned nest: the buffers it writes
        struct Allocs : ir::IRVisitor {
          std::set<const ir::BufferNode*> inside;
          void visit_Block(const ir::BlockNode* b) override {
            for (auto& a : b->allocs) inside.insert(a.get());
            ir::IRVisitor::visit_Block(b);
          }
        } w;
        w.visit(n->body);
        inside = w.inside, written = ir::written_buffers(n->body), block = n->var;
        visit(n->body);
        block = ir::Var(), inside.clear(), written.clear();
        return;
      }
      visit(n->min);
      visit(n->extent);
      bind(n->var.get());
      visit(n->body);
      unbind(n->var.get());
    }
    void visit_LetStmt(const ir::LetStmtNode* n) override {
      visit(n->value);
      bind(n->var.get());
      visit(n->body);
      unbind(n->var.get());
    }
    void visit_CoIterate(const ir::CoIterateNode* n) override {
      const auto vars = ir::co_iterate_vars(*n);
      for (auto* v : vars) bind(v);
      ir::IRVisitor::visit_CoIterate(n);
      for (auto* v : vars) unbind(v);
    }
    void visit_IfThenElse(const ir::IfThenElseNode* n) override {
      visit(n->cond);
      if (block.defined() && detail::uses_any(n->cond, {block.get()})) {
        guards.push_back({n->cond, {}});
        visit(n->then_case);
        guards.pop_back();
      } else {
        visit(n->then_case);
      }
      if (n->else_case.defined()) visit(n->else_case);
    }
    void visit_Load(const ir::LoadNode* n) override {
      access(n->buffer, n->indices);
      ir::IRVisitor::visit_Load(n);
    }
    void visit_Store(const ir::StoreNode* n) override {
      access(n->buffer, n->indices);
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      access(n->buffer, n->indices);
      ir::IRVisitor::visit_Reduce(n);
    }
  } check;
  check.threads = threads_var;
  check.visit(f.body);
  return check.ok;
}

inline ir::Function partition_indirect_writes(const ir::Function& f) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "partition_indirect_writes", "expects stage III");
  ir::Var threads("spindle_threads", DType::i64);
  std::set<const ir::BufferNode*> coordinates;  // the `indices` arrays of sparse axes
  for (auto& b : f.buffers)
    if (b.origin.kind == ir::ParamOrigin::indices) coordinates.insert(b.buffer.get());
  detail::PartitionIndirect p(threads, std::move(coordinates));
  ir::Function out = f;
  out.body = p.mutate(f.body);
  if (p.changed) out.scalars.push_back({threads, {ir::ParamOrigin::threads, -1, nullptr}});
  return out;
}

}  // namespace spindle::schedule
