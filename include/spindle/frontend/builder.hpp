// Records a kernel body into stage-I IR. While a kernel's lambda runs, a KernelBuilder is
// the current recording context of the thread (installed and removed by a scope guard);
// buffer assignments, locals and nested iterations append statements to its innermost
// frame. Axis tag types are turned into ir::Axis objects here, parents first.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "spindle/frontend/axis_types.hpp"
#include "spindle/frontend/iteration_inference_decl.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/ops.hpp"

namespace spindle::detail {

class KernelBuilder;
inline thread_local KernelBuilder* current_builder = nullptr;

class KernelBuilder {
 public:
  KernelBuilder(std::string name, ir::SourceLoc loc) : loc_(loc) {
    func_.name = std::move(name);
    func_.loc = loc;
    func_.stage = ir::Stage::coordinate;
  }

  SPINDLE_DECL ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  static KernelBuilder& current() {
    if (!current_builder)
      throw UserError(
          "a spindle buffer or iterator was used outside a kernel body; hint: write buffer "
          "accesses inside the lambda given to spindle::kernel");
    return *current_builder;
  }

  const std::string& kernel_name() const { return func_.name; }
  ir::SourceLoc loc() const { return loc_; }

  // --- axes --------------------------------------------------------------------------
  template <class A>
  ir::Axis axis() {
    static_assert(is_axis_v<A>, "spindle: not an axis type; derive the tag from spindle::dense_fixed, "
                                "dense_variable<P>, sparse_variable<P> or sparse_fixed<P>");
    auto key = std::type_index(typeid(A));
    if (auto it = axes_.find(key); it != axes_.end()) return it->second;
    using D = typename detail::dense_of_impl<A>::type;
    if constexpr (MergedAxis<A>) {
      ir::Axis a = merged_axis(axis_name<A>(), A::merge_op, operand_axes(static_cast<A*>(nullptr)));
      axes_.emplace(key, a);
      return a;
    } else if constexpr (!std::is_void_v<D>) {
      ir::Axis base = axis<D>();
      ir::Axis a = new_dense_view(axis_name<A>(), base);
      axes_.emplace(key, a);
      return a;
    } else {
      using P = parent_axis_t<A>;
      static_assert(!std::is_void_v<P> || A::axis_kind == ir::AxisKind::dense_fixed ||
                        A::axis_kind == ir::AxisKind::sparse_fixed,
                    "spindle: a dense_variable or sparse_variable axis needs a parent axis (its fibers hang off "
                    "the parent's positions); for a sparse vector, use spindle::sparse_root<> (one fiber, no "
                    "parent)");
      ir::Axis parent;
      if constexpr (!std::is_void_v<P>) {
        static_assert(A::axis_kind != ir::AxisKind::dense_fixed, "spindle: dense_fixed axes have no parent");
        parent = axis<P>();
      }
      ir::Axis coordinates;
      using C = typename detail::coordinates_of_impl<A>::type;
      if constexpr (!std::is_void_v<C>) {
        static_assert(A::axis_kind == ir::AxisKind::sparse_variable || A::axis_kind == ir::AxisKind::sparse_fixed,
                      "spindle: coordinates_of<X> declares the coordinates of a sparse axis (sparse_variable or "
                      "sparse_fixed); a dense axis over X's coordinates is dense<X>");
        static_assert(is_axis_v<C>, "spindle: coordinates_of<X> needs an axis type X");
        coordinates = axis<C>();
      }
      ir::Axis a = new_axis(axis_name<A>(), A::axis_kind, parent, dtype_v<typename A::index_type>, A::fixed_length,
                            A::fixed_nnz_per_row, coordinates);
      if constexpr (AssembledAxis<A>) {
        static_assert(std::is_base_of_v<dense_fixed, P>,
                      "spindle: assembled<P, X>: P must be a root dense_fixed axis or dense<A> (the rows of the "
                      "assembled output)");
        const_cast<ir::AxisNode&>(*a).assembled = true;  // built just above, not shared yet
      }
      axes_.emplace(key, a);
      return a;
    }
  }

