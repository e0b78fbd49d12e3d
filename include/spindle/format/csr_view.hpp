// CsrView<T, Index>: a non-owning compressed-sparse-row matrix over caller-owned arrays
// (raw pointers, an Eigen::SparseMatrix, a Csr). The structure is validated once, at
// construction; T may be const for a read-only view, otherwise the values are writable.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"
#include "spindle/ir/dtype.hpp"

namespace spindle {

namespace detail {

// The two levels of a CSR matrix: dense_fixed rows over sparse_variable columns.
template <class T, class Index>
StorageView csr_storage(T* values, std::int64_t rows, std::int64_t cols, std::int64_t nnz,
                        const Index* indptr, const Index* indices, bool sorted, const char* kind,
                        const std::string& name) {
  StorageView s;
  s.dtype = dtype_v<T>;
  s.data = const_cast<std::remove_const_t<T>*>(values);
  s.value_count = nnz;
  s.writable = !std::is_const_v<T>;
  LevelView row_level;
  row_level.kind = LevelKind::dense_fixed;
  row_level.length = rows;
  LevelView col_level;
  col_level.kind = LevelKind::sparse_variable;
  col_level.length = cols;
  col_level.nnz = nnz;
  col_level.indptr = indptr;
  col_level.indices = indices;
  col_level.index_dtype = dtype_v<Index>;
  col_level.sorted = sorted;
  s.levels = {row_level, col_level};
  s.kind = kind;
  s.name = name;
  return s;
}

template <class T, class Index>
Tensor<std::remove_const_t<T>> csr_to_dense(std::int64_t rows, std::int64_t cols,
                                            const Index* indptr, const Index* indices,
                                            const T* values) {
  auto dense = Tensor<std::remove_const_t<T>>::zeros({rows, cols});
  auto* d = dense.data();
  for (std::int64_t r = 0; r < rows; ++r)
    for (Index q = indptr[r]; q < indptr[r + 1]; ++q) d[r * cols + indices[q]] += values[q];
  return dense;
}

}  // namespace detail

template <class T, class Index = std::int32_t>
class CsrView {
 public:
  using value_type = T;
  using index_type = Index;

  CsrView() = default;  // 0x0

  // Validates the structure (FormatError on failure) and records whether rows are sorted.
  // indptr has rows + 1 entries; indices and values have nnz entries.
  CsrView(std::int64_t rows, std::int64_t cols, std::int64_t nnz, const Index* indptr,
          const Index* indices, T* values, std::string name = {})
      : rows_(rows),
        cols_(cols),
        nnz_(nnz),
        indptr_(indptr),
        indices_(indices),
        values_(values),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    detail::static_check_index<Index>();
    const std::string what = detail::structure_name("CsrView", name_);
    detail::check_extent<Index>(what, "row", rows, " count");
    detail::check_extent<Index>(what, "column", cols, " count");
    SPINDLE_CHECK(nnz == 0 || values != nullptr, FormatError, what, ": values is null but nnz is ",
                  nnz);
    sorted_ = detail::validate_compressed_impl<Index>(what, "row", rows, cols, nnz, indptr, indices)
                  .sorted;
  }

  // Trusted construction from an already validated structure (Csr::view()).
  struct Trusted {};
  CsrView(Trusted, std::int64_t rows, std::int64_t cols, std::int64_t nnz, const Index* indptr,
          const Index* indices, T* values, bool sorted, std::string name)
      : rows_(rows),
        cols_(cols),
        nnz_(nnz),
        indptr_(indptr),
        indices_(indices),
        values_(values),
        sorted_(sorted),
        name_(std::move(name)) {}

  // A mutable view converts to a read-only one.
  template <class U>
  requires(std::is_const_v<T>&& std::is_same_v<std::remove_const_t<T>, U>)
      CsrView(const CsrView<U, Index>& o)
      : CsrView(Trusted{}, o.rows(), o.cols(), o.nnz(), o.indptr().data(), o.indices().data(),
                o.values().data(), o.sorted(), o.name()) {}

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t nnz() const { return nnz_; }
  bool sorted() const { return sorted_; }
  const std::string& name() const { return name_; }
  std::span<const Index> indptr() const { return {indptr_, static_cast<std::size_t>(rows_ + 1)}; }
  std::span<const Index> indices() const { return {indices_, static_cast<std::size_t>(nnz_)}; }
  std::span<T> values() const { return {values_, static_cast<std::size_t>(nnz_)}; }

  StorageView storage() const {
    return detail::csr_storage<T, Index>(values_, rows_, cols_, nnz_, indptr_, indices_, sorted_,
                                         "CsrView", name_);
  }
  Tensor<std::remove_const_t<T>> to_dense() const {
    return detail::csr_to_dense<T, Index>(rows_, cols_, indptr_, indices_, values_);
  }

 private:
  inline static const Index zero_indptr_[1] = {0};
  std::int64_t rows_ = 0, cols_ = 0, nnz_ = 0;
  const Index* indptr_ = zero_indptr_;
  const Index* indices_ = nullptr;
  T* values_ = nullptr;
  bool sorted_ = true;
  std::string name_;
};

}  // namespace spindle
