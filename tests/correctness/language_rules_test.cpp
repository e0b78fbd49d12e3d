// Regression tests for the defects of issue 8 §1 that gave silently wrong results or
// crashed on valid kernels, each checked against a plain loop on random matrices with
// empty rows, an empty and a 1x1 matrix, on the default engine and the system compiler.
// (The definition-time rejections are in tests/error/definition_errors_test.cpp, the
// compile-time ones in tests/error/compile_fail/.)
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>

#include "correctness/correctness_support.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};
struct R : sp::dense_fixed {};
struct B : sp::dense_fixed {};
struct Rows : sp::dense_variable<B> {};
struct Cols : sp::dense_fixed {};

const Shape kShapes[] = {{"0x0", 0, 0, 0},
                         {"1x1", 1, 1, 1},
                         {"many-empty-rows", 40, 30, 4, 0.6},
                         {"irregular", 57, 45, 6, 0.2}};

// Runs `k` on the default engine and on the system compiler (SPINDLE_ENGINE=system).
template <class Kernel, class... A>
void run_both(const Kernel& k, const std::function<void()>& reset, const std::function<void()>& check, A&... args) {
  reset();
  k(args...);
  check();
  sp::Options o = sp::Options::from_env();
  o.engine = "system";
  o.disk_cache = false;
  static sp::runtime::Runtime system(o);
  reset();
  k.with_runtime(system)(args...);
  check();
}

}  // namespace

TEST_CASE("§1.1 nested for_each with += into an out buffer keeps every partial sum", "[correctness][rules][init]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  // GAT-like: c(i) = sum_j a(i,j) * sum_k b(j,k), the reduction spread over two nested iterations.
  auto k = sp::kernel("nested_sum", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                       sp::out<float, I> c, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { sp::for_each<K>([&](sp::iter<K> kk) { c(i) += a(i, j) * b(j, kk); }); });
  });
  const auto a = random_csr<float>(s, 11);
  const std::int64_t f = 5;
  const auto b = sp::Tensor<float>::random({s.cols, f}, 12, -1, 1);
  auto c = sp::Tensor<float>::full({s.rows}, nan_v<float>);
  run_both(
      k, [&] { c = sp::Tensor<float>::full({s.rows}, nan_v<float>); },
      [&] {
        for (std::int64_t r = 0; r < s.rows; ++r) {
          double want = 0, mag = 0;
          for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q)
            for (std::int64_t x = 0; x < f; ++x) {
              double t = double(a.values()[q]) * b(a.indices()[q], x);
              want += t;
              mag += std::abs(t);
            }
          CHECK(std::abs(c(r) - want) <= 1e-5 * (mag + 1));
        }
      },
      a, b, c);
}

TEST_CASE("§1.1 an init at every nesting depth: three levels of for_each", "[correctness][rules][init]") {
  auto k = sp::kernel("deep", [](sp::in<float, I, K> a, sp::out<float, I> c, sp::iter<I> i) {
    sp::for_each<K>([&](sp::iter<K> x) {
      sp::for_each<R>([&](sp::iter<R> r) { c(i) += a(i, x) * sp::cast<float>(r); });
    });
  });
  // R's length comes from a second input that uses it.
  auto k2 = sp::kernel("deep2", [](sp::in<float, I, K> a, sp::in<float, R> w, sp::out<float, I> c, sp::iter<I> i) {
    sp::for_each<K>([&](sp::iter<K> x) { sp::for_each<R>([&](sp::iter<R> r) { c(i) += a(i, x) * w(r); }); });
  });
  (void)k;
  auto a = sp::Tensor<float>::random({7, 3}, 3, -1, 1);
  auto w = sp::Tensor<float>::random({4}, 4, -1, 1);
  auto c = sp::Tensor<float>::full({7}, nan_v<float>);
  run_both(
      k2, [&] { c = sp::Tensor<float>::full({7}, nan_v<float>); },
      [&] {
        for (int r = 0; r < 7; ++r) {
          double want = 0;
          for (int x = 0; x < 3; ++x)
            for (int q = 0; q < 4; ++q) want += double(a(r, x)) * w(q);
          CHECK(std::abs(c(r) - want) <= 1e-5);
        }
      },
      a, w, c);
}

