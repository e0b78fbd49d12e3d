// A reference interpreter of stage-I IR: what a kernel computes according to
// docs/language.md, evaluated directly in coordinate space, one statement at a time. It
// shares no code with the lowering passes, the schedules or the code generators (it reads
// only the IR node definitions and the StorageView of the call arguments), so a
// disagreement between it and a compiled kernel is a bug in one of them.
//
//   spindle::test::Interpreter interp(stage1_before_inference, args);   // args: host views
//   interp.run();                // writes the out/inout arguments' values in place
//
// Semantics implemented (docs/language.md):
//  * an iteration visits the product of its axes' coordinates in order; a child axis visits
//    the fiber under the position of its parent's (innermost) iterator: dense_fixed 0..len-1,
//    dense_variable 0..fiber size-1, sparse axes the stored coordinates in position order;
//  * an iterator's value is its coordinate; a buffer access translates coordinates to the
//    buffer's own storage, chain by chain (a root axis starts a chain; values are row-major
//    over chains); a coordinate absent from a sparse fiber or out of a dense extent reads
//    the buffer's default value (0); an index that is the iterator of the buffer's own axis
//    names the element at the iterator's position (an unsorted fiber may repeat a
//    coordinate: each stored element is visited, read and written once);
//  * every `out` buffer starts as the identity of the reduction into it (0 for += and for
//    buffers that are only assigned); `inout` buffers start with the caller's values;
//  * the call-time rules of write indices (§4.1, §7) are checked before anything runs, for
//    every write of the kernel, reached or not (under a `when` that never holds): a computed
//    index's interval over its iterators' extents, and every stored value of an indirect
//    index's buffer against the extent it indexes ("call error");
//  * locals are scalars with sequential semantics, private to the block that declares them;
//  * arithmetic is done in the expression's dtype (f32 rounded to float after every
//    operation, integers in 64 bits and wrapped to 32 for i32), as C does.
// Iteration `init` fields are ignored: the interpreter gets the program as the user wrote
// it. A write to a coordinate that does not exist raises InterpreterError (the language
// rejects such programs at definition time, so reaching it means a checker bug).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/runtime/call_arg.hpp"

namespace spindle::test {

struct InterpreterError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Interpreter {
 public:
  // `max_steps`: steps before InterpreterError "step budget exceeded". A step is a statement
  // executed or an iteration point visited (at every level of a nest): a nest whose body
  // runs no statement (an effect-free kernel) still costs one step per point, so the budget
  // bounds the interpreter's running time whatever the program.
  Interpreter(const ir::Function& f, std::vector<runtime::CallArg> args, long long max_steps = kMaxSteps)
      : f_(f), args_(std::move(args)), max_steps_(max_steps) {
    for (auto& fb : f_.buffers)
      if (fb.origin.kind == ir::ParamOrigin::values && !ir::is_assembled(*fb.buffer)) bind_buffer(fb);
    for (auto& fb : f_.buffers)
      if (ir::is_assembled(*fb.buffer)) {
        assembled_[fb.buffer.get()];
        bind_assembled_shape(fb);
      }
    for (auto& s : f_.scalars)
      if (!(s.origin.axis && s.origin.axis->assembled)) bind_scalar(s);
  }

  void run() {
    check_computed_writes(f_.body, {});
    check_indirect_writes(f_.body);
    for (auto& fb : f_.buffers)
      if (fb.buffer->role == ir::BufferRole::output && !ir::is_assembled(*fb.buffer)) prefill(fb);
    exec(f_.body);
  }

  // An assembled output (docs/language.md §4.6): the elements the kernel wrote, in row-major
  // coordinate order. Each element starts at the identity of the reduction into it when it is
  // first written; the pattern is exactly the coordinates written.
  struct AssembledEntry {
    std::int64_t row, col;
    double f;
    std::int64_t i;
    double error_bound;  // as error_bound() for other buffers
  };
  std::vector<AssembledEntry> assembled(const std::string& buffer) const {
    for (auto& [b, elems] : assembled_) {
      if (b->name != buffer) continue;
      std::vector<AssembledEntry> out;
      for (auto& [rc, e] : elems) out.push_back({rc.first, rc.second, e.first.f, e.first.i, bound_of(b->dtype, e.second)});
      return out;
    }
    throw InterpreterError("no assembled output named '" + buffer + "'");
  }

  long long statements_executed() const { return steps_ - points_; }
  long long iteration_points() const { return points_; }

  // Whether some float operation had a result that is not exactly representable as a small
  // integer (beyond 2^24 for f32, 2^53 for f64, or fractional): then another association
  // or a fused multiply-add may round differently, and results are not expected bit-exact.
  bool float_rounded() const { return rounded_; }

  // How far another order of the float reductions into element `pos` of buffer `b` (and a
  // fused multiply-add in a term) may move the result from this run's, to first order:
  // 2 (n + 2) eps (|initial| + sum |terms|) for n additions, plus 2 (m + 2) eps |result|
  // for m multiplications, where eps is the unit roundoff of b's type. 0 for elements no
  // float reduction wrote. The fuzzers compare float results with this bound (and a
  // relative floor): a sum of a million terms may legitimately differ in its third digit.
  // The buffer of the interpreted function named `name` (nullptr if none): another IR of the
  // same kernel (the model's, the front end's) has other buffer nodes of the same names.
  const ir::BufferNode* buffer_named(const std::string& name) const {
    for (auto& fb : f_.buffers)
      if (fb.buffer->name == name) return fb.buffer.get();
    return nullptr;
  }
  double error_bound(const ir::BufferNode* b, std::int64_t pos) const {
    auto it = error_.find(b);
    if (it == error_.end() || pos < 0 || pos >= static_cast<std::int64_t>(it->second.size())) return 0;
    return bound_of(b->dtype, it->second[static_cast<std::size_t>(pos)]);
  }

