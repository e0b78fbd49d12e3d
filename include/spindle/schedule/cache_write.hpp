// cache_write: accumulate a reduction in registers (a local buffer) for one iteration of
// a loop L, and write the result back once.
//
//   for k_i in [0, 32):                          for k_i in [0, 32):
//     c[i, k] = 0                                  block c_cache:
//     for j in [0, n) reduction:          ->         alloc c_local: local f32[]
//       c[i, k] += a[j] * b[j, k]                    c_local = 0
//                                                    for j in [0, n) reduction: c_local += a[j] * b[j, k]
//                                                    c[i, k] = c_local
//
// Inside L's body there must be exactly one reduction into the buffer, and the buffer is
// otherwise neither read nor written there (except by the init store below). The indices
// of that reduction may vary inside L only over loops of constant extent (an SpMM feature
// tile `for kk in [0, 4)`): the local then has one element per iteration of those loops,
// shape [e1, e2, ...], indexed by (kk - min); with none it is a scalar. Such an index must
// be one-to-one in each of those loops (an index of the form e + kk).
//
// The local lives in L's body, inside the guards, lets and blocks that open it (so a split
// guard `if k < K` also covers the initialisation and the write-back). It starts from
//   - the init store in front of the reduction in that body (`c[i, k] = 0; for j ...`, or
//     for a local array an init loop nest over the same constant loops), which it replaces in
//     place (after whatever ran before it);
//   - otherwise the buffer's current value, c_local = c[i, k];
// and is written back with a store after the reduction. Guards around the reduction that
// depend only on the tile loops (a split guard inside the tile) also guard the element's
// load and write-back, so no element outside the buffer is touched.
// Partial mode (CacheWriteMode::partial) starts the local from the reduction's identity
// and writes back with a reduction (c[i, k] += c_local) without absorbing an init: the
// write-back of a loop whose iterations run in different blocks, which atomic_writeback
// can then make atomic.
// Pre/post: stage II or III (a local array needs stage III's flat shapes); semantics
// preserved (exact mode adds the same terms in the same order; partial mode sums the
// loop's terms first: floating-point reassociation).
#pragma once

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

enum class CacheWriteMode : std::uint8_t { exact, partial };

