// Shared pieces of the name-addressed schedule primitives (split, reorder, fuse, bind,
// cache_read, cache_write, rfactor, atomic_writeback):
//   find_loop     the one loop whose variable has a given name (UserError naming the
//                 primitive, the name and the loops that exist when none or several match);
//   path_to       the statements from a root down to a node (its ancestors);
//   replace_stmt  rebuilds a tree with one node replaced;
//   unit_offset   splits an index into e + v (e free of v), the form of a contiguous access;
//   small expression helpers (constants, free-variable tests, ceil division).
// Loops are identified by ForNode::var.name(): the lowering names loops after the user's
// iterators (i, j, k), and the primitives name the loops they create after them (k_o, k_i).
// Pre/post: stage II or III; nothing here changes semantics.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/lower/simplify.hpp"

namespace spindle::schedule::detail {

// Every loop of a statement, outermost first (pre-order).
inline std::vector<const ir::ForNode*> all_loops(const ir::Stmt& s) {
  struct V : ir::IRVisitor {
    std::vector<const ir::ForNode*> loops;
    void visit_For(const ir::ForNode* n) override {
      loops.push_back(n);
      ir::IRVisitor::visit_For(n);
    }
  } v;
  v.visit(s);
  return v.loops;
}

// "i, j, k" (each name once, in pre-order), or "none" for a statement without loops.
inline std::string loop_names(const ir::Stmt& s) {
  std::string out;
  std::set<std::string> seen;
  for (auto* f : all_loops(s)) {
    if (!seen.insert(f->var.name()).second) continue;
    out += (out.empty() ? "" : ", ") + f->var.name();
  }
  return out.empty() ? "none" : out;
}

inline std::vector<const ir::ForNode*> loops_named(const ir::Stmt& s, const std::string& name) {
  std::vector<const ir::ForNode*> out;
  for (auto* f : all_loops(s))
    if (f->var.name() == name) out.push_back(f);
  return out;
}

// The unique loop named `name`; a UserError naming `primitive` otherwise.
inline const ir::ForNode* find_loop(const ir::Stmt& body, const std::string& name, const char* primitive) {
  auto found = loops_named(body, name);
  SPINDLE_CHECK(!found.empty(), UserError, primitive, ": no loop named '", name, "' (loops: ", loop_names(body),
                "); hint: loops are named after their iteration variables, and split/fuse/rfactor rename the "
                "loops they create (k -> k_o, k_i)");
  SPINDLE_CHECK(found.size() == 1, UserError, primitive, ": ", found.size(), " loops are named '", name,
                "' (loops: ", loop_names(body),
                "); hint: sibling loops over one axis (an init loop and a reduction loop) share a name: reorder "
                "the reduction nest first (it moves the init into the new outer loop), or address the nest "
                "before it is duplicated");
  return found[0];
}

// A UserError naming `primitive` unless some loop is named `name`.
inline void require_loop(const ir::Stmt& body, const std::string& name, const char* primitive) {
  SPINDLE_CHECK(!loops_named(body, name).empty(), UserError, primitive, ": no loop named '", name, "' (loops: ",
                loop_names(body), "); hint: loops are named after their iteration variables, and split/fuse/rfactor "
                "rename the loops they create (k -> k_o, k_i)");
}

// The statements from `root` down to `target` (both included), or empty when `target` is
// not inside `root`.
inline std::vector<ir::Stmt> path_to(const ir::Stmt& root, const ir::StmtNode* target) {
  std::vector<ir::Stmt> path;
  std::function<bool(const ir::Stmt&)> walk = [&](const ir::Stmt& s) -> bool {
    if (!s.defined()) return false;
    path.push_back(s);
    if (s.get() == target) return true;
    bool found = false;
    if (auto* n = s.as<ir::ForNode>()) found = walk(n->body);
    else if (auto* n = s.as<ir::LetStmtNode>()) found = walk(n->body);
    else if (auto* n = s.as<ir::IfThenElseNode>()) found = walk(n->then_case) || walk(n->else_case);
    else if (auto* n = s.as<ir::BlockNode>()) found = walk(n->body);
    else if (auto* n = s.as<ir::SeqNode>()) {
      for (auto& c : n->stmts)
        if ((found = walk(c))) break;
    } else if (auto* n = s.as<ir::SparseIterationNode>()) {
      found = walk(n->init) || walk(n->body);
    } else if (auto* n = s.as<ir::CoIterateNode>()) {
      found = walk(n->body);
    }
    if (!found) path.pop_back();
    return found;
  };
  walk(root);
  return path;
}

inline bool contains(const ir::Stmt& root, const ir::StmtNode* target) { return !path_to(root, target).empty(); }

// Rebuilds `root` with the node `target` replaced by `by` (an undefined `by` removes it).
inline ir::Stmt replace_stmt(const ir::Stmt& root, const ir::StmtNode* target, const ir::Stmt& by) {
  struct R : ir::IRMutator {
    const ir::StmtNode* target;
    ir::Stmt by;
    ir::Stmt mutate(const ir::Stmt& s) override {
      if (s.defined() && s.get() == target) return by;
      return ir::IRMutator::mutate(s);
    }
    using ir::IRMutator::mutate;
  } r;
  r.target = target;
  r.by = by;
  return r.mutate(root);
}

// Statement `s` with variable v replaced by `by` everywhere.
inline ir::Stmt substitute(const ir::Stmt& s, const ir::Var& v, const ir::Expr& by) {
  ir::Substituter sub;
  sub.add(v, by);
  return sub.mutate(s);
}

// A loop rebuilt with a new body (and optionally new kinds).
inline ir::Stmt with_body(const ir::ForNode& f, ir::Stmt body) {
  return ir::for_loop(f.var, f.min, f.extent, f.for_kind, f.iter_kind, f.axis, std::move(body), f.loc);
}

inline std::optional<std::int64_t> const_int(const ir::Expr& e) {
  ir::Expr s = lower::simplify(e);
  if (auto* c = s.as<ir::IntImmNode>(); c && c->dtype != DType::boolean) return c->value;
  return std::nullopt;
}

inline bool is_const(const ir::Expr& e, std::int64_t v) {
  auto c = const_int(e);
  return c && *c == v;
}

// Whether `s` reads `buffer` anywhere (a load of it, at any index).
inline bool loads_buffer(const ir::Stmt& s, const ir::Buffer& buffer) {
  struct Scan : ir::IRVisitor {
    const ir::BufferNode* b = nullptr;
    bool found = false;
    void visit_Load(const ir::LoadNode* n) override {
      found = found || n->buffer.get() == b;
      ir::IRVisitor::visit_Load(n);
    }
  } scan;
  scan.b = buffer.get();
  scan.visit(s);
  return scan.found;
}

inline bool uses_any(const ir::Expr& e, const std::set<const ir::ExprNode*>& vars) {
  if (vars.empty() || !e.defined()) return false;
  struct F : ir::IRVisitor {
    const std::set<const ir::ExprNode*>* vars;
    bool found = false;
    void visit_Var(const ir::VarNode* n) override { found |= vars->count(n) > 0; }
  } f;
  f.vars = &vars;
  f.visit(e);
  return f.found;
}

inline bool uses_any(const std::vector<ir::Expr>& es, const std::set<const ir::ExprNode*>& vars) {
  for (auto& e : es)
    if (uses_any(e, vars)) return true;
  return false;
}

// The variables bound by loops and lets inside `s`.
inline std::set<const ir::ExprNode*> bound_vars(const ir::Stmt& s) {
  struct V : ir::IRVisitor {
    std::set<const ir::ExprNode*> vars;
    void visit_For(const ir::ForNode* n) override {
      vars.insert(n->var.get());
      ir::IRVisitor::visit_For(n);
    }
    void visit_LetStmt(const ir::LetStmtNode* n) override {
      vars.insert(n->var.get());
      ir::IRVisitor::visit_LetStmt(n);
    }
    void visit_CoIterate(const ir::CoIterateNode* n) override {
      for (auto* v : ir::co_iterate_vars(*n)) vars.insert(v);
      ir::IRVisitor::visit_CoIterate(n);
    }
  } v;
  v.visit(s);
  return v.vars;
}

// idx == e + v with e free of v: returns e (0 when idx is v itself), else nothing.
// Recognises sums and differences around v, in any order: (p + v), (v + p), (p + v) - q,
// p + (q + v), ...; anything that scales v is not a unit offset.
inline std::optional<ir::Expr> unit_offset(const ir::Expr& idx, const ir::Var& v) {
  if (idx.same_as(v)) return ir::int_imm(0, idx.dtype());
  if (auto* c = idx.as<ir::CastNode>(); c && is_int(c->dtype) && is_int(c->value.dtype())) {
    // widening casts of an index keep it contiguous
    if (dtype_bytes(c->dtype) >= dtype_bytes(c->value.dtype())) {
      if (auto e = unit_offset(c->value, v)) return ir::cast(c->dtype, *e);
    }
    return std::nullopt;
  }
  auto* b = idx.as<ir::BinaryNode>();
  if (!b) return std::nullopt;
  bool in_a = ir::uses_var(b->a, v.get()), in_b = ir::uses_var(b->b, v.get());
  if (b->op == ir::BinOp::add) {
    if (in_a && !in_b) {
      if (auto e = unit_offset(b->a, v)) return lower::simplify(*e + b->b);
    } else if (in_b && !in_a) {
      if (auto e = unit_offset(b->b, v)) return lower::simplify(b->a + *e);
    }
  } else if (b->op == ir::BinOp::sub && in_a && !in_b) {
    if (auto e = unit_offset(b->a, v)) return lower::simplify(*e - b->b);
  }
  return std::nullopt;
}

// ceil(n / d) for a positive constant d, folded when n is constant.
inline ir::Expr ceil_div(const ir::Expr& n, std::int64_t d) {
  if (d == 1) return n;
  return lower::simplify((n + ir::int_imm(d - 1, n.dtype())) / ir::int_imm(d, n.dtype()));
}

// v - start, or v itself when start is 0 (a position relative to a loop's start).
inline ir::Expr relative(const ir::Expr& v, const ir::Expr& start) { return is_const(start, 0) ? v : v - start; }

// A UserError unless no loop is already named `name` (the primitives address loops by name,
// so a second loop of that name would make both unreachable).
inline void check_fresh_name(const ir::Stmt& body, const std::string& name, const char* primitive) {
  SPINDLE_CHECK(loops_named(body, name).empty(), UserError, primitive, ": a loop named '", name,
                "' exists already (loops: ", loop_names(body), "); hint: the new loop would take that name, which "
                "would make both loops unreachable by name");
}

inline bool is_gpu_kind(ir::ForKind k) { return k >= ir::ForKind::gpu_block_x; }
inline bool is_gpu_thread_kind(ir::ForKind k) { return k >= ir::ForKind::gpu_thread_x; }

// The loops among `path` (ancestors, root first) bound to `kind`.
inline std::vector<const ir::ForNode*> loops_of_kind(const std::vector<ir::Stmt>& path, ir::ForKind kind) {
  std::vector<const ir::ForNode*> out;
  for (auto& s : path)
    if (auto* f = s.as<ir::ForNode>(); f && f->for_kind == kind) out.push_back(f);
  return out;
}

// The buffers that statement `s` reads, stores to and reduces into, by name.
struct BufferUses : ir::IRVisitor {
  std::vector<const ir::LoadNode*> loads;
  std::vector<const ir::StoreNode*> stores;
  std::vector<const ir::ReduceNode*> reduces;
  std::set<const ir::BufferNode*> allocated;  // by blocks inside s
  void visit_Load(const ir::LoadNode* n) override {
    loads.push_back(n);
    ir::IRVisitor::visit_Load(n);
  }
  void visit_Store(const ir::StoreNode* n) override {
    stores.push_back(n);
    ir::IRVisitor::visit_Store(n);
  }
  void visit_Reduce(const ir::ReduceNode* n) override {
    reduces.push_back(n);
    ir::IRVisitor::visit_Reduce(n);
  }
  void visit_Block(const ir::BlockNode* n) override {
    for (auto& a : n->allocs) allocated.insert(a.get());
    ir::IRVisitor::visit_Block(n);
  }
};

inline BufferUses buffer_uses(const ir::Stmt& s) {
  BufferUses u;
  u.visit(s);
  return u;
}

// Names of the buffers in a list of accesses, for messages.
template <class Node>
std::string buffer_names(const std::vector<const Node*>& nodes) {
  std::set<std::string> names;
  for (auto* n : nodes) names.insert(n->buffer->name);
  std::string out;
  for (auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// Applies a body transformation to a function.
template <class F>
ir::Function on_body(const ir::Function& f, F&& transform) {
  ir::Function out = f;
  out.body = transform(f.body);
  return out;
}

}  // namespace spindle::schedule::detail
