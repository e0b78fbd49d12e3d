// assemble_rows: the row loop of one phase of an assembling kernel (lower/split_assembly.hpp,
// docs/language.md §4.6), at stage III. The body writes the placeholder c_row[i, x] inside the
// loop over the output's rows i; that loop becomes T blocks of rows (T = the extent of the
// scratch arrays' first dimension, bounds[] chosen by the runtime), run in parallel, each with
// its own row of the scratch arrays:
//
//   for i in [0, P):                for blk in [0, T) parallel:
//     ... c_row[i, x] op= v   ->      for i in [bounds[blk], bounds[blk + 1]):
//                                       count = 0
//                                       ... <write at x>
//                                       <row epilogue>
//
// (mark is 32-bit: i is stored and compared as int32; list holds columns in the output's index
// type.)
// symbolic: <write at x> is `fresh = mark[blk, x] != i; mark[blk, x] = i; count += fresh` (the
//           value is not computed), the epilogue `counts[i] = count`;
// numeric:  <write at x> is `fresh = mark[blk, x] != i; mark[blk, x] = i; if fresh: ws[blk, x] =
//           identity (a select); list[blk, count] = x (the slot after the row's columns: new
//           or not, under count < cols); count += fresh` then
//           `ws[blk, x] op= v` (or `= v`); the epilogue
//           stores counts[i] and copies the listed columns and their workspace values to
//           out_indices / out_values from row_ptr[i] (at most row_ptr[i + 1] - row_ptr[i]);
//           a row of at most 32 columns that fits is written in column order instead, each
//           column at its rank among the row's (the runtime's sort then finds it sorted).
// Appending (no marker, no workspace, no gather): when the output's only write sits directly in
// a co-iteration (docs/language.md §3.1: a CoIterate under the row loop, no other loop between)
// and is indexed by its coordinate, or directly in a loop whose variable is the column itself
// (a dense axis: dense -> CSR, `when(d(i, j) != 0, [&] { c(i, j) = d(i, j); })`), each row's
// columns come strictly ascending and at most once each (under a condition, some not at all),
// so the symbolic phase only counts (`count += 1`) and the numeric phase writes in place:
// `at = row_ptr[i] + count; if count < row_ptr[i + 1] - row_ptr[i]: out_indices[at] = x;
// out_values[at] = identity; out_values[at] op= v` then `count += 1` (the row is born sorted).
// The block loop then runs over the bounds (T = their extent - 1): no phase touches a scratch
// array (uses_assembly_scratch), so the runtime passes them with no rows, allocates nothing
// for them, and sorts no row.
// Either path (the host runtime's phases, AssemblyContext::sorted_fiber_rows): when the only
// write sits directly in a serial loop over the positions of one fiber of an input, at the
// coordinate stored there (`c(i, j) = a(i, j)` under a condition: prune, a pattern copy), the
// columns come strictly ascending exactly when that fiber's are, which the runtime knows per
// call (LevelView::sorted) and the kernel cannot. The block loop then holds both: `if
// append_selected(mark): <rows appended> else <rows with the marker>` (the second copy's
// loop and let variables renamed); the runtime selects appending by passing the scratch
// arrays with no blocks, and does so only when every compressed level of the inputs is
// sorted.
// Bounded rows (the host runtime's phases, AssemblyContext::bounded_rows): on the append path,
// when the write sits in a co-iteration, the symbolic phase does not run the merge: it adds
// an upper bound of the visits to the count — the sum of the operands' fiber lengths for a
// union, the least of them for an intersection (each visit advances at least one operand, and
// an intersection's body advances all) — in a block named spindle_merge_bound
// (counts_bound_merges). A merge is latency-bound (each step waits on its key loads), and the
// symbolic phase was one whole merge. The numeric phase's append path then writes each
// block's rows one after another from the first row's offset (`at = cursor + count`, `cursor
// += min(count, room)` after each row, cursor a local of the block), so a row writes inside
// its bounded slot [row_ptr[i], row_ptr[i + 1]) whatever it counts, and a block's entries are
// contiguous; the runtime checks each row's count against its bound and moves the blocks
// together. Counts that are exact leave every row where row_ptr puts it.
// A workspace restored by the gather (the host runtime's phases, AssemblyContext::
// restore_workspace; every reduction of the output with one operator): the restart of a new
// column's slot is a select over the slot's old value, which the compiler turns back into a
// branch around the load (LLVM's select-to-branch for a load operand) that mispredicts as often
// as the test (one product in three on ogbn-arxiv's SpGEMM). Instead each block fills its
// workspace row with the operator's identity before its rows, the write does `ws[blk, x] op=
// v` alone, and the epilogue stores the identity back into every slot it copies out (its
// line is in cache: it was just read), so the next row finds the identity in every slot.
// Assignments alone need neither (each new column's first write overwrites its slot).
// The marker starts at -1 (set by the runtime), so a row's first write of a column always
// counts; rows are visited once per phase, so the two phases see the same pattern, which the
// runtime checks by comparing the counts.
// Pre: stage III, unscheduled (no parallel loops yet), a function made by split_assembly; every
// write of the placeholder has the row loop's variable as its first index.
// Post: stage III; the placeholder is gone; the row blocks are the only parallel loop.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/lower/fiber_loop.hpp"
#include "spindle/support/error.hpp"

