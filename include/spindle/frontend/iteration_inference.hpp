// Completes recorded stage-I iterations, in program order:
//  * iterator kinds: an iterator is spatial (S) when every write of its iteration indexes
//    a slot of the written buffer by that very iterator (over the same coordinate space),
//    so different iterator values write different elements; otherwise it is a reduction
//    (R). Writes to locals declared inside the iteration are private and do not count.
//  * init: the first reduction (+=, *=, min=, max=) into an `out` buffer that nothing has
//    written before gets an init statement storing the reduction's identity, so `out`
//    buffers hold exactly the result (SparseTIR's `with init()`); `inout` buffers
//    accumulate into what the caller passed.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "spindle/frontend/iteration_inference_decl.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/printer.hpp"

namespace spindle::detail {

class IterationInference : public ir::IRMutator {
 public:
  explicit IterationInference(std::string kernel) : kernel_(std::move(kernel)) {}

 protected:
  ir::Stmt mutate_Store(const ir::StoreNode* n, const ir::Stmt& self) override {
    mark(n->buffer);
    return self;
  }

  ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
    // A reduction outside any iteration runs once: give it its own init.
    if (n->buffer->role == ir::BufferRole::output && !initialized_.count(n->buffer.get())) {
      mark(n->buffer);
      return ir::seq({ir::store(n->buffer, n->indices, ir::reduce_identity(n->op, n->buffer->dtype), n->loc),
                      self});
    }
    mark(n->buffer);
    return self;
  }

  ir::Stmt mutate_SparseIteration(const ir::SparseIterationNode* n, const ir::Stmt&) override {
    Writes w;
    w.visit(n->body);
    std::vector<ir::IterKind> kinds;
    for (std::size_t k = 0; k < n->vars.size(); ++k)
      kinds.push_back(is_spatial(n->vars[k], n->axes[k], w) ? ir::IterKind::spatial : ir::IterKind::reduction);

    // Init for the direct reductions of this iteration (nested iterations decide theirs).
    DirectReduces d;
    d.visit(n->body);
    std::vector<ir::Stmt> inits;
    std::set<std::string> seen;
    std::vector<ir::Buffer> newly;
    for (auto* r : d.reduces) {
      if (r->buffer->role != ir::BufferRole::output || initialized_.count(r->buffer.get())) continue;
      std::string key = r->buffer->name + "[" + ir::IRPrinter().list(r->indices) + "]";
      if (!seen.insert(key).second) continue;
      inits.push_back(ir::store(r->buffer, r->indices, ir::reduce_identity(r->op, r->buffer->dtype), r->loc));
      newly.push_back(r->buffer);
    }
    for (auto& b : newly) mark(b);
    ir::Stmt init = n->init.defined() ? n->init : ir::seq(std::move(inits), n->loc);
    ir::Stmt body = mutate(n->body);
    return ir::Stmt(std::make_shared<ir::SparseIterationNode>(n->name, n->axes, n->vars, std::move(kinds),
                                                              init, body, n->loc));
  }

 private:
  struct Writes : ir::IRVisitor {
    std::vector<std::pair<ir::Buffer, std::vector<ir::Expr>>> writes;
    std::set<const ir::BufferNode*> private_locals;
    void visit_Store(const ir::StoreNode* n) override {
      writes.push_back({n->buffer, n->indices});
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      writes.push_back({n->buffer, n->indices});
      ir::IRVisitor::visit_Reduce(n);
    }
    void visit_Block(const ir::BlockNode* n) override {
      for (auto& a : n->allocs) private_locals.insert(a.get());
      ir::IRVisitor::visit_Block(n);
    }
  };

  // Reductions directly in an iteration body (not in nested iterations) into buffers that
  // the body does not store to before them.
  struct DirectReduces : ir::IRVisitor {
    std::vector<const ir::ReduceNode*> reduces;
    std::set<const ir::BufferNode*> stored;
    void visit_Reduce(const ir::ReduceNode* n) override {
      if (!stored.count(n->buffer.get())) reduces.push_back(n);
    }
    void visit_Store(const ir::StoreNode* n) override { stored.insert(n->buffer.get()); }
    void visit_SparseIteration(const ir::SparseIterationNode*) override {}
  };

  static bool is_spatial(const ir::Var& v, const ir::Axis& axis, const Writes& w) {
    for (auto& [buf, idx] : w.writes) {
      if (w.private_locals.count(buf.get())) continue;
      bool indexed = false;
      for (std::size_t s = 0; s < idx.size() && s < buf->axes.size(); ++s)
        if (idx[s].same_as(v) && ir::coordinate_space(buf->axes[s]) == ir::coordinate_space(axis))
          indexed = true;
      if (!indexed) return false;
    }
    return true;
  }

  void mark(const ir::Buffer& b) {
    if (b->role == ir::BufferRole::output) initialized_.insert(b.get());
  }

  std::string kernel_;
  std::set<const ir::BufferNode*> initialized_;
};

SPINDLE_DECL ir::Stmt infer_iteration_kinds(ir::Stmt body, const std::string& kernel) {
  return IterationInference(kernel).mutate(body);
}

}  // namespace spindle::detail
