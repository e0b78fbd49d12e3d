// Kernels written in the tests themselves (not from ops.hpp), each checked against a plain
// loop: `inout` accumulation without init, a `param` scalar, two top-level statements,
// max-reductions into an `out` buffer, locals in nested iterations, math, select and cast,
// iterator coordinates used as values, a transposed (scatter) SpMV and a dense kernel.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "correctness/correctness_support.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};
struct J64 : sp::sparse_variable<I, std::int64_t> {};

const Shape kShapes[] = {{"0x0", 0, 0, 0},
                         {"1x1", 1, 1, 1},
                         {"many-empty-rows", 130, 130, 6, 0.7},
                         {"wide", 7, 130, 40},
                         {"irregular", 257, 190, 9, 0.2}};

}  // namespace

TEMPLATE_TEST_CASE("inout accumulates into the caller's values (no init)", "[correctness][inline][inout]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s << " " << dtype_label<T>());
  auto acc = sp::kernel("spmv_acc", [](sp::in<T, I, J> a, sp::in<T, sp::dense<J>> x, sp::inout<T, I> y,
                                       sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  const auto a = random_csr<T>(s, 601);
  const auto x = sp::Tensor<T>::random({s.cols}, 602, -1, 1);
  const auto y0 = sp::Tensor<T>::random({s.rows}, 603, -1, 1);
  auto y = y0;
  acc(a, x, y);
  auto ref = ref_spmv(a, x.values());
  for (std::size_t r = 0; r < ref.size(); ++r) {
    ref[r].value += y0.values()[r];
    ref[r].abs_sum += std::abs(static_cast<double>(y0.values()[r]));
    ++ref[r].terms;
  }
  check_close<T>(ref, y.values(), "y0 + A x");
  acc(a, x, y);  // a second call adds again
  auto ref2 = ref_spmv(a, x.values());
  for (std::size_t r = 0; r < ref.size(); ++r) {
    ref2[r].value = ref[r].value + ref2[r].value;
    ref2[r].abs_sum = ref[r].abs_sum + ref2[r].abs_sum;
    ref2[r].terms = ref[r].terms + ref2[r].terms;
  }
  check_close<T>(ref2, y.values(), "y0 + 2 A x");
}

TEST_CASE("a param<float> scalar scales a sparse product", "[correctness][inline][param]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  const float alpha = GENERATE(0.0f, 1.0f, -2.5f);
  INFO(s << " alpha=" << alpha);
  auto k = sp::kernel("spmv_alpha", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::param<float> al,
                                       sp::out<float, I> y, sp::iter<I> i,
                                       sp::iter<J> j) { y(i) += al * a(i, j) * x(j); });
  const auto a = random_csr<float>(s, 611);
  const auto x = sp::Tensor<float>::random({s.cols}, 612, -1, 1);
  auto y = sp::Tensor<float>::full({s.rows}, nan_v<float>);
  k(a, x, alpha, y);
  auto ref = ref_spmv(a, x.values());
  for (auto& r : ref) {
    r.value *= alpha;
    r.abs_sum *= std::abs(alpha);
  }
  check_close<float>(ref, y.values(), "alpha A x", 2);
}

TEMPLATE_TEST_CASE("two top-level statements: row sums and row maxima (max into an out buffer)",
                   "[correctness][inline][two-statements]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s << " " << dtype_label<T>());
  auto k = sp::kernel("sum_and_max", [](sp::in<T, I, J> a, sp::out<T, I> sum, sp::out<T, I> mx) {
    sp::for_each<I, J>([&](sp::iter<I> i, sp::iter<J> j) { sum(i) += a(i, j); });
    sp::for_each<I, J>([&](sp::iter<I> i, sp::iter<J> j) { mx(i).max_with(a(i, j)); });
  });
  const auto a = random_csr<T>(s, 621);
  auto sum = sp::Tensor<T>::full({s.rows}, nan_v<T>);
  auto mx = sp::Tensor<T>::full({s.rows}, nan_v<T>);
  k(a, sum, mx);
  check_close<T>(ref_row_sum(a), sum.values(), "row sums");
  for (std::int64_t r = 0; r < s.rows; ++r) {
    T m = -std::numeric_limits<T>::infinity();  // the identity of max: empty rows keep it
    for (T v : a.row_values(r)) m = std::max(m, v);
    CHECK(mx(r) == m);
  }
}

TEMPLATE_TEST_CASE("a local in a nested iteration, sqrt and an iterator coordinate as a value",
                   "[correctness][inline][local]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s << " " << dtype_label<T>());
  // norm(i) = sqrt(sum_j a(i,j)^2); wcol(i) = sum_j a(i,j) * j (j is the column coordinate)
  auto k = sp::kernel("row_norm", [](sp::in<T, I, J> a, sp::out<T, I> norm, sp::out<T, I> wcol, sp::iter<I> i) {
    sp::local<T> sq(0, "sq");
    sp::local<T> w(0, "w");
    sp::for_each<J>([&](sp::iter<J> j) {
      sq += a(i, j) * a(i, j);
      w += a(i, j) * sp::cast<T>(j);
    });
    norm(i) = sp::sqrt(sq);
    wcol(i) = w;
  });
  const auto a = random_csr<T>(s, 631);
  auto norm = sp::Tensor<T>::full({s.rows}, nan_v<T>);
  auto wcol = sp::Tensor<T>::full({s.rows}, nan_v<T>);
  k(a, norm, wcol);
  Elementwise ref_norm{std::vector<double>(static_cast<std::size_t>(s.rows)),
                       std::vector<double>(static_cast<std::size_t>(s.rows))};
  std::vector<Ref> ref_w(static_cast<std::size_t>(s.rows));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double sq = 0;
    for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) {
      const double v = a.values()[q], t = v * a.indices()[q];
      sq += v * v;
      ref_w[r].value += t;
      ref_w[r].abs_sum += std::abs(t);
      ++ref_w[r].terms;
    }
    ref_norm.value[static_cast<std::size_t>(r)] = std::sqrt(sq);
    ref_norm.ops[static_cast<std::size_t>(r)] = static_cast<double>(a.indptr()[r + 1] - a.indptr()[r]) / 2 + 2;
  }
  // sqrt of a sum of n squares (all terms positive): relative error <= (n / 2 + 2) eps
  check_elementwise<T>(ref_norm, norm.values(), "row norms");
  check_close<T>(ref_w, wcol.values(), "column-weighted sums");
}

