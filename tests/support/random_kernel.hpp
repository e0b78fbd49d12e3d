// A random-kernel generator for differential testing: random axis forests (all four axis
// kinds, root sparse axes (sparse_root), dense<X> views, depth <= 4), random patterns (empty
// fibers, empty and 1x1 shapes), random buffers over chains of those axes, and random stage-I
// programs (nested iterations, S/R mixes, = and the four reductions, locals, scalar parameters, affine,
// constant and indirect read indices, several outputs) that follow the language's write
// rules (docs/language.md) most of the time — programs that break them must be rejected
// with a UserError, never mis-compiled.
//
// Two modes, each decided by a generator of its own (so that the other kernels of a seed stay
// what they were):
//  * fibers by coordinate (docs/language.md §3), about one kernel in five: an axis R whose
//    parent D is a root dense axis (a dense<X> view, or a dense_fixed root), with inputs over
//    [D, R] (and X's chain); R is often iterated where D is not but an iterator over D's
//    coordinates is (r under x: row x of [dense<X>, R]), in the same iteration or nested;
//  * assembled outputs (§4.6), about one kernel in six: C = assembled<P, X> (P a dense_fixed
//    root, X any axis, often R) and one `out` buffer over [P, C], the only written buffer,
//    written as c(i, x) op= v / c(i, x) = v in one top-level iteration whose first iterator i is
//    over P (P or dense<P>), x an iterator over X's coordinates at any depth; no read of c. A
//    quarter of them break one rule (a read of c, a second written buffer, the row iterator not
//    first, two top-level iterations, c declared inout, a column iterator of another space),
//    which the front end must reject. k.assembled is then the output's buffer index.
//
//   RandomKernel k = generate_kernel(seed);
//   k.function   stage I as written (before infer_iteration_kinds): what the interpreter runs
//   k.args()     fresh host arguments (StorageViews into k's own data)
//
// Data are small integers (and products/sums of them) unless k.exact is false, so float
// results are exact and any re-association gives the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "spindle/ir/affine_index.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/indirect.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/runtime/call_arg.hpp"

namespace spindle::test {

// Host data of one axis: its level arrays over all positions of its parent.
struct AxisArrays {
  std::int64_t length = 0, nnz_per_row = 0, positions = 0;
  std::vector<std::int64_t> indptr, indices;
  DType index_dtype = DType::i32;
  std::vector<std::int32_t> indptr32, indices32;
  std::vector<std::int64_t> indptr64, indices64;
  void finish() {
    indptr32.assign(indptr.begin(), indptr.end());
    indices32.assign(indices.begin(), indices.end());
    indptr64 = indptr;
    indices64 = indices;
  }
  const void* indptr_data() const {
    return index_dtype == DType::i64 ? static_cast<const void*>(indptr64.data()) : indptr32.data();
  }
  const void* indices_data() const {
    return index_dtype == DType::i64 ? static_cast<const void*>(indices64.data()) : indices32.data();
  }
};

// Merge operands over one pattern (docs/language.md §3.1; the common-prefix loop of
// codegen/c_family.hpp): when `a` is a later operand of a union_of / intersection_of in `axes`
// whose first operand `data` already holds, with as many fibers and the same length, about
// half the time its fibers take the first operand's coordinates (each fiber with chance 3/4,
// the rest keep theirs: prefixes in common, then a merge). Draws from `rng` only.
inline void share_merge_fibers(const std::vector<ir::Axis>& axes, const std::map<const ir::AxisNode*, AxisArrays>& data,
                               const ir::Axis& a, AxisArrays& d, std::mt19937_64& rng) {
  if (a->kind != ir::AxisKind::sparse_variable) return;
  for (auto& u : axes) {
    if (u->merge == ir::MergeOp::none) continue;
    const auto& ops = u->merge_operands;
    if (std::find(ops.begin() + 1, ops.end(), a) == ops.end() || ops[0]->kind != ir::AxisKind::sparse_variable) continue;
    auto f = data.find(ops[0].get());
    if (f == data.end() || f->second.length != d.length || f->second.indptr.size() != d.indptr.size()) continue;
    if (rng() % 2) return;
    const AxisArrays& first = f->second;
    std::vector<std::int64_t> indptr{0}, indices;
    for (std::size_t p = 0; p + 1 < d.indptr.size(); ++p) {
      const AxisArrays& from = rng() % 4 ? first : d;
      indices.insert(indices.end(), from.indices.begin() + from.indptr[p], from.indices.begin() + from.indptr[p + 1]);
      indptr.push_back(static_cast<std::int64_t>(indices.size()));
    }
    d.indptr = std::move(indptr);
    d.indices = std::move(indices);
    d.positions = d.indptr.back();
    return;
  }
}

struct BufferData {
  ir::Buffer buffer;
  std::vector<double> initial;  // values in position order
  std::vector<unsigned char> bytes;
  std::int64_t count = 0;
  bool index = false;  // holds read indices (values -1..6 for small inputs)
  // Holds indirect write indices into this coordinate space (values in [0, its length)).
  const ir::AxisNode* write_target = nullptr;
};

struct RandomKernel {
  std::uint64_t seed = 0;
  ir::Function function;  // stage I as written
  bool exact = true;
  bool gathered_dot = false;  // starts with Generator::gathered_dot's SDDMM-like iteration
  // The gathered dot's sparse axis G: on large data, some of its fibers are longer than
  // prefetch_gathers' distance (8), so that its prefetches run (make_large_data).
  const ir::AxisNode* long_fibers = nullptr;
  std::vector<ir::Axis> axes;
  std::map<const ir::AxisNode*, AxisArrays> data;
  std::vector<BufferData> buffers;  // in argument order (scalars interleaved below)
  std::vector<int> arg_is_scalar;   // per call argument: -1 buffer index k, else scalar value index
  std::vector<double> scalar_values;
  std::vector<int> arg_buffer;
  // Writes at computed indices (docs/language.md §4.1) go into `computed_target`, a root axis
  // made for them: its extent is fitted to their upper bounds (fit_computed_target) after
  // the program is made and whenever the data change, so the call-time check passes.
  const ir::AxisNode* computed_target = nullptr;
  // Per buffer and position: the reference interpreter's bound on how far another order of
  // float reductions may move the value (record_error_bounds), for tolerant comparisons.
  std::vector<std::vector<double>> error_bounds;
  // The buffer (index into `buffers`) over [P, C], C = assembled<P, X>, of a kernel that
  // assembles a sparse output (docs/language.md §4.6), else -1. Its argument is a CSR view of
  // the output's shape (rows: P's extent, columns: X's); its pattern and values are ignored.
  int assembled = -1;
  // Sparse axes whose data hold fibers in an order other than ascending (shuffle_fibers):
  // their levels are passed with sorted = false, as an unsorted Csr or CsrView is.
  std::set<const ir::AxisNode*> unsorted;

  // Fresh call arguments whose values are the initial ones (each call gets its own copy).
  std::vector<runtime::CallArg> args() {
    std::vector<runtime::CallArg> out;
    for (std::size_t a = 0; a < arg_buffer.size(); ++a) {
      runtime::CallArg c;
      if (arg_buffer[a] < 0) {
        c.is_scalar = true;
        double v = scalar_values[static_cast<std::size_t>(arg_is_scalar[a])];
        c.scalar = v;
        c.scalar_int = static_cast<std::int64_t>(v);
        c.scalar_dtype = DType::f64;
        out.push_back(c);
        continue;
      }
      BufferData& b = buffers[static_cast<std::size_t>(arg_buffer[a])];
      reset(b);
      c.view = view(b);
      out.push_back(c);
    }
    return out;
  }

  void reset(BufferData& b) {
    const int w = dtype_bytes(b.buffer->dtype);
    b.bytes.assign(static_cast<std::size_t>(std::max<std::int64_t>(b.count, 1) * w), 0);
    for (std::int64_t k = 0; k < b.count; ++k) {
      double v = b.initial[static_cast<std::size_t>(k)];
      unsigned char* p = b.bytes.data() + k * w;
      switch (b.buffer->dtype) {
        case DType::f32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
        case DType::f64: std::memcpy(p, &v, 8); break;
        case DType::i32: { std::int32_t x = static_cast<std::int32_t>(v); std::memcpy(p, &x, 4); break; }
        case DType::i64: { std::int64_t x = static_cast<std::int64_t>(v); std::memcpy(p, &x, 8); break; }
        default: break;
      }
    }
  }

  StorageView view(BufferData& b) {
    StorageView v;
    v.dtype = b.buffer->dtype;
    v.data = b.bytes.data();
    v.value_count = b.count;
    v.writable = true;
    v.kind = "Tensor";
    for (auto& a : b.buffer->axes) {
      const AxisArrays& d = data.at(a.get());
      LevelView l;
      l.kind = static_cast<LevelKind>(static_cast<int>(a->kind));
      l.length = d.length;
      l.nnz = d.indptr.empty() ? 0 : d.indptr.back();
      l.nnz_per_row = d.nnz_per_row;
      l.indptr = a->is_variable() ? d.indptr_data() : nullptr;
      l.indices = a->is_sparse() ? d.indices_data() : nullptr;
      l.index_dtype = d.index_dtype;
      l.sorted = !unsorted.count(a.get());
      if (a->kind == ir::AxisKind::sparse_fixed) l.nnz = d.positions;
      v.levels.push_back(l);
    }
    return v;
  }

