// Dcsr<T, Index>: doubly compressed sparse rows. Only the rows that hold entries are stored:
// their row numbers (strictly ascending), an indptr over them and the column indices and
// values of their entries. For hypersparse matrices (most rows empty: graph frontiers,
// blocks of a partitioned matrix, RGCN relations) it is O(nnz) where CSR is O(rows + nnz).
// It describes itself as a StorageView of two levels, a root sparse level over the rows
// (sparse_fixed, no parent, one fiber of the stored rows) and a compressed level over the
// columns: the argument of a buffer over [R, C] with
//
//   struct R : spindle::sparse_root<> {};     // the stored rows
//   struct C : spindle::sparse_variable<R> {};  // their columns
//
// A kernel over it iterates only the stored rows (ops::dcsr_spmm). The structure is
// validated at construction (FormatError naming the first bad place); values stay mutable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/sparse_vector.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
class Dcsr {
 public:
  using value_type = T;
  using index_type = Index;

  Dcsr() = default;  // 0x0
  // rows x cols with no stored row (an output a kernel assembles: spindle::kernel fills it).
  Dcsr(std::int64_t rows, std::int64_t cols, std::string name = {})
      : Dcsr(rows, cols, {}, {Index(0)}, {}, {}, std::move(name)) {}

  // row_ids: the stored rows, strictly ascending in [0, rows); indptr: row_ids.size() + 1
  // entries; indices/values: the entries of the stored rows, row after row.
  Dcsr(std::int64_t rows, std::int64_t cols, std::vector<Index> row_ids, std::vector<Index> indptr,
       std::vector<Index> indices, std::vector<T> values, std::string name = {})
      : rows_(rows),
        cols_(cols),
        row_ids_(std::move(row_ids)),
        indptr_(std::move(indptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    detail::static_check_index<Index>();
    const std::string what = detail::structure_name("Dcsr", name_);
    detail::check_extent<Index>(what, "row", rows_, " count");
    detail::check_extent<Index>(what, "column", cols_, " count");
    detail::check_sparse_coordinates<Index>(
        what, rows_, row_ids_,
        {.coordinate = "row id", .coordinates = "row ids", .array = "row_ids", .position = "stored row"});
    SPINDLE_CHECK(values_.size() == indices_.size(), FormatError, what, ": values has ", values_.size(),
                  " entries but indices has ", indices_.size());
    sorted_ = validate_compressed<Index>(what, static_cast<std::int64_t>(row_ids_.size()), cols_,
                                         static_cast<std::int64_t>(indices_.size()), indptr_, indices_,
                                         "stored row")
                  .sorted;
  }

  // The non-empty rows of `a`, entries in a's order.
  static Dcsr from_csr(const Csr<T, Index>& a) {
    std::vector<Index> ids, ptr{0}, idx;
    std::vector<T> val;
    idx.reserve(static_cast<std::size_t>(a.nnz()));
    val.reserve(static_cast<std::size_t>(a.nnz()));
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      const auto ri = a.row_indices(r);
      if (ri.empty()) continue;
      const auto rv = a.row_values(r);
      ids.push_back(static_cast<Index>(r));
      idx.insert(idx.end(), ri.begin(), ri.end());
      val.insert(val.end(), rv.begin(), rv.end());
      ptr.push_back(static_cast<Index>(idx.size()));
    }
    return Dcsr(a.rows(), a.cols(), std::move(ids), std::move(ptr), std::move(idx), std::move(val), a.name());
  }

  Csr<T, Index> to_csr() const {
    std::vector<Index> ptr(static_cast<std::size_t>(rows_) + 1, 0);
    for (std::size_t q = 0; q < row_ids_.size(); ++q)
      ptr[static_cast<std::size_t>(row_ids_[q]) + 1] = indptr_[q + 1] - indptr_[q];
    for (std::int64_t r = 0; r < rows_; ++r) ptr[static_cast<std::size_t>(r) + 1] += ptr[static_cast<std::size_t>(r)];
    return Csr<T, Index>(rows_, cols_, std::move(ptr), indices_, values_, name_);
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t stored_rows() const { return static_cast<std::int64_t>(row_ids_.size()); }
  std::int64_t nnz() const { return static_cast<std::int64_t>(indices_.size()); }
  bool sorted() const { return sorted_; }
  const std::string& name() const { return name_; }
  std::span<const Index> row_ids() const { return row_ids_; }
  std::span<const Index> indptr() const { return indptr_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }
  // Bytes of the structure and values (CSR would need (rows + 1) indptr entries instead).
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((row_ids_.size() + indptr_.size() + indices_.size()) * sizeof(Index) +
                                     values_.size() * sizeof(T));
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "Dcsr", name_);
    const LevelView rows = detail::sparse_root_level<Index>(rows_, row_ids_);
    LevelView cols;
    cols.kind = LevelKind::sparse_variable;
    cols.length = cols_;
    cols.nnz = static_cast<std::int64_t>(indices_.size());
    cols.indptr = indptr_.data();
    cols.indices = indices_.data();
    cols.index_dtype = dtype_v<Index>;
    cols.sorted = sorted_;
    s.levels = {rows, cols};
    return s;
  }

  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<Index> row_ids_, indptr_{0}, indices_;
  std::vector<T> values_;
  bool sorted_ = true;
  std::string name_;
};

}  // namespace spindle
