// prefetch_gathers: asks the cache for the row a loop will gather a few iterations ahead.
// In SpMM's and SDDMM's loops over a row's nonzeros, each iteration reads a whole row of a
// dense operand chosen by the nonzero's column,
//
//   for j in [lo, lo + n):                       (L: the loop over the nonzeros)
//     for k in [0, K): ... B[col[p(j)], k] ...    (a loop over a dense axis: the row)
//
// a row the hardware prefetcher cannot predict, fetched from L3 or memory when the iteration
// gets there. Before the body of L this pass inserts
//
//   if (j + D < lo + n):                                         (D = kPrefetchDistance)
//     for line in [0, ceil(K / 16)): prefetch B[col[p(j + D)], line * 16]   (f32: 16 per line)
//
// in a second version of L, run when K is at least kPrefetchMinBytes / element size (the
// original L otherwise).
// A prefetch never faults and changes no value; the guard keeps the column index it reads,
// col[p(j + D)], to one the loop itself reads D iterations later. Measured (Intel Xeon, 2
// threads; docs/passes/prefetch_gathers.md): SDDMM up to 19 % faster at K = 512 and 0-15 %
// at K = 128 on pubmed, ppi, ogbn-arxiv and bcsstk25, about even at K = 64, slower at K = 32
// (hence the two versions); SpMM's register tiles slower at K = 32 (up to 2x) and no faster
// at 128 or 512 (hence whole rows of a run-time length only, which the tiles are not). So a
// gather qualifies only if
//  - its row is a loop from 0 over a dense axis whose length is not a constant;
//  - its index reads another buffer (the indirection) at an index that uses j;
//  - it uses the variable of exactly one loop inside L over a dense axis (the row), and no
//    other variable bound inside L (a let, another loop: their values at j + D are unknown);
//  - it is not under a condition, a select or a search inside L (those reads may not happen).
// Pre/post: stage III, CPU schedule only (the CUDA emitter emits nothing for a prefetch);
// semantics preserved exactly (no value is changed or reordered).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

inline constexpr std::int64_t kPrefetchDistance = 8;  // iterations ahead
inline constexpr std::int64_t kCacheLineBytes = 64;
inline constexpr std::int64_t kPrefetchMinBytes = 256;  // rows at least this long

namespace detail {

// The gathers of one loop L that qualify (see the top of the file).
class GatherFinder : public ir::IRVisitor {
 public:
  struct Gather {
    const ir::LoadNode* load;
    const ir::ForNode* row;  // the loop over the gathered row
  };

  GatherFinder(const ir::ForNode& loop, const std::function<bool(const ir::ForNode&)>& row_axis)
      : loop_(loop), row_axis_(row_axis) {}

  std::vector<Gather> gathers;

  void visit_LetStmt(const ir::LetStmtNode* n) override {
    bound_.insert(n->var.get());
    ir::IRVisitor::visit_LetStmt(n);
  }
  void visit_For(const ir::ForNode* n) override {
    bound_.insert(n->var.get());
    visit(n->min);
    visit(n->extent);
    rows_.push_back(n);
    visit(n->body);
    rows_.pop_back();
  }
  // Reads that may not happen: not followed.
  void visit_IfThenElse(const ir::IfThenElseNode* n) override { visit(n->cond); }
  void visit_CoIterate(const ir::CoIterateNode*) override {}
  void visit_Select(const ir::SelectNode* n) override { visit(n->cond); }
  void visit_FindPos(const ir::FindPosNode*) override {}
  void visit_Call(const ir::CallNode*) override {}

  void visit_Load(const ir::LoadNode* n) override {
    consider(n);
    ir::IRVisitor::visit_Load(n);
  }

 private:
  void consider(const ir::LoadNode* n) {
    // The loop over the row: the innermost enclosing loop over a dense axis whose variable the
    // index uses; no other variable bound inside L may appear.
    const ir::ForNode* row = nullptr;
    for (auto it = rows_.rbegin(); it != rows_.rend(); ++it)
      if (uses(n, (*it)->var.get())) {
        if (row || !row_axis_(**it)) return;
        row = *it;
      }
    if (!row) return;
    // A whole row of a length known only at run time (SDDMM's dot products over K). The tiles
    // of register_tile (constant widths: SpMM) ran slower with prefetches at every K measured.
    auto* lo = row->min.as<ir::IntImmNode>();
    if (!lo || lo->value != 0 || row->extent.as<ir::IntImmNode>()) return;
    for (const ir::ExprNode* v : bound_)
      if ((v != row->var.get() && uses(n, v)) || ir::uses_var(row->extent, v)) return;
    if (ir::uses_var(row->extent, loop_.var.get()) || ir::uses_var(row->min, loop_.var.get())) return;
    // The indirection: a load inside the index that uses L's variable and not the row's.
    bool indirect = false;
    for (const ir::Expr& e : n->indices) indirect |= indirection(e, row->var.get());
    if (!indirect) return;
    for (const Gather& g : gathers)
      if (g.load->buffer == n->buffer && g.row == row && ir::equal(g.load->indices, n->indices)) return;
    gathers.push_back({n, row});
  }

