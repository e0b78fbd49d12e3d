// Csr and CsrView: construction, validation, triplets, random generation, storage().
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/format/csr.hpp"

using namespace spindle;
using Catch::Matchers::Contains;

namespace {

// 3x4:  [1 0 2 0]
//       [0 0 0 0]
//       [3 4 0 5]
Csr<float> small() { return Csr<float>(3, 4, {0, 2, 2, 5}, {0, 2, 0, 1, 3}, {1, 2, 3, 4, 5}, "S"); }

}  // namespace

TEST_CASE("Csr from arrays: accessors, to_dense and storage", "[format]") {
  Csr<float> a = small();
  CHECK(a.rows() == 3);
  CHECK(a.cols() == 4);
  CHECK(a.nnz() == 5);
  CHECK(a.sorted());
  CHECK(a.name() == "S");
  CHECK(std::vector<std::int32_t>(a.indptr().begin(), a.indptr().end()) ==
        std::vector<std::int32_t>{0, 2, 2, 5});
  CHECK(a.row_indices(2).size() == 3);
  CHECK(a.row_values(1).empty());
  const auto d = a.to_dense();
  CHECK(d.shape() == std::vector<std::int64_t>{3, 4});
  CHECK(d(0, 2) == 2.0f);
  CHECK(d(2, 3) == 5.0f);
  CHECK(d(1, 1) == 0.0f);

  a.values()[0] = 7;  // values are mutable
  CHECK(a.to_dense()(0, 0) == 7.0f);

  const StorageView s = a.storage();
  CHECK(s.dtype == DType::f32);
  CHECK(s.data == a.values().data());
  CHECK(s.value_count == 5);
  CHECK(s.writable);
  REQUIRE(s.levels.size() == 2);
  CHECK(s.levels[0].kind == LevelKind::dense_fixed);
  CHECK(s.levels[0].length == 3);
  CHECK(s.levels[1].kind == LevelKind::sparse_variable);
  CHECK(s.levels[1].length == 4);
  CHECK(s.levels[1].nnz == 5);
  CHECK(s.levels[1].indptr == a.indptr().data());
  CHECK(s.levels[1].indices == a.indices().data());
  CHECK(s.levels[1].index_dtype == DType::i32);
  CHECK(s.levels[1].sorted);
  CHECK_THAT(s.description(), Contains("Csr<f32,i32> 3x4 nnz=5 'S'"));

  const Csr<float>& ca = a;
  CHECK_FALSE(ca.storage().writable);
}

