// Call-time binding: checks the call's arguments against the kernel's buffers and fills
// the flat ABI arrays (buffer pointers, symbolic shape values) of the generated code.
//
// Each buffer argument describes itself as a StorageView, one level per buffer axis. The
// binder checks the element dtype, the number and kinds of levels, writability of outputs,
// and binds every axis from the first argument that carries it; later arguments must agree
// (same length, and the same indptr/indices contents where two buffers share a sparse
// axis). Kernels that search an axis require its indices sorted. The values an out/inout
// argument receives must not overlap any other array of the call (another argument's values,
// or any indptr/indices, its own included); read-only arrays may be shared. Nothing the
// caller passed is modified: errors are raised before the kernel runs. A kernel that writes
// at indirect indices (`c(idx(e), k) += ...`, ir/indirect.hpp) has every stored value of each
// index buffer checked against the extent of the axis it indexes (FormatError naming the
// first bad value); for a GPU call the check is handed back to the caller (the CUDA runtime
// copies the index array to the host for it), since device memory is never read here. A write
// at a computed index (`d(io * 4 + ii, k) += ...`, ir/affine_index.hpp) has the upper bound of
// its index proved from the bound extents (ShapeError naming the bound; O(1)).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "spindle/format/storage.hpp"
#include "spindle/ir/function.hpp"
#include "spindle/ir/affine_index.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/ir/indirect.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/runtime/call_arg.hpp"

namespace spindle::runtime {

class ArgBinder {
 public:
  // stage1 names the user-facing buffers and scalars; stage3 fixes the ABI order.
  // `device`: the kernel runs on a GPU and every buffer argument must be in device memory
  // (StorageView::on_device); device memory is never read here.
  ArgBinder(const ir::Function& stage1, const ir::Function& stage3, bool device = false)
      : kernel_(stage1.name), device_(device) {
    for (auto& b : stage1.buffers)  // (arg -1: the placeholder of an assembled output, lower/split_assembly.hpp)
      if (!(b.origin.kind == ir::ParamOrigin::values && b.origin.arg < 0)) user_buffers_.push_back(b);
    for (auto& s : stage1.scalars)
      if (s.origin.kind == ir::ParamOrigin::scalar) user_scalars_.push_back(s);
    abi_buffers_ = stage3.buffers;
    abi_scalars_ = stage3.scalars;
    // Axes that the code searches (binary search into indices) or merges (co-iteration: a
    // merge of unsorted fibers would visit a coordinate twice or miss it) need sorted fibers.
    struct Searches : ir::IRVisitor {
      std::set<std::string> names;
      bool in_key = false;
      void visit_FindPos(const ir::FindPosNode* n) override {
        // A segment search reads an indptr, which is non-decreasing in every valid input.
        if (n->mode == ir::FindMode::exact) names.insert(n->indices->name);
        ir::IRVisitor::visit_FindPos(n);
      }
      void visit_Load(const ir::LoadNode* n) override {
        if (in_key) names.insert(n->buffer->name);  // the merged keys: indices arrays
        ir::IRVisitor::visit_Load(n);
      }
      void visit_CoIterate(const ir::CoIterateNode* n) override {
        in_key = true;
        for (const auto& o : n->operands) visit(o.key);
        in_key = false;
        ir::IRVisitor::visit_CoIterate(n);
      }
    } searches;
    searches.visit(stage3.body);
    for (auto& b : stage3.buffers)
      if (b.origin.kind == ir::ParamOrigin::indices && searches.names.count(b.buffer->name))
        sorted_required_.insert(b.origin.axis.get());
    struct Uses : ir::IRVisitor {
      std::set<const ir::ExprNode*> vars;
      void visit_Var(const ir::VarNode* n) override { vars.insert(n); }
    } uses;
    uses.visit(stage3.body);
    for (auto& b : stage3.buffers)
      for (auto& e : b.buffer->shape) uses.visit(e);
    for (auto& s : stage3.scalars) scalar_used_.push_back(uses.vars.count(s.var.get()) > 0);
    axis_count_ = stage1.axes.size();
    num_args_ = static_cast<int>(user_buffers_.size() + user_scalars_.size());
    find_indirect_indices(stage1);
    find_computed_indices(stage1);
    find_coordinate_written_roots(stage1);
  }

  // An index buffer whose stored values a call must check: each in [0, extent).
  struct IndexCheck {
    const void* data = nullptr;  // host or device pointer to `count` values of `dtype`
    DType dtype = DType::i32;
    std::int64_t count = 0;
    std::int64_t extent = 0;
    std::string what;  // "kernel 'k': argument 2 ('idx') ... axis I of buffer 'c'"
    // The values must also be pairwise distinct: the indices of a sparse root that a device
    // call writes at (find_coordinate_written_roots), which the GPU build updates from
    // parallel threads with no test of its own.
    bool distinct = false;
  };