TEST_CASE("§1.5 every element of an out buffer is written (TTM-shaped, dense output over a sparse axis)",
          "[correctness][rules][coverage]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  // y(i, j, r) over [I, dense<J>, R]: only the stored (i, j) contribute; the rest must be 0.
  auto k = sp::kernel("ttm_like", [](sp::in<float, I, J> a, sp::in<float, R, sp::dense<J>> u,
                                     sp::out<float, I, sp::dense<J>, R> y, sp::iter<I> i, sp::iter<J> j,
                                     sp::iter<R> r) { y(i, j, r) += a(i, j) * u(r, j); });
  const auto a = random_csr<float>(s, 21);
  const std::int64_t rr = 3;
  const auto u = sp::Tensor<float>::random({rr, s.cols}, 22, -1, 1);
  auto y = sp::Tensor<float>::full({s.rows, s.cols, rr}, nan_v<float>);
  run_both(
      k, [&] { y = sp::Tensor<float>::full({s.rows, s.cols, rr}, nan_v<float>); },
      [&] {
        std::vector<double> want(static_cast<std::size_t>(s.rows * s.cols * rr), 0.0);
        for (std::int64_t r = 0; r < s.rows; ++r)
          for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q)
            for (std::int64_t x = 0; x < rr; ++x)
              want[static_cast<std::size_t>((r * s.cols + a.indices()[q]) * rr + x)] +=
                  double(a.values()[q]) * u(x, a.indices()[q]);
        for (std::size_t e = 0; e < want.size(); ++e) CHECK(std::abs(y.values()[e] - want[e]) <= 1e-5);
      },
      a, u, y);
}

TEST_CASE("§1.11 a reduction axis above a spatial axis needs no inout (scatter into an out buffer)",
          "[correctness][rules][coverage]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  auto k = sp::kernel("scatter_out", [](sp::in<float, I, J> a, sp::in<float, I> x, sp::out<float, sp::dense<J>> y,
                                        sp::iter<I> i, sp::iter<J> j) { y(j) += a(i, j) * x(i); });
  const auto a = random_csr<float>(s, 31);
  const auto x = sp::Tensor<float>::random({s.rows}, 32, -1, 1);
  auto y = sp::Tensor<float>::full({s.cols}, nan_v<float>);
  run_both(
      k, [&] { y = sp::Tensor<float>::full({s.cols}, nan_v<float>); },
      [&] {
        std::vector<double> want(static_cast<std::size_t>(s.cols), 0.0);
        for (std::int64_t r = 0; r < s.rows; ++r)
          for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q)
            want[static_cast<std::size_t>(a.indices()[q])] += double(a.values()[q]) * x(r);
        for (std::int64_t c = 0; c < s.cols; ++c) CHECK(std::abs(y(c) - want[static_cast<std::size_t>(c)]) <= 1e-5);
      },
      a, x, y);
}

TEST_CASE("§1.7 reading row i+1 of a CSR matrix past its last row reads 0 (no out-of-range search)",
          "[correctness][rules][translation]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  auto k = sp::kernel("next_row", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                     sp::iter<I> i, sp::iter<sp::dense<J>> jd) { y(i) += a(i + 1, jd) * x(jd); });
  const auto a = random_csr<float>(s, 41);
  const auto x = sp::Tensor<float>::random({s.cols}, 42, -1, 1);
  auto y = sp::Tensor<float>::full({s.rows}, nan_v<float>);
  run_both(
      k, [&] { y = sp::Tensor<float>::full({s.rows}, nan_v<float>); },
      [&] {
        for (std::int64_t r = 0; r < s.rows; ++r) {
          double want = 0;
          if (r + 1 < s.rows)
            for (auto q = a.indptr()[r + 1]; q < a.indptr()[r + 2]; ++q) want += double(a.values()[q]) * x(a.indices()[q]);
          CHECK(std::abs(y(r) - want) <= 1e-5);
        }
      },
      a, x, y);
}

