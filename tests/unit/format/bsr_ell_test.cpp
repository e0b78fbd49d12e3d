// Bsr and Ell: conversion from Csr and back, accessors, validation, storage().
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/format/bsr.hpp"
#include "spindle/format/ell.hpp"
#include "spindle/format/storage_of.hpp"

using namespace spindle;
using Catch::Matchers::Contains;

namespace {

template <class Index>
std::vector<Index> vec(std::span<const Index> s) {
  return {s.begin(), s.end()};
}

// 5x7, cut into 2x3 blocks (a 3x3 grid, padded to 6x9):
//   [1 0 0 | 0 2 0 | 0]
//   [0 3 0 | 0 0 0 | 0]
//   [0 0 0 | 0 0 0 | 4]
//   [0 0 0 | 0 0 0 | 0]
//   [5 0 0 | 0 0 6 | 0]
Csr<float> five_by_seven() {
  return Csr<float>(5, 7, {0, 2, 3, 4, 4, 6}, {0, 4, 1, 6, 0, 5}, {1, 2, 3, 4, 5, 6}, "B");
}

// 4x5 with rows of 2, 0, 3 and 1 entries:
//   [0 1 0 2 0]
//   [0 0 0 0 0]
//   [3 0 4 0 5]
//   [0 0 0 0 6]
Csr<float> four_by_five() {
  return Csr<float>(4, 5, {0, 2, 2, 5, 6}, {1, 3, 0, 2, 4, 4}, {1, 2, 3, 4, 5, 6}, "E");
}

// Random values in [1, 2): never zero, so to_csr() gives back exactly the source pattern.
template <class Index = std::int32_t>
Csr<float, Index> random_csr(std::int64_t rows, std::int64_t cols, double avg, std::uint64_t seed,
                             bool shuffle = false, double empty_rows = 0.0) {
  RandomCsrOptions opts;
  opts.lo = 1;
  opts.hi = 2;
  opts.shuffle_rows = shuffle;
  opts.empty_row_fraction = empty_rows;
  return Csr<float, Index>::random(rows, cols, avg, seed, opts);
}

template <class Index>
void check_bsr_round_trip(const Csr<float, Index>& a, std::int64_t br, std::int64_t bc) {
  INFO(a.rows() << "x" << a.cols() << " nnz=" << a.nnz() << " blocks " << br << "x" << bc);
  const auto b = Bsr<float, Index>::from_csr(a, br, bc);
  CHECK(b.rows() == a.rows());
  CHECK(b.cols() == a.cols());
  CHECK(b.block_rows() == br);
  CHECK(b.block_cols() == bc);
  CHECK(b.block_row_count() == (a.rows() + br - 1) / br);
  CHECK(b.block_col_count() == (a.cols() + bc - 1) / bc);
  CHECK(b.padded_rows() == b.block_row_count() * br);
  CHECK(b.padded_cols() == b.block_col_count() * bc);
  CHECK(b.padded_rows() >= b.rows());
  CHECK(b.padded_rows() - b.rows() < br);
  CHECK(b.stored_nonzeros() == a.nnz());
  CHECK(b.name() == a.name());

  // The stored blocks are exactly the distinct (row / br, col / bc) of the entries.
  std::set<std::pair<std::int64_t, std::int64_t>> blocks;
  for (std::int64_t r = 0; r < a.rows(); ++r)
    for (Index c : a.row_indices(r)) blocks.insert({r / br, c / bc});
  CHECK(b.nnz_blocks() == static_cast<std::int64_t>(blocks.size()));
  REQUIRE(b.indptr().size() == static_cast<std::size_t>(b.block_row_count() + 1));
  std::set<std::pair<std::int64_t, std::int64_t>> stored;
  for (std::int64_t bi = 0; bi < b.block_row_count(); ++bi)
    for (Index q = b.indptr()[bi]; q < b.indptr()[bi + 1]; ++q) {
      if (q > b.indptr()[bi]) CHECK(b.indices()[q - 1] < b.indices()[q]);
      stored.insert({bi, b.indices()[q]});
    }
  CHECK(stored == blocks);
  CHECK(b.values().size() == static_cast<std::size_t>(b.nnz_blocks() * br * bc));
  // Every entry landed somewhere (values are nonzero), the padding is zero.
  CHECK(std::count_if(b.values().begin(), b.values().end(), [](float v) { return v != 0; }) ==
        a.nnz());
  CHECK(b.padding_ratio() ==
        Approx(static_cast<double>(b.values().size()) / std::max<std::int64_t>(1, a.nnz())));

  CHECK(b.to_dense() == a.to_dense());
  const auto back = b.to_csr();
  CHECK(back.sorted());
  CHECK(back.nnz() == a.nnz());
  CHECK(back.to_dense() == a.to_dense());
  const auto canon = a.canonical();
  CHECK(vec(back.indptr()) == vec(canon.indptr()));
  CHECK(vec(back.indices()) == vec(canon.indices()));
  const auto with_zeros = b.to_csr(false);
  CHECK(with_zeros.to_dense() == a.to_dense());
  CHECK(with_zeros.sorted());
  CHECK(with_zeros.nnz() >= a.nnz());
  CHECK(with_zeros.nnz() <= static_cast<std::int64_t>(b.values().size()));

  // The array constructor accepts what from_csr built.
  const Bsr<float, Index> copy(b.rows(), b.cols(), br, bc, vec(b.indptr()), vec(b.indices()),
                               {b.values().begin(), b.values().end()});
  CHECK(copy.to_dense() == a.to_dense());
  CHECK(copy.stored_nonzeros() == a.nnz());
}

template <class Index>
void check_ell_round_trip(const Csr<float, Index>& a, std::int64_t k) {
  INFO(a.rows() << "x" << a.cols() << " nnz=" << a.nnz() << " k=" << k);
  std::int64_t longest = 0;
  for (std::int64_t r = 0; r < a.rows(); ++r)
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(a.row_indices(r).size()));
  const auto e = Ell<float, Index>::from_csr(a, k);
  const std::int64_t width = k < 0 ? longest : k;
  CHECK(e.rows() == a.rows());
  CHECK(e.cols() == a.cols());
  CHECK(e.width() == width);
  CHECK(e.indices().size() == static_cast<std::size_t>(a.rows() * width));
  CHECK(e.values().size() == static_cast<std::size_t>(a.rows() * width));
  CHECK(e.stored_nonzeros() == a.nnz());
  CHECK(e.padding_ratio() ==
        Approx(static_cast<double>(a.rows() * width) / std::max<std::int64_t>(1, a.nnz())));
  // Every row: distinct ascending columns; the real entries plus zeros at the smallest
  // columns the row does not hold.
  CHECK(e.sorted());
  const auto dense = a.to_dense();
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const auto ri = e.row_indices(r);
    const auto rv = e.row_values(r);
    for (std::int64_t j = 1; j < width; ++j) CHECK(ri[j - 1] < ri[j]);
    std::vector<bool> held(static_cast<std::size_t>(a.cols()), false);
    for (auto c : a.row_indices(r)) held[static_cast<std::size_t>(c)] = true;
    std::int64_t expect_pad = 0;
    for (std::int64_t j = 0; j < width; ++j) {
      if (held[static_cast<std::size_t>(ri[j])]) {
        CHECK(rv[j] == dense(r, static_cast<std::int64_t>(ri[j])));
      } else {
        while (held[static_cast<std::size_t>(expect_pad)]) ++expect_pad;
        CHECK(ri[j] == expect_pad);
        CHECK(rv[j] == 0.0f);
        ++expect_pad;
      }
    }
  }
  CHECK(e.to_dense() == a.to_dense());
  const auto back = e.to_csr();
  CHECK(back.sorted());
  const auto canon = a.canonical();
  CHECK(vec(back.indptr()) == vec(canon.indptr()));
  CHECK(vec(back.indices()) == vec(canon.indices()));
  CHECK(back.to_dense() == a.to_dense());
}

}  // namespace

