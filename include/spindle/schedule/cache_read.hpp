// cache_read: stage the reads of a loop in GPU shared memory, a tile at a time, copied
// cooperatively by the threads of a threadIdx.x loop (SpMM's J_indices and a values: every
// thread of a row reads the same nonzeros; GE-SpMM's coalesced row caching).
//
//   for k_i in [0, 32) threadIdx.x:                  for k_i in [0, 32) threadIdx.x:
//     ...                                              ...
//     for j in [m, m + n):                             block j_shared:
//       ... a[e + j] ...                    ->           alloc a_shared: shared f32[R, T]
//                                                        for j_o in [0, ceil(n / T)):
//                                                          if j_o * T + k_i < n:                 (copy)
//                                                            a_shared[s, k_i] = a[e + m + j_o * T + k_i]
//                                                          sync_warp                          (or sync_threads)
//                                                          for j_i in [0, min(T, n - j_o * T)):
//                                                            ... a_shared[s, j_i] ...          (j = m + j_o * T + j_i)
//                                                          sync_warp
//
// `loop` is a serial loop whose body reads each named buffer only at [p..., e + j] (p and
// e invariant in the loop and the same for every read of that buffer; the buffer is not
// written there); several buffers read in one loop are staged together in one tiled loop.
// `thread_loop` is an enclosing loop bound to threadIdx.x with a constant extent T:
// thread x copies the elements t = x, x + T, x + 2T, ... of each tile of `tile` elements.
// Slots: each group of threads that shares the reads gets its own slot of the shared
// buffer. The group is the threads of one threadIdx.y row: with an enclosing
// threadIdx.y loop of constant extent R the buffer is [R, tile] indexed by that loop's
// variable (minus its start); without one it is [tile]. threadIdx.z is not supported.
// Barriers: BarrierScope::warp (__syncwarp) needs the group to be one warp (T = 32, or
// T <= 32 with no threadIdx.y loop); BarrierScope::block (__syncthreads) must be reached by
// every thread of the block, so everything between the outermost thread loop and the
// staged loop must be the same for all threads.
// Uniformity: the staged range (m, n) and the read offsets (p, e) must be the same for all
// threads of a group (they may depend on threadIdx.y, never on threadIdx.x); with a block
// barrier n may not depend on any thread index. Guards between the thread loop and the
// staged loop that depend on threadIdx.x (a split guard `if k < K`) are pushed down to the
// statements they guard: every thread copies and reaches the barriers, only the
// computation stays guarded. Lets on the way are evaluated by every thread (an x-dependent
// let that reads memory under such a guard is an error).
// Co-iterations (union / intersection merges) between the thread loop and the staged loop
// are refused: their trip counts are data-dependent and their positions are not loops.
// Pre/post: stage III; semantics preserved; GPU only (emit_c rejects shared buffers and
// barriers).
#pragma once

#include <algorithm>
#include <initializer_list>

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

struct StagedRead {
  ir::Buffer buffer;
  std::vector<ir::Expr> prefix;  // all indices but the last
  ir::Expr offset;               // e: the last index is e + j
  ir::Buffer shared;
};

}  // namespace detail

