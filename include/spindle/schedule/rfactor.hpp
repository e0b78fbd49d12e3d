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
// (emit_c rejects warp_sum).
#pragma once

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

inline ir::Stmt rfactor(const ir::Stmt& body, const std::string& loop, int lanes) {
  SPINDLE_CHECK(lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0, UserError, "rfactor: loop '", loop,
                "': lanes must be a power of two in [2, 32], got ", lanes,
                "; hint: the partial sums are combined by warp shuffles within one warp");
  const ir::ForNode* K = detail::find_loop(body, loop, "rfactor");
  SPINDLE_CHECK(K->iter_kind == ir::IterKind::reduction, UserError, "rfactor: loop '", loop,
                "' is spatial, not a reduction; hint: bind a spatial loop to threads directly");
  SPINDLE_CHECK(K->for_kind == ir::ForKind::serial, UserError, "rfactor: loop '", loop, "' is ",
                ir::for_kind_name(K->for_kind), "; hint: rfactor a serial loop, then bind or vectorize the loops it "
                "creates");
  auto path = detail::path_to(body, K);
  for (auto& s : path) {
    auto* f = s.as<ir::ForNode>();
    SPINDLE_CHECK(!f || f == K || f->for_kind != ir::ForKind::gpu_thread_x, UserError, "rfactor: loop '", loop,
                  "' is inside loop '", f->var.name(), "', which is bound to threadIdx.x",
                  "; hint: the lane loop becomes threadIdx.x: bind the enclosing loop to threadIdx.y or a block index");
  }
  std::string lane_name = loop + "_lane", outer_name = loop + "_o";
  detail::check_fresh_name(body, lane_name, "rfactor");
  detail::check_fresh_name(body, outer_name, "rfactor");

  // The body's writes: += into one element, and locals of its own.
  auto uses = detail::buffer_uses(K->body);
  std::set<const ir::ExprNode*> inner = detail::bound_vars(K->body);
  inner.insert(K->var.get());
  std::set<const ir::ReduceNode*> targets;
  const ir::ReduceNode* R = nullptr;
  for (auto* r : uses.reduces) {
    if (uses.allocated.count(r->buffer.get())) continue;
    SPINDLE_CHECK(r->op == ir::ReduceOp::add, UserError, "rfactor: the reduction '", r->buffer->name, " ",
                  ir::reduce_op_name(r->op), " ...' in loop '", loop, "' is not a sum; hint: warp_sum combines += only");
    SPINDLE_CHECK(!r->atomic, UserError, "rfactor: the reduction into '", r->buffer->name, "' in loop '", loop,
                  "' is atomic; hint: rfactor before atomic_writeback");
    SPINDLE_CHECK(r->buffer->scope != ir::BufferScope::local, UserError, "rfactor: loop '", loop,
                  "' reduces into the local '", r->buffer->name,
                  "', which would differ between lanes; hint: rfactor before cache_write");
    SPINDLE_CHECK(!detail::uses_any(r->indices, inner), UserError, "rfactor: the element of '", r->buffer->name,
                  "' that loop '", loop, "' updates depends on the loop; hint: rfactor a loop that sums into one element");
    SPINDLE_CHECK(!R || (R->buffer == r->buffer && ir::equal(R->indices, r->indices)), UserError,
                  "rfactor: loop '", loop, "' reduces into more than one element (", R ? R->buffer->name : "", " and ",
                  r->buffer->name, "); hint: one partial sum per loop");
    R = r;
    targets.insert(r);
  }
  for (auto* st : uses.stores)
    SPINDLE_CHECK(uses.allocated.count(st->buffer.get()), UserError, "rfactor: loop '", loop, "' stores to '",
                  st->buffer->name, "'; hint: the loop body may only add into the reduced element");
  SPINDLE_CHECK(R, UserError, "rfactor: loop '", loop, "' reduces into no buffer; hint: rfactor the loop of a sum");
  for (auto* l : uses.loads)
    SPINDLE_CHECK(l->buffer != R->buffer, UserError, "rfactor: loop '", loop, "' reads '", R->buffer->name,
                  "' while summing into it; hint: the partial sums hide the running total from that read");

  // An init store right before the loop folds into the final write.
  const ir::SeqNode* parent = path.size() >= 2 ? path[path.size() - 2].as<ir::SeqNode>() : nullptr;
  std::size_t pos = 0;
  ir::Expr init_value;
  if (parent) {
    while (parent->stmts[pos].get() != K) ++pos;
    if (pos > 0) {
      if (auto* st = parent->stmts[pos - 1].as<ir::StoreNode>();
          st && st->buffer == R->buffer && ir::equal(st->indices, R->indices)) {
        bool reads = false;
        for (auto* l : detail::buffer_uses(parent->stmts[pos - 1]).loads) reads |= l->buffer == R->buffer;
        if (!reads) init_value = st->value;
      }
    }
  }

  DType t = is_int(K->var.dtype()) ? K->var.dtype() : DType::i64;
  ir::Var lane(lane_name, t), outer(outer_name, t);
  ir::Buffer partial = ir::local_buffer(R->buffer->name + "_partial", R->buffer->dtype);

  struct Redirect : ir::IRMutator {
    const std::set<const ir::ReduceNode*>* targets;
    ir::Buffer partial;
    ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
      if (!targets->count(n)) return ir::IRMutator::mutate_Reduce(n, self);
      return ir::reduce(partial, {}, ir::ReduceOp::add, mutate(n->value), n->loc);
    }
  } redirect;
  redirect.targets = &targets;
  redirect.partial = partial;
  ir::Expr local = lower::simplify(ir::Expr(outer) * ir::int_imm(lanes, t) + lane);
  ir::Stmt term = detail::substitute(redirect.mutate(K->body), K->var, lower::simplify(K->min + local));
  auto n = detail::const_int(K->extent);
  if (!(n && *n % lanes == 0)) term = ir::if_then_else(local < K->extent, term, ir::Stmt(), K->loc);
  ir::Stmt sum = ir::for_loop(outer, ir::int_imm(0, t), detail::ceil_div(K->extent, lanes), ir::ForKind::serial,
                              ir::IterKind::reduction, K->axis, term, K->loc);
  ir::Expr total = ir::load(partial, {});
  ir::Stmt write;
  if (!init_value.defined()) {
    write = ir::reduce(R->buffer, R->indices, ir::ReduceOp::add, total, R->loc);
  } else {
    bool zero = (init_value.as<ir::FloatImmNode>() && init_value.as<ir::FloatImmNode>()->value == 0.0) ||
                detail::is_const(init_value, 0);
    write = ir::store(R->buffer, R->indices, zero ? total : init_value + total, R->loc);
  }
  ir::Stmt lane_body = ir::seq({ir::store(partial, {}, ir::reduce_identity(ir::ReduceOp::add, partial->dtype), K->loc),
                                sum, ir::store(partial, {}, ir::warp_sum(total, lanes), K->loc),
                                ir::if_then_else(ir::binary(ir::BinOp::eq, lane, ir::int_imm(0, t)), write,
                                                 ir::Stmt(), K->loc)},
                               K->loc);
  ir::Stmt lanes_loop = ir::for_loop(lane, ir::int_imm(0, t), ir::int_imm(lanes, t), ir::ForKind::gpu_thread_x,
                                     ir::IterKind::spatial, K->axis,
                                     ir::block(R->buffer->name + "_rfactor", {partial}, lane_body, K->loc), K->loc);
  if (!init_value.defined()) return detail::replace_stmt(body, K, lanes_loop);
  std::vector<ir::Stmt> stmts;
  for (std::size_t q = 0; q < parent->stmts.size(); ++q) {
    if (q + 1 == pos) continue;
    stmts.push_back(q == pos ? lanes_loop : parent->stmts[q]);
  }
  return detail::replace_stmt(body, parent, ir::seq(std::move(stmts), parent->loc));
}

inline ir::Function rfactor(const ir::Function& fn, const std::string& loop, int lanes) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return rfactor(b, loop, lanes); });
}

}  // namespace spindle::schedule
