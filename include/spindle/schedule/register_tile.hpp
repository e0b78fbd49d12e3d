// register_tile: keeps the output row of a reduction in registers across the reduction.
// For a nest of the form (SpMM: i, then j, then the feature k)
//
//   for k in [0, K): C[x, k] = c0                        (init; optional; or under a
//                                                         test of scalars: if (c) for k ...)
//   for j ... (reduction loops, lets, guards):
//     for k in [0, K) over a dense axis: C[x, k] += v(k)   (or several: += v1(k); += v2(k))
//
// the dense spatial loop is split into a cascade of constant-width tiles (widths W1 > W2
// > ...; e.g. 128, 64, 32, 16 floats for 512-bit vectors), each tile reordered outside the
// reduction loops and accumulated in a local array (cache_write to registers):
//
//   for ko in [0, (K - r0) / W):                           r0 = 0
//     acc[W] = c0 (or C[x, base + kk] without init; `if (c) acc = c0 else acc = C`)
//     for j ...: for kk in [0, W): acc[kk] += v(base + kk)   base = r0 + ko * W
//     for kk in [0, W): C[x, base + kk] = acc[kk]
//   let r1 = r0 + (K - r0) / W * W  ... next width ...
//   remainder [rN, K): the original nest on that range, when rN < K
//
// A symbolic K equal to one of the narrower widths also gets a version of its own, one tile
// of that width under `if (K == W)`, in which the C compiler knows K (constant strides).
// Every tile loop has a constant trip count, so the C compiler keeps acc in vector
// registers; C is written once per element instead of once per nonzero. The cascade makes
// any K use the widest tiles that fit (K = 32 runs one 32-wide tile). A constant extent no
// wider than the widest tile becomes one tile of exactly that width.
// The inner loop may hold several updates of the same element with the same operator
// (`c(i, n) += a(i, k) * w(k, n); c(i, n) += b(i, k) * v(k, n)`: two GEMM products summed in
// one pass); each becomes an update of the accumulator, in the same order, so the compiler
// emits one fused multiply-add per product.
// Pre/post: stage III; semantics preserved (each output element sums the same terms in the
// same order).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "spindle/ir/equal.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

inline std::vector<std::int64_t> tile_widths(int vector_bits, DType t);

namespace detail {

class RegisterTiling : public ir::IRMutator {
 public:
  explicit RegisterTiling(int vector_bits) : vector_bits_(vector_bits) {}

 protected:
  ir::Stmt mutate_Seq(const ir::SeqNode* n, const ir::Stmt& self) override {
    std::vector<ir::Stmt> out;
    bool changed = false;
    for (std::size_t q = 0; q < n->stmts.size(); ++q) {
      const ir::Stmt& s = n->stmts[q];
      if (q + 1 < n->stmts.size()) {
        if (auto m = match(n->stmts[q + 1]); m && init_of(s, *m).loop) {
          out.push_back(rewrite(*m, init_of(s, *m)));
          ++q;
          changed = true;
          continue;
        }
      }
      ir::Stmt t = mutate(s);
      changed |= !t.same_as(s);
      out.push_back(t);
    }
    return changed ? ir::seq(std::move(out), n->loc) : self;
  }

  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    if (n->iter_kind == ir::IterKind::reduction) {
      if (auto m = match(self)) return rewrite(*m, Init{});  // no init: accumulate into C
    }
    if (n->iter_kind == ir::IterKind::spatial && n->for_kind == ir::ForKind::serial) {
      if (auto rows = block_rows(n)) return *rows;
    }
    return ir::IRMutator::mutate_For(n, self);
  }

 private:
  // The init of a nest: `for k: C[x, k] = c0`, run when `when` holds (always when undefined).
  struct Init {
    const ir::ForNode* loop = nullptr;
    ir::Expr when;
  };

  struct Match {
    ir::Stmt nest;                        // the outermost reduction loop
    std::vector<ir::Stmt> wrappers;       // loops, lets and guards above the inner loop
    const ir::ForNode* inner = nullptr;   // the dense spatial loop
    const ir::ReduceNode* reduce = nullptr;     // the first update (buffer, indices, operator)
    std::vector<const ir::ReduceNode*> updates;  // every update of the inner loop, in order
  };

  static bool uses_any(const ir::Expr& e, const std::vector<const ir::ExprNode*>& vars) {
    for (auto* v : vars)
      if (ir::uses_var(e, v)) return true;
    return false;
  }

