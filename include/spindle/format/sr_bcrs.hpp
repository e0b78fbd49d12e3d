// SrBcrs<T, Index>: SR-BCRS, the strided row-major block compressed row storage of Magicube
// that SparseTIR (seed 002 §4.3.2) builds from four axes: t x 1 vectors grouped g at a time.
// The rows are cut into mp = ceil(rows / t) panels of t rows. Every column that holds an
// entry in one of a panel's rows is a stored *vector* of the panel: the t values of that
// column in the panel's rows (zeros where a row has no entry, and past the last row). The
// vectors of a panel are grouped g at a time; a panel whose vector count is not a multiple
// of g is padded with zero vectors at the smallest columns it does not hold, merged in
// column order, so the slots of a panel are strictly ascending columns. Panel P owns groups
// group_ptr[P] .. group_ptr[P+1]-1; slot s of group q is slot q * g + s: its column
// indices[q * g + s] and its t values values[(q * g + s) * t .. (q * g + s + 1) * t), one per
// row of the panel. Where BSR stores b x b blocks and pads each to full (nonzero ratio down
// to 1 / b^2), a stored vector is padded only down its t rows (down to 1 / t), and the
// groups give the GPU fixed-size tiles (tensor-core schedules). The structure is validated at
// construction and immutable (FormatError / ShapeError naming the first bad place); the
// values stay mutable. Storage levels:
//   [dense_fixed(mp), dense_variable(max groups per panel, nnz = groups, indptr = group_ptr),
//    sparse_fixed(cols, nnz_per_row = g, indices, sorted), dense_fixed(t)]
// the argument of a buffer over [P, G, J, TI] with
//   struct P : spindle::dense_fixed {};                 // panels
//   struct G : spindle::dense_variable<P> {};           // the groups of a panel
//   struct J : spindle::sparse_fixed<G, GS> {};         // the g columns of a group
//   struct TI : spindle::dense_fixed_n<TT> {};          // the rows of a panel
// (ops::sr_bcrs_spmm).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/pad_columns.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
class SrBcrs {
 public:
  using value_type = T;
  using index_type = Index;

  SrBcrs() = default;  // 0x0, t = g = 1

  // From the arrays described above: group_ptr has mp + 1 entries, indices groups * g
  // entries (strictly ascending columns in [0, cols) within each panel), values
  // groups * g * t. ShapeError for a bad t, g or extent, FormatError for malformed arrays.
  // stored_nonzeros() counts the nonzero values.
  SrBcrs(std::int64_t rows, std::int64_t cols, std::int64_t tile_rows, std::int64_t group_size,
         std::vector<Index> group_ptr, std::vector<Index> indices, std::vector<T> values, std::string name = {})
      : rows_(rows),
        cols_(cols),
        t_(tile_rows),
        g_(group_size),
        group_ptr_(std::move(group_ptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("SrBcrs", name_);
    mp_ = panels(what, rows_, cols_, t_, g_);
    SPINDLE_CHECK(indices_.size() % static_cast<std::size_t>(g_) == 0, FormatError, what, ": indices has ",
                  indices_.size(), " entries, not a multiple of the group size g=", g_);
    const auto groups = static_cast<std::int64_t>(indices_.size()) / g_;
    detail::check_indptr_size(what, "panel", mp_, group_ptr_.size());
    detail::validate_indptr_impl<Index>(what, "panel", mp_, groups, group_ptr_.data(), "groups (indices / g)");
    for (std::int64_t p = 0; p < mp_; ++p) {
      const std::int64_t begin = group_ptr_[p] * g_, end = group_ptr_[p + 1] * g_;
      for (std::int64_t s = begin; s < end; ++s) {
        const std::int64_t c = indices_[s];
        SPINDLE_CHECK(c >= 0 && c < cols_, FormatError, what, ": column ", c, " out of range [0, ", cols_,
                      ") at slot ", s, " (panel ", p, ", group ", s / g_, ")");
        SPINDLE_CHECK(s == begin || indices_[s - 1] < c, FormatError, what, ": the columns of panel ", p,
                      " are not strictly ascending at slot ", s, " (indices[", s - 1, "]=", indices_[s - 1],
                      " >= indices[", s, "]=", c, "); a panel stores each column once, in ascending order");
      }
    }
    constexpr auto imax = std::numeric_limits<std::int64_t>::max();
    const auto slots = static_cast<std::int64_t>(indices_.size());
    SPINDLE_CHECK(slots <= imax / t_, ShapeError, what, ": ", slots, " slots of ", t_, " values are too many");
    SPINDLE_CHECK(static_cast<std::int64_t>(values_.size()) == slots * t_, FormatError, what, ": values has ",
                  values_.size(), " entries, expected slots * t = ", slots, " * ", t_, " = ", slots * t_);
    stored_nonzeros_ = static_cast<std::int64_t>(
        std::count_if(values_.begin(), values_.end(), [](const T& v) { return v != T{}; }));
    max_groups_ = longest_panel();
  }

  // Panels of t rows of `a` (sorted or not; duplicates are added), their vectors grouped by
  // g. ShapeError when a panel's vectors, padded to a multiple of g, need more distinct
  // columns than the matrix has (a smaller g fits). Time O(nnz log nnz + mp + cols), extra
  // memory O(cols) besides the result.
  static SrBcrs from_csr(const Csr<T, Index>& a, std::int64_t tile_rows, std::int64_t group_size);

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t tile_rows() const { return t_; }     // t: rows per panel, values per vector
  std::int64_t group_size() const { return g_; }    // g: vectors per group
  std::int64_t panel_count() const { return mp_; }  // ceil(rows / t)
  std::int64_t padded_rows() const { return mp_ * t_; }
  std::int64_t group_count() const { return static_cast<std::int64_t>(indices_.size()) / g_; }
  std::int64_t slot_count() const { return static_cast<std::int64_t>(indices_.size()); }
  const std::string& name() const { return name_; }
  std::span<const Index> group_ptr() const { return group_ptr_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // Entries of the source: the nnz of the Csr it was built from, or the number of nonzero
  // values for the array constructor.
  std::int64_t stored_nonzeros() const { return stored_nonzeros_; }
  // Stored values per stored entry (1 = no padding at all).
  double padding_ratio() const {
    return static_cast<double>(values_.size()) / static_cast<double>(std::max<std::int64_t>(1, stored_nonzeros_));
  }
  // Bytes of group_ptr, indices and values.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>((group_ptr_.size() + indices_.size()) * sizeof(Index) +
                                     values_.size() * sizeof(T));
  }