  // An axis built at run time (what axis<A>() builds for a tag type; the einsum front end
  // calls it directly): a fresh name from `base`, the kind, its parent (null for a root
  // dense_fixed axis), and compile-time extents or `dynamic` for extents bound at call time.
  // `coordinates` (coordinates_of<X>): the axis takes X's coordinate space and extent.
  ir::Axis new_axis(const std::string& base, ir::AxisKind kind, const ir::Axis& parent, DType index_dtype,
                    std::int64_t fixed_length = dynamic, std::int64_t fixed_nnz_per_row = dynamic,
                    const ir::Axis& coordinates = nullptr) {
    auto node = std::make_shared<ir::AxisNode>();
    node->name = unique_axis_name(base);
    node->kind = kind;
    node->parent = parent;
    node->index_dtype = index_dtype;
    node->coordinates_of = coordinates;
    ir::Var len;
    if (coordinates)
      node->length = coordinates->length;
    else if (fixed_length != dynamic)
      node->length = ir::int_imm(fixed_length, DType::i64);
    else
      node->length = len = ir::Var(node->name + "_len", DType::i64);
    ir::Var nnz, npr;
    if (node->is_variable()) node->nnz = nnz = ir::Var(node->name + "_nnz", DType::i64);
    if (node->kind == ir::AxisKind::sparse_fixed) {
      if (fixed_nnz_per_row != dynamic)
        node->nnz_per_row = ir::int_imm(fixed_nnz_per_row);
      else
        node->nnz_per_row = npr = ir::Var(node->name + "_nnz_per_row", DType::i64);
    }
    ir::Axis a = node;
    axes_in_order_.push_back(a);
    if (len.defined()) func_.scalars.push_back({len, {ir::ParamOrigin::length, -1, a}});
    if (nnz.defined()) func_.scalars.push_back({nnz, {ir::ParamOrigin::nnz, -1, a}});
    if (npr.defined()) func_.scalars.push_back({npr, {ir::ParamOrigin::nnz_per_row, -1, a}});
    return a;
  }

  // dense<X> built at run time: a root dense_fixed axis over X's coordinate space.
  ir::Axis new_dense_view(const std::string& base, const ir::Axis& of) {
    auto node = std::make_shared<ir::AxisNode>();
    node->name = unique_axis_name(base);
    node->kind = ir::AxisKind::dense_fixed;
    node->length = of->length;
    node->dense_of = of;
    ir::Axis a = node;
    axes_in_order_.push_back(a);
    return a;
  }

  // union_of / intersection_of built at run time (docs/language.md §3.1): a root dense_fixed
  // axis over the operands' coordinate space that records the merge and its operands.
  ir::Axis merged_axis(const std::string& base, ir::MergeOp op, std::vector<ir::Axis> operands) {
    SPINDLE_CHECK(operands.size() >= 2, UserError, "kernel '", func_.name, "': ", ir::merge_op_name(op),
                  " needs at least two sparse axes");
    for (auto& o : operands) {
      SPINDLE_CHECK(o->is_sparse() && !o->assembled, UserError, "kernel '", func_.name, "': ", ir::merge_op_name(op),
                    " of axis ", o->name, ", which is not a sparse axis of an operand; hint: co-iteration merges "
                    "the stored coordinates of sparse_variable / sparse_fixed / sparse_root axes");
      SPINDLE_CHECK(ir::coordinate_space(o) == ir::coordinate_space(operands[0]), UserError, "kernel '", func_.name,
                    "': ", ir::merge_op_name(op), " of axes ", operands[0]->name, " and ", o->name,
                    ", which range over different coordinate spaces; hint: declare one coordinates_of the other");
      for (auto& p : operands)
        SPINDLE_CHECK(&p == &o || p != o, UserError, "kernel '", func_.name, "': ", ir::merge_op_name(op),
                      " lists axis ", o->name, " twice");
    }
    ir::Axis a = new_dense_view(base, operands[0]);
    auto& node = const_cast<ir::AxisNode&>(*a);  // built just above, not shared yet
    node.merge = op;
    node.merge_operands = std::move(operands);
    return a;
  }

  // --- parameters --------------------------------------------------------------------
  SPINDLE_DECL ir::Buffer add_buffer(DType t, std::vector<ir::Axis> axes, ir::BufferRole role, int arg);

  ir::Var add_scalar(DType t, int arg) {
    ir::Var v(fresh(param_name(arg)), t);
    user_scalars_.push_back({v, {ir::ParamOrigin::scalar, arg, nullptr}});
    return v;
  }

  // The user's names for the call arguments (spindle::names), checked: one per call
  // argument, identifiers, unique. Names that C or CUDA reserve (`float`, `threadIdx`) are
  // fine: the code generators rename them (codegen/identifiers.hpp).
  SPINDLE_DECL void set_names(std::vector<std::string> names, std::size_t call_args);

