// validate_compressed / validate_indptr / require_sorted: every failure names what and where.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/format/validate.hpp"

using namespace spindle;
using Catch::Matchers::Contains;
using I32 = std::vector<std::int32_t>;
using I64 = std::vector<std::int64_t>;

namespace {

FiberOrder check32(std::int64_t rows, std::int64_t cols, const I32& ptr, const I32& idx) {
  return validate_compressed<std::int32_t>("Csr 'A'", rows, cols,
                                           static_cast<std::int64_t>(idx.size()), ptr, idx);
}

}  // namespace

TEST_CASE("validate_compressed accepts a valid level and reports sortedness", "[format]") {
  // 3x5: row 0 {1, 3}, row 1 {}, row 2 {0, 2, 4}
  const FiberOrder ok = check32(3, 5, {0, 2, 2, 5}, {1, 3, 0, 2, 4});
  CHECK(ok.sorted);
  CHECK_NOTHROW(require_sorted(ok, "Csr 'A'"));

  const FiberOrder unsorted = check32(3, 5, {0, 2, 2, 5}, {1, 3, 0, 4, 2});
  CHECK_FALSE(unsorted.sorted);
  CHECK(unsorted.fiber == 2);
  CHECK(unsorted.position == 4);
  SPINDLE_CHECK_THROWS(require_sorted(unsorted, "Csr 'A'", "row", "the merge kernel"), FormatError,
                       Contains("Csr 'A': indices of row 2 are not strictly ascending at position "
                                "4 (indices[3]=4 >= indices[4]=2)") &&
                           Contains("required by the merge kernel"));

  const FiberOrder dup = check32(1, 5, {0, 2}, {3, 3});
  CHECK_FALSE(dup.sorted);
}

TEST_CASE("validate_compressed accepts empty structures", "[format]") {
  CHECK(check32(0, 0, {0}, {}).sorted);
  CHECK(check32(4, 0, {0, 0, 0, 0, 0}, {}).sorted);
  CHECK(check32(0, 7, {0}, {}).sorted);
}

TEST_CASE("validate_compressed rejects a malformed indptr", "[format]") {
  SECTION("wrong size") {
    SPINDLE_CHECK_THROWS(check32(3, 5, {0, 1, 2}, {0, 1}), FormatError,
                         Contains("Csr 'A': indptr has 3 entries, expected rows + 1 = 4"));
  }
  SECTION("first entry not zero") {
    SPINDLE_CHECK_THROWS(check32(2, 5, {1, 1, 2}, {0, 1}), FormatError,
                         Contains("Csr 'A': indptr[0] must be 0, found 1"));
  }
  SECTION("not monotone") {
    SPINDLE_CHECK_THROWS(check32(3, 5, {0, 3, 2, 3}, {0, 1, 2}), FormatError,
                         Contains("Csr 'A': indptr is not monotone at row 1 (indptr[1]=3 > "
                                  "indptr[2]=2)"));
  }
  SECTION("last entry is not nnz") {
    SPINDLE_CHECK_THROWS(check32(3, 5, {0, 1, 2, 2}, {0, 1, 2}), FormatError,
                         Contains("Csr 'A': nnz mismatch: indptr[3]=2 but 3 indices"));
  }
  SECTION("negative entries are caught as non-monotone") {
    SPINDLE_CHECK_THROWS(check32(2, 5, {0, -1, 0}, {}), FormatError,
                         Contains("not monotone at row 0"));
  }
  SECTION("indices size differs from nnz") {
    const I32 ptr{0, 1}, idx{0};
    SPINDLE_CHECK_THROWS(validate_compressed<std::int32_t>("Csr 'A'", 1, 5, 2, ptr, idx),
                         FormatError, Contains("indices has 1 entries but nnz is 2"));
  }
}

TEST_CASE("validate_compressed rejects indices out of range", "[format]") {
  SPINDLE_CHECK_THROWS(check32(2, 5, {0, 1, 3}, {4, 2, 5}), FormatError,
                       Contains("Csr 'A': index 5 out of range [0, 5) at position 2 (row 1)"));
  SPINDLE_CHECK_THROWS(check32(2, 5, {0, 1, 3}, {-1, 2, 3}), FormatError,
                       Contains("index -1 out of range [0, 5) at position 0 (row 0)"));
  SPINDLE_CHECK_THROWS(check32(1, 0, {0, 1}, {0}), FormatError,
                       Contains("index 0 out of range [0, 0)"));
}