  // The entries inside the logical matrix as a sorted Csr. With drop_zeros every zero value
  // is left out (the padding, but also zeros the source stored on purpose).
  Csr<T, Index> to_csr(bool drop_zeros = true) const {
    std::vector<Index> ptr(static_cast<std::size_t>(rows_) + 1, 0);
    std::vector<Index> idx;
    std::vector<T> val;
    for (std::int64_t p = 0; p < mp_; ++p)
      for (std::int64_t i = 0; i < t_ && p * t_ + i < rows_; ++i) {
        for (std::int64_t s = group_ptr_[p] * g_; s < group_ptr_[p + 1] * g_; ++s) {
          const T v = values_[static_cast<std::size_t>(s * t_ + i)];
          if (drop_zeros && v == T{}) continue;
          idx.push_back(indices_[s]);
          val.push_back(v);
        }
        ptr[p * t_ + i + 1] = static_cast<Index>(idx.size());
      }
    return Csr<T, Index>(rows_, cols_, std::move(ptr), std::move(idx), std::move(val), name_);
  }

  // Dense rows x cols row-major copy; for tests and small matrices.
  Tensor<T> to_dense() const {
    auto dense = Tensor<T>::zeros({rows_, cols_});
    T* d = dense.data();
    for (std::int64_t p = 0; p < mp_; ++p)
      for (std::int64_t s = group_ptr_[p] * g_; s < group_ptr_[p + 1] * g_; ++s)
        for (std::int64_t i = 0; i < t_ && p * t_ + i < rows_; ++i)
          d[(p * t_ + i) * cols_ + indices_[s]] = values_[static_cast<std::size_t>(s * t_ + i)];
    return dense;
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  struct Trusted {};
  // Arrays built by from_csr: in range, ascending per panel, sized.
  SrBcrs(Trusted, std::int64_t rows, std::int64_t cols, std::int64_t t, std::int64_t g, std::int64_t mp,
         std::vector<Index> group_ptr, std::vector<Index> indices, std::vector<T> values, std::int64_t stored_nonzeros,
         std::string name)
      : rows_(rows),
        cols_(cols),
        t_(t),
        g_(g),
        mp_(mp),
        group_ptr_(std::move(group_ptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        stored_nonzeros_(stored_nonzeros),
        name_(std::move(name)) {
    max_groups_ = longest_panel();
  }

  // mp = ceil(rows / t). ShapeError for t or g below 1, a negative extent, or a padded row
  // count or column count that does not fit Index.
  static std::int64_t panels(const std::string& what, std::int64_t rows, std::int64_t cols, std::int64_t t,
                             std::int64_t g) {
    detail::static_check_index<Index>();
    SPINDLE_CHECK(t >= 1 && g >= 1, ShapeError, what, ": tile rows t and group size g must be at least 1, got t=",
                  t, ", g=", g);
    SPINDLE_CHECK(rows >= 0, ShapeError, what, ": row count is negative (", rows, ")");
    SPINDLE_CHECK(cols >= 0, ShapeError, what, ": column count is negative (", cols, ")");
    constexpr auto imax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());
    const std::int64_t mp = rows / t + (rows % t != 0);
    SPINDLE_CHECK(t <= imax && mp <= imax / t && cols <= imax, ShapeError, what, ": ", rows, "x", cols,
                  " with panels of ", t, " rows does not fit the index type ", dtype_name(dtype_v<Index>),
                  "; hint: use Index = std::int64_t");
    return mp;
  }

  std::int64_t longest_panel() const {
    std::int64_t longest = 0;
    for (std::int64_t p = 0; p < mp_; ++p)
      longest = std::max<std::int64_t>(longest, group_ptr_[p + 1] - group_ptr_[p]);
    return longest;
  }

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "SrBcrs", name_);
    LevelView panels;
    panels.kind = LevelKind::dense_fixed;
    panels.length = mp_;
    LevelView groups;
    groups.kind = LevelKind::dense_variable;
    groups.length = max_groups_;
    groups.nnz = group_count();
    groups.indptr = group_ptr_.data();
    groups.index_dtype = dtype_v<Index>;
    LevelView columns;
    columns.kind = LevelKind::sparse_fixed;
    columns.length = cols_;
    columns.nnz_per_row = g_;
    columns.indices = indices_.data();
    columns.index_dtype = dtype_v<Index>;
    columns.sorted = true;
    LevelView tile;
    tile.kind = LevelKind::dense_fixed;
    tile.length = t_;
    s.levels = {panels, groups, columns, tile};
    return s;
  }