namespace spindle::lower {

// The test that takes the append path of a row loop that has both (AssembleRows' either
// path): the scratch arrays (their first extent: `mark`'s) passed with no blocks. The host
// runtime does that only when every compressed level of the call's inputs holds its fibers
// strictly ascending (runtime/assembled_kernel_impl.hpp).
inline ir::Expr append_selected(const ir::Buffer& mark) {
  return ir::binary(ir::BinOp::eq, mark->shape[0], ir::int_imm(0, mark->shape[0].dtype()));
}

namespace detail {

class AssembleRows : public ir::IRMutator {
 public:
  static constexpr std::int64_t kRankedRow = 32;  // the longest row written by ranks (epilogue)
  static constexpr const char* kMergeBound = "spindle_merge_bound";  // bounded rows (file comment)
  static constexpr const char* kRanked = "spindle_ranked";           // the ranked epilogue

  AssembleRows(const ir::Function& f, const AssemblyContext& a) : a_(a) {
    auto find = [&](const std::string& name) { return assembly_buffer(f, name, "assemble_rows"); };
    output_ = find(a.output);
    bounds_ = find(a.bounds);
    mark_ = find(a.mark);
    counts_ = find(a.counts);
    ws_ = find(a.workspace);
    list_ = find(a.list);
    row_ptr_ = find(a.row_ptr);
    out_indices_ = find(a.out_indices);
    out_values_ = find(a.out_values);
    for (const ir::FuncBuffer& b : f.buffers) {
      if (b.origin.kind == ir::ParamOrigin::indices) indices_of_[b.buffer.get()] = b.origin.axis.get();
      if (b.origin.kind == ir::ParamOrigin::indptr) indptr_of_[b.buffer.get()] = b.origin.axis.get();
    }
    if (a.restore_workspace && a.phase == AssemblyContext::numeric) restore_op_ = single_reduce_op(f.body);
  }

  ir::Function run(const ir::Function& f) {
    ir::Function out = f;
    out.body = mutate(f.body);
    std::erase_if(out.buffers, [&](const ir::FuncBuffer& b) { return b.buffer == output_; });
    return out;
  }

 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    if (row_.defined()) return IRMutator::mutate_For(n, self);  // inside the row loop
    if (!writes_buffer(self, output_.get())) return self;
    SPINDLE_INTERNAL_CHECK(n->for_kind == ir::ForKind::serial, "assemble_rows", "the row loop of '",
                           output_->name, "' is already scheduled");
    block_ = ir::Var("spindle_block", DType::i64);
    const ir::CoIterateNode* merge = nullptr;
    const Path path = choose_path(n->body, merge);
    bound_merge_ = a_.bounded_rows && a_.phase == AssemblyContext::symbolic && path == Path::append ? merge : nullptr;
    ir::Stmt body;
    if (path == Path::either) {
      // Both paths, the marker path's bindings renamed (no variable is bound twice): the
      // runtime takes the append path by passing the scratch arrays with no blocks.
      ir::Stmt appended = rows(n, n->var, n->body, true);
      ir::Var i(n->var.name(), n->var.dtype());
      ir::Stmt marked = rows(n, i, FreshBindings(n->var, i).mutate(n->body), false);
      body = ir::if_then_else(append_selected(mark_), appended, marked, n->loc);
    } else {
      body = rows(n, n->var, n->body, path == Path::append);
    }
    // The blocks: the marker's first extent, or (appending, or either path: then the scratch
    // arrays may be passed empty) one less than the block bounds'.
    const ir::Expr nblocks = path == Path::marker ? mark_->shape[0] : bounds_->shape[0] - ir::int_imm(1);
    return ir::for_loop(block_, ir::int_imm(0), nblocks, ir::ForKind::parallel, ir::IterKind::spatial,
                        "spindle_blocks", body, n->loc);
  }

