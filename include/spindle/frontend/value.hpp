// Typed expression values of the front end. Every operator immediately yields a runtime
// ir::Expr inside a Value<T>; there are no nested expression types to escape into user
// code, so `auto e = a(i, j) * b(j, k);` is safe.
#pragma once

#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spindle/frontend/axis_types.hpp"
#include "spindle/ir/ops.hpp"

namespace spindle {

namespace detail {
// The IR constant of a C++ value of type T (exact: 64-bit integers do not pass through a double).
template <class T>
ir::Expr constant_of(T v) {
  if constexpr (std::is_same_v<T, bool>)
    return ir::bool_imm(v);
  else if constexpr (std::is_integral_v<T>)
    return ir::int_imm(static_cast<std::int64_t>(v), dtype_v<T>);
  else
    return ir::float_imm(static_cast<double>(v), dtype_v<T>);
}
}  // namespace detail

template <class T>
class Value {
 public:
  using value_type = T;
  Value(T literal) : expr_(detail::constant_of<T>(literal)) {}  // NOLINT
  explicit Value(ir::Expr e) : expr_(std::move(e)) {}
  const ir::Expr& expr() const { return expr_; }

 protected:
  ir::Expr expr_;
};

// An element of an `in` buffer: a Value that cannot be assigned to. Writing into an `in`
// buffer is a compile-time error (the write would otherwise be lost).
template <class T>
class InValue : public Value<T> {
  template <class>
  static constexpr bool always_false = false;

 public:
  using Value<T>::Value;
  InValue(const InValue&) = default;
  InValue& operator=(const InValue&) = delete;
#define SPINDLE_READ_ONLY(op)                                                                              \
  template <class U>                                                                                       \
  void operator op(U&&) {                                                                                  \
    static_assert(always_false<U>,                                                                         \
                  "spindle: cannot write into an `in` buffer (read-only); declare it spindle::out or "     \
                  "spindle::inout (to name a value read from it, use spindle::Value<T> v = a(i, j);)");   \
  }
  SPINDLE_READ_ONLY(=)
  SPINDLE_READ_ONLY(+=)
  SPINDLE_READ_ONLY(-=)
  SPINDLE_READ_ONLY(*=)
#undef SPINDLE_READ_ONLY
};

template <class T>
concept Arithmetic = std::is_arithmetic_v<T>;

template <class T>
concept ValueLike = requires { typename std::decay_t<T>::value_type; } &&
                    std::is_base_of_v<Value<typename std::decay_t<T>::value_type>, std::decay_t<T>>;

// The iterator of axis A inside a sparse iteration. As a value it is A's coordinate.
template <class A>
class iter : public Value<std::int64_t> {
 public:
  static_assert(is_axis_v<A>, "spindle::iter<A>: A must be an axis type");
  using axis = A;
  explicit iter(ir::Var v) : Value<std::int64_t>(ir::Expr(v)), var_(std::move(v)) {}
  const ir::Var& var() const { return var_; }

 private:
  ir::Var var_;
};

// The iterators of a fused chain of axes (fuse<A, B, ...>, axis_types.hpp): one iterator per
// axis, all advanced by one loop. Unpack them with `auto [a, b] = ab;`, or take one with
// ab.get<B>() (by axis) or ab.get<1>() (by position).
template <class A, class B, class... More>
class iter<fuse<A, B, More...>> {
  static_assert(sizeof(fuse<A, B, More...>) > 0);  // instantiates fuse<...>: its checks of the chain
 public:
  using axes = std::tuple<A, B, More...>;
  static constexpr std::size_t size = 2 + sizeof...(More);
  explicit iter(iter<A> a, iter<B> b, iter<More>... more) : its_(std::move(a), std::move(b), std::move(more)...) {}

  template <std::size_t K>
  auto get() const {
    static_assert(K < size, "spindle::iter<fuse<...>>::get<K>: K is past the last axis of the chain");
    return std::get<K>(its_);
  }
  template <class X>
    requires(is_axis_v<X>)
  iter<X> get() const {
    static_assert(int(std::is_same_v<X, A>) + int(std::is_same_v<X, B>) + (0 + ... + int(std::is_same_v<X, More>)) == 1,
                  "spindle::iter<fuse<...>>::get<X>: X is not an axis of the fused chain");
    return std::get<iter<X>>(its_);
  }