inline ir::Stmt cache_read(const ir::Stmt& body, const std::string& loop, const std::vector<std::string>& buffers,
                           std::int64_t tile, const std::string& thread_loop,
                           ir::BarrierScope scope = ir::BarrierScope::warp) {
  SPINDLE_CHECK(!buffers.empty(), UserError, "cache_read: no buffer named for loop '", loop,
                "'; hint: name the buffers whose reads to stage");
  SPINDLE_CHECK(tile >= 1, UserError, "cache_read: the tile of loop '", loop, "' must be at least 1, got ", tile,
                "; hint: a tile of the thread loop's extent lets every thread copy one element");
  const ir::ForNode* J = detail::find_loop(body, loop, "cache_read");
  const ir::ForNode* X = detail::find_loop(body, thread_loop, "cache_read");
  SPINDLE_CHECK(X->for_kind == ir::ForKind::gpu_thread_x, UserError, "cache_read: thread loop '", thread_loop,
                "' is ", ir::for_kind_name(X->for_kind), ", not threadIdx.x; hint: bind(body, \"", thread_loop,
                "\", ForKind::gpu_thread_x) first");
  auto T_opt = detail::const_int(X->extent);
  SPINDLE_CHECK(T_opt && *T_opt >= 1, UserError, "cache_read: thread loop '", thread_loop, "' has extent ",
                ir::to_string(X->extent), ", not a positive constant; hint: split it by the block width first");
  const std::int64_t T = *T_opt;
  auto path = detail::path_to(body, J);
  auto xpos = std::find_if(path.begin(), path.end(), [&](const ir::Stmt& s) { return s.get() == X; });
  SPINDLE_CHECK(xpos != path.end(), UserError, "cache_read: loop '", loop, "' is not inside thread loop '",
                thread_loop, "'; hint: the threads of that loop copy the tiles, so it must enclose the staged loop");
  SPINDLE_CHECK(J->for_kind == ir::ForKind::serial, UserError, "cache_read: loop '", loop, "' is ",
                ir::for_kind_name(J->for_kind), "; hint: stage the reads of a serial loop");
  auto ys = detail::loops_of_kind(path, ir::ForKind::gpu_thread_y);
  SPINDLE_CHECK(detail::loops_of_kind(path, ir::ForKind::gpu_thread_z).empty(), UserError, "cache_read: loop '",
                loop, "' is inside a threadIdx.z loop; hint: cache_read supports slots per threadIdx.y only");
  for (auto p = xpos; p != path.end(); ++p) {
    auto* c = p->as<ir::CoIterateNode>();
    SPINDLE_CHECK(!c, UserError, "cache_read: loop '", loop, "' is inside the co-iteration '", c->var.name(),
                    "' (axis ", c->axis, "), which visits a data-dependent number of coordinates, so the threads of '",
                    thread_loop, "' would not meet at the barriers in step",
                    "; hint: stage reads of a loop outside the co-iteration, or put the thread loop inside it");
  }
  const ir::ForNode* Y = ys.empty() ? nullptr : ys.front();
  std::optional<std::int64_t> R;
  if (Y) {
    R = detail::const_int(Y->extent);
    SPINDLE_CHECK(R && *R >= 1, UserError, "cache_read: the threadIdx.y loop '", Y->var.name(), "' has extent ",
                  ir::to_string(Y->extent), ", not a positive constant; hint: one shared slot per row needs a "
                  "constant number of rows per block");
  }
  if (scope == ir::BarrierScope::warp) {
    SPINDLE_CHECK(T == 32 || (T < 32 && !Y), UserError, "cache_read: a warp barrier needs the threads that share a "
                  "tile to be one warp, but thread loop '", thread_loop, "' has ", T, " threads",
                  Y ? " and rows of threadIdx.y" : "", "; hint: use 32 threads in x, or BarrierScope::block");
  }
  const ir::ForNode* root = X;
  if (scope == ir::BarrierScope::block) {
    for (auto& s : path)
      if (auto* f = s.as<ir::ForNode>(); f && detail::is_gpu_thread_kind(f->for_kind)) {
        root = f;
        break;
      }
  }

  // Which variables differ between threads of a group (x) and of the barrier's scope.
  std::set<const ir::ExprNode*> var_x, var_scope;
  for (auto& s : path) {
    if (s.get() == J) break;
    if (auto* f = s.as<ir::ForNode>()) {
      bool x = f == X || detail::uses_any(f->min, var_x) || detail::uses_any(f->extent, var_x);
      bool sc = x || (scope == ir::BarrierScope::block && detail::is_gpu_thread_kind(f->for_kind)) ||
                detail::uses_any(f->min, var_scope) || detail::uses_any(f->extent, var_scope);
      if (x) var_x.insert(f->var.get());
      if (sc) var_scope.insert(f->var.get());
    } else if (auto* l = s.as<ir::LetStmtNode>()) {
      if (detail::uses_any(l->value, var_x)) var_x.insert(l->var.get());
      if (detail::uses_any(l->value, var_scope)) var_scope.insert(l->var.get());
    }
  }
  SPINDLE_CHECK(!detail::uses_any(J->extent, var_scope) && !detail::uses_any(J->min, var_x), UserError,
                "cache_read: the range of loop '", loop, "' ([", ir::to_string(J->min), ", +",
                ir::to_string(J->extent), ")) differs between threads that ",
                scope == ir::BarrierScope::block ? "meet at a block barrier" : "share a tile",
                "; hint: stage a loop whose range depends only on ",
                scope == ir::BarrierScope::block
                    ? "block indices, or use BarrierScope::warp with one warp (32 threads in x) per threadIdx.y row"
                    : "block indices and threadIdx.y");

  // The reads to stage.
  std::set<const ir::ExprNode*> inner = detail::bound_vars(J->body);
  inner.insert(J->var.get());
  auto uses = detail::buffer_uses(J->body);
  std::vector<detail::StagedRead> staged;
  std::set<std::string> seen;
  for (auto& name : buffers) {
    SPINDLE_CHECK(seen.insert(name).second, UserError, "cache_read: buffer '", name, "' is named twice");
    detail::StagedRead sr;
    for (auto* l : uses.loads) {
      if (l->buffer->name != name) continue;
      SPINDLE_CHECK(!l->indices.empty(), UserError, "cache_read: '", name, "' is a scalar; hint: nothing to stage");
      std::vector<ir::Expr> prefix(l->indices.begin(), l->indices.end() - 1);
      auto e = detail::unit_offset(l->indices.back(), J->var);
      SPINDLE_CHECK(e && !detail::uses_any(*e, inner) && !detail::uses_any(prefix, inner), UserError,
                    "cache_read: loop '", loop, "' reads '", name, "' at [", ir::IRPrinter().list(l->indices),
                    "], not at [..., e + ", loop, "] with e and the other indices fixed in the loop; hint: stage "
                    "reads that walk a contiguous range with the loop");
      SPINDLE_CHECK(!detail::uses_any(*e, var_x) && !detail::uses_any(prefix, var_x), UserError,
                    "cache_read: the reads of '", name, "' in loop '", loop,
                    "' start at an offset that differs between the threads of thread loop '", thread_loop,
                    "'; hint: stage reads shared by all threads of a row");
      if (!sr.buffer) {
        sr.buffer = l->buffer;
        sr.prefix = prefix;
        sr.offset = *e;
      } else {
        SPINDLE_CHECK(ir::equal(sr.offset, *e) && ir::equal(sr.prefix, prefix), UserError, "cache_read: loop '",
                      loop, "' reads '", name, "' at two different offsets (", ir::to_string(sr.offset), " and ",
                      ir::to_string(*e), "); hint: one tile per buffer holds one range");
      }
    }
    SPINDLE_CHECK(sr.buffer, UserError, "cache_read: loop '", loop, "' does not read '", name,
                  "' (reads there: ", detail::buffer_names(uses.loads), ")");
    for (auto* st : uses.stores)
      SPINDLE_CHECK(st->buffer != sr.buffer, UserError, "cache_read: loop '", loop, "' writes '", name,
                    "'; hint: only read-only buffers can be staged");
    for (auto* r : uses.reduces)
      SPINDLE_CHECK(r->buffer != sr.buffer, UserError, "cache_read: loop '", loop, "' writes '", name,
                    "'; hint: only read-only buffers can be staged");
    ir::BufferNode sn;
    sn.name = name + "_shared";
    sn.dtype = sr.buffer->dtype;
    if (Y) sn.shape.push_back(ir::int_imm(*R));
    sn.shape.push_back(ir::int_imm(tile));
    sn.scope = ir::BufferScope::shared;
    sn.role = ir::BufferRole::temp;
    sr.shared = ir::make_buffer(std::move(sn));
    staged.push_back(std::move(sr));
  }

  // The tiled loop.
  std::string outer_name = loop + "_o", inner_name = loop + "_i", copy_name = loop + "_copy";
  for (auto* nm : {&outer_name, &inner_name, &copy_name}) detail::check_fresh_name(body, *nm, "cache_read");
  DType t = is_int(J->var.dtype()) ? J->var.dtype() : DType::i64;
  ir::Var jo(outer_name, t), ji(inner_name, t);
  ir::Expr tl = ir::int_imm(tile, t);
  ir::Expr base = lower::simplify(ir::Expr(jo) * tl);
  ir::Expr lane = detail::relative(X->var, X->min);
  std::vector<ir::Expr> slot;
  if (Y) slot.push_back(detail::relative(Y->var, Y->min));
  auto n_const = detail::const_int(J->extent);
  const bool full_tiles = n_const && *n_const % tile == 0;
  const ir::SourceLoc loc = J->loc;

  // Copy: thread x copies t = x, x + T, ... of the tile.
  std::int64_t rounds = (tile + T - 1) / T;
  ir::Var rc(copy_name, t);
  ir::Expr tt = rounds == 1 ? lane : lower::simplify(ir::Expr(rc) * ir::int_imm(T, t) + lane);
  std::vector<ir::Stmt> copies;
  for (auto& sr : staged) {
    std::vector<ir::Expr> src = sr.prefix, dst = slot;
    src.push_back(lower::simplify(sr.offset + J->min + base + tt));
    dst.push_back(tt);
    copies.push_back(ir::store(sr.shared, dst, ir::load(sr.buffer, src), loc));
  }
  ir::Expr cond;
  if (tile % T != 0) cond = tt < tl;
  if (!full_tiles) {
    ir::Expr in_range = lower::simplify(base + tt) < J->extent;
    cond = cond.defined() ? (cond && in_range) : in_range;
  }
  ir::Stmt copy = ir::seq(copies, loc);
  if (cond.defined()) copy = ir::if_then_else(cond, copy, ir::Stmt(), loc);
  if (rounds > 1)
    copy = ir::for_loop(rc, ir::int_imm(0, t), ir::int_imm(rounds, t), ir::ForKind::serial, ir::IterKind::spatial,
                        J->axis, copy, loc);

  // Consume: the loop body on the tile, reading the shared copies.
  struct Redirect : ir::IRMutator {
    const std::vector<detail::StagedRead>* staged;
    std::vector<ir::Expr> slot;
    ir::Var ji;
    ir::Expr mutate_Load(const ir::LoadNode* n, const ir::Expr& self) override {
      for (auto& sr : *staged) {
        if (n->buffer != sr.buffer) continue;
        std::vector<ir::Expr> idx = slot;
        idx.push_back(ji);
        return ir::load(sr.shared, idx);
      }
      return ir::IRMutator::mutate_Load(n, self);
    }
  } redirect;
  redirect.staged = &staged;
  redirect.slot = slot;
  redirect.ji = ji;
  ir::Stmt consume_body = detail::substitute(redirect.mutate(J->body), J->var, lower::simplify(J->min + base + ji));
  ir::Expr ji_extent = full_tiles ? tl : ir::min(tl, J->extent - base);
  ir::Stmt consume =
      ir::for_loop(ji, ir::int_imm(0, t), ji_extent, ir::ForKind::serial, J->iter_kind, J->axis, consume_body, loc);

  std::vector<ir::Buffer> allocs;
  for (auto& sr : staged) allocs.push_back(sr.shared);
  auto tiled = [&](const std::vector<ir::Expr>& guards) {
    ir::Stmt c = consume;
    for (std::size_t g = guards.size(); g-- > 0;) c = ir::if_then_else(guards[g], c, ir::Stmt(), loc);
    ir::Stmt step = ir::seq({copy, ir::barrier(scope, loc), c, ir::barrier(scope, loc)}, loc);
    ir::Stmt l = ir::for_loop(jo, ir::int_imm(0, t), detail::ceil_div(J->extent, tile), ir::ForKind::serial,
                              J->iter_kind, J->axis, step, loc);
    return ir::block(loop + "_shared", allocs, l, loc);
  };

  // Rebuild the path from the barrier's root down, pushing x-dependent guards below the
  // copy and the barriers.
  auto wrap = [&](const ir::Stmt& s, const std::vector<ir::Expr>& guards) {
    ir::Stmt out = s;
    for (std::size_t g = guards.size(); g-- > 0;) out = ir::if_then_else(guards[g], out, ir::Stmt(), s.loc());
    return out;
  };
  std::function<ir::Stmt(const ir::Stmt&, const std::vector<ir::Expr>&)> rewrite =
      [&](const ir::Stmt& s, const std::vector<ir::Expr>& guards) -> ir::Stmt {
    if (s.get() == J) return tiled(guards);
    if (!detail::contains(s, J)) return wrap(s, guards);
    if (auto* f = s.as<ir::ForNode>()) {
      SPINDLE_CHECK(!detail::uses_any(f->min, var_scope) && !detail::uses_any(f->extent, var_scope), UserError,
                    "cache_read: loop '", f->var.name(), "' around loop '", loop,
                    "' runs a different number of times in different threads, so they would not meet at the "
                    "barriers; hint: stage reads inside loops of a uniform range");
      return detail::with_body(*f, rewrite(f->body, guards));
    }
    if (auto* l = s.as<ir::LetStmtNode>()) {
      if (!guards.empty() && detail::uses_any(l->value, var_x)) {
        auto lu = detail::buffer_uses(ir::let_stmt(l->var, l->value, ir::Stmt()));
        SPINDLE_CHECK(lu.loads.empty(), UserError, "cache_read: the let '", l->var.name(),
                      "' reads memory under the guard '", ir::to_string(guards.back()),
                      "', which every thread would now pass; hint: compute it inside the staged loop");
      }
      return ir::let_stmt(l->var, l->value, rewrite(l->body, guards), l->loc);
    }
    if (auto* c = s.as<ir::IfThenElseNode>()) {
      bool x = detail::uses_any(c->cond, var_x);
      bool sc = detail::uses_any(c->cond, var_scope);
      if (x) {
        SPINDLE_CHECK(!c->else_case.defined(), UserError, "cache_read: the guard '", ir::to_string(c->cond),
                      "' around loop '", loop, "' has an else branch and depends on threadIdx.x",
                      "; hint: stage the reads inside one branch only");
        std::vector<ir::Expr> g = guards;
        g.push_back(c->cond);
        return rewrite(c->then_case, g);
      }
      SPINDLE_CHECK(!sc, UserError, "cache_read: the guard '", ir::to_string(c->cond), "' around loop '", loop,
                    "' differs between threads of the block, so a block barrier inside it would not be reached by "
                    "all of them; hint: use BarrierScope::warp with one warp (32 threads in x) per threadIdx.y row");
      bool in_then = detail::contains(c->then_case, J);
      ir::Stmt th = in_then ? rewrite(c->then_case, guards) : wrap(c->then_case, guards);
      ir::Stmt el = in_then ? (c->else_case.defined() ? wrap(c->else_case, guards) : ir::Stmt())
                            : rewrite(c->else_case, guards);
      return ir::if_then_else(c->cond, th, el, c->loc);
    }
    if (auto* q = s.as<ir::SeqNode>()) {
      std::vector<ir::Stmt> out;
      for (auto& c : q->stmts) out.push_back(detail::contains(c, J) ? rewrite(c, guards) : wrap(c, guards));
      return ir::seq(std::move(out), q->loc);
    }
    if (auto* b = s.as<ir::BlockNode>()) return ir::block(b->name, b->allocs, rewrite(b->body, guards), b->loc);
    throw InternalError(message("cache_read: unexpected statement on the path to loop '", loop, "'"));
  };
  return detail::replace_stmt(body, root, detail::with_body(*root, rewrite(root->body, {})));
}