TEST_CASE("select, abs and cast into an integer output count positive entries", "[correctness][inline][select]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  auto k = sp::kernel("count_pos", [](sp::in<double, I, J> a, sp::out<std::int64_t, I> pos,
                                      sp::out<double, I> l1, sp::iter<I> i, sp::iter<J> j) {
    pos(i) += sp::cast<std::int64_t>(sp::select(a(i, j) > 0.0, sp::Value<double>(1.0), sp::Value<double>(0.0)));
    l1(i) += sp::abs(a(i, j));
  });
  const auto a = random_csr<double>(s, 641);
  auto pos = sp::Tensor<std::int64_t>::full({s.rows}, -7);
  auto l1 = sp::Tensor<double>::full({s.rows}, nan_v<double>);
  k(a, pos, l1);
  std::vector<Ref> ref_l1(static_cast<std::size_t>(s.rows));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    std::int64_t n = 0;
    for (double v : a.row_values(r)) {
      n += v > 0;
      ref_l1[r].value += std::abs(v);
      ref_l1[r].abs_sum += std::abs(v);
      ++ref_l1[r].terms;
    }
    CHECK(pos(r) == n);
  }
  check_close<double>(ref_l1, l1.values(), "l1");
}

TEMPLATE_TEST_CASE("transposed SpMV scatters into an inout dense<J> vector", "[correctness][inline][scatter]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s << " " << dtype_label<T>());
  auto k = sp::kernel("spmv_t", [](sp::in<T, I, J> a, sp::in<T, I> x, sp::inout<T, sp::dense<J>> y, sp::iter<I> i,
                                   sp::iter<J> j) { y(j) += a(i, j) * x(i); });
  const auto a = random_csr<T>(s, 651);
  const auto x = sp::Tensor<T>::random({s.rows}, 652, -1, 1);
  auto y = sp::Tensor<T>::zeros({s.cols});
  k(a, x, y);
  std::vector<Ref> ref(static_cast<std::size_t>(s.cols));
  for (std::int64_t r = 0; r < s.rows; ++r)
    for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) {
      const double t = static_cast<double>(a.values()[q]) * x.values()[r];
      Ref& o = ref[static_cast<std::size_t>(a.indices()[q])];
      o.value += t;
      o.abs_sum += std::abs(t);
      ++o.terms;
    }
  check_close<T>(ref, y.values(), "A^T x");
}

