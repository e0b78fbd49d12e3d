// Ell<T, Index>: an owning ELLPACK matrix: every one of the rows holds exactly k = width()
// slots. Slot j of row r is position r * k + j of two row-major rows x k arrays: its column
// indices[r * k + j] (always in [0, cols)) and its value values[r * k + j]. The k columns of
// a row are distinct (as in a Csr: a coordinate is stored at most once, so a read at a
// coordinate is well defined, docs/language.md §1). Rows with fewer than k entries are
// padded with explicit zeros at the smallest columns the row does not hold (the same few
// rows of a dense operand for every row, which stay in cache); from_csr() orders each row's
// slots by column, so sorted() is true and searches work. Hence k <= cols. The structure is
// validated at construction and immutable; the values stay mutable. Storage levels:
//   [dense_fixed(rows), sparse_fixed(cols, nnz_per_row = k, indices, sorted)]
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/pad_columns.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

namespace detail {

// rows * k slots; ShapeError for negative extents or a slot count that does not fit Index.
template <class Index>
std::int64_t ell_slots(const std::string& what, std::int64_t rows, std::int64_t cols,
                       std::int64_t k) {
  static_check_index<Index>();
  SPINDLE_CHECK(rows >= 0, ShapeError, what, ": row count is negative (", rows, ")");
  SPINDLE_CHECK(cols >= 0, ShapeError, what, ": column count is negative (", cols, ")");
  SPINDLE_CHECK(k >= 0, ShapeError, what, ": width k is negative (", k, ")");
  constexpr auto imax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());
  SPINDLE_CHECK(rows <= imax && cols <= imax && (k == 0 || rows <= imax / k), ShapeError, what,
                ": ", rows, "x", cols, " with width ", k, " does not fit the index type ",
                dtype_name(dtype_v<Index>), "; hint: use Index = std::int64_t");
  SPINDLE_CHECK(rows == 0 || k <= cols, ShapeError, what, ": width k=", k, " exceeds the ", cols,
                " columns (the slots of a row hold distinct columns)");
  return rows * k;
}

}  // namespace detail

template <class T, class Index = std::int32_t>
class Ell {
 public:
  using value_type = T;
  using index_type = Index;

  Ell() = default;  // 0x0, width 0