  // Throws FormatError naming the first value outside [0, extent). `host` holds the values.
  // Blocks of values are first tested branch-free in their own width (unsigned: the negatives
  // are the large values; an extent beyond the type's positive range leaves only those), a
  // loop that vectorises, and only a block with a value outside is read again for the first
  // one: a per-value test and branch (the value kept for the message) took 6 % of the samples
  // of a COO -> CSR benchmark run, about as much as the two phases' generated code.
  template <class X>
  static std::int64_t first_outside(const X* p, std::int64_t n, std::int64_t extent) {
    using U = std::make_unsigned_t<X>;
    const U lim = static_cast<U>(std::min<std::uint64_t>(static_cast<std::uint64_t>(extent),
                                                          std::uint64_t{static_cast<U>(std::numeric_limits<X>::max())} + 1));
    constexpr std::int64_t kBlock = 4096;
    for (std::int64_t b = 0; b < n; b += kBlock) {
      const std::int64_t e = std::min(n, b + kBlock);
      U outside = 0;
      for (std::int64_t k = b; k < e; ++k) outside |= static_cast<U>(static_cast<U>(p[k]) >= lim);
      if (!outside) continue;
      for (std::int64_t k = b; k < e; ++k)
        if (static_cast<U>(p[k]) >= lim) return k;
    }
    return -1;
  }

  static void check_index_values(const IndexCheck& c, const void* host) {
    const std::int64_t k = c.dtype == DType::i64
                               ? first_outside(static_cast<const std::int64_t*>(host), c.count, c.extent)
                               : first_outside(static_cast<const std::int32_t*>(host), c.count, c.extent);
    if (k >= 0) {
      const std::int64_t v = c.dtype == DType::i64 ? static_cast<const std::int64_t*>(host)[k]
                                                   : static_cast<const std::int32_t*>(host)[k];
      throw FormatError(message(c.what, ": value ", v, " at position ", k, " is outside [0, ", c.extent,
                                "), so the update that uses it would be lost; nothing was written; hint: every "
                                "stored value of an index buffer must be a coordinate of the axis it indexes"));
    }
    if (!c.distinct || c.count < 2) return;
    std::vector<std::pair<std::int64_t, std::int64_t>> vp(static_cast<std::size_t>(c.count));  // (value, position)
    for (std::int64_t q = 0; q < c.count; ++q)
      vp[static_cast<std::size_t>(q)] = {c.dtype == DType::i64 ? static_cast<const std::int64_t*>(host)[q]
                                                               : static_cast<const std::int32_t*>(host)[q],
                                         q};
    std::sort(vp.begin(), vp.end());
    for (std::size_t q = 1; q < vp.size(); ++q)
      if (vp[q].first == vp[q - 1].first)
        throw FormatError(message(c.what, ": coordinate ", vp[q].first, " is stored at positions ", vp[q - 1].second,
                                  " and ", vp[q].second, "; the GPU build updates the elements at these coordinates "
                                  "from parallel threads, so the two would race; nothing was written; hint: store "
                                  "each coordinate once (sum the repeated entries), or run the kernel on the CPU"));
  }

  int num_args() const { return num_args_; }

