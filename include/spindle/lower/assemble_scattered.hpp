// assemble_scattered: the writes of one phase of an assembling kernel whose rows are scattered
// (lower/split_assembly.hpp, rows_scattered; docs/language.md §4.6): the output is written at
// a row other than the first iterator of its top-level iteration — CSR -> CSC `c(j, i) = a(i,
// j)`, COO -> CSR `c(row(e), col(e)) += v(e)`, an outer product over a sparse vector — so no
// loop visits the rows one at a time and assemble_rows cannot run. Instead each write is
// collected, with its column and value, in its row's segment of the output arrays; the runtime
// then combines each row's entries by column (runtime/assembled_kernel_impl.hpp).
//
// The outermost loop around the writes becomes T blocks of its iterations run in parallel
// (T = the first extent of the counts argument, [T, P]; block t takes iterations [n t / T,
// n (t + 1) / T)), each counting and collecting into its own row of counts:
//
//   for i in [0, n):                    for blk in [0, T) parallel:
//     ... c_row[r, x] op= v      ->       for i in [n blk / T, n (blk + 1) / T):
//                                           ... <collect>
//   symbolic: <collect> = counts[blk, r] += 1                       (v is not computed)
//   numeric:  <collect> = at = cursor[blk, r]
//                         if at < nnz: out_indices[at] = x; out_values[at] = v
//                         cursor[blk, r] = at + 1
//
// cursor (the numeric phase's counts argument) starts, for block t and row r, at row r's
// segment plus the writes of blocks before t: a segment holds its row's writes block after
// block, each block's in the order it made them — the order of the serial loop. One random
// cache line per write besides the output's, as a counting sort has; the guard against the
// arrays' length keeps a pattern that differed between the phases inside them, which the
// runtime then reports (every cursor must end where it counted). The value is the write's own,
// not yet combined: the runtime sorts each segment by column, stably, and reduces the values of
// one column from the operator's identity in that order (or keeps the last, for `=`), so the
// result is what the writes would give applied one after another. Writes under no loop or under
// a co-iteration as the outermost loop stay in block 0 (serial). The scratch arrays of
// assemble_rows (bounds, marker, workspace, list) are not touched; the runtime passes them with
// no blocks.
//
// Segments that ascend by construction. When the kernel has one write of the output, its
// column is the blocked loop's iterator i itself, and its row is a coordinate of one fiber of
// a compressed level — the only loop between i and the write runs over the positions
// [P[e], P[e + 1]) of that level (P its indptr, e a fiber: `for j in [0, P[e + 1] - P[e])`,
// row `Idx[P[e] + j]`), with no co-iteration around — then every row gets at most one write
// per i as long as that fiber's coordinates are distinct, and a segment, holding its writes
// in the serial loop's order, ascends strictly in i (CSR -> CSC `c(j, i) = a(i, j)`). The
// numeric phase is then wrapped in a block named kSegmentsAscend; the runtime skips its check
// of the segments (runtime/assembled_kernel_impl.hpp) when every input's fibers are sorted
// (LevelView::sorted: strictly ascending, so distinct). Any other shape is left to that check.
// Pre: stage III, unscheduled, a function made by split_assembly with context.scattered.
// Post: stage III; the placeholder is gone; the blocks are the only parallel loop.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/support/error.hpp"

namespace spindle::lower {

namespace detail {

class AssembleScattered : public ir::IRMutator {
 public:
  static constexpr const char* kSegmentsAscend = "spindle_segments_ascend";

  AssembleScattered(const ir::Function& f, const AssemblyContext& a) : a_(a) {
    auto find = [&](const std::string& name) { return assembly_buffer(f, name, "assemble_scattered"); };
    output_ = find(a.output);
    counts_ = find(a.counts);
    out_indices_ = find(a.out_indices);
    out_values_ = find(a.out_values);
    for (const ir::FuncBuffer& b : f.buffers) origin_[b.buffer.get()] = b.origin;
  }

