// The host steps of running a kernel that assembles a sparse output (docs/language.md §4.6),
// shared by the CPU (runtime/assembled_kernel_impl.hpp) and the GPU
// (runtime/cuda/assembled_cuda_kernel_impl.hpp) paths, which differ only in where the
// phases run and where the arrays live:
//
//   AssemblyPlan        both phases made by lower/split_assembly.hpp, and what the messages name
//   output_extent       checks the output argument (a Csr of the declared value and index types)
//   phase_arg           a dense scratch array as a call argument
//   row_offsets         row_ptr from the symbolic phase's counts; nnz checked against the index type
//   rebalance           block bounds for the numeric phase: about (nnz + rows) / T per block
//   keep_first_entries  the target keeps the first entries of its arrays (shrunk, or copied anew)
//   pack_bounded_rows   bounded rows: each row's count checked, the blocks' entries moved together
//   with_shape_hint     a binder ShapeError of a phase, with what the output's shape must be
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spindle/ir/functor.hpp"
#include "spindle/lower/split_assembly.hpp"
#include "spindle/runtime/call_arg.hpp"
#include "spindle/support/error.hpp"

namespace spindle::runtime {

struct AssemblyPlan {
  lower::AssemblyPhase symbolic, numeric;
  std::string kernel, output, rows_axis, cols_axis;
  DType value_dtype = DType::f32, index_dtype = DType::i32;
  // Rows scattered (lower/assemble_scattered.hpp): the numeric phase collects every write, and
  // the host combines each row's by column with `op` (none: `=`, the last write is kept).
  bool scattered = false;
  std::optional<ir::ReduceOp> op;

  explicit AssemblyPlan(const ir::Function& stage1)
      : symbolic(lower::split_assembly(stage1, lower::AssemblyContext::symbolic)),
        numeric(lower::split_assembly(stage1, lower::AssemblyContext::numeric)) {
    const ir::FuncBuffer* out = lower::assembled_output(stage1);
    kernel = stage1.name;
    output = out->buffer->name;
    value_dtype = out->buffer->dtype;
    index_dtype = out->buffer->axes[1]->index_dtype;
    rows_axis = out->buffer->axes[0]->name;
    cols_axis = ir::coordinate_space(out->buffer->axes[1])->name;
    scattered = symbolic.context.scattered;
    op = write_operator(stage1, out->buffer);
  }

  // The operator of the writes of c (the front end allows one when the rows are scattered):
  // that of the first reduction, none when the first write is an assignment.
  static std::optional<ir::ReduceOp> write_operator(const ir::Function& f, const ir::Buffer& c) {
    struct Find : ir::IRVisitor {
      const ir::BufferNode* c = nullptr;
      bool found = false;
      std::optional<ir::ReduceOp> op;
      void visit_Store(const ir::StoreNode* n) override { found = found || n->buffer.get() == c; }
      void visit_Reduce(const ir::ReduceNode* n) override {
        if (n->buffer.get() == c && !found) found = true, op = n->op;
      }
    } find;
    find.c = c.get();
    find.visit(f.body);
    return find.op;
  }

  int output_arg() const { return symbolic.output_arg; }

  // Checks the output argument of a call and returns its {rows, columns}. `device`: the call
  // runs on the GPU, so the output must be a DeviceCsr (else a host Csr).
  std::pair<std::int64_t, std::int64_t> output_extent(const std::vector<CallArg>& args, bool device) const {
    const int out_arg = output_arg();
    SPINDLE_CHECK(out_arg >= 0 && static_cast<std::size_t>(out_arg) < args.size(), UserError, "kernel '", kernel,
                  "' takes ", symbolic.user_args + 1, " arguments, got ", args.size());
    const CallArg& o = args[static_cast<std::size_t>(out_arg)];
    const StorageView& ov = o.view;
    // A Csr (dense rows) or, on the host, a Dcsr (a sparse root over the stored rows): only
    // its extents are read here; the target decides what the arrays become.
    const bool rows_ok = !o.is_scalar && ov.levels.size() == 2 &&
                         (ov.levels[0].kind == LevelKind::dense_fixed ||
                          (!device && ov.levels[0].kind == LevelKind::sparse_fixed));
    SPINDLE_CHECK(rows_ok && ov.levels[1].kind == LevelKind::sparse_variable, UserError, "kernel '", kernel,
                  "': argument ", out_arg, " ('", output, "') is the assembled output and must be a ",
                  device ? "DeviceCsr" : "Csr or Dcsr", " (rows x columns), got ",
                  o.is_scalar ? std::string("a scalar") : ov.description());
    SPINDLE_CHECK(ov.on_device == device, UserError, "kernel '", kernel, "': the assembled output '", output, "' is ",
                  device ? "built on the GPU here (the call has device arguments); hint: pass a DeviceCsr"
                         : "built on the CPU here (the call has host arguments); hint: pass a host Csr");
    SPINDLE_CHECK(ov.dtype == value_dtype, DTypeError, "kernel '", kernel, "': argument ", out_arg, " ('", output,
                  "') holds ", dtype_name(ov.dtype), " values but the buffer is declared ", dtype_name(value_dtype));
    SPINDLE_CHECK(ov.levels[1].index_dtype == index_dtype, DTypeError, "kernel '", kernel, "': argument ", out_arg,
                  " ('", output, "') stores ", dtype_name(ov.levels[1].index_dtype), " column indices but axis ",
                  cols_axis, "'s assembled columns are declared ", dtype_name(index_dtype));
    SPINDLE_CHECK(ov.levels[0].length <= std::numeric_limits<std::int32_t>::max(), ShapeError, "kernel '", kernel,
                  "': the assembled output '", output, "' has ", ov.levels[0].length, " rows; at most 2^31 - 1 are "
                  "supported (its column markers hold row numbers in 32 bits)");
    return {ov.levels[0].length, ov.levels[1].length};
  }

