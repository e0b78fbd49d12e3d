// block_long_reductions: a spatial loop whose every iteration re-reads the rows of one long
// reduction (the weight gradient XᵀdC in Spindle's order k, i, n: for each k, every row i
// of x and dC) reads them once per block of rows instead, while they are in the cache:
//
//                                         let i_block_rows = <rows>
//   for k in [0, K):                        if E <= i_block_rows: the loop as it was
//     init(k)                               else:
//     for i in [m, m + E) reduction:   ->     for k in [0, K): init(k)                   (nest A)
//       body(k, i)                            for i_blk in [0, ceil(E / rows)) reduction: (nest B)
//                                               for k in [0, K):
//                                                 for i in [m + i_blk * rows, m + i_blk * rows
//                                                          + min(rows, E - i_blk * rows)) reduction:
//                                                   body(k, i)
//
// Each element keeps its updates in the same order (init, then i ascending). The default CPU schedule then runs the k loop inside each block
// in parallel (one parallel region per block: `block_loops` names the block loops) and
// register_tile accumulates its tiles from the output (no init in nest B).
//
// Applies to an outermost serial spatial loop L whose body is zero or more statements
// (the init: stores only) followed by one serial reduction loop R, when
//   - every write in L (stores in the init, reductions in R; no atomics, no locals) goes to a
//     global buffer with L's variable itself as its index in one slot, the same slot in every
//     write to that buffer: the iterations of L write disjoint elements, so they may run in
//     any order;
//   - nothing in L reads a buffer that L writes, and R's bounds do not depend on L;
//   - R's body reads something that depends on R's variable and not on L's: data that every
//     iteration of L reads again (dC above; in SpMM-like nests, where the output row is the
//     outer loop and the reduction reads the row's own data, there is nothing to gain).
// The block's rows are computed at call time from the symbolic extents:
//   rows = max(256, L2 / W, 8 * |L| * Wc / W)
// W the bytes per row of R of the buffers R's body reads by R's variable (the trailing
// extents after its slot: x's K and dC's N floats above), Wc the output's bytes per iteration
// of L, L2 a core's L2 cache (LowerContext::l2_bytes, the host's): a block's rows fill the L2
// cache, and there are enough of them that the output's read and write-back per block cost at
// most an eighth of the block's rows (so a GEMM-like nest with a long outer loop runs one
// block: the loop as it was).
// Pre/post: stage III, before register_tile; each element's updates stay in the same order
// (a later pass that sums a block into a local first, accumulate_locally, reassociates that
// sum as it does any other).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/simplify.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

// Product of buffer b's extents after slot `slot` (1 when none), or undefined when an
// extent is missing.
inline ir::Expr trailing_elements(const ir::BufferNode& b, std::size_t slot, DType t) {
  ir::Expr w = ir::int_imm(1, t);
  for (std::size_t s = slot + 1; s < b.shape.size(); ++s) {
    if (!b.shape[s].defined()) return ir::Expr();
    w = w * ir::cast(t, b.shape[s]);
  }
  return w;
}

