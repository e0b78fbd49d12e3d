// graph_features: exact values on hand-made matrices, the Gini coefficient against its
// O(n^2) definition, no NaN on empty shapes, sampled edge measures against exact ones, a
// real graph; graph_features_kept (the structure part kept with the matrix, Csr::memo())
// against graph_features, with copies, changed values and concurrent first use.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

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

namespace {

void check_same_features(const sp::GraphFeatures& x, const sp::GraphFeatures& y) {
  const auto a = x.to_vector(), b = y.to_vector();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].second == b[i].second);  // bit for bit: same computation, same sample
  }
  CHECK(x.sampled_edges == y.sampled_edges);
}

struct CountedFact {
  int value;
};

}  // namespace

TEST_CASE("graph_features_kept: structure part once per matrix and its copies, values read every call", "[inspect]") {
  auto a = sp::Csr<float>::random(3000, 2500, 12.0, 5);
  for (auto& v : a.values()) v = 1.0f;
  REQUIRE(a.memo().size() == 0);
  const auto kept = sp::inspect::graph_features_kept(a);
  check_same_features(kept, sp::inspect::graph_features(a));
  CHECK(kept.unit_weights);
  CHECK(a.memo().size() == 1);
  check_same_features(sp::inspect::graph_features_kept(a), kept);
  CHECK(a.memo().size() == 1);

  // A copy shares the kept structure features (same structure) but not the values.
  auto b = a;
  CHECK(&b.memo() == &a.memo());
  b.values()[b.nnz() - 1] = 0.5f;
  const auto fb = sp::inspect::graph_features_kept(b);
  CHECK_FALSE(fb.unit_weights);
  CHECK(fb.degree_gini == kept.degree_gini);
  CHECK(sp::inspect::graph_features_kept(a).unit_weights);
  // Values changed in place after the features were kept: read again on the next call.
  a.values()[0] = 2.0f;
  CHECK_FALSE(sp::inspect::graph_features_kept(a).unit_weights);
  a.values()[0] = 1.0f;
  CHECK(sp::inspect::graph_features_kept(a).unit_weights);

  // A new matrix assigned over a copy brings its own memo.
  b = sp::Csr<float>::random(100, 100, 3.0, 6);
  CHECK(&b.memo() != &a.memo());
  CHECK(b.memo().size() == 0);
  check_same_features(sp::inspect::graph_features_kept(b), sp::inspect::graph_features(b));
  // A moved-to matrix keeps the memo; the moved-from one gets an empty one.
  auto c = std::move(b);
  CHECK(c.memo().size() == 1);
  CHECK(b.memo().size() == 0);  // NOLINT(bugprone-use-after-move): documented behaviour

  // Empty and tiny shapes.
  const sp::Csr<float> empty(0, 0);
  check_same_features(sp::inspect::graph_features_kept(empty), sp::inspect::graph_features(empty));
  const sp::Csr<double> none(5, 7);
  check_same_features(sp::inspect::graph_features_kept(none), sp::inspect::graph_features(none));
}

TEST_CASE("graph_features: unit_weights over blocks of the values scan", "[inspect]") {
  std::vector<float> v(3000, 1.0f);
  CHECK(sp::inspect::detail::all_ones<float>(v));
  CHECK(sp::inspect::detail::all_ones<float>(std::span<const float>{}));
  for (std::size_t at : {std::size_t(0), std::size_t(1023), std::size_t(1024), std::size_t(2047), std::size_t(2999)}) {
    INFO(at);
    v[at] = 1.0f + 1e-7f;
    CHECK_FALSE(sp::inspect::detail::all_ones<float>(v));
    v[at] = std::nanf("");
    CHECK_FALSE(sp::inspect::detail::all_ones<float>(v));
    v[at] = 1.0f;
  }
  std::vector<double> d(5, 1.0);
  d[4] = -1.0;
  CHECK_FALSE(sp::inspect::detail::all_ones<double>(d));
}

TEST_CASE("StructureMemo: one computation per fact type, also under concurrent first use", "[inspect][threads]") {
  const auto a = sp::Csr<float>::random(20000, 20000, 8.0, 9);
  std::atomic<int> made{0};
  std::vector<sp::GraphFeatures> got(8);
  std::vector<int> facts(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      got[t] = sp::inspect::graph_features_kept(a);
      facts[t] = a.memo().get<CountedFact>([&] { return CountedFact{100 + made.fetch_add(1)}; }).value;
    });
  for (auto& t : threads) t.join();
  CHECK(made.load() == 1);
  for (int t = 0; t < 8; ++t) {
    CHECK(facts[t] == 100);
    check_same_features(got[t], got[0]);
  }
  CHECK(a.memo().size() == 2);  // the features and the counted fact, each kept once
  check_same_features(got[0], sp::inspect::graph_features(a));
}
