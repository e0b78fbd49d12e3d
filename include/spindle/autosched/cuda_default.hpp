// The default CUDA schedules, applied to the unscheduled stage-III function when the user
// gives none. Every top-level loop nest becomes one launch.
//
//   SpMM pattern (row loop i; `c[i,k] = init` over k; reduction over the row's nonzeros j
//   of `c[i,k] += f(j,k)` over k) -> GE-SpMM style: a warp per row (blockDim = 32 x R rows),
//   feature lanes across threadIdx.x with `cf` columns per thread accumulated in registers
//   (cache_write), the row's per-nonzero operands (column index, value: every load that
//   depends on j but not on k) staged 32 at a time in shared memory by the warp (cache_read
//   with coalesced row caching, __syncwarp), and coalesced loads of the dense rows: column
//   c*32 + lane, or with `vector` lane*4 + c as one float4. Each feature tile of 32*cf
//   columns is a block row of the grid (blockIdx.y). Over a CSR with `nnz_parallel`
//   (SPINDLE_CUDA_SPMM=nonzeros) instead: a first launch stores C's init value, a second
//   gives each warp a chunk of consecutive nonzeros (long rows split across warps; a warp
//   finds its first row by a binary search of X) and adds each row segment's registers
//   into C with atomic adds.
//
//   SDDMM pattern (row loop i; nonzero loop j; `d[i,j] = init`; reduction over k of
//   `d[i,j] += f(j,k)`) -> PRedS style: groups of `lanes` threads per nonzero, each thread
//   reducing a strided part of k with float4 loads when `vector`, then a warp_sum over the
//   group (rfactor with a warp-level reduction) and one write per nonzero. Over a CSR (the
//   nonzero loop's extent is X[i+1] - X[i]) the nonzeros of all rows are split evenly across
//   warps in chunks of consecutive positions, a warp finding its chunk's first row by a
//   binary search of X and its groups stepping forward from there (`nnz_parallel`, the
//   default: a skewed graph's longest row no longer sets the time); otherwise a warp per row
//   with 32/lanes nonzeros in flight.
//
//   Anything else -> a thread per iteration of the outermost loop (blockDim 128), with
//   reductions that stay inside one iteration accumulated in registers; a top-level
//   reduction loop writes back with atomics, unless it reads what it reduces into
//   (`c[j] += c[j] + x`: order-dependent), which runs in order on one thread, like a
//   statement that is not a loop.
//
// The SpMM/SDDMM parameters depend on the feature size (the extent of the k loop), which is
// symbolic: cuda_plan() finds the pattern and the expression of the feature size, and
// cuda_variant() picks the parameters from its value at call time; the runtime compiles one
// kernel per variant (a handful in total, each cached).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/schedule/accumulate_locally.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::autosched {

enum class CudaPattern : std::uint8_t { generic, spmm, sddmm };

inline const char* cuda_pattern_name(CudaPattern p) {
  switch (p) {
    case CudaPattern::generic: return "generic";
    case CudaPattern::spmm: return "spmm (GE-SpMM)";
    case CudaPattern::sddmm: return "sddmm (PRedS)";
  }
  return "?";
}

// Parameters of one compiled variant.
struct CudaVariant {
  int cf = 1;           // spmm: feature columns per thread
  int lanes = 32;       // sddmm: threads per nonzero (power of two <= 32)
  bool vector = false;  // float4 (spmm with cf == 4, sddmm) loads; needs feature % 4 == 0
  int rows_per_block = 4;
  bool nnz_parallel = false;  // sddmm over a CSR: nonzeros split evenly across groups (else a warp per row)
  int key() const { return (nnz_parallel ? 100000 : 0) + cf * 1000 + lanes * 10 + (vector ? 1 : 0); }
  std::string describe() const {
    return message("cf=", cf, " lanes=", lanes, vector ? " float4" : "", " rows/block=", rows_per_block,
                   nnz_parallel ? " nonzero-parallel" : "");
  }
};

struct CudaPlan {
  CudaPattern pattern = CudaPattern::generic;
  ir::Expr feature;  // extent of the feature loop (over scalar parameters); undefined for generic
};