 private:
  struct RV {  // a runtime value
    DType t = DType::i64;
    double f = 0;
    std::int64_t i = 0;
    bool unset = false;  // a local not written yet
  };
  struct AxisData {
    LevelView level;
    std::vector<std::int64_t> indptr, indices;
    bool root = true;  // the level starts a chain (its axis has no parent)
  };
  struct Binding {
    const ir::VarNode* var;
    const ir::AxisNode* axis;
    std::int64_t coord, pos;
  };
  struct BufferData {
    StorageView view;
    std::vector<AxisData> levels;
  };

  // --- binding -----------------------------------------------------------------------
  static std::vector<std::int64_t> read_index_array(const void* p, std::int64_t n, DType t) {
    std::vector<std::int64_t> out(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
    for (std::int64_t k = 0; k < n; ++k)
      out[static_cast<std::size_t>(k)] = t == DType::i64 ? static_cast<const std::int64_t*>(p)[k]
                                                          : static_cast<const std::int32_t*>(p)[k];
    return out;
  }

  std::int64_t positions_before(const std::vector<AxisData>& levels, std::size_t s) const {
    // Number of positions of the parent level of level s (1 for a root level: a dense root,
    // or a sparse root with its one fiber).
    if (s == 0 || levels[s].root) return 1;
    const AxisData& p = levels[s - 1];
    return level_positions(levels, s - 1, p);
  }
  std::int64_t level_positions(const std::vector<AxisData>& levels, std::size_t s, const AxisData& a) const {
    switch (a.level.kind) {
      case LevelKind::dense_fixed: return a.level.length;
      case LevelKind::sparse_fixed: return positions_before(levels, s) * a.level.nnz_per_row;
      default: return a.indptr.empty() ? 0 : a.indptr.back();
    }
  }

  void bind_buffer(const ir::FuncBuffer& fb) {
    const auto& arg = args_.at(static_cast<std::size_t>(fb.origin.arg));
    BufferData d;
    d.view = arg.view;
    for (std::size_t s = 0; s < fb.buffer->axes.size(); ++s) {
      const ir::Axis& a = fb.buffer->axes[s];
      AxisData ad;
      ad.level = arg.view.levels[s];
      if (auto* n = ir::coordinate_space(a)->length.as<ir::IntImmNode>(); n && ad.level.length != n->value)
        throw InterpreterError("axis " + a->name + " has the compile-time extent " + std::to_string(n->value) +
                               " but the argument has extent " + std::to_string(ad.level.length));
      bool root = !a->parent;
      ad.root = root;
      std::int64_t parents = root ? 1 : level_positions(d.levels, s - 1, d.levels[s - 1]);
      if (ad.level.kind == LevelKind::dense_variable || ad.level.kind == LevelKind::sparse_variable)
        ad.indptr = read_index_array(ad.level.indptr, parents + 1, ad.level.index_dtype);
      std::int64_t here = 0;
      if (ad.level.kind == LevelKind::sparse_variable) here = ad.indptr.empty() ? 0 : ad.indptr.back();
      if (ad.level.kind == LevelKind::sparse_fixed) here = parents * ad.level.nnz_per_row;
      if (ad.level.kind == LevelKind::sparse_fixed || ad.level.kind == LevelKind::sparse_variable)
        ad.indices = read_index_array(ad.level.indices, here, ad.level.index_dtype);
      // Every level over one coordinate space (X, dense<X>, coordinates_of<X>) has one extent
      // (docs/language.md §1, §7: the call is an error otherwise).
      const ir::AxisNode* space = ir::coordinate_space(a);
      if (auto [it, fresh] = space_length_.emplace(space, ad.level.length); !fresh && it->second != ad.level.length)
        throw InterpreterError("axis " + a->name + " has extent " + std::to_string(ad.level.length) +
                               " but its coordinate space " + space->name + " has extent " +
                               std::to_string(it->second) + " in another argument");
      d.levels.push_back(ad);
      if (!axes_.count(a.get())) axes_[a.get()] = ad;
    }
    buffers_[fb.buffer.get()] = std::move(d);
  }

  // The output argument of an assembled c[P, C] (C = assembled<P, X>) is a CSR of the output's
  // shape (docs/language.md §4.6): its rows are P's extent and its columns X's, so P (and X's
  // coordinate space) may be bound by it alone, as the compiled kernel's binder does. A shape
  // that disagrees with the other arguments is the call's error.
  void bind_assembled_shape(const ir::FuncBuffer& fb) {
    if (fb.origin.kind != ir::ParamOrigin::values || fb.origin.arg < 0 ||
        static_cast<std::size_t>(fb.origin.arg) >= args_.size() || fb.buffer->axes.size() != 2)
      return;
    const StorageView& v = args_[static_cast<std::size_t>(fb.origin.arg)].view;
    if (v.levels.size() != 2) return;
    const ir::Axis& rows = fb.buffer->axes[0];
    const std::pair<const ir::AxisNode*, std::int64_t> shape[2] = {
        {ir::coordinate_space(rows), v.levels[0].length}, {ir::coordinate_space(fb.buffer->axes[1]), v.levels[1].length}};
    for (auto& [space, length] : shape)
      if (auto [it, fresh] = space_length_.emplace(space, length); !fresh && it->second != length)
        throw InterpreterError("call error: the assembled output '" + fb.buffer->name + "' has extent " +
                               std::to_string(length) + " over " + space->name + ", which has extent " +
                               std::to_string(it->second) + " in another argument");
    if (!axes_.count(rows.get())) {
      AxisData ad;
      ad.level.kind = LevelKind::dense_fixed;
      ad.level.length = v.levels[0].length;
      axes_[rows.get()] = ad;
    }
  }

  void bind_scalar(const ir::FuncScalar& s) {
    RV v;
    v.t = s.var.dtype();
    switch (s.origin.kind) {
      case ir::ParamOrigin::scalar: {
        const auto& a = args_.at(static_cast<std::size_t>(s.origin.arg));
        if (is_float(v.t)) v.f = round_to(v.t, a.scalar);
        else v.i = a.scalar_dtype == DType::f64 ? static_cast<std::int64_t>(a.scalar) : a.scalar_int;
        break;
      }
      case ir::ParamOrigin::length: v.i = length_of(s.origin.axis.get()); break;
      case ir::ParamOrigin::nnz: {  // 0 for an axis no argument stores (then unused)
        auto it = axes_.find(s.origin.axis.get());
        v.i = it == axes_.end() || it->second.indptr.empty() ? 0 : it->second.indptr.back();
        break;
      }
      case ir::ParamOrigin::nnz_per_row: {
        auto it = axes_.find(s.origin.axis.get());
        v.i = it == axes_.end() ? 0 : it->second.level.nnz_per_row;
        break;
      }
      default: break;
    }
    vars_[s.var.node()] = v;
  }

  // The level data of axis a; the length of an axis that only a dense view of it (or the
  // axis a view is of) binds comes from there.
  const AxisData& axis(const ir::AxisNode* a) {
    auto it = axes_.find(a);
    if (it != axes_.end()) return it->second;
    // dense<X>: X's extent, from any level over X's coordinate space; likewise a dense root
    // that only views of it (or axes declared over its coordinates) bind.
    if (a->dense_of || (!a->parent && a->kind == ir::AxisKind::dense_fixed)) {
      auto sp = space_length_.find(space_of(a));
      if (sp == space_length_.end()) throw InterpreterError("axis " + a->name + " is not bound by any argument");
      AxisData v;
      v.level.kind = LevelKind::dense_fixed;
      v.level.length = sp->second;
      return axes_[a] = v;
    }
    throw InterpreterError("axis " + a->name + " is not bound by any argument (or only its dense view is)");
  }

  static const ir::AxisNode* space_of(const ir::AxisNode* a) {
    if (a->dense_of) return ir::coordinate_space(a->dense_of);
    if (a->coordinates_of) return ir::coordinate_space(a->coordinates_of);
    return a;
  }

  std::int64_t length_of(const ir::AxisNode* a) {
    if (auto it = axes_.find(a); it != axes_.end()) return it->second.level.length;
    if (auto sp = space_length_.find(space_of(a)); sp != space_length_.end()) return sp->second;
    return 0;  // an axis no argument binds (the parent of a viewed axis): unused
  }

  void prefill(const ir::FuncBuffer& fb) {
    struct FirstOp : ir::IRVisitor {
      const ir::BufferNode* b = nullptr;
      bool found = false;
      ir::ReduceOp op = ir::ReduceOp::add;
      void visit_Reduce(const ir::ReduceNode* n) override {
        if (n->buffer.get() == b && !found) {
          found = true;
          op = n->op;
        }
        ir::IRVisitor::visit_Reduce(n);
      }
    } first;
    first.b = fb.buffer.get();
    first.visit(f_.body);
    const BufferData& d = buffers_.at(fb.buffer.get());
    RV v = identity(first.found ? first.op : ir::ReduceOp::add, fb.buffer->dtype);
    for (std::int64_t k = 0; k < d.view.value_count; ++k) store_value(d.view, k, v);
  }

  static RV identity(ir::ReduceOp op, DType t) {
    RV v;
    v.t = t;
    switch (op) {
      case ir::ReduceOp::add: break;
      case ir::ReduceOp::mul: v.f = 1, v.i = 1; break;
      case ir::ReduceOp::min:
        v.f = INFINITY;
        v.i = t == DType::i32 ? INT32_MAX : INT64_MAX;
        break;
      case ir::ReduceOp::max:
        v.f = -INFINITY;
        v.i = t == DType::i32 ? INT32_MIN : INT64_MIN;
        break;
    }
    return v;
  }

  // --- storage -----------------------------------------------------------------------
  void note_rounding(DType t, double r) {
    if (!std::isfinite(r)) return;
    const double limit = t == DType::f32 ? 16777216.0 : 9007199254740992.0;
    if (std::fabs(r) > limit || r != std::floor(r)) rounded_ = true;
  }
  static double round_to(DType t, double x) { return t == DType::f32 ? static_cast<double>(static_cast<float>(x)) : x; }

  static RV load_value(const StorageView& v, std::int64_t k) {
    RV r;
    r.t = v.dtype;
    switch (v.dtype) {
      case DType::f32: r.f = static_cast<const float*>(v.data)[k]; break;
      case DType::f64: r.f = static_cast<const double*>(v.data)[k]; break;
      case DType::i32: r.i = static_cast<const std::int32_t*>(v.data)[k]; break;
      case DType::i64: r.i = static_cast<const std::int64_t*>(v.data)[k]; break;
      case DType::boolean: r.i = static_cast<const bool*>(v.data)[k]; break;
      default: throw InterpreterError("unsupported dtype");
    }
    return r;
  }
  static void store_value(const StorageView& v, std::int64_t k, const RV& x) {
    switch (v.dtype) {
      case DType::f32: static_cast<float*>(v.data)[k] = static_cast<float>(x.f); break;
      case DType::f64: static_cast<double*>(v.data)[k] = x.f; break;
      case DType::i32: static_cast<std::int32_t*>(v.data)[k] = static_cast<std::int32_t>(x.i); break;
      case DType::i64: static_cast<std::int64_t*>(v.data)[k] = x.i; break;
      case DType::boolean: static_cast<bool*>(v.data)[k] = x.i != 0; break;
      default: throw InterpreterError("unsupported dtype");
    }
  }

  // The element index of `coords` in buffer b, or -1 when a coordinate is absent.
  // The position of the element at `coords` in b's values, -1 when absent. `at` (optional):
  // per slot, the position the index's iterator holds when it iterates that very axis
  // (positions_of), which names the element even where an unsorted fiber repeats the
  // coordinate (docs/language.md §7); -1 elsewhere.
  std::int64_t locate(const ir::BufferNode* b, const std::vector<std::int64_t>& coords,
                      const std::vector<std::int64_t>* at = nullptr) const {
    const BufferData& d = buffers_.at(b);
    std::int64_t flat = 0, chain_pos = 0;
    for (std::size_t s = 0; s < d.levels.size(); ++s) {
      const AxisData& a = d.levels[s];
      const std::int64_t c = coords[s];
      const bool root = !b->axes[s]->parent;
      if (root) chain_pos = 0;
      switch (a.level.kind) {
        case LevelKind::dense_fixed:
          if (c < 0 || c >= a.level.length) return -1;
          chain_pos = chain_pos * a.level.length + c;
          break;
        case LevelKind::dense_variable: {
          std::int64_t lo = a.indptr[static_cast<std::size_t>(chain_pos)],
                       hi = a.indptr[static_cast<std::size_t>(chain_pos) + 1];
          if (c < 0 || c >= hi - lo) return -1;
          chain_pos = lo + c;
          break;
        }
        case LevelKind::sparse_fixed:
        case LevelKind::sparse_variable: {
          std::int64_t lo, hi;
          if (a.level.kind == LevelKind::sparse_fixed) {
            lo = chain_pos * a.level.nnz_per_row;
            hi = lo + a.level.nnz_per_row;
          } else {
            lo = a.indptr[static_cast<std::size_t>(chain_pos)];
            hi = a.indptr[static_cast<std::size_t>(chain_pos) + 1];
          }
          std::int64_t found = -1;
          if (const std::int64_t p = at ? (*at)[s] : -1;
              p >= lo && p < hi && a.indices[static_cast<std::size_t>(p)] == c)
            found = p;
          for (std::int64_t q = lo; q < hi && found < 0; ++q)
            if (a.indices[static_cast<std::size_t>(q)] == c) found = q;
          if (found < 0) return -1;
          chain_pos = found;
          break;
        }
      }
      const bool chain_ends = s + 1 == d.levels.size() || !b->axes[s + 1]->parent;
      if (chain_ends) flat = flat * level_positions(d.levels, s, a) + chain_pos;
    }
    return flat;
  }

  // Per index of an access to b: the position of the iterator it is, when that iterator
  // iterates b's own axis at that slot (an element visited in stored order is read and
  // written at its position); -1 for any other index.
  std::vector<std::int64_t> positions_of(const ir::BufferNode* b, const std::vector<ir::Expr>& idx) const {
    std::vector<std::int64_t> at(idx.size(), -1);
    for (std::size_t s = 0; s < idx.size() && s < b->axes.size(); ++s) {
      const ir::VarNode* v = idx[s].as<ir::VarNode>();
      for (auto it = scope_.rbegin(); v && it != scope_.rend(); ++it)
        if (it->var == v) {
          if (it->axis == b->axes[s].get()) at[s] = it->pos;
          break;
        }
    }
    return at;
  }

  // --- expressions -------------------------------------------------------------------
  RV eval(const ir::Expr& e) {
    switch (e.kind()) {
      case ir::ExprKind::IntImm: {
        RV v;
        v.t = e.dtype();
        v.i = e.as<ir::IntImmNode>()->value;
        return v;
      }
      case ir::ExprKind::FloatImm: {
        RV v;
        v.t = e.dtype();
        v.f = round_to(v.t, e.as<ir::FloatImmNode>()->value);
        return v;
      }
      case ir::ExprKind::Var: {
        const ir::VarNode* n = e.as<ir::VarNode>();
        for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
          if (it->var == n) {
            RV v;
            v.t = DType::i64;
            v.i = it->coord;
            return v;
          }
        auto it = vars_.find(n);
        if (it == vars_.end()) throw InterpreterError("unbound variable " + n->name);
        return it->second;
      }
      case ir::ExprKind::Binary: return binary(*e.as<ir::BinaryNode>());
      case ir::ExprKind::Unary: {
        auto* n = e.as<ir::UnaryNode>();
        RV a = eval(n->a);
        RV v;
        v.t = e.dtype();
        if (n->op == ir::UnOp::lnot) v.i = a.i == 0;
        else if (is_float(v.t)) v.f = round_to(v.t, -a.f);
        else v.i = wrap(v.t, -a.i);
        return v;
      }
      case ir::ExprKind::Select: {
        auto* n = e.as<ir::SelectNode>();
        return eval(n->cond).i ? eval(n->t) : eval(n->f);
      }
      case ir::ExprKind::Cast: {
        auto* n = e.as<ir::CastNode>();
        RV a = eval(n->value);
        RV v;
        v.t = e.dtype();
        if (is_float(v.t)) v.f = round_to(v.t, is_float(a.t) ? a.f : static_cast<double>(a.i));
        else if (v.t == DType::boolean) v.i = is_float(a.t) ? (a.f != 0) : (a.i != 0);
        else {
          if (is_float(a.t)) {  // C: undefined when the truncated value does not fit
            const double lo = v.t == DType::i32 ? -2147483649.0 : -9223372036854777856.0;
            const double hi = v.t == DType::i32 ? 2147483648.0 : 9223372036854775808.0;
            if (!(a.f > lo && a.f < hi))
              throw InterpreterError("undefined: float to integer conversion of a value out of range");
          }
          v.i = wrap(v.t, is_float(a.t) ? static_cast<std::int64_t>(a.f) : a.i);
        }
        return v;
      }
      case ir::ExprKind::Call: return call(*e.as<ir::CallNode>());
      case ir::ExprKind::Load: {
        auto* n = e.as<ir::LoadNode>();
        if (auto it = locals_.find(n->buffer.get()); it != locals_.end()) {
          if (it->second.unset) throw InterpreterError("local '" + n->buffer->name + "' read before it is written");
          return it->second;
        }
        std::vector<std::int64_t> coords;
        for (auto& x : n->indices) coords.push_back(eval(x).i);
        const std::vector<std::int64_t> at = positions_of(n->buffer.get(), n->indices);
        std::int64_t k = locate(n->buffer.get(), coords, &at);
        if (k < 0) {
          RV v;
          v.t = n->buffer->dtype;
          v.f = n->buffer->default_value;
          v.i = static_cast<std::int64_t>(n->buffer->default_value);
          return v;
        }
        return load_value(buffers_.at(n->buffer.get()).view, k);
      }
      default: throw InterpreterError("expression kind not in stage I");
    }
  }

  static std::int64_t wrap(DType t, std::int64_t x) {
    if (t == DType::i32) return static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
    if (t == DType::boolean) return x != 0;
    return x;
  }

  RV binary(const ir::BinaryNode& n) {
    if (n.op == ir::BinOp::land || n.op == ir::BinOp::lor) {
      RV v;
      v.t = DType::boolean;
      bool a = eval(n.a).i != 0;
      v.i = n.op == ir::BinOp::land ? (a && eval(n.b).i != 0) : (a || eval(n.b).i != 0);
      return v;
    }
    RV a = eval(n.a), b = eval(n.b);
    const bool fl = is_float(a.t);
    RV v;
    v.t = n.dtype;
    if (ir::is_comparison(n.op)) {
      double x = fl ? a.f : static_cast<double>(a.i), y = fl ? b.f : static_cast<double>(b.i);
      std::int64_t p = a.i, q = b.i;
      switch (n.op) {
        case ir::BinOp::eq: v.i = fl ? x == y : p == q; break;
        case ir::BinOp::ne: v.i = fl ? x != y : p != q; break;
        case ir::BinOp::lt: v.i = fl ? x < y : p < q; break;
        case ir::BinOp::le: v.i = fl ? x <= y : p <= q; break;
        case ir::BinOp::gt: v.i = fl ? x > y : p > q; break;
        case ir::BinOp::ge: v.i = fl ? x >= y : p >= q; break;
        default: break;
      }
      return v;
    }
    if (fl) {
      double x = a.f, y = b.f, r = 0;
      switch (n.op) {
        case ir::BinOp::add: r = x + y; break;
        case ir::BinOp::sub: r = x - y; break;
        case ir::BinOp::mul: r = x * y; break;
        case ir::BinOp::div: r = x / y; break;
        case ir::BinOp::mod: r = std::fmod(x, y); break;
        case ir::BinOp::min: r = y < x ? y : x; break;
        case ir::BinOp::max: r = x < y ? y : x; break;
        default: throw InterpreterError("bad float operator");
      }
      if (v.t == DType::f32) {  // as C does in float
        float fx = static_cast<float>(x), fy = static_cast<float>(y), fr = 0;
        switch (n.op) {
          case ir::BinOp::add: fr = fx + fy; break;
          case ir::BinOp::sub: fr = fx - fy; break;
          case ir::BinOp::mul: fr = fx * fy; break;
          case ir::BinOp::div: fr = fx / fy; break;
          case ir::BinOp::mod: fr = std::fmod(fx, fy); break;
          default: fr = static_cast<float>(r); break;
        }
        r = fr;
      }
      note_rounding(v.t, r);
      v.f = r;
      return v;
    }
    std::int64_t x = a.i, y = b.i, r = 0;
    switch (n.op) {
      case ir::BinOp::add: r = static_cast<std::int64_t>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y)); break;
      case ir::BinOp::sub: r = static_cast<std::int64_t>(static_cast<std::uint64_t>(x) - static_cast<std::uint64_t>(y)); break;
      case ir::BinOp::mul: r = static_cast<std::int64_t>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y)); break;
      case ir::BinOp::div:
      case ir::BinOp::mod:
        if (y == 0) throw InterpreterError("undefined: integer division by zero");
        // The quotient that does not fit (INT_MIN / -1) traps in C: undefined too.
        if (y == -1 && x == (v.t == DType::i32 ? INT32_MIN : INT64_MIN))
          throw InterpreterError("undefined: integer division overflow (INT_MIN / -1)");
        r = n.op == ir::BinOp::div ? x / y : x % y;
        break;
      case ir::BinOp::min: r = y < x ? y : x; break;
      case ir::BinOp::max: r = x < y ? y : x; break;
      default: throw InterpreterError("bad integer operator");
    }
    v.i = wrap(v.t, r);
    return v;
  }

  RV call(const ir::CallNode& n) {
    std::vector<RV> a;
    for (auto& x : n.args) a.push_back(eval(x));
    RV v;
    v.t = n.dtype;
    const bool f32 = v.t == DType::f32;
    double x = a.at(0).f;
    switch (n.fn) {
      case ir::Intrinsic::exp: v.f = f32 ? std::exp(static_cast<float>(x)) : std::exp(x); break;
      case ir::Intrinsic::log: v.f = f32 ? std::log(static_cast<float>(x)) : std::log(x); break;
      case ir::Intrinsic::sqrt: v.f = f32 ? std::sqrt(static_cast<float>(x)) : std::sqrt(x); break;
      case ir::Intrinsic::abs: v.f = std::fabs(x); break;
      case ir::Intrinsic::tanh: v.f = f32 ? std::tanh(static_cast<float>(x)) : std::tanh(x); break;
      case ir::Intrinsic::pow:
        v.f = f32 ? std::pow(static_cast<float>(x), static_cast<float>(a.at(1).f)) : std::pow(x, a.at(1).f);
        break;
      default: throw InterpreterError("intrinsic not in stage I");
    }
    v.f = round_to(v.t, v.f);
    note_rounding(v.t, v.f);
    return v;
  }

  // --- call-time rule of computed write indices (docs/language.md §4.1, §7) ------------
  // A write into a root slot at an expression of iterators and constants (no loads) is a
  // call error unless the expression's interval over the iterators' coordinate ranges
  // [0, extent - 1], by the interval rules of §4.1, lies in [0, slot extent) — checked before
  // anything runs. An iterator over an empty coordinate space makes the write unreachable.
  struct Span {
    std::int64_t lo, hi;
  };
  void check_computed_writes(const ir::Stmt& s, std::map<const ir::VarNode*, std::int64_t> extent) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case ir::StmtKind::Seq:
        for (auto& x : s.as<ir::SeqNode>()->stmts) check_computed_writes(x, extent);
        return;
      case ir::StmtKind::Block: return check_computed_writes(s.as<ir::BlockNode>()->body, extent);
      case ir::StmtKind::IfThenElse: {  // checked whether or not the branch runs (§7: before anything runs)
        auto* n = s.as<ir::IfThenElseNode>();
        check_computed_writes(n->then_case, extent);
        return check_computed_writes(n->else_case, extent);
      }
      case ir::StmtKind::SparseIteration: {
        auto* n = s.as<ir::SparseIterationNode>();
        for (std::size_t k = 0; k < n->vars.size(); ++k) extent[n->vars[k].node()] = length_of(space_of(n->axes[k].get()));
        return check_computed_writes(n->body, extent);
      }
      case ir::StmtKind::Reduce: {
        auto* n = s.as<ir::ReduceNode>();
        for (std::size_t q = 0; q < n->indices.size() && q < n->buffer->axes.size(); ++q) {
          const ir::Expr& e = n->indices[q];
          if (n->buffer->axes[q]->parent || e.as<ir::VarNode>() || has_load(e)) continue;
          bool empty = false;
          Span r = span(e, extent, empty);
          if (empty) continue;
          const std::int64_t len = length_of(space_of(n->buffer->axes[q].get()));
          if (r.lo < 0 || r.hi >= len)
            throw InterpreterError("call error: computed index " + ir::to_string(e) + " of buffer '" +
                                   n->buffer->name + "' spans [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) +
                                   "] but its axis has extent " + std::to_string(len));
        }
        return;
      }
      default: return;
    }
  }
  // --- call-time rule of indirect write indices (docs/language.md §4.1, §7) ------------
  // A write into a root slot at the value of an integer `in` buffer (or that value cast to
  // int64) is a call error unless every stored value of that buffer lies in [0, extent) of
  // the slot's coordinate space — checked before anything runs, for every such write of the
  // kernel, whether or not it is reached (under a `when`, in an empty loop).
  void check_indirect_writes(const ir::Stmt& s) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case ir::StmtKind::Seq:
        for (auto& x : s.as<ir::SeqNode>()->stmts) check_indirect_writes(x);
        return;
      case ir::StmtKind::Block: return check_indirect_writes(s.as<ir::BlockNode>()->body);
      case ir::StmtKind::IfThenElse: {
        auto* n = s.as<ir::IfThenElseNode>();
        check_indirect_writes(n->then_case);
        return check_indirect_writes(n->else_case);
      }
      case ir::StmtKind::SparseIteration: return check_indirect_writes(s.as<ir::SparseIterationNode>()->body);
      case ir::StmtKind::Reduce: {
        auto* n = s.as<ir::ReduceNode>();
        for (std::size_t q = 0; q < n->indices.size() && q < n->buffer->axes.size(); ++q) {
          const ir::AxisNode* axis = n->buffer->axes[q].get();
          if (axis->parent) continue;
          ir::Expr e = n->indices[q];
          if (auto* c = e.as<ir::CastNode>(); c && c->dtype == DType::i64) e = c->value;
          auto* l = e.as<ir::LoadNode>();
          if (!l || !is_int(l->buffer->dtype) || l->buffer->role != ir::BufferRole::input) continue;
          auto it = buffers_.find(l->buffer.get());
          if (it == buffers_.end()) continue;
          const StorageView& v = it->second.view;
          const std::int64_t len = length_of(space_of(axis));
          for (std::int64_t k = 0; k < v.value_count; ++k) {
            const std::int64_t x = load_value(v, k).i;
            if (x < 0 || x >= len)
              throw InterpreterError("call error: index buffer '" + l->buffer->name + "' holds " + std::to_string(x) +
                                     " at position " + std::to_string(k) + ", outside [0, " + std::to_string(len) +
                                     ") of the slot of buffer '" + n->buffer->name + "' it indexes");
          }
        }
        return;
      }
      default: return;
    }
  }
  static bool has_load(const ir::Expr& e) {
    struct Find : ir::IRVisitor {
      bool found = false;
      void visit_Load(const ir::LoadNode*) override { found = true; }
    } f;
    f.visit(e);
    return f.found;
  }
  Span span(const ir::Expr& e, const std::map<const ir::VarNode*, std::int64_t>& extent, bool& empty) {
    auto bad = [&] { return InterpreterError("call error: computed index " + ir::to_string(e) + " overflows int64"); };
    if (auto* c = e.as<ir::IntImmNode>()) return {c->value, c->value};
    if (auto* v = e.as<ir::VarNode>()) {
      auto it = extent.find(v);
      if (it == extent.end()) throw InterpreterError("computed index uses a non-iterator " + v->name);
      if (it->second == 0) empty = true;
      return {0, std::max<std::int64_t>(it->second - 1, 0)};
    }
    if (auto* u = e.as<ir::UnaryNode>()) {
      Span a = span(u->a, extent, empty);
      if (a.lo == INT64_MIN) throw bad();
      return {-a.hi, -a.lo};
    }
    auto* b = e.as<ir::BinaryNode>();
    if (!b) throw InterpreterError("computed index of an unexpected form: " + ir::to_string(e));
    Span x = span(b->a, extent, empty);
    if (b->op == ir::BinOp::div || b->op == ir::BinOp::mod) {
      const std::int64_t d = b->b.as<ir::IntImmNode>()->value;
      if (b->op == ir::BinOp::div) return {x.lo / d, x.hi / d};
      return {x.lo >= 0 ? 0 : std::max(x.lo, 1 - d), x.hi <= 0 ? 0 : std::min(x.hi, d - 1)};
    }
    Span y = span(b->b, extent, empty);
    std::int64_t p[4];
    switch (b->op) {
      case ir::BinOp::add:
        if (__builtin_add_overflow(x.lo, y.lo, &p[0]) || __builtin_add_overflow(x.hi, y.hi, &p[1])) throw bad();
        return {p[0], p[1]};
      case ir::BinOp::sub:
        if (__builtin_sub_overflow(x.lo, y.hi, &p[0]) || __builtin_sub_overflow(x.hi, y.lo, &p[1])) throw bad();
        return {p[0], p[1]};
      case ir::BinOp::mul:
        if (__builtin_mul_overflow(x.lo, y.lo, &p[0]) || __builtin_mul_overflow(x.lo, y.hi, &p[1]) ||
            __builtin_mul_overflow(x.hi, y.lo, &p[2]) || __builtin_mul_overflow(x.hi, y.hi, &p[3]))
          throw bad();
        return {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      case ir::BinOp::min: return {std::min(x.lo, y.lo), std::min(x.hi, y.hi)};
      case ir::BinOp::max: return {std::max(x.lo, y.lo), std::max(x.hi, y.hi)};
      default: throw InterpreterError("computed index of an unexpected form: " + ir::to_string(e));
    }
  }

  // --- statements --------------------------------------------------------------------
  void exec(const ir::Stmt& s) {
    if (!s.defined()) return;
    step();
    switch (s.kind()) {
      case ir::StmtKind::Seq:
        for (auto& x : s.as<ir::SeqNode>()->stmts) exec(x);
        return;
      case ir::StmtKind::Block: {
        auto* n = s.as<ir::BlockNode>();
        std::map<const ir::BufferNode*, RV> saved;
        for (auto& a : n->allocs) {
          if (auto it = locals_.find(a.get()); it != locals_.end()) saved[a.get()] = it->second;
          RV v;
          v.t = a->dtype;
          v.unset = true;  // the DSL always initialises a local; a shrunk kernel may not
          locals_[a.get()] = v;
        }
        exec(n->body);
        for (auto& a : n->allocs) {
          locals_.erase(a.get());
          if (auto it = saved.find(a.get()); it != saved.end()) locals_[a.get()] = it->second;
        }
        return;
      }
      case ir::StmtKind::LetStmt: {
        auto* n = s.as<ir::LetStmtNode>();
        vars_[n->var.node()] = eval(n->value);
        exec(n->body);
        vars_.erase(n->var.node());
        return;
      }
      case ir::StmtKind::IfThenElse: {
        auto* n = s.as<ir::IfThenElseNode>();
        if (eval(n->cond).i) exec(n->then_case);
        else exec(n->else_case);
        return;
      }
      case ir::StmtKind::Store: {
        auto* n = s.as<ir::StoreNode>();
        write(n->buffer, n->indices, eval(n->value), nullptr);
        return;
      }
      case ir::StmtKind::Reduce: {
        auto* n = s.as<ir::ReduceNode>();
        RV v = eval(n->value);
        write(n->buffer, n->indices, v, &n->op);
        return;
      }
      case ir::StmtKind::SparseIteration: {
        auto* n = s.as<ir::SparseIterationNode>();
        iterate(*n, 0);
        return;
      }
      default: throw InterpreterError("statement kind not in stage I");
    }
  }

  RV combine(ir::ReduceOp op, const RV& old, const RV& v) {
    RV r;
    r.t = old.t;
    if (is_float(r.t)) {
      double x = old.f, y = v.f;
      switch (op) {
        case ir::ReduceOp::add: r.f = x + y; break;
        case ir::ReduceOp::mul: r.f = x * y; break;
        case ir::ReduceOp::min: r.f = y < x ? y : x; break;
        case ir::ReduceOp::max: r.f = x < y ? y : x; break;
      }
      if (r.t == DType::f32) {
        float fx = static_cast<float>(x), fy = static_cast<float>(y);
        if (op == ir::ReduceOp::add) r.f = fx + fy;
        if (op == ir::ReduceOp::mul) r.f = fx * fy;
      }
      note_rounding(r.t, r.f);
      return r;
    }
    std::int64_t x = old.i, y = v.i;
    switch (op) {
      case ir::ReduceOp::add: r.i = static_cast<std::int64_t>(static_cast<std::uint64_t>(x) + static_cast<std::uint64_t>(y)); break;
      case ir::ReduceOp::mul: r.i = static_cast<std::int64_t>(static_cast<std::uint64_t>(x) * static_cast<std::uint64_t>(y)); break;
      case ir::ReduceOp::min: r.i = y < x ? y : x; break;
      case ir::ReduceOp::max: r.i = x < y ? y : x; break;
    }
    r.i = wrap(r.t, r.i);
    return r;
  }

  void write(const ir::Buffer& b, const std::vector<ir::Expr>& idx, const RV& v, const ir::ReduceOp* op) {
    if (auto it = locals_.find(b.get()); it != locals_.end()) {
      if (op && it->second.unset) throw InterpreterError("local '" + b->name + "' reduced into before it is written");
      it->second = op ? combine(*op, it->second, v) : convert(b->dtype, v);
      return;
    }
    std::vector<std::int64_t> coords;
    for (auto& x : idx) coords.push_back(eval(x).i);
    if (auto as = assembled_.find(b.get()); as != assembled_.end()) {
      if (coords[0] < 0 || coords[0] >= length_of(b->axes[0].get()) || coords[1] < 0 ||
          coords[1] >= length_of(space_of(b->axes[1].get())))
        throw InterpreterError("write to assembled buffer '" + b->name + "' outside its extents");
      auto [it, fresh] = as->second.try_emplace({coords[0], coords[1]});
      auto& [value, track_of] = it->second;
      RV old = fresh ? identity(op ? *op : ir::ReduceOp::add, b->dtype) : value;
      value = op ? combine(*op, old, v) : convert(b->dtype, v);
      if (is_float(b->dtype)) track(track_of, op, old, v, value);
      return;
    }
    const std::vector<std::int64_t> at = positions_of(b.get(), idx);
    std::int64_t k = locate(b.get(), coords, &at);
    if (k < 0) {
      std::string c;
      for (auto x : coords) c += (c.empty() ? "" : ", ") + std::to_string(x);
      throw InterpreterError("write to buffer '" + b->name + "' at absent coordinate (" + c + ")");
    }
    const StorageView& view = buffers_.at(b.get()).view;
    RV old = op ? load_value(view, k) : RV{};
    RV result = op ? combine(*op, old, v) : convert(b->dtype, v);
    if (is_float(b->dtype)) track_error(b.get(), k, view.value_count, op, old, v, result);
    store_value(view, k, result);
  }

  struct ErrorTrack {
    double abs_sum = 0, abs_result = 0;
    long long adds = 0, muls = 0;
  };
  static double bound_of(DType t, const ErrorTrack& e) {
    const double eps = t == DType::f32 ? 0x1p-24 : 0x1p-53;
    return 2.0 * (static_cast<double>(e.adds) + 2) * eps * e.abs_sum +
           (e.muls ? 2.0 * (static_cast<double>(e.muls) + 2) * eps * e.abs_result : 0.0);
  }
  void track_error(const ir::BufferNode* b, std::int64_t k, std::int64_t count, const ir::ReduceOp* op, const RV& old,
                   const RV& v, const RV& result) {
    auto& elems = error_[b];
    if (elems.empty()) elems.resize(static_cast<std::size_t>(count));
    track(elems[static_cast<std::size_t>(k)], op, old, v, result);
  }
  static void track(ErrorTrack& t, const ir::ReduceOp* op, const RV& old, const RV& v, const RV& result) {
    if (!op) {  // a plain store starts over
      t = ErrorTrack{};
      t.abs_sum = std::fabs(v.f);
    } else if (*op == ir::ReduceOp::add) {
      if (t.adds == 0 && t.muls == 0) t.abs_sum = std::fabs(old.f);
      ++t.adds;
      t.abs_sum += std::fabs(v.f);
    } else if (*op == ir::ReduceOp::mul) {
      ++t.muls;
    }
    if (std::isfinite(result.f)) t.abs_result = std::max(t.abs_result, std::fabs(result.f));
  }


  static RV convert(DType t, const RV& v) {
    RV r = v;
    r.t = t;
    return r;
  }

  // The position of the parent of axis a in the current scope (0 for a root axis).
  std::int64_t parent_position(const ir::AxisNode* a) const {
    if (!a->parent) return 0;
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (it->axis == a->parent.get()) return it->pos;
    // §3: a parent that is a root dense axis and is not iterated is at the coordinate of
    // the innermost iterator over its coordinate space (its positions are its coordinates).
    if (!a->parent->parent && a->parent->kind == ir::AxisKind::dense_fixed)
      for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
        if (space_of(it->axis) == space_of(a->parent.get())) return it->coord;
    throw InterpreterError("axis " + a->name + " iterated without its parent");
  }

  // Visits the coordinates of axes [k, end) of iteration n, then runs its body.
  void iterate(const ir::SparseIterationNode& n, std::size_t k) {
    if (k == n.axes.size()) {
      exec(n.body);
      return;
    }
    const ir::AxisNode* a = n.axes[k].get();
    const AxisData& d = axis(a);
    const std::int64_t parent = parent_position(a);
    auto visit = [&](std::int64_t coord, std::int64_t pos) {
      // Counted like a statement: without it an empty body made the budget count only the
      // outer statements, and a 4-deep nest over large extents with no statement inside
      // (spindle-frontend-fuzz seed 17000208: 2999 x 2036 x 1000 x 1000 points, one counted
      // statement per million of them) ran for hours before the budget stopped it.
      ++points_;
      step();
      scope_.push_back({n.vars[k].node(), a, coord, pos});
      iterate(n, k + 1);
      scope_.pop_back();
    };
    if (a->merge != ir::MergeOp::none) {
      // §3.1: the coordinates stored in any / every operand fiber, ascending, once each;
      // the iterator is one of the coordinate space (position = coordinate).
      std::map<std::int64_t, std::size_t> count;
      for (auto& o : a->merge_operands) {
        const AxisData& od = axis(o.get());
        const std::int64_t p = parent_position(o.get());
        std::int64_t lo, hi;
        if (od.level.kind == LevelKind::sparse_fixed) {
          lo = p * od.level.nnz_per_row;
          hi = lo + od.level.nnz_per_row;
        } else {
          lo = od.indptr.at(static_cast<std::size_t>(p));
          hi = od.indptr.at(static_cast<std::size_t>(p) + 1);
        }
        for (std::int64_t q = lo; q < hi; ++q) ++count[od.indices.at(static_cast<std::size_t>(q))];
      }
      for (auto& [c, times] : count)
        if (a->merge == ir::MergeOp::union_ || times == a->merge_operands.size()) visit(c, c);
      return;
    }
    switch (d.level.kind) {
      case LevelKind::dense_fixed:
        for (std::int64_t c = 0; c < d.level.length; ++c) visit(c, c);
        break;
      case LevelKind::dense_variable: {
        std::int64_t lo = d.indptr.at(static_cast<std::size_t>(parent)), hi = d.indptr.at(static_cast<std::size_t>(parent) + 1);
        for (std::int64_t p = lo; p < hi; ++p) visit(p - lo, p);
        break;
      }
      case LevelKind::sparse_fixed:
        for (std::int64_t p = parent * d.level.nnz_per_row; p < (parent + 1) * d.level.nnz_per_row; ++p)
          visit(d.indices.at(static_cast<std::size_t>(p)), p);
        break;
      case LevelKind::sparse_variable: {
        std::int64_t lo = d.indptr.at(static_cast<std::size_t>(parent)), hi = d.indptr.at(static_cast<std::size_t>(parent) + 1);
        for (std::int64_t p = lo; p < hi; ++p) visit(d.indices.at(static_cast<std::size_t>(p)), p);
        break;
      }
    }
  }

  void step() {
    if (++steps_ > max_steps_)
      throw InterpreterError("step budget exceeded (" + std::to_string(max_steps_) +
                             " statements and iteration points)");
  }

  static constexpr long long kMaxSteps = 50'000'000;

  const ir::Function& f_;
  std::vector<runtime::CallArg> args_;
  std::map<const ir::AxisNode*, AxisData> axes_;
  std::map<const ir::AxisNode*, std::int64_t> space_length_;  // coordinate space -> extent
  std::map<const ir::BufferNode*, BufferData> buffers_;
  std::map<const ir::VarNode*, RV> vars_;
  std::map<const ir::BufferNode*, RV> locals_;
  bool rounded_ = false;
  std::unordered_map<const ir::BufferNode*, std::vector<ErrorTrack>> error_;
  std::map<const ir::BufferNode*, std::map<std::pair<std::int64_t, std::int64_t>, std::pair<RV, ErrorTrack>>>
      assembled_;
  std::vector<Binding> scope_;
  long long steps_ = 0, points_ = 0;  // steps_ counts statements and iteration points
  long long max_steps_ = kMaxSteps;
};

}  // namespace spindle::test