TEST_CASE("§1.9 outlined parallel loops capture axis lengths used only as strides", "[correctness][rules][codegen]") {
  // Element-wise product and a dense-output sum: K_len appears only in the flat index.
  auto mul = sp::kernel("ewise", [](sp::in<float, I, K> a, sp::in<float, I, K> b, sp::out<float, I, K> c,
                                    sp::iter<I> i, sp::iter<K> x) { c(i, x) = a(i, x) * b(i, x); });
  auto a = sp::Tensor<float>::random({300, 7}, 51, -1, 1);
  auto b = sp::Tensor<float>::random({300, 7}, 52, -1, 1);
  auto c = sp::Tensor<float>::full({300, 7}, nan_v<float>);
  run_both(
      mul, [&] { c = sp::Tensor<float>::full({300, 7}, nan_v<float>); },
      [&] {
        for (int r = 0; r < 300; ++r)
          for (int x = 0; x < 7; ++x) CHECK(c(r, x) == a(r, x) * b(r, x));
      },
      a, b, c);
  // Batched ragged matmul: the stride of w is Cols_len, used only inside the parallel loop.
  auto bmm = sp::kernel("ragged_scale", [](sp::in<float, B, Rows, Cols> x, sp::in<float, B, Cols> w,
                                           sp::out<float, B, Rows, Cols> y, sp::iter<B> bb, sp::iter<Rows> r,
                                           sp::iter<Cols> col) { y(bb, r, col) = x(bb, r, col) * w(bb, col); });
  sp::Ragged<float> xr = sp::Ragged<float>::random({3, 0, 5, 2}, {4}, 53);
  auto wr = sp::Tensor<float>::random({4, 4}, 54, -1, 1);
  sp::Ragged<float> yr = sp::Ragged<float>::random({3, 0, 5, 2}, {4}, 55);
  run_both(
      bmm, [&] {},
      [&] {
        for (std::int64_t q = 0; q < 4; ++q)
          for (std::int64_t r = 0; r < xr.rows(q); ++r)
            for (std::int64_t col = 0; col < 4; ++col) CHECK(yr(q, r, col) == xr(q, r, col) * wr(q, col));
      },
      xr, wr, yr);
}

TEST_CASE("§1.11 cast<int64_t> of a loaded index is a valid read index", "[correctness][rules][indirect]") {
  struct N : sp::dense_fixed {};
  auto k = sp::kernel("gather", [](sp::in<float, K> x, sp::in<std::int32_t, N> idx, sp::out<float, N> y,
                                   sp::iter<N> n) { y(n) = x(sp::cast<std::int64_t>(idx(n))); });
  auto x = sp::Tensor<float>::random({6}, 61, -1, 1);
  sp::Tensor<std::int32_t> idx = sp::Tensor<std::int32_t>::zeros({9});
  const std::int32_t picks[] = {0, 5, 2, -1, 6, 3, 3, 100, 1};
  for (int q = 0; q < 9; ++q) idx.values()[q] = picks[q];
  auto y = sp::Tensor<float>::full({9}, nan_v<float>);
  run_both(
      k, [&] { y = sp::Tensor<float>::full({9}, nan_v<float>); },
      [&] {
        for (int q = 0; q < 9; ++q) CHECK(y(q) == (picks[q] >= 0 && picks[q] < 6 ? x(picks[q]) : 0.0f));
      },
      x, idx, y);
}

