// [A_1 A_2 ... A_R]: matrices of the same row count placed side by side, one Csr of
// rows x (cols_1 + ... + cols_R), part p's column j at column offset_p + j. The RGCN
// aggregation sum_r A_r XW_r is one SpMM of this matrix with XW [R, N, K] seen as [R N, K]
// (row-major storage is the same array): each output row is written once from registers,
// where ELL3D (Ell3dBuckets) re-reads and re-writes it once per relation of the row — on a
// CPU that made the side-by-side SpMM 1.3-4x faster (docs/benchmarks.md, rgcn_spmm).
//
//   auto stacked = spindle::side_by_side(relations);   // N x R N
//   spindle::ops::spmm<float>()(stacked, xw_as_rn_by_k, c);
//
// O(rows + nnz). Each row's entries come in part order, so the rows are sorted when every
// part's rows are. ShapeError when the parts' row counts differ or the columns do not fit
// the index type (both name the part).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "spindle/format/csr.hpp"

namespace spindle {

template <class T, class Index>
Csr<T, Index> side_by_side(const std::vector<Csr<T, Index>>& parts, std::string name = {}) {
  if (parts.empty()) return Csr<T, Index>(0, 0, std::move(name));
  const std::int64_t rows = parts.front().rows();
  std::int64_t cols = 0, nnz = 0;
  std::vector<std::int64_t> offset(parts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    SPINDLE_CHECK(parts[p].rows() == rows, ShapeError, "side_by_side: part ", p, " (",
                  detail::structure_name("Csr", parts[p].name()), ") has ", parts[p].rows(),
                  " rows but part 0 has ", rows);
    offset[p] = cols;
    cols += parts[p].cols();
    nnz += parts[p].nnz();
    SPINDLE_CHECK(cols <= static_cast<std::int64_t>(std::numeric_limits<Index>::max()) &&
                      nnz <= static_cast<std::int64_t>(std::numeric_limits<Index>::max()),
                  ShapeError, "side_by_side: with part ", p, " the matrix has ", cols, " columns and ", nnz,
                  " entries, more than its index type holds (", std::numeric_limits<Index>::max(),
                  "); hint: use a 64-bit index type");
  }
  std::vector<Index> indptr(static_cast<std::size_t>(rows) + 1, Index(0));
  std::vector<Index> indices(static_cast<std::size_t>(nnz));
  std::vector<T> values(static_cast<std::size_t>(nnz));
  std::size_t at = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const auto& part = parts[p];
      const auto idx = part.indices();
      const auto val = part.values();
      for (auto q = part.indptr()[i]; q < part.indptr()[i + 1]; ++q, ++at) {
        indices[at] = static_cast<Index>(offset[p] + static_cast<std::int64_t>(idx[q]));
        values[at] = val[q];
      }
    }
    indptr[static_cast<std::size_t>(i) + 1] = static_cast<Index>(at);
  }
  return Csr<T, Index>(rows, cols, std::move(indptr), std::move(indices), std::move(values), std::move(name));
}

}  // namespace spindle
