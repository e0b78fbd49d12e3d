// bind / unroll / vectorize: set the kind of one loop, addressed by name, on top of
// set_loop_kind (loop_kind.hpp).
//
//   bind(body, "i_o", ForKind::gpu_block_x)    for i_o in [0, n) blockIdx.x: ...
//   bind(body, "i", ForKind::parallel)         CPU thread pool
//   bind(body, "k", ForKind::serial)           undoes a binding
//   unroll(body, "k_i")                        for k_i in [0, 4) unrolled: ...
//   vectorize(body, "k_i")                     for k_i in [0, 4) vectorized: ...
//
// bind takes serial, parallel and the GPU kinds; a loop that runs concurrently (parallel,
// GPU) must be spatial: binding a reduction loop would race on the reduced element, so it
// is an error unless the reduction was made safe first (atomic_writeback makes the loop
// spatial with atomic updates; rfactor splits it into per-lane partial sums). A GPU kind
// may not be bound twice on one nest (a loop bound to threadIdx.x inside another).
// unroll requires a constant extent (full unrolling). vectorize only marks the loop: the C
// emitter asks the compiler to vectorise it (reductions with reassociation); the CUDA
// emitter turns a vectorized loop of constant extent 2 or 4 whose f32 accesses are
// contiguous in the loop variable into float2/float4 loads and stores, and emits any other
// vectorized loop as a plain unrolled loop.
// Pre/post: stage II or III; semantics preserved.
#pragma once

#include "spindle/schedule/loop_kind.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

inline ir::Stmt set_kind_of(const ir::Stmt& body, const ir::ForNode* target, ir::ForKind kind) {
  return set_loop_kind(body, [target](const ir::ForNode& n) { return &n == target; }, kind);
}

}  // namespace detail

inline ir::Stmt bind(const ir::Stmt& body, const std::string& loop, ir::ForKind kind) {
  SPINDLE_CHECK(kind != ir::ForKind::vectorized && kind != ir::ForKind::unrolled, UserError, "bind: loop '", loop,
                "' cannot be bound to ", ir::for_kind_name(kind), "; hint: use vectorize(body, \"", loop,
                "\") or unroll(body, \"", loop, "\")");
  const ir::ForNode* f = detail::find_loop(body, loop, "bind");
  bool concurrent = kind == ir::ForKind::parallel || detail::is_gpu_kind(kind);
  SPINDLE_CHECK(!concurrent || f->iter_kind == ir::IterKind::spatial, UserError, "bind: loop '", loop, "' (axis ",
                f->axis, ") is a reduction loop and cannot run as ", ir::for_kind_name(kind),
                ": its iterations update the same elements; hint: apply atomic_writeback(body, \"", loop,
                "\") to make the updates atomic, or rfactor the reduction into per-lane partial sums");
  if (detail::is_gpu_kind(kind)) {
    for (auto& s : detail::path_to(body, f)) {
      auto* a = s.as<ir::ForNode>();
      SPINDLE_CHECK(!a || a == f || a->for_kind != kind, UserError, "bind: loop '", loop, "' is inside loop '",
                    a->var.name(), "', which is already bound to ", ir::for_kind_name(kind),
                    "; hint: bind each GPU index once per nest (split or fuse loops to fit the grid)");
    }
    for (auto* in : detail::all_loops(f->body)) {
      SPINDLE_CHECK(in->for_kind != kind, UserError, "bind: loop '", loop, "' encloses loop '", in->var.name(),
                    "', which is already bound to ", ir::for_kind_name(kind),
                    "; hint: bind each GPU index once per nest");
    }
  }
  return detail::set_kind_of(body, f, kind);
}

inline ir::Stmt unroll(const ir::Stmt& body, const std::string& loop) {
  const ir::ForNode* f = detail::find_loop(body, loop, "unroll");
  SPINDLE_CHECK(detail::const_int(f->extent).has_value(), UserError, "unroll: loop '", loop, "' has extent ",
                ir::to_string(f->extent), ", not a constant; hint: split(body, \"", loop,
                "\", factor) first and unroll the inner loop");
  SPINDLE_CHECK(f->for_kind == ir::ForKind::serial || f->for_kind == ir::ForKind::unrolled ||
                    f->for_kind == ir::ForKind::vectorized,
                UserError, "unroll: loop '", loop, "' is bound to ", ir::for_kind_name(f->for_kind),
                "; hint: unroll a serial loop (split the bound loop and unroll the inner one)");
  return detail::set_kind_of(body, f, ir::ForKind::unrolled);
}

inline ir::Stmt vectorize(const ir::Stmt& body, const std::string& loop) {
  const ir::ForNode* f = detail::find_loop(body, loop, "vectorize");
  SPINDLE_CHECK(f->for_kind == ir::ForKind::serial || f->for_kind == ir::ForKind::unrolled ||
                    f->for_kind == ir::ForKind::vectorized,
                UserError, "vectorize: loop '", loop, "' is bound to ", ir::for_kind_name(f->for_kind),
                "; hint: vectorize a serial loop (split the bound loop and vectorize the inner one)");
  return detail::set_kind_of(body, f, ir::ForKind::vectorized);
}

inline ir::Function bind(const ir::Function& fn, const std::string& loop, ir::ForKind kind) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return bind(b, loop, kind); });
}
inline ir::Function unroll(const ir::Function& fn, const std::string& loop) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return unroll(b, loop); });
}
inline ir::Function vectorize(const ir::Function& fn, const std::string& loop) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return vectorize(b, loop); });
}

}  // namespace spindle::schedule
