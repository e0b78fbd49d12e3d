// split_assembly: the stage-I function of one phase of a kernel that assembles a sparse
// output (docs/language.md §4.6). The kernel writes c[P, C], C = assembled<P, X>: a CSR whose
// pattern is the set of coordinates the kernel writes. It runs in two phases, each a compiled
// kernel made from the same body:
//
//   symbolic  counts the distinct columns written in each row      -> spindle_counts[P]
//   (host)    prefix sums -> row_ptr, sizes the output's indices and values
//   numeric   accumulates each row in a dense workspace, lists the columns it touches, and
//             gathers them into out_indices / out_values at row_ptr[i] (unsorted in a row)
//   (host)    sorts each row by column
//
// This pass makes the phase's function: the user's output argument is removed (later
// arguments move down by one), the body writes a placeholder over [P, dense<X>] instead (the
// row rewrite of lower/assemble_rows.hpp replaces its writes at stage III), and the phase's
// scratch arrays are appended as arguments: block bounds, a column marker per block, row counts;
// numeric also the workspace, the touched-column list, row_ptr and the output arrays. Each is a
// dense buffer over fresh root axes, or over P and X's coordinates, so the binder checks the
// output's row and column counts against the inputs like any other argument.
// Pre: stage I after the front end's checks (check_assembled_outputs), one assembled output.
// Post: stage I; names of the placeholder and scratch buffers in the returned context.
#pragma once

#include <algorithm>
#include <set>
#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/support/error.hpp"

