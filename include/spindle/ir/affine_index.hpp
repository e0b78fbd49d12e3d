// Computed write indices (docs/language.md §4.1, "writes at computed coordinates"): a root
// slot of a write may be indexed by an integer expression of iterators and constants —
// `d(io * 4 + ii, k)` (a blocked output), `c(i / 2)`, `h(i % 8)`, `min(i, n)` — made of
// +, -, *, unary -, min, max, and / and % by a positive constant. Such an index is accepted
// when interval arithmetic over the iterators' coordinate ranges proves it inside the slot's
// extent: its lower bound at definition (every extent unknown but non-negative), its upper
// bound — a relation between extents — at call time, from the bound extents, before the
// kernel runs (a ShapeError names the bound that fails). Where every extent involved is a
// compile-time constant, the whole proof happens at definition.
//
// This file holds the grammar and the interval arithmetic; the front end
// (frontend/iteration_inference.hpp) and the binder (runtime/bind_args.hpp) use both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

#include "spindle/ir/expr.hpp"

namespace spindle::ir {

// An interval of index values. A bound of magnitude `unbounded` stands for an extent not
// known yet (definition time): it is larger than any value an int64 index can take.
struct IndexRange {
  static constexpr __int128 unbounded = static_cast<__int128>(1) << 100;
  __int128 lo = 0, hi = 0;
  bool lo_known() const { return lo > -unbounded; }
  bool hi_known() const { return hi < unbounded; }
};

// The range of one iterator, or nullopt when `v` is not one.
using IteratorRange = std::function<std::optional<IndexRange>(const VarNode*)>;

namespace affine_detail {

inline __int128 clamp(__int128 v) {
  return std::clamp(v, -IndexRange::unbounded, IndexRange::unbounded);
}
inline bool infinite(__int128 v) { return v >= IndexRange::unbounded || v <= -IndexRange::unbounded; }
// a + b for a lower (`upper` false) or an upper bound: an unbounded term keeps the sum
// unbounded, to the conservative side when the terms are unbounded both ways.
inline __int128 add(__int128 a, __int128 b, bool upper) {
  if (infinite(a) || infinite(b)) {
    if (infinite(a) && infinite(b) && (a > 0) != (b > 0)) return upper ? IndexRange::unbounded : -IndexRange::unbounded;
    return infinite(a) ? a : b;
  }
  return a + b;  // finite bounds are within int64 (checked after every step): no overflow
}
inline __int128 mul(__int128 a, __int128 b) {
  if (a == 0 || b == 0) return 0;
  const __int128 big = IndexRange::unbounded;
  if (infinite(a) || infinite(b)) return (a > 0) == (b > 0) ? big : -big;
  return a * b;  // finite bounds are within int64 (checked after every step): no overflow
}
// C's truncating division by a positive constant; monotone, so bounds map to bounds.
inline __int128 div(__int128 a, std::int64_t d) {
  return infinite(a) ? a : a / d;
}
inline bool fits_int64(const IndexRange& r) {
  const __int128 lo64 = std::numeric_limits<std::int64_t>::min(), hi64 = std::numeric_limits<std::int64_t>::max();
  return (!r.lo_known() || (r.lo >= lo64 && r.lo <= hi64)) && (!r.hi_known() || (r.hi >= lo64 && r.hi <= hi64));
}

}  // namespace affine_detail

// The positive constant divisor of `/` or `%`, or 0.
inline std::int64_t positive_constant(const Expr& e) {
  const IntImmNode* c = e.as<IntImmNode>();
  return c && c->value > 0 ? c->value : 0;
}

// The range of `e` over the iterators' ranges, or nullopt when `e` is outside the grammar
// above or a finite bound of some sub-expression leaves int64 (the generated code could
// wrap around there). Sound: every value `e` takes lies in the range.
inline std::optional<IndexRange> index_range(const Expr& e, const IteratorRange& iter) {
  using affine_detail::clamp;
  if (!e.defined() || !is_int(e.dtype())) return std::nullopt;
  std::optional<IndexRange> out;
  if (const IntImmNode* c = e.as<IntImmNode>()) {
    out = IndexRange{c->value, c->value};
  } else if (const VarNode* v = e.as<VarNode>()) {
    out = iter(v);
  } else if (const UnaryNode* u = e.as<UnaryNode>()) {
    if (u->op != UnOp::neg) return std::nullopt;
    auto a = index_range(u->a, iter);
    if (!a) return std::nullopt;
    out = IndexRange{clamp(-a->hi), clamp(-a->lo)};
  } else if (const BinaryNode* b = e.as<BinaryNode>()) {
    auto x = index_range(b->a, iter);
    if (!x) return std::nullopt;
    if (b->op == BinOp::div || b->op == BinOp::mod) {
      const std::int64_t d = positive_constant(b->b);
      if (!d) return std::nullopt;
      if (b->op == BinOp::div) {
        out = IndexRange{affine_detail::div(x->lo, d), affine_detail::div(x->hi, d)};
      } else {  // C's remainder takes the dividend's sign and is smaller than d in magnitude
        const __int128 m = d - 1;
        out = IndexRange{x->lo >= 0 ? 0 : std::max(x->lo, -m), x->hi <= 0 ? 0 : std::min(x->hi, m)};
      }
    } else {
      auto y = index_range(b->b, iter);
      if (!y) return std::nullopt;
      switch (b->op) {
        case BinOp::add: out = IndexRange{affine_detail::add(x->lo, y->lo, false), affine_detail::add(x->hi, y->hi, true)}; break;
        case BinOp::sub: out = IndexRange{affine_detail::add(x->lo, -y->hi, false), affine_detail::add(x->hi, -y->lo, true)}; break;
        case BinOp::mul: {
          __int128 p[4] = {affine_detail::mul(x->lo, y->lo), affine_detail::mul(x->lo, y->hi),
                           affine_detail::mul(x->hi, y->lo), affine_detail::mul(x->hi, y->hi)};
          out = IndexRange{*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
          break;
        }
        case BinOp::min: out = IndexRange{std::min(x->lo, y->lo), std::min(x->hi, y->hi)}; break;
        case BinOp::max: out = IndexRange{std::max(x->lo, y->lo), std::max(x->hi, y->hi)}; break;
        default: return std::nullopt;
      }
    }
  } else {
    return std::nullopt;
  }
  if (!out || !affine_detail::fits_int64(*out)) return std::nullopt;
  return out;
}

// Whether `e` is in the grammar of computed indices (over iterators `is_iter` accepts),
// whatever the ranges. A constant is one (`y(0) += ...`); a bare iterator is not.
inline bool is_computed_index(const Expr& e, const std::function<bool(const VarNode*)>& is_iter) {
  if (e.as<VarNode>()) return false;
  return index_range(e, [&](const VarNode* v) -> std::optional<IndexRange> {
           if (!is_iter(v)) return std::nullopt;
           return IndexRange{0, IndexRange::unbounded};
         }).has_value();
}

inline std::string range_bound_string(__int128 v) {
  if (v >= IndexRange::unbounded) return "+inf";
  if (v <= -IndexRange::unbounded) return "-inf";
  return std::to_string(static_cast<std::int64_t>(v));
}

}  // namespace spindle::ir