  // Fills buffers[abi_buffers.size()] and scalars[abi_scalars.size()]. A device call of a
  // kernel with indirect writes passes `device_checks`: the index checks to run on copies of
  // the device arrays before the launch.
  // `threads`: the thread count the call runs with (ParamOrigin::threads scalars).
  // `checked`: the host checks an earlier kernel of the same call ran (skipped here), to which
  // the ones run here are added (call_arg.hpp, CheckedIndexValues).
  // `serial` (host calls): set when the call must run its parallel loops on one thread — a
  // sparse root whose iterator writes at its coordinates repeats or reorders them in this
  // call (two positions of one coordinate would update one element from two threads).
  void bind(const std::vector<CallArg>& args, void** buffers, std::int64_t* scalars,
            std::vector<IndexCheck>* device_checks = nullptr, std::int64_t threads = 1,
            CheckedIndexValues* checked = nullptr, bool* serial = nullptr) const {
    SPINDLE_CHECK(static_cast<int>(args.size()) == num_args_, UserError, "kernel '", kernel_, "' takes ",
                  num_args_, " arguments, got ", args.size());
    Bindings axes;
    axes.reserve(axis_count_);
    for (auto& b : user_buffers_) bind_buffer(b, args, axes);
    check_aliasing(args, axes);
    if (!indirect_.empty()) {
      SPINDLE_INTERNAL_CHECK(!device_ || device_checks, "bind_args", "a device call with indirect writes must take "
                             "the index checks");
      if (device_checks) device_checks->clear();
      for (auto& ind : indirect_) {
        const Binding* len = axes.find(ind.space);
        SPINDLE_INTERNAL_CHECK(len && len->has_length, "bind_args", "indirect write into unbound axis ",
                               ind.space->name);
        const StorageView& v = args[ind.arg].view;
        IndexCheck c{v.data, v.dtype, v.value_count, len->length,
                     message("kernel '", kernel_, "': argument ", ind.arg, " ('", ind.index_buffer,
                             "') indexes axis ", ind.axis, " of buffer '", ind.target, "' (an indirect write)")};
        if (device_) {
          device_checks->push_back(std::move(c));
        } else if (!checked || !checked->contains(c.data, c.dtype, c.count, c.extent)) {
          check_index_values(c, c.data);
          if (checked) checked->passed.push_back({c.data, c.dtype, c.count, c.extent});
        }
      }
    }
    for (auto& c : computed_) check_computed_index(c, axes);
    for (std::size_t k = 0; k < abi_buffers_.size(); ++k) {
      const auto& p = abi_buffers_[k];
      switch (p.origin.kind) {
        case ir::ParamOrigin::values: buffers[k] = args[p.origin.arg].view.data; break;
        case ir::ParamOrigin::indptr: buffers[k] = const_cast<void*>(bound(axes, p).indptr); break;
        case ir::ParamOrigin::indices: {
          const Binding& b = bound(axes, p);
          SPINDLE_CHECK(b.sorted || !sorted_required_.count(p.origin.axis.get()), FormatError, "kernel '",
                        kernel_, "' searches or merges the coordinates of axis ", p.origin.axis->name,
                        " (binary search, co-iteration), but argument '", b.buffer, "' has a fiber whose indices are not "
                        "sorted; hint: sort the indices of every fiber (Csr::canonical() returns a sorted copy; "
                        "Csr::from_triplets and read_matrix_market build sorted rows)");
          buffers[k] = const_cast<void*>(b.indices);
          break;
        }
        default: throw InternalError("bind_args: unexpected buffer origin");
      }
    }
    if (device_ && device_checks)  // a root that may repeat a coordinate the GPU build writes at
      for (const ir::AxisNode* r : coordinate_written_roots_)
        if (const Binding* b = axes.find(r); b && b->structure && !b->sorted && b->nnz_per_row > 1)
          device_checks->push_back({b->indices, b->index_dtype, b->nnz_per_row,
                                    b->has_length ? b->length : std::numeric_limits<std::int64_t>::max(),
                                    message("kernel '", kernel_, "': argument '", b->buffer, "', the indices of sparse "
                                            "root ", r->name, ", whose coordinates the kernel writes at"),
                                    true});
    if (serial) {
      *serial = false;
      for (const ir::AxisNode* r : coordinate_written_roots_)
        if (const Binding* b = axes.find(r); b && b->structure && !root_ascending(*b)) *serial = true;
      if (*serial) threads = 1;
    }
    for (std::size_t k = 0; k < abi_scalars_.size(); ++k)
      scalars[k] = abi_scalars_[k].origin.kind == ir::ParamOrigin::threads ? std::max<std::int64_t>(threads, 1)
                                                                            : scalar_value(abi_scalars_[k], k, args, axes);
  }

 private:
  struct IndirectIndex {
    int arg;                      // the index buffer's call argument
    const ir::AxisNode* space;    // the coordinate space of the slot it indexes
    std::string index_buffer, target, axis;
  };

  // Writes (reductions) whose index in a root slot is a value of an `in` buffer.
  void find_indirect_indices(const ir::Function& stage1) {
    struct Scan : ir::IRVisitor {
      std::vector<std::pair<const ir::ReduceNode*, std::size_t>> slots;
      void visit_Reduce(const ir::ReduceNode* n) override {
        for (std::size_t s = 0; s < n->indices.size() && s < n->buffer->axes.size(); ++s)
          if (!n->buffer->axes[s]->parent && n->buffer->axes[s]->is_dense() && ir::indirect_index_load(n->indices[s]))
            slots.push_back({n, s});
        ir::IRVisitor::visit_Reduce(n);
      }
    } scan;
    scan.visit(stage1.body);
    for (auto& [n, s] : scan.slots) {
      const ir::LoadNode* l = ir::indirect_index_load(n->indices[s]);
      const ir::AxisNode* space = ir::coordinate_space(n->buffer->axes[s]);
      int arg = -1;
      for (auto& b : user_buffers_)
        if (b.buffer.get() == l->buffer.get()) arg = b.origin.arg;
      SPINDLE_INTERNAL_CHECK(arg >= 0, "bind_args", "indirect index buffer '", l->buffer->name,
                             "' is not a kernel argument");
      bool seen = false;
      for (auto& x : indirect_) seen = seen || (x.arg == arg && x.space == space);
      if (!seen) indirect_.push_back({arg, space, l->buffer->name, n->buffer->name, n->buffer->axes[s]->name});
    }
  }

  struct Binding {
    bool has_length = false;
    std::int64_t length = 0, nnz = 0, nnz_per_row = 0, parents = 0;
    const void* indptr = nullptr;
    const void* indices = nullptr;
    DType index_dtype = DType::i32;
    bool sorted = true, structure = false;
    std::uint64_t fingerprint = 0;
    std::string_view buffer;  // the buffer that bound it (its name in the kernel's IR), for messages
    const ir::AxisNode* via = nullptr;  // the buffer axis that bound the extent, for messages
  };

