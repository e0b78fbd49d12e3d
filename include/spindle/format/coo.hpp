// Coordinate (triplet) input for the compressed formats, and the conversion of triplets to
// compressed rows: a stable counting sort by row, a per-row stable sort by column (skipped
// for rows that are already sorted) and a merge of duplicate coordinates by policy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/validate.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

// One entry (row, col, value) of a sparse matrix, 0-based.
template <class T>
struct Triplet {
  std::int64_t row = 0;
  std::int64_t col = 0;
  T value{};
  bool operator==(const Triplet&) const = default;
};

// What to do with entries that share a coordinate.
enum class Duplicates : std::uint8_t {
  sum,        // add their values (the Matrix Market and scipy convention)
  keep_last,  // keep the value that came last in the input
  error,      // throw FormatError naming the coordinate
};

namespace detail {

template <class T, class Index>
struct CompressedArrays {
  std::vector<Index> indptr;
  std::vector<Index> indices;
  std::vector<T> values;
};

// Merges the entries of one fiber, already stably sorted by coordinate, in place; returns the
// new fiber length. Summing integers checks for overflow (FormatError naming the coordinate).
template <class T, class Index>
std::int64_t merge_fiber(Index* idx, T* val, std::int64_t n, Duplicates policy,
                         std::string_view name, std::int64_t row) {
  if (n == 0) return 0;
  std::int64_t out = 0;
  for (std::int64_t q = 1; q < n; ++q) {
    if (idx[q] == idx[out]) {
      SPINDLE_CHECK(policy != Duplicates::error, FormatError, name, ": duplicate entry (", row,
                    ", ", idx[q], "); hint: use Duplicates::sum or Duplicates::keep_last");
      if (policy == Duplicates::sum) {
        if constexpr (std::is_integral_v<T>) {
          T sum;
          if (__builtin_add_overflow(val[out], val[q], &sum)) [[unlikely]]
            throw FormatError(message(name, ": the sum of the duplicate entries at (", row, ", ",
                                      idx[q], ") overflows ", dtype_name(dtype_v<T>), " (",
                                      val[out], " + ", val[q], ")"));
          val[out] = sum;
        } else {
          val[out] += val[q];
        }
      } else
        val[out] = val[q];
    } else {
      ++out;
      idx[out] = idx[q];
      val[out] = val[q];
    }
  }
  return out + 1;
}

// Builds compressed rows from triplets. Coordinates are checked against rows x cols; the
// result is sorted with duplicates merged.
template <class T, class Index>
CompressedArrays<T, Index> triplets_to_compressed(std::int64_t rows, std::int64_t cols,
                                                  std::span<const Triplet<T>> triplets,
                                                  Duplicates policy, std::string_view name) {
  static_check_index<Index>();
  check_extent<Index>(name, "row", rows, " count");
  check_extent<Index>(name, "column", cols, " count");
  check_extent<Index>(name, "number of triplets", static_cast<std::int64_t>(triplets.size()));
  const auto n = static_cast<std::int64_t>(triplets.size());
  CompressedArrays<T, Index> out;
  out.indptr.assign(static_cast<std::size_t>(rows) + 1, 0);
  for (std::int64_t t = 0; t < n; ++t) {
    const Triplet<T>& e = triplets[static_cast<std::size_t>(t)];
    if (e.row < 0 || e.row >= rows || e.col < 0 || e.col >= cols) [[unlikely]]
      throw FormatError(message(name, ": triplet ", t, " (", e.row, ", ", e.col,
                                ") is out of range for a ", rows, "x", cols, " matrix"));
    ++out.indptr[static_cast<std::size_t>(e.row) + 1];
  }
  for (std::int64_t r = 0; r < rows; ++r) out.indptr[r + 1] += out.indptr[r];
  out.indices.resize(static_cast<std::size_t>(n));
  out.values.resize(static_cast<std::size_t>(n));
  {
    std::vector<Index> next(out.indptr.begin(), out.indptr.end() - 1);
    for (const Triplet<T>& e : triplets) {
      const auto q = static_cast<std::size_t>(next[static_cast<std::size_t>(e.row)]++);
      out.indices[q] = static_cast<Index>(e.col);
      out.values[q] = e.value;
    }
  }
  // Per-row sort (stable, so keep_last keeps the input order) and merge, compacting in place.
  std::vector<std::pair<Index, T>> scratch;
  Index write = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const Index begin = out.indptr[r], end = out.indptr[r + 1];
    Index* idx = out.indices.data() + begin;
    T* val = out.values.data() + begin;
    const std::int64_t len = end - begin;
    if (!std::is_sorted(idx, idx + len)) {
      scratch.resize(static_cast<std::size_t>(len));
      for (std::int64_t q = 0; q < len; ++q) scratch[q] = {idx[q], val[q]};
      std::stable_sort(scratch.begin(), scratch.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (std::int64_t q = 0; q < len; ++q) idx[q] = scratch[q].first, val[q] = scratch[q].second;
    }
    const std::int64_t kept = merge_fiber(idx, val, len, policy, name, r);
    if (write != begin) {
      std::copy(idx, idx + kept, out.indices.data() + write);
      std::copy(val, val + kept, out.values.data() + write);
    }
    out.indptr[r] = write;
    write = static_cast<Index>(write + kept);
  }
  out.indptr[static_cast<std::size_t>(rows)] = write;
  out.indices.resize(static_cast<std::size_t>(write));
  out.values.resize(static_cast<std::size_t>(write));
  return out;
}

}  // namespace detail
}  // namespace spindle