  std::optional<Match> match(const ir::Stmt& nest) const {
    Match m;
    m.nest = nest;
    std::vector<const ir::ExprNode*> bound;
    bool has_reduction_loop = false;
    ir::Stmt s = nest;
    while (true) {
      if (auto* f = s.as<ir::ForNode>(); f && f->iter_kind == ir::IterKind::reduction) {
        has_reduction_loop = true;
        bound.push_back(f->var.get());
        m.wrappers.push_back(s);
        s = f->body;
      } else if (auto* l = s.as<ir::LetStmtNode>()) {
        bound.push_back(l->var.get());
        m.wrappers.push_back(s);
        s = l->body;
      } else if (auto* c = s.as<ir::IfThenElseNode>(); c && !c->else_case.defined()) {
        m.wrappers.push_back(s);
        s = c->then_case;
      } else {
        break;
      }
    }
    auto* inner = s.as<ir::ForNode>();
    if (!has_reduction_loop || !inner || inner->iter_kind != ir::IterKind::spatial || !dense_axis(*inner)) return std::nullopt;
    if (!is_zero(inner->min) || uses_any(inner->extent, bound)) return std::nullopt;
    // One update, or a sequence of updates of the same element with the same operator.
    std::vector<const ir::ReduceNode*> updates;
    if (auto* sq = inner->body.as<ir::SeqNode>()) {
      for (const ir::Stmt& u : sq->stmts) updates.push_back(u.as<ir::ReduceNode>());
    } else {
      updates.push_back(inner->body.as<ir::ReduceNode>());
    }
    auto* r = updates.front();
    if (!r || r->buffer->scope != ir::BufferScope::global || r->indices.empty()) return std::nullopt;
    if (!r->indices.back().same_as(inner->var)) return std::nullopt;
    for (std::size_t k = 0; k + 1 < r->indices.size(); ++k) {
      if (ir::uses_var(r->indices[k], inner->var.get()) || uses_any(r->indices[k], bound)) return std::nullopt;
    }
    for (const ir::ReduceNode* u : updates) {
      if (!u || u->atomic || u->buffer != r->buffer || u->op != r->op || u->indices.size() != r->indices.size()) return std::nullopt;
      for (std::size_t k = 0; k < r->indices.size(); ++k)
        if (!ir::equal(u->indices[k], r->indices[k])) return std::nullopt;
    }
    // A nest that reads C itself (`c(k) max= (c(k) + a(j)) / 2` over j: each update depends
    // on the ones before it, docs/language.md) is left alone: inside a tile those reads would
    // see C as it was before the reduction instead of the running value in the accumulator
    // (spindle-kernel-fuzz seed 7000097 got 2 instead of 6).
    if (loads_buffer(nest, r->buffer)) return std::nullopt;
    m.inner = inner;
    m.reduce = r;
    m.updates = std::move(updates);
    return m;
  }

  // The statement before the nest as its init: `for k: C[x, k] = c0` (init_matches), or that
  // loop under `if (c)` with a condition of scalars only (iteration_inference's "R's indices
  // ascend": the loops cannot change it). Init{} when it is neither.
  static Init init_of(const ir::Stmt& s, const Match& m) {
    if (init_matches(s, m)) return {s.as<ir::ForNode>(), ir::Expr()};
    auto* c = s.as<ir::IfThenElseNode>();
    if (!c || c->else_case.defined() || !init_matches(c->then_case, m) || reads_memory(c->cond)) return {};
    return {c->then_case.as<ir::ForNode>(), c->cond};
  }

  // The statement before the nest initialises exactly C[x, k] over the same loop.
  static bool init_matches(const ir::Stmt& s, const Match& m) {
    auto* f = s.as<ir::ForNode>();
    if (!f || f->axis != m.inner->axis || !is_zero(f->min) || !ir::equal(f->extent, m.inner->extent)) return false;
    auto* st = f->body.as<ir::StoreNode>();
    if (!st || st->buffer != m.reduce->buffer || st->indices.size() != m.reduce->indices.size()) return false;
    if (!st->indices.back().same_as(f->var) || ir::uses_var(st->value, f->var.get())) return false;
    for (std::size_t k = 0; k + 1 < st->indices.size(); ++k)
      if (!ir::equal(st->indices[k], m.reduce->indices[k])) return false;
    return true;
  }