  // Bounded rows, symbolic phase: the co-iteration that holds the write adds a bound of its
  // visits to the count instead of running.
  ir::Stmt mutate_CoIterate(const ir::CoIterateNode* n, const ir::Stmt& self) override {
    if (n != bound_merge_) return IRMutator::mutate_CoIterate(n, self);
    ir::Expr bound;
    for (const ir::CoIterOperand& o : n->operands) {
      const ir::Expr extent = mutate(o.extent);
      bound = !bound.defined()                 ? extent
              : n->op == ir::MergeOp::union_ ? bound + extent
                                               : ir::min(bound, extent);
    }
    const ir::Expr count = ir::load(count_, {});
    return ir::block(kMergeBound, {}, ir::store(count_, {}, count + bound, n->loc), n->loc);
  }

  ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
    if (n->buffer != output_) return IRMutator::mutate_Reduce(n, self);
    return write(n->indices, mutate(n->value), &n->op, n->loc);
  }
  // A conditional write on the append path (a `when` whose body is the write alone), without
  // a branch on the test: the slot at the count is written whatever the test gave (while it is
  // inside the row) and the count grows by the test's 0 or 1, so a failed test's slot is
  // written again by the row's next kept entry, or lies past the row's last one and is not
  // written. A test on the values (prune: |a| > t on values in [-1, 1]) is a coin toss for the
  // branch predictor: 7.1 -> 2.9 ms for that loop on ogbn-arxiv. Only where evaluating the
  // column and the value when the test fails is harmless (speculation_safe); else the branch.
  ir::Stmt mutate_IfThenElse(const ir::IfThenElseNode* n, const ir::Stmt& self) override {
    if (!row_.defined() || !append_ || n->else_case.defined()) return IRMutator::mutate_IfThenElse(n, self);
    ir::Stmt then = n->then_case;
    if (auto* sq = then.as<ir::SeqNode>(); sq && sq->stmts.size() == 1) then = sq->stmts[0];
    auto* st = then.as<ir::StoreNode>();
    auto* rd = then.as<ir::ReduceNode>();
    const bool writes_out = (st && st->buffer == output_) || (rd && rd->buffer == output_);
    if (!writes_out) return IRMutator::mutate_IfThenElse(n, self);
    const std::vector<ir::Expr>& idx = st ? st->indices : rd->indices;
    const ir::Expr& value = st ? st->value : rd->value;
    SPINDLE_INTERNAL_CHECK(idx.size() == 2 && idx[0].same_as(row_), "assemble_rows", "a write of '", output_->name,
                           "' is not indexed by its row loop");
    if (a_.phase == AssemblyContext::numeric && !speculation_safe(n->cond, {idx[1], value}))
      return IRMutator::mutate_IfThenElse(n, self);
    return append(ir::cast(DType::i64, mutate(idx[1])), mutate(value), rd ? &rd->op : nullptr, st ? st->loc : rd->loc,
                  mutate(n->cond));
  }
  ir::Stmt mutate_Store(const ir::StoreNode* n, const ir::Stmt& self) override {
    if (n->buffer != output_) return IRMutator::mutate_Store(n, self);
    return write(n->indices, mutate(n->value), nullptr, n->loc);
  }

 private:
  // The one operator of every reduction of the output (none when it has none, or two
  // different ones): the workspace restored by the gather (file comment) needs one identity.
  std::optional<ir::ReduceOp> single_reduce_op(const ir::Stmt& body) const {
    struct Ops : ir::IRVisitor {
      const ir::BufferNode* out = nullptr;
      std::set<ir::ReduceOp> ops;
      void visit_Reduce(const ir::ReduceNode* n) override {
        if (n->buffer.get() == out) ops.insert(n->op);
        ir::IRVisitor::visit_Reduce(n);
      }
    } scan;
    scan.out = output_.get();
    scan.visit(body);
    if (scan.ops.size() != 1) return std::nullopt;
    return *scan.ops.begin();
  }

  // marker: the general path; append: the row's columns come strictly ascending (the append
  // case of the file comment); either: they do when the input fiber written at is sorted.
  enum class Path { marker, append, either };