  double value_at(const BufferData& b, std::int64_t k) const {
    const unsigned char* p = b.bytes.data() + k * dtype_bytes(b.buffer->dtype);
    switch (b.buffer->dtype) {
      case DType::f32: { float x; std::memcpy(&x, p, 4); return x; }
      case DType::f64: { double x; std::memcpy(&x, p, 8); return x; }
      case DType::i32: { std::int32_t x; std::memcpy(&x, p, 4); return x; }
      case DType::i64: { std::int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
      default: return 0;
    }
  }
};

// The axes a kernel declares for a buffer axis `a`, as the front end does: `a`, its parents,
// the base of a dense<X> view and the axis a coordinates_of<X> axis takes its coordinates
// (and extent scalar) from, with theirs.
inline void mark_declared_axes(const ir::Axis& a, std::set<const ir::AxisNode*>& used) {
  for (ir::Axis x = a; x; x = x->dense_of ? x->dense_of : x->parent) {
    used.insert(x.get());
    if (x->coordinates_of) mark_declared_axes(x->coordinates_of, used);
    for (auto& o : x->merge_operands) mark_declared_axes(o, used);  // union_of / intersection_of
  }
}

// The computed write indices (docs/language.md §4.1) into root slots over `target` in f, each
// with the coordinate spaces of the iterators in scope there.
struct ComputedWrite {
  ir::Expr index;
  std::map<const ir::VarNode*, const ir::AxisNode*> spaces;
};
inline std::vector<ComputedWrite> computed_writes(const ir::Function& f, const ir::AxisNode* target) {
  struct Scan : ir::IRVisitor {
    const ir::AxisNode* target = nullptr;
    std::map<const ir::VarNode*, const ir::AxisNode*> scope;
    std::vector<ComputedWrite> found;
    void visit_SparseIteration(const ir::SparseIterationNode* n) override {
      for (std::size_t k = 0; k < n->vars.size(); ++k) scope[n->vars[k].node()] = ir::coordinate_space(n->axes[k]);
      ir::IRVisitor::visit_SparseIteration(n);
    }
    void visit_Reduce(const ir::ReduceNode* n) override {
      for (std::size_t s = 0; s < n->indices.size() && s < n->buffer->axes.size(); ++s)
        if (ir::coordinate_space(n->buffer->axes[s]) == target && !n->indices[s].as<ir::VarNode>())
          found.push_back({n->indices[s], scope});
      ir::IRVisitor::visit_Reduce(n);
    }
  } scan;
  scan.target = target;
  scan.visit(f.body);
  return scan.found;
}

// Sets the extent of k.computed_target to one past the largest value its computed write
// indices can take over the current data (interval arithmetic, ir/affine_index.hpp), plus a
// random slack of 0 or 1, and at least 1.
template <class Range>
void fit_computed_target(RandomKernel& k, Range&& range) {
  if (!k.computed_target) return;
  std::int64_t need = 0;
  for (auto& c : computed_writes(k.function, k.computed_target)) {
    bool empty = false;
    auto r = ir::index_range(c.index, [&](const ir::VarNode* v) -> std::optional<ir::IndexRange> {
      auto it = c.spaces.find(v);
      if (it == c.spaces.end()) return std::nullopt;
      const std::int64_t len = k.data.at(it->second).length;
      empty = empty || len == 0;
      return ir::IndexRange{0, std::max<std::int64_t>(len - 1, 0)};
    });
    if (r && !empty) need = std::max<std::int64_t>(need, static_cast<std::int64_t>(r->hi) + 1);
  }
  AxisArrays& d = k.data.at(k.computed_target);
  d.length = d.positions = std::max<std::int64_t>(need + range(0, 1), 1);
  d.finish();
}

// How many values buffer b holds on k's current data: the product, over its chains of axes,
// of each chain's last axis's positions.
inline std::int64_t buffer_elements(const RandomKernel& k, const ir::BufferNode& b) {
  std::int64_t count = 1;
  for (std::size_t s = 0; s < b.axes.size(); ++s)
    if (s + 1 == b.axes.size() || !b.axes[s + 1]->parent) count *= k.data.at(b.axes[s].get()).positions;
  return count;
}

// The buffers whose values index a root slot of some write (indirect write indices, §4.1).
inline std::set<const ir::BufferNode*> indirect_index_buffers(const ir::Function& f) {
  struct Scan : ir::IRVisitor {
    std::set<const ir::BufferNode*> found;
    void visit_Reduce(const ir::ReduceNode* n) override {
      for (std::size_t q = 0; q < n->indices.size() && q < n->buffer->axes.size(); ++q)
        if (!n->buffer->axes[q]->parent)
          if (const ir::LoadNode* l = ir::indirect_index_load(n->indices[q])) found.insert(l->buffer.get());
      ir::IRVisitor::visit_Reduce(n);
    }
  } scan;
  scan.visit(f.body);
  return scan.found;
}

// Sizes b to the current data and gives it fresh initial values: outputs -777 (never read
// before written), inputs -2..2, read-index buffers -1..index_hi, indirect write indices a
// coordinate of their target.
template <class Range>
void fill_buffer(RandomKernel& k, BufferData& b, Range&& range, std::int64_t index_hi) {
  const std::int64_t count = buffer_elements(k, *b.buffer);
  b.count = count;
  b.initial.clear();
  for (std::int64_t q = 0; q < count; ++q) {
    double v = b.buffer->role == ir::BufferRole::output ? -777 : static_cast<double>(range(-2, 2));
    if (b.index) v = static_cast<double>(range(-1, index_hi));
    if (b.write_target) v = static_cast<double>(range(0, k.data.at(b.write_target).length - 1));
    b.initial.push_back(v);
  }
}

namespace detail_gen {

class Generator {
 public:
  explicit Generator(std::uint64_t seed)
      : rng_(seed), cond_rng_(seed ^ 0x2545f4914f6cdd1dULL), share_rng_(seed ^ 0x9b05688c2b3e6c1fULL) {
    k_.seed = seed;
  }

  RandomKernel make() {
    k_.function.name = "fuzz" + std::to_string(k_.seed % 100000);
    k_.function.stage = ir::Stage::coordinate;
    T_ = pick({DType::f32, DType::f32, DType::f64, DType::i32});
    k_.exact = !(is_float(T_) && chance(0.2));
    {  // the two modes of the file comment, by a generator of their own
      const std::uint64_t m = std::mt19937_64(k_.seed ^ 0xd1b54a32d192ed03ULL)();
      assembled_mode_ = m % 6 == 0;
      by_coord_mode_ = (m / 6) % 5 == 0;
      merge_mode_ = (m / 30) % 4 == 0;
    }
    // About one kernel in eight starts with a gathered dot (SDDMM-like: d(i, j) op= x(i, f) *
    // y(j, f) over a sparse child j of a root i, f a root of run-time extent): on the large
    // inputs the CPU schedule's prefetch_gathers versions its nonzero loop and prefetches the
    // gathered rows of y. Decided by a generator of its own, as the contraction below.
    gathered_mode_ = std::mt19937_64(k_.seed ^ 0x632be59bd9b4e019ULL)() % 8 == 0 && !assembled_mode_;
    make_axes();
    if (assembled_mode_) make_assembled_buffers();
    else make_buffers();
    std::vector<ir::Stmt> top;
    // About one kernel in seven starts with a dense contraction (GEMM-like: the CPU schedule's
    // two-dimensional register tiles; half of them with two updates of each element). Decided
    // by a generator of its own, so that the other kernels of a seed stay what they were.
    if (std::mt19937_64(k_.seed ^ 0x9e3779b97f4a7c15ULL)() % 7 == 0 && !assembled_mode_) {
      if (ir::Stmt c = contraction(); c.defined()) top.push_back(c);
    }
    if (gathered_mode_) top.push_back(gathered_dot());
    int n = 1 + (chance(0.3) ? 1 : 0);
    if (assembled_mode_) n = break_ == Break::two_top_level ? 2 : 1;  // c is written in one iteration
    for (int s = 0; s < n; ++s) top.push_back(iteration(0));
    k_.function.body = ir::seq(std::move(top));
    if (k_.computed_target) {  // fit T to the program's computed indices, then resize what uses it
      auto rng = [&](std::int64_t lo, std::int64_t hi) { return range(lo, hi); };
      fit_computed_target(k_, rng);
      for (auto& b : k_.buffers) {
        bool uses = b.write_target == k_.computed_target;
        for (auto& a : b.buffer->axes) uses = uses || a.get() == k_.computed_target;
        if (uses) fill_buffer(k_, b, rng, 6);
      }
    }
    // As the front end does: the kernel declares the axes its buffers use (with their
    // parents and the bases of dense views), and the shape scalars of those axes.
    std::set<const ir::AxisNode*> used;
    for (auto& fb : k_.function.buffers)
      for (auto& a : fb.buffer->axes) mark_declared_axes(a, used);
    {  // and the axes it iterates (dense<P> rows of an assembled output may be in no buffer)
      struct Iterated : ir::IRVisitor {
        std::vector<ir::Axis> axes;
        void visit_SparseIteration(const ir::SparseIterationNode* n) override {
          axes.insert(axes.end(), n->axes.begin(), n->axes.end());
          ir::IRVisitor::visit_SparseIteration(n);
        }
      } it;
      it.visit(k_.function.body);
      for (auto& a : it.axes) mark_declared_axes(a, used);
    }
    for (auto& a : k_.axes)
      if (used.count(a.get())) k_.function.axes.push_back(a);
    std::vector<ir::FuncScalar> scalars;
    for (auto& sc : k_.function.scalars)
      if (used.count(sc.origin.axis.get())) scalars.push_back(sc);
    k_.function.scalars = std::move(scalars);
    for (auto& s : user_scalars_) k_.function.scalars.push_back(s);
    return std::move(k_);
  }

 private:
  // --- randomness ------------------------------------------------------------------
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::int64_t range(std::int64_t lo, std::int64_t hi) {  // inclusive
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  template <class X>
  X pick(std::initializer_list<X> xs) {
    auto it = xs.begin();
    std::advance(it, range(0, static_cast<std::int64_t>(xs.size()) - 1));
    return *it;
  }
  template <class X>
  const X& pick_from(const std::vector<X>& xs) {
    return xs[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(xs.size()) - 1))];
  }

  // --- axes ------------------------------------------------------------------------
  static int depth(const ir::Axis& a) { return static_cast<int>(ir::axis_chain(a).size()); }