  // Dense loops over feature-like axes: the emitter names these loops after dense axes;
  // the caller only tiles loops whose extent does not read memory (no indptr).
  static bool dense_axis(const ir::ForNode& f) { return !reads_memory(f.extent); }
  static bool reads_memory(const ir::Expr& e) {
    struct HasLoad : ir::IRVisitor {
      bool found = false;
      void visit_Load(const ir::LoadNode*) override { found = true; }
    } h;
    h.visit(e);
    return h.found;
  }

  static bool is_zero(const ir::Expr& e) {
    auto* c = e.as<ir::IntImmNode>();
    return c && c->value == 0;
  }

  // Rebuilds the wrappers (reduction loops, lets, guards) around a new innermost body.
  static ir::Stmt rewrap(const std::vector<ir::Stmt>& wrappers, ir::Stmt body) {
    for (std::size_t q = wrappers.size(); q-- > 0;) {
      const ir::Stmt& w = wrappers[q];
      if (auto* f = w.as<ir::ForNode>())
        body = ir::for_loop(f->var, f->min, f->extent, f->for_kind, f->iter_kind, f->axis, body, f->loc);
      else if (auto* l = w.as<ir::LetStmtNode>())
        body = ir::let_stmt(l->var, l->value, body, l->loc);
      else if (auto* c = w.as<ir::IfThenElseNode>())
        body = ir::if_then_else(c->cond, body, ir::Stmt(), c->loc);
    }
    return body;
  }

  // The rows of a two-dimensional tile: `count` consecutive values of the spatial loop
  // `loop`'s variable, `loop->min + block * count + r` for r in [0, count). count is
  // kRowBlock, or the loop's whole extent when that is a constant of at most kMaxRowBlock (a
  // block's rows: BSR's `bi`), so a 3-row block is one tile of 3 rows and no row runs alone.
  static constexpr std::int64_t kRowBlock = 6;
  static constexpr std::int64_t kMaxRowBlock = 8;
  // Vector registers a two-dimensional tile may hold (of the 16 or 32 a CPU has).
  static constexpr std::int64_t kTileVectors = 12;
  struct Rows {
    const ir::ForNode* loop;
    ir::Var block;
    std::int64_t count;
    ir::Expr row(const ir::Expr& r) const { return loop->min + ir::Expr(block) * ir::int_imm(count) + r; }
  };