namespace detail {

struct SpmmMatch {
  const ir::ForNode* row = nullptr;
  const ir::ForNode* init_loop = nullptr;  // for k: c[i,k] = init
  const ir::StoreNode* init = nullptr;
  const ir::ForNode* nz_loop = nullptr;  // for j (reduction)
  std::vector<std::pair<ir::Var, ir::Expr>> nz_lets;  // lets between j and the k loop
  const ir::ForNode* k_loop = nullptr;
  const ir::ReduceNode* update = nullptr;
};

struct SddmmMatch {
  const ir::ForNode* row = nullptr;
  const ir::ForNode* nz_loop = nullptr;  // for j (spatial)
  std::vector<std::pair<ir::Var, ir::Expr>> nz_lets;
  const ir::StoreNode* init = nullptr;
  const ir::ForNode* k_loop = nullptr;  // reduction
  std::vector<std::pair<ir::Var, ir::Expr>> k_lets;
  const ir::ReduceNode* update = nullptr;
};

inline bool starts_at_zero(const ir::ForNode* f) {
  auto* c = f->min.as<ir::IntImmNode>();
  return c && c->value == 0;
}

inline const ir::Stmt& peel_lets(const ir::Stmt& s, std::vector<std::pair<ir::Var, ir::Expr>>* lets) {
  const ir::Stmt* p = &s;
  while (auto* l = p->as<ir::LetStmtNode>()) {
    if (lets) lets->push_back({l->var, l->value});
    p = &l->body;
  }
  return *p;
}

// The single top-level loop of the function body, if that is what it is.
inline const ir::ForNode* single_top_loop(const ir::Stmt& body) {
  const ir::Stmt* s = &body;
  while (auto* b = s->as<ir::BlockNode>()) {
    if (!b->allocs.empty()) return nullptr;
    s = &b->body;
  }
  if (auto* q = s->as<ir::SeqNode>(); q && q->stmts.size() == 1) s = &q->stmts[0];
  auto* f = s->as<ir::ForNode>();
  return f && f->iter_kind == ir::IterKind::spatial && starts_at_zero(f) ? f : nullptr;
}

// Whether `e` is computable at launch time: constants and the function's scalar parameters
// only (no loads, no loop variables). The launch grid and the variant's feature size are.
inline bool over_scalars(const ir::Expr& e, const ir::Function& f) {
  struct Check : ir::IRVisitor {
    const ir::Function* f;
    bool ok = true;
    void visit_Var(const ir::VarNode* v) override {
      bool scalar = false;
      for (auto& s : f->scalars) scalar = scalar || s.var.get() == v;
      ok = ok && scalar;
    }
    void visit_Load(const ir::LoadNode*) override { ok = false; }
    void visit_FindPos(const ir::FindPosNode*) override { ok = false; }
  } c;
  c.f = &f;
  c.visit(e);
  return c.ok;
}

inline bool indexes_row_and(const std::vector<ir::Expr>& idx, const ir::ForNode* row, const ir::ForNode* k) {
  return idx.size() == 2 && idx[0].get() == row->var.get() && idx[1].get() == k->var.get();
}

inline std::optional<SpmmMatch> match_spmm(const ir::Function& f) {
  SpmmMatch m;
  m.row = single_top_loop(f.body);
  if (!m.row) return std::nullopt;
  auto* q = m.row->body.as<ir::SeqNode>();
  if (!q || q->stmts.size() != 2) return std::nullopt;
  m.init_loop = q->stmts[0].as<ir::ForNode>();
  m.nz_loop = q->stmts[1].as<ir::ForNode>();
  if (!m.init_loop || !m.nz_loop || !starts_at_zero(m.init_loop) || !starts_at_zero(m.nz_loop) ||
      m.nz_loop->iter_kind != ir::IterKind::reduction || m.init_loop->iter_kind != ir::IterKind::spatial)
    return std::nullopt;
  m.init = m.init_loop->body.as<ir::StoreNode>();
  m.k_loop = peel_lets(m.nz_loop->body, &m.nz_lets).as<ir::ForNode>();
  if (!m.init || !m.k_loop || !starts_at_zero(m.k_loop) || m.k_loop->iter_kind != ir::IterKind::spatial)
    return std::nullopt;
  m.update = m.k_loop->body.as<ir::ReduceNode>();
  if (!m.update || m.update->op != ir::ReduceOp::add || m.update->buffer != m.init->buffer ||
      !is_float(m.update->buffer->dtype) || m.update->buffer->scope != ir::BufferScope::global)
    return std::nullopt;
  if (!indexes_row_and(m.init->indices, m.row, m.init_loop) || !indexes_row_and(m.update->indices, m.row, m.k_loop))
    return std::nullopt;
  if (!ir::equal(m.init_loop->extent, m.k_loop->extent) || ir::uses_var(m.init->value, m.init_loop->var.get()) ||
      schedule::detail::loads_buffer(m.nz_loop->body, m.update->buffer))
    return std::nullopt;  // (an update reading its own target is order-dependent: not accumulable in registers)
  if (!over_scalars(m.row->extent, f) || !over_scalars(m.k_loop->extent, f)) return std::nullopt;
  return m;
}

inline std::optional<SddmmMatch> match_sddmm(const ir::Function& f) {
  SddmmMatch m;
  m.row = single_top_loop(f.body);
  if (!m.row) return std::nullopt;
  m.nz_loop = m.row->body.as<ir::ForNode>();
  if (!m.nz_loop || !starts_at_zero(m.nz_loop) || m.nz_loop->iter_kind != ir::IterKind::spatial) return std::nullopt;
  auto* q = peel_lets(m.nz_loop->body, &m.nz_lets).as<ir::SeqNode>();
  if (!q || q->stmts.size() != 2) return std::nullopt;
  m.init = q->stmts[0].as<ir::StoreNode>();
  m.k_loop = q->stmts[1].as<ir::ForNode>();
  if (!m.init || !m.k_loop || !starts_at_zero(m.k_loop) || m.k_loop->iter_kind != ir::IterKind::reduction)
    return std::nullopt;
  m.update = peel_lets(m.k_loop->body, &m.k_lets).as<ir::ReduceNode>();
  if (!m.update || m.update->op != ir::ReduceOp::add || m.update->buffer != m.init->buffer ||
      !is_float(m.update->buffer->dtype) || !ir::equal(m.update->indices, m.init->indices))
    return std::nullopt;
  for (auto& i : m.init->indices)
    if (ir::uses_var(i, m.k_loop->var.get())) return std::nullopt;
  // The lanes of a warp each hold a partial sum: an update that reads its target is not SDDMM.
  if (schedule::detail::loads_buffer(m.k_loop->body, m.update->buffer)) return std::nullopt;
  // A feature loop whose length varies by row (a second sparse axis) is not SDDMM-shaped.
  if (!over_scalars(m.row->extent, f) || !over_scalars(m.k_loop->extent, f)) return std::nullopt;
  return m;
}

inline ir::Expr i64(std::int64_t v) { return ir::int_imm(v, DType::i64); }
inline ir::Expr ceil_div(const ir::Expr& a, std::int64_t b) { return (ir::cast(DType::i64, a) + (b - 1)) / i64(b); }

inline ir::Stmt bound(ir::Var v, std::int64_t ext, ir::ForKind k, const char* axis, ir::Stmt body) {
  return ir::for_loop(std::move(v), i64(0), i64(ext), k, ir::IterKind::spatial, axis, std::move(body));
}

// Substitutes lets (outermost first) into an expression.
inline ir::Expr inline_lets(ir::Expr e, const std::vector<std::pair<ir::Var, ir::Expr>>& lets) {
  for (auto it = lets.rbegin(); it != lets.rend(); ++it) e = ir::substitute(e, it->first, it->second);
  return e;
}

// Replaces the loads in an expression that depend on `nz` but not on `k` with loads from
// per-warp shared tiles; records the original load (for the fill) and the tile buffer.
class NonzeroOperands : public ir::IRMutator {
 public:
  NonzeroOperands(const ir::VarNode* nz, const ir::VarNode* k, ir::Expr slot) : nz_(nz), k_(k), slot_(std::move(slot)) {}
  struct Operand {
    ir::Expr load;
    ir::Buffer tile;
  };
  std::vector<Operand> operands;
  int rows = 4;

 protected:
  ir::Expr mutate_Load(const ir::LoadNode* n, const ir::Expr& self) override {
    bool on_nz = false, on_k = false;
    for (auto& i : n->indices) {
      on_nz |= ir::uses_var(i, nz_);
      on_k |= ir::uses_var(i, k_);
    }
    if (!on_nz || on_k || n->buffer->scope != ir::BufferScope::global) return ir::IRMutator::mutate_Load(n, self);
    for (auto& o : operands)
      if (ir::equal(o.load, self)) return ir::load(o.tile, {slot_});
    ir::BufferNode t;
    t.name = "s_" + n->buffer->name;
    t.dtype = n->dtype;
    t.shape = {i64(32 * rows)};
    t.scope = ir::BufferScope::shared;
    t.role = ir::BufferRole::temp;
    operands.push_back({self, ir::make_buffer(std::move(t))});
    return ir::load(operands.back().tile, {slot_});
  }
  // The branches of a select are evaluated lazily (a load there may be out of range when
  // the condition is false): only the condition's loads are staged.
  ir::Expr mutate_Select(const ir::SelectNode* n, const ir::Expr& self) override {
    ir::Expr c = mutate(n->cond);
    return c.same_as(n->cond) ? self : ir::select(c, n->t, n->f);
  }