  // Names of the lambda's parameters: the names given with spindle::names, else a, b, c,
  // ... in declaration order (C++ cannot see the lambda's own parameter names).
  std::string param_name(int arg) const {
    if (!names_given_.empty()) return names_given_.at(static_cast<std::size_t>(arg));
    return letter_name(arg);
  }
  static std::string letter_name(int arg) {
    std::string s;
    int k = arg;
    do {
      s.insert(s.begin(), static_cast<char>('a' + k % 26));
      k = k / 26 - 1;
    } while (k >= 0);
    return s;
  }

  SPINDLE_DECL ir::Var iterator_var(const ir::Axis& a);

  // --- recording ---------------------------------------------------------------------
  void emit(ir::Stmt s) { frames_.back().stmts.push_back(std::move(s)); }

  SPINDLE_DECL ir::Buffer new_local(DType t, std::string name);

  struct Frame {
    std::vector<ir::Stmt> stmts;
    std::vector<ir::Buffer> allocs;
  };

  // Runs f with a fresh frame and returns what it recorded.
  template <class F>
  Frame record(F&& f) {
    frames_.emplace_back();
    try {
      f();
    } catch (...) {
      frames_.pop_back();
      throw;
    }
    Frame fr = std::move(frames_.back());
    frames_.pop_back();
    return fr;
  }

  bool recording() const { return !frames_.empty(); }

  // A sparse iteration over `axes` with the recorded body; its iterator kinds and init
  // are inferred when the kernel is finished (infer_iteration_kinds), which also checks the
  // fused chains (`fused`, from iter<fuse<...>>: SparseIterationNode::fused).
  SPINDLE_DECL ir::Stmt make_iteration(std::string name, std::vector<ir::Axis> axes, std::vector<ir::Var> vars,
                                       Frame body, ir::SourceLoc loc, std::vector<bool> fused = {});

  // A name not given out before in this kernel: base, else base1, base2, ... (skipping
  // names that are taken, so an axis "i1" and the second iterator of "i" never share one).
  std::string fresh(const std::string& base) {
    for (;;) {
      int k = names_[base]++;
      if (k == 0) return base;
      std::string candidate = base + std::to_string(k);
      if (names_.emplace(candidate, 1).second) return candidate;
    }
  }

  std::string fresh_iteration_name() { return fresh(func_.name); }

  SPINDLE_DECL ir::Function finish(ir::Stmt body);

 private:
  SPINDLE_DECL std::string unique_axis_name(const std::string& base);

  template <template <class...> class M, class... Ops>
  std::vector<ir::Axis> operand_axes(M<Ops...>*) {
    static_assert(((is_axis_v<Ops> && Ops::axis_kind != ir::AxisKind::dense_fixed &&
                    Ops::axis_kind != ir::AxisKind::dense_variable) && ...),
                  "spindle: union_of / intersection_of merges sparse axes (sparse_variable, sparse_fixed, "
                  "sparse_root)");
    static_assert((same_coord_space_v<Ops, typename detail::dense_of_impl<M<Ops...>>::type> && ...),
                  "spindle: union_of / intersection_of needs axes over one coordinate space; declare the "
                  "others coordinates_of<the first>");
    return {axis<Ops>()...};
  }

  SPINDLE_DECL void check_buffer_axes(const ir::BufferNode& b) const;

  ir::Function func_;
  ir::SourceLoc loc_;
  std::unordered_map<std::type_index, ir::Axis> axes_;
  std::vector<ir::Axis> axes_in_order_;
  std::set<std::string> axis_names_;
  std::unordered_map<std::string, int> names_;
  std::vector<ir::FuncScalar> user_scalars_;
  std::vector<Frame> frames_;
  std::vector<std::string> names_given_;
};

// Makes `b` the thread's current builder for the lifetime of the guard.
class BuilderScope {
 public:
  explicit BuilderScope(KernelBuilder& b) : prev_(current_builder) { current_builder = &b; }
  ~BuilderScope() { current_builder = prev_; }
  BuilderScope(const BuilderScope&) = delete;
  BuilderScope& operator=(const BuilderScope&) = delete;

 private:
  KernelBuilder* prev_;
};

}  // namespace spindle::detail

#ifndef SPINDLE_SEPARATE_COMPILATION
#include "spindle/frontend/builder_impl.hpp"
#include "spindle/frontend/iteration_inference.hpp"
#endif