class LongReductionBlocking : public ir::IRMutator {
 public:
  std::set<std::string> block_loops;
  std::set<std::string> names;  // every loop name in the function (fresh names avoid them)
  std::int64_t l2_bytes = 512 * 1024;

  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt out = block(*n, self);
    return out.defined() ? out : self;  // loops inside loops are not outermost: not visited
  }
  ir::Stmt mutate_CoIterate(const ir::CoIterateNode*, const ir::Stmt& self) override { return self; }

 private:
  // L rewritten (`self` is L as a statement), or undefined when the rule does not apply.
  ir::Stmt block(const ir::ForNode& L, const ir::Stmt& self) {
    if (L.for_kind != ir::ForKind::serial || L.iter_kind != ir::IterKind::spatial) return {};
    std::vector<ir::Stmt> init;
    const ir::ForNode* R = nullptr;
    if (auto* s = L.body.as<ir::SeqNode>()) {
      if (s->stmts.empty()) return {};
      init.assign(s->stmts.begin(), s->stmts.end() - 1);
      R = s->stmts.back().as<ir::ForNode>();
    } else {
      R = L.body.as<ir::ForNode>();
    }
    if (!R || R->for_kind != ir::ForKind::serial || R->iter_kind != ir::IterKind::reduction) return {};
    const std::set<const ir::ExprNode*> outer_vars = {L.var.get()};
    if (uses_any(R->min, outer_vars) || uses_any(R->extent, outer_vars)) return {};
    if (auto e = const_int(R->extent); e && *e <= 256) return {};
    if (auto e = const_int(L.extent); e && *e <= 1) return {};

    // Writes: disjoint across L's iterations, none of them read.
    ir::Stmt init_stmt = init.empty() ? ir::Stmt() : (init.size() == 1 ? init[0] : ir::seq(init, L.loc));
    BufferUses in_init = init_stmt.defined() ? buffer_uses(init_stmt) : BufferUses{};
    BufferUses in_r = buffer_uses(R->body);
    if (!in_init.reduces.empty() || !in_r.stores.empty() || in_r.reduces.empty()) return {};
    if (!in_init.allocated.empty() || !in_r.allocated.empty()) return {};
    std::set<const ir::BufferNode*> written;
    const ir::BufferNode* output = nullptr;
    // Each written buffer is owned through one slot, indexed by L's variable itself in every
    // write to it (c[k, n] = 0 with c[n, k] += ... would let iteration k overwrite what
    // iteration n added).
    std::map<const ir::BufferNode*, std::size_t> slot_of;
    auto owned = [&](const ir::BufferNode& b, const std::vector<ir::Expr>& idx) {
      if (b.scope != ir::BufferScope::global) return false;
      auto it = slot_of.find(&b);
      if (it != slot_of.end()) return it->second < idx.size() && idx[it->second].same_as(L.var);
      for (std::size_t q = 0; q < idx.size(); ++q)
        if (idx[q].same_as(L.var)) {
          slot_of[&b] = q;
          return true;
        }
      return false;
    };
    for (auto* s : in_init.stores) {
      if (!owned(*s->buffer, s->indices)) return {};
      written.insert(s->buffer.get());
    }
    for (auto* r : in_r.reduces) {
      if (r->atomic || !owned(*r->buffer, r->indices)) return {};
      written.insert(r->buffer.get());
      output = r->buffer.get();
    }
    for (auto* uses : {&in_init, &in_r})
      for (auto* l : uses->loads)
        if (written.count(l->buffer.get())) return {};

    // Profit: rows of R that every iteration of L reads again; W sums their widths (bytes).
    const DType t = DType::i64;
    ir::Expr W;
    const std::set<const ir::ExprNode*> r_var = {R->var.get()};
    std::set<const ir::BufferNode*> counted;
    bool reread = false;
    for (auto* l : in_r.loads) {
      if (!uses_any(l->indices, r_var) || l->buffer->scope != ir::BufferScope::global) continue;
      reread = reread || !uses_any(l->indices, outer_vars);
      if (!counted.insert(l->buffer.get()).second) continue;
      for (std::size_t s = 0; s < l->indices.size(); ++s)
        if (uses_any(l->indices[s], r_var)) {
          if (ir::Expr w = trailing_elements(*l->buffer, s, t); w.defined()) {
            w = lower::simplify(w * ir::int_imm(dtype_bytes(l->buffer->dtype), t));
            W = W.defined() ? W + w : w;
          }
          break;
        }
    }
    if (!reread) return {};
    if (!W.defined()) W = ir::int_imm(1, t);
    ir::Expr Wc = ir::int_imm(1, t);
    for (auto* r : in_r.reduces)
      if (r->buffer.get() == output) {
        for (std::size_t s = 0; s < r->indices.size(); ++s)
          if (r->indices[s].same_as(L.var)) {
            ir::Expr w = trailing_elements(*output, s, t);
            if (w.defined()) Wc = lower::simplify(w * ir::int_imm(dtype_bytes(output->dtype), t));
            break;
          }
        break;
      }

    const std::string blk_name = fresh(R->var.name() + "_blk"), rows_name = fresh(R->var.name() + "_block_rows");
    ir::Var rows(rows_name, t), blk(blk_name, t), k(L.var.name(), L.var.dtype()), k_init(L.var.name(), L.var.dtype()),
        i(R->var.name(), R->var.dtype());
    ir::Expr Wpos = ir::max(W, ir::int_imm(1, t));
    ir::Expr rows_value = lower::simplify(ir::max(
        ir::int_imm(256, t),
        ir::max(ir::int_imm(l2_bytes, t) / Wpos, ir::int_imm(8, t) * ir::cast(t, L.extent) * Wc / Wpos)));
    const DType it = R->var.dtype();
    ir::Expr start = lower::simplify(R->min + ir::cast(it, ir::Expr(blk) * rows));
    ir::Expr count = lower::simplify(ir::cast(it, ir::min(ir::Expr(rows), ir::cast(t, R->extent) - ir::Expr(blk) * rows)));
    ir::Stmt rows_loop = ir::for_loop(i, start, count, ir::ForKind::serial, ir::IterKind::reduction, R->axis,
                                      substitute(R->body, R->var, i), R->loc);
    ir::Stmt per_k = substitute(rows_loop, L.var, k);
    ir::Stmt k_loop = ir::for_loop(k, L.min, L.extent, ir::ForKind::serial, ir::IterKind::spatial, L.axis, per_k, L.loc);
    ir::Stmt blocks = ir::for_loop(blk, ir::int_imm(0, t), (ir::cast(t, R->extent) + rows - ir::int_imm(1, t)) / rows,
                                   ir::ForKind::serial, ir::IterKind::reduction, R->axis, k_loop, R->loc);
    block_loops.insert(blk_name);
    std::vector<ir::Stmt> out;
    if (init_stmt.defined())
      out.push_back(ir::for_loop(k_init, L.min, L.extent, ir::ForKind::serial, ir::IterKind::spatial, L.axis,
                                 substitute(init_stmt, L.var, k_init), L.loc));
    out.push_back(blocks);
    // One block: the loop as it was (no second pass over the output for its init).
    ir::Stmt chosen = ir::if_then_else(lower::simplify(ir::cast(t, R->extent) <= ir::Expr(rows)), self,
                                       ir::seq(std::move(out), L.loc), L.loc);
    return ir::let_stmt(rows, rows_value, chosen, L.loc);
  }

  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int q = 2; names.count(n); ++q) n = base + std::to_string(q);
    names.insert(n);
    return n;
  }
};

}  // namespace detail

// Returns the rewritten body; the names of the block loops it made go into `block_loops`.
inline ir::Stmt block_long_reductions(const ir::Stmt& body, std::set<std::string>& block_loops,
                                      const ir::Function& f, std::int64_t l2_bytes = 512 * 1024) {
  detail::LongReductionBlocking b;
  b.l2_bytes = l2_bytes;
  for (auto* v : detail::bound_vars(body)) b.names.insert(static_cast<const ir::VarNode*>(v)->name);
  for (auto& s : f.scalars) b.names.insert(s.var.name());
  ir::Stmt out = b.mutate(body);
  block_loops.insert(b.block_loops.begin(), b.block_loops.end());
  return out;
}

}  // namespace spindle::schedule