  // Axis -> binding, a flat list: kernels have a handful of axes. Up to kInline of them live
  // on the stack (no allocation on the call path), more in `more`.
  struct Bindings {
    static constexpr std::size_t kInline = 16;
    InlineVector<std::pair<const ir::AxisNode*, Binding>, kInline> items;
    std::vector<std::pair<const ir::AxisNode*, Binding>> more;
    void reserve(std::size_t n) {
      if (n > kInline) more.reserve(n - kInline);
    }
    Binding& operator[](const ir::AxisNode* a) {
      if (Binding* b = lookup(a)) return *b;
      if (items.size() < kInline) {
        items.push_back({a, Binding{}});
        return items.back().second;
      }
      more.emplace_back(a, Binding{});
      return more.back().second;
    }
    const Binding* find(const ir::AxisNode* a) const { return const_cast<Bindings*>(this)->lookup(a); }

   private:
    Binding* lookup(const ir::AxisNode* a) {
      for (auto& [k, v] : items)
        if (k == a) return &v;
      for (auto& [k, v] : more)
        if (k == a) return &v;
      return nullptr;
    }
  };

  std::string arg_name(const ir::FuncBuffer& b) const {
    return message("argument ", b.origin.arg, " ('", b.buffer->name, "')");
  }

  void bind_buffer(const ir::FuncBuffer& fb, const std::vector<CallArg>& args,
                   Bindings& axes) const {
    const ir::BufferNode& b = *fb.buffer;
    const CallArg& arg = args[fb.origin.arg];
    SPINDLE_CHECK(!arg.is_scalar, UserError, "kernel '", kernel_, "': ", arg_name(fb),
                  " must be a tensor or sparse matrix, got a scalar");
    const StorageView& v = arg.view;
    SPINDLE_CHECK(v.on_device == device_, UserError, "kernel '", kernel_, "': ", arg_name(fb), " (", v.description(),
                  ") is in ", v.on_device ? "GPU" : "host", " memory but this call runs on the ", device_ ? "GPU" : "CPU",
                  "; hint: pass every argument ",
                  device_ ? "in device memory (DeviceTensor<T>::from_host, DeviceCsr<T>::from_host)"
                          : "in host memory (to_host())");
    SPINDLE_CHECK(v.dtype == b.dtype, DTypeError, "kernel '", kernel_, "': ", arg_name(fb), " holds ",
                  dtype_name(v.dtype), " values but the buffer is declared ", dtype_name(b.dtype));
    SPINDLE_CHECK(v.levels.size() == b.axes.size(), ShapeError, "kernel '", kernel_, "': ", arg_name(fb), " (",
                  v.description(), ") has ", v.levels.size(), " level(s) but buffer '", b.name, "' has ",
                  b.axes.size(), " axes ", axes_text(b));
    bool writes = b.role == ir::BufferRole::output || b.role == ir::BufferRole::inout;
    SPINDLE_CHECK(!writes || v.writable, UserError, "kernel '", kernel_, "': ", arg_name(fb),
                  " is written by the kernel but was passed read-only (", v.description(), ")");
    std::int64_t positions = 1, expected_values = 1;
    for (std::size_t s = 0; s < b.axes.size(); ++s) {
      const ir::Axis& a = b.axes[s];
      const LevelView& l = v.levels[s];
      SPINDLE_CHECK(static_cast<int>(l.kind) == static_cast<int>(a->kind), ShapeError, "kernel '", kernel_, "': ",
                    arg_name(fb), " level ", s, " is ", level_kind_name(l.kind), " but axis ", a->name, " is ",
                    ir::axis_kind_name(a->kind));
      if (!a->parent) {  // a root starts a new chain (dimension)
        expected_values = checked_mul(expected_values, positions);
        positions = 1;
      }
      const ir::AxisNode* key = ir::coordinate_space(a);
      if (auto* n = key->length.as<ir::IntImmNode>())
        SPINDLE_CHECK(l.length == n->value, ShapeError, "kernel '", kernel_, "': ", arg_name(fb), " (",
                      v.description(), ") has extent ", l.length, " at level ", s, " but axis ", key->name,
                      " has the compile-time extent ", n->value);
      bind_length(axes[key], *key, *a, fb, l.length);
      if (a->kind == ir::AxisKind::dense_fixed) {
        positions = l.length;
        continue;
      }
      Binding& bd = axes[a.get()];
      std::int64_t level_positions = a->kind == ir::AxisKind::sparse_fixed ? checked_mul(positions, l.nnz_per_row) : l.nnz;
      bind_structure(bd, *a, fb, l, positions, level_positions);
      positions = level_positions;
    }
    expected_values = checked_mul(expected_values, positions);
    SPINDLE_CHECK(v.value_count == expected_values, ShapeError, "kernel '", kernel_, "': ", arg_name(fb), " holds ",
                  v.value_count, " values but its structure has ", expected_values, " positions");
  }

