// Which buffers a statement writes and an expression reads (locals included), by node.
#pragma once

#include <set>

#include "spindle/ir/functor.hpp"

namespace spindle::ir {

// The buffers a Store or Reduce inside `s` writes.
inline std::set<const BufferNode*> written_buffers(const Stmt& s) {
  struct Find : IRVisitor {
    std::set<const BufferNode*> found;
    void visit_Store(const StoreNode* n) override {
      found.insert(n->buffer.get());
      IRVisitor::visit_Store(n);
    }
    void visit_Reduce(const ReduceNode* n) override {
      found.insert(n->buffer.get());
      IRVisitor::visit_Reduce(n);
    }
  } f;
  if (s.defined()) f.visit(s);
  return f.found;
}

// The buffers a Load inside `e` reads.
inline std::set<const BufferNode*> read_buffers(const Expr& e) {
  struct Find : IRVisitor {
    std::set<const BufferNode*> found;
    void visit_Load(const LoadNode* n) override {
      found.insert(n->buffer.get());
      IRVisitor::visit_Load(n);
    }
  } f;
  if (e.defined()) f.visit(e);
  return f.found;
}

}  // namespace spindle::ir