// Found by spindle-kernel-fuzz (seeds 1000017, 1000034: `d[i, i]`; 1000072, 1000144:
// `d[I, I, J]`), shrunk by hand: an out buffer written only on its diagonal had its
// off-diagonal elements left unwritten, because each slot is indexed by an iterator of the
// slot's axis — but by the same iterator.
TEST_CASE("fuzz regression: an out buffer written on its diagonal is the identity elsewhere", "[correctness][rules][fuzz]") {
  auto diag = sp::kernel("diag", [](sp::in<float, I> x, sp::out<float, I, I> d, sp::iter<I> i) { d(i, i) += x(i); });
  auto x = sp::Tensor<float>::random({5}, 71, -1, 1);
  auto d = sp::Tensor<float>::full({5, 5}, nan_v<float>);
  run_both(
      diag, [&] { d = sp::Tensor<float>::full({5, 5}, nan_v<float>); },
      [&] {
        for (int r = 0; r < 5; ++r)
          for (int c = 0; c < 5; ++c) CHECK(d(r, c) == (r == c ? x(r) : 0.0f));
      },
      x, d);
  // Over [I, I, J] (J under the second I): max-reduction, so untouched elements are -inf.
  auto diag3 = sp::kernel("diag3", [](sp::in<float, I, J> a, sp::out<float, I, I, J> d, sp::iter<I> i,
                                      sp::iter<J> j) { d(i, i, j).max_with(a(i, j)); });
  const auto a = random_csr<float>({"small", 4, 6, 3, 0.25}, 72);
  // The output's storage: I x (I, J) = 4 x nnz values; view it through a Csr-shaped helper.
  const std::int64_t nnz = a.nnz();
  std::vector<float> out(static_cast<std::size_t>(4 * nnz), nan_v<float>);
  struct Out3 {
    std::vector<float>* v;
    const sp::Csr<float>* a;
    sp::StorageView storage() const {
      sp::StorageView s;
      s.dtype = sp::DType::f32;
      s.data = v->data();
      s.value_count = static_cast<std::int64_t>(v->size());
      s.writable = true;
      sp::LevelView l0, l1, l2;
      l0.length = a->rows();
      l1.length = a->rows();
      l2.kind = sp::LevelKind::sparse_variable;
      l2.length = a->cols();
      l2.nnz = a->nnz();
      l2.indptr = a->indptr().data();
      l2.indices = a->indices().data();
      s.levels.push_back(l0);
      s.levels.push_back(l1);
      s.levels.push_back(l2);
      return s;
    }
  } o3{&out, &a};
  run_both(
      diag3, [&] { std::fill(out.begin(), out.end(), nan_v<float>); },
      [&] {
        for (std::int64_t r0 = 0; r0 < 4; ++r0)
          for (std::int64_t r = 0; r < 4; ++r)
            for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q)
              CHECK(out[static_cast<std::size_t>(r0 * nnz + q)] ==
                    (r0 == r ? a.values()[q] : -std::numeric_limits<float>::infinity()));
      },
      a, o3);
}

