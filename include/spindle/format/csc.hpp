// Csc<T, Index>: an owning compressed-sparse-column matrix (rows x cols). Column c holds the
// entries at rows row_indices()[colptr()[c] .. colptr()[c + 1]) with those values. As a
// kernel argument it is its storage order — a dense column level over a compressed row level,
// the CSR of the transpose:
//
//   struct Col : spindle::dense_fixed {};
//   struct Row : spindle::sparse_variable<Col> {};
//   ... spindle::in<float, Col, Row> a ...     // a(c, r) is A(r, c)
//
// so a kernel iterates A by columns (ops::csc_spmv, ops::csc_spmm: their writes at a row
// coordinate run one block per thread on the CPU, each owning a share of the rows). Built from
// arrays (validated as a Csr is, with "column" for the fiber in messages) or from a Csr in
// O(rows + cols + nnz); to_csr() converts back. The structure is immutable, values mutable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/csr_view.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/transpose.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
class Csc {
 public:
  using value_type = T;
  using index_type = Index;

  Csc() = default;  // 0x0

  // colptr has cols + 1 entries; row_indices and values one per entry. FormatError naming the
  // column and position for a bad structure (as Csr's checks do for rows).
  Csc(std::int64_t rows, std::int64_t cols, std::vector<Index> colptr, std::vector<Index> row_indices,
      std::vector<T> values, std::string name = {})
      : rows_(rows),
        cols_(cols),
        colptr_(std::move(colptr)),
        row_indices_(std::move(row_indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Csc", name_);
    detail::check_extent<Index>(what, "row", rows_, " count");
    detail::check_extent<Index>(what, "column", cols_, " count");
    SPINDLE_CHECK(values_.size() == row_indices_.size(), FormatError, what, ": values has ", values_.size(),
                  " entries but row_indices has ", row_indices_.size());
    sorted_ = validate_compressed<Index>(what, cols_, rows_, static_cast<std::int64_t>(row_indices_.size()),
                                         colptr_, row_indices_, "column")
                  .sorted;
  }

  // The columns of `a` (a counting sort: every column comes out sorted by row).
  static Csc from_csr(const Csr<T, Index>& a) {
    CsrTranspose<T, Index> t = transpose(a);
    Csc c;
    c.rows_ = a.rows();
    c.cols_ = a.cols();
    c.colptr_.assign(t.matrix.indptr().begin(), t.matrix.indptr().end());
    c.row_indices_.assign(t.matrix.indices().begin(), t.matrix.indices().end());
    c.values_.assign(t.matrix.values().begin(), t.matrix.values().end());
    c.sorted_ = true;
    c.name_ = a.name();
    return c;
  }

  // The same matrix by rows (sorted rows).
  Csr<T, Index> to_csr() const { return transpose(transposed()).matrix; }
  // Aᵀ as a Csr (a copy of the arrays: the columns of A are its rows).
  Csr<T, Index> transposed() const { return Csr<T, Index>(cols_, rows_, colptr_, row_indices_, values_, name_); }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t nnz() const { return static_cast<std::int64_t>(row_indices_.size()); }
  bool sorted() const { return sorted_; }  // every column strictly ascending by row
  const std::string& name() const { return name_; }
  std::span<const Index> colptr() const { return colptr_; }
  std::span<const Index> row_indices() const { return row_indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }
  // Bytes of colptr, row indices and values.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((colptr_.size() + row_indices_.size()) * sizeof(Index) + values_.size() * sizeof(T));
  }

  // Dense row-major copy of A (duplicates added); for tests and small matrices.
  Tensor<T> to_dense() const {
    auto dense = Tensor<T>::zeros({rows_, cols_});
    T* d = dense.data();
    for (std::int64_t c = 0; c < cols_; ++c)
      for (std::int64_t q = colptr_[c]; q < colptr_[c + 1]; ++q) d[row_indices_[q] * cols_ + c] += values_[q];
    return dense;
  }

  StorageView storage() {
    return detail::csr_storage<T, Index>(values_.data(), cols_, rows_, nnz(), colptr_.data(), row_indices_.data(),
                                         sorted_, "Csc", name_);
  }
  StorageView storage() const {
    return detail::csr_storage<const T, Index>(values_.data(), cols_, rows_, nnz(), colptr_.data(),
                                               row_indices_.data(), sorted_, "Csc", name_);
  }

 private:
  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<Index> colptr_{0}, row_indices_;
  std::vector<T> values_;
  bool sorted_ = true;
  std::string name_;
};

}  // namespace spindle