  // The call's arguments without the output (the phases' first arguments).
  std::vector<CallArg> inputs(const std::vector<CallArg>& args) const {
    std::vector<CallArg> base;
    base.reserve(args.size() + 8);
    for (std::size_t k = 0; k < args.size(); ++k)
      if (static_cast<int>(k) != output_arg()) base.push_back(args[k]);
    return base;
  }

  ShapeError with_shape_hint(const ShapeError& e, std::int64_t rows, std::int64_t cols) const {
    return ShapeError(message(e.what(), " (the assembled output '", output, "' was passed as ", rows, " x ", cols,
                              ": its rows must be the extent of ", rows_axis, " and its columns that of ", cols_axis,
                              ")"));
  }

  // row_ptr (rows + 1 entries from 0) from the symbolic phase's per-row counts; ShapeError
  // when the entries do not fit the output's index type.
  std::vector<std::int64_t> row_offsets(const std::vector<std::int64_t>& counts) const {
    std::vector<std::int64_t> row_ptr(counts.size() + 1, 0);
    for (std::size_t r = 0; r < counts.size(); ++r) row_ptr[r + 1] = row_ptr[r] + counts[r];
    const std::int64_t nnz = row_ptr.back();
    const std::int64_t index_max = index_dtype == DType::i32 ? std::numeric_limits<std::int32_t>::max()
                                                             : std::numeric_limits<std::int64_t>::max();
    SPINDLE_CHECK(nnz <= index_max, ShapeError, "kernel '", kernel, "': the assembled output '", output, "' has ", nnz,
                  " entries, more than its ", dtype_name(index_dtype), " indices can address; hint: declare the "
                  "axis assembled<P, X, std::int64_t> and pass a ", "Csr<T, std::int64_t>");
    return row_ptr;
  }

  void check_same_pattern(const std::vector<std::int64_t>& symbolic_counts,
                          const std::vector<std::int64_t>& numeric_counts) const {
    SPINDLE_CHECK(symbolic_counts == numeric_counts, InternalError, "kernel '", kernel,
                  "': the numeric phase of assembled output '", output,
                  "' wrote another pattern than its symbolic phase counted");
  }