  ir::Function run(const ir::Function& f) {
    ir::Function out = f;
    out.body = mutate(f.body);
    if (a_.phase == AssemblyContext::numeric && writes_ == 1 && ascends_)
      out.body = ir::block(kSegmentsAscend, {}, out.body, f.loc);
    std::erase_if(out.buffers, [&](const ir::FuncBuffer& b) { return b.buffer == output_; });
    return out;
  }

 protected:
  ir::Stmt mutate_CoIterate(const ir::CoIterateNode* n, const ir::Stmt& self) override {
    ++co_iterations_;
    ir::Stmt out = IRMutator::mutate_CoIterate(n, self);
    --co_iterations_;
    return out;
  }
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    SPINDLE_INTERNAL_CHECK(n->for_kind == ir::ForKind::serial, "assemble_scattered", "a loop of '", output_->name,
                           "' is already scheduled");
    if (block_.defined()) {  // a loop inside the blocked one
      inner_.push_back(n);
      ir::Stmt out = IRMutator::mutate_For(n, self);
      inner_.pop_back();
      return out;
    }
    if (!writes_buffer(self, output_.get())) return IRMutator::mutate_For(n, self);
    blocked_ = n;
    // The outermost loop around the writes: blocks of its iterations.
    block_ = ir::Var("spindle_block", DType::i64);
    const ir::Expr blk = block_, blocks = counts_->shape[0];
    ir::Var lo("spindle_lo", DType::i64), hi("spindle_hi", DType::i64);
    ir::Stmt body = mutate(n->body);
    ir::Stmt part = ir::for_loop(n->var, n->min + ir::Expr(lo), ir::Expr(hi) - ir::Expr(lo), ir::ForKind::serial,
                                 n->iter_kind, n->axis, body, n->loc);
    part = ir::let_stmt(lo, ir::binary(ir::BinOp::div, n->extent * blk, blocks),
                        ir::let_stmt(hi, ir::binary(ir::BinOp::div, n->extent * (blk + 1), blocks), part, n->loc),
                        n->loc);
    ir::Stmt out = ir::for_loop(block_, ir::int_imm(0), blocks, ir::ForKind::parallel, ir::IterKind::spatial,
                                "spindle_blocks", part, n->loc);
    block_ = ir::Var();
    blocked_ = nullptr;
    return out;
  }
  ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
    if (n->buffer != output_) return IRMutator::mutate_Reduce(n, self);
    return collect(n->indices, n->value, n->loc);
  }
  ir::Stmt mutate_Store(const ir::StoreNode* n, const ir::Stmt& self) override {
    if (n->buffer != output_) return IRMutator::mutate_Store(n, self);
    return collect(n->indices, n->value, n->loc);
  }

 private:
  ir::Stmt collect(const std::vector<ir::Expr>& idx, const ir::Expr& value, ir::SourceLoc loc) {
    SPINDLE_INTERNAL_CHECK(idx.size() == 2, "assemble_scattered", "a write of '", output_->name,
                           "' does not have two indices");
    ++writes_;
    ascends_ = ascends_ && ascends_by_construction(idx);
    ir::Var row("spindle_row", DType::i64);
    const ir::Expr r = row, blk = block_.defined() ? ir::Expr(block_) : ir::int_imm(0);
    if (a_.phase != AssemblyContext::numeric)
      return ir::let_stmt(row, ir::cast(DType::i64, mutate(idx[0])),
                          ir::reduce(counts_, {blk, r}, ir::ReduceOp::add, ir::int_imm(1), loc), loc);
    ir::Var at("spindle_at", DType::i64);
    const ir::Expr slot = at;
    std::vector<ir::Stmt> put{
        ir::store(out_indices_, {slot}, ir::cast(out_indices_->dtype, mutate(idx[1])), loc),
        ir::store(out_values_, {slot}, ir::cast(out_values_->dtype, mutate(value)), loc)};
    ir::Stmt in_arrays = ir::if_then_else(slot < out_indices_->shape[0], ir::seq(std::move(put), loc), ir::Stmt(), loc);
    ir::Stmt body = ir::seq({in_arrays, ir::store(counts_, {blk, r}, slot + 1, loc)}, loc);
    return ir::let_stmt(row, ir::cast(DType::i64, mutate(idx[0])),
                        ir::let_stmt(at, ir::load(counts_, {blk, r}), body, loc), loc);
  }

