// From a C++ lambda to stage-I IR. The lambda's parameters declare the kernel:
// buffers (in/out/inout) and scalars (param) are the call arguments in order; iterators
// (iter<A>, or iter<fuse<A, B>> for a fused chain) make the body a sparse iteration over
// their axes in order. The body runs once,
// at definition time, recording statements; nested iterations come from for_each.
#pragma once

#include <algorithm>
#include <set>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/frontend/buffer.hpp"
#include "spindle/ir/buffer_uses.hpp"
#include "spindle/ir/functor.hpp"

namespace spindle {

namespace detail {

template <class T>
struct is_iter : std::false_type {};
template <class A>
struct is_iter<iter<A>> : std::true_type {};

template <class T>
struct is_buffer_param : std::false_type {};
template <class T, class... A>
struct is_buffer_param<in<T, A...>> : std::true_type {};
template <class T, class... A>
struct is_buffer_param<out<T, A...>> : std::true_type {};
template <class T, class... A>
struct is_buffer_param<inout<T, A...>> : std::true_type {};

template <class T>
struct is_scalar_param : std::false_type {};
template <class T>
struct is_scalar_param<param<T>> : std::true_type {};

template <class P>
inline constexpr bool is_kernel_param_v =
    is_iter<P>::value || is_buffer_param<P>::value || is_scalar_param<P>::value;

template <class F>
struct lambda_signature : lambda_signature<decltype(&std::decay_t<F>::operator())> {};
template <class C, class R, class... P>
struct lambda_signature<R (C::*)(P...) const> {
  using params = std::tuple<std::decay_t<P>...>;
};
template <class C, class R, class... P>
struct lambda_signature<R (C::*)(P...)> {
  using params = std::tuple<std::decay_t<P>...>;
};

inline ir::SourceLoc to_loc(const std::source_location& l) { return {l.file_name(), l.line()}; }

// The axes, iterators and fused flags of an iteration, in order (`fused[k]`: axis k and
// k + 1 run as one loop, as SparseIterationNode::fused).
struct IterList {
  std::vector<ir::Axis> axes;
  std::vector<ir::Var> vars;
  std::vector<bool> fused;
};

// Makes the iterator object of an iter<A> or iter<fuse<A, B, ...>> parameter, appending its
// axes and iterators to `out`.
template <class P>
struct IterMaker;
template <class A>
struct IterMaker<iter<A>> {
  static iter<A> make(KernelBuilder& b, IterList& out) {
    ir::Axis axis = b.template axis<A>();
    ir::Var v = b.iterator_var(axis);
    out.axes.push_back(std::move(axis));
    out.vars.push_back(v);
    out.fused.push_back(false);
    return iter<A>(std::move(v));
  }
};
template <class A, class B, class... More>
struct IterMaker<iter<fuse<A, B, More...>>> {
  static iter<fuse<A, B, More...>> make(KernelBuilder& b, IterList& out) {
    const std::size_t first = out.axes.size();
    // Braces: the axes' iterators are made left to right.
    iter<fuse<A, B, More...>> it{IterMaker<iter<A>>::make(b, out), IterMaker<iter<B>>::make(b, out),
                                 IterMaker<iter<More>>::make(b, out)...};
    for (std::size_t k = first; k + 1 < out.axes.size(); ++k) out.fused[k] = true;
    return it;
  }
};

// Builds the lambda's parameter objects in order; `Arg` counts call arguments so far.
template <int Arg, class... Ps>
struct ParamMaker;
template <int Arg>
struct ParamMaker<Arg> {
  static std::tuple<> make(KernelBuilder&, IterList&) { return {}; }
};
template <int Arg, class P, class... Ps>
struct ParamMaker<Arg, P, Ps...> {
  static auto make(KernelBuilder& b, IterList& iters) {
    static_assert(is_kernel_param_v<P>,
                  "spindle: a kernel lambda's parameters must be spindle::in/out/inout buffers, "
                  "spindle::param scalars or spindle::iter iterators");
    if constexpr (is_iter<P>::value) {
      P it = IterMaker<P>::make(b, iters);
      return std::tuple_cat(std::tuple<P>(std::move(it)), ParamMaker<Arg, Ps...>::make(b, iters));
    } else {
      P p(b, Arg);
      return std::tuple_cat(std::tuple<P>(std::move(p)), ParamMaker<Arg + 1, Ps...>::make(b, iters));
    }
  }
};

template <class Tuple>
struct ParamMakerFor;
template <class... Ps>
struct ParamMakerFor<std::tuple<Ps...>> : ParamMaker<0, Ps...> {};

}  // namespace detail

// Names for a kernel's call arguments, in order: they replace a, b, c, ... in errors,
// explain() and the generated code.
//   spindle::kernel("spmm", spindle::names{"A", "X", "Y"}, [](...) { ... });
struct names {
  std::vector<std::string> list;
  names(std::initializer_list<std::string> l) : list(l) {}
  explicit names(std::vector<std::string> l) : list(std::move(l)) {}
};

namespace detail {
template <class Tuple>
struct call_arg_count;
template <class... Ps>
struct call_arg_count<std::tuple<Ps...>>
    : std::integral_constant<std::size_t, ((is_iter<Ps>::value ? 0 : 1) + ... + 0)> {};
}  // namespace detail

// Records the kernel body of `f` and returns its stage-I function.
template <class F>
ir::Function define_kernel(std::string name, F&& f, std::source_location loc = std::source_location::current(),
                           std::vector<std::string> arg_names = {}) {
  using Params = typename detail::lambda_signature<F>::params;
  detail::KernelBuilder b(std::move(name), detail::to_loc(loc));
  b.set_names(std::move(arg_names), detail::call_arg_count<Params>::value);
  detail::BuilderScope scope(b);
  detail::IterList iters;
  auto params = detail::ParamMakerFor<Params>::make(b, iters);
  std::string iteration = b.fresh_iteration_name();
  auto frame = b.record([&] { std::apply(f, params); });
  ir::Stmt body;
  if (!iters.axes.empty()) {
    body = b.make_iteration(std::move(iteration), std::move(iters.axes), std::move(iters.vars), std::move(frame),
                            b.loc(), std::move(iters.fused));
  } else {
    body = ir::seq(std::move(frame.stmts), b.loc());
    if (!frame.allocs.empty()) body = ir::block(b.kernel_name() + "_locals", std::move(frame.allocs), body, b.loc());
  }
  return b.finish(body);
}

// A nested sparse iteration over Axes inside a kernel body:
//   spindle::for_each<J>([&](spindle::iter<J> j) { ... });
// An element of Axes may be a fused chain: for_each<fuse<J, L>>([&](iter<fuse<J, L>> jl) { ... }).
template <class... Axes, class F>
void for_each(F&& f, std::source_location loc = std::source_location::current()) {
  static_assert(sizeof...(Axes) > 0, "spindle::for_each needs at least one axis");
  auto& b = detail::KernelBuilder::current();
  detail::IterList iters;
  // Braces: the iterators are made left to right.
  std::tuple<iter<Axes>...> its{detail::IterMaker<iter<Axes>>::make(b, iters)...};
  std::string name = b.fresh_iteration_name();
  auto frame = b.record([&] { std::apply(f, its); });
  b.emit(b.make_iteration(std::move(name), std::move(iters.axes), std::move(iters.vars), std::move(frame),
                          detail::to_loc(loc), std::move(iters.fused)));
}


namespace detail {
inline bool contains_iteration(const ir::Stmt& s) {
  struct Find : ir::IRVisitor {
    bool found = false;
    void visit_SparseIteration(const ir::SparseIterationNode*) override { found = true; }
  } f;
  f.visit(s);
  return f.found;
}

// `if (cond) s` with the condition pushed into every iteration s contains (docs/language.md
// §4.7): the statements around and inside the iterations are guarded one run at a time, the
// iterations themselves always run, so `when(c, [&] { t = 0; for_each<J>(...); y(i) = t; })`
// becomes `if (c) t = 0; for_each<J>(if (c) ...); if (c) y(i) = t`. The same statements run
// in the same order as long as nothing they write changes what `cond` reads (checked by the
// caller).
inline ir::Stmt guard_pushed_into_iterations(const ir::Expr& cond, const ir::Stmt& s) {
  if (!s.defined()) return s;
  if (!contains_iteration(s)) return ir::if_then_else(cond, s, ir::Stmt(), s.loc());
  if (auto* q = s.as<ir::SeqNode>()) {
    std::vector<ir::Stmt> out, run;  // run: consecutive statements without iterations, one guard
    auto flush = [&] {
      if (!run.empty()) out.push_back(ir::if_then_else(cond, ir::seq(std::move(run), s.loc()), ir::Stmt(), s.loc()));
      run.clear();
    };
    for (auto& x : q->stmts) {
      if (contains_iteration(x)) {
        flush();
        out.push_back(guard_pushed_into_iterations(cond, x));
      } else {
        run.push_back(x);
      }
    }
    flush();
    return ir::seq(std::move(out), s.loc());
  }
  if (auto* b = s.as<ir::BlockNode>()) return ir::block(b->name, b->allocs, guard_pushed_into_iterations(cond, b->body), b->loc);
  if (auto* it = s.as<ir::SparseIterationNode>()) return it->with_body(it->init, guard_pushed_into_iterations(cond, it->body));
  // An iteration under a when recorded earlier was pushed down already; nothing else holds one.
  SPINDLE_CHECK(false, InternalError, "guard_pushed_into_iterations: an iteration inside a ", static_cast<int>(s.kind()),
                " statement");
  return s;
}

// The statements `f` records, as one statement: its locals (local<T> declared inside) in a
// block of their own, so each run of the branch gets fresh ones.
template <class F>
ir::Stmt record_branch(KernelBuilder& b, F&& f, const ir::SourceLoc& loc) {
  auto frame = b.record(std::forward<F>(f));
  ir::Stmt body = ir::seq(std::move(frame.stmts), loc);
  if (!frame.allocs.empty()) body = ir::block(b.fresh("when_locals"), std::move(frame.allocs), body, loc);
  return body;
}

// `when(cond, then, otherwise)` as statements: one IfThenElse, or, when a branch holds a
// for_each, the condition pushed into its iterations (the else branch's under !cond) —
// allowed only when the condition reads nothing either branch writes, so that it holds the
// same value at every point it is now tested.
inline void emit_when(KernelBuilder& b, const ir::Expr& cond, ir::Stmt then_case, ir::Stmt else_case,
                      const ir::SourceLoc& loc) {
  if (!contains_iteration(then_case) && !(else_case.defined() && contains_iteration(else_case))) {
    b.emit(ir::if_then_else(cond, std::move(then_case), std::move(else_case), loc));
    return;
  }
  std::set<const ir::BufferNode*> written = ir::written_buffers(then_case);
  for (auto* w : ir::written_buffers(else_case)) written.insert(w);
  for (const ir::BufferNode* r : ir::read_buffers(cond))
    SPINDLE_CHECK(!written.count(r), UserError, "kernel '",
                  b.kernel_name(), "': a for_each inside spindle::when (", loc.file, ":", loc.line,
                  ") whose condition reads '", r->name, "', which the when writes; the condition is tested in "
                  "each iteration of the for_each, so it must read nothing the branch changes; hint: compute "
                  "the condition into a local before the when and test that");
  b.emit(guard_pushed_into_iterations(cond, then_case));
  if (else_case.defined()) b.emit(guard_pushed_into_iterations(ir::unary(ir::UnOp::lnot, cond), else_case));
}
}  // namespace detail

// Runs the statements of `then` only where `cond` holds (docs/language.md §4.7), and those of
// `otherwise` (optional) where it does not:
//   spindle::when(a(i, j) != 0, [&] { c(i, j) = a(i, j); });        // dense -> CSR
//   spindle::when(x(i) > 0, [&] { y(i) = x(i); }, [&] { y(i) = 0.01f * x(i); });
// Writes, reductions, locals and for_each may be conditional; a branch with a for_each needs a
// condition that reads nothing the branch writes (it is tested inside the iterations).
template <class F>
  requires std::is_invocable_v<F&>
void when(const Value<bool>& cond, F&& then, std::source_location loc = std::source_location::current()) {
  auto& b = detail::KernelBuilder::current();
  const ir::SourceLoc l = detail::to_loc(loc);
  ir::Stmt t = detail::record_branch(b, std::forward<F>(then), l);
  detail::emit_when(b, cond.expr(), std::move(t), ir::Stmt(), l);
}

template <class F, class G>
  requires(std::is_invocable_v<F&> && std::is_invocable_v<G&>)
void when(const Value<bool>& cond, F&& then, G&& otherwise,
          std::source_location loc = std::source_location::current()) {
  auto& b = detail::KernelBuilder::current();
  const ir::SourceLoc l = detail::to_loc(loc);
  ir::Stmt t = detail::record_branch(b, std::forward<F>(then), l);
  ir::Stmt e = detail::record_branch(b, std::forward<G>(otherwise), l);
  detail::emit_when(b, cond.expr(), std::move(t), std::move(e), l);
}

}  // namespace spindle
