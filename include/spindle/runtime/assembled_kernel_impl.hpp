// Implementation of AssembledKernel (see assembled_kernel.hpp).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include <sys/mman.h>

#include "spindle/driver/pipeline.hpp"
#include "spindle/lower/assemble_rows.hpp"
#include "spindle/lower/assemble_scattered.hpp"
#include "spindle/runtime/assembled_kernel.hpp"
#include "spindle/runtime/assembly_steps.hpp"
#include "spindle/runtime/runtime.hpp"
#include "spindle/runtime/sort_rows.hpp"

namespace spindle::runtime {

SPINDLE_DECL void advise_huge_pages(void* p, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr std::uintptr_t huge = std::uintptr_t{2} << 20;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (at + huge - 1) & ~(huge - 1), hi = (at + bytes) & ~(huge - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

namespace assembly_detail {

// The reduction `old op v` as the kernel language defines it (docs/language.md §4.3): integer
// sums and products wrap around, min and max keep the old value on ties (and NaNs).
template <class V>
V combine(ir::ReduceOp op, V old, V v) {
  switch (op) {
    case ir::ReduceOp::add:
      if constexpr (std::is_integral_v<V>)
        return static_cast<V>(static_cast<std::make_unsigned_t<V>>(old) + static_cast<std::make_unsigned_t<V>>(v));
      else
        return old + v;
    case ir::ReduceOp::mul:
      if constexpr (std::is_integral_v<V>)
        return static_cast<V>(static_cast<std::make_unsigned_t<V>>(old) * static_cast<std::make_unsigned_t<V>>(v));
      else
        return old * v;
    case ir::ReduceOp::min: return v < old ? v : old;
    case ir::ReduceOp::max: return old < v ? v : old;
  }
  return old;
}

template <class V>
V identity(ir::ReduceOp op) {
  constexpr bool fp = std::is_floating_point_v<V>;
  switch (op) {
    case ir::ReduceOp::add: return V(0);
    case ir::ReduceOp::mul: return V(1);
    case ir::ReduceOp::min: return fp ? std::numeric_limits<V>::infinity() : std::numeric_limits<V>::max();
    case ir::ReduceOp::max: return fp ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::lowest();
  }
  return V(0);
}

// Whether every segment [raw_ptr[r], raw_ptr[r + 1]) of idx is strictly ascending, without a
// loop per row (whose exit mispredicts once per row: the transpose of a graph has rows of a
// few entries). Over a range of rows, the descents idx[q - 1] >= idx[q] are counted flat over
// its positions (a sum that vectorises), then those at the first position of a non-empty row
// (where idx[q - 1] belongs to the row before) are taken off; the segments ascend when none
// is left. Ranges of rows run in parallel.
template <class I>
bool segments_ascending(ThreadPool& pool, const std::vector<std::int64_t>& raw_ptr, const I* idx) {
  const std::int64_t rows = static_cast<std::int64_t>(raw_ptr.size()) - 1, n = raw_ptr.back();
  if (n < 2) return true;
  std::atomic<bool> descent{false};
  const std::int64_t grain = std::max<std::int64_t>(1024, rows / (4 * std::max(1, pool.num_threads())));
  pool.parallel_for(rows, grain, [&](std::int64_t rb, std::int64_t re) {
    const std::int64_t lo = raw_ptr[static_cast<std::size_t>(rb)], hi = raw_ptr[static_cast<std::size_t>(re)];
    std::int64_t all = 0, starts = 0;
    for (std::int64_t q = lo + 1; q < hi; ++q) all += idx[q - 1] >= idx[q];
    for (std::int64_t r = rb + 1; r < re; ++r) {
      const std::int64_t q = raw_ptr[static_cast<std::size_t>(r)];
      const std::int64_t at = std::min(std::max<std::int64_t>(q, 1), n - 1);  // a safe read when q is not counted
      starts += (q > lo) & (q < raw_ptr[static_cast<std::size_t>(r) + 1]) & (idx[at - 1] >= idx[at]);
    }
    if (all != starts) descent.store(true, std::memory_order_relaxed);
  });
  return !descent.load();
}

// Scattered rows (lower/assemble_scattered.hpp): each row's segment [raw_ptr[r], raw_ptr[r +
// 1]) of (column, value) pairs holds its writes in the order the kernel made them. Sorts each
// segment by column, stably (segments already strictly ascending are only checked), and folds
// the values of one column into the segment's next slot: from the identity of `op` in that
// order, or the last one when `op` is none (assignments). Returns each row's distinct columns.
template <class I, class V>
std::vector<std::int64_t> combine_segments(ThreadPool& pool, const std::vector<std::int64_t>& raw_ptr, I* idx, V* val,
                                           std::optional<ir::ReduceOp> op) {
  const std::int64_t rows = static_cast<std::int64_t>(raw_ptr.size()) - 1;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(rows), 0);
  const std::int64_t grain = std::max<std::int64_t>(256, rows / (4 * std::max(1, pool.num_threads())));
  pool.parallel_for(rows, grain, [&](std::int64_t b, std::int64_t e) {
    sort_rows_detail::RowSorter<I, V> sorter;
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t start = raw_ptr[static_cast<std::size_t>(r)], n = raw_ptr[static_cast<std::size_t>(r) + 1] - start;
      I* x = idx + start;
      V* v = val + start;
      const auto [ascending, lo, hi] = sorter.scan(x, n);
      if (ascending && !op) {  // assignments at distinct columns, in order: nothing to do
        counts[static_cast<std::size_t>(r)] = n;
        continue;
      }
      // Stable sorts (the writes of one column stay in the order made): each write to its
      // rank for a short segment, LSD radix passes on (column - lo) for a longer one
      // (runtime/sort_rows.hpp; this replaced std::stable_sort of copied pairs, a merge sort
      // per segment whose comparisons mispredict: docs/passes/assemble_scattered.md).
      if (!ascending) sorter.sort(x, v, n, lo, hi);
      std::int64_t out = 0;
      for (std::int64_t q = 0; q < n; ++q) {
        const bool fresh = out == 0 || x[out - 1] != x[q];
        if (fresh) x[out] = x[q], ++out;
        V& slot = v[out - 1];
        slot = !op ? v[q] : combine(*op, fresh ? identity<V>(*op) : slot, v[q]);
      }
      counts[static_cast<std::size_t>(r)] = out;
    }
  });
  return counts;
}

// The host steps after the numeric phase of scattered rows, for one index and value type:
// when every segment already ascends (`ascending`: known from the kernel's shape and its
// inputs, lower::segments_ascend_when_sorted; else checked by segments_ascending: a
// transpose, a conversion of sorted entries) the arrays are final (values folded from the
// identity for an operator); otherwise fold each segment in place (the numeric phase wrote
// into the target's arrays, sized for every write); when some row had duplicates, the folded
// prefixes move down to the rows' offsets and the target keeps that many entries (shrunk in
// place, else copied once into arrays allocated anew: keep_first_entries).
template <class I, class V>
void finish_scattered(ThreadPool& pool, const AssemblyPlan& p, const std::vector<std::int64_t>& raw_ptr, void* raw_idx,
                      void* raw_val, bool ascending, AssemblyTarget& target) {
  I* idx = static_cast<I*>(raw_idx);
  V* val = static_cast<V*>(raw_val);
  if (ascending || segments_ascending(pool, raw_ptr, idx)) {  // every row's columns once, in order (a transpose)
    if (p.op) {  // each value folded from the identity alone
      const std::int64_t n = raw_ptr.back();
      pool.parallel_for(n, std::max<std::int64_t>(4096, n / (4 * std::max(1, pool.num_threads()))),
                        [&](std::int64_t b, std::int64_t e) {
                          const V id = identity<V>(*p.op);
                          for (std::int64_t q = b; q < e; ++q) val[q] = combine(*p.op, id, val[q]);
                        });
    }
    return;  // the arrays are final
  }
  const std::vector<std::int64_t> row_ptr = p.row_offsets(combine_segments(pool, raw_ptr, idx, val, p.op));
  if (row_ptr.back() == raw_ptr.back()) return;  // no row had two writes of one column
  // Each row's folded prefix moves down to its offset, row after row: row r's new place ends
  // at row_ptr[r + 1] <= raw_ptr[r + 1], before the entries of the rows after it.
  const std::int64_t rows = static_cast<std::int64_t>(row_ptr.size()) - 1;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto k = static_cast<std::size_t>(r);
    const std::int64_t n = row_ptr[k + 1] - row_ptr[k];
    if (row_ptr[k] == raw_ptr[k] || n == 0) continue;
    std::copy(idx + raw_ptr[k], idx + raw_ptr[k] + n, idx + row_ptr[k]);  // to the left: forward is safe
    std::copy(val + raw_ptr[k], val + raw_ptr[k] + n, val + row_ptr[k]);
  }
  keep_first_entries(p, row_ptr, idx, val, target);
}

template <class I>
void finish_scattered_by_value_type(ThreadPool& pool, const AssemblyPlan& p, const std::vector<std::int64_t>& raw_ptr,
                                    void* raw_idx, void* raw_val, bool ascending, AssemblyTarget& target) {
  switch (p.value_dtype) {
    case DType::f32: return finish_scattered<I, float>(pool, p, raw_ptr, raw_idx, raw_val, ascending, target);
    case DType::f64: return finish_scattered<I, double>(pool, p, raw_ptr, raw_idx, raw_val, ascending, target);
    case DType::i32: return finish_scattered<I, std::int32_t>(pool, p, raw_ptr, raw_idx, raw_val, ascending, target);
    case DType::i64: return finish_scattered<I, std::int64_t>(pool, p, raw_ptr, raw_idx, raw_val, ascending, target);
    default: throw InternalError("AssembledKernel: unsupported value type");
  }
}

}  // namespace assembly_detail