 private:
  const ir::VarNode* nz_;
  const ir::VarNode* k_;
  ir::Expr slot_;
};

inline ir::Function with_body(const ir::Function& f, ir::Stmt body) {
  ir::Function out = f;
  out.body = ir::block(f.name, {}, std::move(body), f.loc);
  return out;
}

// `acc[c] += value` for the CF feature columns of a lane (column(c)), with the k bounds
// check: per column, or once for a float4 vector (the whole vector is in range or out of
// range: feature % 4 == 0).
template <class Column>
ir::Stmt spmm_register_update(const SpmmMatch& m, const CudaVariant& v, const ir::Buffer& acc, const ir::Var& c,
                              const Column& column, const ir::Expr& value) {
  const ir::Expr K = ir::cast(DType::i64, m.k_loop->extent);
  ir::Stmt update = ir::reduce(acc, {c}, ir::ReduceOp::add, value, m.update->loc);
  if (v.vector) {
    ir::Expr first = ir::substitute(column(c), c, i64(0));
    return ir::if_then_else(first < K, ir::for_loop(c, i64(0), i64(v.cf), ir::ForKind::vectorized,
                                                    ir::IterKind::spatial, m.k_loop->axis, update));
  }
  return ir::for_loop(c, i64(0), i64(v.cf), ir::ForKind::unrolled, ir::IterKind::spatial, m.k_loop->axis,
                      ir::if_then_else(column(c) < K, update));
}

inline ir::Function schedule_spmm(const ir::Function& f, const SpmmMatch& m, const CudaVariant& v) {
  const int R = v.rows_per_block, CF = v.cf;
  const ir::Expr I = m.row->extent, K = m.k_loop->extent, nnz = m.nz_loop->extent;
  ir::Var ib("i_block", DType::i64), ty("i_warp", DType::i64), lane("lane", DType::i64);
  ir::Var kt("k_tile", DType::i64), c("k_reg", DType::i64), c2("k_reg", DType::i64);
  ir::Var jo("j_chunk", DType::i64), ji("j_in_chunk", DType::i64), jj("j_fill", DType::i64);
  const ir::Var& i = m.row->var;
  const ir::Buffer& out = m.update->buffer;
  ir::Buffer acc = ir::local_buffer(out->name + "_reg", out->dtype, {i64(CF)});

  // Feature column of register c: strided across lanes, or 4 contiguous columns per lane.
  auto column = [&](const ir::Var& reg) {
    ir::Expr tile = kt * i64(32 * CF);
    return v.vector ? tile + lane * i64(CF) + reg : tile + reg * i64(32) + lane;
  };
  // The update with k := column(c) and j := jo*32 + ji, per-nonzero operands from shared.
  ir::Expr value = inline_lets(m.update->value, m.nz_lets);
  ir::Expr slot = ty * i64(32) + ji;
  NonzeroOperands ops(m.nz_loop->var.node(), m.k_loop->var.node(), slot);
  ops.rows = R;
  value = ops.mutate(value);
  const bool cached = !ops.operands.empty();  // else the loop reads nothing per nonzero
  ir::Expr j_abs = cached ? jo * i64(32) + ji : ir::Expr(ji);
  value = ir::substitute(ir::substitute(value, m.nz_loop->var, j_abs), m.k_loop->var, column(c));

  ir::Stmt reg_loop = spmm_register_update(m, v, acc, c, column, value);
  // Fill the shared tiles (one element per lane), sync, consume, sync.
  std::vector<ir::Stmt> fills;
  for (auto& o : ops.operands) {
    ir::Expr src = ir::substitute(inline_lets(o.load, m.nz_lets), m.nz_loop->var, jj);
    fills.push_back(ir::store(o.tile, {ty * i64(32) + lane}, src));
  }
  std::vector<ir::Buffer> tiles;
  for (auto& o : ops.operands) tiles.push_back(o.tile);
  ir::Expr rest = ir::cast(DType::i64, nnz) - jo * i64(32);
  ir::Stmt chunk = ir::block(
      "row_cache", tiles,
      ir::seq({ir::let_stmt(jj, jo * i64(32) + lane,
                            ir::if_then_else(jj < ir::cast(DType::i64, nnz), ir::seq(std::move(fills)))),
               ir::barrier(ir::BarrierScope::warp),
               ir::for_loop(ji, i64(0), ir::min(i64(32), rest), ir::ForKind::serial, ir::IterKind::reduction,
                            m.nz_loop->axis, reg_loop),
               ir::barrier(ir::BarrierScope::warp)}));
  ir::Stmt nz = cached ? ir::for_loop(jo, i64(0), ceil_div(nnz, 32), ir::ForKind::serial, ir::IterKind::reduction,
                                      m.nz_loop->axis, chunk)
                      : ir::for_loop(ji, i64(0), nnz, ir::ForKind::serial, ir::IterKind::reduction, m.nz_loop->axis,
                                     reg_loop);
  ir::Expr init = m.init->value;
  ir::Stmt zero = ir::for_loop(c2, i64(0), i64(CF), ir::ForKind::unrolled, ir::IterKind::spatial, m.k_loop->axis,
                               ir::store(acc, {c2}, init));
  ir::Var c3("k_reg", DType::i64);
  ir::Stmt write;
  if (v.vector) {
    ir::Expr first = ir::substitute(column(c3), c3, i64(0));
    write = ir::if_then_else(first < ir::cast(DType::i64, K),
                             ir::for_loop(c3, i64(0), i64(CF), ir::ForKind::vectorized, ir::IterKind::spatial,
                                          m.k_loop->axis, ir::store(out, {i, column(c3)}, ir::load(acc, {c3}))));
  } else {
    write = ir::for_loop(c3, i64(0), i64(CF), ir::ForKind::unrolled, ir::IterKind::spatial, m.k_loop->axis,
                         ir::if_then_else(column(c3) < ir::cast(DType::i64, K),
                                          ir::store(out, {i, column(c3)}, ir::load(acc, {c3}))));
  }
  // Each feature tile of 32 * CF columns is its own block row of the grid (blockIdx.y): a
  // long row's tiles run in parallel instead of one after another in one warp.
  ir::Stmt tile = ir::block("register_tile", {acc}, ir::seq({zero, nz, write}));
  ir::Stmt row = ir::let_stmt(i, ib * i64(R) + ty, ir::if_then_else(i < ir::cast(DType::i64, I), tile));
  ir::Stmt launch = ir::for_loop(
      ib, i64(0), ceil_div(I, R), ir::ForKind::gpu_block_x, ir::IterKind::spatial, m.row->axis,
      ir::for_loop(kt, i64(0), ceil_div(K, 32 * CF), ir::ForKind::gpu_block_y, ir::IterKind::spatial, m.k_loop->axis,
                   bound(ty, R, ir::ForKind::gpu_thread_y, m.row->axis.c_str(),
                         bound(lane, 32, ir::ForKind::gpu_thread_x, m.k_loop->axis.c_str(), row))));
  return with_body(f, launch);
}

// One thread's part of a nonzero's dot product: `part += value` over its k, lane `l` of a
// group of v.lanes threads (k = step*lanes*4 + l*4 + c as one float4 with `vector`, else
// step*lanes + l), with k bounds checks.
inline ir::Stmt sddmm_lane_dot(const SddmmMatch& m, const CudaVariant& v, const ir::Buffer& part, const ir::Var& l) {
  const int W = v.lanes, V = v.vector ? 4 : 1;
  const ir::Expr K = ir::cast(DType::i64, m.k_loop->extent);
  ir::Var kt("k_step", DType::i64), c("k_vec", DType::i64);
  ir::Expr step = kt * i64(W * V);
  ir::Expr k = v.vector ? step + l * i64(V) + c : step + l;
  ir::Expr value = ir::substitute(inline_lets(m.update->value, m.k_lets), m.k_loop->var, k);
  ir::Stmt acc = ir::reduce(part, {}, ir::ReduceOp::add, value, m.update->loc);
  ir::Stmt per_step =
      v.vector ? ir::if_then_else(ir::substitute(k, c, i64(0)) < K,
                                  ir::for_loop(c, i64(0), i64(V), ir::ForKind::vectorized, ir::IterKind::reduction,
                                               m.k_loop->axis, acc))
               : ir::if_then_else(k < K, acc);
  return ir::for_loop(kt, i64(0), ceil_div(m.k_loop->extent, W * V), ir::ForKind::serial, ir::IterKind::reduction,
                      m.k_loop->axis, per_step);
}

inline ir::Function schedule_sddmm(const ir::Function& f, const SddmmMatch& m, const CudaVariant& v) {
  const int R = v.rows_per_block, W = v.lanes, G = 32 / v.lanes;
  const ir::Expr I = m.row->extent, nnz = m.nz_loop->extent;
  ir::Var ib("i_block", DType::i64), ty("i_warp", DType::i64), lane("lane", DType::i64);
  ir::Var g("nz_group", DType::i64), l("k_lane", DType::i64), jo("j_step", DType::i64);
  const ir::Var& i = m.row->var;
  const ir::Var& j = m.nz_loop->var;
  const DType t = m.update->buffer->dtype;
  ir::Buffer part = ir::local_buffer("partial", t);

  ir::Stmt k_loop = sddmm_lane_dot(m, v, part, l);
  ir::Expr valid = j < ir::cast(DType::i64, nnz);
  ir::Expr total = ir::reduce_combine(ir::ReduceOp::add, m.init->value, ir::load(part, {}));
  ir::Stmt body = ir::block(
      "dot", {part},
      ir::seq({ir::store(part, {}, ir::make_const(t, 0)), ir::if_then_else(valid, k_loop),
               ir::store(part, {}, ir::warp_sum(ir::load(part, {}), W)),
               ir::if_then_else(valid && ir::binary(ir::BinOp::eq, l, i64(0)), ir::store(m.init->buffer, m.init->indices, total))}));
  // The nonzero loop's lets (positions, column indices) move inside the `valid` guards.
  for (auto it = m.nz_lets.rbegin(); it != m.nz_lets.rend(); ++it) {
    ir::Substituter sub;
    sub.add(it->first, it->second);
    body = sub.mutate(body);
  }
  ir::Stmt nz = ir::for_loop(jo, i64(0), ceil_div(nnz, G), ir::ForKind::serial, ir::IterKind::spatial,
                             m.nz_loop->axis, ir::let_stmt(j, jo * i64(G) + g, body));
  ir::Stmt row = ir::let_stmt(
      i, ib * i64(R) + ty,
      ir::if_then_else(i < ir::cast(DType::i64, I),
                       ir::let_stmt(g, lane / i64(W), ir::let_stmt(l, lane % i64(W), nz))));
  ir::Stmt launch = ir::for_loop(
      ib, i64(0), ceil_div(I, R), ir::ForKind::gpu_block_x, ir::IterKind::spatial, m.row->axis,
      bound(ty, R, ir::ForKind::gpu_thread_y, m.row->axis.c_str(),
            bound(lane, 32, ir::ForKind::gpu_thread_x, m.k_loop->axis.c_str(), row)));
  return with_body(f, launch);
}

// The row pointer X of a nonzero loop whose extent is `X[i + 1] - X[i]` (casts allowed): the
// loop is a CSR row, and its positions X[i] + j over all rows are one contiguous range.
inline ir::Buffer row_pointer(const ir::Expr& extent, const ir::VarNode* i) {
  auto strip = [](const ir::Expr& e) {
    const ir::Expr* p = &e;
    while (auto* c = p->as<ir::CastNode>()) p = &c->value;
    return p;
  };
  auto* sub = strip(extent)->as<ir::BinaryNode>();
  if (!sub || sub->op != ir::BinOp::sub) return {};
  auto* hi = strip(sub->a)->as<ir::LoadNode>();
  auto* lo = strip(sub->b)->as<ir::LoadNode>();
  if (!hi || !lo || hi->buffer != lo->buffer || hi->indices.size() != 1 || lo->indices.size() != 1 ||
      hi->buffer->scope != ir::BufferScope::global || !is_int(hi->buffer->dtype))
    return {};
  if (strip(lo->indices[0])->get() != i) return {};
  auto* next = strip(hi->indices[0])->as<ir::BinaryNode>();
  if (!next || next->op != ir::BinOp::add || strip(next->a)->get() != i) return {};
  auto* one = strip(next->b)->as<ir::IntImmNode>();
  return one && one->value == 1 ? hi->buffer : ir::Buffer();
}

// SDDMM over a CSR, nonzero-parallel: the rows' nonzeros are one range of positions
// [X[0], X[I]), cut into chunks of `kChunkRounds` x (32/lanes) consecutive positions, one
// chunk per warp at a time (a grid-stride loop, so any grid covers the range), whatever the
// rows' lengths. A warp finds the row of its chunk's first position by a binary search of X
// (the last row r with X[r] <= position); each group of `lanes` threads then follows its
// positions' rows by stepping forward (a few steps, then a binary search from there when
// empty rows are in the way) and computes one nonzero as in the row-wise schedule. A long
// row no longer serialises on one warp (the row-wise schedule's time is its longest row's).
inline constexpr int kChunkRounds = 16;

// The row of a position among a CSR's nonzeros, kept in the locals `row` (and `len`, the
// width a search has left) by the nonzero-parallel schedules.
struct RowCursor {
  ir::Buffer X;      // the row pointer
  ir::Expr I;        // the row count (i64)
  std::string axis;  // the row axis (names the search loops)
  ir::Buffer row, len;
  ir::Var half = ir::Var("half", DType::i64);

