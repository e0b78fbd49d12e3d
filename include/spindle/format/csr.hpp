// Csr<T, Index>: an owning compressed-sparse-row matrix. The structure (rows, cols, indptr,
// indices) is validated at construction and immutable afterwards; the values stay mutable.
// Built from arrays, from triplets (duplicates summed or last-wins) or at random; describes
// itself as a StorageView with levels [dense_fixed(rows), sparse_variable(cols)]. Facts
// derived from the structure are kept with it (`memo()`, format/structure_memo.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/coo.hpp"
#include "spindle/format/csr_view.hpp"
#include "spindle/format/random.hpp"
#include "spindle/format/structure_memo.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/validate.hpp"

namespace spindle {

// Options of Csr::random() and Csr::random_density().
struct RandomCsrOptions {
  double empty_row_fraction = 0.0;  // rows forced empty, chosen at random
  double lo = 0.0, hi = 1.0;        // value range (see Rng::value)
  bool shuffle_rows = false;        // leave the column indices of each row unsorted
};

namespace detail {
// Proof that arrays come from an assembling kernel (Csr::from_assembly).
struct AssemblyToken {
  explicit AssemblyToken() = default;
};
}  // namespace detail

template <class T, class Index = std::int32_t>
class Csr {
 public:
  using value_type = T;
  using index_type = Index;

  Csr() = default;  // 0x0

  // An all-zero rows x cols matrix (no stored entries): e.g. the output of a kernel that
  // assembles its pattern (docs/language.md §4.6).
  Csr(std::int64_t rows, std::int64_t cols, std::string name = {})
      : Csr(rows, cols, std::vector<Index>(static_cast<std::size_t>(std::max<std::int64_t>(rows, 0)) + 1, 0), {}, {},
            std::move(name)) {}