struct AssembledKernel::Impl {
  Impl(const ir::Function& f, Runtime& r)
      : rt(&r), plan(host_plan(f)), sym(plan.symbolic.function, r, plan.symbolic.context),
        num(plan.numeric.function, r, plan.numeric.context),
        appended(!plan.scattered && lower::rows_appended(num.lowered().stage3, plan.numeric.context) &&
                 !lower::uses_assembly_scratch(sym.lowered().stage3, plan.symbolic.context)),
        append_when_sorted(!plan.scattered && !appended &&
                           lower::appends_when_selected(sym.lowered().stage3, plan.symbolic.context) &&
                           lower::appends_when_selected(num.lowered().stage3, plan.numeric.context)),
        ranked_up_to(plan.scattered ? 0 : lower::ranks_short_rows(num.lowered().stage3)),
        ascend_when_sorted(plan.scattered && lower::segments_ascend_when_sorted(num.lowered().stage3)) {}

  // The phases of assemble_rows for this runtime: rows written at an input fiber's
  // coordinates get both paths (AssemblyContext::sorted_fiber_rows); appended rows are
  // bounded (AssemblyContext::bounded_rows); the numeric phase's workspace is restored by its
  // gather (AssemblyContext::restore_workspace).
  static AssemblyPlan host_plan(const ir::Function& f) {
    AssemblyPlan p(f);
    p.symbolic.context.sorted_fiber_rows = p.numeric.context.sorted_fiber_rows = true;
    p.symbolic.context.bounded_rows = p.numeric.context.bounded_rows = true;
    p.numeric.context.restore_workspace = true;
    return p;
  }