  // Rebinds every variable a loop or a let of a statement binds (and `row` to `by`): the
  // second copy of a row body.
  struct FreshBindings : ir::Substituter {
    FreshBindings(const ir::Var& row, const ir::Var& by) { add(row, by); }
    ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt&) override {
      ir::Expr min = mutate(n->min), extent = mutate(n->extent);
      ir::Var v(n->var.name(), n->var.dtype());
      add(n->var, v);
      return ir::for_loop(v, min, extent, n->for_kind, n->iter_kind, n->axis, mutate(n->body), n->loc);
    }
    ir::Stmt mutate_LetStmt(const ir::LetStmtNode* n, const ir::Stmt&) override {
      ir::Expr value = mutate(n->value);
      ir::Var v(n->var.name(), n->var.dtype());
      add(n->var, v);
      return ir::let_stmt(v, value, mutate(n->body), n->loc);
    }
  };

  // The rows [bounds[blk], bounds[blk + 1]) of loop n, as `row`, with `body` (n's body, in
  // terms of `row`) rewritten for the marker or the append path.
  ir::Stmt rows(const ir::ForNode* n, const ir::Var& row, const ir::Stmt& body, bool append) {
    row_ = row;
    append_ = append;
    count_ = ir::local_buffer("spindle_count", DType::i64);
    // Bounded rows: the numeric append path writes the block's rows one after another.
    cursor_ = append && a_.bounded_rows && a_.phase == AssemblyContext::numeric
                  ? ir::local_buffer("spindle_cursor", DType::i64)
                  : ir::Buffer();
    ir::Stmt rewritten = mutate(body);
    std::vector<ir::Stmt> s{ir::store(count_, {}, ir::int_imm(0), n->loc), rewritten, epilogue(n->loc)};
    ir::Stmt per_row = ir::block("spindle_row", {count_}, ir::seq(std::move(s), n->loc), n->loc);
    ir::Expr lo = ir::load(bounds_, {block_}), hi = ir::load(bounds_, {ir::Expr(block_) + 1});
    ir::Stmt out = ir::for_loop(row, n->min + lo, hi - lo, ir::ForKind::serial, n->iter_kind, n->axis, per_row, n->loc);
    if (!append && restore_op_) {  // the block's workspace row starts at the identity (file comment)
      ir::Var x("spindle_x", DType::i64);
      ir::Stmt fill = ir::for_loop(x, ir::int_imm(0), ws_->shape[1], ir::ForKind::serial, ir::IterKind::spatial,
                                   "spindle_fill",
                                   ir::store(ws_, {block_, x}, ir::reduce_identity(*restore_op_, ws_->dtype), n->loc),
                                   n->loc);
      out = ir::seq({fill, out}, n->loc);
    }
    if (cursor_ != nullptr)
      out = ir::block("spindle_block_rows", {cursor_},
                      ir::seq({ir::store(cursor_, {}, ir::load(row_ptr_, {n->min + lo}), n->loc), out}, n->loc),
                      n->loc);
    row_ = ir::Var();
    cursor_ = ir::Buffer();
    return out;
  }

  // Which path the row body takes: append when the output's one write is directly inside a
  // co-iteration under the row loop, at its coordinate, or directly inside a serial loop
  // whose variable is the column; either (sorted_fiber_rows only) when it is directly inside a
  // serial loop over the positions of one fiber, at the coordinate stored there.
  // `merge`: the co-iteration that holds the write, on the append path (else null).
  Path choose_path(const ir::Stmt& body, const ir::CoIterateNode*& merge) const {
    struct Scan : WriteScan {
      const ir::BufferNode* out = nullptr;
      const AssembleRows* self = nullptr;
      int writes = 0;
      bool ordered = false, fiber = false, merging = false;
      const ir::CoIterateNode* merge = nullptr;
      std::vector<const ir::CoIterateNode*> merges;  // null for a For
      std::vector<const ir::ForNode*> loops;
      void visit_CoIterate(const ir::CoIterateNode* n) override {
        merging = true;
        merges.push_back(n);
        ir::IRVisitor::visit_CoIterate(n);
        merges.pop_back();
      }
      void visit_For(const ir::ForNode* n) override {
        merges.push_back(nullptr);
        loops.push_back(n);
        ir::IRVisitor::visit_For(n);
        loops.pop_back();
        merges.pop_back();
      }
      void write(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) override {
        if (b != out) return;
        ++writes;
        ordered = fiber = false;
        merge = nullptr;
        if (merges.size() != 1 || idx.size() != 2) return;
        const ir::Expr col = strip(idx[1]);
        // A co-iteration's coordinate, or the variable of a serial loop that is the
        // coordinate itself (a dense axis: `c(i, j)` over [0, J)), counting up from its start.
        if (merges[0]) {
          ordered = col.same_as(merges[0]->var);
          merge = ordered ? merges[0] : nullptr;
          return;
        }
        const ir::ForNode* loop = loops.back();
        if (loop->for_kind != ir::ForKind::serial) return;
        ordered = col.same_as(loop->var);
        fiber = !ordered && self->fiber_coordinate(col, *loop);
      }
      static ir::Expr strip(const ir::Expr& e) {
        auto* c = e.as<ir::CastNode>();
        return c && c->value.dtype() == DType::i64 ? c->value : e;
      }
    } scan;
    scan.out = output_.get();
    scan.self = this;
    scan.visit(body);
    merge = nullptr;
    if (scan.writes != 1) return Path::marker;
    if (scan.ordered) {
      merge = scan.merge;
      return Path::append;
    }
    return scan.fiber && a_.sorted_fiber_rows && !scan.merging ? Path::either : Path::marker;
  }

  // Is `col` the coordinate that loop runs over: indices[indptr[e] + p] in
  // `for p in [0, indptr[e + 1] - indptr[e])`, indices and indptr of one compressed axis?
  bool fiber_coordinate(const ir::Expr& col, const ir::ForNode& loop) const {
    auto* widened = col.as<ir::CastNode>();  // i64(indices[...]): a wider integer holds it
    auto* ld = (widened ? widened->value : col).as<ir::LoadNode>();
    if (widened && (!is_int(widened->dtype) || dtype_bytes(widened->dtype) < dtype_bytes(widened->value.dtype())))
      return false;
    if (!ld || ld->indices.size() != 1) return false;
    auto axis = indices_of_.find(ld->buffer.get());
    auto* at = ld->indices[0].as<ir::BinaryNode>();
    if (axis == indices_of_.end() || !at || at->op != ir::BinOp::add || !at->b.same_as(loop.var)) return false;
    const ir::Expr start = fiber_loop_start(loop, [&](const ir::BufferNode* b) {
      auto ptr = indptr_of_.find(b);
      return ptr != indptr_of_.end() && ptr->second == axis->second;
    });
    return start.defined() && ir::equal(at->a, start);
  }

  // Whether the expressions `exprs` (a conditional write's column and value) may be evaluated
  // when the test `cond` fails: every element they read the test reads too (the same indices
  // into a buffer of the same shape: the same positions of a fiber's indices and values) or is
  // a local scalar, and nothing in them can trap or be undefined in C for an argument the test
  // would have excluded (integer division or remainder, integer unary operations and calls, a
  // float converted to an integer, searches).
  static bool speculation_safe(const ir::Expr& cond, const std::vector<ir::Expr>& exprs) {
    struct Reads : ir::IRVisitor {  // the loads the test always evaluates
      std::vector<const ir::LoadNode*> loads;
      void visit_Load(const ir::LoadNode* n) override {
        loads.push_back(n);
        ir::IRVisitor::visit_Load(n);
      }
      void visit_Select(const ir::SelectNode* n) override { visit(n->cond); }  // a guarded read's arms
      void visit_Binary(const ir::BinaryNode* n) override {
        visit(n->a);
        if (n->op != ir::BinOp::land && n->op != ir::BinOp::lor) visit(n->b);  // short-circuit
      }
    } guard;
    guard.visit(cond);
    struct Check : ir::IRVisitor {
      const std::vector<const ir::LoadNode*>* guard = nullptr;
      bool safe = true;
      void visit_Load(const ir::LoadNode* n) override {
        bool covered = n->indices.empty();
        for (const ir::LoadNode* g : *guard) {
          if (covered) break;
          covered = ir::equal(g->indices, n->indices) &&
                    (g->buffer == n->buffer || ir::equal(g->buffer->shape, n->buffer->shape));
        }
        safe &= covered;
        ir::IRVisitor::visit_Load(n);
      }
      void visit_Binary(const ir::BinaryNode* n) override {
        if (is_int(n->dtype) && (n->op == ir::BinOp::div || n->op == ir::BinOp::mod)) safe = false;
        ir::IRVisitor::visit_Binary(n);
      }
      void visit_Unary(const ir::UnaryNode* n) override {
        if (!is_float(n->dtype)) safe = false;
        ir::IRVisitor::visit_Unary(n);
      }
      void visit_Call(const ir::CallNode* n) override {
        if (!is_float(n->dtype)) safe = false;
        ir::IRVisitor::visit_Call(n);
      }
      void visit_Cast(const ir::CastNode* n) override {
        if (is_float(n->value.dtype()) && !is_float(n->dtype)) safe = false;
        ir::IRVisitor::visit_Cast(n);
      }
      void visit_FindPos(const ir::FindPosNode* n) override {
        safe = false;
        ir::IRVisitor::visit_FindPos(n);
      }
    } check;
    check.guard = &guard.loads;
    for (const ir::Expr& e : exprs) check.visit(e);
    return check.safe;
  }

  // The append case: count, and in the numeric phase store at the row's next position. With
  // `keep` (a conditional write, mutate_IfThenElse) the store happens whatever keep is and the
  // count grows by keep's 0 or 1.
  ir::Stmt append(const ir::Expr& col, const ir::Expr& value, const ir::ReduceOp* op, ir::SourceLoc loc,
                  const ir::Expr& keep = ir::Expr()) {
    const ir::Expr i = row_, count = ir::load(count_, {});
    ir::Stmt next = ir::store(count_, {}, keep.defined() ? count + ir::cast(DType::i64, keep) : count + 1, loc);
    if (a_.phase != AssemblyContext::numeric) return next;
    ir::Var at("spindle_at", DType::i64);
    const ir::Expr start = cursor_ != nullptr ? ir::load(cursor_, {}) : ir::load(row_ptr_, {i});
    std::vector<ir::Stmt> put{ir::store(out_indices_, {at}, ir::cast(out_indices_->dtype, col), loc)};
    if (op) {
      put.push_back(ir::store(out_values_, {at}, ir::reduce_identity(*op, out_values_->dtype), loc));
      put.push_back(ir::reduce(out_values_, {at}, *op, value, loc));
    } else {
      put.push_back(ir::store(out_values_, {at}, value, loc));
    }
    ir::Expr room = ir::load(row_ptr_, {i + 1}) - ir::load(row_ptr_, {i});
    ir::Stmt in_row = ir::if_then_else(count < room, ir::seq(std::move(put), loc), ir::Stmt(), loc);
    return ir::seq({ir::let_stmt(at, start + count, in_row, loc), next}, loc);
  }

  ir::Stmt write(const std::vector<ir::Expr>& idx, const ir::Expr& value, const ir::ReduceOp* op, ir::SourceLoc loc) {
    SPINDLE_INTERNAL_CHECK(row_.defined() && idx.size() == 2 && idx[0].same_as(row_), "assemble_rows", "a write of '",
                           output_->name, "' is not indexed by its row loop");
    if (append_) return append(ir::cast(DType::i64, idx[1]), value, op, loc);
    ir::Var x("spindle_col", DType::i64), fresh("spindle_fresh", DType::boolean);
    const ir::Expr blk = block_, col = x, i = row_, is_new = fresh;
    ir::Expr count = ir::load(count_, {});
    const ir::Expr row = ir::cast(mark_->dtype, i);  // 32-bit: the runtime checks the row count
    // Branch-free (whether a product's column is new to the row is as good as random: SpGEMM
    // mispredicted about one product in three on the FEM and graph matrices): the marker is
    // stored whatever it held, the count grows by the test's 0 or 1, and in the numeric phase
    // the workspace slot restarts from the identity when new (a select over the old value),
    // and the column goes to the list slot at the count whatever it is: the slot after the
    // row's columns so far, which the next new column overwrites (and no one reads when none
    // comes). So no write reads the list (a select over the slot would wait, each product, on
    // the previous product's store to it). Only a full list (the row has seen every column)
    // has no such slot: the test `count < cols` keeps the write out of it (always true but in
    // that case: predicted).
    std::vector<ir::Stmt> s{ir::store(mark_, {blk, col}, row, loc)};
    if (a_.phase == AssemblyContext::numeric) {
      const ir::Expr identity = ir::reduce_identity(op ? *op : ir::ReduceOp::add, ws_->dtype);
      if (!restore_op_)  // else the slot holds the identity already (a workspace restored by the gather)
        s.push_back(ir::store(ws_, {blk, col}, ir::select(is_new, identity, ir::load(ws_, {blk, col})), loc));
      s.push_back(ir::if_then_else(count < list_->shape[1],
                                   ir::store(list_, {blk, count}, ir::cast(list_->dtype, col), loc), ir::Stmt(), loc));
    }
    s.push_back(ir::store(count_, {}, count + ir::cast(DType::i64, is_new), loc));
    if (a_.phase == AssemblyContext::numeric)
      s.push_back(op ? ir::reduce(ws_, {blk, col}, *op, value, loc) : ir::store(ws_, {blk, col}, value, loc));
    ir::Stmt body = ir::let_stmt(fresh, ir::binary(ir::BinOp::ne, ir::load(mark_, {blk, col}), row),
                                 ir::seq(std::move(s), loc), loc);
    return ir::let_stmt(x, ir::cast(DType::i64, idx[1]), body, loc);
  }

  // The epilogue's copy of a slot, `copy`, followed by the slot's restart at the identity
  // when the workspace is restored by the gather (file comment).
  std::vector<ir::Stmt> restored(std::vector<ir::Stmt> copy, const ir::Expr& col, ir::SourceLoc loc) const {
    if (restore_op_)
      copy.push_back(ir::store(ws_, {block_, col}, ir::reduce_identity(*restore_op_, ws_->dtype), loc));
    return copy;
  }

  ir::Stmt epilogue(ir::SourceLoc loc) {
    const ir::Expr i = row_, count = ir::load(count_, {});
    ir::Stmt counts = ir::store(counts_, {i}, count, loc);
    if (cursor_ != nullptr) {  // bounded rows: the next row starts after this one's entries
      ir::Expr room = ir::load(row_ptr_, {i + 1}) - ir::load(row_ptr_, {i});
      return ir::seq({counts, ir::store(cursor_, {}, ir::load(cursor_, {}) + ir::min(count, room), loc)}, loc);
    }
    if (a_.phase != AssemblyContext::numeric || append_) return counts;
    ir::Var base("spindle_base", DType::i64), q("spindle_q", DType::i64), col("spindle_col", DType::i64);
    const ir::Expr blk = block_, at = ir::Expr(base) + ir::Expr(q);
    ir::Stmt copy = ir::let_stmt(
        col, ir::cast(DType::i64, ir::load(list_, {blk, q})),
        ir::seq(restored({ir::store(out_indices_, {at}, ir::cast(out_indices_->dtype, col), loc),
                          ir::store(out_values_, {at}, ir::load(ws_, {blk, col}), loc)},
                         ir::Expr(col), loc),
                loc),
        loc);
    ir::Expr room = ir::load(row_ptr_, {i + 1}) - ir::Expr(base);
    ir::Stmt gather = ir::for_loop(q, ir::int_imm(0), ir::min(count, room), ir::ForKind::serial, ir::IterKind::spatial,
                                   "spindle_gather", copy, loc);
    // A short row (at most kRankedRow columns, all of which fit the row) is written in column
    // order: each listed column goes to its rank among the row's columns (how many listed
    // columns are smaller; the list holds each column once). Its n^2 comparisons are one or two
    // vector steps per column, cheaper than the runtime's sort pass over the row afterwards.
    // (Compared and counted in the list's index type: 16 lanes of a 512-bit vector for 32-bit.)
    const DType lt = list_->dtype;
    ir::Buffer rank = ir::local_buffer("spindle_rank", lt);
    ir::Var p("spindle_p", DType::i64), key("spindle_key", lt), to("spindle_to", DType::i64);
    ir::Stmt tally = ir::for_loop(
        p, ir::int_imm(0), count, ir::ForKind::serial, ir::IterKind::reduction, "spindle_rank",
        ir::store(rank, {},
                  ir::load(rank, {}) + ir::cast(lt, ir::binary(ir::BinOp::lt, ir::load(list_, {blk, p}), ir::Expr(key))),
                  loc),
        loc);
    ir::Stmt put = ir::let_stmt(
        to, ir::Expr(base) + ir::cast(DType::i64, ir::load(rank, {})),
        ir::seq(restored({ir::store(out_indices_, {ir::Expr(to)}, ir::cast(out_indices_->dtype, key), loc),
                          ir::store(out_values_, {ir::Expr(to)}, ir::load(ws_, {blk, ir::cast(DType::i64, key)}), loc)},
                         ir::cast(DType::i64, key), loc),
                loc),
        loc);
    ir::Stmt place = ir::let_stmt(key, ir::load(list_, {blk, q}),
                                  ir::seq({ir::store(rank, {}, ir::int_imm(0, lt), loc), tally, put}, loc), loc);
    ir::Stmt ranked = ir::block(kRanked, {rank},
                                ir::for_loop(q, ir::int_imm(0), count, ir::ForKind::serial, ir::IterKind::spatial,
                                             "spindle_place", place, loc),
                                loc);
    ir::Expr short_row =
        ir::binary(ir::BinOp::land, ir::binary(ir::BinOp::le, count, ir::int_imm(kRankedRow)),
                   ir::binary(ir::BinOp::le, count, room));
    return ir::seq({counts, ir::let_stmt(base, ir::load(row_ptr_, {i}),
                                         ir::if_then_else(short_row, ranked, gather, loc), loc)},
                   loc);
  }

  const AssemblyContext& a_;
  ir::Buffer output_, bounds_, mark_, counts_, ws_, list_, row_ptr_, out_indices_, out_values_;
  std::map<const ir::BufferNode*, const ir::AxisNode*> indices_of_, indptr_of_;  // the axis they store
  ir::Var row_, block_;
  ir::Buffer count_, cursor_;
  const ir::CoIterateNode* bound_merge_ = nullptr;
  bool append_ = false;
  // The operator whose identity the workspace is restored to (AssemblyContext::
  // restore_workspace, numeric phase, one reduction operator), else none.
  std::optional<ir::ReduceOp> restore_op_;
};

}  // namespace detail

