// graph_features: exact values on hand-made matrices, the Gini coefficient against its
// O(n^2) definition, no NaN on empty shapes, sampled edge measures against exact ones, and
// a real graph.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <string>

#include "spindle/format/matrix_market.hpp"
#include "spindle/inspect/graph_features.hpp"

namespace sp = spindle;

namespace {

double gini_by_pairs(const std::vector<double>& x) {
  if (x.empty()) return 0;
  double sum = 0, pairs = 0;
  for (double a : x) sum += a;
  if (sum == 0) return 0;
  for (double a : x)
    for (double b : x) pairs += std::abs(a - b);
  return pairs / (2.0 * double(x.size()) * sum);
}

}  // namespace

TEST_CASE("graph_features: exact values on a hand-made matrix", "[inspect]") {
  // Rows of 0, 1, 2, 3 entries: (1,0) (2,1) (2,2) (3,0) (3,1) (3,3), all 1.
  sp::Csr<float> a(4, 4, {0, 0, 1, 3, 6}, {0, 1, 2, 0, 1, 3}, std::vector<float>(6, 1.0f));
  const auto f = sp::inspect::graph_features(a);
  CHECK(f.rows == 4);
  CHECK(f.cols == 4);
  CHECK(f.nnz == 6);
  CHECK(f.density == Approx(6.0 / 16));
  CHECK(f.degree_mean == Approx(1.5));
  CHECK(f.degree_std == Approx(std::sqrt(1.25)));
  CHECK(f.degree_cv == Approx(std::sqrt(1.25) / 1.5));
  CHECK(f.degree_min == 0);
  CHECK(f.degree_max == 3);
  CHECK(f.degree_gini == Approx(10.0 / 24));
  CHECK(f.empty_row_fraction == Approx(0.25));
  CHECK(f.max_to_mean == Approx(2.0));
  CHECK(f.unit_weights);
  // Every nonzero is visited (nnz <= sample): |i - j| = 1 1 0 3 2 0 over extent 4.
  CHECK(f.sampled_edges == 6);
  CHECK(f.bandwidth_mean == Approx(7.0 / 24));
  CHECK(f.near_diagonal == Approx(2.0 / 6));
  CHECK(f.column_gap_mean == Approx((1.0 + 1.0 + 2.0) / 3 / 4));
  CHECK(f.symmetric_fraction == Approx(2.0 / 6));  // only the diagonal entries are mirrored
  CHECK(f.seconds >= 0);

  auto w = a;
  w.values()[4] = 2.0f;
  CHECK_FALSE(sp::inspect::graph_features(w).unit_weights);

  const auto v = f.to_vector(32, 128);
  REQUIRE(v.size() == 19);
  CHECK(v.front().first == "rows");
  CHECK(v[v.size() - 2] == std::make_pair(std::string("k_in"), 32.0));
  CHECK(v.back() == std::make_pair(std::string("k_out"), 128.0));
  std::set<std::string> names;
  for (auto& [n, x] : v) names.insert(n);
  CHECK(names.size() == v.size());
  CHECK_THAT(f.describe(), Catch::Contains("gini 0.417") && Catch::Contains("unweighted"));
}

TEST_CASE("graph_features: no NaN on empty shapes, the Gini coefficient matches its definition", "[inspect]") {
  for (auto [rows, cols, avg] : {std::tuple{0, 0, 0.0}, {0, 13, 0.0}, {9, 0, 0.0}, {1, 1, 1.0}, {130, 130, 6.0},
                                 {7, 130, 40.0}, {257, 190, 9.0}, {50, 50, 0.0}}) {
    INFO(rows << "x" << cols);
    sp::RandomCsrOptions o;
    o.empty_row_fraction = rows > 100 ? 0.3 : 0.0;
    const auto a = sp::Csr<double>::random(rows, cols, avg, 7, o);
    const auto f = sp::inspect::graph_features(a);
    for (auto& [name, x] : f.to_vector()) {
      INFO(name);
      CHECK(std::isfinite(x));
    }
    std::vector<double> deg;
    for (std::int64_t r = 0; r < a.rows(); ++r) deg.push_back(double(a.indptr()[r + 1] - a.indptr()[r]));
    CHECK(f.degree_gini == Approx(gini_by_pairs(deg)).margin(1e-12));
    CHECK(f.degree_gini >= 0);
    CHECK(f.degree_gini <= 1);
  }
  // All entries in one row of n: G = (n - 1) / n.
  sp::Csr<float> one(4, 4, {0, 4, 4, 4, 4}, {0, 1, 2, 3}, {1, 1, 1, 1});
  CHECK(sp::inspect::graph_features(one).degree_gini == Approx(0.75));
}

TEST_CASE("graph_features: sampled edge measures are deterministic and close to the exact ones", "[inspect]") {
  const auto a = sp::Csr<float>::random(3000, 3000, 20.0, 11);
  REQUIRE(a.nnz() > 20000);
  sp::GraphFeatureOptions exact;
  exact.sample = a.nnz();
  const auto e = sp::inspect::graph_features(a, exact);
  const auto s1 = sp::inspect::graph_features(a);
  const auto s2 = sp::inspect::graph_features(a);
  CHECK(e.sampled_edges == a.nnz());
  CHECK(s1.sampled_edges == 4096);
  CHECK(s1.bandwidth_mean == s2.bandwidth_mean);  // same seed, same sample
  CHECK(s1.bandwidth_mean == Approx(e.bandwidth_mean).margin(0.02));
  CHECK(s1.near_diagonal == Approx(e.near_diagonal).margin(0.02));
  CHECK(s1.column_gap_mean == Approx(e.column_gap_mean).margin(0.01));
  CHECK(s1.symmetric_fraction == Approx(e.symmetric_fraction).margin(0.02));
  // Degree features never depend on the sample.
  CHECK(s1.degree_gini == e.degree_gini);
  CHECK(s1.degree_std == e.degree_std);
}

TEST_CASE("graph_features: cora is unweighted, symmetric and has no empty row", "[inspect][data]") {
  const auto a = sp::read_matrix_market<float>(std::string(SPINDLE_REPO_DATA_DIR) + "/cora.mtx.gz");
  sp::GraphFeatureOptions exact;
  exact.sample = a.nnz();
  const auto f = sp::inspect::graph_features(a, exact);
  CHECK(f.rows == 2708);
  CHECK(f.nnz == a.nnz());
  CHECK(f.degree_mean == Approx(double(a.nnz()) / 2708));
  CHECK(f.unit_weights);
  CHECK(f.symmetric_fraction == Approx(1.0));
  CHECK(f.empty_row_fraction == 0);
  CHECK(f.degree_max == 168);
}