// --- Bsr -------------------------------------------------------------------------------------

TEST_CASE("Bsr::from_csr on a hand example: blocks, counts and bytes", "[format]") {
  const auto b = Bsr<float>::from_csr(five_by_seven(), 2, 3);
  CHECK(b.rows() == 5);
  CHECK(b.cols() == 7);
  CHECK(b.block_rows() == 2);
  CHECK(b.block_cols() == 3);
  CHECK(b.block_row_count() == 3);
  CHECK(b.block_col_count() == 3);
  CHECK(b.padded_rows() == 6);
  CHECK(b.padded_cols() == 9);
  CHECK(b.nnz_blocks() == 5);
  CHECK(b.name() == "B");
  CHECK(vec(b.indptr()) == std::vector<std::int32_t>{0, 2, 3, 5});
  CHECK(vec(b.indices()) == std::vector<std::int32_t>{0, 1, 2, 0, 1});
  CHECK(std::vector<float>(b.values().begin(), b.values().end()) ==
        std::vector<float>{1, 0, 0, 0, 3, 0,    // block row 0, block column 0
                           0, 2, 0, 0, 0, 0,    // block row 0, block column 1
                           4, 0, 0, 0, 0, 0,    // block row 1, block column 2 (cols 7, 8 padded)
                           5, 0, 0, 0, 0, 0,    // block row 2, block column 0 (row 5 padded)
                           0, 0, 6, 0, 0, 0});  // block row 2, block column 1
  CHECK(b.stored_nonzeros() == 6);
  CHECK(b.padding_ratio() == Approx(5.0));  // 30 stored values for 6 entries
  CHECK(b.bytes() == 4 * 4 + 5 * 4 + 30 * 4);
  CHECK(b.block(4).size() == 6);
  CHECK(b.block(4)[2] == 6.0f);
  SPINDLE_CHECK_THROWS(b.block(5), ShapeError, Contains("Bsr 'B': block 5 out of range [0, 5)"));

  const auto d = b.to_dense();
  CHECK(d.shape() == std::vector<std::int64_t>{5, 7});
  CHECK(d == five_by_seven().to_dense());
  const auto back = b.to_csr();
  CHECK(vec(back.indptr()) == std::vector<std::int32_t>{0, 2, 3, 4, 4, 6});
  CHECK(vec(back.indices()) == std::vector<std::int32_t>{0, 4, 1, 6, 0, 5});
  CHECK(back.name() == "B");
  // Without dropping zeros: every value of a stored block inside the 5x7 matrix.
  const auto full = b.to_csr(false);
  CHECK(full.nnz() == 2 * 6 + 2 * 1 + 6);  // rows 0-1: 2 blocks x 3 each; rows 2-3: col 6; row 4
  CHECK(full.to_dense() == d);

  Bsr<float> m = Bsr<float>::from_csr(five_by_seven(), 2, 3);
  m.values()[0] = 9;  // values are mutable
  m.block(3)[0] = 8;
  CHECK(m.to_dense()(0, 0) == 9.0f);
  CHECK(m.to_dense()(4, 0) == 8.0f);
}