  // Whether every compressed level of every input of the call holds its fibers strictly
  // ascending (the containers know it: LevelView::sorted).
  bool inputs_sorted(const std::vector<CallArg>& args) const {
    for (std::size_t k = 0; k < args.size(); ++k) {
      if (static_cast<int>(k) == plan.output_arg() || args[k].is_scalar) continue;
      for (const LevelView& l : args[k].view.levels)
        if (!l.sorted) return false;
    }
    return true;
  }

  Runtime* rt;
  AssemblyPlan plan;
  CompiledKernel sym, num;
  // The numeric phase appends each row in column order and neither phase touches the
  // marker, workspace or column list (assemble_rows' append case): none is allocated, and
  // no row is sorted.
  bool appended;
  // Both phases have the append path and the marker path (assemble_rows' either path): a
  // call whose inputs are sorted (inputs_sorted) takes the append path, as `appended`.
  bool append_when_sorted;
  // The rows the numeric phase writes in column order itself: those of at most this many
  // entries (lower::ranks_short_rows), which the row sort skips.
  std::int64_t ranked_up_to;

  // Scattered rows whose segments ascend whenever the inputs' fibers are sorted
  // (lower::segments_ascend_when_sorted): a call with sorted inputs does not check them.
  bool ascend_when_sorted = false;