  // `space` is the coordinate space that `axis` (the buffer's axis at this level) indexes:
  // every level over one space must have one extent (dense<X>, coordinates_of<X>).
  void bind_length(Binding& bd, const ir::AxisNode& space, const ir::AxisNode& axis, const ir::FuncBuffer& fb,
                   std::int64_t length) const {
    SPINDLE_CHECK(length >= 0, ShapeError, "kernel '", kernel_, "': ", arg_name(fb), " has negative extent ",
                  length, " for axis ", space.name);
    if (!bd.has_length) {
      bd.has_length = true;
      bd.length = length;
      bd.buffer = fb.buffer->name;
      bd.via = &axis;
      return;
    }
    if (bd.length == length) return;
    if (axis.coordinates_of || (bd.via && bd.via->coordinates_of))
      throw ShapeError(message("kernel '", kernel_, "': axes ", bd.via ? bd.via->name : space.name, " and ", axis.name,
                               " share the coordinates of ", space.name, " (coordinates_of<", space.name,
                               ">) but have extent ", bd.length, " in argument '", bd.buffer, "' and ", length, " in ",
                               arg_name(fb), "; hint: both operands must have the same number of columns (or rows) "
                               "there"));
    throw ShapeError(message("kernel '", kernel_, "': axis ", space.name, " has extent ", bd.length, " in argument '",
                             bd.buffer, "' but ", length, " in ", arg_name(fb)));
  }

  void bind_structure(Binding& bd, const ir::AxisNode& a, const ir::FuncBuffer& fb, const LevelView& l,
                      std::int64_t parents, std::int64_t level_positions) const {
    SPINDLE_CHECK(l.index_dtype == a.index_dtype, DTypeError, "kernel '", kernel_, "': ", arg_name(fb),
                  " stores the indices of axis ", a.name, " as ", dtype_name(l.index_dtype), " but the axis is declared ",
                  dtype_name(a.index_dtype));
    SPINDLE_CHECK(!a.is_variable() || l.indptr || parents == 0, ShapeError, "kernel '", kernel_, "': ", arg_name(fb),
                  " has no indptr for variable axis ", a.name);
    if (!bd.structure) {
      bd.structure = true;
      bd.nnz = l.nnz;
      bd.nnz_per_row = l.nnz_per_row;
      bd.indptr = l.indptr;
      bd.indices = l.indices;
      bd.parents = parents;
      bd.sorted = l.sorted;
      bd.index_dtype = l.index_dtype;
      bd.fingerprint = l.fingerprint;
      bd.buffer = fb.buffer->name;
      return;
    }
    auto same = [&](const void* x, const void* y, std::int64_t count) {
      std::size_t bytes = static_cast<std::size_t>(count) * static_cast<std::size_t>(dtype_bytes(l.index_dtype));
      if (x == y || count == 0) return true;
      if (device_) return bd.fingerprint != 0 && bd.fingerprint == l.fingerprint;
      return x && y && std::memcmp(x, y, bytes) == 0;
    };
    bool ok = bd.parents == parents && bd.nnz == l.nnz && bd.nnz_per_row == l.nnz_per_row &&
              (!a.is_variable() || same(bd.indptr, l.indptr, parents + 1)) &&
              (!a.is_sparse() || same(bd.indices, l.indices, level_positions));
    SPINDLE_CHECK(ok, ShapeError, "kernel '", kernel_, "': buffers '", bd.buffer, "' and '", fb.buffer->name,
                  "' share axis ", a.name, " but their arguments have different sparsity structure");
    bd.sorted = bd.sorted && l.sorted;
  }

  const Binding& bound(const Bindings& axes, const ir::FuncBuffer& p) const {
    const Binding* it = axes.find(p.origin.axis.get());
    SPINDLE_CHECK(it && it->structure, UserError, "kernel '", kernel_, "': no argument binds the ",
                  p.origin.kind == ir::ParamOrigin::indptr ? "indptr" : "indices", " of axis ", p.origin.axis->name,
                  "; hint: pass a buffer over ", p.origin.axis->name);
    return *it;
  }

  std::int64_t scalar_value(const ir::FuncScalar& s, std::size_t k, const std::vector<CallArg>& args,
                            const Bindings& axes) const {
    if (s.origin.kind == ir::ParamOrigin::scalar) {
      const CallArg& a = args[s.origin.arg];
      SPINDLE_CHECK(a.is_scalar, UserError, "kernel '", kernel_, "': argument ", s.origin.arg, " ('", s.var.name(),
                    "') must be a scalar");
      std::int64_t bits = 0;
      switch (s.var.dtype()) {
        case DType::f32: { float f = static_cast<float>(a.is_scalar && is_int(a.scalar_dtype) ? a.scalar_int : a.scalar);
          std::memcpy(&bits, &f, sizeof f); break; }
        case DType::f64: { double d = is_int(a.scalar_dtype) ? static_cast<double>(a.scalar_int) : a.scalar;
          std::memcpy(&bits, &d, sizeof d); break; }
        default: bits = is_int(a.scalar_dtype) ? a.scalar_int : static_cast<std::int64_t>(a.scalar);
      }
      return bits;
    }
    const ir::AxisNode* axis = s.origin.axis.get();
    const Binding* it = axes.find(axis);
    bool have = it && (s.origin.kind == ir::ParamOrigin::length ? it->has_length : it->structure);
    if (!have) {
      SPINDLE_CHECK(!scalar_used_[k], UserError, "kernel '", kernel_, "': no argument gives the ",
                    s.origin.kind == ir::ParamOrigin::length ? "extent" : "structure", " of axis ", axis->name,
                    "; hint: every iterated axis must appear in some buffer argument");
      return 0;
    }
    switch (s.origin.kind) {
      case ir::ParamOrigin::length: return it->length;
      case ir::ParamOrigin::nnz: return it->nnz;
      case ir::ParamOrigin::nnz_per_row: return it->nnz_per_row;
      case ir::ParamOrigin::sorted: return root_ascending(*it) ? 1 : 0;
      default: throw InternalError("bind_args: unexpected scalar origin");
    }
  }