TEST_CASE("Bsr storage() levels and description", "[format]") {
  Bsr<float> b = Bsr<float>::from_csr(five_by_seven(), 2, 3);
  const StorageView s = b.storage();
  CHECK(std::string(s.kind) == "Bsr");
  CHECK(s.name == "B");
  CHECK(s.dtype == DType::f32);
  CHECK(s.data == b.values().data());
  CHECK(s.value_count == 30);
  CHECK(s.writable);
  REQUIRE(s.levels.size() == 4);
  CHECK(s.levels[0].kind == LevelKind::dense_fixed);
  CHECK(s.levels[0].length == 3);
  CHECK(s.levels[1].kind == LevelKind::sparse_variable);
  CHECK(s.levels[1].length == 3);
  CHECK(s.levels[1].nnz == 5);
  CHECK(s.levels[1].indptr == b.indptr().data());
  CHECK(s.levels[1].indices == b.indices().data());
  CHECK(s.levels[1].index_dtype == DType::i32);
  CHECK(s.levels[1].sorted);
  CHECK(s.levels[2].kind == LevelKind::dense_fixed);
  CHECK(s.levels[2].length == 2);
  CHECK(s.levels[3].kind == LevelKind::dense_fixed);
  CHECK(s.levels[3].length == 3);
  CHECK_THAT(s.description(), Contains("Bsr<f32,i32> 6x9 blocks 2x3 (3x3 grid) nnzb=5 'B'"));

  const Bsr<float>& cb = b;
  CHECK_FALSE(cb.storage().writable);
  CHECK(cb.storage().data == b.values().data());
  CHECK(storage_argument<Bsr<float>>);
  CHECK(storage_of(cb).value_count == 30);

  const auto wide = Bsr<double, std::int64_t>::from_csr(
      Csr<double, std::int64_t>(2, 2, {0, 1, 1}, {1}, {1.0}), 1, 1);
  CHECK(wide.storage().levels[1].index_dtype == DType::i64);
  CHECK(wide.storage().dtype == DType::f64);
  CHECK(wide.bytes() == 3 * 8 + 1 * 8 + 1 * 8);
}