// Found by spindle-kernel-fuzz (campaign seed 11, kernel 11000408), shrunk automatically to
//   b[i1, j2, k3] = select(1 < 1, 1 + a[i1, 1, k3] - 1, 1 + a[i1, 0, k3] + 2)
// Two reads whose J coordinates differ (0 and 1) made two searches J_pos that print alike;
// the search of K under them was shared by its printed text, so a[i, 0, k] read the K
// fiber of a[i, 1, k].
TEST_CASE("fuzz regression: searches under different parent positions are not shared", "[correctness][rules][fuzz]") {
  struct Jf : sp::sparse_fixed<I, sp::dynamic, std::int64_t> {};
  struct Kf : sp::sparse_fixed<Jf, 2> {};
  struct Ell3 {
    std::int64_t rows = 3, jlen = 3, jnpr = 3, klen = 6;
    std::vector<std::int64_t> jidx;
    std::vector<std::int32_t> kidx;
    std::vector<float> values;
    const Ell3* structure = nullptr;  // share another Ell3's index arrays
    sp::StorageView storage() const {
      const Ell3& st = structure ? *structure : *this;
      sp::StorageView s;
      s.dtype = sp::DType::f32;
      s.data = const_cast<float*>(values.data());
      s.value_count = static_cast<std::int64_t>(values.size());
      s.writable = true;
      sp::LevelView l0, l1, l2;
      l0.length = rows;
      l1.kind = l2.kind = sp::LevelKind::sparse_fixed;
      l1.length = jlen;
      l1.nnz_per_row = jnpr;
      l1.nnz = rows * jnpr;
      l1.indices = st.jidx.data();
      l1.index_dtype = sp::DType::i64;
      l2.length = klen;
      l2.nnz_per_row = 2;
      l2.nnz = rows * jnpr * 2;
      l2.indices = st.kidx.data();
      s.levels.push_back(l0);
      s.levels.push_back(l1);
      s.levels.push_back(l2);
      return s;
    }
  };
  Ell3 a, b;
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t q = 0; q < a.jnpr; ++q) a.jidx.push_back(q);
  const std::int32_t kc[] = {1, 4, 0, 4, 0, 1, 4, 5, 1, 3, 0, 1, 1, 4, 2, 4, 4, 5};
  a.kidx.assign(std::begin(kc), std::end(kc));
  for (int q = 0; q < 18; ++q) a.values.push_back(static_cast<float>(q % 7 - 3));
  b = a;
  b.structure = &a;
  auto k = sp::kernel("two_rows", [](sp::in<float, I, Jf, Kf> x, sp::out<float, I, Jf, Kf> y, sp::iter<I> i,
                                     sp::iter<Jf> j, sp::iter<Kf> kk) { y(i, j, kk) = x(i, 1, kk) + x(i, 0, kk) * 10.0f; });
  auto lookup = [&](std::int64_t r, std::int64_t jc, std::int64_t kcoord) -> float {
    for (std::int64_t q = 0; q < a.jnpr; ++q)
      if (a.jidx[static_cast<std::size_t>(r * a.jnpr + q)] == jc)
        for (std::int64_t p = 0; p < 2; ++p) {
          std::size_t at = static_cast<std::size_t>((r * a.jnpr + q) * 2 + p);
          if (a.kidx[at] == kcoord) return a.values[at];
        }
    return 0.0f;
  };
  run_both(
      k, [&] { std::fill(b.values.begin(), b.values.end(), nan_v<float>); },
      [&] {
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::int64_t q = 0; q < a.jnpr; ++q)
            for (std::int64_t p = 0; p < 2; ++p) {
              std::size_t at = static_cast<std::size_t>((r * a.jnpr + q) * 2 + p);
              CHECK(b.values[at] == lookup(r, 1, a.kidx[at]) + lookup(r, 0, a.kidx[at]) * 10.0f);
            }
      },
      a, b);
}

TEST_CASE("a later for_each reads what an earlier one wrote in the same row (edge scores, then their sum)",
          "[correctness][rules][order]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  // GAT-style: scores e(i, j) = a(i, j) * x(j), then s(i) = sum_j e(i, j) read back.
  auto k = sp::kernel("scores", sp::names{"A", "x", "e", "s"},
                      [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I, J> e,
                         sp::out<float, I> sum, sp::iter<I> i) {
                        sp::for_each<J>([&](sp::iter<J> j) { e(i, j) = a(i, j) * x(j); });
                        sp::for_each<J>([&](sp::iter<J> j2) { sum(i) += e(i, j2); });
                      });
  const auto a = random_csr<float>(s, 91);
  const auto x = sp::Tensor<float>::random({s.cols}, 92, -1, 1);
  auto e = same_structure(a, nan_v<float>);
  auto sum = sp::Tensor<float>::full({s.rows}, nan_v<float>);
  run_both(
      k,
      [&] {
        e = same_structure(a, nan_v<float>);
        sum = sp::Tensor<float>::full({s.rows}, nan_v<float>);
      },
      [&] {
        for (std::int64_t r = 0; r < s.rows; ++r) {
          double want = 0, mag = 0;
          for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) {
            float t = a.values()[q] * x(a.indices()[q]);
            CHECK(e.values()[q] == t);
            want += t;
            mag += std::abs(t);
          }
          CHECK(std::abs(sum(r) - want) <= 1e-5 * (mag + 1));
        }
      },
      a, x, e, sum);
}

