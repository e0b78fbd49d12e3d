// fiber_loop: recognising, at stage III, the loop over one fiber of a compressed level,
//
//   for p in [0, P[e + 1] - P[e])
//
// with P an indptr (ParamOrigin::indptr): the loop lower_sparse_iter emits for a compressed
// axis, whose positions are P[e] + p. Shared by the passes that rewrite such loops
// (assemble_rows.hpp: a column read at the fiber's positions; flatten_position_loops.hpp).
#pragma once

#include "spindle/ir/equal.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/ir/stmt.hpp"

namespace spindle::lower {

// The fiber's start P[e] when `loop` runs over [0, P[e + 1] - P[e]) for a buffer P that
// `is_indptr(const ir::BufferNode*)` accepts; an undefined Expr otherwise.
template <class IsIndptr>
ir::Expr fiber_loop_start(const ir::ForNode& loop, const IsIndptr& is_indptr) {
  auto* zero = loop.min.as<ir::IntImmNode>();
  auto* diff = loop.extent.as<ir::BinaryNode>();
  if (!zero || zero->value != 0 || !diff || diff->op != ir::BinOp::sub) return {};
  auto* start = diff->b.as<ir::LoadNode>();
  if (!start || start->indices.size() != 1 || !is_indptr(start->buffer.get())) return {};
  const ir::Expr e = start->indices[0];
  if (!ir::equal(diff->a, ir::load(start->buffer, {e + ir::int_imm(1, e.dtype())}))) return {};
  return diff->b;
}

}  // namespace spindle::lower
