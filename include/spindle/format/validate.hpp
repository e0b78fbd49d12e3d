// Structural validation of the variable levels of the host formats: the indptr of a
// dense_variable level and the indptr + indices of a compressed (sparse_variable) level.
//
// Every check throws spindle::FormatError whose message starts with the structure's name
// ("Csr 'A'") and says what is wrong and where:
//   Csr 'A': indptr is not monotone at row 17 (indptr[17]=40 > indptr[18]=39)
//   Csr 'A': index 2709 out of range [0, 2708) at position 5 (row 3)
//   Csr 'A': nnz mismatch: indptr[2708]=10555 but 10556 indices
// The checks are overflow-safe: negative sizes and counts that do not fit the index type are
// reported before any element is read. Sortedness of fibers is only required by some kernels,
// so validate_compressed() reports it (FiberOrder) and require_sorted() enforces it.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <type_traits>

#include "spindle/ir/dtype.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

// Result of validate_compressed(): whether every fiber is strictly ascending (sorted and
// free of duplicate coordinates) and, if not, the first place where it is not.
struct FiberOrder {
  bool sorted = true;
  std::int64_t fiber = -1;     // parent position of the first unsorted fiber
  std::int64_t position = -1;  // position p with indices[p-1] >= indices[p]
  std::int64_t previous = 0;   // indices[p-1]
  std::int64_t current = 0;    // indices[p]
};

// Type-erased description of one compressed level, for callers that hold a StorageView.
struct CompressedLevelRef {
  std::string_view name;           // structure name for messages, e.g. "Csr 'A'"
  std::string_view fiber = "row";  // what one parent position is called in messages
  std::int64_t parents = 0;        // number of parent positions (rows of a CSR)
  std::int64_t length = 0;         // coordinate range [0, length) of the indices
  std::int64_t nnz = 0;            // number of positions (indices) in the level
  const void* indptr = nullptr;    // parents + 1 entries
  const void* indices = nullptr;   // nnz entries
  DType index_dtype = DType::i32;  // i32 or i64
};

namespace detail {

template <class Index>
constexpr void static_check_index() {
  static_assert(std::is_same_v<Index, std::int32_t> || std::is_same_v<Index, std::int64_t>,
                "spindle: index type must be std::int32_t or std::int64_t");
}

// Sizes must be non-negative and representable in Index (so generated code that uses Index
// for positions and coordinates cannot overflow).
template <class Index>
void check_extent(std::string_view name, std::string_view what, std::int64_t value,
                  std::string_view what_suffix = {}) {
  SPINDLE_CHECK(value >= 0, FormatError, name, ": ", what, what_suffix, " is negative (", value,
                ")");
  SPINDLE_CHECK(value <= static_cast<std::int64_t>(std::numeric_limits<Index>::max()), FormatError,
                name, ": ", what, what_suffix, "=", value, " does not fit the index type ",
                dtype_name(dtype_v<Index>), "; hint: use Index = std::int64_t");
}

// indptr must hold parents + 1 entries (parents >= 0 already checked; no overflow for
// parents = INT64_MAX).
inline void check_indptr_size(std::string_view name, std::string_view fiber, std::int64_t parents,
                              std::size_t size) {
  if (size == 0 || static_cast<std::uint64_t>(size - 1) != static_cast<std::uint64_t>(parents))
    [[unlikely]]
    throw FormatError(message(name, ": indptr has ", size, " entries, expected ", fiber,
                              "s + 1 = ", static_cast<std::uint64_t>(parents) + 1));
}

template <class Index>
void validate_indptr_impl(std::string_view name, std::string_view fiber, std::int64_t parents,
                          std::int64_t nnz, const Index* indptr, std::string_view count_noun) {
  check_extent<Index>(name, fiber, parents, " count");
  check_extent<Index>(name, "nnz", nnz);
  SPINDLE_CHECK(indptr != nullptr, FormatError, name, ": indptr is null");
  SPINDLE_CHECK(indptr[0] == 0, FormatError, name, ": indptr[0] must be 0, found ", indptr[0]);
  for (std::int64_t p = 0; p < parents; ++p) {
    if (indptr[p] > indptr[p + 1]) [[unlikely]]
      throw FormatError(message(name, ": indptr is not monotone at ", fiber, " ", p, " (indptr[", p,
                                "]=", indptr[p], " > indptr[", p + 1, "]=", indptr[p + 1], ")"));
  }
  SPINDLE_CHECK(static_cast<std::int64_t>(indptr[parents]) == nnz, FormatError, name,
                ": nnz mismatch: indptr[", parents, "]=", indptr[parents], " but ", nnz, " ",
                count_noun);
}

template <class Index>
FiberOrder validate_compressed_impl(std::string_view name, std::string_view fiber,
                                    std::int64_t parents, std::int64_t length, std::int64_t nnz,
                                    const Index* indptr, const Index* indices) {
  check_extent<Index>(name, "length", length);
  validate_indptr_impl<Index>(name, fiber, parents, nnz, indptr, "indices");
  SPINDLE_CHECK(nnz == 0 || indices != nullptr, FormatError, name, ": indices is null but nnz is ",
                nnz);
  FiberOrder order;
  for (std::int64_t p = 0; p < parents; ++p) {
    const std::int64_t begin = indptr[p], end = indptr[p + 1];
    for (std::int64_t q = begin; q < end; ++q) {
      const std::int64_t c = indices[q];
      if (c < 0 || c >= length) [[unlikely]]
        throw FormatError(message(name, ": index ", c, " out of range [0, ", length,
                                  ") at position ", q, " (", fiber, " ", p, ")"));
      if (q > begin && order.sorted && indices[q - 1] >= c) {
        order = FiberOrder{false, p, q, indices[q - 1], c};
      }
    }
  }
  return order;
}

}  // namespace detail

