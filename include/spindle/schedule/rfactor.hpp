// rfactor: a reduction loop becomes `lanes` partial sums, one per GPU thread of a new
// threadIdx.x loop, combined by a warp shuffle reduction (SDDMM's per-nonzero dot product
// over the features, PRedS style).
//
//   d[x] = 0                                   for k_lane in [0, lanes) threadIdx.x:     (new, spatial)
//   for k in [m, m + n) reduction:      ->       block d_rfactor:
//     d[x] += v(k)                                 alloc d_partial: local f32[]
//                                                  d_partial = 0.0f
//                                                  for k_o in [0, ceil(n / lanes)) reduction:
//                                                    if k_o * lanes + k_lane < n:     (*)
//                                                      d_partial += v(m + k_o * lanes + k_lane)
//                                                  d_partial = warp_sum(d_partial, lanes)
//                                                  if k_lane == 0:
//                                                    d[x] = d_partial                  (the init folded in)
//
// (*) left out when lanes divides a constant n.
// Lane l sums the terms k = m + l, m + l + lanes, ... (consecutive lanes read consecutive
// elements: coalesced); warp_sum leaves the total in every lane and lane 0 writes it.
// Without an init store right before the loop the write is `d[x] += d_partial` (a
// reduction, so atomic_writeback on an outer loop can make it atomic); an init of another
// value v0 gives `d[x] = v0 + d_partial`. The body may hold inner loops, lets and guards
// (split the loop by 4 first and vectorize the inner loop for float4 loads: each lane then
// reads 4 consecutive features), but its only writes are += into one element that does not
// depend on the loop, and locals allocated inside it.
// Conditions: `lanes` is a power of two in [2, 32]; the loop is a serial reduction loop
// with no enclosing threadIdx.x loop (the lane loop is the block's x dimension, so a group
// of lanes is `lanes` consecutive lanes of one warp, as warp_sum requires). With lanes < 32
// and several groups per warp (a threadIdx.y loop around), a guard around the lane loop that
// differs between the groups of a warp (a split guard on the nonzero loop) leaves lanes out
// of the warp's shuffles: the CUDA emitter must then shuffle with the mask of the active
// groups, or the schedule keep such guards warp-uniform.
// Pre/post: stage II or III; semantics preserved up to reassociation of the sum; GPU only
// (emit_c rejects warp_sum). The CPU form, independent partial sums in registers, is
// rfactor_cpu.hpp; both share the analysis below (detail::rfactor_target).
#pragma once

#include <set>
#include <vector>

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

// What both forms of rfactor need to know about the loop: the one element it sums into
// (R, every reduction into it: targets), and an init store right before it in its sequence
// (parent, pos, init_value), which folds into the final write. Checks that the body's only
// writes are += into that element (not atomic, not local, not depending on the loop) and
// locals of its own, and that it does not read the element.
struct RfactorTarget {
  const ir::ForNode* K = nullptr;
  std::vector<ir::Stmt> path;
  const ir::ReduceNode* R = nullptr;
  std::set<const ir::ReduceNode*> targets;
  const ir::SeqNode* parent = nullptr;
  std::size_t pos = 0;
  ir::Expr init_value;
};