  // One tile loop of `width` columns (times rows->count rows with `rows`), starting from the
  // init's constant (under its condition) or from C.
  ir::Stmt tile(const Match& m, const Init& init_stmt, const ir::Expr& start, std::int64_t width, const Rows* rows) {
    const ir::Expr init_value = init_value_of(init_stmt.loop);
    const ir::ForNode& inner = *m.inner;
    const ir::ReduceNode& red = *m.reduce;
    const std::int64_t R = rows ? rows->count : 1;
    ir::Buffer acc = ir::local_buffer(red.buffer->name + "_tile", red.buffer->dtype, {ir::int_imm(R * width)});
    ir::Var ko(inner.var.name() + "_tile", DType::i64);
    ir::Expr base = start + ir::Expr(ko) * width;
    // r: the row within the block (undefined for a one-row tile).
    auto at_row = [&](const ir::Expr& e, const ir::Expr& r) {
      return rows ? ir::substitute(e, rows->loop->var, rows->row(r)) : e;
    };
    auto column = [&](const ir::Expr& r, const ir::Var& kk) {
      std::vector<ir::Expr> idx;
      for (std::size_t k = 0; k + 1 < red.indices.size(); ++k) idx.push_back(at_row(red.indices[k], r));
      idx.push_back(base + ir::Expr(kk));
      return idx;
    };
    auto slot = [&](const ir::Expr& r, const ir::Var& kk) {
      return rows ? r * ir::int_imm(width) + ir::Expr(kk) : ir::Expr(kk);
    };
    // [for r in [0, R):] for kk in [0, width): body(r, kk). The r loop carries no unroll
    // pragma: clang unrolls a constant 6 by itself and then keeps the tile in registers; with
    // "unroll(enable)" it spilled the tile (GEMM 128x128: 18 GMAC/s against 35 on one core).
    auto tile_loops = [&](auto&& make_body) {
      ir::Var kk(inner.var.name(), DType::i64);
      ir::Var r(rows ? rows->loop->var.name() + "_row" : std::string("r"), DType::i64);
      ir::Stmt cols = ir::for_loop(kk, ir::int_imm(0), ir::int_imm(width), ir::ForKind::serial,
                                   ir::IterKind::spatial, inner.axis,
                                   make_body(rows ? ir::Expr(r) : ir::Expr(), kk), inner.loc);
      if (!rows) return cols;
      return ir::for_loop(r, ir::int_imm(0), ir::int_imm(R), ir::ForKind::serial, ir::IterKind::spatial,
                          rows->loop->axis, cols, rows->loop->loc);
    };
    auto start_from = [&](bool constant) {
      return tile_loops([&](const ir::Expr& r, const ir::Var& kk) {
        ir::Expr v = constant ? at_row(init_value, r) : ir::load(red.buffer, column(r, kk));
        return ir::store(acc, {slot(r, kk)}, v, inner.loc);
      });
    };
    ir::Stmt init = !init_value.defined()      ? start_from(false)
                    : !init_stmt.when.defined() ? start_from(true)
                                                : ir::if_then_else(init_stmt.when, start_from(true), start_from(false),
                                                                   inner.loc);
    ir::Stmt update = tile_loops([&](const ir::Expr& r, const ir::Var& kk) {
      std::vector<ir::Stmt> each;
      for (const ir::ReduceNode* u : m.updates) {
        ir::Expr v = at_row(ir::substitute(u->value, inner.var, base + ir::Expr(kk)), r);
        each.push_back(ir::reduce(acc, {slot(r, kk)}, u->op, v, u->loc));
      }
      return each.size() == 1 ? each.front() : ir::seq(std::move(each), red.loc);
    });
    ir::Stmt write = tile_loops([&](const ir::Expr& r, const ir::Var& kk) {
      return ir::store(red.buffer, column(r, kk), ir::load(acc, {slot(r, kk)}), inner.loc);
    });
    ir::Stmt body = ir::block(red.buffer->name + "_register_tile", {acc},
                              ir::seq({init, rewrap(m.wrappers, update), write}, inner.loc), inner.loc);
    ir::Expr count = (inner.extent - start) / ir::int_imm(width);
    return ir::for_loop(ko, ir::int_imm(0), count, ir::ForKind::serial, ir::IterKind::spatial, inner.axis, body,
                        inner.loc);
  }

  // The original nest (and init) restricted to [start, K), under `start < K`: when the tiles
  // cover K (every K a multiple of the narrowest width) the reduction loops around the empty
  // range would still walk every nonzero of the row (SpMM at K = 32 on pubmed ran 1.2x slower
  // than a user schedule without that walk).
  ir::Stmt remainder(const Match& m, const Init& init_stmt, const ir::Expr& start) {
    const ir::ForNode& inner = *m.inner;
    ir::Expr ext = inner.extent - start;
    ir::Stmt rest = rewrap(m.wrappers, ir::for_loop(inner.var, start, ext, inner.for_kind, inner.iter_kind,
                                                    inner.axis, inner.body, inner.loc));
    if (const ir::ForNode* init = init_stmt.loop) {
      ir::Stmt loop = ir::for_loop(init->var, start, ext, init->for_kind, init->iter_kind, init->axis, init->body,
                                   init->loc);
      if (init_stmt.when.defined()) loop = ir::if_then_else(init_stmt.when, loop, ir::Stmt(), init->loc);
      rest = ir::seq({loop, rest}, inner.loc);
    }
    return ir::if_then_else(start < inner.extent, rest, ir::Stmt(), inner.loc);
  }

  // Tiles of widths[level], then the narrower ones, then the remainder (per row of a block).
  ir::Stmt cascade(const Match& m, const Init& init, const ir::Expr& start, const std::vector<std::int64_t>& widths,
                   std::size_t level, const Rows* rows) {
    if (level == widths.size()) {
      if (!rows) return remainder(m, init, start);
      ir::Var r(rows->loop->var.name() + "_row", DType::i64);
      ir::Stmt rest = detail::substitute(remainder(m, init, start), rows->loop->var, rows->row(ir::Expr(r)));
      return ir::for_loop(r, ir::int_imm(0), ir::int_imm(rows->count), ir::ForKind::serial, ir::IterKind::spatial,
                          rows->loop->axis, rest, rows->loop->loc);
    }
    std::int64_t w = widths[level];
    ir::Stmt loop = tile(m, init, start, w, rows);
    ir::Var done(m.inner->var.name() + "_done" + std::to_string(level), DType::i64);
    ir::Expr next = start + (m.inner->extent - start) / ir::int_imm(w) * ir::int_imm(w);
    return ir::seq({loop, ir::let_stmt(done, next, cascade(m, init, done, widths, level + 1, rows),
                                       m.inner->loc)},
                   m.inner->loc);
  }

