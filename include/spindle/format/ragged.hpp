// Ragged<T>: a batch of B variable-length blocks of rows with common trailing dense
// dimensions (e.g. B graphs with a different number of nodes each, F features per node).
// Block b holds rows row_ptr[b] .. row_ptr[b+1]-1 of one row-major value array of shape
// [total_rows, trailing...]. Storage levels:
//   [dense_fixed(B), dense_variable(max_rows, nnz = total_rows, indptr = row_ptr),
//    dense_fixed(trailing[0]), ...]
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/random.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

template <class T>
class Ragged {
 public:
  using value_type = T;

  Ragged() = default;  // B = 0

  // row_ptr has B + 1 entries (0, ..., total_rows); values has total_rows * prod(trailing)
  // elements. Validated: FormatError for a bad row_ptr, ShapeError for a bad value count.
  Ragged(std::vector<std::int32_t> row_ptr, std::vector<std::int64_t> trailing,
         std::vector<T> values, std::string name = {})
      : row_ptr_(std::move(row_ptr)),
        trailing_(std::move(trailing)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Ragged", name_);
    SPINDLE_CHECK(!row_ptr_.empty(), FormatError, what,
                  ": row_ptr is empty; it needs batch + 1 entries starting with 0");
    const auto batch = static_cast<std::int64_t>(row_ptr_.size()) - 1;
    validate_indptr<std::int32_t>(what, batch, row_ptr_.back(), row_ptr_, "block");
    row_size_ = detail::checked_volume(trailing_, what);
    const std::int64_t total = row_ptr_.back();
    SPINDLE_CHECK(row_size_ == 0 || total <= INT64_MAX / row_size_, ShapeError, what,
                  ": too many elements");
    SPINDLE_CHECK(static_cast<std::int64_t>(values_.size()) == total * row_size_, ShapeError, what,
                  ": ", values_.size(), " values do not fill ", total, " rows of shape ",
                  detail::shape_string(trailing_), " (", total * row_size_, " elements)");
    for (std::int64_t b = 0; b < batch; ++b) max_rows_ = std::max(max_rows_, rows(b));
  }

  static Ragged zeros(const std::vector<std::int64_t>& row_counts,
                      std::vector<std::int64_t> trailing) {
    std::vector<std::int32_t> ptr(row_counts.size() + 1, 0);
    for (std::size_t b = 0; b < row_counts.size(); ++b) {
      SPINDLE_CHECK(row_counts[b] >= 0 && ptr[b] + row_counts[b] <= INT32_MAX, ShapeError,
                    "Ragged: row count ", row_counts[b], " of block ", b,
                    " is negative or the total overflows int32");
      ptr[b + 1] = static_cast<std::int32_t>(ptr[b] + row_counts[b]);
    }
    const std::int64_t n =
        static_cast<std::int64_t>(ptr.back()) * detail::checked_volume(trailing, "Ragged");
    return Ragged(std::move(ptr), std::move(trailing), std::vector<T>(static_cast<std::size_t>(n)));
  }
  // Uniform values as in Tensor::random.
  static Ragged random(const std::vector<std::int64_t>& row_counts,
                       std::vector<std::int64_t> trailing, std::uint64_t seed, double lo = 0.0,
                       double hi = 1.0) {
    Ragged r = zeros(row_counts, std::move(trailing));
    Rng rng(seed);
    for (T& v : r.values_) v = rng.value<T>(lo, hi);
    return r;
  }
  // Concatenates blocks of shape [rows_b, trailing...]; ShapeError if trailing shapes differ.
  static Ragged from_blocks(const std::vector<Tensor<T>>& blocks) {
    SPINDLE_CHECK(!blocks.empty(), ShapeError, "Ragged::from_blocks: no blocks");
    const auto& first = blocks[0].shape();
    SPINDLE_CHECK(!first.empty(), ShapeError, "Ragged::from_blocks: block 0 has rank 0");
    std::vector<std::int64_t> trailing(first.begin() + 1, first.end());
    std::vector<std::int64_t> counts;
    std::vector<T> values;
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const auto& s = blocks[b].shape();
      SPINDLE_CHECK(
          !s.empty() && std::equal(s.begin() + 1, s.end(), trailing.begin(), trailing.end()),
          ShapeError, "Ragged::from_blocks: block ", b, " has shape ", detail::shape_string(s),
          " but block 0 has trailing shape ", detail::shape_string(trailing));
      counts.push_back(s[0]);
      values.insert(values.end(), blocks[b].values().begin(), blocks[b].values().end());
    }
    Ragged r = zeros(counts, trailing);
    r.values_ = std::move(values);
    return r;
  }

  std::int64_t batch() const { return static_cast<std::int64_t>(row_ptr_.size()) - 1; }
  std::int64_t total_rows() const { return row_ptr_.back(); }
  std::int64_t max_rows() const { return max_rows_; }
  std::int64_t rows(std::int64_t b) const {
    check_block(b);
    return static_cast<std::int64_t>(row_ptr_[b + 1]) - row_ptr_[b];
  }
  const std::vector<std::int64_t>& trailing_shape() const { return trailing_; }
  std::int64_t row_size() const { return row_size_; }
  const std::string& name() const { return name_; }
  std::span<const std::int32_t> row_ptr() const { return row_ptr_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // Values of block b, row-major [rows(b), trailing...].
  std::span<T> block(std::int64_t b) {
    check_block(b);
    return std::span<T>(values_).subspan(row_ptr_[b] * row_size_, rows(b) * row_size_);
  }
  std::span<const T> block(std::int64_t b) const { return const_cast<Ragged&>(*this).block(b); }

  // Element (b, r, trailing...): bounds-checked, ShapeError.
  template <class... I>
  requires(std::is_integral_v<I>&&...) T& operator()(std::int64_t b, std::int64_t r, I... rest) {
    const std::int64_t n = rows(b);
    SPINDLE_CHECK(r >= 0 && r < n, ShapeError, detail::structure_name("Ragged", name_), ": row ", r,
                  " out of range [0, ", n, ") in block ", b);
    const std::int64_t ix[] = {static_cast<std::int64_t>(rest)..., 0};
    const std::int64_t off = detail::dense_offset(trailing_, ix, sizeof...(I), "Ragged row");
    return values_[static_cast<std::size_t>((row_ptr_[b] + r) * row_size_ + off)];
  }
  template <class... I>
  requires(std::is_integral_v<I>&&...) const T& operator()(std::int64_t b, std::int64_t r,
                                                           I... rest) const {
    return const_cast<Ragged&>(*this)(b, r, rest...);
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  void check_block(std::int64_t b) const {
    SPINDLE_CHECK(b >= 0 && b < batch(), ShapeError, detail::structure_name("Ragged", name_),
                  ": block ", b, " out of range [0, ", batch(), ")");
  }

  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "Ragged", name_);
    LevelView outer;
    outer.kind = LevelKind::dense_fixed;
    outer.length = batch();
    LevelView var;
    var.kind = LevelKind::dense_variable;
    var.length = max_rows_;
    var.nnz = total_rows();
    var.indptr = row_ptr_.data();
    var.index_dtype = DType::i32;
    s.levels = {outer, var};
    for (std::int64_t d : trailing_) {
      LevelView l;
      l.kind = LevelKind::dense_fixed;
      l.length = d;
      s.levels.push_back(l);
    }
    return s;
  }

  std::vector<std::int32_t> row_ptr_{0};
  std::vector<std::int64_t> trailing_;
  std::vector<T> values_;
  std::string name_;
  std::int64_t row_size_ = 1;
  std::int64_t max_rows_ = 0;
};

}  // namespace spindle