  std::int64_t rows_ = 0, cols_ = 0;
  std::int64_t t_ = 1, g_ = 1;
  std::int64_t mp_ = 0;
  std::vector<Index> group_ptr_{0};
  std::vector<Index> indices_;
  std::vector<T> values_;
  std::int64_t stored_nonzeros_ = 0;
  std::int64_t max_groups_ = 0;
  std::string name_;
};

template <class T, class Index>
SrBcrs<T, Index> SrBcrs<T, Index>::from_csr(const Csr<T, Index>& a, std::int64_t tile_rows,
                                            std::int64_t group_size) {
  const std::string what = detail::structure_name("SrBcrs", a.name());
  const std::int64_t t = tile_rows, g = group_size;
  const std::int64_t mp = panels(what, a.rows(), a.cols(), t, g);
  const auto a_ptr = a.indptr();
  const auto a_idx = a.indices();
  const auto a_val = a.values();
  auto row_begin = [&](std::int64_t p) { return std::min(a.rows(), p * t); };
  constexpr auto imax = static_cast<std::int64_t>(std::numeric_limits<Index>::max());

  // Pass 1: each panel's distinct columns, sorted, merged with the smallest columns it does
  // not hold up to a multiple of g. mark[c] is the last panel that holds column c.
  std::vector<Index> group_ptr(static_cast<std::size_t>(mp) + 1, 0);
  std::vector<Index> indices;
  std::vector<std::int64_t> mark(static_cast<std::size_t>(a.cols()), -1);
  std::vector<Index> held;
  for (std::int64_t p = 0; p < mp; ++p) {
    held.clear();
    for (Index q = a_ptr[row_begin(p)]; q < a_ptr[row_begin(p + 1)]; ++q)
      if (mark[a_idx[q]] != p) {
        mark[a_idx[q]] = p;
        held.push_back(a_idx[q]);
      }
    std::sort(held.begin(), held.end());
    const auto n = static_cast<std::int64_t>(held.size());
    const std::int64_t slots = (n + g - 1) / g * g;
    SPINDLE_CHECK(slots <= a.cols(), ShapeError, what, ": panel ", p, " (rows ", p * t, "..",
                  std::min(a.rows(), (p + 1) * t) - 1, ") holds ", n, " columns; padded to groups of g=", g,
                  " it needs ", slots, " distinct columns but the matrix has ", a.cols(), "; hint: a smaller g");
    detail::pad_columns(
        n, slots, [&](std::int64_t j) { return held[j]; },
        [&](std::int64_t c, std::int64_t) { indices.push_back(static_cast<Index>(c)); });
    const auto total_groups = static_cast<std::int64_t>(indices.size()) / g;
    SPINDLE_CHECK(static_cast<std::int64_t>(indices.size()) <= imax, ShapeError, what, ": ", indices.size(),
                  " slots do not fit the index type ", dtype_name(dtype_v<Index>), "; hint: use Index = std::int64_t");
    group_ptr[p + 1] = static_cast<Index>(total_groups);
  }
  const auto slots = static_cast<std::int64_t>(indices.size());
  SPINDLE_CHECK(slots <= std::numeric_limits<std::int64_t>::max() / t, ShapeError, what, ": ", slots,
                " slots of ", t, " values are too many");

  // Pass 2: scatter the values. slot[c] = slot of column c in the current panel.
  std::vector<T> values(static_cast<std::size_t>(slots * t), T{});
  std::vector<std::int64_t>& slot = mark;
  for (std::int64_t p = 0; p < mp; ++p) {
    for (std::int64_t s = group_ptr[p] * g; s < group_ptr[p + 1] * g; ++s) slot[indices[s]] = s;
    for (std::int64_t r = row_begin(p); r < row_begin(p + 1); ++r)
      for (Index q = a_ptr[r]; q < a_ptr[r + 1]; ++q)
        values[static_cast<std::size_t>(slot[a_idx[q]] * t + (r - p * t))] += a_val[q];
  }
  return SrBcrs(Trusted{}, a.rows(), a.cols(), t, g, mp, std::move(group_ptr), std::move(indices), std::move(values),
                a.nnz(), a.name());
}

}  // namespace spindle