  // Whether the coordinates of sparse root `a` are strictly ascending (ParamOrigin::sorted:
  // the gaps of a sorted root are the coordinates it does not store, iteration_inference.hpp).
  // The level's own claim (LevelView::sorted) is not trusted on the host: the indices are
  // read, one pass over the root's positions. Device memory is not read: the claim decides.
  bool root_ascending(const Binding& b) const {
    if (!b.sorted) return false;
    if (device_ || !b.indices || b.nnz_per_row < 2) return true;
    auto ascending = [&](const auto* idx) {
      for (std::int64_t p = 1; p < b.nnz_per_row; ++p)
        if (idx[p - 1] >= idx[p]) return false;
      return true;
    };
    return b.index_dtype == DType::i64 ? ascending(static_cast<const std::int64_t*>(b.indices))
                                       : ascending(static_cast<const std::int32_t*>(b.indices));
  }

  // Aliasing: the kernel writes the values of its out/inout arguments, so those byte ranges
  // must not overlap any other array of the call: another argument's values, or the indptr /
  // indices of any level of any argument (its own included: writing would corrupt a sparsity
  // pattern). Arrays that are only read may be shared freely (buffers sharing a structure pass
  // the same indptr/indices). Runs after every buffer is bound, so the level sizes come from
  // the axis bindings: indptr = (parent positions + 1) entries, indices = positions entries.
  // Only pointer values are compared (device pointers too); nothing is allocated unless a
  // check fails.
  struct Extent {
    std::uintptr_t lo = 0, hi = 0;  // [lo, hi) in bytes; empty when lo == hi
    const char* what = "values";    // values, indptr or indices
    const ir::AxisNode* axis = nullptr;
  };

  static Extent extent(const void* p, std::int64_t count, int elem_bytes, const char* what,
                       const ir::AxisNode* axis) {
    Extent e;
    e.what = what;
    e.axis = axis;
    if (!p || count <= 0) return e;
    e.lo = reinterpret_cast<std::uintptr_t>(p);
    e.hi = e.lo + static_cast<std::uintptr_t>(count) * static_cast<std::uintptr_t>(elem_bytes);
    return e;
  }

  static std::uintptr_t common_bytes(const Extent& a, const Extent& b) {
    if (a.lo == a.hi || b.lo == b.hi) return 0;
    std::uintptr_t lo = a.lo > b.lo ? a.lo : b.lo, hi = a.hi < b.hi ? a.hi : b.hi;
    return lo < hi ? hi - lo : 0;
  }

  static bool is_written_arg(const ir::FuncBuffer& b) {
    return b.buffer->role == ir::BufferRole::output || b.buffer->role == ir::BufferRole::inout;
  }

  std::string role_arg_name(const ir::FuncBuffer& b) const {
    const char* role = b.buffer->role == ir::BufferRole::output  ? "output "
                       : b.buffer->role == ir::BufferRole::inout ? "inout "
                                                                  : "input ";
    return role + arg_name(b);
  }

  // Calls f(extent) for every array of one bound buffer argument: its values (unless
  // skip_values), then the indptr and indices of each structured level. Stops and returns
  // true when f returns true.
  template <class F>
  bool for_each_extent(const ir::FuncBuffer& fb, const StorageView& v, const Bindings& axes, bool skip_values,
                       F&& f) const {
    if (!skip_values && f(extent(v.data, v.value_count, dtype_bytes(v.dtype), "values", nullptr))) return true;
    const ir::BufferNode& b = *fb.buffer;
    for (std::size_t s = 0; s < b.axes.size() && s < v.levels.size(); ++s) {
      const ir::AxisNode* a = b.axes[s].get();
      if (a->kind == ir::AxisKind::dense_fixed) continue;
      const Binding* bd = axes.find(a);
      if (!bd || !bd->structure) continue;
      const LevelView& l = v.levels[s];
      int ib = dtype_bytes(l.index_dtype);
      if (a->is_variable() && f(extent(l.indptr, bd->parents + 1, ib, "indptr", a))) return true;
      if (a->is_sparse()) {
        std::int64_t positions = a->kind == ir::AxisKind::sparse_fixed ? bd->parents * bd->nnz_per_row : bd->nnz;
        if (f(extent(l.indices, positions, ib, "indices", a))) return true;
      }
    }
    return false;
  }