inline RfactorTarget rfactor_target(const ir::Stmt& body, const std::string& loop, const char* hint_combine) {
  RfactorTarget out;
  const ir::ForNode* K = out.K = find_loop(body, loop, "rfactor");
  SPINDLE_CHECK(K->iter_kind == ir::IterKind::reduction, UserError, "rfactor: loop '", loop,
                "' is spatial, not a reduction; hint: parallelise, vectorise or bind a spatial loop directly");
  SPINDLE_CHECK(K->for_kind == ir::ForKind::serial, UserError, "rfactor: loop '", loop, "' is ",
                ir::for_kind_name(K->for_kind), "; hint: rfactor a serial loop, then bind or vectorize the loops it "
                "creates");
  out.path = path_to(body, K);

  // The body's writes: += into one element, and locals of its own.
  auto uses = buffer_uses(K->body);
  std::set<const ir::ExprNode*> inner = bound_vars(K->body);
  inner.insert(K->var.get());
  const ir::ReduceNode*& R = out.R;
  for (auto* r : uses.reduces) {
    if (uses.allocated.count(r->buffer.get())) continue;
    SPINDLE_CHECK(r->op == ir::ReduceOp::add, UserError, "rfactor: the reduction '", r->buffer->name, " ",
                  ir::reduce_op_name(r->op), " ...' in loop '", loop, "' is not a sum; hint: ", hint_combine);
    SPINDLE_CHECK(!r->atomic, UserError, "rfactor: the reduction into '", r->buffer->name, "' in loop '", loop,
                  "' is atomic; hint: rfactor before atomic_writeback");
    SPINDLE_CHECK(r->buffer->scope != ir::BufferScope::local, UserError, "rfactor: loop '", loop,
                  "' reduces into the local '", r->buffer->name,
                  "', which would differ between lanes; hint: rfactor before cache_write");
    SPINDLE_CHECK(!uses_any(r->indices, inner), UserError, "rfactor: the element of '", r->buffer->name,
                  "' that loop '", loop, "' updates depends on the loop; hint: rfactor a loop that sums into one element");
    SPINDLE_CHECK(!R || (R->buffer == r->buffer && ir::equal(R->indices, r->indices)), UserError,
                  "rfactor: loop '", loop, "' reduces into more than one element (", R ? R->buffer->name : "", " and ",
                  r->buffer->name, "); hint: one partial sum per loop");
    R = r;
    out.targets.insert(r);
  }
  for (auto* st : uses.stores)
    SPINDLE_CHECK(uses.allocated.count(st->buffer.get()), UserError, "rfactor: loop '", loop, "' stores to '",
                  st->buffer->name, "'; hint: the loop body may only add into the reduced element");
  SPINDLE_CHECK(R, UserError, "rfactor: loop '", loop, "' reduces into no buffer; hint: rfactor the loop of a sum");
  for (auto* l : uses.loads)
    SPINDLE_CHECK(l->buffer != R->buffer, UserError, "rfactor: loop '", loop, "' reads '", R->buffer->name,
                  "' while summing into it; hint: the partial sums hide the running total from that read");

  // An init store right before the loop folds into the final write.
  out.parent = out.path.size() >= 2 ? out.path[out.path.size() - 2].as<ir::SeqNode>() : nullptr;
  if (out.parent) {
    while (out.parent->stmts[out.pos].get() != K) ++out.pos;
    if (out.pos > 0) {
      if (auto* st = out.parent->stmts[out.pos - 1].as<ir::StoreNode>();
          st && st->buffer == R->buffer && ir::equal(st->indices, R->indices)) {
        bool reads = false;
        for (auto* l : buffer_uses(out.parent->stmts[out.pos - 1]).loads) reads |= l->buffer == R->buffer;
        if (!reads) out.init_value = st->value;
      }
    }
  }
  return out;
}

// The final write of the combined partial sums `total`: `d[x] += total` without an init,
// else `d[x] = total` (init 0) or `d[x] = v0 + total`.
inline ir::Stmt rfactor_write(const RfactorTarget& t, const ir::Expr& total) {
  const ir::ReduceNode* R = t.R;
  if (!t.init_value.defined()) return ir::reduce(R->buffer, R->indices, ir::ReduceOp::add, total, R->loc);
  bool zero = (t.init_value.as<ir::FloatImmNode>() && t.init_value.as<ir::FloatImmNode>()->value == 0.0) ||
              is_const(t.init_value, 0);
  return ir::store(R->buffer, R->indices, zero ? total : t.init_value + total, R->loc);
}

// Replaces the loop by `by` in `body`; with a folded init, the init store goes too.
inline ir::Stmt rfactor_replace(const ir::Stmt& body, const RfactorTarget& t, const ir::Stmt& by) {
  if (!t.init_value.defined()) return replace_stmt(body, t.K, by);
  std::vector<ir::Stmt> stmts;
  for (std::size_t q = 0; q < t.parent->stmts.size(); ++q) {
    if (q + 1 == t.pos) continue;
    stmts.push_back(q == t.pos ? by : t.parent->stmts[q]);
  }
  return replace_stmt(body, t.parent, ir::seq(std::move(stmts), t.parent->loc));
}

