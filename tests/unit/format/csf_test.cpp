// Csf: compressed sparse fiber tensors of order 2..N.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/format/csf.hpp"
#include "spindle/format/csr.hpp"

using namespace spindle;
using Catch::Matchers::Contains;
using V32 = std::vector<std::int32_t>;

TEST_CASE("Csf from quadruples: exact level arrays", "[format]") {
  // I=3, J=4, K=5; entries in scrambled order with one duplicate.
  const std::vector<Quadruple<float>> q{{2, 1, 4, 1.0f}, {0, 3, 0, 2.0f}, {0, 0, 1, 3.0f},
                                        {2, 1, 0, 4.0f}, {0, 0, 1, 5.0f}, {0, 0, 3, 6.0f}};
  auto t = Csf<float>::from_quadruples(3, 4, 5, q, Duplicates::sum, "T");
  CHECK(t.order() == 3);
  CHECK(t.nnz() == 5);
  CHECK(t.sorted());
  CHECK(t.positions(0) == 3);
  CHECK(t.positions(1) == 3);  // (0,0) (0,3) (2,1)
  CHECK(V32(t.indptr(1).begin(), t.indptr(1).end()) == V32{0, 2, 2, 3});
  CHECK(V32(t.indices(1).begin(), t.indices(1).end()) == V32{0, 3, 1});
  CHECK(V32(t.indptr(2).begin(), t.indptr(2).end()) == V32{0, 2, 3, 5});
  CHECK(V32(t.indices(2).begin(), t.indices(2).end()) == V32{1, 3, 0, 0, 4});
  CHECK(std::vector<float>(t.values().begin(), t.values().end()) ==
        std::vector<float>{8.0f, 6.0f, 2.0f, 4.0f, 1.0f});
  const auto d = t.to_dense();
  CHECK(d(0, 0, 1) == 8.0f);
  CHECK(d(2, 1, 4) == 1.0f);
  CHECK(d(1, 2, 3) == 0.0f);

  const StorageView s = t.storage();
  CHECK(s.value_count == 5);
  REQUIRE(s.levels.size() == 3);
  CHECK(s.levels[0].kind == LevelKind::dense_fixed);
  CHECK(s.levels[0].length == 3);
  CHECK(s.levels[1].kind == LevelKind::sparse_variable);
  CHECK(s.levels[1].length == 4);
  CHECK(s.levels[1].nnz == 3);
  CHECK(s.levels[2].length == 5);
  CHECK(s.levels[2].nnz == 5);
  CHECK(s.levels[2].indices == t.indices(2).data());
  CHECK_THAT(s.description(), Contains("Csf<f32,i32> [3, 4, 5] nnz=5 'T'"));

  auto last = Csf<float>::from_quadruples(3, 4, 5, q, Duplicates::keep_last);
  CHECK(last.to_dense()(0, 0, 1) == 5.0f);
  SPINDLE_CHECK_THROWS(Csf<float>::from_quadruples(3, 4, 5, q, Duplicates::error), FormatError,
                       Contains("duplicate entry at [0, 0, 1]"));
  SPINDLE_CHECK_THROWS(t.indptr(0), ShapeError, Contains("level 0 has no indptr/indices"));
}