  ir::Expr x_at(ir::Expr r) const { return ir::cast(DType::i64, ir::load(X, {std::move(r)})); }
  // row := the last r in [row, I) with X[r] <= pos, given X[row] <= pos (binary search).
  ir::Stmt search(const ir::Expr& pos) const {
    ir::Var s("search_step", DType::i64);
    ir::Expr mid = ir::load(row, {}) + ir::Expr(half);
    return ir::seq(
        {ir::store(len, {}, I - ir::load(row, {})),
         ir::for_loop(s, i64(0), i64(63), ir::ForKind::serial, ir::IterKind::spatial, axis,
                      ir::if_then_else(
                          ir::load(len, {}) > i64(1),
                          ir::let_stmt(half, ir::load(len, {}) / i64(2),
                                       ir::if_then_else(x_at(mid) <= pos,
                                                        ir::seq({ir::store(row, {}, mid),
                                                                 ir::store(len, {}, ir::load(len, {}) - ir::Expr(half))}),
                                                        ir::store(len, {}, half)))))});
  }
  // Whether `pos` lies past the current row.
  ir::Expr past_row(const ir::Expr& pos) const { return x_at(ir::load(row, {}) + i64(1)) <= pos; }
  // Moves `row` forward to the row of `pos`: a few single steps, then a search from there
  // when empty rows are in the way.
  ir::Stmt follow(const ir::Expr& pos) const {
    ir::Var step("row_step", DType::i64);
    return ir::seq({ir::for_loop(step, i64(0), i64(4), ir::ForKind::unrolled, ir::IterKind::spatial, axis,
                                 ir::if_then_else(past_row(pos), ir::store(row, {}, ir::load(row, {}) + i64(1)))),
                    ir::if_then_else(past_row(pos), search(pos))});
  }
};

inline ir::Function schedule_sddmm_nnz(const ir::Function& f, const SddmmMatch& m, const CudaVariant& v,
                                       const ir::Buffer& X) {
  const int R = v.rows_per_block, W = v.lanes, G = 32 / v.lanes, T = kChunkRounds;
  const ir::Expr I = ir::cast(DType::i64, m.row->extent);
  ir::Var blk("nz_block", DType::i64), ty("nz_warp", DType::i64), lane("lane", DType::i64);
  ir::Var g("nz_group", DType::i64), l("k_lane", DType::i64), pass("chunk_pass", DType::i64);
  ir::Var chunk("chunk_begin", DType::i64), t("chunk_round", DType::i64), e("pos", DType::i64);
  ir::Var first("pos_begin", DType::i64), count("pos_count", DType::i64);
  const ir::Var& i = m.row->var;
  const ir::Var& j = m.nz_loop->var;
  const DType dt = m.update->buffer->dtype;
  ir::Buffer part = ir::local_buffer("partial", dt), row = ir::local_buffer("row", DType::i64),
             len = ir::local_buffer("row_len", DType::i64);
  const RowCursor cur{X, I, m.row->axis, row, len};
  auto x_at = [&](ir::Expr r) { return cur.x_at(std::move(r)); };

  // The grid: one chunk per warp over the output's length (when it is a scalar), else a
  // fixed grid; the grid-stride loop makes either cover every position.
  ir::Expr chunks = i64(4096 * R);
  if (m.init->indices.size() == 1 && m.init->buffer->shape.size() == 1 && over_scalars(m.init->buffer->shape[0], f))
    chunks = ceil_div(ir::max(ir::cast(DType::i64, m.init->buffer->shape[0]), i64(1)), G * T);
  ir::Expr blocks = ceil_div(chunks, R);
  ir::Expr warps = blocks * i64(R);
  ir::Expr end = ir::Expr(first) + ir::Expr(count);
  auto search = [&](const ir::Expr& pos) { return cur.search(pos); };
  ir::Stmt follow = cur.follow(e);

  ir::Stmt k_loop = sddmm_lane_dot(m, v, part, l);
  ir::Expr total = ir::reduce_combine(ir::ReduceOp::add, m.init->value, ir::load(part, {}));
  auto at_row = [&](ir::Stmt body) {
    return ir::let_stmt(i, ir::cast(i.dtype(), ir::load(row, {})),
                        ir::let_stmt(j, ir::cast(j.dtype(), ir::Expr(e) - x_at(ir::cast(DType::i64, ir::Expr(i)))),
                                     std::move(body)));
  };
  ir::Stmt compute = at_row(k_loop);
  ir::Stmt write = at_row(ir::store(m.init->buffer, m.init->indices, total));
  // The nonzero loop's lets (positions, column indices) are substituted into both.
  for (auto it = m.nz_lets.rbegin(); it != m.nz_lets.rend(); ++it) {
    ir::Substituter sub;
    sub.add(it->first, it->second);
    compute = sub.mutate(compute);
    write = sub.mutate(write);
  }
  ir::Expr valid = ir::Expr(e) < end;
  // Every lane of a warp runs the same rounds (the warp_sum needs them all).
  ir::Stmt round = ir::let_stmt(
      e, ir::Expr(chunk) + ir::Expr(t) * i64(G) + ir::Expr(g),
      ir::seq({ir::store(part, {}, ir::make_const(dt, 0)), ir::if_then_else(valid, ir::seq({follow, compute})),
               ir::store(part, {}, ir::warp_sum(ir::load(part, {}), W)),
               ir::if_then_else(valid && ir::binary(ir::BinOp::eq, l, i64(0)), write)}));
  ir::Stmt one_chunk = ir::let_stmt(
      chunk, ir::Expr(first) + (ir::Expr(pass) * warps + ir::Expr(blk) * i64(R) + ir::Expr(ty)) * i64(G * T),
      ir::block("chunk", {part, row, len},
                ir::seq({ir::store(row, {}, i64(0)), ir::if_then_else(ir::Expr(chunk) < end, search(chunk)),
                         ir::for_loop(t, i64(0), i64(T), ir::ForKind::serial, ir::IterKind::spatial, m.nz_loop->axis,
                                      round)})));
  ir::Expr span = warps * i64(G * T);
  ir::Stmt passes = ir::for_loop(pass, i64(0), (ir::Expr(count) + span - i64(1)) / span, ir::ForKind::serial,
                                 ir::IterKind::spatial, m.nz_loop->axis, one_chunk);
  ir::Stmt body = ir::let_stmt(
      first, x_at(i64(0)),
      ir::let_stmt(count, ir::max(x_at(I) - ir::Expr(first), i64(0)),
                   ir::let_stmt(g, lane / i64(W), ir::let_stmt(l, lane % i64(W), passes))));
  ir::Stmt launch = ir::for_loop(
      blk, i64(0), blocks, ir::ForKind::gpu_block_x, ir::IterKind::spatial, m.nz_loop->axis,
      bound(ty, R, ir::ForKind::gpu_thread_y, m.nz_loop->axis.c_str(),
            bound(lane, 32, ir::ForKind::gpu_thread_x, m.k_loop->axis.c_str(), body)));
  return with_body(f, launch);
}

// A global 1-D buffer of scalar length that the update reads at a nonzero's position (A's
// values or column indices): its length is the nonzero count, for sizing a grid.
inline ir::Expr nonzero_count(const ir::Function& f, const SpmmMatch& m) {
  struct Finder : ir::IRVisitor {
    const ir::Function* f = nullptr;
    const ir::VarNode* j = nullptr;
    ir::Expr found;
    void visit_Load(const ir::LoadNode* n) override {
      if (!found.defined() && n->buffer->scope == ir::BufferScope::global && n->buffer->shape.size() == 1 &&
          n->indices.size() == 1 && ir::uses_var(n->indices[0], j) && over_scalars(n->buffer->shape[0], *f))
        found = n->buffer->shape[0];
      ir::IRVisitor::visit_Load(n);
    }
  } finder;
  finder.f = &f;
  finder.j = m.nz_loop->var.node();
  finder.visit(inline_lets(m.update->value, m.nz_lets));
  return finder.found;
}

// `X[r] + (e - X[r])` is `e`: in wrapping integer arithmetic the terms cancel (casts that
// widen an integer are looked through on the two X[r]). The nonzero-parallel SpMM sets j := e - X[row] in a
// position `X[i] + j`; folding it back to e saves two loads per nonzero.
class CancelRowStart : public ir::IRMutator {
 protected:
  static const ir::Expr& widened(const ir::Expr& e) {
    const ir::Expr* p = &e;
    while (auto* c = p->as<ir::CastNode>()) {
      if (!is_int(p->dtype()) || !is_int(c->value.dtype()) || dtype_bytes(c->value.dtype()) > dtype_bytes(p->dtype()))
        break;
      p = &c->value;
    }
    return *p;
  }
  ir::Expr mutate_Binary(const ir::BinaryNode* n, const ir::Expr& self) override {
    ir::Expr s = ir::IRMutator::mutate_Binary(n, self);
    auto* add = s.as<ir::BinaryNode>();
    if (!add || add->op != ir::BinOp::add || !is_int(s.dtype())) return s;
    // (No cast between the sum and the difference: a difference that wrapped in a narrower
    // type and was widened would not cancel.)
    auto* sub = add->b.as<ir::BinaryNode>();
    if (!sub || sub->op != ir::BinOp::sub || add->b.dtype() != s.dtype() ||
        !ir::equal(widened(sub->b), widened(add->a)))
      return s;
    return ir::cast(s.dtype(), sub->a);
  }
};

// SpMM over a CSR, nonzero-parallel (`nnz_parallel`, SPINDLE_CUDA_SPMM=nonzeros): two
// launches. The first stores the init value into every element of C (a warp per row, as
// GE-SpMM writes it). The second cuts the rows' nonzeros [X[0], X[I]) into chunks of
// kSpmmChunk consecutive positions, one chunk per warp at a time (grid-stride), with the
// feature tiles across blockIdx.y as in GE-SpMM: the warp finds its chunk's first row by a
// binary search of X, accumulates the products of each position into its lanes' registers
// (every lane the same position, `cf` feature columns per lane, float4 loads with `vector`)
// and, where the row changes and at the chunk's end, adds the registers into C's row with
// atomic adds. A row longer than a chunk is split across warps, so a skewed graph's longest
// row no longer sets the time (the row-wise schedule's does); the price is one atomic add
// per row segment and feature column, and C written twice.
inline constexpr int kSpmmChunk = 64;

inline ir::Function schedule_spmm_nnz(const ir::Function& f, const SpmmMatch& m, const CudaVariant& v,
                                      const ir::Buffer& X) {
  const int R = v.rows_per_block, CF = v.cf, CH = kSpmmChunk;
  const ir::Expr I = ir::cast(DType::i64, m.row->extent), K = ir::cast(DType::i64, m.k_loop->extent);
  const ir::Buffer& out = m.update->buffer;
  const DType dt = out->dtype;
  const ir::Var& i = m.row->var;
  const ir::Var& j = m.nz_loop->var;

  // Launch 1: C[i, k] = init.
  ir::Var ib("i_block", DType::i64), iw("i_warp", DType::i64), lane("lane", DType::i64), kk("k_step", DType::i64);
  ir::Stmt fill = ir::let_stmt(
      m.init_loop->var, ir::cast(m.init_loop->var.dtype(), ir::Expr(kk) * i64(32) + ir::Expr(lane)),
      ir::if_then_else(ir::cast(DType::i64, ir::Expr(m.init_loop->var)) < K,
                       ir::store(m.init->buffer, m.init->indices, m.init->value, m.init->loc)));
  ir::Stmt init_row = ir::let_stmt(
      i, ir::cast(i.dtype(), ir::Expr(ib) * i64(R) + ir::Expr(iw)),
      ir::if_then_else(ir::cast(DType::i64, ir::Expr(i)) < I,
                       ir::for_loop(kk, i64(0), ceil_div(K, 32), ir::ForKind::serial, ir::IterKind::spatial,
                                    m.k_loop->axis, fill)));
  ir::Stmt init_launch = ir::for_loop(
      ib, i64(0), ceil_div(I, R), ir::ForKind::gpu_block_x, ir::IterKind::spatial, m.row->axis,
      bound(iw, R, ir::ForKind::gpu_thread_y, m.row->axis.c_str(),
            bound(lane, 32, ir::ForKind::gpu_thread_x, m.k_loop->axis.c_str(), init_row)));

  // Launch 2: the chunks.
  ir::Var blk("nz_block", DType::i64), ty("nz_warp", DType::i64), lane2("lane", DType::i64), kt("k_tile", DType::i64);
  ir::Var pass("chunk_pass", DType::i64), chunk("chunk_begin", DType::i64), t("chunk_round", DType::i64);
  ir::Var e("pos", DType::i64), first("pos_begin", DType::i64), count("pos_count", DType::i64);
  ir::Var c("k_reg", DType::i64), cz("k_reg", DType::i64), cw("k_reg", DType::i64);
  ir::Buffer acc = ir::local_buffer(out->name + "_reg", dt, {i64(CF)});
  ir::Buffer row = ir::local_buffer("row", DType::i64), len = ir::local_buffer("row_len", DType::i64),
             row_end = ir::local_buffer("row_end", DType::i64);
  const RowCursor cur{X, I, m.row->axis, row, len};
  ir::Stmt load_row_end = ir::store(row_end, {}, cur.x_at(ir::load(row, {}) + i64(1)));
  auto column = [&](const ir::Var& reg) {
    ir::Expr tile = kt * i64(32 * CF);
    return v.vector ? tile + lane2 * i64(CF) + reg : tile + reg * i64(32) + lane2;
  };
  // The update at position e of row `row`: i := row, j := e - X[row], k := column(c).
  ir::Expr value = inline_lets(m.update->value, m.nz_lets);
  value = ir::substitute(value, m.k_loop->var, ir::cast(m.k_loop->var.dtype(), column(c)));
  value = ir::substitute(value, j, ir::cast(j.dtype(), ir::Expr(e) - cur.x_at(ir::load(row, {}))));
  value = ir::substitute(value, i, ir::cast(i.dtype(), ir::load(row, {})));
  value = CancelRowStart().mutate(value);
  ir::Stmt accumulate = spmm_register_update(m, v, acc, c, column, value);
  ir::Stmt zero = ir::for_loop(cz, i64(0), i64(CF), ir::ForKind::unrolled, ir::IterKind::spatial, m.k_loop->axis,
                               ir::store(acc, {cz}, ir::make_const(dt, 0)));
  ir::Stmt flush = ir::for_loop(
      cw, i64(0), i64(CF), ir::ForKind::unrolled, ir::IterKind::spatial, m.k_loop->axis,
      ir::if_then_else(column(cw) < K,
                       ir::reduce(out, {ir::cast(i.dtype(), ir::load(row, {})), ir::cast(m.k_loop->var.dtype(), column(cw))},
                                  ir::ReduceOp::add, ir::load(acc, {cw}), m.update->loc, /*atomic=*/true)));
  ir::Expr end = ir::Expr(first) + ir::Expr(count);
  // Every lane of the warp works on the same position: the row logic is uniform.
  ir::Stmt round = ir::let_stmt(
      e, ir::Expr(chunk) + ir::Expr(t),
      ir::if_then_else(ir::Expr(e) < end,
                       ir::seq({ir::if_then_else(ir::load(row_end, {}) <= ir::Expr(e),
                                                 ir::seq({flush, zero, cur.follow(e), load_row_end})),
                                accumulate})));
  ir::Expr blocks = ceil_div(i64(2048 * R), R);
  if (ir::Expr n = nonzero_count(f, m); n.defined()) blocks = ceil_div(ceil_div(ir::max(ir::cast(DType::i64, n), i64(1)), CH), R);
  ir::Expr warps = blocks * i64(R);
  ir::Stmt one_chunk = ir::let_stmt(
      chunk, ir::Expr(first) + (ir::Expr(pass) * warps + ir::Expr(blk) * i64(R) + ir::Expr(ty)) * i64(CH),
      ir::if_then_else(ir::Expr(chunk) < end,
                       ir::block("chunk", {acc, row, len, row_end},
                                 ir::seq({ir::store(row, {}, i64(0)), cur.search(chunk), load_row_end, zero,
                                          ir::for_loop(t, i64(0), i64(CH), ir::ForKind::serial, ir::IterKind::spatial,
                                                       m.nz_loop->axis, round),
                                          flush}))));
  ir::Expr span = warps * i64(CH);
  ir::Stmt passes = ir::for_loop(pass, i64(0), (ir::Expr(count) + span - i64(1)) / span, ir::ForKind::serial,
                                 ir::IterKind::spatial, m.nz_loop->axis, one_chunk);
  ir::Stmt body = ir::let_stmt(first, cur.x_at(i64(0)),
                               ir::let_stmt(count, ir::max(cur.x_at(I) - ir::Expr(first), i64(0)), passes));
  ir::Stmt launch = ir::for_loop(
      blk, i64(0), blocks, ir::ForKind::gpu_block_x, ir::IterKind::spatial, m.nz_loop->axis,
      ir::for_loop(kt, i64(0), ceil_div(K, 32 * CF), ir::ForKind::gpu_block_y, ir::IterKind::spatial, m.k_loop->axis,
                   bound(ty, R, ir::ForKind::gpu_thread_y, m.nz_loop->axis.c_str(),
                         bound(lane2, 32, ir::ForKind::gpu_thread_x, m.k_loop->axis.c_str(), body))));
  return with_body(f, ir::seq({init_launch, launch}));
}

// A launch for one top-level statement: a thread per iteration of a loop (atomic
// write-back for a reduction loop), or one thread for anything else.
class GenericLaunches {
 public:
  static constexpr int kThreads = 128;