  void call_scattered(const std::vector<CallArg>& args, AssemblyTarget& target) const;
};

// Scattered rows (lower/assemble_scattered.hpp): T blocks of the outermost loop count and
// collect in parallel, each into its own row of counts / cursors; no per-block scratch of
// assemble_rows (passed with no blocks). The numeric phase collects each row's writes in the
// target's arrays sized by the symbolic counts (every write; block after block within a row),
// which the host then folds by column in place (and moves into arrays sized anew only when
// some row had duplicates).
inline void AssembledKernel::Impl::call_scattered(const std::vector<CallArg>& args, AssemblyTarget& target) const {
  const AssemblyPlan& p = plan;
  const auto [rows, cols] = p.output_extent(args, /*device=*/false);
  std::vector<CallArg> base = p.inputs(args);
  const std::int64_t blocks = std::max(1, rt->pool().num_threads());
  const auto cells = static_cast<std::size_t>(blocks * rows);
  std::vector<std::int64_t> bounds{0, rows}, counts(cells, 0);
  std::int32_t no_mark = 0;
  std::vector<CallArg> a = base;
  a.push_back(phase_arg(bounds.data(), DType::i64, {2}, false));
  a.push_back(phase_arg(&no_mark, DType::i32, {0, cols}, true));
  a.push_back(phase_arg(counts.data(), DType::i64, {blocks, rows}, true));
  CheckedIndexValues checked;  // the numeric phase does not check the index values again
  try {
    sym.call(a, checked);
  } catch (const ShapeError& e) {
    throw p.with_shape_hint(e, rows, cols);
  }
  // Segments for every write (row_offsets: within the output's index type); the numeric
  // phase writes straight into the target's arrays, sized for them. Block t's cursor for row
  // r starts after the writes of the blocks before it.
  std::vector<std::int64_t> per_row(static_cast<std::size_t>(rows), 0);
  for (std::int64_t t = 0; t < blocks; ++t)
    for (std::int64_t r = 0; r < rows; ++r) per_row[static_cast<std::size_t>(r)] += counts[static_cast<std::size_t>(t * rows + r)];
  const std::vector<std::int64_t> raw_ptr = p.row_offsets(per_row);
  const std::int64_t raw = raw_ptr.back();
  void* raw_idx = nullptr;
  void* raw_val = nullptr;
  target.allocate(raw, raw_ptr, raw_idx, raw_val);
  std::vector<std::int64_t> start(cells);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t at = raw_ptr[static_cast<std::size_t>(r)];
    for (std::int64_t t = 0; t < blocks; ++t) {
      const auto k = static_cast<std::size_t>(t * rows + r);
      start[k] = at;
      at += counts[k];
    }
  }
  std::vector<std::int64_t> cursor = start;
  std::int64_t none = 0;
  a = std::move(base);
  a.push_back(phase_arg(bounds.data(), DType::i64, {2}, false));
  a.push_back(phase_arg(&no_mark, DType::i32, {0, cols}, true));
  a.push_back(phase_arg(cursor.data(), DType::i64, {blocks, rows}, true));
  a.push_back(phase_arg(&none, p.value_dtype, {0, cols}, true));
  a.push_back(phase_arg(&none, p.index_dtype, {0, cols}, true));
  a.push_back(phase_arg(raw_ptr.data(), DType::i64, {rows + 1}, false));
  a.push_back(phase_arg(raw_idx, p.index_dtype, {raw}, true));
  a.push_back(phase_arg(raw_val, p.value_dtype, {raw}, true));
  num.call(a, checked);
  for (std::size_t k = 0; k < cells; ++k) cursor[k] -= start[k];  // each block's writes per row
  p.check_same_pattern(counts, cursor);
  const bool ascending = ascend_when_sorted && inputs_sorted(args);
  if (p.index_dtype == DType::i32)
    assembly_detail::finish_scattered_by_value_type<std::int32_t>(rt->pool(), p, raw_ptr, raw_idx, raw_val, ascending,
                                                                  target);
  else
    assembly_detail::finish_scattered_by_value_type<std::int64_t>(rt->pool(), p, raw_ptr, raw_idx, raw_val, ascending,
                                                                  target);
  target.commit();
}