TEST_CASE("Csr constructor rejects malformed arrays and leaves the caller's vectors alone",
          "[format]") {
  std::vector<std::int32_t> ptr{0, 2, 1, 3}, idx{0, 1, 2};
  std::vector<double> val{1, 2, 3};
  SPINDLE_CHECK_THROWS((Csr<double>(3, 3, ptr, idx, val, "A")), FormatError,
                       Contains("Csr 'A': indptr is not monotone at row 1 (indptr[1]=2 > "
                                "indptr[2]=1)"));
  CHECK(ptr == std::vector<std::int32_t>{0, 2, 1, 3});
  CHECK(idx.size() == 3);
  CHECK(val.size() == 3);

  SPINDLE_CHECK_THROWS((Csr<double>(2, 3, {0, 1, 2}, {0, 1}, {1.0})), FormatError,
                       Contains("Csr: values has 1 entries but indices has 2"));
  SPINDLE_CHECK_THROWS((Csr<double>(2, 3, {0, 1, 2}, {0, 3}, {1.0, 2.0})), FormatError,
                       Contains("index 3 out of range [0, 3) at position 1 (row 1)"));
  SPINDLE_CHECK_THROWS((Csr<double>(-2, 3, {0}, {}, {})), FormatError,
                       Contains("row count is negative (-2)"));
  SPINDLE_CHECK_THROWS((Csr<double>(1, 3'000'000'000LL, {0, 0}, {}, {})), FormatError,
                       Contains("column count=3000000000 does not fit the index type i32"));
  // 64-bit indices accept it.
  CHECK(Csr<double, std::int64_t>(1, 3'000'000'000LL, {0, 1}, {2'999'999'999LL}, {1.0}).nnz() == 1);
}

TEST_CASE("Csr unsorted rows are accepted, reported and canonicalised", "[format]") {
  Csr<float> u(2, 4, {0, 3, 4}, {3, 1, 3, 0}, {1, 2, 3, 4});
  CHECK_FALSE(u.sorted());
  CHECK_FALSE(u.storage().levels[1].sorted);
  const Csr<float> c = u.canonical();
  CHECK(c.sorted());
  CHECK(c.nnz() == 3);
  CHECK(c.to_dense() == u.to_dense());
  CHECK(c.to_dense()(0, 3) == 4.0f);  // duplicates summed
}

TEST_CASE("Csr::pattern reads as ones", "[format]") {
  auto p = Csr<double>::pattern(2, 2, {0, 1, 2}, {1, 0});
  CHECK(p.values()[0] == 1.0);
  CHECK(p.values()[1] == 1.0);
}

TEST_CASE("Csr::from_triplets sorts and merges duplicates", "[format]") {
  const std::vector<Triplet<double>> t{
      {2, 3, 1.0}, {0, 1, 2.0}, {2, 0, 3.0}, {0, 1, 4.0}, {2, 3, 5.0}};
  SECTION("sum") {
    auto a = Csr<double>::from_triplets(3, 4, t);
    CHECK(a.sorted());
    CHECK(a.nnz() == 3);
    CHECK(a.to_dense()(0, 1) == 6.0);
    CHECK(a.to_dense()(2, 3) == 6.0);
    CHECK(a.to_dense()(2, 0) == 3.0);
    CHECK(std::vector<std::int32_t>(a.indptr().begin(), a.indptr().end()) ==
          std::vector<std::int32_t>{0, 1, 1, 3});
  }
  SECTION("keep last") {
    auto a = Csr<double>::from_triplets(3, 4, t, Duplicates::keep_last);
    CHECK(a.to_dense()(0, 1) == 4.0);
    CHECK(a.to_dense()(2, 3) == 5.0);
  }
  SECTION("error") {
    SPINDLE_CHECK_THROWS(Csr<double>::from_triplets(3, 4, t, Duplicates::error, "T"), FormatError,
                         Contains("Csr 'T': duplicate entry (0, 1)"));
  }
  SECTION("out of range") {
    const std::vector<Triplet<double>> bad{{0, 0, 1.0}, {3, 0, 1.0}};
    SPINDLE_CHECK_THROWS(Csr<double>::from_triplets(3, 4, bad), FormatError,
                         Contains("triplet 1 (3, 0) is out of range for a 3x4 matrix"));
  }
  SECTION("empty") {
    auto a = Csr<double>::from_triplets(0, 0, std::vector<Triplet<double>>{});
    CHECK(a.nnz() == 0);
    CHECK(a.indptr().size() == 1);
  }
}

TEST_CASE("Csr::random is deterministic and follows its options", "[format]") {
  auto a = Csr<float>::random(1000, 500, 8.0, 42);
  auto b = Csr<float>::random(1000, 500, 8.0, 42);
  auto c = Csr<float>::random(1000, 500, 8.0, 43);
  CHECK(a.sorted());
  CHECK(std::equal(a.indices().begin(), a.indices().end(), b.indices().begin(), b.indices().end()));
  CHECK_FALSE(
      std::equal(a.indices().begin(), a.indices().end(), c.indices().begin(), c.indices().end()));
  CHECK(a.nnz() > 7000);
  CHECK(a.nnz() < 9000);
  for (float v : a.values()) {
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
  }

  RandomCsrOptions opts;
  opts.empty_row_fraction = 0.3;
  opts.lo = 2;
  opts.hi = 3;
  auto e = Csr<double>::random(2000, 300, 5.0, 7, opts);
  std::int64_t empty = 0;
  for (std::int64_t r = 0; r < e.rows(); ++r) empty += e.row_indices(r).empty();
  CHECK(empty > 500);
  CHECK(empty < 700);
  CHECK(e.nnz() > 9000);  // average kept despite the empty rows
  CHECK(e.nnz() < 11000);
  CHECK(e.values()[0] >= 2.0);

  auto full = Csr<float>::random_density(20, 30, 1.0, 1);
  CHECK(full.nnz() == 600);
  CHECK(full.sorted());

  opts = {};
  opts.shuffle_rows = true;
  auto s = Csr<float>::random(50, 1000, 20.0, 3, opts);
  CHECK_FALSE(s.sorted());
  CHECK(s.canonical().nnz() == s.nnz());  // distinct columns per row

  CHECK(Csr<float>::random(0, 0, 3.0, 1).nnz() == 0);
  CHECK(Csr<float>::random(5, 0, 3.0, 1).nnz() == 0);
  CHECK(Csr<float>::random(0, 5, 3.0, 1).indptr().size() == 1);
  auto one = Csr<float>::random(1, 1, 1.0, 9);
  CHECK(one.nnz() <= 1);
  CHECK(Csr<float>::random_density(1, 1, 1.0, 9).nnz() == 1);
  opts = {};
  opts.empty_row_fraction = 1.0;
  CHECK(Csr<float>::random(10, 10, 4.0, 1, opts).nnz() == 0);
  CHECK_THROWS_AS(Csr<float>::random(10, 10, -1.0, 1), UserError);
}

TEST_CASE("CsrView over raw arrays", "[format]") {
  const std::int32_t ptr[] = {0, 1, 3};
  const std::int32_t idx[] = {2, 0, 1};
  float val[] = {1, 2, 3};

  CsrView<float> mv(2, 3, 3, ptr, idx, val, "raw");
  CHECK(mv.sorted());
  CHECK(mv.storage().writable);
  CHECK(mv.storage().data == val);
  mv.values()[1] = 9;
  CHECK(val[1] == 9.0f);
  CHECK(mv.to_dense()(1, 0) == 9.0f);

  CsrView<const float> cv = mv;  // mutable converts to read-only
  CHECK_FALSE(cv.storage().writable);
  CHECK(cv.storage().data == val);
  CHECK(cv.storage().description().find("CsrView<f32,i32> 2x3 nnz=3 'raw'") != std::string::npos);

  const std::int32_t bad_idx[] = {2, 0, 3};
  SPINDLE_CHECK_THROWS(
      CsrView<const float>(2, 3, 3, ptr, bad_idx, val, "raw"), FormatError,
      Contains("CsrView 'raw': index 3 out of range [0, 3) at position 2 (row 1)"));
  SPINDLE_CHECK_THROWS(CsrView<const float>(2, 3, 4, ptr, idx, val), FormatError,
                       Contains("CsrView: nnz mismatch: indptr[2]=3 but 4 indices"));
  SPINDLE_CHECK_THROWS(CsrView<const float>(2, 3, 3, ptr, idx, nullptr), FormatError,
                       Contains("values is null"));

  Csr<float> owner = small();
  CsrView<float> v = owner.view();
  CHECK(v.values().data() == owner.values().data());
  CHECK(v.nnz() == owner.nnz());
  const Csr<float>& cowner = owner;
  CHECK_FALSE(cowner.view().storage().writable);

  CsrView<const double> empty;
  CHECK(empty.rows() == 0);
  CHECK(empty.indptr().size() == 1);
}

TEST_CASE("Csr with 64-bit indices", "[format]") {
  auto a = Csr<double, std::int64_t>::random(100, 100, 4.0, 5);
  CHECK(a.storage().levels[1].index_dtype == DType::i64);
  CHECK(a.sorted());
  auto t = Csr<std::int32_t, std::int64_t>::from_triplets(
      2, 2, std::vector<Triplet<std::int32_t>>{{1, 1, 3}});
  CHECK(t.storage().dtype == DType::i32);
  CHECK(t.to_dense()(1, 1) == 3);
}