inline ir::Stmt cache_read(const ir::Stmt& body, const std::string& loop, std::initializer_list<std::string> buffers,
                           std::int64_t tile, const std::string& thread_loop,
                           ir::BarrierScope scope = ir::BarrierScope::warp) {
  return cache_read(body, loop, std::vector<std::string>(buffers), tile, thread_loop, scope);
}

inline ir::Stmt cache_read(const ir::Stmt& body, const std::string& loop, const std::string& buffer,
                           std::int64_t tile, const std::string& thread_loop,
                           ir::BarrierScope scope = ir::BarrierScope::warp) {
  return cache_read(body, loop, std::vector<std::string>{buffer}, tile, thread_loop, scope);
}

inline ir::Function cache_read(const ir::Function& fn, const std::string& loop,
                               const std::vector<std::string>& buffers, std::int64_t tile,
                               const std::string& thread_loop, ir::BarrierScope scope = ir::BarrierScope::warp) {
  SPINDLE_CHECK(fn.stage == ir::Stage::flat, UserError, "cache_read: kernel '", fn.name, "' is at stage ",
                ir::stage_name(fn.stage), "; hint: shared buffers have flat shapes: schedule reads at stage III");
  return detail::on_body(fn, [&](const ir::Stmt& b) { return cache_read(b, loop, buffers, tile, thread_loop, scope); });
}

inline ir::Function cache_read(const ir::Function& fn, const std::string& loop,
                               std::initializer_list<std::string> buffers, std::int64_t tile,
                               const std::string& thread_loop, ir::BarrierScope scope = ir::BarrierScope::warp) {
  return cache_read(fn, loop, std::vector<std::string>(buffers), tile, thread_loop, scope);
}

inline ir::Function cache_read(const ir::Function& fn, const std::string& loop, const std::string& buffer,
                               std::int64_t tile, const std::string& thread_loop,
                               ir::BarrierScope scope = ir::BarrierScope::warp) {
  return cache_read(fn, loop, std::vector<std::string>{buffer}, tile, thread_loop, scope);
}

}  // namespace spindle::schedule