  // The launch units of s; `cond`, when defined, is a test around s (the tests of the
  // branches s sits in): it moves inside each top-level loop (through blocks without
  // allocations, sequences, lets and tests that may move likewise), so `for i { if (cond)
  // body }` becomes a launch like any loop; any other statement runs on one thread under
  // `if (cond)`. (Each unit is made here, not by units() on a statement rewritten under
  // its test: a statement under a test would be a test again.)
  std::vector<ir::Stmt> units(const ir::Stmt& s, const ir::Expr& cond = ir::Expr()) {
    std::vector<ir::Stmt> out;
    if (!s.defined()) return out;  // nothing left to run (loops of extent 0 simplified away)
    if (auto* b = s.as<ir::BlockNode>(); b && b->allocs.empty()) return units(b->body, cond);
    if (auto* q = s.as<ir::SeqNode>()) {
      for (auto& c : q->stmts)
        for (auto& u : units(c, cond)) out.push_back(u);
      return out;
    }
    if (auto* l = s.as<ir::LetStmtNode>()) {
      for (auto& u : units(l->body, cond)) out.push_back(ir::let_stmt(l->var, l->value, u, l->loc));
      return out;
    }
    if (auto* f = s.as<ir::ForNode>()) {
      if (cond.defined())
        return units(ir::for_loop(f->var, f->min, f->extent, f->for_kind, f->iter_kind, f->axis,
                                  ir::if_then_else(cond, f->body, ir::Stmt(), f->loc), f->loc));
      return {f->iter_kind == ir::IterKind::reduction && reads_own_reduction(f->body) ? single_thread(s)
                                                                                       : per_iteration(f)};
    }
    // A test around loops (a `when` whose test they do not change, hoisted out of them by
    // hoist_loop_invariants; around an assembling kernel's row blocks, a CPU-parallel loop
    // that must become launches): the test moves inside each loop of either branch, so the
    // loops become launches, when no branch writes a buffer the test reads (every iteration
    // then gets the same answer).
    if (auto* c = s.as<ir::IfThenElseNode>(); c && !writes_what_test_reads(*c)) return branch_units(*c, cond);
    return {single_thread(cond.defined() ? ir::if_then_else(cond, s, ir::Stmt(), s.loc()) : s)};
  }