  // Bounded rows (lower/assemble_rows.hpp): each row's numeric count within the symbolic
  // phase's bound.
  void check_within_bounds(const std::vector<std::int64_t>& bound_counts,
                           const std::vector<std::int64_t>& numeric_counts) const {
    for (std::size_t r = 0; r < bound_counts.size(); ++r)
      SPINDLE_CHECK(numeric_counts[r] <= bound_counts[r], InternalError, "kernel '", kernel,
                    "': the numeric phase of assembled output '", output, "' wrote ", numeric_counts[r],
                    " entries in row ", r, ", more than the ", bound_counts[r], " its symbolic phase bounded");
  }
};

// Block bounds for T blocks of `rows` rows: equal row counts (the symbolic phase).
inline std::vector<std::int64_t> even_blocks(std::int64_t rows, std::int64_t blocks) {
  std::vector<std::int64_t> bounds(static_cast<std::size_t>(blocks) + 1);
  for (std::int64_t t = 0; t <= blocks; ++t) bounds[static_cast<std::size_t>(t)] = rows * t / blocks;
  return bounds;
}

// Re-balanced bounds for the numeric phase: block t starts at the row whose (entries + rows)
// prefix reaches about t/T of the total.
inline void rebalance(std::vector<std::int64_t>& bounds, const std::vector<std::int64_t>& row_ptr) {
  const std::int64_t rows = static_cast<std::int64_t>(row_ptr.size()) - 1;
  const std::int64_t blocks = static_cast<std::int64_t>(bounds.size()) - 1;
  const std::int64_t total = row_ptr.back() + rows;
  for (std::int64_t t = 1, r = 0; t < blocks; ++t) {
    const std::int64_t goal = total * t / blocks;
    while (r < rows && row_ptr[static_cast<std::size_t>(r)] + r < goal) ++r;
    bounds[static_cast<std::size_t>(t)] = r;
  }
}

// The first row_ptr.back() entries of the target's arrays (those of its last allocate) are
// the output's, with row offsets `row_ptr`: the target keeps them in place when it can
// (AssemblyTarget::shrink), else they are copied into arrays allocated anew at that size.
template <class Target>
void keep_first_entries(const AssemblyPlan& p, const std::vector<std::int64_t>& row_ptr, const void* indices,
                        const void* values, Target& target) {
  const std::int64_t nnz = row_ptr.back();
  if (target.shrink(nnz, row_ptr)) return;
  const auto n = static_cast<std::size_t>(nnz);
  const auto isz = static_cast<std::size_t>(dtype_bytes(p.index_dtype));
  const auto vsz = static_cast<std::size_t>(dtype_bytes(p.value_dtype));
  const auto* x = static_cast<const char*>(indices);
  const auto* v = static_cast<const char*>(values);
  std::vector<char> kept_x(x, x + n * isz), kept_v(v, v + n * vsz);
  void* nx = nullptr;
  void* nv = nullptr;
  target.allocate(nnz, row_ptr, nx, nv);
  if (n) {
    std::memcpy(nx, kept_x.data(), n * isz);
    std::memcpy(nv, kept_v.data(), n * vsz);
  }
}

// Bounded rows (lower/assemble_rows.hpp): the target's arrays were sized by the symbolic
// phase's bounds (row offsets `row_ptr`), and block t of the numeric phase (rows [bounds[t],
// bounds[t + 1])) appended its rows' entries one after another from row_ptr[bounds[t]];
// `counts` are the rows' entries. Checks each against its bound (InternalError), moves each
// block down to where the exact offsets put it (block after block: a block's new place ends
// before the next block's entries begin), and hands the target the exact offsets (shrunk in
// place, or allocated anew and copied).
template <class Target>
void pack_bounded_rows(const AssemblyPlan& p, const std::vector<std::int64_t>& bounds,
                       const std::vector<std::int64_t>& row_ptr, const std::vector<std::int64_t>& bound_counts,
                       const std::vector<std::int64_t>& counts, void* indices, void* values, Target& target) {
  p.check_within_bounds(bound_counts, counts);
  if (counts == bound_counts) return;  // exact: every row is where row_ptr puts it
  const std::vector<std::int64_t> exact = p.row_offsets(counts);
  const auto isz = static_cast<std::size_t>(dtype_bytes(p.index_dtype));
  const auto vsz = static_cast<std::size_t>(dtype_bytes(p.value_dtype));
  auto* x = static_cast<char*>(indices);
  auto* v = static_cast<char*>(values);
  for (std::size_t t = 0; t + 1 < bounds.size(); ++t) {
    const auto first = static_cast<std::size_t>(bounds[t]), last = static_cast<std::size_t>(bounds[t + 1]);
    const auto from = static_cast<std::size_t>(row_ptr[first]), to = static_cast<std::size_t>(exact[first]);
    const auto n = static_cast<std::size_t>(exact[last] - exact[first]);
    if (from == to || n == 0) continue;
    std::memmove(x + to * isz, x + from * isz, n * isz);
    std::memmove(v + to * vsz, v + from * vsz, n * vsz);
  }
  keep_first_entries(p, exact, indices, values, target);
}

// A dense array (host or device memory) as a call argument of a phase.
inline CallArg phase_arg(const void* data, DType t, std::initializer_list<std::int64_t> shape, bool writable,
                         bool on_device = false) {
  CallArg a;
  a.view.dtype = t;
  a.view.data = const_cast<void*>(data);
  a.view.writable = writable;
  a.view.on_device = on_device;
  a.view.value_count = 1;
  for (std::int64_t n : shape) {
    LevelView l;
    l.kind = LevelKind::dense_fixed;
    l.length = n;
    a.view.levels.push_back(l);
    a.view.value_count *= n;
  }
  return a;
}

}  // namespace spindle::runtime
