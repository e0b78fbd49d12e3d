// softmax, ragged_matmul and csf_reduce (ops.hpp) against plain loops: row softmax with
// one-element and empty rows and with large values (the max subtraction must keep exp
// finite), a batched matmul over a ragged batch with empty batches, and a 3-level CSF
// reduction with empty fibers on both compressed levels.
#include <catch2/catch.hpp>

#include <limits>

#include "correctness/correctness_support.hpp"
#include "spindle/eigen.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

// One row per pattern: empty, one element, two, a full row, empty again, one element.
template <class T>
sp::Csr<T> softmax_edge_rows() {
  std::vector<sp::Triplet<T>> t{{1, 3, T(2.5)},  {2, 0, T(-1)},  {2, 6, T(4)},
                                {5, 6, T(-30)}};
  for (std::int64_t c = 0; c < 7; ++c) t.push_back({3, c, static_cast<T>(c) - T(3)});
  return sp::Csr<T>::from_triplets(6, 7, t);
}

}  // namespace

TEMPLATE_TEST_CASE("softmax matches a row-wise loop on every shape", "[correctness][softmax]", float,
                   double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 201, -5, 5);
  auto b = same_structure(a, nan_v<T>);
  sp::ops::softmax<T>()(a, b);
  check_elementwise<T>(ref_softmax(a), b.values(), "softmax");
}

TEMPLATE_TEST_CASE("softmax: one-element rows give 1, empty rows stay empty, rows sum to 1",
                   "[correctness][softmax]", float, double) {
  using T = TestType;
  const auto a = softmax_edge_rows<T>();
  auto b = same_structure(a, nan_v<T>);
  sp::ops::softmax<T>()(a, b);
  check_elementwise<T>(ref_softmax(a), b.values(), "softmax edge rows");
  CHECK(b.row_values(1)[0] == T(1));
  CHECK(b.row_values(5)[0] == T(1));
  CHECK(b.row_values(0).empty());
  CHECK(b.row_values(4).empty());
  for (std::int64_t r = 0; r < b.rows(); ++r) {
    if (b.row_values(r).empty()) continue;
    double sum = 0;
    for (T v : b.row_values(r)) sum += v;
    const double n = static_cast<double>(b.row_values(r).size());
    CHECK(std::abs(sum - 1.0) <= 4 * (2 * n + 5) * eps<T>());
  }
}

TEMPLATE_TEST_CASE("softmax stays finite for large values (subtracts the row max)",
                   "[correctness][softmax]", float, double) {
  using T = TestType;
  const Shape s{"irregular", 257, 190, 9, 0.2};
  const auto a = random_csr<T>(s, 211, 500, 1000);  // exp(1000) overflows even in f64
  auto b = same_structure(a, nan_v<T>);
  sp::ops::softmax<T>()(a, b);
  check_elementwise<T>(ref_softmax(a), b.values(), "softmax large");
}

TEST_CASE("softmax with Eigen sparse input and output", "[correctness][softmax][eigen]") {
  const auto a = softmax_edge_rows<double>();
  const Eigen::SparseMatrix<double, Eigen::RowMajor, int> ea = sp::to_eigen(a);
  Eigen::SparseMatrix<double, Eigen::RowMajor, int> eb = ea;
  sp::ops::softmax<double>()(ea, eb);
  check_elementwise<double>(ref_softmax(a), std::span<const double>(eb.valuePtr(), static_cast<std::size_t>(eb.nonZeros())),
                    "softmax eigen");
}

// --- ragged batched matmul --------------------------------------------------------------

namespace {

template <class T>
std::vector<Ref> ref_ragged(const sp::Ragged<T>& a, const sp::Tensor<T>& w, std::int64_t k, std::int64_t n) {
  std::vector<Ref> c(static_cast<std::size_t>(a.total_rows() * n));
  for (std::int64_t b = 0; b < a.batch(); ++b)
    for (std::int64_t r = 0; r < a.rows(b); ++r) {
      const std::int64_t row = a.row_ptr()[b] + r;
      for (std::int64_t j = 0; j < n; ++j) {
        Ref& o = c[static_cast<std::size_t>(row * n + j)];
        for (std::int64_t q = 0; q < k; ++q) {
          const double t = static_cast<double>(a.values()[row * k + q]) * w.values()[(b * k + q) * n + j];
          o.value += t;
          o.abs_sum += std::abs(t);
          ++o.terms;
        }
      }
    }
  return c;
}

struct Batches {
  const char* name;
  std::vector<std::int64_t> rows;
};

}  // namespace