 private:
  std::tuple<iter<A>, iter<B>, iter<More>...> its_;
};

namespace detail {
template <class T>
Value<T> make_value(ir::Expr e) {
  return Value<T>(std::move(e));
}
// A C++ literal next to a Value<T> is converted to T as static_cast<T> does (integers wrap,
// floats round); a floating literal that no T can hold (NaN, or beyond T's range for an
// integer T) is a UserError instead of C++'s undefined behaviour.
template <class T, class S>
ir::Expr literal_as(S s) {
  if constexpr (std::is_integral_v<T> && std::is_floating_point_v<S>) {
    SPINDLE_CHECK(s == s && s > -9.3e18 && s < 9.3e18 && static_cast<long double>(s) >= std::numeric_limits<T>::min() &&
                      static_cast<long double>(s) < static_cast<long double>(std::numeric_limits<T>::max()) + 1,
                  UserError, "the constant ", s, " next to an integer value of type ", dtype_name(dtype_v<T>),
                  " is outside that type's range; hint: cast the value (spindle::cast<double>(x)) instead");
  }
  return constant_of<T>(static_cast<T>(s));
}
}  // namespace detail

#define SPINDLE_VALUE_BINOP(op, fn)                                                        \
  template <class T>                                                                       \
  Value<T> operator op(const Value<T>& a, const Value<T>& b) {                             \
    return detail::make_value<T>(ir::binary(ir::BinOp::fn, a.expr(), b.expr()));           \
  }                                                                                        \
  template <class T, Arithmetic S>                                                         \
  Value<T> operator op(const Value<T>& a, S b) {                                           \
    return detail::make_value<T>(ir::binary(ir::BinOp::fn, a.expr(), detail::literal_as<T>(b))); \
  }                                                                                        \
  template <class T, Arithmetic S>                                                         \
  Value<T> operator op(S a, const Value<T>& b) {                                           \
    return detail::make_value<T>(ir::binary(ir::BinOp::fn, detail::literal_as<T>(a), b.expr())); \
  }
SPINDLE_VALUE_BINOP(+, add)
SPINDLE_VALUE_BINOP(-, sub)
SPINDLE_VALUE_BINOP(*, mul)
SPINDLE_VALUE_BINOP(/, div)
#undef SPINDLE_VALUE_BINOP

template <class T>
  requires std::is_integral_v<T>
Value<T> operator%(const Value<T>& a, const Value<T>& b) {
  return detail::make_value<T>(ir::binary(ir::BinOp::mod, a.expr(), b.expr()));
}
template <class T, Arithmetic S>
  requires std::is_integral_v<T>
Value<T> operator%(const Value<T>& a, S b) {
  return detail::make_value<T>(ir::binary(ir::BinOp::mod, a.expr(), detail::literal_as<T>(b)));
}

template <class T, Arithmetic S>
  requires std::is_integral_v<T>
Value<T> operator%(S a, const Value<T>& b) {
  return detail::make_value<T>(ir::binary(ir::BinOp::mod, detail::literal_as<T>(a), b.expr()));
}

template <class T>
Value<T> operator-(const Value<T>& a) {
  return detail::make_value<T>(ir::unary(ir::UnOp::neg, a.expr()));
}

#define SPINDLE_VALUE_CMP(op, fn)                                                            \
  template <class T>                                                                         \
  Value<bool> operator op(const Value<T>& a, const Value<T>& b) {                            \
    return detail::make_value<bool>(ir::binary(ir::BinOp::fn, a.expr(), b.expr()));         \
  }                                                                                          \
  template <class T, Arithmetic S>                                                           \
  Value<bool> operator op(const Value<T>& a, S b) {                                          \
    return detail::make_value<bool>(ir::binary(ir::BinOp::fn, a.expr(), detail::literal_as<T>(b))); \
  }                                                                                          \
  template <class T, Arithmetic S>                                                           \
  Value<bool> operator op(S a, const Value<T>& b) {                                          \
    return detail::make_value<bool>(ir::binary(ir::BinOp::fn, detail::literal_as<T>(a), b.expr())); \
  }
SPINDLE_VALUE_CMP(<, lt)
SPINDLE_VALUE_CMP(<=, le)
SPINDLE_VALUE_CMP(>, gt)
SPINDLE_VALUE_CMP(>=, ge)
SPINDLE_VALUE_CMP(==, eq)
SPINDLE_VALUE_CMP(!=, ne)
#undef SPINDLE_VALUE_CMP

inline Value<bool> operator&&(const Value<bool>& a, const Value<bool>& b) {
  return detail::make_value<bool>(ir::binary(ir::BinOp::land, a.expr(), b.expr()));
}
inline Value<bool> operator||(const Value<bool>& a, const Value<bool>& b) {
  return detail::make_value<bool>(ir::binary(ir::BinOp::lor, a.expr(), b.expr()));
}
inline Value<bool> operator!(const Value<bool>& a) {
  return detail::make_value<bool>(ir::unary(ir::UnOp::lnot, a.expr()));
}

// --- math ----------------------------------------------------------------------------
#define SPINDLE_VALUE_MATH(name)                                                 \
  template <class T>                                                             \
  Value<T> name(const Value<T>& x) {                                             \
    static_assert(std::is_floating_point_v<T>, "spindle::" #name " takes a floating-point value"); \
    return detail::make_value<T>(ir::call(ir::Intrinsic::name, {x.expr()}));     \
  }
SPINDLE_VALUE_MATH(exp)
SPINDLE_VALUE_MATH(log)
SPINDLE_VALUE_MATH(sqrt)
SPINDLE_VALUE_MATH(tanh)
#undef SPINDLE_VALUE_MATH

template <class T>
Value<T> abs(const Value<T>& x) {
  if constexpr (std::is_floating_point_v<T>) {
    return detail::make_value<T>(ir::call(ir::Intrinsic::abs, {x.expr()}));
  } else {
    return detail::make_value<T>(
        ir::select(ir::binary(ir::BinOp::lt, x.expr(), ir::make_const(dtype_v<T>, 0)),
                   ir::unary(ir::UnOp::neg, x.expr()), x.expr()));
  }
}

template <class T>
Value<T> pow(const Value<T>& x, const Value<T>& y) {
  static_assert(std::is_floating_point_v<T>, "spindle::pow takes floating-point values");
  return detail::make_value<T>(ir::call(ir::Intrinsic::pow, {x.expr(), y.expr()}));
}

template <class T>
Value<T> max(const Value<T>& a, const Value<T>& b) {
  return detail::make_value<T>(ir::binary(ir::BinOp::max, a.expr(), b.expr()));
}
template <class T>
Value<T> min(const Value<T>& a, const Value<T>& b) {
  return detail::make_value<T>(ir::binary(ir::BinOp::min, a.expr(), b.expr()));
}
template <class T>
Value<T> select(const Value<bool>& c, const Value<T>& a, const Value<T>& b) {
  return detail::make_value<T>(ir::select(c.expr(), a.expr(), b.expr()));
}

// A C++ literal in place of one Value<T> operand converts to T (as static_cast<T> does):
// max(x, 0.0f), min(1, x), select(c, x, 0), pow(x, 2.0).
#define SPINDLE_VALUE_LITERAL_OVERLOADS(fn)                                 \
  template <class T, Arithmetic S>                                          \
  Value<T> fn(const Value<T>& a, S b) {                                     \
    return fn(a, Value<T>(detail::literal_as<T>(b)));                       \
  }                                                                         \
  template <class T, Arithmetic S>                                          \
  Value<T> fn(S a, const Value<T>& b) {                                     \
    return fn(Value<T>(detail::literal_as<T>(a)), b);                       \
  }
SPINDLE_VALUE_LITERAL_OVERLOADS(pow)
SPINDLE_VALUE_LITERAL_OVERLOADS(max)
SPINDLE_VALUE_LITERAL_OVERLOADS(min)
#undef SPINDLE_VALUE_LITERAL_OVERLOADS
template <class T, Arithmetic S>
Value<T> select(const Value<bool>& c, const Value<T>& a, S b) {
  return select(c, a, Value<T>(detail::literal_as<T>(b)));
}
template <class T, Arithmetic S>
Value<T> select(const Value<bool>& c, S a, const Value<T>& b) {
  return select(c, Value<T>(detail::literal_as<T>(a)), b);
}

template <class U, class T>
Value<U> cast(const Value<T>& v) {
  return detail::make_value<U>(ir::cast(dtype_v<U>, v.expr()));
}

// Positive infinity of T, for max-reductions such as softmax.
template <class T>
Value<T> infinity() {
  static_assert(std::is_floating_point_v<T>, "spindle::infinity is for floating-point types");
  return Value<T>(ir::make_const(dtype_v<T>, __builtin_inf()));
}

}  // namespace spindle

// Structured bindings of a fused iterator: auto [i, j] = ij;
template <class A, class B, class... More>
struct std::tuple_size<spindle::iter<spindle::fuse<A, B, More...>>>
    : std::integral_constant<std::size_t, 2 + sizeof...(More)> {};
template <std::size_t K, class A, class B, class... More>
struct std::tuple_element<K, spindle::iter<spindle::fuse<A, B, More...>>> {
  using type = spindle::iter<std::tuple_element_t<K, std::tuple<A, B, More...>>>;
};
