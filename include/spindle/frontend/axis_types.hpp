// Axes are types. A user declares each axis of a kernel as a tag struct deriving from one
// of the four axis kinds of seed 002 §3.1:
//
//   struct I : spindle::dense_fixed {};              // rows: 0..m-1
//   struct J : spindle::sparse_variable<I> {};       // CSR columns under I (indptr+indices)
//   struct R : spindle::dense_variable<B> {};        // ragged rows under batch B (indptr)
//   struct E : spindle::sparse_fixed<I, 4> {};       // ELL: 4 columns per row (indices)
//   struct V : spindle::sparse_root<> {};            // a sparse vector's nonzeros (indices)
//   struct BI : spindle::dense_fixed_n<4> {};        // a compile-time extent: 0..3
//   using Jd = spindle::dense<J>;                    // J's coordinate space, dense
//   struct J2 : spindle::sparse_variable<I2>,        // a second CSR's columns whose
//               spindle::coordinates_of<J> {};       //   coordinates are J's (same extent)
//
// The parent of an axis is part of its type, so buffers and iterators are checked against
// it at compile time. The name printed in the IR is the tag's unqualified name, or
// `static constexpr const char* axis_name` when the tag defines one.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "spindle/ir/axis.hpp"

namespace spindle {

inline constexpr std::int64_t dynamic = -1;

namespace detail {
struct axis_tag {};
}  // namespace detail

struct dense_fixed : detail::axis_tag {
  static constexpr ir::AxisKind axis_kind = ir::AxisKind::dense_fixed;
  using parent_axis = void;
  using index_type = std::int32_t;
  static constexpr std::int64_t fixed_nnz_per_row = dynamic;
  static constexpr std::int64_t fixed_length = dynamic;  // the extent is bound at call time
};

// A dense_fixed axis whose extent N is part of the kernel (docs/language.md §1.1): the
// generated loops have a constant trip count, so the C and CUDA compilers unroll and
// vectorise them (the rows and columns inside a BSR block, the lanes of a small feature
// axis). A call binds it like any dense axis and checks that every argument has extent N.
template <std::int64_t N>
struct dense_fixed_n : dense_fixed {
  static_assert(N >= 1, "spindle: dense_fixed_n<N> needs a compile-time extent N >= 1");
  static constexpr std::int64_t fixed_length = N;
};

template <class Parent, class Index = std::int32_t>
struct dense_variable : detail::axis_tag {
  static constexpr ir::AxisKind axis_kind = ir::AxisKind::dense_variable;
  using parent_axis = Parent;
  using index_type = Index;
  static constexpr std::int64_t fixed_nnz_per_row = dynamic;
  static constexpr std::int64_t fixed_length = dynamic;
};

template <class Parent, class Index = std::int32_t>
struct sparse_variable : detail::axis_tag {
  static constexpr ir::AxisKind axis_kind = ir::AxisKind::sparse_variable;
  using parent_axis = Parent;
  using index_type = Index;
  static constexpr std::int64_t fixed_nnz_per_row = dynamic;
  static constexpr std::int64_t fixed_length = dynamic;
};

template <class Parent, std::int64_t NnzPerRow = dynamic, class Index = std::int32_t>
struct sparse_fixed : detail::axis_tag {
  static constexpr ir::AxisKind axis_kind = ir::AxisKind::sparse_fixed;
  using parent_axis = Parent;
  using index_type = Index;
  static constexpr std::int64_t fixed_nnz_per_row = NnzPerRow;
  static constexpr std::int64_t fixed_length = dynamic;
};

// A root sparse axis: the stored coordinates of a sparse vector (docs/language.md §1.2). One
// fiber of nnz positions with no parent: SparseVector's level, and the root of a sparse
// chain (a DCSR-like row level is one of these with children under it).
//   struct J : spindle::sparse_root<> {};   // x[J]: x(j) iterates the nonzeros of x
// sparse_fixed<void, N> is the same with a compile-time nnz N.
template <class Index = std::int32_t>
struct sparse_root : sparse_fixed<void, dynamic, Index> {};

// The dense coordinate space of axis A (SparseTIR's "detached" axis): a dense_fixed axis
// whose length is A's length. Use it for the dense operand of SpMM (B[dense<J>, K]) or to
// iterate every column of a sparse row (binary search into A's indices).
template <class A>
struct dense : dense_fixed {
  using dense_of_axis = A;
  static constexpr std::int64_t fixed_length = dynamic;  // A's extent
};

// Declares that the coordinates of a sparse axis are those of axis X (docs/language.md §1):
//   struct J2 : spindle::sparse_variable<I2>, spindle::coordinates_of<J> {};
// J2's extent is J's (a call checks that the arguments agree) and its iterator indexes J's
// root slots: `c(i, j2) += b(i, j2)` into c[I, dense<J>], `x(j2)` of x[dense<J>]. A read of a
// sparse J slot by it looks the coordinate up, as any read by coordinate does.
template <class X>
struct coordinates_of {
  using coordinates_axis = X;
};

// The columns of a sparse output whose pattern the kernel builds (docs/language.md §4.6):
//   struct Jc : spindle::assembled<I, J> {};   // out<float, I, Jc> c: a CSR over I x J
// A sparse_variable axis under P over X's coordinates. A call passes a Csr of the output's
// shape; the kernel replaces its pattern with the coordinates it writes (SpGEMM, sparse add,
// conversions): a symbolic phase counts each row, a numeric phase fills it.
template <class Parent, class X, class Index = std::int32_t>
struct assembled : sparse_variable<Parent, Index>, coordinates_of<X> {
  static constexpr bool is_assembled_axis = true;
};

// Co-iteration (docs/language.md §3.1): an iterator over the coordinates stored in any
// (union_of) or in every (intersection_of) of the fibers of sparse axes over one coordinate
// space, under the current positions of their parents, visited once each in ascending order:
//   for_each<union_of<J, J2>>([&](iter<union_of<J, J2>> j) { c(i, j) = a(i, j) + b(i, j); });
// Its iterator is an iterator of J's coordinate space (as one of dense<J>): it indexes root
// slots over J's coordinates, and reads the operands by coordinate, which the merge turns
// into the position it is at (no search). It is not a buffer slot.
template <ir::MergeOp Op, class A, class... More>
struct merged_axis : dense<A> {
  static constexpr ir::MergeOp merge_op = Op;
};
template <class A, class B, class... More>
struct union_of : merged_axis<ir::MergeOp::union_, A, B, More...> {};
template <class A, class B, class... More>
struct intersection_of : merged_axis<ir::MergeOp::intersection, A, B, More...> {};

template <class A>
inline constexpr bool is_axis_v = std::is_base_of_v<detail::axis_tag, A>;

template <class A>
concept MergedAxis = requires { A::merge_op; };

template <class A>
concept AssembledAxis = requires { A::is_assembled_axis; };

template <class A>
concept AxisType = is_axis_v<A>;

namespace detail {

template <class A, class = void>
struct dense_of_impl {
  using type = void;
};
template <class A>
struct dense_of_impl<A, std::void_t<typename A::dense_of_axis>> {
  using type = typename A::dense_of_axis;
};

template <class A, class = void>
struct coordinates_of_impl {
  using type = void;
};
template <class A>
struct coordinates_of_impl<A, std::void_t<typename A::coordinates_axis>> {
  using type = typename A::coordinates_axis;
};

// The axis whose coordinates A's are: dense<X> -> X, coordinates_of<X> -> X, else void.
template <class A>
using space_link_t = std::conditional_t<std::is_void_v<typename dense_of_impl<A>::type>,
                                        typename coordinates_of_impl<A>::type, typename dense_of_impl<A>::type>;

template <class A, class D = space_link_t<A>>
struct coord_space_impl {
  using type = typename coord_space_impl<D>::type;
};
template <class A>
struct coord_space_impl<A, void> {
  using type = A;
};

}  // namespace detail

// X for dense<X> and for coordinates_of<X> (recursively), A otherwise.
template <class A>
using coord_space_t = typename detail::coord_space_impl<A>::type;

template <class A>
using parent_axis_t = typename A::parent_axis;

template <class A, class B>
inline constexpr bool same_coord_space_v = std::is_same_v<coord_space_t<A>, coord_space_t<B>>;

// Is `Anc` an ancestor of A (or A itself)?
template <class A, class Anc>
constexpr bool is_ancestor_or_self() {
  if constexpr (std::is_same_v<A, Anc>)
    return true;
  else if constexpr (std::is_void_v<parent_axis_t<A>>)
    return false;
  else
    return is_ancestor_or_self<parent_axis_t<A>, Anc>();
}

namespace detail {
template <class A, class B, class... More>
constexpr bool is_parent_chain() {
  if constexpr (!std::is_same_v<parent_axis_t<B>, A>)
    return false;
  else if constexpr (sizeof...(More) == 0)
    return true;
  else
    return is_parent_chain<B, More...>();
}
}  // namespace detail

// A fused chain of axes (docs/language.md §3.2; SparseTIR's T.fuse): fuse<I, J> iterates
// axis I and its child J as one loop over J's positions (over a CSR: one loop over the
// nonzeros, split evenly across threads whatever the row lengths), as in a nonzero-parallel
// SDDMM or a fused reduction. Each axis after the first is the child of the one before.
// It is not an axis: it is iterated as iter<fuse<I, J>> (a kernel lambda's parameter, or
// for_each<fuse<I, J>, ...>), whose iterators come out as `auto [i, j] = ij;` or ij.get<J>().
// The points and their order are those of iter<I>, iter<J>: only the loop structure changes.
template <class A, class B, class... More>
struct fuse {
  static_assert(is_axis_v<A> && is_axis_v<B> && (is_axis_v<More> && ...),
                "spindle::fuse<A, B, ...>: every argument must be an axis type");
  static_assert(detail::is_parent_chain<A, B, More...>(),
                "spindle::fuse<A, B, ...>: each axis must be the child of the one before it (e.g. fuse<I, J> with "
                "struct J : sparse_variable<I>)");
};

namespace detail {

template <class T>
constexpr std::string_view pretty_name() {
  return __PRETTY_FUNCTION__;
}

// The unqualified name of a type, from the compiler's pretty function name.
inline std::string unqualified(std::string_view full) {
  // Clang: "... [T = main()::I]"; GCC: "... [with T = main()::I; std::string_view = ...]"
  auto start = full.find("T = ");
  if (start == std::string_view::npos) return std::string(full);
  start += 4;
  int depth = 0;
  std::size_t end = start;
  for (; end < full.size(); ++end) {
    char c = full[end];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && (c == ';' || c == ']')) break;
  }
  std::string_view name = full.substr(start, end - start);
  // Drop scopes: keep what follows the last "::" at template depth 0.
  depth = 0;
  std::size_t cut = 0;
  for (std::size_t i = 0; i + 1 < name.size(); ++i) {
    char c = name[i];
    if (c == '<' || c == '(') ++depth;
    if (c == '>' || c == ')') --depth;
    if (depth == 0 && c == ':' && name[i + 1] == ':') cut = i + 2;
  }
  std::string out(name.substr(cut));
  for (char& c : out)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) c = '_';
  return out;
}

template <class A, class = void>
struct has_axis_name : std::false_type {};
template <class A>
struct has_axis_name<A, std::void_t<decltype(A::axis_name)>> : std::true_type {};

}  // namespace detail

template <class A>
std::string axis_name();

template <template <class...> class M, class A, class... More>
std::string merged_axis_name(M<A, More...>*) {
  const char* sep = std::is_base_of_v<merged_axis<ir::MergeOp::union_, A, More...>, M<A, More...>> ? "_or_" : "_and_";
  std::string s = axis_name<A>();
  ((s += sep + axis_name<More>()), ...);
  return s;
}

template <class A>
std::string axis_name() {
  if constexpr (detail::has_axis_name<A>::value) {
    return std::string(A::axis_name);
  } else if constexpr (MergedAxis<A>) {
    return merged_axis_name(static_cast<A*>(nullptr));
  } else if constexpr (!std::is_void_v<typename detail::dense_of_impl<A>::type>) {
    return axis_name<typename detail::dense_of_impl<A>::type>() + "_dense";
  } else {
    return detail::unqualified(detail::pretty_name<A>());
  }
}

}  // namespace spindle
