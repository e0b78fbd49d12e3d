// Axes and sparse buffers: the stage-I constructs of seed 002 §3.1.
//
// An axis is dense or sparse (are coordinates contiguous?) and fixed or variable (is the
// number of positions per parent position constant?). Variable axes carry an indptr,
// sparse axes an indices array; both are bound at call time, as are the symbolic length,
// nnz and nnz-per-row. A buffer is a list of axes plus an element type: its values are
// stored apart from the axes' indptr/indices, so buffers with the same axes share one
// structure (seed 002 Fig. 4).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "spindle/ir/expr.hpp"

namespace spindle::ir {

enum class AxisKind : std::uint8_t { dense_fixed, dense_variable, sparse_fixed, sparse_variable };

// How an iteration over several sparse fibers of one coordinate space visits coordinates
// (docs/language.md §3.1): every coordinate stored in any of them, or only those stored in all.
enum class MergeOp : std::uint8_t { none, union_, intersection };

inline const char* merge_op_name(MergeOp m) {
  switch (m) {
    case MergeOp::none: return "none";
    case MergeOp::union_: return "union";
    case MergeOp::intersection: return "intersection";
  }
  return "?";
}

inline const char* axis_kind_name(AxisKind k) {
  switch (k) {
    case AxisKind::dense_fixed: return "dense_fixed";
    case AxisKind::dense_variable: return "dense_variable";
    case AxisKind::sparse_fixed: return "sparse_fixed";
    case AxisKind::sparse_variable: return "sparse_variable";
  }
  return "?";
}

struct AxisNode;
using Axis = std::shared_ptr<const AxisNode>;

struct AxisNode {
  std::string name;
  AxisKind kind = AxisKind::dense_fixed;
  Axis parent;          // null for dense_fixed
  Expr length;          // extent of the coordinate space (symbolic i64 or constant)
  Expr nnz;             // variable axes: positions in the whole level
  Expr nnz_per_row;     // sparse_fixed: positions per parent position
  DType index_dtype = DType::i32;
  Axis dense_of;        // set for dense<X>: a dense_fixed axis over X's coordinate space
  Axis coordinates_of;  // set for a sparse axis declared coordinates_of<X>: its coordinates
                        // are X's (same extent, checked at call time), so its iterator may
                        // index X's root slots (docs/language.md §1)
  bool assembled = false;  // spindle::assembled<P, X>: a sparse_variable axis under P over X's
                           // coordinates whose pattern the kernel builds (docs/language.md §4.6)
  // union_of<A, B, ...> / intersection_of<A, B, ...> (docs/language.md §3.1): a root
  // dense_fixed axis over the operands' coordinate space (dense_of = the first operand) that
  // only an iteration uses, visiting the coordinates stored in any / all of the operands'
  // fibers under the current positions of their parents. No buffer has it as a slot.
  MergeOp merge = MergeOp::none;
  std::vector<Axis> merge_operands;

  bool is_dense() const { return kind == AxisKind::dense_fixed || kind == AxisKind::dense_variable; }
  bool is_sparse() const { return !is_dense(); }
  bool is_variable() const {
    return kind == AxisKind::dense_variable || kind == AxisKind::sparse_variable;
  }
  bool is_fixed() const { return !is_variable(); }
};

// The axis followed by its ancestors, root first: [root, ..., parent, axis].
inline std::vector<Axis> axis_chain(const Axis& a) {
  std::vector<Axis> chain;
  for (Axis x = a; x; x = x->parent) chain.insert(chain.begin(), x);
  return chain;
}

// The axis whose coordinate space `a` indexes: X for dense<X> and for an axis declared
// coordinates_of<X> (recursively), else `a` itself.
inline const AxisNode* coordinate_space(const AxisNode* a) {
  if (a->dense_of) return coordinate_space(a->dense_of.get());
  if (a->coordinates_of) return coordinate_space(a->coordinates_of.get());
  return a;
}
inline const AxisNode* coordinate_space(const Axis& a) { return coordinate_space(a.get()); }

// global: kernel parameter or device memory; local: per-thread (registers / C stack);
// shared: one copy per GPU thread block (CUDA __shared__), written by cache_read.
enum class BufferScope : std::uint8_t { global, local, shared };
enum class BufferRole : std::uint8_t { input, output, inout, aux, temp };

inline const char* buffer_role_name(BufferRole r) {
  switch (r) {
    case BufferRole::input: return "in";
    case BufferRole::output: return "out";
    case BufferRole::inout: return "inout";
    case BufferRole::aux: return "aux";
    case BufferRole::temp: return "temp";
  }
  return "?";
}

// Stage I/II: `axes` describes the buffer. Stage III: `shape` does (flat dimensions), axes
// are empty. A local buffer with no axes and no shape is a scalar.
struct BufferNode {
  std::string name;
  DType dtype = DType::f32;
  std::vector<Axis> axes;
  std::vector<Expr> shape;
  BufferScope scope = BufferScope::global;
  BufferRole role = BufferRole::input;
  int extra_storage = 0;       // indptr buffers hold one element more than their axes
  double default_value = 0.0;  // read at coordinates that are absent from a sparse axis
};

inline Buffer make_buffer(BufferNode node) { return std::make_shared<const BufferNode>(std::move(node)); }

// A per-thread temporary (scope local, role temp): a scalar when `shape` is empty, else a
// register array of that stage-III shape.
inline Buffer local_buffer(std::string name, DType dtype, std::vector<Expr> shape = {}) {
  BufferNode n;
  n.name = std::move(name);
  n.dtype = dtype;
  n.shape = std::move(shape);
  n.scope = BufferScope::local;
  n.role = BufferRole::temp;
  return make_buffer(std::move(n));
}

// A buffer over [P, C] with C = assembled<P, X>: an output whose pattern the kernel builds.
inline bool is_assembled(const BufferNode& b) {
  for (auto& a : b.axes)
    if (a->assembled) return true;
  return false;
}

// Whether axis `a` may iterate the fiber of its parent under the coordinate of another
// iterator (docs/language.md §3): its parent is a root dense axis (dense_fixed, dense<X>), whose
// positions are its coordinates, so any iterator over the parent's coordinate space names a fiber.
inline bool parent_by_coordinate(const AxisNode& a) {
  return a.parent && !a.parent->parent && a.parent->kind == AxisKind::dense_fixed;
}

inline bool is_written(const BufferNode& b) {
  return b.role == BufferRole::output || b.role == BufferRole::inout ||
         b.role == BufferRole::temp || b.scope != BufferScope::global;
}

}  // namespace spindle::ir
