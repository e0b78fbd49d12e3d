// What every lowering pass may know besides the IR itself. Passes are pure functions of
// (Function, LowerContext): no globals, no environment reads.
#pragma once

#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/schedule/user_schedule.hpp"
#include "spindle/support/error.hpp"

namespace spindle::lower {

// A kernel that assembles a sparse output (docs/language.md §4.6) is compiled twice from
// one stage-I function: lower/split_assembly.hpp makes the stage-I function of each phase and
// names its buffers here; lower/assemble_rows.hpp rewrites the row loop at stage III (or
// lower/assemble_scattered.hpp the writes, when the rows are scattered).
struct AssemblyContext {
  enum Phase : unsigned char { none, symbolic, numeric };
  Phase phase = none;
  // The rows are scattered (lower/split_assembly.hpp, rows_scattered): the phases collect the
  // writes per row (lower/assemble_scattered.hpp) instead of assembling rows one at a time.
  bool scattered = false;
  // The host runtime's phases (not CUDA's): a row whose only write sits at the coordinates of
  // one fiber of an input, in the loop over that fiber's positions (prune, a pattern copy),
  // gets both the marker path and the append path, chosen per call (lower/assemble_rows.hpp).
  bool sorted_fiber_rows = false;
  // The host runtime's phases (not CUDA's): where a row's only write sits in a co-iteration and
  // is appended (lower/assemble_rows.hpp), the symbolic phase counts an upper bound of the
  // row's entries from the merged fibers' lengths instead of running the merge, and the
  // numeric phase appends each block's rows one after another from the block's first row
  // offset; the runtime then moves the blocks together (runtime/assembled_kernel_impl.hpp).
  bool bounded_rows = false;
  // The host runtime's phases (not CUDA's): on the marker path of the numeric phase, each block
  // fills its workspace row with the writes' identity once, and each row's epilogue restores
  // the slots it copies out, so a column new to a row finds the identity there and the write
  // needs no restart (lower/assemble_rows.hpp, "A workspace restored by the gather").
  bool restore_workspace = false;
  std::string output;                      // the placeholder over [P, dense<X>] the body writes
  std::string bounds, mark, counts;        // both phases
  std::string workspace, list, row_ptr;    // numeric
  std::string out_indices, out_values;     // numeric
};

// The buffer of f that an AssemblyContext names (null for an empty name); `pass` for the
// message when f has none of that name.
inline ir::Buffer assembly_buffer(const ir::Function& f, const std::string& name, const char* pass) {
  if (name.empty()) return ir::Buffer();
  for (auto& fb : f.buffers)
    if (fb.buffer->name == name) return fb.buffer;
  throw InternalError(message(pass, ": kernel '", f.name, "' has no buffer '", name, "'"));
}

// Calls write(buffer, indices) for every Store and Reduce, in program order (the assembly
// passes' scans of an output's writes).
struct WriteScan : ir::IRVisitor {
  virtual void write(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) = 0;
  void visit_Store(const ir::StoreNode* n) override {
    write(n->buffer.get(), n->indices);
    ir::IRVisitor::visit_Store(n);
  }
  void visit_Reduce(const ir::ReduceNode* n) override {
    write(n->buffer.get(), n->indices);
    ir::IRVisitor::visit_Reduce(n);
  }
};

// Whether s writes buffer b.
inline bool writes_buffer(const ir::Stmt& s, const ir::BufferNode* b) {
  struct Find : WriteScan {
    const ir::BufferNode* b = nullptr;
    bool found = false;
    void write(const ir::BufferNode* x, const std::vector<ir::Expr>&) override { found = found || x == b; }
  } f;
  f.b = b;
  f.visit(s);
  return f.found;
}

// Whether f holds a block named `name` (the markers assemble_rows and assemble_scattered
// leave for the runtime).
inline bool has_block(const ir::Function& f, const std::string& name) {
  struct Find : ir::IRVisitor {
    const std::string* name = nullptr;
    bool found = false;
    void visit_Block(const ir::BlockNode* n) override {
      found = found || n->name == *name;
      ir::IRVisitor::visit_Block(n);
    }
  } find;
  find.name = &name;
  find.visit(f.body);
  return find.found;
}

struct LowerContext {
  std::string kernel;       // for messages
  int num_threads = 1;      // of the target (CPU schedules)
  int vector_bits = 256;    // SIMD width of the target in bits (CPU schedules)
  std::int64_t l2_bytes = 512 * 1024;  // a core's L2 cache (CPU schedules: block_long_reductions)
  bool keep_loop_order = false;  // order_iterations leaves every iteration as written
  AssemblyContext assembly;      // phase none: an ordinary kernel
  // The user's schedule (schedule/user_schedule.hpp): its sparse_reorder steps run after
  // order_iterations; its loop steps replace the default schedule of the target.
  Schedule schedule;
};

}  // namespace spindle::lower
