// Typed sparse buffers as kernel parameters:
//   spindle::in<T, Axes...>     read-only
//   spindle::out<T, Axes...>    written; reductions into it start from the identity
//   spindle::inout<T, Axes...>  read and written; reductions accumulate into its values
//   spindle::param<T>           a scalar argument
//   spindle::local<T>           a scalar temporary inside a kernel body
// Indexing checks at compile time that the number of indices matches the axes and that an
// iterator indexes a slot over its own coordinate space (A itself, dense<A>, or the sparse
// axis whose dense view it iterates).
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/frontend/builder.hpp"
#include "spindle/frontend/value.hpp"

namespace spindle {

namespace detail {

template <class Slot, class Idx>
struct index_fits : std::bool_constant<std::is_integral_v<Idx>> {};
template <class Slot, class U>
struct index_fits<Slot, Value<U>> : std::bool_constant<std::is_integral_v<U>> {};
template <class Slot, class U>
struct index_fits<Slot, InValue<U>> : std::bool_constant<std::is_integral_v<U>> {};
template <class Slot, class A>
struct index_fits<Slot, iter<A>> : std::bool_constant<same_coord_space_v<Slot, A>> {};

template <class... Axes>
struct axes_well_formed;
template <>
struct axes_well_formed<> : std::true_type {};
template <class First, class... Rest>
struct axes_well_formed<First, Rest...> {
  // Each axis with a parent must directly follow it; the first axis must be a root.
  template <class Prev, class A>
  static constexpr bool follows() {
    if constexpr (std::is_void_v<parent_axis_t<A>>)
      return true;
    else
      return std::is_same_v<parent_axis_t<A>, Prev>;
  }
  template <class Prev, class... As>
  struct chain;
  template <class Prev>
  struct chain<Prev> : std::true_type {};
  template <class Prev, class A, class... As>
  struct chain<Prev, A, As...> : std::bool_constant<follows<Prev, A>() && chain<A, As...>::value> {};
  static constexpr bool value = std::is_void_v<parent_axis_t<First>> && chain<First, Rest...>::value;
};

inline ir::Expr index_expr(std::int64_t v) { return ir::int_imm(v); }
template <class U>
ir::Expr index_expr(const Value<U>& v) {
  return v.expr();
}

template <class... Axes, class... Idx>
std::vector<ir::Expr> indices_for(const Idx&... idx) {
  static_assert(sizeof...(Idx) == sizeof...(Axes),
                "spindle: wrong number of indices: a buffer takes one index per axis");
  static_assert((index_fits<Axes, std::decay_t<Idx>>::value && ...),
                "spindle: a buffer is indexed by an iterator of an unrelated axis (or by a "
                "non-integer value); an iterator of axis X may index a slot over X, dense<X>, "
                "or the sparse axis that dense<X> views");
  return {index_expr(idx)...};
}

}  // namespace detail

// An element of a writable buffer (or a local): reads as a Value, assignments record
// statements in the kernel body.
template <class T>
class Ref : public Value<T> {
 public:
  Ref(ir::Buffer b, std::vector<ir::Expr> idx)
      : Value<T>(ir::load(b, idx)), buffer_(std::move(b)), indices_(std::move(idx)) {}

  const Ref& operator=(const Value<T>& v) const {
    emit(ir::store(buffer_, indices_, v.expr(), loc()));
    return *this;
  }
  const Ref& operator=(const Ref& r) const { return *this = static_cast<const Value<T>&>(r); }
  const Ref& operator+=(const Value<T>& v) const { return reduce(ir::ReduceOp::add, v); }
  const Ref& operator-=(const Value<T>& v) const { return reduce(ir::ReduceOp::add, -v); }
  const Ref& operator*=(const Value<T>& v) const { return reduce(ir::ReduceOp::mul, v); }
  // A C++ literal is converted to T as next to any Value<T> (frontend/value.hpp).
  template <Arithmetic S>
  const Ref& operator=(S s) const {
    return *this = Value<T>(detail::literal_as<T>(s));
  }
  template <Arithmetic S>
  const Ref& operator+=(S s) const {
    return *this += Value<T>(detail::literal_as<T>(s));
  }
  template <Arithmetic S>
  const Ref& operator-=(S s) const {
    return *this -= Value<T>(detail::literal_as<T>(s));
  }
  template <Arithmetic S>
  const Ref& operator*=(S s) const {
    return *this *= Value<T>(detail::literal_as<T>(s));
  }
  // Reductions with max / min: x.max_with(v) is x = max(x, v) as a reduction.
  const Ref& max_with(const Value<T>& v) const { return reduce(ir::ReduceOp::max, v); }
  const Ref& min_with(const Value<T>& v) const { return reduce(ir::ReduceOp::min, v); }
  template <Arithmetic S>
  const Ref& max_with(S s) const {
    return max_with(Value<T>(detail::literal_as<T>(s)));
  }
  template <Arithmetic S>
  const Ref& min_with(S s) const {
    return min_with(Value<T>(detail::literal_as<T>(s)));
  }