  // From rows * k column indices and values (row-major). ShapeError for bad extents,
  // FormatError for a wrong array size or an index out of [0, cols). stored_nonzeros()
  // counts the nonzero values.
  Ell(std::int64_t rows, std::int64_t cols, std::int64_t k, std::vector<Index> indices,
      std::vector<T> values, std::string name = {})
      : rows_(rows),
        cols_(cols),
        k_(k),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Ell", name_);
    const std::int64_t slots = detail::ell_slots<Index>(what, rows_, cols_, k_);
    SPINDLE_CHECK(static_cast<std::int64_t>(indices_.size()) == slots, FormatError, what,
                  ": indices has ", indices_.size(), " entries, expected rows * k = ", rows_, " * ",
                  k_, " = ", slots);
    SPINDLE_CHECK(static_cast<std::int64_t>(values_.size()) == slots, FormatError, what,
                  ": values has ", values_.size(), " entries, expected rows * k = ", rows_, " * ",
                  k_, " = ", slots);
    for (std::int64_t p = 0; p < slots; ++p) {
      const std::int64_t c = indices_[p];
      if (c < 0 || c >= cols_) [[unlikely]]
        throw FormatError(message(what, ": index ", c, " out of range [0, ", cols_,
                                  ") at position ", p, " (row ", p / k_, ", slot ", p % k_, ")"));
    }
    sorted_ = compute_sorted();
    if (!sorted_) {  // distinct columns per row
      std::vector<Index> row;
      for (std::int64_t r = 0; r < rows_; ++r) {
        row.assign(indices_.begin() + r * k_, indices_.begin() + (r + 1) * k_);
        std::sort(row.begin(), row.end());
        auto dup = std::adjacent_find(row.begin(), row.end());
        SPINDLE_CHECK(dup == row.end(), FormatError, what, ": row ", r, " holds column ",
                      dup == row.end() ? 0 : static_cast<std::int64_t>(*dup),
                      " in two slots; the slots of a row hold distinct columns");
      }
    }
    stored_nonzeros_ = static_cast<std::int64_t>(
        std::count_if(values_.begin(), values_.end(), [](const T& v) { return v != T{}; }));
  }

  // Packs the rows of `a` (sorted or not; a column stored twice in an unsorted row becomes
  // one slot holding the sum) into width k, padding with zeros at the smallest columns a row
  // does not hold; k = -1 uses the longest row. ShapeError when k is below the
  // longest row or above the column count.
  static Ell from_csr(const Csr<T, Index>& a, std::int64_t k = -1);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t width() const { return k_; }
  bool sorted() const { return sorted_; }
  const std::string& name() const { return name_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }
  // The k slots of row r (unchecked row number).
  std::span<const Index> row_indices(std::int64_t r) const {
    return std::span<const Index>(indices_).subspan(static_cast<std::size_t>(r * k_),
                                                    static_cast<std::size_t>(k_));
  }
  std::span<T> row_values(std::int64_t r) {
    return std::span<T>(values_).subspan(static_cast<std::size_t>(r * k_),
                                         static_cast<std::size_t>(k_));
  }
  std::span<const T> row_values(std::int64_t r) const {
    return std::span<const T>(values_).subspan(static_cast<std::size_t>(r * k_),
                                               static_cast<std::size_t>(k_));
  }

  // Entries of the source: the nnz of the Csr it was built from, or the number of nonzero
  // values for the array constructor.
  std::int64_t stored_nonzeros() const { return stored_nonzeros_; }
  // Slots per stored entry (1 = no padding at all).
  double padding_ratio() const {
    return static_cast<double>(values_.size()) /
           static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros_));
  }
  // Bytes of indices and values.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(indices_.size() * sizeof(Index) + values_.size() * sizeof(T));
  }

  // A sorted Csr: the slots of each row ordered by column; with drop_zeros every zero value
  // is left out (the padding, but also zeros stored on purpose; they cannot be told apart),
  // without it every slot is an entry.
  Csr<T, Index> to_csr(bool drop_zeros = true) const {
    std::vector<Index> ptr(static_cast<std::size_t>(rows_) + 1, 0);
    std::vector<Index> idx;
    std::vector<T> val;
    std::vector<std::pair<Index, T>> row;
    for (std::int64_t r = 0; r < rows_; ++r) {
      row.clear();
      for (std::int64_t p = r * k_; p < (r + 1) * k_; ++p)
        row.emplace_back(indices_[p], values_[p]);
      std::stable_sort(row.begin(), row.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (std::size_t j = 0; j < row.size();) {
        const Index c = row[j].first;
        T sum = row[j].second;
        for (++j; j < row.size() && row[j].first == c; ++j) sum += row[j].second;
        if (drop_zeros && sum == T{}) continue;
        idx.push_back(c);
        val.push_back(sum);
      }
      ptr[r + 1] = static_cast<Index>(idx.size());
    }
    return Csr<T, Index>(rows_, cols_, std::move(ptr), std::move(idx), std::move(val), name_);
  }

  // Dense row-major copy; for tests and small matrices.
  Tensor<T> to_dense() const {
    auto dense = Tensor<T>::zeros({rows_, cols_});
    T* d = dense.data();
    for (std::int64_t p = 0; p < rows_ * k_; ++p) d[(p / k_) * cols_ + indices_[p]] += values_[p];
    return dense;
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  struct Trusted {};
  // Arrays built by from_csr: sized and in range.
  Ell(Trusted, std::int64_t rows, std::int64_t cols, std::int64_t k, std::vector<Index> indices,
      std::vector<T> values, std::int64_t stored_nonzeros, std::string name)
      : rows_(rows),
        cols_(cols),
        k_(k),
        indices_(std::move(indices)),
        values_(std::move(values)),
        stored_nonzeros_(stored_nonzeros),
        name_(std::move(name)) {
    sorted_ = compute_sorted();
  }

  bool compute_sorted() const {
    for (std::int64_t r = 0; r < rows_; ++r)
      for (std::int64_t j = 1; j < k_; ++j)
        if (indices_[r * k_ + j - 1] >= indices_[r * k_ + j]) return false;
    return true;
  }

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "Ell", name_);
    LevelView outer;
    outer.kind = LevelKind::dense_fixed;
    outer.length = rows_;
    LevelView slots;
    slots.kind = LevelKind::sparse_fixed;
    slots.length = cols_;
    slots.nnz_per_row = k_;
    slots.indices = indices_.data();
    slots.index_dtype = dtype_v<Index>;
    slots.sorted = sorted_;
    s.levels = {outer, slots};
    return s;
  }

  std::int64_t rows_ = 0, cols_ = 0, k_ = 0;
  std::vector<Index> indices_;
  std::vector<T> values_;
  bool sorted_ = true;
  std::int64_t stored_nonzeros_ = 0;
  std::string name_;
};