TEST_CASE("Bsr round trip on random matrices and block shapes", "[format]") {
  const std::vector<std::pair<std::int64_t, std::int64_t>> block_shapes{
      {1, 1}, {2, 2}, {3, 5}, {4, 4}, {8, 8}, {5, 3}, {1, 7}};
  const std::vector<std::pair<std::int64_t, std::int64_t>> sizes{
      {37, 53}, {101, 29}, {9, 10}, {1, 1}, {17, 1}, {1, 19}, {64, 64}};
  std::uint64_t seed = 1;
  for (auto [rows, cols] : sizes)
    for (auto [br, bc] : block_shapes) {
      check_bsr_round_trip(random_csr(rows, cols, 4.0, seed++), br, bc);
      check_bsr_round_trip(random_csr(rows, cols, 4.0, seed++, true, 0.3), br, bc);
    }
  // Denser and larger, 64-bit indices.
  check_bsr_round_trip(random_csr<std::int64_t>(203, 157, 20.0, 99), 4, 4);
  check_bsr_round_trip(random_csr<std::int64_t>(203, 157, 20.0, 100, true), 8, 3);
  // Blocks larger than the matrix.
  check_bsr_round_trip(random_csr(3, 5, 2.0, 7), 8, 8);
}

TEST_CASE("Bsr of empty matrices, empty rows and a 1x1 matrix", "[format]") {
  SECTION("0x0, 5x0, 0x5") {
    for (auto [rows, cols] :
         std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {5, 0}, {0, 5}}) {
      const Csr<float> a(rows, cols,
                         std::vector<std::int32_t>(static_cast<std::size_t>(rows) + 1, 0), {}, {});
      const auto b = Bsr<float>::from_csr(a, 2, 2);
      CHECK(b.block_row_count() == (rows + 1) / 2);
      CHECK(b.block_col_count() == (cols + 1) / 2);
      CHECK(b.nnz_blocks() == 0);
      CHECK(b.values().empty());
      CHECK(b.padding_ratio() == 0.0);
      CHECK(b.to_dense().shape() == std::vector<std::int64_t>{rows, cols});
      CHECK(b.to_csr().nnz() == 0);
      CHECK(b.to_csr().rows() == rows);
      const StorageView s = b.storage();
      REQUIRE(s.levels.size() == 4);
      CHECK(s.levels[0].length == (rows + 1) / 2);
      CHECK(s.levels[1].length == (cols + 1) / 2);
      CHECK(s.levels[1].nnz == 0);
      CHECK(s.value_count == 0);
      check_bsr_round_trip(a, 3, 1);
    }
    const Bsr<float> d;
    CHECK(d.rows() == 0);
    CHECK(d.indptr().size() == 1);
    CHECK(d.block_rows() == 1);
    CHECK(d.storage().levels.size() == 4);
  }
  SECTION("all rows empty") {
    RandomCsrOptions opts;
    opts.empty_row_fraction = 1.0;
    const auto a = Csr<float>::random(10, 12, 4.0, 3, opts);
    REQUIRE(a.nnz() == 0);
    const auto b = Bsr<float>::from_csr(a, 4, 4);
    CHECK(b.nnz_blocks() == 0);
    CHECK(vec(b.indptr()) == std::vector<std::int32_t>{0, 0, 0, 0});
    CHECK(b.to_dense() == a.to_dense());
    CHECK(b.bytes() == 4 * 4);
    // Some empty block rows between full ones.
    check_bsr_round_trip(random_csr(40, 40, 3.0, 5, false, 0.8), 2, 2);
  }
  SECTION("1x1") {
    const Csr<float> a(1, 1, {0, 1}, {0}, {3});
    const auto b = Bsr<float>::from_csr(a, 4, 4);
    CHECK(b.padded_rows() == 4);
    CHECK(b.nnz_blocks() == 1);
    CHECK(b.values().size() == 16);
    CHECK(b.values()[0] == 3.0f);
    CHECK(b.padding_ratio() == Approx(16.0));
    CHECK(b.to_dense()(0, 0) == 3.0f);
    CHECK(b.to_csr(false).nnz() == 1);  // the padding lies outside the 1x1 matrix
    check_bsr_round_trip(a, 1, 1);
  }
}

TEST_CASE("Bsr::from_csr adds duplicates of an unsorted Csr", "[format]") {
  const Csr<float> u(2, 4, {0, 3, 4}, {3, 1, 3, 0}, {1, 2, 3, 4});
  REQUIRE_FALSE(u.sorted());
  const auto b = Bsr<float>::from_csr(u, 2, 2);
  CHECK(vec(b.indices()) == std::vector<std::int32_t>{0, 1});
  CHECK(b.to_dense() == u.to_dense());
  CHECK(b.to_dense()(0, 3) == 4.0f);
  CHECK(b.stored_nonzeros() == 4);  // the nnz of the source
  CHECK(b.to_csr().nnz() == 3);
}