  static ir::Expr init_value_of(const ir::ForNode* init) {
    return init ? init->body.as<ir::StoreNode>()->value : ir::Expr();
  }

  ir::Stmt rewrite(const Match& m, const Init& init) {
    const std::vector<std::int64_t> widths = tile_widths(vector_bits_, m.reduce->buffer->dtype);
    // A compile-time extent (dense_fixed_n: the lanes of a sliced ELL, a block's columns) no
    // wider than the widest tile is one tile of exactly that width: no tile loops that run
    // zero times, and no remainder nest that would accumulate in memory.
    if (auto* c = m.inner->extent.as<ir::IntImmNode>(); c && c->value > 0 && c->value <= widths.front())
      return tile(m, init, ir::int_imm(0), c->value, nullptr);
    ir::Stmt general = cascade(m, init, ir::int_imm(0), widths, 0, nullptr);
    if (m.inner->extent.as<ir::IntImmNode>()) return general;
    // A symbolic extent equal to one of the narrower widths (K = 32, 64: the usual feature
    // sizes) runs one tile of that width in a version of its own, `if (K == w)`: the same
    // operations in the same order as the cascade's, and the C compiler, knowing K in that
    // branch, makes the strides constants. The cascade for K = 32 ran SpMM on pubmed 1.3x
    // slower than one 32-wide tile (1 thread, clang -O3). K equal to the widest width runs
    // the cascade's first tile loop once (a version of its own measured within noise at K =
    // 128 and added about 5 % to SpMM's compile; the other versions add about 40 %).
    for (std::size_t q = widths.size(); q-- > 1;)
      general = ir::if_then_else(ir::binary(ir::BinOp::eq, m.inner->extent, ir::int_imm(widths[q])),
                                 tile(m, init, ir::int_imm(0), widths[q], nullptr), general,
                                 m.inner->loc);
    return general;
  }

  // --- two-dimensional tiles: several output rows share each load of the other operand ----