TEST_CASE("fuzz regression: an out buffer written at two index patterns in one iteration is filled, not "
          "initialised per element",
          "[correctness][rules][init]") {
  const Shape s = GENERATE(from_range(std::begin(kShapes), std::end(kShapes)));
  INFO(s);
  // For every column d: b(d) sums all of A, and b(j) counts the entries of column j. The
  // second write reaches column j before (and after) d = j, so an init of b(d) at d's
  // iteration would wipe what earlier iterations added (found by spindle-kernel-fuzz,
  // seed 1001003899; the same with seed 1002003424 over a sparse_fixed axis).
  auto k = sp::kernel("two_sites", sp::names{"A", "b"},
                      [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>> b, sp::iter<sp::dense<J>> d) {
                        sp::for_each<I, J>([&](sp::iter<I> i, sp::iter<J> j) {
                          b(d) += a(i, j);
                          b(j) += 1.0f;
                        });
                      });
  const auto a = random_csr<float>(s, 93);
  auto b = sp::Tensor<float>::full({s.cols}, nan_v<float>);
  run_both(
      k, [&] { b = sp::Tensor<float>::full({s.cols}, nan_v<float>); },
      [&] {
        double total = 0, mag = 0;
        std::vector<double> count(static_cast<std::size_t>(s.cols), 0.0);
        for (std::int64_t q = 0; q < a.nnz(); ++q) {
          total += a.values()[q];
          mag += std::abs(a.values()[q]);
          count[static_cast<std::size_t>(a.indices()[q])] += 1;
        }
        for (std::int64_t c = 0; c < s.cols; ++c) {
          const double want = total + static_cast<double>(s.cols) * count[static_cast<std::size_t>(c)];
          CHECK(std::abs(b(c) - want) <= 1e-4 * (mag + std::abs(want) + 1));
        }
      },
      a, b);
}

TEST_CASE("fuzz regression: integer arithmetic wraps (no signed-overflow folding)", "[correctness][rules][int]") {
  // INT_MAX + 1 wraps to INT_MIN, so the select picks -1. Clang folded `x + 1 > 0` to
  // `x > -1` (signed overflow is undefined in C) until the engines compiled with -fwrapv
  // (found by spindle-kernel-fuzz, seed 1009003193).
  auto k = sp::kernel("wraps", sp::names{"x", "y"},
                      [](sp::in<std::int32_t, I> x, sp::out<std::int32_t, I> y, sp::iter<I> i) {
                        y(i) = sp::select(x(i) + 1 > 0, sp::Value<std::int32_t>(1), sp::Value<std::int32_t>(-1));
                      });
  auto x = sp::Tensor<std::int32_t>::zeros({4});
  x.values()[0] = std::numeric_limits<std::int32_t>::max();
  x.values()[1] = -5;
  x.values()[2] = 7;
  x.values()[3] = std::numeric_limits<std::int32_t>::max() - 1;
  auto y = sp::Tensor<std::int32_t>::zeros({4});
  run_both(
      k, [&] { y = sp::Tensor<std::int32_t>::full({4}, 99); },
      [&] {
        CHECK(y(0) == -1);
        CHECK(y(1) == -1);
        CHECK(y(2) == 1);
        CHECK(y(3) == 1);
      },
      x, y);
}