TEST_CASE("validate_compressed is overflow-safe", "[format]") {
  const I32 ptr{0}, idx{};
  SPINDLE_CHECK_THROWS(validate_compressed<std::int32_t>("Csr 'A'", -1, 5, 0, ptr, idx),
                       FormatError, Contains("Csr 'A': row count is negative (-1)"));
  SPINDLE_CHECK_THROWS(validate_compressed<std::int32_t>("Csr 'A'", 0, -3, 0, ptr, idx),
                       FormatError, Contains("length is negative (-3)"));
  SPINDLE_CHECK_THROWS(validate_compressed<std::int32_t>("Csr 'A'", 0, 5, -2, ptr, idx),
                       FormatError, Contains("nnz is negative (-2)"));
  SPINDLE_CHECK_THROWS(
      validate_compressed<std::int32_t>("Csr 'A'", 0, 3'000'000'000LL, 0, ptr, idx), FormatError,
      Contains("length=3000000000 does not fit the index type i32") && Contains("std::int64_t"));
  // An nnz beyond int32 is reported through the type-erased entry without reading the arrays.
  const std::int32_t big_ptr[2] = {0, 0};
  CompressedLevelRef ref{"Csr 'B'", "row", 1, 5, 3'000'000'000LL, big_ptr, nullptr, DType::i32};
  SPINDLE_CHECK_THROWS(validate_compressed(ref), FormatError,
                       Contains("nnz=3000000000 does not fit the index type i32"));
  // The same counts are fine with 64-bit indices.
  const I64 ptr64{0}, idx64{};
  CHECK(validate_compressed<std::int64_t>("Csr 'A'", 0, 3'000'000'000LL, 0, ptr64, idx64).sorted);
}

TEST_CASE("validate_compressed type-erased form dispatches on the index dtype", "[format]") {
  const I64 ptr{0, 2, 3}, idx{0, 4, 1};
  CompressedLevelRef ref{"Csf 'T' level 1", "fiber", 2, 5, 3, ptr.data(), idx.data(), DType::i64};
  CHECK(validate_compressed(ref).sorted);

  const I64 bad_idx{0, 4, 9};
  ref.indices = bad_idx.data();
  SPINDLE_CHECK_THROWS(validate_compressed(ref), FormatError,
                       Contains("Csf 'T' level 1: index 9 out of range [0, 5) at position 2 "
                                "(fiber 1)"));
  ref.index_dtype = DType::f32;
  SPINDLE_CHECK_THROWS(validate_compressed(ref), DTypeError,
                       Contains("index dtype must be i32 or i64, got f32"));

  CompressedLevelRef null_ptr{"X", "row", 2, 5, 0, nullptr, nullptr, DType::i32};
  SPINDLE_CHECK_THROWS(validate_compressed(null_ptr), FormatError, Contains("X: indptr is null"));
  const std::int32_t p[2] = {0, 2};
  CompressedLevelRef null_idx{"X", "row", 1, 5, 2, p, nullptr, DType::i32};
  SPINDLE_CHECK_THROWS(validate_compressed(null_idx), FormatError,
                       Contains("X: indices is null but nnz is 2"));
}

TEST_CASE("validate_indptr checks a dense_variable level", "[format]") {
  const I32 ok{0, 3, 3, 7};
  CHECK_NOTHROW(validate_indptr<std::int32_t>("Ragged 'x'", 3, 7, ok, "block"));
  const I32 bad{0, 3, 2, 7};
  SPINDLE_CHECK_THROWS(validate_indptr<std::int32_t>("Ragged 'x'", 3, 7, bad, "block"), FormatError,
                       Contains("Ragged 'x': indptr is not monotone at block 1 (indptr[1]=3 > "
                                "indptr[2]=2)"));
  SPINDLE_CHECK_THROWS(validate_indptr<std::int32_t>("Ragged 'x'", 3, 8, ok, "block"), FormatError,
                       Contains("nnz mismatch: indptr[3]=7 but 8 positions"));
  SPINDLE_CHECK_THROWS(validate_indptr<std::int32_t>("Ragged 'x'", 2, 7, ok, "block"), FormatError,
                       Contains("indptr has 4 entries, expected blocks + 1 = 3"));
}