 private:
  // Whether a statement reads a (non-local) buffer that it also reduces into. In a reduction
  // loop every iteration updates the same elements (the loop variable indexes none of the
  // targets, and the language makes a read of an updated buffer use the target's indices),
  // so `c[j] += c[j] + x` or `b[k] max= b[k] + 1` depend on the order of the iterations: a
  // thread per iteration with atomic updates would read values that other threads are
  // updating (lost updates on the GPU; the emulator, which switches threads only at
  // barriers, cannot show it). Such a loop runs in order on one thread.
  static bool reads_own_reduction(const ir::Stmt& body) {
    struct Targets : ir::IRVisitor {
      std::vector<ir::Buffer> reduced;
      void visit_Reduce(const ir::ReduceNode* n) override {
        if (n->buffer->scope != ir::BufferScope::local) reduced.push_back(n->buffer);
        ir::IRVisitor::visit_Reduce(n);
      }
    } targets;
    targets.visit(body);
    for (const ir::Buffer& r : targets.reduced)
      if (schedule::detail::loads_buffer(body, r)) return true;
    return false;
  }

  // The units of both branches of c, each under its test (and `outer`, the tests of the
  // branches around c, when defined): the then branch's, then the else branch's.
  std::vector<ir::Stmt> branch_units(const ir::IfThenElseNode& c, const ir::Expr& outer) {
    auto both = [&](const ir::Expr& test) { return outer.defined() ? ir::binary(ir::BinOp::land, outer, test) : test; };
    std::vector<ir::Stmt> out = units(c.then_case, both(c.cond));
    for (auto& u : units(c.else_case, both(ir::unary(ir::UnOp::lnot, c.cond)))) out.push_back(u);
    return out;
  }

