// (A + I) ⊗ B for a dense d x d block B: each row and column of A becomes d, each stored
// entry of A (and each diagonal entry A lacks) a dense d x d block. The operator of a
// vector-valued finite-element problem on A's mesh: exact, aligned d x d blocks, the input
// on which a BSR format with d x d blocks stores no padding (spindle-bench --kron-block, the
// format tuner's tests).
//
//   auto op = spindle::kron_blocks(mesh, 3);                        // entries 1 / (1 + i + j)
//   auto op2 = spindle::kron_blocks(mesh, 3, [](int i, int j, std::int64_t col) { ... });
//
// The pattern is that of (A + I) ⊗ B; A's values are not used: value(i, j, col) gives the
// entry at row i, column j of the block in block column `col` (i, j in [0, d)). A's rows may be unsorted; the result's rows are sorted. A ShapeError when
// the result would not fit its index type.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

template <class T, class Index, class Value>
Csr<T, Index> kron_blocks(const Csr<T, Index>& a, int d, Value value) {
  SPINDLE_CHECK(d >= 1, ShapeError, "kron_blocks: the block size must be at least 1, not ", d);
  const std::int64_t rows = a.rows() * d, cols = a.cols() * d;
  constexpr auto kMax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());
  SPINDLE_CHECK(rows <= kMax && cols <= kMax, ShapeError, "kron_blocks: a ", rows, " x ", cols,
                " result does not fit its index type (at most ", kMax, ")");
  std::vector<Index> ptr{0}, idx, row;
  std::vector<T> val;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    row.assign(a.indices().begin() + a.indptr()[r], a.indices().begin() + a.indptr()[r + 1]);
    if (r < a.cols() && std::find(row.begin(), row.end(), static_cast<Index>(r)) == row.end())
      row.push_back(static_cast<Index>(r));
    std::sort(row.begin(), row.end());
    for (int i = 0; i < d; ++i) {
      for (Index c : row)
        for (int j = 0; j < d; ++j) {
          idx.push_back(static_cast<Index>(static_cast<std::int64_t>(c) * d + j));
          val.push_back(static_cast<T>(value(i, j, static_cast<std::int64_t>(c))));
        }
      SPINDLE_CHECK(static_cast<std::int64_t>(idx.size()) <= kMax, ShapeError, "kron_blocks: more than ", kMax,
                    " entries with blocks of ", d, " x ", d, " (", a.nnz(), " stored entries in A)");
      ptr.push_back(static_cast<Index>(idx.size()));
    }
  }
  return Csr<T, Index>(rows, cols, std::move(ptr), std::move(idx), std::move(val));
}

template <class T, class Index>
Csr<T, Index> kron_blocks(const Csr<T, Index>& a, int d) {
  return kron_blocks(a, d, [](int i, int j, std::int64_t) { return 1.0 / (1 + i + j); });
}

}  // namespace spindle