  static ir::Expr uncast(ir::Expr e) {
    while (const auto* c = e.as<ir::CastNode>()) e = c->value;
    return e;
  }
  static bool is_int(const ir::Expr& e, std::int64_t v) {
    const auto* k = e.as<ir::IntImmNode>();
    return k && k->value == v;
  }
  // The axis whose indptr (or indices) array `b` is, or null.
  const ir::AxisNode* level_of(const ir::Buffer& b, ir::ParamOrigin::Kind kind) const {
    auto it = origin_.find(b.get());
    return it != origin_.end() && it->second.kind == kind ? it->second.axis.get() : nullptr;
  }

  // The write c[idx[0], idx[1]] at the current point: column = the blocked loop's iterator,
  // row = Idx[P[e] + j] under the single loop `for j in [0, P[e + 1] - P[e])` (see the top).
  bool ascends_by_construction(const std::vector<ir::Expr>& idx) const {
    if (!block_.defined() || !blocked_ || co_iterations_ != 0 || inner_.size() != 1) return false;
    const ir::ForNode* j = inner_[0];
    const auto* column = uncast(idx[1]).as<ir::VarNode>();
    if (!column || column != blocked_->var.node() || !is_int(j->min, 0)) return false;
    const auto* extent = j->extent.as<ir::BinaryNode>();
    if (!extent || extent->op != ir::BinOp::sub) return false;
    const auto* end = extent->a.as<ir::LoadNode>();
    const auto* begin = extent->b.as<ir::LoadNode>();
    if (!end || !begin || end->buffer != begin->buffer || end->indices.size() != 1 || begin->indices.size() != 1)
      return false;
    const ir::AxisNode* level = level_of(begin->buffer, ir::ParamOrigin::indptr);
    const auto* next = end->indices[0].as<ir::BinaryNode>();
    if (!level || !next || next->op != ir::BinOp::add || !is_int(next->b, 1) || !ir::equal(next->a, begin->indices[0]))
      return false;
    const auto* row = uncast(idx[0]).as<ir::LoadNode>();
    if (!row || row->indices.size() != 1 || level_of(row->buffer, ir::ParamOrigin::indices) != level) return false;
    const auto* at = row->indices[0].as<ir::BinaryNode>();
    if (!at || at->op != ir::BinOp::add) return false;
    const ir::Expr start = extent->b, pos = j->var;
    return (ir::equal(at->a, start) && ir::equal(at->b, pos)) || (ir::equal(at->a, pos) && ir::equal(at->b, start));
  }

  const AssemblyContext& a_;
  ir::Buffer output_, counts_, out_indices_, out_values_;
  ir::Var block_;
  std::map<const ir::BufferNode*, ir::ParamOrigin> origin_;
  const ir::ForNode* blocked_ = nullptr;     // the loop whose iterations became blocks
  std::vector<const ir::ForNode*> inner_;    // the loops inside it around the current point
  int co_iterations_ = 0;                    // co-iterations around the current point
  int writes_ = 0;                           // writes of the output
  bool ascends_ = true;                      // every write ascends_by_construction
};

}  // namespace detail

// Whether the numeric phase `f` (stage III, assemble_scattered run) fills each row's segment
// in strictly ascending columns whenever its inputs' fibers are sorted (see the top).
inline bool segments_ascend_when_sorted(const ir::Function& f) {
  return has_block(f, detail::AssembleScattered::kSegmentsAscend);
}

inline ir::Function assemble_scattered(const ir::Function& f, const LowerContext& ctx) {
  if (ctx.assembly.phase == AssemblyContext::none) return f;
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat && ctx.assembly.scattered, "assemble_scattered",
                         "expects stage III of a phase whose rows are scattered");
  return detail::AssembleScattered(f, ctx.assembly).run(f);
}

}  // namespace spindle::lower