  // Takes the arrays by value and validates them (FormatError on failure); the caller's
  // vectors are only moved from if the caller moved them in.
  Csr(std::int64_t rows, std::int64_t cols, std::vector<Index> indptr, std::vector<Index> indices,
      std::vector<T> values, std::string name = {})
      : rows_(rows),
        cols_(cols),
        indptr_(std::move(indptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        name_(std::move(name)) {
    detail::static_check_value<T>();
    const std::string what = detail::structure_name("Csr", name_);
    detail::check_extent<Index>(what, "row", rows_, " count");
    detail::check_extent<Index>(what, "column", cols_, " count");
    SPINDLE_CHECK(values_.size() == indices_.size(), FormatError, what, ": values has ",
                  values_.size(), " entries but indices has ", indices_.size());
    sorted_ = validate_compressed<Index>(
                  what, rows_, cols_, static_cast<std::int64_t>(indices_.size()), indptr_, indices_)
                  .sorted;
  }

  // Arrays made by a kernel that assembles its output (runtime/assembled_kernel.hpp): row
  // offsets from its prefix sums, columns in range and distinct per row by construction, so
  // they are not validated again; sorted per row unless the caller took them unsorted
  // (spindle::unsorted: `sorted` false). The token is only made by spindle::Kernel.
  static Csr from_assembly(detail::AssemblyToken, std::int64_t rows, std::int64_t cols, std::vector<Index> indptr,
                           std::vector<Index> indices, std::vector<T> values, std::string name,
                           bool sorted = true) {
    return Csr(rows, cols, std::move(indptr), std::move(indices), std::move(values), std::move(name), sorted);
  }

  // A pattern-only matrix: every stored value is 1.
  static Csr pattern(std::int64_t rows, std::int64_t cols, std::vector<Index> indptr,
                     std::vector<Index> indices, std::string name = {}) {
    std::vector<T> ones(indices.size(), T(1));
    return Csr(rows, cols, std::move(indptr), std::move(indices), std::move(ones), std::move(name));
  }

  // From 0-based (row, col, value) triplets in any order; the result is sorted and has
  // no duplicate coordinates (merged by `policy`).
  static Csr from_triplets(std::int64_t rows, std::int64_t cols,
                           std::span<const Triplet<T>> triplets,
                           Duplicates policy = Duplicates::sum, std::string name = {}) {
    auto a = detail::triplets_to_compressed<T, Index>(rows, cols, triplets, policy,
                                                      detail::structure_name("Csr", name));
    return Csr(rows, cols, std::move(a.indptr), std::move(a.indices), std::move(a.values),
               std::move(name), true);
  }
  static Csr from_triplets(std::int64_t rows, std::int64_t cols,
                           const std::vector<Triplet<T>>& triplets,
                           Duplicates policy = Duplicates::sum, std::string name = {}) {
    return from_triplets(rows, cols, std::span<const Triplet<T>>(triplets), policy,
                         std::move(name));
  }

  // About avg_nnz_per_row entries per row on average (the lengths of the rows not forced
  // empty vary uniformly in [0.5, 1.5] x their mean, narrower when that mean nears cols),
  // distinct columns per row, deterministic for a seed.
  static Csr random(std::int64_t rows, std::int64_t cols, double avg_nnz_per_row,
                    std::uint64_t seed, const RandomCsrOptions& opts = {});
  // The same with a target density nnz / (rows * cols).
  static Csr random_density(std::int64_t rows, std::int64_t cols, double density,
                            std::uint64_t seed, const RandomCsrOptions& opts = {}) {
    return random(rows, cols, density * static_cast<double>(cols), seed, opts);
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t nnz() const { return static_cast<std::int64_t>(indices_.size()); }
  bool sorted() const { return sorted_; }
  const std::string& name() const { return name_; }
  std::span<const Index> indptr() const { return indptr_; }
  std::span<const Index> indices() const { return indices_; }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  // Facts computed from the structure on first use and kept with it, shared by the copies of
  // this matrix (the structure is immutable; no fact may read the values). Thread-safe.
  detail::StructureMemo& memo() const {
    if (!memo_) memo_ = std::make_shared<detail::StructureMemo>();  // only after a move from this
    return *memo_;
  }

  // Column indices and values of one row (unchecked row number beyond a debug assert).
  std::span<const Index> row_indices(std::int64_t r) const {
    return {indices_.data() + indptr_[r], static_cast<std::size_t>(indptr_[r + 1] - indptr_[r])};
  }
  std::span<T> row_values(std::int64_t r) {
    return {values_.data() + indptr_[r], static_cast<std::size_t>(indptr_[r + 1] - indptr_[r])};
  }
  std::span<const T> row_values(std::int64_t r) const {
    return {values_.data() + indptr_[r], static_cast<std::size_t>(indptr_[r + 1] - indptr_[r])};
  }

  // A copy with every row sorted and duplicate columns summed.
  Csr canonical() const {
    if (sorted_) return *this;
    std::vector<Triplet<T>> t;
    t.reserve(indices_.size());
    for (std::int64_t r = 0; r < rows_; ++r)
      for (Index q = indptr_[r]; q < indptr_[r + 1]; ++q) t.push_back({r, indices_[q], values_[q]});
    return from_triplets(rows_, cols_, t, Duplicates::sum, name_);
  }

  CsrView<T, Index> view() {
    return {typename CsrView<T, Index>::Trusted{},
            rows_,
            cols_,
            nnz(),
            indptr_.data(),
            indices_.data(),
            values_.data(),
            sorted_,
            name_};
  }
  CsrView<const T, Index> view() const {
    return {typename CsrView<const T, Index>::Trusted{},
            rows_,
            cols_,
            nnz(),
            indptr_.data(),
            indices_.data(),
            values_.data(),
            sorted_,
            name_};
  }
  StorageView storage() {
    return detail::csr_storage<T, Index>(values_.data(), rows_, cols_, nnz(), indptr_.data(),
                                         indices_.data(), sorted_, "Csr", name_);
  }
  StorageView storage() const {
    return detail::csr_storage<const T, Index>(values_.data(), rows_, cols_, nnz(), indptr_.data(),
                                               indices_.data(), sorted_, "Csr", name_);
  }
  // Dense row-major copy (duplicates added); for tests and small matrices.
  Tensor<T> to_dense() const {
    return detail::csr_to_dense<T, Index>(rows_, cols_, indptr_.data(), indices_.data(),
                                          values_.data());
  }

 private:
  // Trusted: arrays produced by triplets_to_compressed or an assembling kernel, in range,
  // sorted per row as `sorted` says.
  Csr(std::int64_t rows, std::int64_t cols, std::vector<Index> indptr, std::vector<Index> indices,
      std::vector<T> values, std::string name, bool sorted)
      : rows_(rows),
        cols_(cols),
        indptr_(std::move(indptr)),
        indices_(std::move(indices)),
        values_(std::move(values)),
        sorted_(sorted),
        name_(std::move(name)) {}

  std::int64_t rows_ = 0, cols_ = 0;
  std::vector<Index> indptr_{0};
  std::vector<Index> indices_;
  std::vector<T> values_;
  bool sorted_ = true;
  std::string name_;
  mutable std::shared_ptr<detail::StructureMemo> memo_ = std::make_shared<detail::StructureMemo>();
};

template <class T, class Index>
Csr<T, Index> Csr<T, Index>::random(std::int64_t rows, std::int64_t cols, double avg_nnz_per_row,
                                    std::uint64_t seed, const RandomCsrOptions& opts) {
  const std::string what = detail::structure_name("Csr::random", {});
  detail::check_extent<Index>(what, "row", rows, " count");
  detail::check_extent<Index>(what, "column", cols, " count");
  SPINDLE_CHECK(avg_nnz_per_row >= 0 && std::isfinite(avg_nnz_per_row), UserError, what,
                ": avg_nnz_per_row must be finite and >= 0, got ", avg_nnz_per_row);
  SPINDLE_CHECK(opts.empty_row_fraction >= 0 && opts.empty_row_fraction <= 1, UserError, what,
                ": empty_row_fraction must be in [0, 1], got ", opts.empty_row_fraction);
  Rng rng(seed);
  const double keep = 1.0 - opts.empty_row_fraction;
  const double mean = keep > 0 ? std::min(avg_nnz_per_row / keep, static_cast<double>(cols)) : 0;
  std::vector<Index> indptr(static_cast<std::size_t>(rows) + 1, 0);
  std::vector<Index> indices;
  std::vector<T> values;
  std::vector<Index> row;
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool empty = rng.uniform() < opts.empty_row_fraction;
    std::int64_t len = 0;
    if (!empty && mean > 0) {
      // Uniform around the mean, narrowed near a full row so that the mean is kept.
      const double spread = std::min(0.5 * mean, static_cast<double>(cols) - mean);
      const double target = mean + spread * (2.0 * rng.uniform() - 1.0);
      len = std::min<std::int64_t>(cols, static_cast<std::int64_t>(target + rng.uniform()));
    }
    row.clear();
    if (len * 4 >= cols) {  // dense row: selection sampling keeps exactly len columns
      std::int64_t need = len;
      for (std::int64_t c = 0; c < cols && need > 0; ++c)
        if (rng.below(cols - c) < need) row.push_back(static_cast<Index>(c)), --need;
    } else {  // sparse row: draw, then top up until len distinct columns
      while (static_cast<std::int64_t>(row.size()) < len) {
        for (auto k = static_cast<std::int64_t>(row.size()); k < len; ++k)
          row.push_back(static_cast<Index>(rng.below(cols)));
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
      }
    }
    if (opts.shuffle_rows)
      for (auto k = static_cast<std::int64_t>(row.size()) - 1; k > 0; --k)
        std::swap(row[k], row[rng.below(k + 1)]);
    detail::check_extent<Index>(what, "nnz",
                                static_cast<std::int64_t>(indices.size() + row.size()));
    indices.insert(indices.end(), row.begin(), row.end());
    for (std::size_t k = 0; k < row.size(); ++k) values.push_back(rng.value<T>(opts.lo, opts.hi));
    indptr[r + 1] = static_cast<Index>(indices.size());
  }
  return Csr(rows, cols, std::move(indptr), std::move(indices), std::move(values));
}

}  // namespace spindle