namespace spindle::lower {

// The buffer of f over an assembled axis, or null.
inline const ir::FuncBuffer* assembled_output(const ir::Function& f) {
  for (auto& fb : f.buffers)
    if (ir::is_assembled(*fb.buffer)) return &fb;
  return nullptr;
}

// Whether some write of f's assembled output c is not at the row of its top-level iteration's
// first iterator over a dense P (docs/language.md §4.6): the rows are then scattered, and the
// phases collect the writes (lower/assemble_scattered.hpp) instead of assembling row by row.
inline bool rows_scattered(const ir::Function& f) {
  const ir::FuncBuffer* out = assembled_output(f);
  if (!out) return false;
  struct Scan : WriteScan {
    const ir::BufferNode* c = nullptr;
    const ir::AxisNode* space = nullptr;
    const ir::SparseIterationNode* top = nullptr;
    bool scattered = false;
    void visit_SparseIteration(const ir::SparseIterationNode* n) override {
      const bool outer = !top;
      if (outer) top = n;
      ir::IRVisitor::visit_SparseIteration(n);
      if (outer) top = nullptr;
    }
    void write(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) override {
      if (b != c) return;
      bool by_row = top && !top->vars.empty() && idx.size() == 2 && idx[0].same_as(top->vars[0]);
      if (by_row) {
        const ir::Axis& r = top->axes[0];
        by_row = !r->parent && r->kind == ir::AxisKind::dense_fixed && r->merge == ir::MergeOp::none &&
                 ir::coordinate_space(r) == space;
      }
      scattered = scattered || !by_row;
    }
  } scan;
  scan.c = out->buffer.get();
  scan.space = ir::coordinate_space(out->buffer->axes[0]);
  scan.visit(f.body);
  return scan.scattered;
}

struct AssemblyPhase {
  ir::Function function;  // stage I
  AssemblyContext context;
  int output_arg = -1;  // the user's argument index of the output (not an argument of `function`)
  int user_args = 0;    // the user's arguments other than the output: arguments 0 .. user_args-1
};

inline AssemblyPhase split_assembly(const ir::Function& f, AssemblyContext::Phase phase) {
  const ir::FuncBuffer* out_fb = assembled_output(f);
  SPINDLE_INTERNAL_CHECK(out_fb && phase != AssemblyContext::none, "split_assembly",
                         "kernel '", f.name, "' has no assembled output");
  const ir::Buffer c = out_fb->buffer;
  const ir::Axis rows = c->axes[0], cols = c->axes[1];
  const int out_arg = out_fb->origin.arg;

  std::set<std::string> taken;
  for (auto& fb : f.buffers) taken.insert(fb.buffer->name);
  for (auto& a : f.axes) taken.insert(a->name);
  for (auto& s : f.scalars) taken.insert(s.var.name());
  auto unique = [&](const std::string& base) {
    std::string n = base;
    for (int k = 2; taken.count(n); ++k) n = base + "_" + std::to_string(k);
    taken.insert(n);
    return n;
  };

  AssemblyPhase out;
  out.output_arg = out_arg;
  ir::Function& g = out.function;
  g = f;
  g.buffers.clear();
  g.scalars.clear();
  g.axes.clear();
  auto moved = [&](int arg) { return arg > out_arg ? arg - 1 : arg; };
  for (auto& fb : f.buffers) {
    if (fb.buffer == c) continue;
    ir::FuncBuffer b = fb;
    if (b.origin.kind == ir::ParamOrigin::values) b.origin.arg = moved(b.origin.arg), ++out.user_args;
    g.buffers.push_back(b);
  }
  for (auto& s : f.scalars) {
    if (s.origin.axis == cols) continue;  // C's nnz: the pattern is what this kernel makes
    ir::FuncScalar x = s;
    if (x.origin.kind == ir::ParamOrigin::scalar) x.origin.arg = moved(x.origin.arg), ++out.user_args;
    g.scalars.push_back(x);
  }
  for (auto& a : f.axes)
    if (a != cols) g.axes.push_back(a);

  auto root_axis = [&](const std::string& base) {
    auto node = std::make_shared<ir::AxisNode>();
    node->name = unique(base);
    node->kind = ir::AxisKind::dense_fixed;
    ir::Var len(unique(node->name + "_len"), DType::i64);
    node->length = len;
    ir::Axis a = node;
    g.axes.push_back(a);
    g.scalars.push_back({len, {ir::ParamOrigin::length, -1, a}});
    return a;
  };
  auto columns = std::make_shared<ir::AxisNode>();  // dense<X>
  columns->name = unique(ir::coordinate_space(cols)->name + "_dense");
  columns->kind = ir::AxisKind::dense_fixed;
  columns->length = cols->length;
  columns->dense_of = cols->coordinates_of;
  const ir::Axis xs = columns;
  g.axes.push_back(xs);

  int next_arg = out.user_args;
  auto buffer = [&](const std::string& base, DType t, std::vector<ir::Axis> axes, ir::BufferRole role) {
    ir::BufferNode b;
    b.name = unique(base);
    b.dtype = t;
    b.axes = std::move(axes);
    b.role = role;
    g.buffers.push_back({ir::make_buffer(b), {ir::ParamOrigin::values, next_arg++, nullptr}});
    return b.name;
  };

  AssemblyContext& ctx = out.context;
  ctx.phase = phase;
  ctx.scattered = rows_scattered(f);
  const ir::Axis blocks = root_axis("spindle_blocks");
  ctx.bounds = buffer("spindle_block_rows", DType::i64, {root_axis("spindle_blocks_plus_one")}, ir::BufferRole::input);
  // Named after the output: a shape error of the call names them (`C_columns`, `C_rows`).
  // The marker holds a row number in 32 bits (the runtime refuses outputs of 2^31 rows or
  // more); the touched list a column in the output's index type: half the scratch traffic of
  // 64-bit entries on the common 32-bit case.
  ctx.mark = buffer(c->name + "_columns", DType::i32, {blocks, xs}, ir::BufferRole::inout);
  // Scattered rows (lower/assemble_scattered.hpp): a row of counts per block of the outermost
  // loop, [T, P].
  ctx.counts = ctx.scattered
                   ? buffer(c->name + "_rows", DType::i64, {root_axis("spindle_count_blocks"), rows}, ir::BufferRole::inout)
                   : buffer(c->name + "_rows", DType::i64, {rows}, ir::BufferRole::inout);
  if (phase == AssemblyContext::numeric) {
    ctx.workspace = buffer("spindle_workspace", c->dtype, {blocks, xs}, ir::BufferRole::inout);
    ctx.list = buffer("spindle_touched", cols->index_dtype, {blocks, xs}, ir::BufferRole::inout);
    ctx.row_ptr = buffer("spindle_row_ptr", DType::i64, {root_axis("spindle_rows_plus_one")}, ir::BufferRole::input);
    const ir::Axis nnz = root_axis("spindle_nnz");
    ctx.out_indices = buffer(c->name + "_indices", cols->index_dtype, {nnz}, ir::BufferRole::inout);
    ctx.out_values = buffer(c->name + "_values", c->dtype, {nnz}, ir::BufferRole::inout);
  }

  // The placeholder the body writes: c over [P, dense<X>], not a call argument.
  // Named as the output (which this function no longer has): a call error that names the
  // buffer a write goes to (an indirect index out of range) names the user's.
  ir::BufferNode ph = *c;
  ph.axes = {rows, xs};
  ph.role = ir::BufferRole::inout;
  const ir::Buffer placeholder = ir::make_buffer(ph);
  g.buffers.push_back({placeholder, {ir::ParamOrigin::values, -1, nullptr}});
  ctx.output = ph.name;

  struct Swap : ir::IRMutator {
    ir::Buffer from, to;
    ir::Buffer mutate_buffer(const ir::Buffer& b) override { return b == from ? to : b; }
  } swap;
  swap.from = c;
  swap.to = placeholder;
  g.body = swap.mutate(f.body);
  g.name = f.name + (phase == AssemblyContext::symbolic ? "_symbolic" : "_numeric");
  return out;
}

}  // namespace spindle::lower