  ir::Axis new_axis(const std::string& name, ir::AxisKind kind, ir::Axis parent, ir::Axis coordinates = nullptr,
                    bool symbolic = false) {
    auto n = std::make_shared<ir::AxisNode>();
    n->name = name;
    n->kind = kind;
    n->parent = parent;
    n->index_dtype = chance(0.2) ? DType::i64 : DType::i32;
    n->coordinates_of = coordinates;
    ir::Axis a = n;
    if (coordinates) {  // coordinates_of<X>: X's extent
      n->length = coordinates->length;
    } else if (kind == ir::AxisKind::dense_fixed && !symbolic && chance(0.2)) {  // dense_fixed_n<N>: a compile-time extent
      // 7 and 10 too: register_tile makes a constant extent of 2..8 rows one two-dimensional
      // tile, and blocks a larger one by six with the rest one row at a time.
      n->length = ir::int_imm(pick({std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4}, std::int64_t{5},
                                    std::int64_t{7}, std::int64_t{10}}));
    } else {
      ir::Var len(name + "_len", DType::i64);
      n->length = len;
      k_.function.scalars.push_back({len, {ir::ParamOrigin::length, -1, a}});
    }
    if (n->is_variable()) {
      ir::Var nnz(name + "_nnz", DType::i64);
      n->nnz = nnz;
      k_.function.scalars.push_back({nnz, {ir::ParamOrigin::nnz, -1, a}});
    }
    if (kind == ir::AxisKind::sparse_fixed) {
      if (chance(0.5)) {
        n->nnz_per_row = ir::int_imm(range(0, 2));
        fixed_npr_[a.get()] = n->nnz_per_row.as<ir::IntImmNode>()->value;
      } else {
        ir::Var npr(name + "_nnz_per_row", DType::i64);
        n->nnz_per_row = npr;
        k_.function.scalars.push_back({npr, {ir::ParamOrigin::nnz_per_row, -1, a}});
      }
    }
    k_.axes.push_back(a);
    return a;
  }

  ir::Axis dense_view(const ir::Axis& base) {
    for (auto& a : k_.axes)
      if (a->dense_of == base) return a;  // one dense<X> per X
    auto n = std::make_shared<ir::AxisNode>();
    n->name = "dense_" + base->name;
    n->kind = ir::AxisKind::dense_fixed;
    n->length = base->length;
    n->dense_of = base;
    ir::Axis a = n;
    k_.axes.push_back(a);
    return a;
  }

  void make_axes() {
    static const char* names[] = {"I", "J", "K", "L", "M", "N", "P", "Q"};
    int roots = static_cast<int>(range(1, 3)), total = roots + static_cast<int>(range(0, 3));
    for (int r = 0; r < total; ++r) {
      std::vector<ir::Axis> parents;
      for (auto& a : k_.axes)
        if (!a->dense_of && depth(a) < 4) parents.push_back(a);
      if (r < roots || parents.empty()) {
        if (r > 0 && chance(0.25)) {  // a root sparse axis (sparse_root: a sparse vector's nonzeros)
          new_axis(names[r], ir::AxisKind::sparse_fixed, nullptr);
          continue;
        }
        ir::Axis a = new_axis(names[r], ir::AxisKind::dense_fixed, nullptr);
        roots_.push_back(a);
        continue;
      }
      ir::AxisKind kind = pick({ir::AxisKind::dense_variable, ir::AxisKind::sparse_variable,
                                ir::AxisKind::sparse_variable, ir::AxisKind::sparse_fixed});
      new_axis(names[r], kind, pick_from(parents));
    }
    // A sparse axis whose coordinates are another axis's (coordinates_of<X>, docs/language.md
    // §1): its iterator indexes X's root slots and reads X's sparse slots by coordinate.
    if (chance(0.4)) {
      std::vector<ir::Axis> parents, spaces;
      for (auto& a : k_.axes) {
        if (depth(a) < 4) parents.push_back(a);
        if (a->kind != ir::AxisKind::dense_variable) spaces.push_back(a);
      }
      if (!parents.empty() && !spaces.empty())
        new_axis(names[total], ir::AxisKind::sparse_variable, pick_from(parents), pick_from(spaces));
    }
    // A root axis for writes at computed indices (no children, no views, no axis takes its
    // coordinates): its extent is fitted to those writes once the program exists.
    if (chance(0.35)) {
      k_.computed_target = new_axis("T", ir::AxisKind::dense_fixed, nullptr, nullptr, /*symbolic=*/true).get();
    }
    // The gathered dot's axes: a feature root F of run-time extent and a sparse child G of the
    // first root, with its dense view (y's rows).
    if (gathered_mode_) {
      gather_features_ = new_axis("F", ir::AxisKind::dense_fixed, nullptr, nullptr, /*symbolic=*/true);
      gather_columns_ = new_axis("G", ir::AxisKind::sparse_variable, roots_.front());
      roots_.push_back(gather_features_);
      views_.push_back(dense_view(gather_columns_));
    }
    // dense<X> views of some axes
    std::vector<ir::Axis> base = k_.axes;
    for (auto& a : base)
      if (a->is_sparse() && chance(0.5)) views_.push_back(dense_view(a));
    // A fiber at another iterator's coordinate (docs/language.md §3): R under a root dense axis
    // D — mostly dense<X> (iterated under x: row x of [dense<X>, R]), else a dense_fixed root
    // (by coordinate under an iterator of an axis declared coordinates_of<D>).
    if (by_coord_mode_) {
      std::vector<ir::Axis> bases;
      for (auto& a : k_.axes)
        if (!a->dense_of && a.get() != k_.computed_target && (a->is_sparse() || !a->parent)) bases.push_back(a);
      ir::Axis d;
      if (!views_.empty() && chance(0.35)) d = pick_from(views_);
      else if (!bases.empty() && chance(0.85)) {
        d = dense_view(pick_from(bases));  // (the existing view of a sparse axis, if there is one)
        if (!contains(views_, d)) views_.push_back(d);
      }
      else if (!roots_.empty()) d = pick_from(roots_);
      if (d) {
        by_coord_axis_ = new_axis("R", pick({ir::AxisKind::sparse_variable, ir::AxisKind::sparse_variable,
                                             ir::AxisKind::dense_variable, ir::AxisKind::sparse_fixed}), d);
        if (chance(0.2)) views_.push_back(dense_view(by_coord_axis_));
      }
    }
    // The columns of an assembled output (docs/language.md §4.6): S = assembled<P, X>.
    if (assembled_mode_) {
      k_.computed_target = nullptr;  // T, if made, is a plain root axis: c is the only output
      rows_axis_ = pick_from(roots_);  // the first axis is always a dense_fixed root
      row_first_ = chance(0.2) ? dense_view(rows_axis_) : rows_axis_;
      std::vector<ir::Axis> xs;
      for (auto& a : k_.axes)
        if (a != row_first_ || chance(0.5)) xs.push_back(a);
      if (xs.empty()) xs = k_.axes;  // P alone: a square output over P's coordinates
      columns_of_ = by_coord_axis_ && chance(0.5) ? by_coord_axis_ : pick_from(xs);
      ir::Axis s = new_axis("S", ir::AxisKind::sparse_variable, rows_axis_, columns_of_);
      const_cast<ir::AxisNode&>(*s).assembled = true;  // built just above, not shared yet
      assembled_axis_ = s;
      if (chance(0.25))
        break_ = pick({Break::read, Break::second_output, Break::row_not_first, Break::two_top_level, Break::inout,
                       Break::wrong_column});
      // Scattered rows (docs/language.md §4.6): about one assembled kernel in three writes c at
      // rows other than the first iterator of the top-level iteration (lower/assemble_scattered.hpp),
      // with one operator. Drawn by a generator of its own, so that other kernels stay as they were.
      // (The rows iterated after another axis, once a broken rule, now make such a kernel.)
      scattered_ = std::mt19937_64(k_.seed ^ 0xd1b54a32d192ed03ULL)() % 3 == 0 || break_ == Break::row_not_first;
      if (break_ == Break::row_not_first) break_ = Break::none, rows_late_ = true;
    }
    if (merge_mode_) make_merged_axes();
    // data, parents first
    for (auto& a : k_.axes) make_data(a);
  }

  // Co-iteration (docs/language.md §3.1), about one kernel in four: union_of / intersection_of
  // of two or three sparse axes over one coordinate space (a second sparse axis declared
  // coordinates_of one is made when no two share a space).
  void make_merged_axes() {
    // Sparse axes grouped by coordinate space, in the order the spaces first appear in
    // k_.axes (never by address: the same seed must make the same kernel in every process).
    auto groups = [&] {
      std::vector<std::pair<const ir::AxisNode*, std::vector<ir::Axis>>> m;
      for (auto& a : k_.axes) {
        if (a->dense_of || a->assembled || !a->is_sparse()) continue;
        const ir::AxisNode* space = ir::coordinate_space(a);
        auto g = std::find_if(m.begin(), m.end(), [&](auto& e) { return e.first == space; });
        if (g == m.end()) g = m.insert(m.end(), {space, {}});
        g->second.push_back(a);
      }
      return m;
    };
    auto m = groups();
    bool pair = false;
    for (auto& [space, members] : m) pair = pair || members.size() >= 2;
    if (!pair && !m.empty()) {
      auto it = m.begin();
      std::advance(it, range(0, static_cast<std::int64_t>(m.size()) - 1));
      const ir::Axis x = pick_from(it->second);
      std::vector<ir::Axis> parents;
      for (auto& a : k_.axes)
        if (!a->dense_of && !a->assembled && a.get() != k_.computed_target && depth(a) < 4) parents.push_back(a);
      ir::Axis parent = x->parent && chance(0.75) ? x->parent : pick_from(parents);
      new_axis("W", ir::AxisKind::sparse_variable, parent, x);
      m = groups();
    }
    int made = 0;
    for (auto& [space, members] : m) {
      if (members.size() < 2 || made == 2) continue;
      std::vector<ir::Axis> ops = members;
      std::shuffle(ops.begin(), ops.end(), rng_);
      ops.resize(std::min<std::size_t>(ops.size(), static_cast<std::size_t>(range(2, 3))));
      auto n = std::make_shared<ir::AxisNode>();
      n->merge = chance(0.5) ? ir::MergeOp::union_ : ir::MergeOp::intersection;
      n->name = std::string(n->merge == ir::MergeOp::union_ ? "U" : "X") + std::to_string(made);
      n->kind = ir::AxisKind::dense_fixed;
      n->length = ops[0]->length;
      n->dense_of = ops[0];
      n->merge_operands = ops;
      merged_.push_back(n);
      k_.axes.push_back(n);
      ++made;
    }
  }

