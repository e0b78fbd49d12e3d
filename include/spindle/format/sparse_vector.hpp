// SparseVector<T, Index>: an owning sparse vector — a length n and the strictly ascending
// coordinates of its nnz stored entries with their values. It describes itself as a
// StorageView of one level, sparse_fixed with no parent (nnz_per_row = nnz): the argument
// of a buffer over a spindle::sparse_root<> axis (docs/language.md §1.2).
//
//   struct V : spindle::sparse_root<> {};
//   auto dot = spindle::kernel("dot", [](spindle::in<float, V> x, spindle::in<float, spindle::dense<V>> y,
//                                         spindle::out<float> s, spindle::iter<V> v) { s() += x(v) * y(v); });
//
// The structure is validated at construction (FormatError naming the first bad position);
// values stay mutable. Coordinates must be strictly ascending: a kernel's lookups by
// coordinate search them, and a parallel loop over the entries writes each coordinate once.
// from_entries() sorts and merges (coordinate, value) pairs given in any order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/storage.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

namespace detail {

// What the messages of check_sparse_coordinates call things. SparseVector: "index 5 out of
// range [0, 5) at position 1", "indices are not strictly ascending at position 2 (indices[1]=3
// >= indices[2]=2)"; Dcsr's row ids: "row id 5 ... at stored row 0", "row ids ... (row_ids[0]=1 ...)".
struct CoordinateNames {
  const char* coordinate = "index";     // one coordinate
  const char* coordinates = "indices";  // all of them
  const char* array = "indices";        // the array, as subscripted in the message
  const char* position = "position";    // what a position in the array is
  const char* hint = "";                // appended to the not-ascending message
};

// The coordinates of a sparse root level (one fiber): each in [0, length) and strictly
// ascending. FormatError naming `what`, the coordinate and its position.
template <class Index>
void check_sparse_coordinates(const std::string& what, std::int64_t length, std::span<const Index> indices,
                              const CoordinateNames& names = {}) {
  for (std::size_t q = 0; q < indices.size(); ++q) {
    const std::int64_t c = indices[q];
    SPINDLE_CHECK(c >= 0 && c < length, FormatError, what, ": ", names.coordinate, " ", c, " out of range [0, ",
                  length, ") at ", names.position, " ", q);
    SPINDLE_CHECK(q == 0 || indices[q - 1] < indices[q], FormatError, what, ": ", names.coordinates,
                  " are not strictly ascending at ", names.position, " ", q, " (", names.array, "[", q - 1, "]=",
                  indices[q - 1], " >= ", names.array, "[", q, "]=", c, ")", names.hint);
  }
}

// A sparse vector of `length` with stored coordinates `indices` and `value_count` values:
// extents that fit Index, as many values as indices, coordinates in range and strictly
// ascending (`hint` is appended to the not-ascending message). SparseVector and
// Eigen::SparseVector arguments.
template <class Index>
void validate_sparse_vector(const std::string& what, std::int64_t length, std::span<const Index> indices,
                            std::size_t value_count, const char* hint = "") {
  check_extent<Index>(what, "length", length);
  check_extent<Index>(what, "nnz", static_cast<std::int64_t>(indices.size()));
  SPINDLE_CHECK(value_count == indices.size(), FormatError, what, ": values has ", value_count,
                " entries but indices has ", indices.size());
  CoordinateNames names;
  names.hint = hint;
  check_sparse_coordinates<Index>(what, length, indices, names);
}

// The sparse_root level over `indices` (strictly ascending coordinates in [0, length)): one
// fiber, sparse_fixed with no parent (nnz_per_row = the number of indices).
template <class Index>
LevelView sparse_root_level(std::int64_t length, std::span<const Index> indices) {
  LevelView l;
  l.kind = LevelKind::sparse_fixed;
  l.length = length;
  l.nnz_per_row = static_cast<std::int64_t>(indices.size());
  l.indices = indices.data();
  l.index_dtype = dtype_v<Index>;
  l.sorted = true;
  return l;
}

}  // namespace detail

template <class T, class Index = std::int32_t>
class SparseVector {
 public:
  using value_type = T;
  using index_type = Index;

  SparseVector() = default;  // length 0

  SparseVector(std::int64_t length, std::vector<Index> indices, std::vector<T> values, std::string name = {})
      : length_(length), indices_(std::move(indices)), values_(std::move(values)), name_(std::move(name)) {
    detail::static_check_value<T>();
    detail::static_check_index<Index>();
    detail::validate_sparse_vector<Index>(
        detail::structure_name("SparseVector", name_), length_, indices_, values_.size(),
        "; hint: build it with SparseVector::from_entries(), which sorts and sums duplicates");
  }

  // From (coordinate, value) pairs in any order; a coordinate given twice holds the sum.
  static SparseVector from_entries(std::int64_t length, std::vector<std::pair<Index, T>> entries,
                                   std::string name = {}) {
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Index> idx;
    std::vector<T> val;
    for (const auto& [c, v] : entries) {
      if (!idx.empty() && idx.back() == c) {
        val.back() += v;
      } else {
        idx.push_back(c);
        val.push_back(v);
      }
    }
    return SparseVector(length, std::move(idx), std::move(val), std::move(name));
  }

  // The nonzeros of a dense vector (entries equal to T{} are not stored).
  static SparseVector from_dense(std::span<const T> dense, std::string name = {}) {
    std::vector<Index> idx;
    std::vector<T> val;
    for (std::size_t c = 0; c < dense.size(); ++c)
      if (dense[c] != T{}) idx.push_back(static_cast<Index>(c)), val.push_back(dense[c]);
    return SparseVector(static_cast<std::int64_t>(dense.size()), std::move(idx), std::move(val), std::move(name));
  }

  // The same pattern with every value T{}: an output buffer over a sparse_root axis.
  SparseVector zeros_like(std::string name = {}) const {
    return SparseVector(length_, indices_, std::vector<T>(values_.size(), T{}), std::move(name));
  }

  std::int64_t length() const { return length_; }
  std::int64_t nnz() const { return static_cast<std::int64_t>(indices_.size()); }
  const std::string& name() const { return name_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // The value at coordinate c (T{} where none is stored).
  T at(std::int64_t c) const {
    auto it = std::lower_bound(indices_.begin(), indices_.end(), c,
                               [](Index a, std::int64_t b) { return static_cast<std::int64_t>(a) < b; });
    return it != indices_.end() && *it == c ? values_[static_cast<std::size_t>(it - indices_.begin())] : T{};
  }

  Tensor<T> to_dense() const {
    auto d = Tensor<T>::zeros({length_});
    for (std::size_t q = 0; q < indices_.size(); ++q) d.data()[indices_[q]] = values_[q];
    return d;
  }

  StorageView storage() { return make_storage<T>(values_.data()); }
  StorageView storage() const { return make_storage<const T>(values_.data()); }

 private:
  template <class U>
  StorageView make_storage(U* data) const {
    StorageView s = detail::values_storage(data, values_.size(), "SparseVector", name_);
    s.levels = {detail::sparse_root_level<Index>(length_, indices_)};
    return s;
  }

  std::int64_t length_ = 0;
  std::vector<Index> indices_;
  std::vector<T> values_;
  std::string name_;
};

}  // namespace spindle
