// The transpose of a CSR matrix, with the map from its stored entries back to the source's,
// so that a matrix whose values change (a normalised adjacency, attention scores) is
// transposed once and refreshed in O(nnz) without re-sorting.
//
//   auto at = spindle::transpose(a);   // at.matrix: a.cols() x a.rows(), rows sorted
//   ...                               // a's values change, its pattern does not
//   at.refresh(a);                     // at.matrix.values()[q] = a.values()[at.source[q]]
//
// Counting sort by column: O(rows + cols + nnz); the transposed rows come out sorted when
// the source's rows are sorted or not (entries are placed in row order of the source).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "spindle/format/csr.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
struct CsrTranspose {
  Csr<T, Index> matrix;
  std::vector<std::int64_t> source;  // matrix.values()[q] comes from a.values()[source[q]]

  // Copies `a`'s current values into the transpose. `a` must have the pattern this
  // transpose was built from (FormatError when its nnz or shape differ).
  void refresh(const Csr<T, Index>& a) {
    SPINDLE_CHECK(a.nnz() == matrix.nnz() && a.rows() == matrix.cols() && a.cols() == matrix.rows(), FormatError,
                  "CsrTranspose::refresh: the matrix is ", a.rows(), "x", a.cols(), " with ", a.nnz(),
                  " entries but the transpose was built from a ", matrix.cols(), "x", matrix.rows(), " matrix with ",
                  matrix.nnz());
    auto out = matrix.values();
    const auto in = a.values();
    for (std::size_t q = 0; q < source.size(); ++q) out[q] = in[static_cast<std::size_t>(source[q])];
  }
};

// The transpose of the CSR arrays of a rows x cols matrix (positions indptr[0] ..
// indptr[rows] of indices and values; indptr[0] need not be 0, a view's rows may start
// inside larger arrays). `source` holds positions relative to indptr[0].
template <class T, class Index>
CsrTranspose<T, Index> transpose(std::int64_t rows, std::int64_t cols, const Index* aptr, const Index* idx,
                                 const T* val) {
  const Index base = rows > 0 ? aptr[0] : Index(0);  // a default 0x0 Csr has no indptr
  const std::int64_t nnz = rows > 0 ? static_cast<std::int64_t>(aptr[rows] - base) : 0;
  std::vector<Index> ptr(static_cast<std::size_t>(cols) + 1, Index(0));
  for (std::int64_t q = base; q < base + nnz; ++q) ++ptr[static_cast<std::size_t>(idx[q]) + 1];
  for (std::int64_t c = 0; c < cols; ++c) ptr[c + 1] += ptr[c];
  std::vector<Index> next(ptr.begin(), ptr.end() - 1);
  std::vector<Index> tidx(static_cast<std::size_t>(nnz));
  std::vector<std::int64_t> source(static_cast<std::size_t>(nnz));
  std::vector<std::remove_const_t<T>> tval(static_cast<std::size_t>(nnz));
  for (std::int64_t r = 0; r < rows; ++r)
    for (Index q = aptr[r]; q < aptr[r + 1]; ++q) {
      const auto at = static_cast<std::size_t>(next[static_cast<std::size_t>(idx[q])]++);
      tidx[at] = static_cast<Index>(r);
      source[at] = q - base;
      tval[at] = val[q];
    }
  return {Csr<std::remove_const_t<T>, Index>(cols, rows, std::move(ptr), std::move(tidx), std::move(tval)),
          std::move(source)};
}

template <class T, class Index>
CsrTranspose<T, Index> transpose(const Csr<T, Index>& a) {
  return transpose<T, Index>(a.rows(), a.cols(), a.indptr().data(), a.indices().data(), a.values().data());
}

}  // namespace spindle