TEMPLATE_TEST_CASE("a dense kernel (matrix-vector product over dense_fixed axes)", "[correctness][inline][dense]",
                   float, double) {
  using T = TestType;
  const std::int64_t m = GENERATE(0, 1, 7, 33);
  const std::int64_t n = GENERATE(0, 1, 130);
  INFO(m << "x" << n << " " << dtype_label<T>());
  auto k = sp::kernel("gemv", [](sp::in<T, I, K> w, sp::in<T, K> v, sp::out<T, I> y, sp::iter<I> i,
                                 sp::iter<K> c) { y(i) += w(i, c) * v(c); });
  const auto w = sp::Tensor<T>::random({m, n}, 661, -1, 1);
  const auto v = sp::Tensor<T>::random({n}, 662, -1, 1);
  auto y = sp::Tensor<T>::full({m}, nan_v<T>);
  k(w, v, y);
  std::vector<Ref> ref(static_cast<std::size_t>(m));
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < n; ++c) {
      const double t = static_cast<double>(w(r, c)) * v(c);
      ref[r].value += t;
      ref[r].abs_sum += std::abs(t);
      ++ref[r].terms;
    }
  check_close<T>(ref, y.values(), "gemv");
}

TEMPLATE_TEST_CASE("an SpMM over an int64 index axis written inline", "[correctness][inline][int64]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  const std::int64_t f = GENERATE(1, 33);
  INFO(s << " K=" << f << " " << dtype_label<T>());
  auto k = sp::kernel("spmm64", [](sp::in<T, I, J64> a, sp::in<T, sp::dense<J64>, K> b, sp::out<T, I, K> c,
                                   sp::iter<I> i, sp::iter<J64> j,
                                   sp::iter<K> kk) { c(i, kk) += a(i, j) * b(j, kk); });
  const auto a = with_index<std::int64_t>(random_csr<T>(s, 671));
  const auto b = sp::Tensor<T>::random({s.cols, f}, 672, -1, 1);
  auto c = sp::Tensor<T>::full({s.rows, f}, nan_v<T>);
  k(a, b, c);
  check_close<T>(ref_spmm(a, b.values(), f), c.values(), "spmm i64");
}

TEST_CASE("product, min and subtracting reductions start from their identities", "[correctness][inline][reductions]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  auto k = sp::kernel("prod_min_neg", [](sp::in<double, I, J> a, sp::out<double, I> prod, sp::out<double, I> mn,
                                         sp::out<double, I> neg, sp::iter<I> i, sp::iter<J> j) {
    prod(i) *= a(i, j);
    mn(i).min_with(a(i, j));
    neg(i) -= a(i, j);
  });
  const auto a = random_csr<double>(s, 681, 0.5, 1.5);
  auto prod = sp::Tensor<double>::full({s.rows}, 7.0), mn = prod, neg = prod;
  k(a, prod, mn, neg);
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double p = 1, m = std::numeric_limits<double>::infinity(), n = 0;
    for (double v : a.row_values(r)) {
      p *= v;
      m = std::min(m, v);
      n -= v;
    }
    const double len = static_cast<double>(a.row_values(r).size());
    CHECK(std::abs(prod(r) - p) <= 4 * (len + 1) * eps<double>() * std::abs(p));
    CHECK(mn(r) == m);
    CHECK(std::abs(neg(r) - n) <= 4 * (len + 1) * eps<double>() * std::abs(n) + tiny<double>());
  }
}