// Checks a dense_variable level (or the indptr half of a compressed one): indptr has
// parents + 1 entries, starts at 0, never decreases and ends at nnz.
template <class Index>
void validate_indptr(std::string_view name, std::int64_t parents, std::int64_t nnz,
                     std::span<const Index> indptr, std::string_view fiber = "row") {
  detail::static_check_index<Index>();
  SPINDLE_CHECK(parents >= 0, FormatError, name, ": ", fiber, " count is negative (", parents, ")");
  detail::check_indptr_size(name, fiber, parents, indptr.size());
  detail::validate_indptr_impl<Index>(name, fiber, parents, nnz, indptr.data(), "positions");
}

// Checks one compressed level and reports whether its fibers are strictly sorted.
template <class Index>
FiberOrder validate_compressed(std::string_view name, std::int64_t parents, std::int64_t length,
                               std::int64_t nnz, std::span<const Index> indptr,
                               std::span<const Index> indices, std::string_view fiber = "row") {
  detail::static_check_index<Index>();
  SPINDLE_CHECK(parents >= 0, FormatError, name, ": ", fiber, " count is negative (", parents, ")");
  detail::check_indptr_size(name, fiber, parents, indptr.size());
  SPINDLE_CHECK(nnz >= 0, FormatError, name, ": nnz is negative (", nnz, ")");
  SPINDLE_CHECK(static_cast<std::int64_t>(indices.size()) == nnz, FormatError, name,
                ": indices has ", indices.size(), " entries but nnz is ", nnz);
  return detail::validate_compressed_impl<Index>(name, fiber, parents, length, nnz, indptr.data(),
                                                 indices.data());
}

// Type-erased form: dispatches on index_dtype (i32 or i64, otherwise DTypeError).
inline FiberOrder validate_compressed(const CompressedLevelRef& level) {
  SPINDLE_CHECK(level.parents >= 0, FormatError, level.name, ": ", level.fiber,
                " count is negative (", level.parents, ")");
  switch (level.index_dtype) {
    case DType::i32:
      return detail::validate_compressed_impl<std::int32_t>(
          level.name, level.fiber, level.parents, level.length, level.nnz,
          static_cast<const std::int32_t*>(level.indptr),
          static_cast<const std::int32_t*>(level.indices));
    case DType::i64:
      return detail::validate_compressed_impl<std::int64_t>(
          level.name, level.fiber, level.parents, level.length, level.nnz,
          static_cast<const std::int64_t*>(level.indptr),
          static_cast<const std::int64_t*>(level.indices));
    default:
      throw DTypeError(message(level.name, ": index dtype must be i32 or i64, got ",
                               dtype_name(level.index_dtype)));
  }
}

// Throws FormatError when validate_compressed() found an unsorted fiber. `needed_by` names
// what requires sorted fibers (a kernel, a conversion) for the message.
inline void require_sorted(const FiberOrder& order, std::string_view name,
                           std::string_view fiber = "row", std::string_view needed_by = {}) {
  if (order.sorted) return;
  throw FormatError(message(
      name, ": indices of ", fiber, " ", order.fiber, " are not strictly ascending at position ",
      order.position, " (indices[", order.position - 1, "]=", order.previous, " >= indices[",
      order.position, "]=", order.current, ")", needed_by.empty() ? "" : "; required by ",
      needed_by, "; hint: build it with from_triplets() or call canonical()"));
}

}  // namespace spindle
