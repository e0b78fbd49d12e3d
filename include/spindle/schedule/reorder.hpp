// reorder: permutes a perfectly nested band of loops (each loop's body is exactly the next
// loop, no statement between them). `order` names the loops of the band, outermost first:
//
//   for j in [0, n) reduction:          reorder({"k", "j"})     for k in [0, K):
//     for k in [0, K):                          ->                for j in [0, n) reduction:
//       c[i, k] += v(j, k)                                          c[i, k] += v(j, k)
//
// The band is found by its loops: the names must name the loops of exactly one perfectly
// nested band (so a name shared with a loop outside the band, like SpMM's init loop over k,
// is no ambiguity). A loop's bounds may only use loops that stay outside it.
//
// Reductions and their init: when the band directly follows, in its sequence, an init
// nest that stores the reduction target over the same spatial loops that the new order
// puts outermost (SpMM: `for k: c[i, k] = 0`), the init moves into the new outer loops:
//
//   for k in [0, K): c[i, k] = 0               for k in [0, K):
//   for j ... reduction:              ->         c[i, k] = 0
//     for k in [0, K): c[i, k] += v(j, k)        for j ... reduction: c[i, k] += v(j, k)
//
// (each target element is then initialised right before its own reduction; requires the
// target index to be one-to-one in those loops and the init not to read what the band
// writes). This leaves one loop over k, which the other primitives can then address.
// The init may match only the outer loops of the new order and keep loops of its own
// inside them: after split("k", 32) (both nests split), reorder({"k_o", "j", "k_i"}) gives
//
//   for k_o in [0, ceil(K / 32)):
//     for k_i in [0, 32): if (k_o * 32 + k_i < K): c[i, k_o * 32 + k_i] = 0
//     for j ... reduction: for k_i in [0, 32): if (...): c[i, k_o * 32 + k_i] += v(j, ...)
//
// — the register tile of the default SpMM schedule, as steps: cache_write("k_o", "c") then
// keeps the tile in registers. Here the indices of the init and of the reductions differ (their
// k_i loops are not the same loop), so each moved loop v needs a slot that every access
// indexes as v * F + w with w a loop over [0, n <= F) (w may be a different loop in each):
// the slot then names the one iteration of v that initialises an element and reduces into it.
// Legality: spatial loops are independent by construction; swapping two reduction loops
// changes the order in which a sum is accumulated (floating-point reassociation).
// Pre/post: stage II or III; semantics preserved up to that reassociation.
#pragma once

#include <algorithm>
#include <map>
#include <optional>

#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

inline std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

inline const char* stmt_kind_word(const ir::Stmt& s) {
  if (!s.defined()) return "nothing";
  switch (s.kind()) {
    case ir::StmtKind::Store: return "a store";
    case ir::StmtKind::Reduce: return "a reduction";
    case ir::StmtKind::LetStmt: return "a let";
    case ir::StmtKind::IfThenElse: return "an if (a guard)";
    case ir::StmtKind::For: return "a loop";
    case ir::StmtKind::CoIterate: return "a merge loop (union_of / intersection_of)";
    case ir::StmtKind::Seq: return "a sequence of statements";
    case ir::StmtKind::Block: return "a block (local allocations)";
    case ir::StmtKind::Barrier: return "a barrier";
    case ir::StmtKind::Prefetch: return "a prefetch";
    case ir::StmtKind::SparseIteration: return "a sparse iteration";
  }
  return "a statement";
}

// Why the named loops are not one perfectly nested band (for the error message).
inline std::string band_diagnosis(const ir::Stmt& body, const std::vector<std::string>& names) {
  std::vector<const ir::ForNode*> loops;
  for (auto& n : names) {
    auto found = loops_named(body, n);
    if (found.size() != 1) return "'" + n + "' names " + std::to_string(found.size()) + " loops";
    loops.push_back(found[0]);
  }
  std::sort(loops.begin(), loops.end(), [&](auto* a, auto* b) {
    return path_to(body, a).size() < path_to(body, b).size();
  });
  for (std::size_t q = 0; q + 1 < loops.size(); ++q) {
    const ir::ForNode* outer = loops[q];
    const ir::ForNode* inner = loops[q + 1];
    if (!contains(outer->body, inner))
      return "loop '" + inner->var.name() + "' is not inside loop '" + outer->var.name() + "'";
    if (outer->body.get() != inner)
      return "the body of loop '" + outer->var.name() + "' is " + stmt_kind_word(outer->body) + ", not loop '" +
             inner->var.name() + "'";
  }
  return "they are not nested in each other";
}