  bool indirection(const ir::Expr& e, const ir::ExprNode* row_var) const {
    struct Find : ir::IRVisitor {
      const ir::ExprNode* j;
      const ir::ExprNode* k;
      bool found = false;
      void visit_Load(const ir::LoadNode* l) override {
        bool uses_j = false, uses_k = false;
        for (const ir::Expr& i : l->indices) {
          uses_j |= ir::uses_var(i, j);
          uses_k |= ir::uses_var(i, k);
        }
        found |= uses_j && !uses_k;
        ir::IRVisitor::visit_Load(l);
      }
    } f;
    f.j = loop_.var.get();
    f.k = row_var;
    f.visit(e);
    return f.found;
  }

  static bool uses(const ir::LoadNode* n, const ir::ExprNode* v) {
    for (const ir::Expr& i : n->indices)
      if (ir::uses_var(i, v)) return true;
    return false;
  }
  const ir::ForNode& loop_;
  const std::function<bool(const ir::ForNode&)>& row_axis_;
  std::set<const ir::ExprNode*> bound_;
  std::vector<const ir::ForNode*> rows_;
};

class PrefetchGathers : public ir::IRMutator {
 public:
  explicit PrefetchGathers(std::function<bool(const ir::ForNode&)> row_axis) : row_axis_(std::move(row_axis)) {}

 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt inner = ir::IRMutator::mutate_For(n, self);  // inner loops first
    const ir::ForNode* f = inner.as<ir::ForNode>();
    // A row loop itself, or a parallel loop (outlined by codegen: left as it is).
    if (f->for_kind != ir::ForKind::serial || row_axis_(*f)) return inner;
    GatherFinder finder(*f, row_axis_);
    finder.visit(f->body);
    if (finder.gathers.empty()) return inner;
    const ir::Expr ahead = ir::Expr(f->var) + ir::int_imm(kPrefetchDistance);
    std::vector<ir::Stmt> body{f->body};
    for (const auto& g : finder.gathers)
      body.insert(body.end() - 1, ir::if_then_else(lt(ahead, f->min + f->extent), row_hints(g, f->var, ahead),
                                                   ir::Stmt(), f->loc));
    // Two versions of the loop: with the prefetches where the first gathered row is at least
    // kPrefetchMinBytes long, else the loop as it was (SDDMM at K = 32 ran 10-30 % slower with
    // prefetches, and with the length tested in the loop).
    const auto& g = finder.gathers.front();
    const std::int64_t min_elems = std::max<std::int64_t>(1, kPrefetchMinBytes / dtype_bytes(g.load->buffer->dtype));
    return ir::if_then_else(lt(ir::int_imm(min_elems - 1), g.row->extent), with_body(*f, ir::seq(std::move(body), f->loc)),
                            inner, f->loc);
  }

 private:
  static ir::Expr lt(const ir::Expr& a, const ir::Expr& b) { return ir::binary(ir::BinOp::lt, a, b); }

  // One prefetch per cache line of the row at iteration `ahead` (a loop over the lines).
  static ir::Stmt row_hints(const GatherFinder::Gather& g, const ir::Var& j, const ir::Expr& ahead) {
    const std::int64_t per_line = std::max<std::int64_t>(1, kCacheLineBytes / dtype_bytes(g.load->buffer->dtype));
    std::vector<ir::Expr> at_ahead;
    for (const ir::Expr& e : g.load->indices) at_ahead.push_back(ir::substitute(e, j, ahead));
    auto hint = [&](const ir::Expr& k) {
      std::vector<ir::Expr> idx;
      for (const ir::Expr& e : at_ahead) idx.push_back(ir::substitute(e, g.row->var, k));
      return ir::prefetch(g.load->buffer, std::move(idx), g.row->loc);
    };
    ir::Var line(g.row->var.name() + "_line", DType::i64);
    ir::Expr count = (g.row->extent + ir::int_imm(per_line - 1)) / ir::int_imm(per_line);
    return ir::for_loop(line, ir::int_imm(0), count, ir::ForKind::serial, ir::IterKind::spatial, "",
                        hint(g.row->min + ir::Expr(line) * ir::int_imm(per_line)), g.row->loc);
  }

  std::function<bool(const ir::ForNode&)> row_axis_;
};

}  // namespace detail

// Prefetches the gathered rows of every qualifying loop; `row_axis(loop)`: the loop runs over
// a dense axis (the rows of a dense operand).
inline ir::Stmt prefetch_gathers(const ir::Stmt& s, std::function<bool(const ir::ForNode&)> row_axis) {
  return detail::PrefetchGathers(std::move(row_axis)).mutate(s);
}

}  // namespace spindle::schedule