TEST_CASE("Bsr array constructor", "[format]") {
  // The hand example, as arrays.
  const std::vector<std::int32_t> ptr{0, 2, 3, 5}, idx{0, 1, 2, 0, 1};
  const std::vector<float> val{1, 0, 0, 0, 3, 0, 0, 2, 0, 0, 0, 0, 4, 0, 0,
                               0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0};
  const Bsr<float> b(5, 7, 2, 3, ptr, idx, val, "B");
  CHECK(b.to_dense() == five_by_seven().to_dense());
  CHECK(b.stored_nonzeros() == 6);  // nonzero values
  CHECK(b.padding_ratio() == Approx(5.0));
  CHECK(b.storage().description() ==
        Bsr<float>::from_csr(five_by_seven(), 2, 3).storage().description());

  // A stored block may be all zeros; it still counts as a block.
  const Bsr<float> z(2, 2, 2, 2, {0, 1}, {0}, {0, 0, 0, 0});
  CHECK(z.nnz_blocks() == 1);
  CHECK(z.stored_nonzeros() == 0);
  CHECK(z.padding_ratio() == Approx(4.0));
  CHECK(z.to_csr().nnz() == 0);
  CHECK(z.to_csr(false).nnz() == 4);
}

TEST_CASE("Bsr validation", "[format]") {
  const std::vector<std::int32_t> ptr{0, 2, 3, 5}, idx{0, 1, 2, 0, 1};
  const std::vector<float> val(30, 1.0f);
  REQUIRE_NOTHROW(Bsr<float>(5, 7, 2, 3, ptr, idx, val, "B"));

  SECTION("block shape and extents: ShapeError") {
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 0, 2, {0}, {}, {}, "B"), ShapeError,
                         Contains("Bsr 'B': block shape must be at least 1x1, got 0x2"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, -3, {0}, {}, {}), ShapeError,
                         Contains("Bsr: block shape must be at least 1x1, got 2x-3"));
    SPINDLE_CHECK_THROWS(Bsr<float>(-1, 7, 2, 3, {0}, {}, {}), ShapeError,
                         Contains("Bsr: row count is negative (-1)"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, -7, 2, 3, {0}, {}, {}), ShapeError,
                         Contains("Bsr: column count is negative (-7)"));
    SPINDLE_CHECK_THROWS(
        Bsr<float>(std::numeric_limits<std::int32_t>::max(), 7, 2, 3, {0}, {}, {}), ShapeError,
        Contains("row count 2147483647 padded to blocks of 2 does not fit the index type i32"));
    SPINDLE_CHECK_THROWS(Bsr<float>(1, 1, 1, 3'000'000'000LL, {0, 0}, {}, {}), ShapeError,
                         Contains("column count 1 padded to blocks of 3000000000 does not fit"));
    SPINDLE_CHECK_THROWS(Bsr<float>::from_csr(five_by_seven(), 2, 0), ShapeError,
                         Contains("Bsr 'B': block shape must be at least 1x1, got 2x0"));
  }
  SECTION("indptr: FormatError") {
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, {0, 2, 3}, idx, val, "B"), FormatError,
                         Contains("Bsr 'B': indptr has 3 entries, expected block rows + 1 = 4"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, {0, 3, 2, 5}, idx, val, "B"), FormatError,
                         Contains("Bsr 'B': indptr is not monotone at block row 1 (indptr[1]=3 > "
                                  "indptr[2]=2)"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, {1, 2, 3, 5}, idx, val), FormatError,
                         Contains("indptr[0] must be 0, found 1"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, {0, 2, 3, 4}, idx, val), FormatError,
                         Contains("nnz mismatch: indptr[3]=4 but 5 indices"));
  }
  SECTION("block columns: FormatError") {
    SPINDLE_CHECK_THROWS(
        Bsr<float>(5, 7, 2, 3, ptr, {0, 3, 2, 0, 1}, val, "B"), FormatError,
        Contains("Bsr 'B': index 3 out of range [0, 3) at position 1 (block row 0)"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, ptr, {0, 1, -1, 0, 1}, val), FormatError,
                         Contains("index -1 out of range [0, 3) at position 2 (block row 1)"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, ptr, {1, 0, 2, 0, 1}, val, "B"), FormatError,
                         Contains("Bsr 'B': block columns of block row 0 are not strictly "
                                  "ascending at position 1 (indices[0]=1 >= indices[1]=0)"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, ptr, {0, 1, 2, 1, 1}, val), FormatError,
                         Contains("block columns of block row 2 are not strictly ascending at "
                                  "position 4 (indices[3]=1 >= indices[4]=1)"));
  }
  SECTION("values: FormatError") {
    SPINDLE_CHECK_THROWS(
        Bsr<float>(5, 7, 2, 3, ptr, idx, std::vector<float>(29), "B"), FormatError,
        Contains("Bsr 'B': values has 29 entries, expected nnz_blocks * 2 * 3 = 30"));
    SPINDLE_CHECK_THROWS(Bsr<float>(5, 7, 2, 3, ptr, idx, std::vector<float>(31)), FormatError,
                         Contains("values has 31 entries"));
  }
}