  // Inputs over the chains of merged axes' operands that no buffer has, so that the merged
  // axes are iterable.
  void add_merge_inputs() {
    for (auto& u : merged_) {
      for (auto& o : u->merge_operands)
        if (!in_buffers_.count(o.get())) inputs_.push_back(add_buffer(ir::BufferRole::input, T_, ir::axis_chain(o)));
      in_buffers_.insert(u.get());
    }
  }

  void make_data(const ir::Axis& a) {
    AxisArrays d;
    if (a->dense_of) {
      d.length = k_.data.at(a->dense_of.get()).length;
      d.positions = d.length;
      d.finish();
      k_.data[a.get()] = d;
      return;
    }
    d.index_dtype = a->index_dtype;
    std::int64_t parents = a->parent ? k_.data.at(a->parent.get()).positions : 1;
    switch (a->kind) {
      case ir::AxisKind::dense_fixed:
        d.length = pick({std::int64_t{0}, std::int64_t{1}, std::int64_t{2}, std::int64_t{3}, std::int64_t{4},
                         std::int64_t{5}, std::int64_t{7}});
        if (d.length == 0 && chance(0.6)) d.length = 3;
        if (auto* fixed = a->length.as<ir::IntImmNode>()) d.length = fixed->value;
        d.positions = d.length;
        break;
      case ir::AxisKind::dense_variable: {
        d.indptr.push_back(0);
        std::int64_t longest = 0;
        for (std::int64_t p = 0; p < parents; ++p) {
          std::int64_t n = chance(0.25) ? 0 : range(1, 4);
          longest = std::max(longest, n);
          d.indptr.push_back(d.indptr.back() + n);
        }
        d.length = longest;
        d.positions = d.indptr.back();
        break;
      }
      case ir::AxisKind::sparse_variable: {
        d.length = a->coordinates_of ? k_.data.at(ir::coordinate_space(a)).length : range(0, 7);
        d.indptr.push_back(0);
        for (std::int64_t p = 0; p < parents; ++p) {
          std::vector<std::int64_t> fiber;
          double density = chance(0.2) ? 0.0 : (chance(0.5) ? 0.3 : 0.7);
          for (std::int64_t c = 0; c < d.length; ++c)
            if (chance(density)) fiber.push_back(c);
          d.indices.insert(d.indices.end(), fiber.begin(), fiber.end());
          d.indptr.push_back(static_cast<std::int64_t>(d.indices.size()));
        }
        d.positions = d.indptr.back();
        share_merge_fibers(k_.axes, k_.data, a, d, share_rng_);
        break;
      }
      case ir::AxisKind::sparse_fixed: {
        auto fixed = fixed_npr_.find(a.get());
        d.nnz_per_row = fixed != fixed_npr_.end() ? fixed->second : range(0, 3);
        d.length = d.nnz_per_row + range(0, 4);
        for (std::int64_t p = 0; p < parents; ++p) {
          std::vector<std::int64_t> all(static_cast<std::size_t>(d.length));
          for (std::int64_t c = 0; c < d.length; ++c) all[static_cast<std::size_t>(c)] = c;
          std::shuffle(all.begin(), all.end(), rng_);
          all.resize(static_cast<std::size_t>(d.nnz_per_row));
          std::sort(all.begin(), all.end());
          d.indices.insert(d.indices.end(), all.begin(), all.end());
        }
        d.positions = parents * d.nnz_per_row;
        break;
      }
    }
    d.finish();
    k_.data[a.get()] = d;
  }

  ir::Axis computed_target_axis() const {
    for (auto& a : k_.axes)
      if (a.get() == k_.computed_target) return a;
    return nullptr;
  }

  // --- buffers ---------------------------------------------------------------------
  // A chain: a root-to-axis path, or a dense<X> view alone.
  std::vector<ir::Axis> random_chain() {
    if (!views_.empty() && chance(0.25)) return {pick_from(views_)};
    std::vector<ir::Axis> real;
    for (auto& a : k_.axes)
      if (!a->dense_of && !a->assembled) real.push_back(a);
    return ir::axis_chain(pick_from(real));
  }

  std::int64_t chain_positions(const std::vector<ir::Axis>& chain) {
    return k_.data.at(chain.back().get()).positions;
  }

  ir::Buffer add_buffer(ir::BufferRole role, DType t, std::vector<ir::Axis> given = {}) {
    std::vector<ir::Axis> axes = given.empty() ? random_chain() : given;
    if (given.empty() && axes.size() < 4 && chance(0.35)) {
      auto more = random_chain();
      if (axes.size() + more.size() <= 4) axes.insert(axes.end(), more.begin(), more.end());
    }
    std::int64_t count = 1;
    std::vector<ir::Axis> chain;
    for (std::size_t s = 0; s < axes.size(); ++s) {
      chain.push_back(axes[s]);
      if (s + 1 == axes.size() || !axes[s + 1]->parent) {
        count *= chain_positions(chain);
        chain.clear();
      }
    }
    ir::BufferNode b;
    b.name = std::string(1, static_cast<char>('a' + k_.buffers.size()));
    b.dtype = t;
    b.axes = axes;
    b.role = role;
    ir::Buffer buf = ir::make_buffer(std::move(b));
    for (auto& a : axes) in_buffers_.insert(a.get());
    BufferData d;
    d.buffer = buf;
    d.count = count;
    d.index = t == DType::i32 && role == ir::BufferRole::input && is_index_buffer_;
    d.write_target = write_target_;
    for (std::int64_t k = 0; k < count; ++k) {
      double v = role == ir::BufferRole::output ? -777 : static_cast<double>(range(-2, 2));
      if (t == DType::i32 && role == ir::BufferRole::input && is_index_buffer_) v = static_cast<double>(range(-1, 6));
      if (write_target_) v = static_cast<double>(range(0, k_.data.at(write_target_).length - 1));
      d.initial.push_back(v);
    }
    int arg = static_cast<int>(k_.arg_buffer.size());
    k_.function.buffers.push_back({buf, {ir::ParamOrigin::values, arg, nullptr}});
    k_.arg_buffer.push_back(static_cast<int>(k_.buffers.size()));
    k_.arg_is_scalar.push_back(-1);
    k_.buffers.push_back(std::move(d));
    return buf;
  }

  // An integer `in` buffer whose values index a root slot of an output (an axis of nonzero
  // length): the source of indirect writes (docs/language.md §4.1), e.g.
  // c(cast<i64>(w(i, j)), k) += ...
  void add_write_index_buffer() {
    std::vector<ir::Axis> targets;
    for (auto& o : outputs_)
      for (std::size_t s = 0; s < o->axes.size(); ++s) {
        const ir::Axis& a = o->axes[s];
        const bool child_next = s + 1 < o->axes.size() && o->axes[s + 1]->parent;
        if (!a->parent && a->is_dense() && !child_next && k_.data.at(ir::coordinate_space(a)).length >= 1)
          targets.push_back(a);
      }
    if (targets.empty()) return;
    const ir::Axis target = pick_from(targets);
    write_target_ = ir::coordinate_space(target);
    ir::Buffer b = add_buffer(ir::BufferRole::input, chance(0.3) ? DType::i64 : DType::i32);
    write_target_ = nullptr;
    write_index_buffers_.push_back(b);
  }

  void add_scalar() {
    int arg = static_cast<int>(k_.arg_buffer.size());
    ir::Var v(std::string("s") + std::to_string(arg), T_);
    user_scalars_.push_back({v, {ir::ParamOrigin::scalar, arg, nullptr}});
    k_.arg_buffer.push_back(-1);
    k_.arg_is_scalar.push_back(static_cast<int>(k_.scalar_values.size()));
    k_.scalar_values.push_back(static_cast<double>(range(-2, 3)));
    scalars_.push_back(v);
  }

  // Inputs over [D, R] (and often over the chain of the axis D is a view of), so that R is
  // iterable, and under an iterator of D's coordinates (by_coord_mode_).
  void add_by_coordinate_inputs() {
    if (!by_coord_axis_) return;
    inputs_.push_back(add_buffer(ir::BufferRole::input, T_, ir::axis_chain(by_coord_axis_)));
    const ir::Axis& d = by_coord_axis_->parent;
    if (d->dense_of && chance(0.7)) inputs_.push_back(add_buffer(ir::BufferRole::input, T_, ir::axis_chain(d->dense_of)));
  }

  // The buffers of a kernel that assembles a sparse output (assembled_mode_): inputs (one over
  // X's chain, often), then c over [P, S] — the only written buffer unless the kernel breaks
  // that rule on purpose (break_).
  void make_assembled_buffers() {
    add_by_coordinate_inputs();
    add_merge_inputs();
    if (chance(0.7) && columns_of_ != by_coord_axis_)
      inputs_.push_back(add_buffer(ir::BufferRole::input, T_,
                                   columns_of_->dense_of ? std::vector<ir::Axis>{columns_of_} : ir::axis_chain(columns_of_)));
    int ins = static_cast<int>(range(inputs_.empty() ? 1 : 0, 2));
    for (int q = 0; q < ins; ++q) inputs_.push_back(add_buffer(ir::BufferRole::input, T_));
    maybe_add_index_buffer_and_scalar();
    ir::Buffer c = add_buffer(break_ == Break::inout ? ir::BufferRole::inout : ir::BufferRole::output, T_,
                              {rows_axis_, assembled_axis_});
    k_.assembled = static_cast<int>(k_.buffers.size()) - 1;
    if (break_ == Break::inout)
      for (auto& v : k_.buffers.back().initial) v = static_cast<double>(range(-2, 2));
    assembled_buf_ = c;
    outputs_.push_back(c);
    ops_[c.get()] = pick({ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::max,
                          ir::ReduceOp::min, ir::ReduceOp::mul});
    // Scattered rows at an indirect index (COO -> CSR: c(row(e), x) op= v(e)): about one
    // scattered kernel in two gets an index buffer over P's coordinates, which
    // assembled_indices reads the row from. Decided by a generator of its own, so that the
    // other kernels stay as they were.
    if (scattered_ && std::mt19937_64(k_.seed ^ 0x5851f42d4c957f2dULL)() % 2 == 0 &&
        k_.data.at(ir::coordinate_space(rows_axis_)).length >= 1) {
      write_target_ = ir::coordinate_space(rows_axis_);
      ir::Buffer rows = add_buffer(ir::BufferRole::input, chance(0.3) ? DType::i64 : DType::i32);
      write_target_ = nullptr;
      write_index_buffers_.push_back(rows);
      indirect_rows_ = true;
    }
    if (break_ == Break::second_output) {
      ir::Buffer b = add_buffer(ir::BufferRole::output, T_);
      outputs_.push_back(b);
      ops_[b.get()] = ir::ReduceOp::add;
    }
  }

