// peel_split_tails (stage III, CPU): split's guard out of the full tiles.
//
// split(loop, f) of a loop whose extent n is not a constant multiple of f tests every point
// (split.hpp): `if v_o * f + v_i < n`. On the CPU that test in front of a vectorised inner
// loop stops the C compiler from vectorising it (SpMM under split("k", 16).vectorize("k_i")
// ran 5x slower than without the split). A loop v_o over ceil(n / f) tiles whose body holds
// such guards becomes
//
//   for v_o in [0, n / f):                  S, every guard `v_o * f + w < n` dropped
//   for v_o' in [n / f, ceil(n / f)):       S (serial; the guards kept: the partial tile)
//
// The same points in the same order (the partial tile was the last one). A guard is dropped
// only when it is proved true in a full tile: its condition is `v_o * f + w < n` with the same
// n (the extent is exactly ceil_div(n, f)) and w, an integer expression of loops inside v_o
// whose bounds are constants, within [0, f - 1] by interval arithmetic (ir/affine_index.hpp).
// Loops of another kind than serial or parallel, and loops with no such guard, are left alone.
// Pre/post: stage III; semantics preserved (same statements, same order).
#pragma once

#include <map>
#include <optional>

#include "spindle/ir/affine_index.hpp"
#include "spindle/ir/equal.hpp"
#include "spindle/schedule/loop_utils.hpp"

namespace spindle::schedule {

namespace detail {

// e == coef * v + rest with rest free of v (sums, differences, products by constants).
struct LinearIn {
  std::int64_t coef = 0;
  ir::Expr rest;
};

inline std::optional<LinearIn> linear_in(const ir::Expr& e, const ir::ExprNode* v) {
  if (e.get() == v) return LinearIn{1, ir::int_imm(0, e.dtype())};
  if (!ir::uses_var(e, v)) return LinearIn{0, e};
  auto* b = e.as<ir::BinaryNode>();
  if (!b) return std::nullopt;
  auto a = linear_in(b->a, v), c = linear_in(b->b, v);
  if (!a || !c) return std::nullopt;
  switch (b->op) {
    case ir::BinOp::add: return LinearIn{a->coef + c->coef, a->rest + c->rest};
    case ir::BinOp::sub: return LinearIn{a->coef - c->coef, a->rest - c->rest};
    case ir::BinOp::mul: {
      auto ka = const_int(b->a), kb = const_int(b->b);
      if (kb && a->coef) return LinearIn{a->coef * *kb, a->rest * b->b};
      if (ka && c->coef) return LinearIn{c->coef * *ka, b->a * c->rest};
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

class PeelSplitTails : public ir::IRMutator {
 public:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt inner = ir::IRMutator::mutate_For(n, self);  // inner loops first
    const auto* f = inner.as<ir::ForNode>();
    if ((f->for_kind != ir::ForKind::serial && f->for_kind != ir::ForKind::parallel) || !is_const(f->min, 0))
      return inner;
    auto split = split_extent(f->extent);
    if (!split) return inner;
    auto [total, factor] = *split;
    DropGuards drop(f->var.get(), total, factor);
    ir::Stmt full_body = drop.mutate(f->body);
    if (drop.dropped == 0) return inner;
    ir::Expr full_tiles = lower::simplify(total / ir::int_imm(factor, total.dtype()));
    ir::Stmt full = ir::for_loop(f->var, f->min, full_tiles, f->for_kind, f->iter_kind, f->axis, full_body, f->loc);
    ir::Var tail_var(f->var.name(), f->var.dtype());
    ir::Stmt tail_body = substitute(f->body, f->var, tail_var);
    ir::Stmt tail = ir::for_loop(tail_var, full_tiles, lower::simplify(f->extent - full_tiles), ir::ForKind::serial,
                                 f->iter_kind, f->axis, tail_body, f->loc);
    return ir::seq({full, tail}, f->loc);
  }

 private:
  // (n, f) when `extent` is ceil_div(n, f) for a constant f > 1.
  static std::optional<std::pair<ir::Expr, std::int64_t>> split_extent(const ir::Expr& extent) {
    auto* d = extent.as<ir::BinaryNode>();
    if (!d || d->op != ir::BinOp::div) return std::nullopt;
    auto f = const_int(d->b);
    auto* s = d->a.as<ir::BinaryNode>();
    if (!f || *f <= 1 || !s || s->op != ir::BinOp::add || !is_const(s->b, *f - 1)) return std::nullopt;
    if (!ir::equal(ceil_div(s->a, *f), extent)) return std::nullopt;
    return std::make_pair(s->a, *f);
  }

  // Drops the guards `v * f + w < n` proved true for v < n / f, tracking the constant
  // ranges of the loops inside.
  class DropGuards : public ir::IRMutator {
   public:
    DropGuards(const ir::ExprNode* v, ir::Expr n, std::int64_t f) : v_(v), n_(std::move(n)), f_(f) {}
    int dropped = 0;

    ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
      auto lo = const_int(n->min), ext = const_int(n->extent);
      bool known = lo && ext && *ext >= 1;
      if (known) ranges_[n->var.get()] = ir::IndexRange{*lo, static_cast<__int128>(*lo) + *ext - 1};
      ir::Stmt out = ir::IRMutator::mutate_For(n, self);
      ranges_.erase(n->var.get());
      return out;
    }
    ir::Stmt mutate_IfThenElse(const ir::IfThenElseNode* n, const ir::Stmt& self) override {
      if (!n->else_case.defined() && proved(n->cond)) {
        ++dropped;
        return mutate(n->then_case);
      }
      return ir::IRMutator::mutate_IfThenElse(n, self);
    }

   private:
    bool proved(const ir::Expr& cond) const {
      auto* lt = cond.as<ir::BinaryNode>();
      if (!lt || lt->op != ir::BinOp::lt || !ir::equal(lt->b, n_)) return false;
      auto lin = linear_in(lt->a, v_);
      if (!lin || lin->coef != f_) return false;
      auto r = ir::index_range(lower::simplify(lin->rest), [&](const ir::VarNode* x) -> std::optional<ir::IndexRange> {
        auto it = ranges_.find(x);
        if (it == ranges_.end()) return std::nullopt;
        return it->second;
      });
      return r && r->lo >= 0 && r->hi <= f_ - 1;
    }

    const ir::ExprNode* v_;
    ir::Expr n_;
    std::int64_t f_;
    std::map<const ir::ExprNode*, ir::IndexRange> ranges_;
  };
};

}  // namespace detail

inline ir::Stmt peel_split_tails(const ir::Stmt& body) { return detail::PeelSplitTails().mutate(body); }

inline ir::Function peel_split_tails(const ir::Function& fn) {
  ir::Function out = fn;
  out.body = peel_split_tails(fn.body);
  return out;
}

}  // namespace spindle::schedule