// --- Ell -------------------------------------------------------------------------------------

TEST_CASE("Ell::from_csr with k = longest row: slots, padding and counts", "[format]") {
  const auto e = Ell<float>::from_csr(four_by_five());
  CHECK(e.rows() == 4);
  CHECK(e.cols() == 5);
  CHECK(e.width() == 3);
  CHECK(e.name() == "E");
  // padding: explicit zeros at the smallest columns the row does not hold, slots by column
  CHECK(vec(e.indices()) == std::vector<std::int32_t>{0, 1, 3, 0, 1, 2, 0, 2, 4, 0, 1, 4});
  CHECK(std::vector<float>(e.values().begin(), e.values().end()) ==
        std::vector<float>{0, 1, 2, 0, 0, 0, 3, 4, 5, 0, 0, 6});
  CHECK(e.sorted());
  CHECK(e.stored_nonzeros() == 6);
  CHECK(e.padding_ratio() == Approx(2.0));
  CHECK(e.bytes() == 12 * 4 + 12 * 4);
  CHECK(vec(e.row_indices(2)) == std::vector<std::int32_t>{0, 2, 4});
  CHECK(e.row_values(3)[2] == 6.0f);

  CHECK(e.to_dense() == four_by_five().to_dense());
  const auto back = e.to_csr();
  CHECK(back.sorted());
  CHECK(vec(back.indptr()) == std::vector<std::int32_t>{0, 2, 2, 5, 6});
  CHECK(vec(back.indices()) == std::vector<std::int32_t>{1, 3, 0, 2, 4, 4});
  CHECK(back.name() == "E");
  // Without dropping zeros every slot is an entry (the padding as explicit zeros).
  const auto kept = e.to_csr(false);
  CHECK(vec(kept.indptr()) == std::vector<std::int32_t>{0, 3, 6, 9, 12});
  CHECK(kept.to_dense() == four_by_five().to_dense());

  Ell<float> m = Ell<float>::from_csr(four_by_five());
  m.values()[1] = 7;  // values are mutable: slot 1 of row 0 is column 1
  m.row_values(1)[0] = 9;
  CHECK(m.to_dense()(0, 1) == 7.0f);
  CHECK(m.to_dense()(1, 0) == 9.0f);
}

