// Structural checks of a function at its stage, run by the pipeline between passes:
//   every variable is bound (scalar parameter, enclosing loop, let or iterator) where used;
//   stage I/II: accesses give one index per buffer axis; stage II/III: no sparse
//   iterations; stage III: buffers have no axes, accesses match shapes, searches are flat.
// A failure is an InternalError naming the pass that produced the function.
#pragma once

#include <set>
#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"

namespace spindle::ir {

namespace detail {

class Verifier : public IRVisitor {
 public:
  Verifier(const Function& f, std::string pass, bool user_input)
      : f_(f), pass_(std::move(pass)), user_input_(user_input) {
    for (auto& s : f.scalars) bound_.insert(s.var.get());
    for (auto& b : f.buffers) {
      buffers_.insert(b.buffer.get());
      if (f.stage == Stage::flat) {
        check(b.buffer->axes.empty(), "stage-III buffer ", b.buffer->name, " still has axes");
        for (auto& e : b.buffer->shape) visit(e);
      }
    }
  }

 protected:
  void visit_Var(const VarNode* n) override {
    if (user_input_ && !bound_.count(n))
      throw UserError(message("kernel '", f_.name, "': '", n->name,
                              "' is used outside the iteration that defines it; hint: an iterator is only valid "
                              "inside the lambda of its for_each (or kernel) and must not be kept past it"));
    check(bound_.count(n), "variable '", n->name, "' is used unbound");
  }
  void visit_Load(const LoadNode* n) override {
    access(*n->buffer, n->indices.size());
    IRVisitor::visit_Load(n);
  }
  void visit_Store(const StoreNode* n) override {
    access(*n->buffer, n->indices.size());
    IRVisitor::visit_Store(n);
  }
  void visit_Reduce(const ReduceNode* n) override {
    access(*n->buffer, n->indices.size());
    IRVisitor::visit_Reduce(n);
  }
  void visit_FindPos(const FindPosNode* n) override {
    // A segment search is flat in stage II too (FindMode::segment).
    const bool flat = n->mode == FindMode::segment || f_.stage == Stage::flat;
    check(flat == n->begin.defined(), "search over ", n->indices->name, " has the wrong form for stage ",
          stage_name(f_.stage));
    IRVisitor::visit_FindPos(n);
  }
  void visit_LetStmt(const LetStmtNode* n) override {
    visit(n->value);
    scoped(n->var.get(), [&] { visit(n->body); });
  }
  void visit_For(const ForNode* n) override {
    visit(n->min);
    visit(n->extent);
    scoped(n->var.get(), [&] { visit(n->body); });
  }
  void visit_CoIterate(const CoIterateNode* n) override {
    check(f_.stage != Stage::coordinate, "co-iteration over ", n->axis, " at stage I");
    check(n->op != MergeOp::none && !n->operands.empty(), "co-iteration over ", n->axis, " has no operands");
    for (auto& o : n->operands) visit(o.extent);
    std::vector<const ExprNode*> vars{n->var.get()};
    for (auto& o : n->operands) vars.push_back(o.pos.get());
    std::vector<const ExprNode*> added;
    for (auto* v : vars)
      if (bound_.insert(v).second) added.push_back(v);
    for (auto& o : n->operands) visit(o.key);  // a key is an expression of its position
    for (auto& o : n->operands)
      if (bound_.insert(o.present.get()).second) added.push_back(o.present.get());
    visit(n->body);
    for (auto* v : added) bound_.erase(v);
  }
  void visit_Block(const BlockNode* n) override {
    for (auto& a : n->allocs) buffers_.insert(a.get());
    visit(n->body);
  }
  void visit_SparseIteration(const SparseIterationNode* n) override {
    check(f_.stage == Stage::coordinate, "sparse iteration '", n->name, "' at stage ", stage_name(f_.stage));
    check(n->axes.size() == n->vars.size() && n->vars.size() == n->kinds.size(), "iteration '", n->name,
          "' has mismatched axes/iterators/kinds");
    std::vector<const ExprNode*> vars;
    for (auto& v : n->vars) vars.push_back(v.get());
    for (auto* v : vars) bound_.insert(v);
    visit(n->init);
    visit(n->body);
    for (auto* v : vars) bound_.erase(v);
  }

 private:
  template <class F>
  void scoped(const ExprNode* v, F&& f) {
    bool had = bound_.count(v);
    bound_.insert(v);
    f();
    if (!had) bound_.erase(v);
  }
  void access(const BufferNode& b, std::size_t n) {
    check(buffers_.count(&b), "buffer '", b.name, "' is not a parameter or an allocation in scope");
    std::size_t rank = f_.stage == Stage::flat ? b.shape.size() : b.axes.size();
    check(rank == n, "buffer '", b.name, "' of rank ", rank, " accessed with ", n, " indices");
  }
  template <class... Parts>
  void check(bool ok, const Parts&... parts) {
    if (ok) return;
    if (user_input_) throw UserError(message("kernel '", f_.name, "': ", parts...));
    throw InternalError(message("IR check failed after pass ", pass_, " (kernel '", f_.name, "'): ", parts...));
  }

  const Function& f_;
  std::string pass_;
  bool user_input_;
  std::set<const ExprNode*> bound_;
  std::set<const BufferNode*> buffers_;
};

}  // namespace detail

// `user_input` marks IR that came straight from the front end: a failure there is the
// user's mistake (e.g. an iterator kept past its iteration) and raises a UserError.
inline void verify(const Function& f, const std::string& after_pass, bool user_input = false) {
  detail::Verifier v(f, after_pass, user_input);
  v.visit(f.body);
}

}  // namespace spindle::ir