  static bool writes_what_test_reads(const ir::IfThenElseNode& c) {
    struct Reads : ir::IRVisitor {
      std::vector<const ir::BufferNode*> loaded;
      void visit_Load(const ir::LoadNode* n) override {
        loaded.push_back(n->buffer.get());
        ir::IRVisitor::visit_Load(n);
      }
    } reads;
    reads.visit(c.cond);
    for (const ir::BufferNode* b : reads.loaded)
      if ((c.then_case.defined() && lower::writes_buffer(c.then_case, b)) ||
          (c.else_case.defined() && lower::writes_buffer(c.else_case, b)))
        return true;
    return false;
  }

  ir::Stmt per_iteration(const ir::ForNode* f) {
    ir::Var b(f->var.name() + "_block", DType::i64), t(f->var.name() + "_thread", DType::i64);
    // Across the threads of a reduction loop, updates of a shared element must stay
    // reductions (made atomic): no local accumulation that would end in a plain store.
    ir::Stmt body = f->iter_kind == ir::IterKind::reduction ? atomic_updates(f->body)
                                                             : schedule::accumulate_locally(f->body);
    ir::Expr flat = b * i64(kThreads) + t;
    ir::Stmt inner = ir::let_stmt(f->var, ir::cast(f->var.dtype(), ir::cast(DType::i64, f->min) + flat),
                                  ir::if_then_else(flat < ir::cast(DType::i64, f->extent), body), f->loc);
    return ir::for_loop(b, i64(0), ceil_div(f->extent, kThreads), ir::ForKind::gpu_block_x, ir::IterKind::spatial,
                        f->axis, bound(t, kThreads, ir::ForKind::gpu_thread_x, f->axis.c_str(), inner), f->loc);
  }
  static ir::Stmt single_thread(const ir::Stmt& s) {
    ir::Var b("single_block", DType::i64), t("single_thread", DType::i64);
    return ir::for_loop(b, i64(0), i64(1), ir::ForKind::gpu_block_x, ir::IterKind::spatial, "",
                        bound(t, 1, ir::ForKind::gpu_thread_x, "", s));
  }
  // A reduction loop's iterations may update one element from different threads: every
  // reduction into a buffer that is not thread-local becomes atomic. (Using the loop
  // variable in the target is not enough: c[i, i2] and c[i2, i] both use i, and the front
  // end made i a reduction loop because two values of i can meet at one element.)
  static ir::Stmt atomic_updates(const ir::Stmt& s) {
    struct Atomics : ir::IRMutator {
      ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
        if (n->buffer->scope == ir::BufferScope::local) return self;
        return ir::reduce(n->buffer, n->indices, n->op, n->value, n->loc, /*atomic=*/true);
      }
      // Stores stay plain: the language (docs/language.md §4.2, §4.5) makes every `=` index
      // its buffer by every enclosing iterator, in the same slots as every other write of
      // that buffer in the iteration, so no two threads store to one element.
    } a;
    return a.mutate(s);
  }
};

}  // namespace detail