  void check_aliasing(const std::vector<CallArg>& args, const Bindings& axes) const {
    for (auto& w : user_buffers_) {
      if (!is_written_arg(w)) continue;
      const StorageView& wv = args[w.origin.arg].view;
      const Extent values = extent(wv.data, wv.value_count, dtype_bytes(wv.dtype), "values", nullptr);
      if (values.lo == values.hi) continue;
      for (auto& o : user_buffers_) {
        Extent found;
        std::uintptr_t shared = 0;
        bool hit = for_each_extent(o, args[o.origin.arg].view, axes, /*skip_values=*/&o == &w, [&](const Extent& e) {
          shared = common_bytes(values, e);
          found = e;
          return shared != 0;
        });
        if (hit) aliasing_error(w, o, found, shared);
      }
    }
  }

  // E.g. "kernel 'spmv': output argument 2 ('c') overlaps input argument 0 ('a') in memory:
  // its values share 160 byte(s) with the indptr of axis J of 'a'; writing them would
  // corrupt the sparsity structure of 'a'; hint: ...".
  [[noreturn]] void aliasing_error(const ir::FuncBuffer& w, const ir::FuncBuffer& o, const Extent& e,
                                   std::uintptr_t shared) const {
    const bool self = &o == &w;
    const std::string& on = o.buffer->name;
    std::string array = e.axis ? message(e.what, " of axis ", e.axis->name) : std::string("values");
    std::string text = message("kernel '", kernel_, "': ", role_arg_name(w), " overlaps ",
                               self ? std::string("itself") : role_arg_name(o), " in memory: its values share ",
                               shared, " byte(s) with ", self ? "its own " + array : "the " + array + " of '" + on + "'");
    if (e.axis)
      text += self ? std::string("; writing them would corrupt its own sparsity structure")
                   : message("; writing them would corrupt the sparsity structure of '", on, "'");
    else if (is_written_arg(o))
      text += "; two written arguments must not share storage";
    text += "; hint: pass an output with storage of its own";
    throw UserError(text);
  }

  std::int64_t checked_mul(std::int64_t a, std::int64_t b) const {
    std::int64_t r;
    SPINDLE_CHECK(!__builtin_mul_overflow(a, b, &r), ShapeError, "kernel '", kernel_, "': tensor size overflows 64 bits");
    return r;
  }

  static std::string axes_text(const ir::BufferNode& b) {
    std::string s = "[";
    for (std::size_t k = 0; k < b.axes.size(); ++k) s += (k ? ", " : "") + b.axes[k]->name;
    return s + "]";
  }

  std::string kernel_;
  bool device_ = false;
  std::vector<ir::FuncBuffer> user_buffers_;
  std::vector<ir::FuncScalar> user_scalars_;
  std::vector<ir::FuncBuffer> abi_buffers_;
  std::vector<ir::FuncScalar> abi_scalars_;
  std::vector<bool> scalar_used_;
  std::set<const ir::AxisNode*> sorted_required_;
  // A write at a computed index (ir/affine_index.hpp) into a root slot: the iterators it
  // uses, by coordinate space, and the slot's coordinate space.
  struct ComputedIndex {
    ir::Expr index;
    std::vector<std::pair<const ir::VarNode*, const ir::AxisNode*>> iterators;
    const ir::AxisNode* space;
    std::string what;  // "`+=` into buffer 'd' at (io * 4 + ii, k), slot 0 (axis I)"
  };

  // The sparse roots R (no parent) whose iterator indexes a write in a slot of another axis
  // over R's coordinates (`c(r, k) += ...` into dense<R>): R's iterator is spatial, so its
  // loop may run in parallel, which is race-free only when R stores each coordinate once.
  void find_coordinate_written_roots(const ir::Function& stage1) {
    struct Scan : ir::IRVisitor {
      std::vector<std::pair<const ir::VarNode*, const ir::AxisNode*>> roots;
      std::vector<const ir::AxisNode*> found;
      void visit_SparseIteration(const ir::SparseIterationNode* n) override {
        const std::size_t depth = roots.size();
        for (std::size_t k = 0; k < n->vars.size(); ++k)
          if (!n->axes[k]->parent && n->axes[k]->is_sparse()) roots.push_back({n->vars[k].node(), n->axes[k].get()});
        ir::IRVisitor::visit_SparseIteration(n);
        roots.resize(depth);
      }
      void write(const ir::BufferNode& b, const std::vector<ir::Expr>& idx) {
        for (std::size_t s = 0; s < idx.size() && s < b.axes.size(); ++s)
          for (auto& [v, axis] : roots)
            if (idx[s].get() == v && b.axes[s].get() != axis &&
                std::find(found.begin(), found.end(), axis) == found.end())
              found.push_back(axis);
      }
      void visit_Store(const ir::StoreNode* n) override {
        write(*n->buffer, n->indices);
        ir::IRVisitor::visit_Store(n);
      }
      void visit_Reduce(const ir::ReduceNode* n) override {
        write(*n->buffer, n->indices);
        ir::IRVisitor::visit_Reduce(n);
      }
    } scan;
    scan.visit(stage1.body);
    coordinate_written_roots_ = std::move(scan.found);
  }
  std::vector<const ir::AxisNode*> coordinate_written_roots_;

