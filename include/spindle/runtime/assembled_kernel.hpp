// A kernel that assembles a sparse output (docs/language.md §4.6): two compiled phases made
// from one definition by lower/split_assembly.hpp, and the host steps between them.
//
//   1. symbolic kernel: distinct columns per row -> counts (rows split into one block per thread)
//   2. host: row_ptr = prefix sums; the output container is sized for nnz = row_ptr[rows]
//   3. numeric kernel: each row accumulated in a per-block dense workspace and copied out at
//      row_ptr[i] (blocks re-balanced by the counts, so each holds about nnz / T entries)
//   4. host: the counts of both phases must agree (InternalError otherwise); each row is sorted
//      by column (rows already in order are only checked), in parallel — unless the caller
//      takes its rows unsorted (spindle::unsorted, AssemblyTarget::leave_rows_unsorted)
// Rows appended in column order from a merge (a sparse add, an element-wise product) skip the
// merge in step 1: it counts an upper bound of each row (the fibers' lengths summed, or their
// least), the numeric phase appends each block's rows one after another, and step 4 checks
// each row's count against its bound and moves the blocks together (lower/assemble_rows.hpp,
// bounded rows).
//
// The caller's container receives the arrays only when every step succeeded: a failing call
// (a binder error, an output of the wrong shape, an nnz the index type cannot hold) leaves it
// as it was. Scratch memory per call: one marker, one workspace and one column list of
// `columns` entries per block, and the row counts.
//
// This header is light (pimpl); the implementation is in assembled_kernel_impl.hpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/runtime/call_arg.hpp"
#include "spindle/runtime/compiled_kernel.hpp"
#include "spindle/support/linkage.hpp"

namespace spindle::runtime {

// Advises the whole 2 MiB pages inside [p, p + bytes) as transparent huge pages (madvise
// MADV_HUGEPAGE; a hint: ignored where the kernel has none or refuses).
SPINDLE_DECL void advise_huge_pages(void* p, std::size_t bytes);

// Where an assembled output's arrays go (kernel.hpp adapts a Csr<T, Index>).
class AssemblyTarget {
 public:
  virtual ~AssemblyTarget() = default;
  // Sizes new arrays for `nnz` entries with row offsets `row_ptr` (rows + 1 entries, from 0) and
  // returns where the kernel writes the column indices and the values (nnz entries each, in
  // the index and value types of the output). Nothing the caller sees changes yet. It may be
  // called again before commit() (scattered rows: first sized for every write, then, when
  // writes were combined, for the entries): the last call's arrays are the ones committed.
  virtual void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& indices,
                        void*& values) = 0;
  // The arrays of the last allocate() were sized for an upper bound of the entries (an
  // assembly whose symbolic phase bounds merged rows, or scattered rows whose duplicate
  // writes were combined): their first `nnz` entries are the output's, with row offsets
  // `row_ptr`; the rest is dropped. Returns false when the target
  // cannot do that in place (the default): the caller then allocates anew and copies.
  virtual bool shrink(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr) {
    (void)nnz, (void)row_ptr;
    return false;
  }
  // Called where rows gathered from the workspace in the order their columns were first
  // written would be sorted next (the marker path: step 4). A target whose caller takes rows
  // in any column order (spindle::unsorted) returns true and commits them marked unsorted;
  // the row sort is then skipped. The default (false) gets every row sorted.
  virtual bool leave_rows_unsorted() { return false; }
  // Every step succeeded: hand the arrays to the caller's container (rows sorted by column,
  // unless leave_rows_unsorted() returned true).
  virtual void commit() = 0;
};

class AssembledKernel {
 public:
  SPINDLE_DECL AssembledKernel(const ir::Function& stage1, Runtime& rt);
  SPINDLE_DECL ~AssembledKernel();
  AssembledKernel(const AssembledKernel&) = delete;
  AssembledKernel& operator=(const AssembledKernel&) = delete;

  // `args`: the call's arguments in the lambda's order; at output_arg() the view of the output
  // container, which gives the output's rows and columns (its pattern and values are ignored).
  SPINDLE_DECL void call(const std::vector<CallArg>& args, AssemblyTarget& out) const;

  SPINDLE_DECL int output_arg() const;
  SPINDLE_DECL const CompiledKernel& symbolic() const;
  SPINDLE_DECL const CompiledKernel& numeric() const;
  // Both phases' explain(), after a line saying how the output is assembled.
  SPINDLE_DECL std::string explain() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spindle::runtime

#ifndef SPINDLE_SEPARATE_COMPILATION
#include "spindle/runtime/assembled_kernel_impl.hpp"
#endif
