// Ragged: batches of variable-length row blocks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/format/ragged.hpp"

using namespace spindle;
using Catch::Matchers::Contains;

TEST_CASE("Ragged from row_ptr and values", "[format]") {
  // 3 blocks with 2, 0 and 3 rows of 2 features.
  std::vector<float> vals(10);
  for (int k = 0; k < 10; ++k) vals[k] = static_cast<float>(k);
  Ragged<float> r({0, 2, 2, 5}, {2}, vals, "G");
  CHECK(r.batch() == 3);
  CHECK(r.total_rows() == 5);
  CHECK(r.max_rows() == 3);
  CHECK(r.rows(1) == 0);
  CHECK(r.row_size() == 2);
  CHECK(r(2, 0, 1) == 5.0f);
  CHECK(r(0, 1, 0) == 2.0f);
  CHECK(r.block(2).size() == 6);
  CHECK(r.block(2)[0] == 4.0f);
  CHECK(r.block(1).empty());
  r(2, 2, 1) = 42;
  CHECK(r.values()[9] == 42.0f);

  SPINDLE_CHECK_THROWS(r(1, 0, 0), ShapeError,
                       Contains("Ragged 'G': row 0 out of range [0, 0) in block 1"));
  SPINDLE_CHECK_THROWS(r(3, 0, 0), ShapeError, Contains("block 3 out of range [0, 3)"));
  SPINDLE_CHECK_THROWS(r(0, 0, 2), ShapeError, Contains("index 2 out of range [0, 2) on axis 0"));

  const StorageView s = r.storage();
  CHECK(s.dtype == DType::f32);
  CHECK(s.data == r.values().data());
  CHECK(s.value_count == 10);
  REQUIRE(s.levels.size() == 3);
  CHECK(s.levels[0].kind == LevelKind::dense_fixed);
  CHECK(s.levels[0].length == 3);
  CHECK(s.levels[1].kind == LevelKind::dense_variable);
  CHECK(s.levels[1].length == 3);
  CHECK(s.levels[1].nnz == 5);
  CHECK(s.levels[1].indptr == r.row_ptr().data());
  CHECK(s.levels[1].index_dtype == DType::i32);
  CHECK(s.levels[2].kind == LevelKind::dense_fixed);
  CHECK(s.levels[2].length == 2);
  const auto& cr = r;
  CHECK_FALSE(cr.storage().writable);
}

TEST_CASE("Ragged validation", "[format]") {
  SPINDLE_CHECK_THROWS(Ragged<float>({0, 3, 2}, {1}, std::vector<float>(2)), FormatError,
                       Contains("Ragged: indptr is not monotone at block 1 (indptr[1]=3 > "
                                "indptr[2]=2)"));
  SPINDLE_CHECK_THROWS(Ragged<float>({1, 3}, {1}, std::vector<float>(3)), FormatError,
                       Contains("indptr[0] must be 0, found 1"));
  SPINDLE_CHECK_THROWS(Ragged<float>({}, {1}, {}), FormatError, Contains("row_ptr is empty"));
  SPINDLE_CHECK_THROWS(
      Ragged<float>({0, 2}, {3}, std::vector<float>(5), "x"), ShapeError,
      Contains("Ragged 'x': 5 values do not fill 2 rows of shape [3] (6 elements)"));
  SPINDLE_CHECK_THROWS(Ragged<float>::zeros({2, -1}, {3}), ShapeError,
                       Contains("row count -1 of block 1"));
}

TEST_CASE("Ragged builders", "[format]") {
  auto z = Ragged<double>::zeros({3, 1, 0, 4}, {2, 2});
  CHECK(z.batch() == 4);
  CHECK(z.total_rows() == 8);
  CHECK(z.values().size() == 32);
  CHECK(z.storage().levels.size() == 4);

  auto a = Ragged<float>::random({5, 0, 2}, {3}, 11, -1, 1);
  auto b = Ragged<float>::random({5, 0, 2}, {3}, 11, -1, 1);
  CHECK(std::equal(a.values().begin(), a.values().end(), b.values().begin(), b.values().end()));

  auto blocks =
      Ragged<float>::from_blocks({Tensor<float>::full({2, 3}, 1.0f), Tensor<float>::zeros({0, 3}),
                                  Tensor<float>::full({1, 3}, 2.0f)});
  CHECK(blocks.batch() == 3);
  CHECK(blocks.max_rows() == 2);
  CHECK(blocks(2, 0, 2) == 2.0f);
  SPINDLE_CHECK_THROWS(
      Ragged<float>::from_blocks({Tensor<float>::zeros({2, 3}), Tensor<float>::zeros({2, 4})}),
      ShapeError, Contains("block 1 has shape [2, 4] but block 0 has trailing shape [3]"));

  Ragged<float> empty;
  CHECK(empty.batch() == 0);
  CHECK(empty.max_rows() == 0);
  CHECK(empty.storage().levels[1].nnz == 0);

  // No trailing dimensions: one value per row.
  Ragged<std::int32_t> flat({0, 1, 4}, {}, {7, 8, 9, 10});
  CHECK(flat(1, 2) == 10);
  CHECK(flat.storage().levels.size() == 2);
}