TEMPLATE_TEST_CASE("ragged_matmul matches a loop, with empty batches", "[correctness][ragged]", float,
                   double) {
  using T = TestType;
  const Batches bt = GENERATE(values<Batches>({
      {"no batches", {}},
      {"one empty batch", {0}},
      {"single row", {1}},
      {"empty batches between", {0, 3, 0, 7, 1, 0}},
      {"uneven", {33, 1, 130, 5}},
  }));
  const std::int64_t k = GENERATE(1, 7, 33);
  const std::int64_t n = GENERATE(1, 7, 130);
  INFO(bt.name << " K=" << k << " N=" << n << " " << dtype_label<T>());
  const auto a = sp::Ragged<T>::random(bt.rows, {k}, 301, -1, 1);
  const auto w = sp::Tensor<T>::random({static_cast<std::int64_t>(bt.rows.size()), k, n}, 302, -1, 1);
  auto c = sp::Ragged<T>::zeros(bt.rows, {n});
  for (T& v : c.values()) v = nan_v<T>;
  sp::ops::ragged_matmul<T>()(a, w, c);
  check_close<T>(ref_ragged(a, w, k, n), c.values(), "ragged_matmul");
}

// --- CSF reduction ------------------------------------------------------------------------

namespace {

template <class T>
std::vector<Ref> ref_csf_reduce(const sp::Csf<T>& a, std::span<const T> x) {
  std::vector<Ref> y(static_cast<std::size_t>(a.dim(0)));
  auto p1 = a.indptr(1);
  auto p2 = a.indptr(2);
  auto l = a.indices(2);
  for (std::int64_t i = 0; i < a.dim(0); ++i)
    for (auto q = p1[i]; q < p1[i + 1]; ++q)
      for (auto e = p2[q]; e < p2[q + 1]; ++e) {
        const double t = static_cast<double>(a.values()[e]) * x[l[e]];
        Ref& o = y[static_cast<std::size_t>(i)];
        o.value += t;
        o.abs_sum += std::abs(t);
        ++o.terms;
      }
  return y;
}

// shape 5 x 5 x 6: row 1 and row 4 have no J fibers; J positions 1 and 3 have no L entries.
template <class T>
sp::Csf<T> csf_with_empty_fibers() {
  std::vector<sp::CsfLevel<std::int32_t>> levels(2);
  levels[0].indptr = {0, 2, 2, 5, 6, 6};
  levels[0].indices = {0, 3, 1, 2, 4, 0};
  levels[1].indptr = {0, 2, 2, 3, 3, 5, 6};
  levels[1].indices = {1, 5, 0, 2, 3, 5};
  std::vector<T> values{T(1.5), T(-2), T(0.25), T(3), T(-1), T(0.5)};
  return sp::Csf<T>({5, 5, 6}, std::move(levels), std::move(values), "empty-fibers");
}

}  // namespace

TEMPLATE_TEST_CASE("csf_reduce matches a loop on random CSF tensors", "[correctness][csf]", float, double) {
  using T = TestType;
  const std::vector<std::int64_t> shape = GENERATE(values<std::vector<std::int64_t>>({
      {0, 4, 5}, {3, 0, 5}, {3, 4, 0}, {1, 1, 1}, {7, 33, 130}, {130, 7, 33}, {33, 130, 7}}));
  const double density = GENERATE(0.0, 0.02, 0.3);
  INFO(sp::detail::shape_string(shape) << " density " << density << " " << dtype_label<T>());
  const auto a = sp::Csf<T>::random(shape, density, 401, -1, 1);
  const auto x = sp::Tensor<T>::random({shape[2]}, 402, -1, 1);
  auto y = sp::Tensor<T>::full({shape[0]}, nan_v<T>);
  sp::ops::csf_reduce<T>()(a, x, y);
  check_close<T>(ref_csf_reduce(a, x.values()), y.values(), "csf_reduce");
}

TEMPLATE_TEST_CASE("csf_reduce with empty fibers on both compressed levels", "[correctness][csf]", float,
                   double) {
  using T = TestType;
  const auto a = csf_with_empty_fibers<T>();
  const auto x = sp::Tensor<T>::from({T(1), T(2), T(3), T(4), T(5), T(6)}, {6});
  auto y = sp::Tensor<T>::full({5}, nan_v<T>);
  sp::ops::csf_reduce<T>()(a, x, y);
  // By hand: row 0 -> (j0: 1.5*x1 - 2*x5) + (j3: nothing) = 3 - 12 = -9;
  // row 2 -> (j1: 0.25*x0) + (j2: nothing) + (j4: 3*x2 - 1*x3) = 0.25 + 9 - 4 = 5.25;
  // row 3 -> (j0: 0.5*x5) = 3; rows 1 and 4 are empty -> 0.
  const std::vector<T> expected{T(-9), T(0), T(5.25), T(3), T(0)};
  CHECK(to_vector<T>(y.values()) == expected);
  check_close<T>(ref_csf_reduce(a, x.values()), y.values(), "csf empty fibers");
}
