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
// Pre: stage III, unscheduled, a function made by split_assembly with context.scattered.
// Post: stage III; the placeholder is gone; the blocks are the only parallel loop.
#pragma once

#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/support/error.hpp"

namespace spindle::lower {

namespace detail {

class AssembleScattered : public ir::IRMutator {
 public:
  AssembleScattered(const ir::Function& f, const AssemblyContext& a) : a_(a) {
    auto find = [&](const std::string& name) { return assembly_buffer(f, name, "assemble_scattered"); };
    output_ = find(a.output);
    counts_ = find(a.counts);
    out_indices_ = find(a.out_indices);
    out_values_ = find(a.out_values);
  }

  ir::Function run(const ir::Function& f) {
    ir::Function out = f;
    out.body = mutate(f.body);
    std::erase_if(out.buffers, [&](const ir::FuncBuffer& b) { return b.buffer == output_; });
    return out;
  }

 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    SPINDLE_INTERNAL_CHECK(n->for_kind == ir::ForKind::serial, "assemble_scattered", "a loop of '", output_->name,
                           "' is already scheduled");
    if (block_.defined() || !writes_buffer(self, output_.get())) return IRMutator::mutate_For(n, self);
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

  const AssemblyContext& a_;
  ir::Buffer output_, counts_, out_indices_, out_values_;
  ir::Var block_;
};

}  // namespace detail

inline ir::Function assemble_scattered(const ir::Function& f, const LowerContext& ctx) {
  if (ctx.assembly.phase == AssemblyContext::none) return f;
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat && ctx.assembly.scattered, "assemble_scattered",
                         "expects stage III of a phase whose rows are scattered");
  return detail::AssembleScattered(f, ctx.assembly).run(f);
}

}  // namespace spindle::lower