// The band of loops named exactly `names` (in some order), perfectly nested, outermost first.
inline std::vector<const ir::ForNode*> find_band(const ir::Stmt& body, const std::vector<std::string>& names,
                                                 const char* primitive) {
  std::set<std::string> want(names.begin(), names.end());
  SPINDLE_CHECK(want.size() == names.size(), UserError, primitive, ": a loop is named twice in (",
                join_names(names), "); hint: name each loop of the band once");
  for (auto& n : names) require_loop(body, n, primitive);
  std::vector<std::vector<const ir::ForNode*>> bands;
  for (auto* l : all_loops(body)) {
    std::vector<const ir::ForNode*> chain;
    std::set<std::string> seen;
    const ir::ForNode* cur = l;
    while (cur && want.count(cur->var.name()) && seen.insert(cur->var.name()).second) {
      chain.push_back(cur);
      if (chain.size() == names.size()) break;
      cur = cur->body.as<ir::ForNode>();
    }
    if (chain.size() == names.size()) bands.push_back(chain);
  }
  SPINDLE_CHECK(!bands.empty(), UserError, primitive, ": loops ", join_names(names),
                " are not a perfectly nested band: ", band_diagnosis(body, names),
                "; hint: only loops with nothing between them can be permuted (move guards and lets out first, "
                "or pick loops that are directly nested)");
  SPINDLE_CHECK(bands.size() == 1, UserError, primitive, ": loops ", join_names(names), " form ", bands.size(),
                " perfectly nested bands (loops: ", loop_names(body),
                "); hint: the names must single out one band");
  return bands[0];
}

// The store an init nest ends in: through its loops and guards (an if without else), or
// nothing when the nest is anything else.
inline const ir::StoreNode* init_store(const ir::Stmt& s) {
  if (auto* st = s.as<ir::StoreNode>()) return st;
  if (auto* f = s.as<ir::ForNode>()) return init_store(f->body);
  if (auto* c = s.as<ir::IfThenElseNode>(); c && !c->else_case.defined()) return init_store(c->then_case);
  return nullptr;
}

// F when idx is v * F + w (or w + v * F, or v * F; F a positive constant) with w a loop
// variable of `scope` whose loop runs over [0, n) for a constant n <= F, or v itself (F = 1).
inline std::optional<std::int64_t> strided_slot(const ir::Expr& idx, const ir::Var& v, const ir::Stmt& scope) {
  auto scaled = [&](const ir::Expr& e) -> std::optional<std::int64_t> {
    if (e.same_as(v)) return 1;
    auto* b = e.as<ir::BinaryNode>();
    if (!b || b->op != ir::BinOp::mul) return std::nullopt;
    auto f = b->a.same_as(v) ? const_int(b->b) : b->b.same_as(v) ? const_int(b->a) : std::nullopt;
    if (f && *f > 0) return f;
    return std::nullopt;
  };
  if (auto f = scaled(idx)) return f;
  auto* b = idx.as<ir::BinaryNode>();
  if (!b || b->op != ir::BinOp::add) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto f = scaled(side == 0 ? b->a : b->b);
    const ir::Expr& w = side == 0 ? b->b : b->a;
    if (!f || !w.as<ir::VarNode>()) continue;
    for (auto* l : all_loops(scope)) {
      if (!l->var.same_as(w)) continue;
      auto n = const_int(l->extent);
      if (is_const(l->min, 0) && n && *n <= *f) return f;
    }
  }
  return std::nullopt;
}

