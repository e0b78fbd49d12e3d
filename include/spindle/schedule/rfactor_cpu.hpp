// rfactor_cpu: a sum becomes `lanes` independent partial sums that a CPU keeps in registers
// (or in one vector register when the lane loop is vectorised), added together at the end.
// One chain of dependent additions (SpMV's row sum: each add waits for the previous one)
// becomes `lanes` chains that run side by side.
//
//   d[x] = 0                                 block d_rfactor: alloc d_partial: local T[lanes]
//   for k in [m, m + n) reduction:    ->       for k_lane in [0, lanes): d_partial[k_lane] = 0
//     d[x] += v(k)                             for k_o in [0, n / lanes) reduction:
//                                                for k_lane in [0, lanes):
//                                                  d_partial[k_lane] += v(m + k_o * lanes + k_lane)
//                                              for k_lane in [0, lanes):                        (*)
//                                                if k_lane < n - n / lanes * lanes:
//                                                  d_partial[k_lane] += v(m + n / lanes * lanes + k_lane)
//                                              d[x] = (d_partial[0] + d_partial[1]) + ...       (a tree)
//
// (*) left out when lanes divides a constant n. Lane l sums the terms m + l, m + l + lanes,
// ... of the full groups, so a group's `lanes` terms are adjacent (vectorize("k_lane") loads
// them as one vector); the tail of fewer than `lanes` terms is one more, partial, group: lane
// l takes term l of it when there is one, so the tail is `lanes` independent guarded adds (one
// masked vector step when vectorised) instead of a chain of dependent adds into one lane
// (SpMV on bcsstk25 / ppi, 8 lanes: 15-20 % faster by the tail alone, docs/benchmarks.md). The
// guard keeps every read inside the loop's range. The init store
// right before the loop, the conditions on the body (its only writes are += into one element
// that does not depend on the loop, and locals of its own) and the final write are those of
// the GPU form (rfactor.hpp, detail::rfactor_target). The k_lane loops (init, group, tail)
// are spatial and serial: unroll or vectorize them by name.
// Conditions: 2 <= lanes <= 64; the loop is a serial reduction loop not bound to the GPU.
// Pre/post: stage III; semantics preserved up to reassociation of the sum; CPU.
#pragma once

#include <string>
#include <vector>

#include "spindle/schedule/rfactor.hpp"

namespace spindle::schedule {

inline ir::Stmt rfactor_cpu(const ir::Stmt& body, const std::string& loop, int lanes) {
  SPINDLE_CHECK(lanes >= 2 && lanes <= 64, UserError, "rfactor: loop '", loop,
                "': lanes must be in [2, 64] on the CPU, got ", lanes,
                "; hint: each lane is one partial sum kept in a register");
  auto t = detail::rfactor_target(body, loop, "only sums are split into partial sums");
  const ir::ForNode* K = t.K;
  for (auto& s : t.path)
    if (auto* f = s.as<ir::ForNode>())
      SPINDLE_CHECK(!detail::is_gpu_kind(f->for_kind), UserError, "rfactor: loop '", loop, "' is inside loop '",
                    f->var.name(), "', which is bound to the GPU; hint: a CPU schedule binds no loop");
  const std::string lane_name = loop + "_lane", outer_name = loop + "_o";
  for (auto* n : {&lane_name, &outer_name}) detail::check_fresh_name(body, *n, "rfactor");

  const DType dt = is_int(K->var.dtype()) ? K->var.dtype() : DType::i64;
  const ir::Expr L = ir::int_imm(lanes, dt);
  ir::Buffer partial = ir::local_buffer(t.R->buffer->name + "_partial", t.R->buffer->dtype, {L});
  const ir::Expr zero = ir::reduce_identity(ir::ReduceOp::add, partial->dtype);

  ir::Var init_lane(lane_name, dt);
  ir::Stmt init = ir::for_loop(init_lane, ir::int_imm(0, dt), L, ir::ForKind::serial, ir::IterKind::spatial, K->axis,
                               ir::store(partial, {init_lane}, zero, K->loc), K->loc);

  // The full groups: lane l adds term o * lanes + l.
  ir::Var lane(lane_name, dt), outer(outer_name, dt);
  ir::Stmt term = detail::substitute(detail::redirect_reductions(K->body, t, partial, {lane}), K->var,
                                     lower::simplify(K->min + ir::Expr(outer) * L + lane));
  ir::Stmt group = ir::for_loop(lane, ir::int_imm(0, dt), L, ir::ForKind::serial, ir::IterKind::spatial, K->axis,
                                term, K->loc);
  const ir::Expr groups = lower::simplify(K->extent / L);
  std::vector<ir::Stmt> stmts{init, ir::for_loop(outer, ir::int_imm(0, dt), groups, ir::ForKind::serial,
                                                 ir::IterKind::reduction, K->axis, group, K->loc)};

  // The tail: the last n % lanes terms, term l into lane l, each under a guard.
  auto n = detail::const_int(K->extent);
  if (!(n && *n % lanes == 0)) {
    ir::Var tail_lane(lane_name, dt);
    const ir::Expr done = lower::simplify(groups * L);
    const ir::Expr rest_count = lower::simplify(K->extent - done);
    ir::Stmt rest = detail::substitute(detail::redirect_reductions(K->body, t, partial, {tail_lane}), K->var,
                                       lower::simplify(K->min + done + tail_lane));
    rest = ir::if_then_else(ir::Expr(tail_lane) < rest_count, rest, ir::Stmt(), K->loc);
    stmts.push_back(ir::for_loop(tail_lane, ir::int_imm(0, dt), L, ir::ForKind::serial, ir::IterKind::spatial,
                                 K->axis, rest, K->loc));
  }

  // (p0 + p1) + (p2 + p3) ...: a tree, so the combine is short too.
  std::vector<ir::Expr> sums;
  for (int l = 0; l < lanes; ++l) sums.push_back(ir::load(partial, {ir::int_imm(l, dt)}));
  while (sums.size() > 1) {
    std::vector<ir::Expr> next;
    for (std::size_t q = 0; q + 1 < sums.size(); q += 2) next.push_back(sums[q] + sums[q + 1]);
    if (sums.size() % 2) next.push_back(sums.back());
    sums = std::move(next);
  }
  stmts.push_back(detail::rfactor_write(t, sums.front()));
  ir::Stmt cpu = ir::block(t.R->buffer->name + "_rfactor", {partial}, ir::seq(std::move(stmts), K->loc), K->loc);
  return detail::rfactor_replace(body, t, cpu);
}

}  // namespace spindle::schedule
