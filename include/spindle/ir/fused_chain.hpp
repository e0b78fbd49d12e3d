// The rule of a fused chain of axes (docs/language.md §3.2): axes first..last of a sparse
// iteration run as one loop over the positions of the last one (SparseTIR's `T.fuse`). A
// chain may be fused when
//   * no axis of it is a co-iteration (union_of / intersection_of has no positions);
//   * its first axis is a root axis or a variable axis (a fused loop cannot start from a
//     sparse_fixed child);
//   * each axis after the first is a child of the one before it;
//   * all its axes are spatial, or all are reduction axes (a loop is one or the other).
// Both ways of fusing check it: the kernel's own `iter<fuse<I, J>>` (frontend) and the
// schedule step `sparse_fuse` (schedule/sparse_fuse.hpp), each naming itself in the error.
#pragma once

#include <string>

#include "spindle/ir/stmt.hpp"

namespace spindle::ir {

// "" when axes first..last (first < last) of `n` may be fused, else what is wrong, with a hint.
inline std::string fused_chain_problem(const SparseIterationNode& n, std::size_t first, std::size_t last) {
  auto kind_name = [](IterKind k) { return k == IterKind::spatial ? "spatial" : "a reduction axis"; };
  for (std::size_t k = first; k <= last; ++k) {
    const Axis& a = n.axes[k];
    if (a->merge != MergeOp::none)
      return "axis " + a->name + " is a co-iteration (" + merge_op_name(a->merge) + "), which has no positions to fuse";
    if (k == first) {
      if (a->parent && !a->is_variable())
        return "the first axis " + a->name + " is a sparse_fixed child of " + a->parent->name +
               ", which a fused loop cannot start from; hint: start the chain at " + a->parent->name +
               " or at a root or variable axis";
      continue;
    }
    const Axis& prev = n.axes[k - 1];
    if (a->parent != prev)
      return "axis " + a->name + " is not a child of " + prev->name +
             (a->parent ? " (its parent is " + a->parent->name + ")" : std::string(" (it is a root axis)")) +
             "; hint: a fused chain is a parent followed by its child, e.g. the rows and columns of a CSR";
    if (n.kinds[k] != n.kinds[first])
      return "axis " + n.axes[first]->name + " is " + kind_name(n.kinds[first]) + " and axis " + a->name + " is " +
             kind_name(n.kinds[k]) + "; hint: a fused loop is one or the other, so fuse only axes of the same kind";
  }
  return {};
}

}  // namespace spindle::ir
