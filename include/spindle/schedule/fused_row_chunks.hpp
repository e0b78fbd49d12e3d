// fused_row_chunks (stage III, the default CPU schedule): the loop of a fused root chain of two
// axes (sparse_fuse, lowered by lower_sparse_iter's fused_loop) becomes chunks of positions,
// each walking its rows as the nested loops do:
//
//   for i_j in [0, N):                          for i_j_chunk in [0, ceil(N / B)):
//     let J_abs = i_j                             let lo = i_j_chunk * B, hi = min(N, lo + B)
//     let I_abs = segment(X, 0, R, J_abs)   ->    for i in [segment(X, 0, R, lo), segment(X, 0, R, hi - 1) + 1):
//     let i = I_abs                                 for j in [max(lo, X[i]) - X[i], min(hi, X[i + 1]) - X[i]):
//     let j = J_abs - X[i]                            let J_abs = X[i] + j; let I_abs = i
//     S                                               S
//
// The same points in the same order, so the same result. The chunks split the nonzeros
// evenly (the point of fusing: a skewed matrix's rows balance across threads) while each
// position costs what it costs in the row loop: per position, the fused loop's row search
// (even from the previous answer: spindle_segment_hint_*) is a dependent load chain through
// every iteration, which made fused SDDMM on ppi 1.6x slower than the row loop at K = 32.
// Two searches per chunk of B = 256 positions remain. Other loops are left alone: chains of
// more axes or under an enclosing loop, and a fused loop a user schedule addresses (this
// runs in the default schedule only).
// Pre/post: stage III.
#pragma once

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/ops.hpp"

namespace spindle::schedule {

namespace detail {

inline constexpr std::int64_t kFusedChunk = 256;

class FusedRowChunks : public ir::IRMutator {
 public:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt body = mutate(n->body);
    // The four lets of a fused root chain of two axes (lower_sparse_iter::fused_loop).
    auto* abs_j = body.as<ir::LetStmtNode>();
    auto* min0 = n->min.as<ir::IntImmNode>();
    if (!abs_j || !min0 || min0->value != 0 || n->for_kind != ir::ForKind::serial || abs_j->value.get() != n->var.get())
      return rebuilt(n, self, body);
    auto* abs_i = abs_j->body.as<ir::LetStmtNode>();
    auto* seg = abs_i ? abs_i->value.as<ir::FindPosNode>() : nullptr;
    auto* zero = seg ? seg->begin.as<ir::IntImmNode>() : nullptr;
    if (!seg || seg->mode != ir::FindMode::segment || !zero || zero->value != 0 ||
        seg->value.get() != abs_j->var.get())
      return rebuilt(n, self, body);
    auto* row = abs_i->body.as<ir::LetStmtNode>();
    if (!row || row->value.get() != abs_i->var.get()) return rebuilt(n, self, body);
    auto* pos = row->body.as<ir::LetStmtNode>();
    auto* sub = pos ? pos->value.as<ir::BinaryNode>() : nullptr;
    if (!sub || sub->op != ir::BinOp::sub || sub->a.get() != abs_j->var.get()) return rebuilt(n, self, body);

    auto i64 = [](std::int64_t v) { return ir::int_imm(v); };
    const ir::Buffer& X = seg->indices;
    auto x_at = [&](ir::Expr r) { return ir::cast(DType::i64, ir::load(X, {std::move(r)})); };
    const ir::Var& i = row->var;
    const ir::Var& j = pos->var;
    std::string rows_axis = n->axis, cols_axis = n->axis;
    if (auto star = n->axis.find('*'); star != std::string::npos)
      rows_axis = n->axis.substr(0, star), cols_axis = n->axis.substr(star + 1);
    ir::Var chunk(n->var.name() + "_chunk", DType::i64), lo("chunk_lo", DType::i64), hi("chunk_hi", DType::i64);
    ir::Var first("chunk_row_first", DType::i64), last("chunk_row_last", DType::i64);
    ir::Expr first_pos = ir::max(ir::Expr(lo), x_at(i));  // row i's positions inside the chunk
    ir::Expr end_pos = ir::min(ir::Expr(hi), x_at(ir::Expr(i) + i64(1)));
    ir::Stmt inner = ir::let_stmt(abs_j->var, x_at(i) + ir::Expr(j),
                                  ir::let_stmt(abs_i->var, i, pos->body, n->loc), n->loc);
    ir::Stmt cols = ir::for_loop(j, first_pos - x_at(i), end_pos - first_pos, ir::ForKind::serial, n->iter_kind,
                                 cols_axis, inner, n->loc);
    ir::Stmt rows = ir::for_loop(i, first, ir::Expr(last) + i64(1) - ir::Expr(first), ir::ForKind::serial,
                                 n->iter_kind, rows_axis, cols, n->loc);
    // The chunk's last row is searched from its first. In a block, so that the C emitter keeps
    // no hint across chunks (spindle_segment_hint_*): two fewer values live in the row loops,
    // which Clang otherwise spilled and reloaded per nonzero.
    ir::Stmt chunk_body = ir::block(
        "chunk", {},
        ir::let_stmt(
            lo, ir::Expr(chunk) * i64(kFusedChunk),
            ir::let_stmt(hi, ir::min(n->extent, ir::Expr(lo) + i64(kFusedChunk)),
                         ir::let_stmt(first, ir::find_segment(X, i64(0), seg->end, lo),
                                      ir::let_stmt(last,
                                                   ir::Expr(first) + ir::find_segment(X, first, seg->end,
                                                                                      ir::Expr(hi) - i64(1)),
                                                   rows, n->loc),
                                      n->loc),
                         n->loc),
            n->loc),
        n->loc);
    return ir::for_loop(chunk, i64(0), (n->extent + i64(kFusedChunk - 1)) / i64(kFusedChunk), ir::ForKind::serial,
                        n->iter_kind, n->axis, chunk_body, n->loc);
  }

 private:
  static ir::Stmt rebuilt(const ir::ForNode* n, const ir::Stmt& self, const ir::Stmt& body) {
    if (body.same_as(n->body)) return self;
    return ir::for_loop(n->var, n->min, n->extent, n->for_kind, n->iter_kind, n->axis, body, n->loc);
  }
};

}  // namespace detail

inline ir::Stmt fused_row_chunks(const ir::Stmt& body) { return detail::FusedRowChunks().mutate(body); }

}  // namespace spindle::schedule