  // Sometimes an i32 index buffer (for indirect writes), sometimes a scalar parameter.
  void maybe_add_index_buffer_and_scalar() {
    if (chance(0.3)) {
      is_index_buffer_ = true;
      index_buffers_.push_back(add_buffer(ir::BufferRole::input, DType::i32));
      is_index_buffer_ = false;
    }
    if (chance(0.4)) add_scalar();
  }

  void make_buffers() {
    add_by_coordinate_inputs();
    add_merge_inputs();
    int ins = static_cast<int>(range(1, 3)), outs = static_cast<int>(range(1, 3));
    for (int q = 0; q < ins; ++q) inputs_.push_back(add_buffer(ir::BufferRole::input, T_));
    maybe_add_index_buffer_and_scalar();
    for (int q = 0; q < outs; ++q) {
      ir::BufferRole role = chance(0.3) ? ir::BufferRole::inout : ir::BufferRole::output;
      ir::Buffer b = add_buffer(role, T_);
      outputs_.push_back(b);
      ops_[b.get()] = pick({ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::max,
                            ir::ReduceOp::min, ir::ReduceOp::mul});
      if (k_.buffers.back().initial.size() && role == ir::BufferRole::inout)
        for (auto& v : k_.buffers.back().initial) v = static_cast<double>(range(-2, 2));
    }
    if (k_.computed_target) {  // an output written at computed indices: [T] or [T, chain]
      std::vector<ir::Axis> axes{computed_target_axis()};
      if (chance(0.5)) {
        auto more = random_chain();
        if (std::find(more.begin(), more.end(), axes[0]) == more.end() && more.size() < 4)
          axes.insert(axes.end(), more.begin(), more.end());
      }
      ir::Buffer b = add_buffer(chance(0.3) ? ir::BufferRole::inout : ir::BufferRole::output, T_, axes);
      outputs_.push_back(b);
      ops_[b.get()] = pick({ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::max, ir::ReduceOp::min});
      if (b->role == ir::BufferRole::inout)
        for (auto& v : k_.buffers.back().initial) v = static_cast<double>(range(-2, 2));
    }
    if (chance(0.5)) add_write_index_buffer();
  }

  // --- programs --------------------------------------------------------------------
  struct Bound {
    ir::Var var;
    ir::Axis axis;
  };

  bool bound(const ir::Axis& a) const {
    for (auto& b : scope_)
      if (b.axis == a) return true;
    return false;
  }

  // c(x, z) op= a(x, y) * w(y, z) [+ v] over three distinct dense root axes (roots and dense
  // views), with new buffers a, w (in) and c (out or inout); later statements may use them.
  ir::Stmt contraction() {
    std::vector<ir::Axis> dense = roots_;
    dense.insert(dense.end(), views_.begin(), views_.end());
    std::erase_if(dense, [&](const ir::Axis& a) { return a.get() == k_.computed_target; });
    if (dense.size() < 3) return ir::Stmt();
    std::shuffle(dense.begin(), dense.end(), rng_);
    const ir::Axis x = dense[0], y = dense[1], z = dense[2];
    ir::Buffer a = add_buffer(ir::BufferRole::input, T_, {x, y});
    ir::Buffer w = add_buffer(ir::BufferRole::input, T_, {y, z});
    ir::BufferRole role = chance(0.3) ? ir::BufferRole::inout : ir::BufferRole::output;
    ir::Buffer c = add_buffer(role, T_, {x, z});
    if (role == ir::BufferRole::inout)
      for (auto& v : k_.buffers.back().initial) v = static_cast<double>(range(-2, 2));
    inputs_.push_back(a);
    inputs_.push_back(w);
    outputs_.push_back(c);
    ir::ReduceOp op = pick({ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::max,
                            ir::ReduceOp::min});
    ops_[c.get()] = op;
    std::vector<ir::Var> vars;
    const std::size_t depth0 = scope_.size();
    for (const ir::Axis& ax : {x, y, z}) {
      vars.push_back(iterator_for(ax));
      scope_.push_back({vars.back(), ax});
    }
    ir::Expr v = ir::load(a, {vars[0], vars[1]}) * ir::load(w, {vars[1], vars[2]});
    if (chance(0.3)) v = v + value(1);
    ir::Stmt body = ir::reduce(c, {vars[0], vars[2]}, op, v);
    // Half of them update c twice per element (two GEMM products summed in one pass: the
    // register tile takes both updates). Decided by a generator of its own and written without
    // drawing from rng_, so that the rest of the kernel stays what it was.
    if (std::mt19937_64(k_.seed ^ 0x2545f4914f6cdd1dULL)() % 2 == 0)
      body = ir::seq({body, ir::reduce(c, {vars[0], vars[2]}, op,
                                       ir::load(w, {vars[1], vars[2]}) * ir::load(a, {vars[0], vars[1]}) +
                                           ir::make_const(T_, 1))});
    scope_.resize(depth0);
    return ir::Stmt(std::make_shared<ir::SparseIterationNode>(
        "it" + std::to_string(counter_++), std::vector<ir::Axis>{x, y, z}, vars,
        std::vector<ir::IterKind>(3, ir::IterKind::spatial), ir::Stmt(), body, ir::SourceLoc{}));
  }

  // d(i, j) op= x(i, f) * y(j, f) [* a(i, j)] over [I, G, F] (make_axes made G, F and dense<G>):
  // G a sparse child of the root I, y over [dense<G>, F] (a row gathered by g's coordinate), F
  // a root of run-time extent, the F loop a reduction.
  ir::Stmt gathered_dot() {
    const ir::Axis j = gather_columns_, i = j->parent, f = gather_features_, view = dense_view(j);
    ir::Buffer x = add_buffer(ir::BufferRole::input, T_, {i, f});
    ir::Buffer y = add_buffer(ir::BufferRole::input, T_, {view, f});
    ir::Buffer a = chance(0.5) ? add_buffer(ir::BufferRole::input, T_, {i, j}) : ir::Buffer();
    ir::Buffer d = add_buffer(ir::BufferRole::output, T_, {i, j});
    inputs_.push_back(x);
    inputs_.push_back(y);
    if (a) inputs_.push_back(a);
    outputs_.push_back(d);
    ir::ReduceOp op = pick({ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::add, ir::ReduceOp::max});
    ops_[d.get()] = op;
    std::vector<ir::Var> vars;
    for (const ir::Axis& ax : {i, j, f}) vars.push_back(iterator_for(ax));
    ir::Expr v = ir::load(x, {vars[0], vars[2]}) * ir::load(y, {vars[1], vars[2]});
    if (a) v = ir::load(a, {vars[0], vars[1]}) * v;
    ir::Stmt body = ir::reduce(d, {vars[0], vars[1]}, op, v);
    k_.gathered_dot = true;
    k_.long_fibers = j.get();
    return ir::Stmt(std::make_shared<ir::SparseIterationNode>(
        "it" + std::to_string(counter_++), std::vector<ir::Axis>{i, j, f}, vars,
        std::vector<ir::IterKind>{ir::IterKind::spatial, ir::IterKind::spatial, ir::IterKind::reduction}, ir::Stmt(),
        body, ir::SourceLoc{}));
  }

  // A fresh iterator over `a`: its name in lower case and a number, "j7".
  ir::Var iterator_for(const ir::Axis& a) {
    std::string n = a->name;
    for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return ir::Var(n + std::to_string(counter_++), DType::i64);
  }