TEST_CASE("Ell::from_csr with a larger or too small k", "[format]") {
  const auto e = Ell<float>::from_csr(four_by_five(), 5);
  CHECK(e.width() == 5);
  CHECK(vec(e.row_indices(0)) == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(vec(e.row_values(0)) == std::vector<float>{0, 1, 0, 2, 0});
  CHECK(vec(e.row_indices(2)) == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(e.padding_ratio() == Approx(20.0 / 6.0));
  CHECK(e.to_dense() == four_by_five().to_dense());
  CHECK(e.to_csr().nnz() == 6);
  // k above the column count: a row cannot hold 9 distinct columns of 5.
  SPINDLE_CHECK_THROWS(Ell<float>::from_csr(four_by_five(), 9), ShapeError,
                       Contains("Ell 'E': width k=9 exceeds the 5 columns"));

  SPINDLE_CHECK_THROWS(Ell<float>::from_csr(four_by_five(), 2), ShapeError,
                       Contains("Ell 'E': width k=2 is smaller than the longest row: row 2 has 3 "
                                "entries"));
  SPINDLE_CHECK_THROWS(Ell<float>::from_csr(four_by_five(), 0), ShapeError,
                       Contains("width k=0 is smaller than the longest row: row 2 has 3 entries"));
  SPINDLE_CHECK_THROWS(Ell<float>::from_csr(four_by_five(), -2), ShapeError,
                       Contains("width k must be >= 0, or -1 for the longest row; got -2"));
}

TEST_CASE("Ell sorted() flag", "[format]") {
  // Every row has 2 entries: no padding at k = -1.
  const Csr<float> even(3, 4, {0, 2, 4, 6}, {0, 3, 1, 2, 2, 3}, {1, 2, 3, 4, 5, 6});
  const auto e = Ell<float>::from_csr(even);
  CHECK(e.width() == 2);
  CHECK(e.sorted());
  CHECK(e.storage().levels[1].sorted);
  CHECK(e.padding_ratio() == Approx(1.0));
  const auto padded = Ell<float>::from_csr(even, 3);
  CHECK(padded.sorted());  // padding columns are merged in order
  CHECK(padded.storage().levels[1].sorted);

  // Raw arrays: ascending rows are sorted, a descending column is not, a repeated one is an error.
  CHECK(Ell<float>(2, 4, 2, {0, 1, 2, 3}, {1, 1, 1, 1}).sorted());
  SPINDLE_CHECK_THROWS(Ell<float>(2, 4, 2, {0, 1, 3, 3}, {1, 1, 1, 0}), FormatError,
                       Contains("row 1 holds column 3 in two slots"));
  CHECK_FALSE(Ell<float>(2, 4, 2, {1, 0, 2, 3}, {1, 1, 1, 1}).sorted());
  CHECK(Ell<float>(2, 4, 1, {3, 0}, {1, 1}).sorted());
  CHECK(Ell<float>(2, 4, 0, {}, {}).sorted());
}

TEST_CASE("Ell::from_csr of an unsorted Csr merges a column stored twice into one slot", "[format]") {
  const Csr<float> u(2, 4, {0, 3, 4}, {3, 1, 3, 0}, {1, 2, 3, 4});
  REQUIRE_FALSE(u.sorted());
  const auto e = Ell<float>::from_csr(u);
  CHECK(e.width() == 3);  // the longest row as stored
  CHECK(vec(e.indices()) == std::vector<std::int32_t>{0, 1, 3, 0, 1, 2});
  CHECK(std::vector<float>(e.values().begin(), e.values().end()) == std::vector<float>{0, 2, 4, 4, 0, 0});
  CHECK(e.sorted());
  CHECK(e.stored_nonzeros() == 4);
  CHECK(e.to_dense() == u.to_dense());
  const auto back = e.to_csr();
  CHECK(vec(back.indices()) == std::vector<std::int32_t>{1, 3, 0});
  CHECK(back.to_dense()(0, 3) == 4.0f);
}

TEST_CASE("Ell storage() levels and description", "[format]") {
  Ell<float> e = Ell<float>::from_csr(four_by_five());
  const StorageView s = e.storage();
  CHECK(std::string(s.kind) == "Ell");
  CHECK(s.name == "E");
  CHECK(s.dtype == DType::f32);
  CHECK(s.data == e.values().data());
  CHECK(s.value_count == 12);
  CHECK(s.writable);
  REQUIRE(s.levels.size() == 2);
  CHECK(s.levels[0].kind == LevelKind::dense_fixed);
  CHECK(s.levels[0].length == 4);
  CHECK(s.levels[1].kind == LevelKind::sparse_fixed);
  CHECK(s.levels[1].length == 5);
  CHECK(s.levels[1].nnz_per_row == 3);
  CHECK(s.levels[1].indices == e.indices().data());
  CHECK(s.levels[1].indptr == nullptr);
  CHECK(s.levels[1].index_dtype == DType::i32);
  CHECK(s.levels[1].sorted);
  CHECK_THAT(s.description(), Contains("Ell<f32,i32> 4x5 k=3 'E'"));

  const Ell<float>& ce = e;
  CHECK_FALSE(ce.storage().writable);
  CHECK(storage_argument<Ell<float>>);
  CHECK(storage_of(ce).value_count == 12);

  const auto wide =
      Ell<double, std::int64_t>::from_csr(Csr<double, std::int64_t>(2, 2, {0, 1, 1}, {1}, {1.0}));
  CHECK(wide.storage().levels[1].index_dtype == DType::i64);
  CHECK(wide.storage().dtype == DType::f64);
  CHECK(wide.bytes() == 2 * 8 + 2 * 8);
  CHECK(vec(wide.indices()) == std::vector<std::int64_t>{1, 0});
}

TEST_CASE("Ell round trip on random matrices", "[format]") {
  std::uint64_t seed = 11;
  for (auto [rows, cols] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {37, 53}, {101, 29}, {1, 1}, {17, 1}, {1, 19}, {64, 64}}) {
    check_ell_round_trip(random_csr(rows, cols, 4.0, seed++), -1);
    check_ell_round_trip(random_csr(rows, cols, 4.0, seed++, true, 0.3), -1);
    check_ell_round_trip(random_csr(rows, cols, 4.0, seed++, false, 0.3), cols);
  }
  check_ell_round_trip(random_csr<std::int64_t>(203, 157, 20.0, 99, true), -1);
}

TEST_CASE("Ell of empty matrices and empty rows", "[format]") {
  for (auto [rows, cols] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {5, 0}, {0, 5}}) {
    const Csr<float> a(rows, cols, std::vector<std::int32_t>(static_cast<std::size_t>(rows) + 1, 0),
                       {}, {});
    const auto e = Ell<float>::from_csr(a);
    CHECK(e.width() == 0);
    CHECK(e.indices().empty());
    CHECK(e.sorted());
    CHECK(e.padding_ratio() == 0.0);
    CHECK(e.to_dense().shape() == std::vector<std::int64_t>{rows, cols});
    CHECK(e.to_csr().nnz() == 0);
    CHECK(e.storage().levels[0].length == rows);
    CHECK(e.storage().levels[1].length == cols);
    CHECK(e.storage().value_count == 0);
  }
  // A row-less matrix takes any width; a row holds at most cols distinct columns.
  CHECK(Ell<float>::from_csr(Csr<float>(0, 5, {0}, {}, {}), 3).width() == 3);
  SPINDLE_CHECK_THROWS(Ell<float>::from_csr(Csr<float>(5, 0, {0, 0, 0, 0, 0, 0}, {}, {}), 2),
                       ShapeError, Contains("width k=2 exceeds the 0 columns"));

  RandomCsrOptions opts;
  opts.empty_row_fraction = 1.0;
  const auto none = Csr<float>::random(6, 4, 3.0, 2, opts);
  REQUIRE(none.nnz() == 0);
  CHECK(Ell<float>::from_csr(none).width() == 0);
  const auto padded = Ell<float>::from_csr(none, 2);
  CHECK(vec(padded.indices()) == std::vector<std::int32_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
  CHECK(padded.padding_ratio() == Approx(12.0));
  CHECK(padded.to_csr().nnz() == 0);
  CHECK(padded.to_csr(false).nnz() == 12);  // every slot an explicit zero

  const Ell<float> d;
  CHECK(d.rows() == 0);
  CHECK(d.width() == 0);
  CHECK(d.storage().levels.size() == 2);
}

TEST_CASE("Ell array constructor and validation", "[format]") {
  // 2x5, width 3: row 0 = {4: 2, 1: 1, 0: padding}, row 1 = {0: 3, 2: 0 (stored zero), 3: 4}.
  const Ell<float> e(2, 5, 3, {4, 1, 0, 0, 2, 3}, {2, 1, 0, 3, 0, 4}, "R");
  CHECK(e.stored_nonzeros() == 4);  // nonzero values
  CHECK(e.padding_ratio() == Approx(1.5));
  CHECK_FALSE(e.sorted());  // row 0 is not ascending
  CHECK(e.to_dense()(0, 4) == 2.0f);
  CHECK(e.to_dense()(1, 3) == 4.0f);
  CHECK(e.to_csr().nnz() == 4);
  CHECK(e.to_csr(false).nnz() == 6);  // every slot

  SPINDLE_CHECK_THROWS(Ell<float>(2, 5, 3, {1, 4, 4, 0, 2}, std::vector<float>(6), "R"),
                       FormatError,
                       Contains("Ell 'R': indices has 5 entries, expected rows * k = 2 * 3 = 6"));
  SPINDLE_CHECK_THROWS(Ell<float>(2, 5, 3, {1, 4, 4, 0, 2, 3}, std::vector<float>(7)), FormatError,
                       Contains("Ell: values has 7 entries, expected rows * k = 2 * 3 = 6"));
  SPINDLE_CHECK_THROWS(
      Ell<float>(2, 5, 3, {1, 4, 4, 0, 5, 3}, std::vector<float>(6), "R"), FormatError,
      Contains("Ell 'R': index 5 out of range [0, 5) at position 4 (row 1, slot 1)"));
  SPINDLE_CHECK_THROWS(Ell<float>(2, 5, 3, {-1, 4, 4, 0, 2, 3}, std::vector<float>(6)), FormatError,
                       Contains("index -1 out of range [0, 5) at position 0 (row 0, slot 0)"));
  SPINDLE_CHECK_THROWS(Ell<float>(2, 5, -1, {}, {}), ShapeError,
                       Contains("Ell: width k is negative (-1)"));
  SPINDLE_CHECK_THROWS(Ell<float>(-2, 5, 1, {}, {}), ShapeError,
                       Contains("Ell: row count is negative (-2)"));
  SPINDLE_CHECK_THROWS(Ell<float>(2, -5, 1, {}, {}), ShapeError,
                       Contains("Ell: column count is negative (-5)"));
  SPINDLE_CHECK_THROWS(Ell<float>(3, 0, 1, {0, 0, 0}, std::vector<float>(3)), ShapeError,
                       Contains("width k=1 exceeds the 0 columns"));
  SPINDLE_CHECK_THROWS(Ell<float>(100'000, 5, 100'000, {}, {}), ShapeError,
                       Contains("100000x5 with width 100000 does not fit the index type i32"));
}