  // A spatial loop `for x: [init;] nest` whose nest (reduction loops, lets, guards, the dense
  // inner loop) does not depend on x, writing C at x in one slot, with a value that reads some
  // operand independently of x (GEMM's W row, the weight gradient's B row, BSR's X rows): the
  // rows of a block (Rows::count) accumulate together, so each such load feeds that many
  // updates instead of one. Column tiles of up to kTileVectors / count vectors, halving to
  // one vector, the last columns per row, the last rows (not a whole block) one-row tiles.
  std::optional<ir::Stmt> block_rows(const ir::ForNode* n) {
    const ir::SeqNode* sq = n->body.as<ir::SeqNode>();
    if (sq && sq->stmts.size() != 2) return std::nullopt;
    ir::Stmt nest = sq ? sq->stmts[1] : n->body;
    auto* outer = nest.as<ir::ForNode>();
    if (!outer || outer->iter_kind != ir::IterKind::reduction) return std::nullopt;
    auto m = match(nest);
    if (!m) return std::nullopt;
    const Init init = sq ? init_of(sq->stmts[0], *m) : Init{};
    if (sq && !init.loop) return std::nullopt;
    if (init.when.defined() && ir::uses_var(init.when, n->var.get())) return std::nullopt;  // one test per block
    const ir::ExprNode* x = n->var.get();
    // The reduction's iteration space is the same for every x.
    if (ir::uses_var(m->inner->extent, x)) return std::nullopt;
    for (auto& w : m->wrappers) {
      if (auto* f = w.as<ir::ForNode>()) {
        if (ir::uses_var(f->min, x) || ir::uses_var(f->extent, x)) return std::nullopt;
      } else if (auto* l = w.as<ir::LetStmtNode>()) {
        if (ir::uses_var(l->value, x)) return std::nullopt;
      } else if (auto* c = w.as<ir::IfThenElseNode>()) {
        if (ir::uses_var(c->cond, x)) return std::nullopt;
      }
    }
    // x is one slot of C's index exactly (so the rows write different elements); no other
    // slot uses it.
    int slots = 0;
    for (std::size_t k = 0; k + 1 < m->reduce->indices.size(); ++k) {
      if (m->reduce->indices[k].same_as(n->var)) ++slots;
      else if (ir::uses_var(m->reduce->indices[k], x)) return std::nullopt;
    }
    if (slots != 1) return std::nullopt;
    // Worth it only when some load of the values is shared by the rows.
    bool shared = false;
    for (const ir::ReduceNode* u : m->updates) shared |= shares_a_load(u->value, x, m->inner->var.get());
    if (!shared) return std::nullopt;

    const std::int64_t lanes = tile_widths(vector_bits_, m->reduce->buffer->dtype).back();
    // A constant extent of at most kMaxRowBlock rows is one block (BSR's 3 rows of a block
    // row: each X vector loaded feeds 3 multiply-adds, and no row is left to a one-row tile);
    // otherwise blocks of kRowBlock rows and the rest one row at a time.
    auto* fixed = n->extent.as<ir::IntImmNode>();
    if (fixed && fixed->value < 2) return std::nullopt;  // one row (or none): nothing to share
    const std::int64_t count = fixed && fixed->value <= kMaxRowBlock ? fixed->value : kRowBlock;
    // Column tiles: the widest power of two of vectors per row with count x that many
    // vectors within kTileVectors (6 rows: 2 vectors; 3 rows: 4; 8 rows: 1), then halves.
    std::int64_t vectors = 1;
    while (count * vectors * 2 <= kTileVectors) vectors *= 2;
    std::vector<std::int64_t> widths;
    for (std::int64_t v = vectors; v >= 1; v /= 2) widths.push_back(v * lanes);
    const Rows rows{n, ir::Var(n->var.name() + "_rows", DType::i64), count};
    const ir::Expr R = ir::int_imm(count);
    ir::Stmt tiles = cascade(*m, init, ir::int_imm(0), widths, 0, &rows);
    // One block: its rows are min + r, no block loop.
    if (fixed && fixed->value == count) return detail::substitute(tiles, rows.block, ir::int_imm(0));
    ir::Stmt blocks = ir::for_loop(rows.block, ir::int_imm(0), n->extent / R, ir::ForKind::serial,
                                   ir::IterKind::spatial, n->axis, tiles, n->loc);
    // The last extent % count rows: one-row tiles.
    ir::Expr full = n->extent / R * R;
    ir::Stmt rest_rows = ir::for_loop(n->var, n->min + full, n->extent - full, n->for_kind, n->iter_kind, n->axis,
                                      mutate(n->body), n->loc);
    return ir::seq({blocks, rest_rows}, n->loc);
  }

  // Does `value` load some buffer at an index that uses the inner loop's variable but not x?
  static bool shares_a_load(const ir::Expr& value, const ir::ExprNode* x, const ir::ExprNode* inner) {
    struct Loads : ir::IRVisitor {
      const ir::ExprNode* x;
      const ir::ExprNode* inner;
      bool found = false;
      void visit_Load(const ir::LoadNode* l) override {
        bool uses_inner = false, uses_x = false;
        for (auto& e : l->indices) {
          uses_inner |= ir::uses_var(e, inner);
          uses_x |= ir::uses_var(e, x);
        }
        found |= uses_inner && !uses_x;
        ir::IRVisitor::visit_Load(l);
      }
    } v;
    v.x = x;
    v.inner = inner;
    v.visit(value);
    return v.found;
  }

  int vector_bits_;
};

}  // namespace detail

// Tile widths for a vector register of `vector_bits`: 8, 4, 2 and 1 vectors of the type.
inline std::vector<std::int64_t> tile_widths(int vector_bits, DType t) {
  std::int64_t lanes = std::max<std::int64_t>(1, vector_bits / (8 * dtype_bytes(t)));
  return {8 * lanes, 4 * lanes, 2 * lanes, lanes};
}

// Tiles every matching reduction nest for vectors of `vector_bits` bits.
inline ir::Stmt register_tile(const ir::Stmt& s, int vector_bits) {
  return detail::RegisterTiling(vector_bits).mutate(s);
}

}  // namespace spindle::schedule