// Whether phase `f` (stage III, assemble_rows run) has a row loop with both paths.
inline bool appends_when_selected(const ir::Function& f, const AssemblyContext& a) {
  if (a.mark.empty()) return false;
  const ir::Expr test = append_selected(assembly_buffer(f, a.mark, "appends_when_selected"));
  struct Find : ir::IRVisitor {
    ir::Expr test;
    bool found = false;
    void visit_IfThenElse(const ir::IfThenElseNode* n) override {
      found = found || ir::equal(n->cond, test);
      ir::IRVisitor::visit_IfThenElse(n);
    }
  } find;
  find.test = test;
  find.visit(f.body);
  return find.found;
}

// Whether the symbolic phase `f` (stage III, assemble_rows run) counts an upper bound of some
// row's entries (bounded rows: a co-iteration replaced by the bound of its visits), so that
// the numeric phase's counts may be smaller.
inline bool counts_bound_merges(const ir::Function& f) {
  return has_block(f, detail::AssembleRows::kMergeBound);
}

// The longest row that the lowered numeric phase `f` writes in column order itself (the
// ranked epilogue of the workspace path: every row of at most kRankedRow columns), or 0 when
// it has no such epilogue: the runtime's row sort (runtime/sort_rows.hpp) skips those rows.
inline std::int64_t ranks_short_rows(const ir::Function& f) {
  return has_block(f, detail::AssembleRows::kRanked) ? detail::AssembleRows::kRankedRow : 0;
}