// The loop body with its reductions into the target redirected to `partial[indices]`.
inline ir::Stmt redirect_reductions(const ir::Stmt& s, const RfactorTarget& t, const ir::Buffer& partial,
                                    std::vector<ir::Expr> indices) {
  struct Redirect : ir::IRMutator {
    const std::set<const ir::ReduceNode*>* targets;
    ir::Buffer partial;
    std::vector<ir::Expr> indices;
    ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
      if (!targets->count(n)) return ir::IRMutator::mutate_Reduce(n, self);
      return ir::reduce(partial, indices, ir::ReduceOp::add, mutate(n->value), n->loc);
    }
  } redirect;
  redirect.targets = &t.targets;
  redirect.partial = partial;
  redirect.indices = std::move(indices);
  return redirect.mutate(s);
}

}  // namespace detail

inline ir::Stmt rfactor(const ir::Stmt& body, const std::string& loop, int lanes) {
  SPINDLE_CHECK(lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0, UserError, "rfactor: loop '", loop,
                "': lanes must be a power of two in [2, 32], got ", lanes,
                "; hint: the partial sums are combined by warp shuffles within one warp");
  auto t = detail::rfactor_target(body, loop, "warp_sum combines += only");
  const ir::ForNode* K = t.K;
  for (auto& s : t.path) {
    auto* f = s.as<ir::ForNode>();
    SPINDLE_CHECK(!f || f == K || f->for_kind != ir::ForKind::gpu_thread_x, UserError, "rfactor: loop '", loop,
                  "' is inside loop '", f->var.name(), "', which is bound to threadIdx.x",
                  "; hint: the lane loop becomes threadIdx.x: bind the enclosing loop to threadIdx.y or a block index");
  }
  std::string lane_name = loop + "_lane", outer_name = loop + "_o";
  detail::check_fresh_name(body, lane_name, "rfactor");
  detail::check_fresh_name(body, outer_name, "rfactor");

  DType dt = is_int(K->var.dtype()) ? K->var.dtype() : DType::i64;
  ir::Var lane(lane_name, dt), outer(outer_name, dt);
  ir::Buffer partial = ir::local_buffer(t.R->buffer->name + "_partial", t.R->buffer->dtype);
  ir::Expr local = lower::simplify(ir::Expr(outer) * ir::int_imm(lanes, dt) + lane);
  ir::Stmt term = detail::substitute(detail::redirect_reductions(K->body, t, partial, {}), K->var,
                                     lower::simplify(K->min + local));
  auto n = detail::const_int(K->extent);
  if (!(n && *n % lanes == 0)) term = ir::if_then_else(local < K->extent, term, ir::Stmt(), K->loc);
  ir::Stmt sum = ir::for_loop(outer, ir::int_imm(0, dt), detail::ceil_div(K->extent, lanes), ir::ForKind::serial,
                              ir::IterKind::reduction, K->axis, term, K->loc);
  ir::Expr total = ir::load(partial, {});
  ir::Stmt lane_body = ir::seq({ir::store(partial, {}, ir::reduce_identity(ir::ReduceOp::add, partial->dtype), K->loc),
                                sum, ir::store(partial, {}, ir::warp_sum(total, lanes), K->loc),
                                ir::if_then_else(ir::binary(ir::BinOp::eq, lane, ir::int_imm(0, dt)),
                                                 detail::rfactor_write(t, total), ir::Stmt(), K->loc)},
                               K->loc);
  ir::Stmt lanes_loop = ir::for_loop(lane, ir::int_imm(0, dt), ir::int_imm(lanes, dt), ir::ForKind::gpu_thread_x,
                                     ir::IterKind::spatial, K->axis,
                                     ir::block(t.R->buffer->name + "_rfactor", {partial}, lane_body, K->loc), K->loc);
  return detail::rfactor_replace(body, t, lanes_loop);
}

inline ir::Function rfactor(const ir::Function& fn, const std::string& loop, int lanes) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return rfactor(b, loop, lanes); });
}

}  // namespace spindle::schedule