  // Whether an iterator over the coordinates of `a` is in scope or among `chosen`.
  bool space_bound(const ir::Axis& a, const std::vector<ir::Axis>& chosen) const {
    for (auto& b : scope_)
      if (ir::coordinate_space(b.axis) == ir::coordinate_space(a)) return true;
    for (auto& c : chosen)
      if (ir::coordinate_space(c) == ir::coordinate_space(a)) return true;
    return false;
  }
  static bool contains(const std::vector<ir::Axis>& v, const ir::Axis& a) {
    return std::find(v.begin(), v.end(), a) != v.end();
  }
  // An axis an iteration may list: an argument gives its extent, and it is not assembled.
  bool iterable(const ir::Axis& a) const { return in_buffers_.count(a.get()) && !a->assembled; }
  // Whether `a` may be iterated next after `chosen` (its parent bound, or for a child of a root
  // dense axis, in the modes, an iterator over the parent's coordinates: docs/language.md §3).
  bool can_iterate(const ir::Axis& a, const std::vector<ir::Axis>& chosen) const {
    if (!iterable(a)) return false;  // no argument would give its extent
    if (bound(a) || contains(chosen, a)) return false;
    if (a->merge != ir::MergeOp::none) {  // every operand's parent bound (§3.1)
      for (auto& o : a->merge_operands)
        if (o->parent && !bound(o->parent) && !contains(chosen, o->parent) &&
            !((by_coord_mode_ || assembled_mode_) && ir::parent_by_coordinate(*o) && space_bound(o->parent, chosen)))
          return false;
      return true;
    }
    if (!a->parent) return true;
    if (bound(a->parent) || contains(chosen, a->parent)) return true;
    return (by_coord_mode_ || assembled_mode_) && ir::parent_by_coordinate(*a) && space_bound(a->parent, chosen);
  }
  // Appends to `chosen` what makes `t` iterated here, t last: its ancestors, or for a child of
  // a root dense axis D not iterated, an axis over D's coordinates (and its ancestors) —
  // often the axis D is a view of. False (chosen unchanged) when some axis cannot be.
  bool reach(const ir::Axis& t, std::vector<ir::Axis>& chosen, int depth) {
    if (bound(t) || contains(chosen, t)) return true;
    if (!iterable(t) || depth > 6) return false;
    std::vector<ir::Axis> c = chosen;
    for (auto& o : t->merge_operands)  // a merged axis: its operands' parents first
      if (o->parent && !bound(o->parent) && !contains(c, o->parent) && !reach(o->parent, c, depth + 1)) return false;
    if (t->parent && !bound(t->parent) && !contains(c, t->parent)) {
      bool ok = false;
      if (ir::parent_by_coordinate(*t) && (by_coord_mode_ || assembled_mode_) && !chance(0.15)) {
        ok = space_bound(t->parent, c);
        if (!ok) {
          std::vector<ir::Axis> over;
          for (auto& a : k_.axes)
            if (a != t->parent && iterable(a) && ir::coordinate_space(a) == ir::coordinate_space(t->parent))
              over.push_back(a);
          if (t->parent->dense_of && iterable(t->parent->dense_of) && chance(0.6)) over = {t->parent->dense_of};
          if (!over.empty()) ok = reach(pick_from(over), c, depth + 1);
        }
      }
      if (!ok && !reach(t->parent, c, depth + 1)) return false;
    }
    if (!can_iterate(t, c)) return false;
    c.push_back(t);
    chosen = std::move(c);
    return true;
  }
  // An axis over the coordinates of the assembled output's columns (X, dense<X>, an axis
  // declared coordinates_of<X>), X itself more often; null when none is iterable.
  ir::Axis column_axis() {
    std::vector<ir::Axis> over;
    for (auto& a : k_.axes)
      if (iterable(a) && ir::coordinate_space(a) == ir::coordinate_space(columns_of_)) over.push_back(a);
    if (iterable(columns_of_) && chance(0.6)) return columns_of_;
    return over.empty() ? nullptr : pick_from(over);
  }

  // An iteration over a random set of axes whose parents are bound (in scope or earlier); in
  // assembled mode, a top-level one starts with the rows (P or dense<P>).
  ir::Stmt iteration(int nest) {
    std::vector<ir::Axis> chosen;
    auto can = [&](const ir::Axis& a) { return can_iterate(a, chosen); };
    int want = static_cast<int>(range(1, 3));
    if (assembled_mode_ && nest == 0) {  // the rows first (after another axis, to break the rule)
      if (rows_late_) {
        std::vector<ir::Axis> other;
        for (auto& a : k_.axes)
          if (!a->parent && iterable(a) && ir::coordinate_space(a) != ir::coordinate_space(rows_axis_)) other.push_back(a);
        if (!other.empty()) chosen.push_back(pick_from(other));
      }
      chosen.push_back(row_first_);
      want += static_cast<int>(chosen.size()) - 1;
    }
    if (assembled_mode_ && chance(nest == 0 ? 0.75 : 0.35) && !space_bound(columns_of_, chosen))
      if (ir::Axis x = column_axis()) reach(x, chosen, 0);
    if (by_coord_mode_ && by_coord_axis_ && chance(0.5)) reach(by_coord_axis_, chosen, 0);
    for (int tries = 0; tries < 12 && static_cast<int>(chosen.size()) < want; ++tries) {
      std::vector<ir::Axis> options;
      std::vector<ir::Axis> merges;  // co-iterations, when there are some, get every other pick
      for (auto& a : k_.axes)
        if (can(a)) {
          options.push_back(a);
          if (a->merge != ir::MergeOp::none) merges.push_back(a);
        }
      if (options.empty()) break;
      chosen.push_back(!merges.empty() && chance(0.5) ? pick_from(merges) : pick_from(options));
    }
    if (chosen.empty()) return ir::Stmt();
    std::vector<ir::Var> vars;
    const std::size_t depth0 = scope_.size();
    for (auto& a : chosen) {
      vars.push_back(iterator_for(a));
      scope_.push_back({vars.back(), a});
      if (assembled_mode_ && nest == 0 && a == row_first_) row_var_ = vars.back();
    }
    std::vector<ir::Stmt> body;
    std::vector<ir::Buffer> locals;
    if (chance(0.3)) {
      ir::BufferNode b;
      b.name = "t" + std::to_string(counter_++);
      b.dtype = T_;
      b.scope = ir::BufferScope::local;
      b.role = ir::BufferRole::temp;
      ir::Buffer l = ir::make_buffer(std::move(b));
      body.push_back(ir::store(l, {}, value(2)));
      locals.push_back(l);
      locals_.push_back(l);
    }
    int n = static_cast<int>(range(1, 3));
    for (int s = 0; s < n; ++s) {
      if (nest < 2 && chance(0.3)) {
        body.push_back(iteration(nest + 1));
        continue;
      }
      if (!locals_.empty() && chance(0.25)) {
        body.push_back(ir::reduce(pick_from(locals_), {}, ir::ReduceOp::add, value(2)));
        continue;
      }
      body.push_back(conditional(write()));
    }
    for (std::size_t q = 0; q < locals.size(); ++q) locals_.pop_back();
    ir::Stmt b = ir::seq(std::move(body));
    if (!b.defined()) b = write();
    if (nest == 0) row_var_ = ir::Var();
    if (!b.defined()) {
      scope_.resize(depth0);
      return ir::Stmt();
    }
    if (!locals.empty()) b = ir::block("locals" + std::to_string(counter_++), locals, b);
    scope_.resize(depth0);
    std::vector<ir::IterKind> kinds(chosen.size(), ir::IterKind::spatial);
    return ir::Stmt(std::make_shared<ir::SparseIterationNode>(
        "it" + std::to_string(counter_++), chosen, vars, std::move(kinds), ir::Stmt(), b, ir::SourceLoc{}));
  }