inline ir::Stmt cache_write(const ir::Stmt& body, const std::string& loop, const std::string& buffer,
                            CacheWriteMode mode = CacheWriteMode::exact) {
  const ir::ForNode* L = detail::find_loop(body, loop, "cache_write");
  auto all = detail::buffer_uses(L->body);
  std::vector<const ir::ReduceNode*> reds;
  for (auto* r : all.reduces)
    if (r->buffer->name == buffer) reds.push_back(r);
  SPINDLE_CHECK(!reds.empty(), UserError, "cache_write: no reduction into '", buffer, "' inside loop '", loop,
                "' (reductions there: ", detail::buffer_names(all.reduces),
                "); hint: name the buffer that the loop's reduction updates");
  SPINDLE_CHECK(reds.size() == 1, UserError, "cache_write: ", reds.size(), " reductions into '", buffer,
                "' inside loop '", loop, "'; hint: cache_write keeps one reduction in registers: apply it to a loop "
                "around only one of them");
  const ir::ReduceNode* R = reds[0];
  const ir::Buffer B = R->buffer;
  SPINDLE_CHECK(!R->atomic, UserError, "cache_write: the reduction into '", buffer,
                "' is atomic; hint: cache_write first (in partial mode), then atomic_writeback on the outer loop");
  SPINDLE_CHECK(B->scope != ir::BufferScope::local, UserError, "cache_write: '", buffer,
                "' is already a local buffer; hint: name the global buffer of the reduction");

  // The local lives inside the guards, lets and blocks that open L's body.
  ir::Stmt w = L->body;
  while (true) {
    if (auto* c = w.as<ir::IfThenElseNode>(); c && !c->else_case.defined()) w = c->then_case;
    else if (auto* l = w.as<ir::LetStmtNode>()) w = l->body;
    else if (auto* b = w.as<ir::BlockNode>()) w = b->body;
    else break;
  }
  auto uses = detail::buffer_uses(w);
  for (auto* l : uses.loads)
    SPINDLE_CHECK(l->buffer != B, UserError, "cache_write: loop '", loop, "' reads '", buffer,
                  "' while reducing into it; hint: a register copy would hide the updates from that read");

  // Loops and lets between the local's scope and the reduction.
  auto path = detail::path_to(w, R);
  SPINDLE_CHECK(!path.empty(), UserError, "cache_write: the reduction into '", buffer, "' in loop '", loop,
                "' sits in the else branch of a guard that opens the loop body; hint: hoist the guard first");
  std::set<const ir::ExprNode*> path_vars, tile_vars;
  std::vector<const ir::ForNode*> tile;
  for (std::size_t p = 0; p + 1 < path.size(); ++p) {
    if (auto* f = path[p].as<ir::ForNode>()) path_vars.insert(f->var.get());
    if (auto* l = path[p].as<ir::LetStmtNode>()) path_vars.insert(l->var.get());
    if (auto* c = path[p].as<ir::CoIterateNode>()) {
      // A co-iteration visits a data-dependent number of coordinates: its coordinate,
      // positions and presence flags vary inside L like a loop of unknown extent.
      const auto vars = ir::co_iterate_vars(*c);
      const std::set<const ir::ExprNode*> bound(vars.begin(), vars.end());
      SPINDLE_CHECK(!detail::uses_any(R->indices, bound), UserError, "cache_write: the index of '", buffer,
                    "' varies over the co-iteration '", c->var.name(), "' (axis ", c->axis,
                    ") inside loop '", loop, "', which visits a data-dependent number of coordinates",
                    "; hint: cache_write at a loop inside that co-iteration");
      path_vars.insert(bound.begin(), bound.end());
    }
  }
  for (std::size_t p = 0; p + 1 < path.size(); ++p) {
    if (auto* f = path[p].as<ir::ForNode>(); f && detail::uses_any(R->indices, {f->var.get()})) {
      auto e = detail::const_int(f->extent);
      SPINDLE_CHECK(e && *e >= 1, UserError, "cache_write: the index of '", buffer, "' varies over loop '",
                    f->var.name(), "', whose extent ", ir::to_string(f->extent), " is not a positive constant",
                    "; hint: split that loop by a constant and cache_write at the outer part, or cache_write at a "
                    "loop inside '", f->var.name(), "'");
      SPINDLE_CHECK(!detail::uses_any(f->min, path_vars), UserError, "cache_write: the start of loop '",
                    f->var.name(), "' depends on loops inside '", loop, "'; hint: cache_write inside those loops");
      tile.push_back(f);
      tile_vars.insert(f->var.get());
    }
  }
  for (std::size_t p = 0; p + 1 < path.size(); ++p) {
    if (auto* l = path[p].as<ir::LetStmtNode>())
      SPINDLE_CHECK(!detail::uses_any(R->indices, {l->var.get()}), UserError, "cache_write: the index of '", buffer,
                    "' uses '", l->var.name(), "', which is computed inside loop '", loop,
                    "'; hint: the target element must be fixed by loops of constant extent");
  }
  for (auto* f : tile) {
    std::set<const ir::ExprNode*> others = tile_vars;
    others.erase(f->var.get());
    bool unit = false;
    for (auto& idx : R->indices) {
      auto e = detail::unit_offset(idx, f->var);
      unit |= e && !detail::uses_any(*e, others);
    }
    SPINDLE_CHECK(unit, UserError, "cache_write: no index of '", buffer, "' is of the form e + ", f->var.name(),
                  ", so iterations of loop '", f->var.name(), "' may update one element; hint: cache_write where "
                  "each element has its own register");
  }
  // Guards on the element: conditions around the reduction that only use tile loops and
  // variables in scope where the local lives.
  std::set<const ir::ExprNode*> non_tile;
  for (auto* v : path_vars)
    if (!tile_vars.count(v)) non_tile.insert(v);
  // A guard that reads a buffer L's body writes (a local the body computes, `when(t > 0, ...)`)
  // varies inside L like an inner loop variable: evaluated where the element is loaded and
  // written back it would see another value (or a local out of scope).
  std::set<const ir::BufferNode*> written_in_L = all.allocated;
  for (auto* st : all.stores) written_in_L.insert(st->buffer.get());
  for (auto* r : all.reduces) written_in_L.insert(r->buffer.get());
  auto reads_written = [&](const ir::Expr& e) {
    struct Reads : ir::IRVisitor {
      const std::set<const ir::BufferNode*>* written = nullptr;
      bool found = false;
      void visit_Load(const ir::LoadNode* n) override {
        found = found || written->count(n->buffer.get());
        ir::IRVisitor::visit_Load(n);
      }
    } r;
    r.written = &written_in_L;
    r.visit(e);
    return r.found;
  };
  std::vector<ir::Expr> guards;
  for (std::size_t p = 0; p + 1 < path.size(); ++p) {
    auto* c = path[p].as<ir::IfThenElseNode>();
    if (!c) continue;
    ir::Expr cond = c->then_case.same_as(path[p + 1]) ? c->cond : ir::unary(ir::UnOp::lnot, c->cond);
    bool on_tile = detail::uses_any(cond, tile_vars);
    bool inner = detail::uses_any(cond, non_tile) || reads_written(cond);
    SPINDLE_CHECK(!(on_tile && inner), UserError, "cache_write: the guard '", ir::to_string(cond),
                  "' around the reduction into '", buffer,
                  "' mixes the tile loops with other loops, so the elements to load and write back are unknown; "
                  "hint: split the condition");
    if (!inner) guards.push_back(cond);
  }

  // The init in front of the reduction.
  const ir::SeqNode* seq = w.as<ir::SeqNode>();
  ir::Stmt init_stmt;                 // the absorbed init
  ir::Expr init_value;                // in terms of the tile loop vars
  std::vector<ir::Expr> init_guards;  // the init's own guards (tile loop vars)
  if (mode == CacheWriteMode::exact && seq && path.size() >= 2) {
    std::size_t q = 0;
    while (!seq->stmts[q].same_as(path[1])) ++q;
    if (q > 0) {
      const ir::Stmt& prev = seq->stmts[q - 1];
      ir::Substituter sub;
      std::size_t loops_seen = 0;
      bool ok = true;
      std::vector<ir::Expr> gs;
      ir::Stmt s = prev;
      while (ok) {
        if (auto* f = s.as<ir::ForNode>()) {
          ok = loops_seen < tile.size() && ir::equal(f->min, tile[loops_seen]->min) &&
               ir::equal(f->extent, tile[loops_seen]->extent);
          if (ok) sub.add(f->var, tile[loops_seen++]->var);
          s = f->body;
        } else if (auto* c = s.as<ir::IfThenElseNode>(); c && !c->else_case.defined()) {
          gs.push_back(c->cond);
          s = c->then_case;
        } else {
          break;
        }
      }
      auto* st = s.as<ir::StoreNode>();
      if (ok && st && st->buffer == B && loops_seen == tile.size()) {
        std::vector<ir::Expr> idx;
        for (auto& e : st->indices) idx.push_back(sub.mutate(e));
        ir::Expr v = sub.mutate(st->value);
        bool reads_b = false;
        for (auto* l : detail::buffer_uses(ir::store(st->buffer, {}, v)).loads) reads_b |= l->buffer == B;
        std::vector<ir::Expr> ig;
        for (auto& g : gs) ig.push_back(sub.mutate(g));
        // Where the init does not run the reduction must not run either (the element
        // would start from garbage): an unguarded init, or the reduction's own guards.
        if (ir::equal(idx, R->indices) && !reads_b && (ig.empty() || ir::equal(ig, guards))) {
          init_stmt = prev;
          init_value = v;
          init_guards = ig;
        }
      }
    }
  }
  for (auto* st : uses.stores)
    SPINDLE_CHECK(st->buffer != B || (init_stmt.defined() && detail::contains(init_stmt, st)), UserError,
                  "cache_write: loop '", loop, "' stores to '", buffer,
                  "' besides its reduction (not as the init right before it); hint: a register copy would lose "
                  "that store");

  // The local buffer and the rewrite.
  std::vector<ir::Expr> local_shape;
  for (auto* f : tile) local_shape.push_back(ir::int_imm(*detail::const_int(f->extent)));
  ir::Buffer local = ir::local_buffer(B->name + "_local", B->dtype, std::move(local_shape));
  auto local_index = [&](ir::Substituter* sub) {
    std::vector<ir::Expr> idx;
    for (auto* f : tile) {
      ir::Expr v = sub ? sub->mutate(ir::Expr(f->var)) : ir::Expr(f->var);
      ir::Expr m = sub ? sub->mutate(f->min) : f->min;
      idx.push_back(detail::relative(v, m));
    }
    return idx;
  };
  // A statement per element of the local: loops over the tile with fresh variables.
  auto per_element = [&](auto&& make, const std::vector<ir::Expr>& conds) {
    ir::Substituter sub;
    std::vector<ir::Var> vars;
    for (auto* f : tile) {
      vars.emplace_back(f->var.name(), f->var.dtype());
      sub.add(f->var, vars.back());
    }
    ir::Stmt s = make(sub);
    for (std::size_t g = conds.size(); g-- > 0;) s = ir::if_then_else(sub.mutate(conds[g]), s, ir::Stmt(), R->loc);
    for (std::size_t k = tile.size(); k-- > 0;)
      s = ir::for_loop(vars[k], tile[k]->min, tile[k]->extent, ir::ForKind::serial, ir::IterKind::spatial,
                       tile[k]->axis, s, R->loc);
    return s;
  };
  auto target = [&](ir::Substituter& sub) {
    std::vector<ir::Expr> idx;
    for (auto& e : R->indices) idx.push_back(sub.mutate(e));
    return idx;
  };
  const std::vector<ir::Expr>& elem_guards = init_stmt.defined() ? init_guards : guards;
  ir::Stmt init = per_element(
      [&](ir::Substituter& sub) {
        ir::Expr v = mode == CacheWriteMode::partial ? ir::reduce_identity(R->op, B->dtype)
                     : init_stmt.defined()           ? sub.mutate(init_value)
                                                     : ir::load(B, target(sub));
        return ir::store(local, local_index(&sub), v, R->loc);
      },
      mode == CacheWriteMode::partial ? std::vector<ir::Expr>{} : elem_guards);
  ir::Stmt writeback = per_element(
      [&](ir::Substituter& sub) {
        ir::Expr v = ir::load(local, local_index(&sub));
        if (mode == CacheWriteMode::partial) return ir::reduce(B, target(sub), R->op, v, R->loc);
        return ir::store(B, target(sub), v, R->loc);
      },
      elem_guards);

  struct Redirect : ir::IRMutator {
    const ir::ReduceNode* r;
    ir::Buffer local;
    std::vector<ir::Expr> idx;
    ir::Stmt mutate_Reduce(const ir::ReduceNode* n, const ir::Stmt& self) override {
      if (n != r) return ir::IRMutator::mutate_Reduce(n, self);
      return ir::reduce(local, idx, n->op, n->value, n->loc);
    }
  } redirect;
  redirect.r = R;
  redirect.local = local;
  redirect.idx = local_index(nullptr);
  // An absorbed init keeps its place (statements before it, such as a local it reads, still run
  // first: hoisting it to the front of the block read `t1` before `t1 = ...`, found by the
  // kernel fuzzer); otherwise the local starts from the buffer at the front.
  ir::Stmt inner = redirect.mutate(init_stmt.defined() ? detail::replace_stmt(w, init_stmt.get(), init) : w);
  ir::Stmt cached = ir::block(B->name + "_cache", {local},
                              init_stmt.defined() ? ir::seq({inner, writeback}, L->loc)
                                                  : ir::seq({init, inner, writeback}, L->loc),
                              L->loc);
  return detail::replace_stmt(body, w.get(), cached);
}

inline ir::Function cache_write(const ir::Function& fn, const std::string& loop, const std::string& buffer,
                                CacheWriteMode mode = CacheWriteMode::exact) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return cache_write(b, loop, buffer, mode); });
}

}  // namespace spindle::schedule
