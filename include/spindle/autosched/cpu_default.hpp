// The default CPU schedule, applied when the user gives none (stage III):
//  before them, fused_row_chunks: the loop of a fused rows-and-nonzeros chain (sparse_fuse)
//     runs as chunks of 256 nonzeros, each walking its rows (schedule/fused_row_chunks.hpp);
//  then block_long_reductions: a spatial loop that re-reads a long reduction's rows in every
//     iteration (the weight gradient XᵀdC in the order k, i, n) reads them one block of rows
//     at a time (schedule/block_long_reductions.hpp); step 2 runs the loop inside each block
//     in parallel;
//  0. register_tile: reductions over a dense spatial inner loop (SpMM's feature loop) keep
//     tiles of the output row in registers across the reduction (inside the ownership tests
//     of step 2 when they fit there: see the comment in schedule_cpu_default);
//  1. accumulate_locally: reductions whose target is invariant in a loop sum in a local;
//  2. the outermost loop of every iteration nest runs in parallel on the runtime pool when
//     it is spatial (rows of SpMM/SpMV/SDDMM/softmax); a nest that is a reduction only
//     because of indirect or computed-index writes (scatter-add, COO SpMM) runs as one block per thread, each
//     applying the updates of its share of the written rows (partition_indirect_writes:
//     no atomics, the serial result bit for bit); other reduction loops stay serial;
//  3. innermost loops over dense axes (dense_fixed/dense_variable: feature dimensions,
//     ragged rows) are vectorised; the C compiler picks the width for the host CPU. So are
//     innermost loops over the slots of a fixed-width sparse axis (sparse_fixed: ELL and hyb
//     parts) whose width is a compile-time constant of at least 4: a row's sum over its slots
//     becomes one vector of partial sums (a gather, multiply-adds, one horizontal add) instead
//     of a chain of dependent additions, where the C compiler finds that profitable.
//  4. prefetch_gathers: a loop over a row's nonzeros that gathers a row of a dense operand
//     per nonzero (SpMM, SDDMM) prefetches the row kPrefetchDistance nonzeros ahead.
// Loops are only annotated here (but for step 4's hints); codegen outlines parallel loops and
// emits the vectorisation hints.
#pragma once

#include <map>
#include <set>
#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/schedule/accumulate_locally.hpp"
#include "spindle/schedule/block_long_reductions.hpp"
#include "spindle/schedule/fused_row_chunks.hpp"
#include "spindle/schedule/loop_kind.hpp"
#include "spindle/schedule/partition_indirect_writes.hpp"
#include "spindle/schedule/prefetch_gathers.hpp"
#include "spindle/schedule/register_tile.hpp"

namespace spindle::autosched {

namespace detail {

// Loops that no other loop encloses, looking through the block loops of
// block_long_reductions (the loop inside each block is the one that runs in parallel).
struct OutermostLoops : ir::IRVisitor {
  std::set<const ir::ForNode*> loops;
  const std::set<std::string>* block_loops = nullptr;
  void visit_For(const ir::ForNode* n) override {
    if (block_loops && block_loops->count(n->var.name()))
      ir::IRVisitor::visit_For(n);
    else
      loops.insert(n);
  }
  // A loop inside a merge loop (§3.1) would fork and join once per merged coordinate: serial.
  void visit_CoIterate(const ir::CoIterateNode*) override {}
};

// Loops with no loop and no search inside.
struct InnermostLoops : ir::IRVisitor {
  std::set<const ir::ForNode*> loops;
  bool inner_found = false;
  void visit_For(const ir::ForNode* n) override {
    inner_found = false;
    ir::IRVisitor::visit_For(n);
    if (!inner_found) loops.insert(n);
    inner_found = true;  // the enclosing loop is not innermost
  }
  void visit_CoIterate(const ir::CoIterateNode* n) override {  // a merge loop: not vectorisable
    ir::IRVisitor::visit_CoIterate(n);
    inner_found = true;
  }
  void visit_FindPos(const ir::FindPosNode* n) override {
    inner_found = true;
    ir::IRVisitor::visit_FindPos(n);
  }
};

}  // namespace detail

inline ir::Function schedule_cpu_default(const ir::Function& f, const lower::LowerContext& ctx) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "schedule_cpu_default", "expects stage III");
  ir::Function out = f;
  // A fused loop over the rows and their nonzeros (sparse_fuse) walks chunks of nonzeros
  // row by row: balanced like the fused loop, each nonzero as cheap as in the row loop.
  out.body = schedule::fused_row_chunks(f.body);
  // A spatial loop that re-reads a long reduction's rows in every iteration (XᵀdC as k, i, n)
  // reads them block by block instead; the loop inside each block runs in parallel (below).
  std::set<std::string> block_loops;
  out.body = schedule::block_long_reductions(out.body, block_loops, f, ctx.l2_bytes);
  const ir::Stmt unscheduled = out.body;
  // Ownership first, when the tiles stay inside the ownership tests: register_tile and
  // accumulate_locally read the output and store it back, which the partition allows only to
  // the element's owner — run before it, they leave such a nest serial (hyb parts, BSR with
  // computed indices); run after it, they may move the read and the store-back out of a test
  // that cannot leave its loop. ownership_kept decides; otherwise the tiles come first.
  ir::Function partitioned = schedule::partition_indirect_writes(out);
  partitioned.body = schedule::accumulate_locally(schedule::register_tile(partitioned.body, ctx.vector_bits));
  if (schedule::ownership_kept(partitioned)) {
    out = std::move(partitioned);
  } else {
    out.body = schedule::register_tile(unscheduled, ctx.vector_bits);
    out.body = schedule::accumulate_locally(out.body);
    out = schedule::partition_indirect_writes(out);
  }

  std::map<std::string, ir::AxisKind> axis_kind;
  for (auto& a : f.axes) axis_kind[a->name] = a->kind;
  auto dense_axis = [&](const ir::ForNode& n) {
    auto it = axis_kind.find(n.axis);
    return it != axis_kind.end() &&
           (it->second == ir::AxisKind::dense_fixed || it->second == ir::AxisKind::dense_variable);
  };
  auto fixed_slots = [&](const ir::ForNode& n) {
    auto it = axis_kind.find(n.axis);
    auto* w = n.extent.as<ir::IntImmNode>();
    return it != axis_kind.end() && it->second == ir::AxisKind::sparse_fixed && w && w->value >= 4;
  };

  // Parallel loops are outlined even for one thread: the pool's thread count is chosen at
  // call time, so one compiled kernel serves every thread count.
  detail::OutermostLoops outer;
  outer.block_loops = &block_loops;
  outer.visit(out.body);
  out.body = schedule::set_loop_kind(
      out.body,
      [&](const ir::ForNode& n) { return outer.loops.count(&n) && n.iter_kind == ir::IterKind::spatial; },
      ir::ForKind::parallel);
  // set_loop_kind rebuilt the loops it changed; find the innermost ones afterwards.
  detail::InnermostLoops inner;
  inner.visit(out.body);
  out.body = schedule::set_loop_kind(
      out.body,
      [&](const ir::ForNode& n) {
        return inner.loops.count(&n) && n.for_kind == ir::ForKind::serial && (dense_axis(n) || fixed_slots(n));
      },
      ir::ForKind::vectorized);
  // 4. rows of a dense operand gathered by column index (SpMM's and SDDMM's loops over a
  // row's nonzeros) are prefetched a few nonzeros ahead.
  out.body = schedule::prefetch_gathers(out.body, dense_axis);
  return out;
}

}  // namespace spindle::autosched