  // An iterator in scope over the coordinate space of root slot axis a.
  const Bound* coordinate_iterator(const ir::Axis& a) {
    std::vector<const Bound*> c, shared;
    for (auto& b : scope_)
      if (ir::coordinate_space(b.axis) == ir::coordinate_space(a)) {
        c.push_back(&b);
        if (b.axis->coordinates_of && b.axis != a) shared.push_back(&b);
      }
    if (!shared.empty() && chance(0.5)) c = shared;  // exercise coordinates_of iterators in foreign slots
    return c.empty() ? nullptr : c[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(c.size()) - 1))];
  }
  const Bound* exact_iterator(const ir::Axis& a) {
    for (auto& b : scope_)
      if (b.axis == a) return &b;
    return nullptr;
  }

  // Write indices that follow the rules, if the scope allows them. A root slot (not followed
  // by a child) sometimes takes an indirect index; `indirect` tells the caller.
  bool write_indices(const ir::Buffer& b, std::vector<ir::Expr>& idx, bool& indirect) {
    indirect = false;
    for (std::size_t s = 0; s < b->axes.size(); ++s) {
      const ir::Axis& a = b->axes[s];
      const Bound* it = nullptr;
      if (a->parent || a->is_sparse() || (s + 1 < b->axes.size() && b->axes[s + 1]->parent)) {
        it = exact_iterator(a);
      } else {
        if (chance(0.5))
          if (ir::Expr e = indirect_index(a); e.defined()) {
            idx.push_back(e);
            indirect = true;
            continue;
          }
        if (ir::coordinate_space(a) == k_.computed_target && chance(0.6)) {
          idx.push_back(computed_index());
          indirect = true;  // a reduction, as for indirect indices
          continue;
        }
        it = coordinate_iterator(a);
      }
      if (!it) return false;
      idx.push_back(it->var);
    }
    return true;
  }

  // A computed write index into the computed target T (docs/language.md §4.1): iterators in
  // scope (not of T's coordinates, whose extent is fitted to this; not dense_variable) and
  // small constants joined by +, * c, / c, % c, min, max. Non-negative by construction but
  // for a rare `x - c`, which the front end must reject (it cannot prove the index >= 0).
  ir::Expr computed_index() {
    std::vector<const Bound*> its;
    for (auto& b : scope_)
      if (ir::coordinate_space(b.axis) != k_.computed_target && b.axis->kind != ir::AxisKind::dense_variable)
        its.push_back(&b);
    std::function<ir::Expr(int)> gen = [&](int d) -> ir::Expr {
      if (d <= 0 || chance(0.3)) {
        if (!its.empty() && chance(0.8)) return pick_from(its)->var;
        return ir::int_imm(range(0, 3));
      }
      switch (range(0, 7)) {
        case 0: case 1: return gen(d - 1) + gen(d - 1);
        case 2: return gen(d - 1) * ir::int_imm(range(1, 3));
        case 3: return gen(d - 1) / ir::int_imm(range(1, 4));
        case 4: return gen(d - 1) % ir::int_imm(range(1, 4));
        case 5: return ir::min(gen(d - 1), gen(d - 1));
        case 6: return ir::max(gen(d - 1) - ir::int_imm(range(1, 2)), ir::int_imm(0));
        default: return chance(0.1) ? gen(d - 1) - ir::int_imm(1) : ir::max(gen(d - 1), gen(d - 1));
      }
    };
    ir::Expr e = gen(2);
    if (e.as<ir::VarNode>()) e = e + ir::int_imm(range(0, 2));  // a bare iterator of another space is not computed
    return e;
  }

  // A value of a write-index buffer over a's coordinate space, read at one of its stored
  // elements by the iterators in scope; undefined when none can be read so.
  ir::Expr indirect_index(const ir::Axis& a) {
    std::vector<ir::Buffer> options;
    for (auto& w : write_index_buffers_)
      for (auto& d : k_.buffers)
        if (d.buffer == w && d.write_target == ir::coordinate_space(a)) options.push_back(w);
    if (options.empty()) return ir::Expr();
    const ir::Buffer w = pick_from(options);
    std::vector<ir::Expr> idx;
    for (std::size_t q = 0; q < w->axes.size(); ++q) {
      const ir::Axis& x = w->axes[q];
      const bool exact = x->parent || x->is_sparse() || (q + 1 < w->axes.size() && w->axes[q + 1]->parent);
      const Bound* it = exact ? exact_iterator(x) : coordinate_iterator(x);
      if (!it) return ir::Expr();
      idx.push_back(it->var);
    }
    ir::Expr l = ir::load(w, idx);
    return w->dtype == DType::i64 || chance(0.5) ? l : ir::cast(DType::i64, l);
  }

  // c(r, x) of the assembled output: r the row iterator of the top-level iteration (scattered:
  // sometimes another iterator over P's coordinates, or half of one: a computed row, or a
  // value of an index buffer over P's coordinates: an indirect row, as COO -> CSR has), x an
  // iterator over the columns' coordinates (of another space to break the rule).
  bool assembled_indices(std::vector<ir::Expr>& idx) {
    if (!row_var_.defined()) return false;
    ir::Expr row = row_var_;
    ir::Expr from_index = indirect_rows_ && chance(0.6) ? indirect_index(rows_axis_) : ir::Expr();
    if (from_index.defined()) {
      row = from_index;
    } else if (scattered_ && chance(0.6)) {
      std::vector<const Bound*> rows;
      for (auto& b : scope_)
        if (ir::coordinate_space(b.axis) == ir::coordinate_space(rows_axis_) && b.axis->kind != ir::AxisKind::dense_variable)
          rows.push_back(&b);
      if (!rows.empty()) row = pick_from(rows)->var;
      if (chance(0.25)) row = ir::binary(ir::BinOp::div, row, ir::int_imm(2));
    }
    const Bound* x = coordinate_iterator(assembled_axis_);
    if (break_ == Break::wrong_column && chance(0.7)) {
      std::vector<const Bound*> other;
      for (auto& b : scope_)
        if (ir::coordinate_space(b.axis) != ir::coordinate_space(columns_of_)) other.push_back(&b);
      if (!other.empty()) x = pick_from(other);
    }
    if (!x) return false;
    idx = {row, x->var};
    return true;
  }

  ir::Stmt write() {
    std::vector<ir::Buffer> options = outputs_;
    std::shuffle(options.begin(), options.end(), rng_);
    for (auto& b : options) {
      std::vector<ir::Expr> idx;
      bool indirect = false;
      if (b == assembled_buf_ ? !assembled_indices(idx) : !write_indices(b, idx, indirect)) continue;
      bool all = true;
      for (auto& s : scope_) {
        bool used = false;
        for (auto& e : idx) used = used || e.same_as(s.var);
        all = all && used;
      }
      ir::Expr v = value(3);
      if (all && !indirect && chance(0.35) && !(scattered_ && b == assembled_buf_)) return ir::store(b, idx, v);
      ir::ReduceOp op = ops_.at(b.get());
      if (op == ir::ReduceOp::mul) v = ir::select(v > ir::make_const(T_, 0), ir::make_const(T_, 1), ir::make_const(T_, -1));
      return ir::reduce(b, idx, op, v);
    }
    // No output can be written here: accumulate into a local if there is one.
    if (!locals_.empty()) return ir::reduce(pick_from(locals_), {}, ir::ReduceOp::add, value(2));
    return ir::Stmt();
  }

  ir::Expr read_index(const ir::Axis& a, const std::vector<ir::Expr>& prev, std::size_t s, const ir::Buffer& b) {
    (void)prev;
    (void)s;
    (void)b;
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.75) {
      if (a->parent || a->is_sparse()) {
        if (const Bound* it = exact_iterator(a); it && chance(0.8)) return it->var;
      }
      if (const Bound* it = coordinate_iterator(a)) return it->var;
    }
    if (r < 0.85 && !scope_.empty()) {
      const Bound& it = scope_[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(scope_.size()) - 1))];
      return ir::Expr(it.var) + range(-1, 1);
    }
    if (r < 0.93 && !index_buffers_.empty() && depth_ < 2) {
      ++depth_;
      ir::Buffer ib = pick_from(index_buffers_);
      std::vector<ir::Expr> idx;
      for (std::size_t q = 0; q < ib->axes.size(); ++q) idx.push_back(read_index(ib->axes[q], idx, q, ib));
      --depth_;
      return ir::cast(DType::i64, ir::load(ib, idx));
    }
    return ir::int_imm(range(0, 3));
  }

  ir::Expr leaf() {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.6) {
      std::vector<ir::Buffer> readable = inputs_;
      if (chance(0.05) || (break_ == Break::read && chance(0.4)))
        for (auto& o : outputs_)  // c only to break the rule
          if (o != assembled_buf_ || break_ == Break::read) readable.push_back(o);
      ir::Buffer b = pick_from(readable);
      std::vector<ir::Expr> idx;
      for (std::size_t s = 0; s < b->axes.size(); ++s) idx.push_back(read_index(b->axes[s], idx, s, b));
      return ir::load(b, idx);
    }
    if (r < 0.7 && !scalars_.empty()) return pick_from(scalars_);
    if (r < 0.8 && !locals_.empty()) return ir::load(pick_from(locals_), {});
    if (r < 0.9 && !scope_.empty()) {
      const Bound& it = scope_[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(scope_.size()) - 1))];
      return ir::cast(T_, it.var);
    }
    return ir::make_const(T_, static_cast<double>(range(-2, 3)));
  }

  // Conditional writes (docs/language.md §4.7): about one write in five runs under a test,
  // a third of those with a second write in an else branch. Decided, and the test and the
  // else branch drawn, by a generator of its own, so that the other kernels of a seed stay
  // what they were. The test compares values that every engine computes alike: inputs,
  // parameters, iterators, constants, and locals only where data are exact (a float sum in
  // another order must not take the other branch).
  ir::Stmt conditional(ir::Stmt s) {
    if (!s.defined() || cond_rng_() % 5 != 0) return s;
    std::swap(rng_, cond_rng_);
    ir::Expr c = comparison();
    if (chance(0.2)) c = ir::binary(chance(0.5) ? ir::BinOp::land : ir::BinOp::lor, c, comparison());
    if (chance(0.1)) c = ir::unary(ir::UnOp::lnot, c);
    ir::Stmt otherwise = chance(0.33) ? write() : ir::Stmt();
    std::swap(rng_, cond_rng_);
    return ir::if_then_else(c, s, otherwise);
  }
  ir::Expr comparison() {
    static constexpr ir::BinOp ops[] = {ir::BinOp::lt, ir::BinOp::le, ir::BinOp::gt,
                                        ir::BinOp::ge, ir::BinOp::eq, ir::BinOp::ne};
    ir::Expr a = test_leaf();
    ir::Expr b = chance(0.5) ? test_leaf() : ir::make_const(T_, static_cast<double>(range(-1, 2)));
    return ir::binary(ops[range(0, 5)], a, b);
  }
  ir::Expr test_leaf() {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.6 && !inputs_.empty()) {
      ir::Buffer b = pick_from(inputs_);
      std::vector<ir::Expr> idx;
      for (std::size_t s = 0; s < b->axes.size(); ++s) idx.push_back(read_index(b->axes[s], idx, s, b));
      return ir::load(b, idx);
    }
    if (r < 0.7 && !scalars_.empty()) return pick_from(scalars_);
    if (r < 0.8 && k_.exact && !locals_.empty()) return ir::load(pick_from(locals_), {});
    if (r < 0.9 && !scope_.empty()) {
      const Bound& it = scope_[static_cast<std::size_t>(range(0, static_cast<std::int64_t>(scope_.size()) - 1))];
      return ir::cast(T_, it.var);
    }
    return ir::make_const(T_, static_cast<double>(range(-2, 3)));
  }

  ir::Expr value(int d) {
    if (d <= 0 || chance(0.3)) return leaf();
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.3) return value(d - 1) + value(d - 1);
    if (r < 0.45) return value(d - 1) - value(d - 1);
    if (r < 0.6 && muls_ < 2) {
      ++muls_;
      ir::Expr e = value(d - 1) * leaf();
      --muls_;
      return e;
    }
    if (r < 0.7) return ir::max(value(d - 1), value(d - 1));
    if (r < 0.75) return ir::min(value(d - 1), value(d - 1));
    if (r < 0.85) return ir::select(value(d - 1) < value(d - 1), value(d - 1), value(d - 1));
    if (!k_.exact) {
      if (chance(0.5))
        return value(d - 1) / (ir::call(ir::Intrinsic::abs, {value(d - 1)}) + ir::make_const(T_, 1));
      // exp(-min(|v|, 60)): bounded away from underflow, where libm implementations differ
      // by an ulp between 0 and the smallest subnormal (CUDA's exp against glibc's), and a
      // comparison with 0 would turn that into a different branch (GPU fuzz seed
      // 45000191: exp(-746) > 0.0 on the GPU, not on the CPU).
      return ir::call(ir::Intrinsic::exp,
                      {ir::make_const(T_, 0) -
                       ir::min(ir::call(ir::Intrinsic::abs, {value(d - 1)}), ir::make_const(T_, 60))});
    }
    return value(d - 1) + leaf();
  }

  std::mt19937_64 rng_;
  std::mt19937_64 cond_rng_;  // conditional(): its own, so that the other kernels of a seed stay
  std::mt19937_64 share_rng_;  // share_merge_fibers: merge operands over one pattern
  RandomKernel k_;
  DType T_ = DType::f32;
  std::vector<ir::Axis> roots_, views_;
  ir::Axis gather_columns_, gather_features_;  // gathered_mode_: G and F (gathered_dot)
  std::map<const ir::AxisNode*, std::int64_t> fixed_npr_;
  std::set<const ir::AxisNode*> in_buffers_;
  std::vector<ir::Buffer> inputs_, outputs_, index_buffers_, write_index_buffers_, locals_;
  std::map<const ir::BufferNode*, ir::ReduceOp> ops_;
  std::vector<ir::Var> scalars_;
  std::vector<ir::FuncScalar> user_scalars_;
  std::vector<Bound> scope_;
  int counter_ = 0, muls_ = 0, depth_ = 0;
  bool is_index_buffer_ = false;
  const ir::AxisNode* write_target_ = nullptr;
  // The modes of the file comment.
  bool assembled_mode_ = false, by_coord_mode_ = false, merge_mode_ = false, gathered_mode_ = false;
  std::vector<ir::Axis> merged_;  // union_of / intersection_of axes (merge_mode_)
  enum class Break { none, read, second_output, row_not_first, two_top_level, inout, wrong_column };
  Break break_ = Break::none;
  bool scattered_ = false;  // assembled mode: c written at scattered rows, one operator
  bool indirect_rows_ = false;  // scattered: an index buffer over P's coordinates may give c's row
  bool rows_late_ = false;  // assembled mode: the top-level iteration starts with another axis
  ir::Axis by_coord_axis_;  // R, whose parent is a root dense axis
  ir::Axis rows_axis_, row_first_, columns_of_, assembled_axis_;  // P; P or dense<P>; X; S = assembled<P, X>
  ir::Buffer assembled_buf_;
  ir::Var row_var_;  // the row iterator of the top-level iteration being made (assembled mode)
};

}  // namespace detail_gen