// The pattern of an unscheduled stage-III function and the expression of its feature size.
inline CudaPlan cuda_plan(const ir::Function& f) {
  if (auto m = detail::match_spmm(f)) return {CudaPattern::spmm, m->k_loop->extent};
  if (auto m = detail::match_sddmm(f)) return {CudaPattern::sddmm, m->k_loop->extent};
  return {};
}

// The variant for a feature size (its value at call time); `aligned` says whether every
// buffer's base address is 16-byte aligned (device allocations are); `sddmm_by_rows`
// (CudaOptions, SPINDLE_CUDA_SDDMM=rows) keeps SDDMM on a warp per row.
inline CudaVariant cuda_variant(CudaPattern p, std::int64_t feature, bool aligned, bool sddmm_by_rows = false,
                                bool spmm_by_nonzeros = false) {
  CudaVariant v;
  const bool vec_ok = aligned && feature % 4 == 0 && feature > 0;
  if (p == CudaPattern::spmm) {
    v.cf = feature <= 32 ? 1 : feature <= 64 ? 2 : 4;
    v.vector = v.cf == 4 && vec_ok;
    v.nnz_parallel = spmm_by_nonzeros;
  } else if (p == CudaPattern::sddmm) {
    v.vector = vec_ok;
    std::int64_t per_lane = v.vector ? (feature + 3) / 4 : feature;
    int w = 1;
    while (w < 32 && w < per_lane) w *= 2;
    v.lanes = w;
    v.nnz_parallel = !sddmm_by_rows;
  }
  return v;
}

// Schedules an unscheduled stage-III function for CUDA (see the top of this file).
inline ir::Function schedule_cuda_default(const ir::Function& f, const lower::LowerContext&, const CudaVariant& v) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::flat, "schedule_cuda_default", "expects stage III");
  if (auto m = detail::match_spmm(f)) {
    if (ir::Buffer x = v.nnz_parallel ? detail::row_pointer(m->nz_loop->extent, m->row->var.node()) : ir::Buffer())
      return detail::schedule_spmm_nnz(f, *m, v, x);
    return detail::schedule_spmm(f, *m, v);
  }
  if (auto m = detail::match_sddmm(f)) {
    if (ir::Buffer x = v.nnz_parallel ? detail::row_pointer(m->nz_loop->extent, m->row->var.node()) : ir::Buffer())
      return detail::schedule_sddmm_nnz(f, *m, v, x);
    return detail::schedule_sddmm(f, *m, v);
  }
  ir::Function out = f;
  out.body = ir::block(f.name, {}, ir::seq(detail::GenericLaunches().units(f.body)), f.loc);
  return out;
}

}  // namespace spindle::autosched