SPINDLE_DECL AssembledKernel::AssembledKernel(const ir::Function& stage1, Runtime& rt)
    : impl_(std::make_unique<Impl>(stage1, rt)) {}

SPINDLE_DECL AssembledKernel::~AssembledKernel() = default;

SPINDLE_DECL int AssembledKernel::output_arg() const { return impl_->plan.output_arg(); }
SPINDLE_DECL const CompiledKernel& AssembledKernel::symbolic() const { return impl_->sym; }
SPINDLE_DECL const CompiledKernel& AssembledKernel::numeric() const { return impl_->num; }

SPINDLE_DECL std::string AssembledKernel::explain() const {
  const AssemblyPlan& p = impl_->plan;
  std::string s =
      p.scattered
          ? message("# assembled output '", p.output, "' [", p.rows_axis, ", columns of ", p.cols_axis,
                    "] written at scattered rows: symbolic phase (writes per row), row segments by prefix sums, "
                    "numeric phase (each write collected in its row's segment; blocks of the outermost loop in "
                    "parallel, block after block within a segment), ",
                    impl_->ascend_when_sorted
                        ? "segments ascending by construction when every input's fibers are sorted (one write per "
                          "row per iteration of the blocked loop, at its iterator's column; else "
                        : "",
                    "segments sorted by column and their duplicates combined by ",
                    p.op ? ir::reduce_op_name(*p.op) : "= (the last)", impl_->ascend_when_sorted ? ")\n" : "\n")
          : lower::counts_bound_merges(impl_->sym.lowered().stage3)
          ? message("# assembled output '", p.output, "' [", p.rows_axis, ", columns of ", p.cols_axis,
                    "]: symbolic phase (an upper bound of each row's entries: the merged fibers' lengths, summed "
                    "for a union, the least for an intersection), row slots by prefix sums, numeric phase (each "
                    "row appended in column order after the previous row of its block: no workspace, no sort), "
                    "blocks moved together\n")
          : message("# assembled output '", p.output, "' [", p.rows_axis, ", columns of ", p.cols_axis,
                    "]: symbolic phase (distinct columns per row), row offsets by prefix sums, numeric phase ",
                    impl_->appended ? "(each row appended in column order: no workspace, no sort)\n"
                    : impl_->append_when_sorted
                        ? "(each row appended in column order when every input's fibers are sorted: no workspace, "
                          "no sort; else a dense workspace per block of rows and rows sorted by column)\n"
                        : "(a dense workspace per block of rows), rows sorted by column\n");
  return s + impl_->sym.explain() + impl_->num.explain();
}