inline RandomKernel generate_kernel(std::uint64_t seed) { return detail_gen::Generator(seed).make(); }

// Copies the interpreter's float error bounds (Interpreter::error_bound) of k's buffers after
// a reference run into k.error_bounds. The buffers are matched by name: the interpreted IR
// may be another IR of k's kernel (the frontend fuzzer interprets the front end's too), whose
// buffer nodes are not k's (matched by node, every bound read 0 and the comparisons fell
// back to the 1e-3 relative floor: spindle-frontend-fuzz seed 1205003797).
template <class Interpreter>
void record_error_bounds(RandomKernel& k, const Interpreter& interp) {
  k.error_bounds.clear();
  for (auto& b : k.buffers) {
    std::vector<double> e(static_cast<std::size_t>(b.count));
    const ir::BufferNode* node = interp.buffer_named(b.buffer->name);
    if (!node) node = b.buffer.get();
    for (std::int64_t q = 0; q < b.count; ++q) e[static_cast<std::size_t>(q)] = interp.error_bound(node, q);
    k.error_bounds.push_back(std::move(e));
  }
}

// The tolerance for element q of buffer b when results are not exact: a relative floor
// (1e-3 for f32, 1e-9 for f64) or the interpreter's reduction-order bound, whichever is larger.
inline double allowed_difference(const RandomKernel& k, std::size_t b, std::size_t q, double tol, double r) {
  double bound = b < k.error_bounds.size() && q < k.error_bounds[b].size() ? k.error_bounds[b][q] : 0.0;
  return std::max(tol * std::max(1.0, std::fabs(r)), bound);
}
inline bool close_enough(const RandomKernel& k, std::size_t b, std::size_t q, double tol, double r, double g) {
  if ((std::isnan(r) && std::isnan(g)) || r == g) return true;
  if (tol == 0) return false;
  return std::fabs(r - g) <= allowed_difference(k, b, q, tol, r);
}

// New data for k's program, of thousands of rows: the first root axis gets an awkward
// length around 1000-3000 (times `scale`), the other roots up to 129, sparse fibers up to 8
// coordinates among up to 3000, so that every parallel schedule splits its loops across
// threads. The program is unchanged. Returns false (the data half made) when a buffer would
// hold more than `max_elements` values — a buffer over two chains of one sparse axis holds
// positions squared — so that the caller tries a smaller scale.
inline bool make_large_data(RandomKernel& k, std::uint64_t seed, double scale, std::int64_t max_elements = 4'000'000) {
  std::mt19937_64 rng(seed), share_rng(seed ^ 0x9b05688c2b3e6c1fULL);
  auto range = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto big = [&](std::int64_t v) { return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(v) * scale)); };
  bool first_root = true;
  for (auto& a : k.axes) {
    AxisArrays d;
    if (a->dense_of) {
      d.length = k.data.at(a->dense_of.get()).length;
      d.positions = d.length;
      d.finish();
      k.data[a.get()] = d;
      continue;
    }
    d.index_dtype = a->index_dtype;
    const std::int64_t parents = a->parent ? k.data.at(a->parent.get()).positions : 1;
    switch (a->kind) {
      case ir::AxisKind::dense_fixed:
        if (auto* fixed = a->length.as<ir::IntImmNode>()) {  // dense_fixed_n<N>
          d.length = d.positions = fixed->value;
          break;
        }
        // Inner lengths: remainders of the register tiles (3, 17, 129) and lengths equal to a tile
        // width (16, 32, 64), which register_tile gives versions of their own.
        d.length = first_root ? big(std::vector<std::int64_t>{997, 1531, 2048, 2999, 3001}[static_cast<std::size_t>(range(0, 4))])
                              : big(std::vector<std::int64_t>{3, 16, 17, 32, 64, 129}[static_cast<std::size_t>(range(0, 5))]);
        first_root = false;
        d.positions = d.length;
        break;
      case ir::AxisKind::dense_variable:
        d.indptr.push_back(0);
        for (std::int64_t p = 0; p < parents; ++p) {
          std::int64_t n = chance(0.2) ? 0 : range(1, 6);
          d.length = std::max(d.length, n);
          d.indptr.push_back(d.indptr.back() + n);
        }
        d.positions = d.indptr.back();
        break;
      case ir::AxisKind::sparse_variable:
        d.length = a->coordinates_of ? k.data.at(ir::coordinate_space(a)).length : big(range(40, 3000));
        d.indptr.push_back(0);
        for (std::int64_t p = 0; p < parents; ++p) {
          std::set<std::int64_t> fiber;
          // Some of G's fibers longer than prefetch_gathers' distance (8), so that its prefetches
          // run; the chance is drawn for G alone, so other axes get the data they always had.
          const bool long_fiber = a.get() == k.long_fibers && chance(0.3);
          std::int64_t n = std::min<std::int64_t>(d.length, chance(0.15) ? 0 : long_fiber ? range(9, 40) : range(1, 8));
          while (static_cast<std::int64_t>(fiber.size()) < n) fiber.insert(range(0, d.length - 1));
          d.indices.insert(d.indices.end(), fiber.begin(), fiber.end());
          d.indptr.push_back(static_cast<std::int64_t>(d.indices.size()));
        }
        d.positions = d.indptr.back();
        share_merge_fibers(k.axes, k.data, a, d, share_rng);
        break;
      case ir::AxisKind::sparse_fixed: {
        auto* fixed = a->nnz_per_row.as<ir::IntImmNode>();
        // A root sparse axis (a sparse vector) is one long fiber: thousands of entries.
        d.nnz_per_row = fixed ? fixed->value : a->parent ? range(0, 3) : big(range(500, 3000));
        d.length = d.nnz_per_row + big(range(0, a->parent ? 1000 : 3000));
        for (std::int64_t p = 0; p < parents; ++p) {
          std::set<std::int64_t> picked;
          while (static_cast<std::int64_t>(picked.size()) < d.nnz_per_row) picked.insert(range(0, d.length - 1));
          d.indices.insert(d.indices.end(), picked.begin(), picked.end());
        }
        d.positions = parents * d.nnz_per_row;
        break;
      }
    }
    d.finish();
    k.data[a.get()] = d;
  }
  fit_computed_target(k, range);
  for (auto& b : k.buffers)
    if (buffer_elements(k, *b.buffer) > max_elements) return false;
  for (auto& b : k.buffers) fill_buffer(k, b, range, 40);
  return true;
}

// Puts the coordinates of every fiber of k's sparse axes out of order (same coordinates and
// positions: the values at each position stay, so they now belong to other coordinates —
// another valid input, which the interpreter reads the same way) and marks those axes
// unsorted. `repeat`: the last position of each such fiber then takes the first one's
// coordinate, so the fiber repeats a coordinate (an unsorted Csr may: docs/language.md §7).
// Returns whether any fiber changed (fibers of fewer than two entries cannot).
inline bool shuffle_fibers(RandomKernel& k, std::uint64_t seed, bool repeat = false) {
  std::mt19937_64 rng(seed);
  bool any = false;
  for (auto& a : k.axes) {
    if (!a->is_sparse() || a->dense_of || a->assembled || a->merge != ir::MergeOp::none) continue;
    AxisArrays& d = k.data.at(a.get());
    const std::int64_t fibers = a->kind == ir::AxisKind::sparse_fixed
                                    ? (d.nnz_per_row > 0 ? static_cast<std::int64_t>(d.indices.size()) / d.nnz_per_row : 0)
                                    : static_cast<std::int64_t>(d.indptr.size()) - 1;
    bool changed = false;
    for (std::int64_t f = 0; f < fibers; ++f) {
      const std::int64_t lo = a->kind == ir::AxisKind::sparse_fixed ? f * d.nnz_per_row : d.indptr[static_cast<std::size_t>(f)];
      const std::int64_t hi = a->kind == ir::AxisKind::sparse_fixed ? lo + d.nnz_per_row : d.indptr[static_cast<std::size_t>(f) + 1];
      if (hi - lo < 2) continue;
      auto first = d.indices.begin() + lo, last = d.indices.begin() + hi;
      std::shuffle(first, last, rng);
      if (std::is_sorted(first, last)) std::reverse(first, last);  // distinct coordinates: now descending
      if (repeat) *(last - 1) = *first;
      changed = true;
    }
    if (!changed) continue;
    d.finish();
    k.unsorted.insert(a.get());
    any = true;
  }
  return any;
}

}  // namespace spindle::test