// The init nest right before a band, moved into the band's new outer loops (see the top of
// the file), or nothing when there is no such init or moving it is not safe. `loops` is
// the band in its new order.
inline std::optional<ir::Stmt> reorder_with_init(const ir::Stmt& body, const std::vector<const ir::ForNode*>& band,
                                                 const std::vector<const ir::ForNode*>& loops) {
  auto path = path_to(body, band.front());
  const ir::SeqNode* parent = path.size() >= 2 ? path[path.size() - 2].as<ir::SeqNode>() : nullptr;
  if (!parent) return std::nullopt;
  std::size_t q = 0;
  while (parent->stmts[q].get() != band.front()) ++q;
  if (q == 0) return std::nullopt;
  const ir::Stmt& prev = parent->stmts[q - 1];
  std::vector<const ir::ForNode*> init_loops;
  ir::Stmt s = prev;
  while (auto* f = s.as<ir::ForNode>()) {
    init_loops.push_back(f);
    s = f->body;
  }
  // Leading spatial init loops over the same ranges as the new outer loops, then reductions.
  std::size_t m = 0;
  while (m < init_loops.size() && m < loops.size() && init_loops[m]->iter_kind == ir::IterKind::spatial &&
         loops[m]->iter_kind == ir::IterKind::spatial && ir::equal(init_loops[m]->min, loops[m]->min) &&
         ir::equal(init_loops[m]->extent, loops[m]->extent))
    ++m;
  if (m == 0 || m >= loops.size()) return std::nullopt;
  const bool whole = m == init_loops.size();  // else the init keeps its inner loops (a split's k_i)
  if (whole && !s.as<ir::StoreNode>()) return std::nullopt;
  bool has_reduction = false;
  for (std::size_t k = m; k < loops.size(); ++k) has_reduction |= loops[k]->iter_kind == ir::IterKind::reduction;
  if (!has_reduction) return std::nullopt;

  // The init stores the element that every reduction of the band updates, reads nothing
  // the band writes, and the band touches that buffer only through those reductions.
  ir::Substituter sub;
  for (std::size_t k = 0; k < m; ++k) sub.add(init_loops[k]->var, loops[k]->var);
  ir::Stmt init = sub.mutate(whole ? s : init_loops[m - 1]->body);
  const ir::StoreNode* ist = init_store(init);
  if (!ist) return std::nullopt;
  const ir::Stmt inner_body = band.back()->body;
  auto uses = buffer_uses(inner_body);
  bool any = false;
  std::set<const ir::BufferNode*> written;
  for (auto* r : uses.reduces) {
    written.insert(r->buffer.get());
    if (r->buffer != ist->buffer) continue;
    any = true;
    if (r->atomic || (whole && !ir::equal(r->indices, ist->indices))) return std::nullopt;
  }
  if (!any) return std::nullopt;
  for (auto* w : uses.stores) {
    written.insert(w->buffer.get());
    if (w->buffer == ist->buffer) return std::nullopt;
  }
  for (auto* l : uses.loads)
    if (l->buffer == ist->buffer) return std::nullopt;
  for (auto* l : buffer_uses(init).loads)
    if (written.count(l->buffer.get())) return std::nullopt;
  if (whole) {
    // One element per iteration of the moved loops.
    for (std::size_t k = 0; k < m; ++k) {
      std::set<const ir::ExprNode*> others;
      for (std::size_t o = 0; o < m; ++o)
        if (o != k) others.insert(loops[o]->var.get());
      bool unit = false;
      for (auto& idx : ist->indices) {
        auto e = unit_offset(idx, loops[k]->var);
        unit |= e && !uses_any(*e, others);
      }
      if (!unit) return std::nullopt;
    }
  } else {
    // The init keeps inner loops, so its indices differ from the reductions'. Each moved
    // loop v needs a slot that every access indexes as v * F + w with w in [0, F) (a split:
    // k_o * 32 + k_i): then an element's slot tells the iteration of v that initialises it
    // and every iteration that reduces into it, and these are the same one.
    std::vector<const ir::ReduceNode*> reductions;
    for (auto* r : uses.reduces)
      if (r->buffer == ist->buffer) reductions.push_back(r);
    for (std::size_t k = 0; k < m; ++k) {
      bool found = false;
      for (std::size_t slot = 0; slot < ist->indices.size() && !found; ++slot) {
        auto f = strided_slot(ist->indices[slot], loops[k]->var, init);
        if (!f) continue;
        found = true;
        for (auto* r : reductions)
          found = found && slot < r->indices.size() && strided_slot(r->indices[slot], loops[k]->var, path.back()) == f;
      }
      if (!found) return std::nullopt;
    }
  }

  ir::Stmt inner = inner_body;
  for (std::size_t p = loops.size(); p-- > m;) inner = with_body(*loops[p], inner);
  ir::Stmt nest = ir::seq({init, inner}, prev.loc());
  for (std::size_t p = m; p-- > 0;) nest = with_body(*loops[p], nest);
  std::vector<ir::Stmt> stmts;
  for (std::size_t k = 0; k < parent->stmts.size(); ++k) {
    if (k + 1 == q) continue;
    stmts.push_back(k == q ? nest : parent->stmts[k]);
  }
  return replace_stmt(body, parent, ir::seq(std::move(stmts), parent->loc));
}

}  // namespace detail

inline ir::Stmt reorder(const ir::Stmt& body, const std::vector<std::string>& order) {
  SPINDLE_CHECK(!order.empty(), UserError, "reorder: no loops given; hint: name the loops of the band, outermost first");
  auto band = detail::find_band(body, order, "reorder");
  std::map<std::string, const ir::ForNode*> by_name;
  for (auto* l : band) by_name[l->var.name()] = l;
  std::vector<const ir::ForNode*> loops;
  for (auto& n : order) loops.push_back(by_name.at(n));

  // Bounds may only use loops that stay outside.
  for (std::size_t p = 0; p < loops.size(); ++p) {
    for (std::size_t q = p + 1; q < loops.size(); ++q) {
      const ir::ForNode* l = loops[p];
      const ir::ForNode* in = loops[q];
      SPINDLE_CHECK(!ir::uses_var(l->min, in->var.get()) && !ir::uses_var(l->extent, in->var.get()), UserError,
                    "reorder: the bounds of loop '", l->var.name(), "' ([", ir::to_string(l->min), ", +",
                    ir::to_string(l->extent), ")) depend on loop '", in->var.name(),
                    "', which the new order puts inside it; hint: keep '", in->var.name(), "' outside '",
                    l->var.name(), "' (a ragged loop must stay inside the loop that selects its row)");
    }
  }
  if (auto moved = detail::reorder_with_init(body, band, loops)) return *moved;
  ir::Stmt nest = band.back()->body;
  for (std::size_t p = loops.size(); p-- > 0;) nest = detail::with_body(*loops[p], nest);
  return detail::replace_stmt(body, band.front(), nest);
}

inline ir::Function reorder(const ir::Function& fn, const std::vector<std::string>& order) {
  return detail::on_body(fn, [&](const ir::Stmt& b) { return reorder(b, order); });
}

}  // namespace spindle::schedule