// Rows [begin, end) of an Ell as a read-only kernel argument: the same levels, the slots of
// those rows only (row r of the view is row begin + r of the Ell). It points into the Ell,
// which must outlive it. ops::HybProduct runs a part's rows in pieces this way, one piece per
// share of the output rows, all in one parallel region. ShapeError unless 0 <= begin <= end
// <= rows().
template <class T, class Index = std::int32_t>
class EllRows {
 public:
  using value_type = T;
  using index_type = Index;

  EllRows(const Ell<T, Index>& ell, std::int64_t begin, std::int64_t end) : ell_(&ell), begin_(begin), end_(end) {
    SPINDLE_CHECK(0 <= begin && begin <= end && end <= ell.rows(), ShapeError, "EllRows: rows [", begin, ", ", end,
                  ") are not inside the ", ell.rows(), " rows of the Ell");
  }
  std::int64_t rows() const { return end_ - begin_; }
  std::int64_t width() const { return ell_->width(); }

  StorageView storage() const {
    StorageView s = ell_->storage();
    const std::int64_t first = begin_ * ell_->width();
    s.data = static_cast<T*>(s.data) + first;
    s.value_count = rows() * ell_->width();
    s.levels[0].length = rows();
    s.levels[1].indices = ell_->indices().data() + first;
    return s;
  }

 private:
  const Ell<T, Index>* ell_;
  std::int64_t begin_, end_;
};

template <class T, class Index>
Ell<T, Index> Ell<T, Index>::from_csr(const Csr<T, Index>& a, std::int64_t k) {
  const std::string what = detail::structure_name("Ell", a.name());
  const auto ptr = a.indptr();
  std::int64_t longest = 0, longest_row = -1;
  for (std::int64_t r = 0; r < a.rows(); ++r)
    if (ptr[r + 1] - ptr[r] > longest) longest = ptr[r + 1] - ptr[r], longest_row = r;
  SPINDLE_CHECK(k >= -1, ShapeError, what,
                ": width k must be >= 0, or -1 for the longest row; got ", k);
  if (k == -1) k = longest;
  SPINDLE_CHECK(k >= longest, ShapeError, what, ": width k=", k,
                " is smaller than the longest row: row ", longest_row, " has ", longest,
                " entries; hint: pass k = -1 to use the longest row");
  const std::int64_t slots = detail::ell_slots<Index>(what, a.rows(), a.cols(), k);
  std::vector<Index> indices(static_cast<std::size_t>(slots));
  std::vector<T> values(static_cast<std::size_t>(slots), T{});
  std::vector<std::pair<Index, T>> row;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const auto ri = a.row_indices(r);
    const auto rv = a.row_values(r);
    row.clear();
    for (std::size_t j = 0; j < ri.size(); ++j) row.emplace_back(ri[j], rv[j]);
    if (!a.sorted()) {  // order by column; a column stored twice becomes one slot holding the sum
      detail::sort_and_add_duplicates(row);
    }
    // The row's columns merged with the smallest columns it does not hold, k slots in all.
    Index* out_i = indices.data() + r * k;
    T* out_v = values.data() + r * k;
    detail::pad_columns(
        static_cast<std::int64_t>(row.size()), k, [&](std::int64_t j) { return row[j].first; },
        [&](std::int64_t c, std::int64_t j) {
          *out_i++ = static_cast<Index>(c);
          *out_v++ = j < 0 ? T{} : row[j].second;
        });
  }
  return Ell(Trusted{}, a.rows(), a.cols(), k, std::move(indices), std::move(values), a.nnz(),
             a.name());
}

}  // namespace spindle