  void find_computed_indices(const ir::Function& stage1) {
    struct Scan : ir::IRVisitor {
      std::vector<std::pair<const ir::VarNode*, const ir::AxisNode*>> scope;
      std::vector<ComputedIndex> found;
      void visit_SparseIteration(const ir::SparseIterationNode* n) override {
        const std::size_t depth = scope.size();
        for (std::size_t k = 0; k < n->vars.size(); ++k) scope.push_back({n->vars[k].node(), ir::coordinate_space(n->axes[k])});
        ir::IRVisitor::visit_SparseIteration(n);
        scope.resize(depth);
      }
      void visit_Reduce(const ir::ReduceNode* n) override {
        for (std::size_t s = 0; s < n->indices.size() && s < n->buffer->axes.size(); ++s) {
          const ir::Expr& e = n->indices[s];
          if (n->buffer->axes[s]->parent || n->buffer->axes[s]->is_sparse() || e.as<ir::VarNode>() ||
              ir::indirect_index_load(e))
            continue;
          ComputedIndex c{e, {}, ir::coordinate_space(n->buffer->axes[s]),
                          message("`", ir::reduce_op_name(n->op), "` into buffer '", n->buffer->name, "' at (",
                                  ir::IRPrinter().list(n->indices), "), index ", s, " (axis ",
                                  n->buffer->axes[s]->name, ")")};
          struct Vars : ir::IRVisitor {
            std::set<const ir::VarNode*> used;
            void visit_Var(const ir::VarNode* v) override { used.insert(v); }
          } vars;
          vars.visit(e);
          for (auto& [v, space] : scope)
            if (vars.used.count(v)) c.iterators.push_back({v, space});
          found.push_back(std::move(c));
        }
        ir::IRVisitor::visit_Reduce(n);
      }
    } scan;
    scan.visit(stage1.body);
    computed_ = std::move(scan.found);
  }

  // The proof of a computed index's upper bound (its lower bound was proved at definition)
  // from the call's extents: interval arithmetic over each iterator's coordinates
  // [0, extent - 1]. An iterator over an empty axis makes the write unreachable.
  void check_computed_index(const ComputedIndex& c, const Bindings& axes) const {
    for (auto& [v, space] : c.iterators) {
      const Binding* bd = axes.find(space);
      SPINDLE_INTERNAL_CHECK(bd && bd->has_length, "bind_args", "computed index over unbound axis ", space->name);
      if (bd->length == 0) return;
    }
    const Binding* slot = axes.find(c.space);
    SPINDLE_INTERNAL_CHECK(slot && slot->has_length, "bind_args", "computed index into unbound axis ", c.space->name);
    auto range = ir::index_range(c.index, [&](const ir::VarNode* v) -> std::optional<ir::IndexRange> {
      for (auto& [var, space] : c.iterators)
        if (var == v) return ir::IndexRange{0, axes.find(space)->length - 1};
      return std::nullopt;
    });
    if (range && range->lo >= 0 && range->hi < slot->length) return;  // the hot path: no message built
    std::string ranges;
    for (auto& [v, space] : c.iterators) {
      const Binding* bd = axes.find(space);
      ranges += message(ranges.empty() ? "" : ", ", "0 <= ", v->name, " < ", bd->length, " (axis ", space->name,
                        " in argument '", bd->buffer, "')");
    }
    const std::string where = message("kernel '", kernel_, "': ", c.what, ", a computed index");
    SPINDLE_CHECK(range, ShapeError, where, ": with ", ranges.empty() ? "no iterators" : ranges,
                  " some part of it leaves the int64 range; nothing was written; hint: smaller extents or "
                  "another index");
    SPINDLE_CHECK(range->lo >= 0 && range->hi < slot->length, ShapeError, where, ": with ",
                  ranges.empty() ? "no iterators" : ranges, " it can reach ", ir::range_bound_string(range->lo),
                  range->lo == range->hi ? "" : message(" .. ", ir::range_bound_string(range->hi)),
                  ", but axis ", c.space->name, " has extent ", slot->length, " (argument '", slot->buffer,
                  "'), so the write could fall outside the buffer; nothing was written; hint: make the written "
                  "axis longer, or the iterated axes shorter");
  }

  std::vector<IndirectIndex> indirect_;
  std::vector<ComputedIndex> computed_;
  int num_args_ = 0;
  std::size_t axis_count_ = 0;
};

}  // namespace spindle::runtime