 private:
  const Ref& reduce(ir::ReduceOp op, const Value<T>& v) const {
    emit(ir::reduce(buffer_, indices_, op, v.expr(), loc()));
    return *this;
  }
  static void emit(ir::Stmt s) { detail::KernelBuilder::current().emit(std::move(s)); }
  static ir::SourceLoc loc() { return detail::KernelBuilder::current().loc(); }

  ir::Buffer buffer_;
  std::vector<ir::Expr> indices_;
};

namespace detail {
template <class T, ir::BufferRole Role, class... Axes>
class buffer_param {
  static_assert(sizeof...(Axes) > 0, "spindle: a buffer needs at least one axis");
  static_assert((is_axis_v<Axes> && ...), "spindle: buffer axes must be axis types");
  static_assert((!MergedAxis<Axes> && ...),
                "spindle: union_of / intersection_of is an iteration, not a buffer slot; a buffer over its "
                "coordinates uses dense<A> (or an assembled<P, A> output)");
  static_assert(axes_well_formed<Axes...>::value,
                "spindle: every axis with a parent must directly follow its parent in a buffer's "
                "axis list, and the first axis must have no parent (e.g. in<float, I, J> for "
                "J : sparse_variable<I>)");

 public:
  using value_type = T;
  static constexpr ir::BufferRole role = Role;
  static constexpr std::size_t rank = sizeof...(Axes);

  buffer_param(KernelBuilder& b, int arg)
      : buffer_(b.add_buffer(dtype_v<T>, {b.template axis<Axes>()...}, Role, arg)) {}
  const ir::Buffer& buffer() const { return buffer_; }

 protected:
  ir::Buffer buffer_;
};
}  // namespace detail

template <class T, class... Axes>
class in : public detail::buffer_param<T, ir::BufferRole::input, Axes...> {
 public:
  using detail::buffer_param<T, ir::BufferRole::input, Axes...>::buffer_param;
  template <class... Idx>
  InValue<T> operator()(const Idx&... idx) const {
    return InValue<T>(ir::load(this->buffer_, detail::indices_for<Axes...>(idx...)));
  }
};

template <class T, class... Axes>
class out : public detail::buffer_param<T, ir::BufferRole::output, Axes...> {
 public:
  using detail::buffer_param<T, ir::BufferRole::output, Axes...>::buffer_param;
  template <class... Idx>
  Ref<T> operator()(const Idx&... idx) const {
    return Ref<T>(this->buffer_, detail::indices_for<Axes...>(idx...));
  }
};

template <class T, class... Axes>
class inout : public detail::buffer_param<T, ir::BufferRole::inout, Axes...> {
 public:
  using detail::buffer_param<T, ir::BufferRole::inout, Axes...>::buffer_param;
  template <class... Idx>
  Ref<T> operator()(const Idx&... idx) const {
    return Ref<T>(this->buffer_, detail::indices_for<Axes...>(idx...));
  }
};

// A scalar kernel argument (e.g. a scale factor), bound at call time.
template <class T>
class param : public Value<T> {
 public:
  using value_type = T;
  param(detail::KernelBuilder& b, int arg) : Value<T>(ir::Expr(b.add_scalar(dtype_v<T>, arg))) {}
};

// A scalar temporary, private to the innermost iteration it is declared in.
template <class T>
class local : public Ref<T> {
 public:
  explicit local(const Value<T>& init, std::string name = "t")
      : Ref<T>(detail::KernelBuilder::current().new_local(dtype_v<T>, std::move(name)), {}) {
    static_cast<const Ref<T>&>(*this) = init;
  }
  template <Arithmetic S>
  explicit local(S init, std::string name = "t") : local(Value<T>(detail::literal_as<T>(init)), std::move(name)) {}
  // A copy is a new local holding the other's current value (`local<float> kept(t);`,
  // `auto kept = t;`), as a copied C++ variable is; it never aliases the other.
  local(const local& other) : local(static_cast<const Value<T>&>(other)) {}
  // Assignment stores the other's value (t = u).
  const local& operator=(const local& other) const {
    static_cast<const Ref<T>&>(*this) = static_cast<const Value<T>&>(other);
    return *this;
  }
  using Ref<T>::operator=;
};

}  // namespace spindle