// Whether the lowered phase `f` (scheduled stage III, assemble_rows run) reads or writes one
// of the per-block scratch arrays: the column marker (both phases), the workspace and the
// touched-column list (numeric).
inline bool uses_assembly_scratch(const ir::Function& f, const AssemblyContext& a) {
  struct Find : ir::IRVisitor {
    std::set<std::string> names;
    bool found = false;
    void visit_Load(const ir::LoadNode* n) override {
      found = found || names.count(n->buffer->name);
      ir::IRVisitor::visit_Load(n);
    }
    void visit_Store(const ir::StoreNode* n) override {
      found = found || names.count(n->buffer->name);
      ir::IRVisitor::visit_Store(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      found = found || names.count(n->buffer->name);
      ir::IRVisitor::visit_Reduce(n);
    }
  } find;
  for (const std::string* n : {&a.mark, &a.workspace, &a.list})
    if (!n->empty()) find.names.insert(*n);
  find.visit(f.body);
  return find.found;
}

// Whether the numeric phase `f` (scheduled stage III, assemble_rows run) appends its rows in
// column order (the append case above: it never touches the workspace), so that the runtime
// need not sort them.
inline bool rows_appended(const ir::Function& f, const AssemblyContext& a) {
  return a.phase == AssemblyContext::numeric && !uses_assembly_scratch(f, a);
}

inline ir::Function assemble_rows(const ir::Function& f, const LowerContext& ctx) {
  if (ctx.assembly.phase == AssemblyContext::none) return f;
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "assemble_rows", "expects stage III");
  return detail::AssembleRows(f, ctx.assembly).run(f);
}

}  // namespace spindle::lower