SPINDLE_DECL void AssembledKernel::call(const std::vector<CallArg>& args, AssemblyTarget& target) const {
  if (impl_->plan.scattered) return impl_->call_scattered(args, target);
  const AssemblyPlan& p = impl_->plan;
  const auto [rows, cols] = p.output_extent(args, /*device=*/false);
  std::vector<CallArg> base = p.inputs(args);

  ThreadPool& pool = impl_->rt->pool();
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min<std::int64_t>(pool.num_threads(), rows));
  std::vector<std::int64_t> bounds = even_blocks(rows, blocks);
  // Per-block scratch: a column marker, a workspace and a column list of `cols` slots each
  // (8-byte slots for the last two). An appended assembly uses none (both phases proved by
  // lower::uses_assembly_scratch never to touch them; their block loop runs over the bounds):
  // they are passed with no blocks. So are they to phases with both paths when the inputs
  // are sorted: no blocks selects the append path (lower::append_selected).
  const bool append = impl_->appended || (impl_->append_when_sorted && impl_->inputs_sorted(args));
  const std::int64_t scratch_blocks = append ? 0 : blocks;
  const std::size_t scratch = static_cast<std::size_t>(scratch_blocks) * static_cast<std::size_t>(cols);
  std::vector<std::int32_t> mark(scratch, -1);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(rows), 0);

  std::vector<CallArg> a = base;
  a.push_back(phase_arg(bounds.data(), DType::i64, {blocks + 1}, false));
  a.push_back(phase_arg(mark.data(), DType::i32, {scratch_blocks, cols}, true));
  a.push_back(phase_arg(counts.data(), DType::i64, {rows}, true));
  CheckedIndexValues checked;  // the numeric phase does not check the index values again
  try {
    impl_->sym.call(a, checked);
  } catch (const ShapeError& e) {
    throw p.with_shape_hint(e, rows, cols);
  }

  std::vector<std::int64_t> row_ptr = p.row_offsets(counts);
  const std::int64_t nnz = row_ptr.back();
  void* out_indices = nullptr;
  void* out_values = nullptr;
  target.allocate(nnz, row_ptr, out_indices, out_values);

  rebalance(bounds, row_ptr);
  std::fill(mark.begin(), mark.end(), -1);
  std::vector<std::int64_t> counts2(static_cast<std::size_t>(rows), 0), list(scratch);
  std::unique_ptr<std::int64_t[]> workspace(new std::int64_t[std::max<std::size_t>(scratch, 1)]);
  a = std::move(base);
  a.push_back(phase_arg(bounds.data(), DType::i64, {blocks + 1}, false));
  a.push_back(phase_arg(mark.data(), DType::i32, {scratch_blocks, cols}, true));
  a.push_back(phase_arg(counts2.data(), DType::i64, {rows}, true));
  a.push_back(phase_arg(workspace.get(), p.value_dtype, {scratch_blocks, cols}, true));
  a.push_back(phase_arg(list.data(), p.index_dtype, {scratch_blocks, cols}, true));
  a.push_back(phase_arg(row_ptr.data(), DType::i64, {rows + 1}, false));
  a.push_back(phase_arg(out_indices, p.index_dtype, {nnz}, true));
  a.push_back(phase_arg(out_values, p.value_dtype, {nnz}, true));
  impl_->num.call(a, checked);
  if (append) {
    // Appended rows are bounded (AssemblyContext::bounded_rows): the symbolic counts are
    // bounds where a row merges fibers (exact elsewhere, where the blocks then stay put).
    pack_bounded_rows(p, bounds, row_ptr, counts, counts2, out_indices, out_values, target);
    target.commit();
    return;
  }
  p.check_same_pattern(counts, counts2);
  if (target.leave_rows_unsorted()) {  // the caller takes the rows as gathered (spindle::unsorted)
    target.commit();
    return;
  }
  // Rows the numeric phase ranked (lower::ranks_short_rows) are in column order already.
  const std::int64_t sorted_up_to = impl_->ranked_up_to;
  if (p.index_dtype == DType::i32)
    sort_rows_by_value_type(pool, p.value_dtype, rows, row_ptr.data(), static_cast<std::int32_t*>(out_indices),
                            out_values, sorted_up_to);
  else
    sort_rows_by_value_type(pool, p.value_dtype, rows, row_ptr.data(), static_cast<std::int64_t*>(out_indices),
                            out_values, sorted_up_to);
  target.commit();
}

}  // namespace spindle::runtime