TEST_CASE("Csf validation", "[format]") {
  // Valid: I=2, J=3, K=2 with entries (0,1,0) (1,2,1).
  auto make = [](V32 p1, V32 i1, V32 p2, V32 i2, std::vector<double> v) {
    return Csf<double>({2, 3, 2}, {{p1, i1}, {p2, i2}}, v, "X");
  };
  CHECK(make({0, 1, 2}, {1, 2}, {0, 1, 2}, {0, 1}, {1, 2}).nnz() == 2);
  SPINDLE_CHECK_THROWS(make({0, 2, 1}, {1, 2}, {0, 1, 2}, {0, 1}, {1, 2}), FormatError,
                       Contains("Csf 'X' level 1: indptr is not monotone at fiber 1"));
  SPINDLE_CHECK_THROWS(
      make({0, 1, 2}, {1, 3}, {0, 1, 2}, {0, 1}, {1, 2}), FormatError,
      Contains("Csf 'X' level 1: index 3 out of range [0, 3) at position 1 (fiber 1)"));
  SPINDLE_CHECK_THROWS(make({0, 1, 2}, {1, 2}, {0, 1}, {0}, {1}), FormatError,
                       Contains("Csf 'X' level 2: indptr has 2 entries, expected fibers + 1 = 3"));
  SPINDLE_CHECK_THROWS(make({0, 1, 2}, {1, 2}, {0, 1, 2}, {0, 1}, {1}), FormatError,
                       Contains("values has 1 entries but the last level has 2 positions"));
  SPINDLE_CHECK_THROWS((Csf<double>({2, 3, 2}, {{{0, 0, 0}, {}}}, {})), FormatError,
                       Contains("needs 2 compressed levels, got 1"));
  SPINDLE_CHECK_THROWS((Csf<double>({2}, {}, {})), ShapeError,
                       Contains("order must be at least 2"));
  auto unsorted = make({0, 1, 2}, {1, 2}, {0, 2, 2}, {1, 0}, {1, 2});
  CHECK_FALSE(unsorted.sorted());
  CHECK_FALSE(unsorted.sorted(2));
  CHECK(unsorted.sorted(1));
  CHECK_FALSE(unsorted.storage().levels[2].sorted);

  const std::vector<Quadruple<double>> out{{0, 0, 5, 1.0}};
  SPINDLE_CHECK_THROWS(Csf<double>::from_quadruples(1, 1, 5, out), FormatError,
                       Contains("entry 0 has coordinate 5 on axis 2, out of range [0, 5)"));
}

TEST_CASE("Csf of order 2 matches Csr, order 4 round-trips", "[format]") {
  auto csr = Csr<double>::random(30, 20, 4.0, 8);
  std::vector<std::int64_t> coords;
  std::vector<double> vals;
  for (std::int64_t r = 0; r < csr.rows(); ++r)
    for (std::size_t k = 0; k < csr.row_indices(r).size(); ++k) {
      coords.insert(coords.end(), {r, csr.row_indices(r)[k]});
      vals.push_back(csr.row_values(r)[k]);
    }
  auto m = Csf<double>::from_coords({30, 20}, coords, vals);
  CHECK(
      std::equal(m.indptr(1).begin(), m.indptr(1).end(), csr.indptr().begin(), csr.indptr().end()));
  CHECK(std::equal(m.indices(1).begin(), m.indices(1).end(), csr.indices().begin(),
                   csr.indices().end()));
  CHECK(m.to_dense() == csr.to_dense());

  auto t4 = Csf<float, std::int64_t>::random({3, 4, 5, 6}, 0.2, 77);
  CHECK(t4.nnz() == 72);
  CHECK(t4.sorted());
  CHECK(t4.storage().levels.size() == 4);
  CHECK(t4.storage().levels[3].index_dtype == DType::i64);
  // Rebuild from the dense copy and compare.
  const auto d = t4.to_dense();
  std::vector<std::int64_t> c4;
  std::vector<float> v4;
  for (std::int64_t a = 0; a < 3; ++a)
    for (std::int64_t b = 0; b < 4; ++b)
      for (std::int64_t c = 0; c < 5; ++c)
        for (std::int64_t e = 0; e < 6; ++e)
          if (d(a, b, c, e) != 0.0f) c4.insert(c4.end(), {a, b, c, e}), v4.push_back(d(a, b, c, e));
  CHECK(Csf<float, std::int64_t>::from_coords({3, 4, 5, 6}, c4, v4).to_dense() == d);
}

TEST_CASE("Csf::random edge cases", "[format]") {
  CHECK(Csf<float>::random({4, 5, 6}, 0.0, 1).nnz() == 0);
  CHECK(Csf<float>::random({4, 5, 6}, 1.0, 1).nnz() == 120);
  CHECK(Csf<float>::random({1, 1, 1}, 1.0, 1).nnz() == 1);
  CHECK(Csf<float>::random({0, 5, 6}, 0.5, 1).nnz() == 0);
  CHECK(Csf<float>::random({4, 0, 6}, 0.5, 1).positions(0) == 4);
  auto a = Csf<double>::random({10, 10, 10}, 0.05, 3);
  auto b = Csf<double>::random({10, 10, 10}, 0.05, 3);
  CHECK(a.to_dense() == b.to_dense());
  CHECK(a.nnz() == 50);
  CHECK_THROWS_AS(Csf<float>::random({2, 2}, 1.5, 1), UserError);
}