TEST_CASE("two iterators compared as coordinates (lower triangle) and integer modulo", "[correctness][inline][coordinates]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  auto k = sp::kernel("tril_sum", [](sp::in<double, I, J> a, sp::out<double, I> low, sp::out<std::int64_t, I> mod3,
                                     sp::iter<I> i, sp::iter<J> j) {
    low(i) += sp::select(j <= i, a(i, j), sp::Value<double>(0.0));
    mod3(i) += j % 3;
  });
  const auto a = random_csr<double>(s, 691);
  auto low = sp::Tensor<double>::full({s.rows}, nan_v<double>);
  auto mod3 = sp::Tensor<std::int64_t>::full({s.rows}, -1);
  k(a, low, mod3);
  std::vector<Ref> ref(static_cast<std::size_t>(s.rows));
  for (std::int64_t r = 0; r < s.rows; ++r) {
    std::int64_t m = 0;
    for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) {
      m += a.indices()[q] % 3;
      if (a.indices()[q] > r) continue;
      ref[r].value += a.values()[q];
      ref[r].abs_sum += std::abs(a.values()[q]);
      ++ref[r].terms;
    }
    CHECK(mod3(r) == m);
  }
  check_close<double>(ref, low.values(), "lower-triangle row sums");
}

TEST_CASE("an output written and then read in the same iteration", "[correctness][inline][chain]") {
  auto k = sp::kernel("chain", [](sp::in<double, I> x, sp::out<double, I> y, sp::out<double, I> z, sp::iter<I> i) {
    y(i) = x(i) + 1.0;
    z(i) = y(i) * 2.0;
  });
  const std::int64_t n = GENERATE(0, 1, 33, 130);
  const auto x = sp::Tensor<double>::random({n}, 701, -1, 1);
  auto y = sp::Tensor<double>::full({n}, nan_v<double>), z = y;
  k(x, y, z);
  for (std::int64_t r = 0; r < n; ++r) {
    CHECK(y(r) == x(r) + 1.0);
    CHECK(z(r) == (x(r) + 1.0) * 2.0);
  }
}

// A scalar local declared outside an iteration that runs in parallel is captured by value.
TEST_CASE("a top-level local read inside a parallel loop", "[correctness][inline][local]") {
  auto normalize = sp::kernel("normalize", [](sp::in<float, I> x, sp::out<float, I> y) {
    sp::local<float> total(0.0f, "total");
    sp::for_each<I>([&](sp::iter<I> i) { total += x(i); });
    sp::for_each<I>([&](sp::iter<I> i) { y(i) = x(i) / total; });
  });
  const auto x = sp::Tensor<float>::random({1000}, 711, 0.5, 1);
  auto y = sp::Tensor<float>::full({1000}, nan_v<float>);
  REQUIRE_NOTHROW(normalize(x, y));
  double sum = 0;
  for (float v : x.values()) sum += v;
  std::vector<double> ref(1000);
  for (std::size_t q = 0; q < ref.size(); ++q) ref[q] = x.values()[q] / sum;
  check_elementwise<float>(uniform_ops(ref, 1000 + 2), y.values(), "normalize");
}

namespace {
struct N : sp::dense_fixed {};  // rows of a feature table gathered by index
}  // namespace

TEST_CASE("indices loaded from another buffer and affine indices, out-of-range reads give 0",
          "[correctness][inline][indirect]") {
  // y(i, k) = x(idx(i), k) + x(i + 1, k): the first index comes from a buffer (an edge list,
  // a permutation), the second is affine; coordinates outside [0, extent) read the default 0.
  auto gather = sp::kernel("gather", [](sp::in<std::int32_t, I> idx, sp::in<float, N, K> x, sp::out<float, I, K> y,
                                        sp::iter<I> i, sp::iter<K> k) {
    y(i, k) = x(idx(i), k) + x(i + 1, k);
  });
  const std::int64_t rows = 37, table = 20, feat = 9;
  std::vector<std::int32_t> ids(rows);
  for (std::int64_t r = 0; r < rows; ++r) ids[r] = static_cast<std::int32_t>((r * 7) % 23 - 2);  // some < 0, some >= 20
  auto idx = sp::Tensor<std::int32_t>::from(ids, {rows});
  auto x = sp::Tensor<float>::random({table, feat}, 77, -1, 1);
  auto y = sp::Tensor<float>::full({rows, feat}, nan_v<float>);
  gather(idx, x, y);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t f = 0; f < feat; ++f) {
      const std::int64_t g = ids[r], n = r + 1;
      const float ref = (g >= 0 && g < table ? x(g, f) : 0.0f) + (n < table ? x(n, f) : 0.0f);
      INFO("row " << r << " feature " << f << " index " << g);
      CHECK(y(r, f) == ref);
    }
}
