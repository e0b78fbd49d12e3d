// spmv, spmm and spmm_dense_j (ops.hpp) against plain CSR loops and Eigen, on random
// matrices of every test shape, f32 and f64, int32 and int64 indices, with spindle
// containers and with Eigen types as arguments.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <thread>

#include "correctness/correctness_support.hpp"
#include "correctness/eigen_support.hpp"
#include "spindle/eigen.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

template <class T>
T poison() {
  return std::numeric_limits<T>::quiet_NaN();  // an `out` buffer must not read what was there
}

// Refs whose value is Eigen's (double) result and whose abs_sum/terms come from the loop.
template <class T>
std::vector<Ref> with_values(std::vector<Ref> refs, const double* values) {
  for (std::size_t k = 0; k < refs.size(); ++k) refs[k].value = values[k];
  return refs;
}

}  // namespace

TEMPLATE_TEST_CASE("spmv matches a CSR loop (spindle containers, int32 and int64 indices)",
                   "[correctness][spmv]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 11);
  const auto x = sp::Tensor<T>::random({s.cols}, 12, -1, 1);
  const auto ref = ref_spmv(a, x.values());

  SECTION("int32 indices") {
    auto y = sp::Tensor<T>::full({s.rows}, poison<T>());
    sp::ops::spmv<T>()(a, x, y);
    check_close<T>(ref, y.values(), "spmv i32");
  }
  SECTION("int64 indices (axis J64)") {
    const auto a64 = with_index<std::int64_t>(a);
    auto y = sp::Tensor<T>::full({s.rows}, poison<T>());
    sp::ops::spmv<T, sp::ops::J64>()(a64, x, y);
    check_close<T>(ref, y.values(), "spmv i64");
  }
  SECTION("views: mutable CsrView + TensorView") {
    auto am = a;  // mutable copies: see the read-only case below
    auto xm = x;
    auto y = sp::Tensor<T>::full({s.rows}, poison<T>());
    sp::ops::spmv<T>()(am.view(), xm.view(), y.view());
    check_close<T>(ref, y.values(), "spmv views");
  }
}

// Read-only views (CsrView<const T>, TensorView<const T>: what view() returns for const
// objects) are accepted for `in` buffers; the argument check ignores const.
TEMPLATE_TEST_CASE("read-only views are accepted for `in` buffers", "[correctness][spmv]", float, double) {
  using T = TestType;
  using In2 = sp::in<T, sp::ops::I, sp::ops::J>;
  using In1 = sp::in<T, sp::dense<sp::ops::J>>;
  constexpr bool csr_ok = sp::detail::argument_fits<In2, sp::CsrView<const T>>();
  constexpr bool tensor_ok = sp::detail::argument_fits<In1, sp::TensorView<const T>>();
  CHECK(csr_ok);
  CHECK(tensor_ok);
  if constexpr (csr_ok && tensor_ok) {
    const Shape s{"irregular", 257, 190, 9, 0.2};
    const auto a = random_csr<T>(s, 11);
    const auto x = sp::Tensor<T>::random({s.cols}, 12, -1, 1);
    auto y = sp::Tensor<T>::full({s.rows}, poison<T>());
    sp::ops::spmv<T>()(a.view(), x.view(), y.view());
    check_close<T>(ref_spmv(a, x.values()), y.values(), "spmv const views");
  }
}

TEMPLATE_TEST_CASE("spmv with Eigen arguments matches Eigen's product", "[correctness][spmv][eigen]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 21);
  const EigenCsr<T> ea = sp::to_eigen(a);
  Vec<T> x = Vec<T>::Random(s.cols);
  Vec<T> y = Vec<T>::Constant(s.rows, poison<T>());
  sp::ops::spmv<T>()(ea, x, y);
  const Eigen::VectorXd expected = ea.template cast<double>() * x.template cast<double>();
  const std::span<const T> xs(x.data(), static_cast<std::size_t>(x.size()));
  check_close<T>(with_values<T>(ref_spmv(a, xs), expected.data()),
                 std::span<const T>(y.data(), static_cast<std::size_t>(y.size())), "spmv eigen");
}

namespace {
struct SvCols : sp::sparse_root<> {};
struct SvRows : sp::dense_fixed {};
struct SvJ : sp::sparse_variable<SvRows>, sp::coordinates_of<SvCols> {};
}  // namespace

TEMPLATE_TEST_CASE("SpMV with a sparse x given as an Eigen::SparseVector matches Eigen's product",
                   "[correctness][spmv][eigen][sparse_vector]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 23);
  const EigenCsr<T> ea = sp::to_eigen(a);
  Eigen::SparseVector<T> x(s.cols);
  for (std::int64_t c = 0; c < s.cols; c += 3) x.insert(c) = T(1) + T(c % 7);
  Vec<T> y = Vec<T>::Constant(s.rows, poison<T>());
  auto k = sp::kernel("spmv_eigen_sparse_x", [](sp::in<T, SvRows, SvJ> a, sp::in<T, SvCols> x, sp::out<T, SvRows> y,
                                                sp::iter<SvRows> i, sp::iter<SvJ> j) { y(i) += a(i, j) * x(j); });
  k(ea, x, y);
  const Eigen::VectorXd expected = ea.template cast<double>() * Eigen::VectorXd(x.template cast<double>());
  for (std::int64_t r = 0; r < s.rows; ++r) {
    double mag = 0;
    for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) mag += std::abs(double(a.values()[q])) * 7;
    REQUIRE(std::abs(double(y(r)) - expected(r)) <= 1e-5 * (1 + mag));
  }
}

TEMPLATE_TEST_CASE("spmm matches a CSR loop for every shape and feature size", "[correctness][spmm]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(from_range(feature_sizes()));
  INFO(s << " K=" << k << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 31);
  const auto b = sp::Tensor<T>::random({s.cols, k}, 32, -1, 1);
  auto c = sp::Tensor<T>::full({s.rows, k}, poison<T>());
  sp::ops::spmm<T>()(a, b, c);
  check_close<T>(ref_spmm(a, b.values(), k), c.values(), "spmm");
}

TEMPLATE_TEST_CASE("spmm with Eigen arguments matches Eigen's product", "[correctness][spmm][eigen]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(from_range(feature_sizes()));
  INFO(s << " K=" << k << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 41);
  const EigenCsr<T> ea = sp::to_eigen(a);
  const RowMat<T> b = RowMat<T>::Random(s.cols, k);
  const Eigen::MatrixXd expected_cm = ea.template cast<double>() * b.template cast<double>();
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> expected = expected_cm;
  const auto refs = with_values<T>(
      ref_spmm(a, std::span<const T>(b.data(), static_cast<std::size_t>(b.size())), k), expected.data());
  auto got = [](const RowMat<T>& m) { return std::span<const T>(m.data(), static_cast<std::size_t>(m.size())); };

  SECTION("Eigen types passed directly") {
    RowMat<T> c = RowMat<T>::Constant(s.rows, k, poison<T>());
    sp::ops::spmm<T>()(ea, b, c);
    check_close<T>(refs, got(c), "spmm eigen direct");
  }
  SECTION("zero-copy spindle::view of (mutable) Eigen objects") {
    EigenCsr<T> ma = ea;  // views of const Eigen objects are read-only
    RowMat<T> mb = b;
    RowMat<T> c = RowMat<T>::Constant(s.rows, k, poison<T>());
    sp::ops::spmm<T>()(sp::view(ma), sp::view(mb), sp::view(c));
    check_close<T>(refs, got(c), "spmm eigen view");
  }
  SECTION("read-only Eigen::Map input and a contiguous block (topRows) as output") {
    const Eigen::Map<const RowMat<T>> bm(b.data(), s.cols, k);
    RowMat<T> big = RowMat<T>::Constant(s.rows + 3, k, poison<T>());
    auto top = big.topRows(s.rows);
    sp::ops::spmm<T>()(ea, bm, top);
    const RowMat<T> c = big.topRows(s.rows);
    check_close<T>(refs, got(c), "spmm eigen map/block");
    CHECK(big.bottomRows(3).array().isNaN().all());  // rows past the block untouched
  }
  SECTION("Eigen::Map of caller-owned arrays") {
    std::vector<T> out(static_cast<std::size_t>(s.rows * k), poison<T>());
    Eigen::Map<RowMat<T>> c(out.data(), s.rows, k);
    sp::ops::spmm<T>()(ea, b, c);
    check_close<T>(refs, std::span<const T>(out), "spmm eigen map");
  }
}

TEMPLATE_TEST_CASE("spmm_dense_j (binary search) matches the reference and agrees with spmm",
                   "[correctness][spmm_dense_j]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(from_range(feature_sizes()));
  INFO(s << " K=" << k << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 51);
  const auto b = sp::Tensor<T>::random({s.cols, k}, 52, -1, 1);
  auto c_search = sp::Tensor<T>::full({s.rows, k}, poison<T>());
  auto c_direct = sp::Tensor<T>::full({s.rows, k}, poison<T>());
  sp::ops::spmm_dense_j<T>()(a, b, c_search);
  sp::ops::spmm<T>()(a, b, c_direct);
  const auto ref = ref_spmm(a, b.values(), k);
  check_close<T>(ref, c_search.values(), "spmm_dense_j");
  // Both sum the same products in the same column order: they agree within the tolerance.
  std::vector<Ref> direct = ref;
  for (std::size_t q = 0; q < direct.size(); ++q) direct[q].value = c_direct.values()[q];
  check_close<T>(direct, c_search.values(), "spmm_dense_j vs spmm");
}

TEST_CASE("spmm_dense_j accepts an Eigen matrix (sorted by Eigen) and a CsrView", "[correctness][spmm_dense_j][eigen]") {
  const Shape s{"irregular", 257, 190, 9, 0.2};
  const auto a = random_csr<float>(s, 61);
  const EigenCsr<float> ea = sp::to_eigen(a);
  const RowMat<float> b = RowMat<float>::Random(s.cols, 33);
  RowMat<float> c = RowMat<float>::Constant(s.rows, 33, poison<float>());
  sp::ops::spmm_dense_j<float>()(ea, b, c);
  check_close<float>(ref_spmm(a, std::span<const float>(b.data(), static_cast<std::size_t>(b.size())), 33),
                     std::span<const float>(c.data(), static_cast<std::size_t>(c.size())), "dense_j eigen");
}

TEST_CASE("repeated calls give the same result and never accumulate into an out buffer",
          "[correctness][spmm][repeat]") {
  const Shape s{"irregular", 257, 190, 9, 0.2};
  const auto a = random_csr<float>(s, 71);
  const auto b1 = sp::Tensor<float>::random({s.cols, 7}, 72, -1, 1);
  const auto b2 = sp::Tensor<float>::random({s.cols, 7}, 73, -1, 1);
  const auto kernel = sp::ops::spmm<float>();
  auto c = sp::Tensor<float>::full({s.rows, 7}, poison<float>());
  kernel(a, b1, c);
  const auto first = to_vector<float>(c.values());
  for (int rep = 0; rep < 5; ++rep) {
    kernel(a, b1, c);
    CHECK(to_vector<float>(c.values()) == first);
  }
  kernel(a, b2, c);  // other inputs in between
  check_close<float>(ref_spmm(a, b2.values(), 7), c.values(), "spmm b2");
  kernel(a, b1, c);
  CHECK(to_vector<float>(c.values()) == first);
  // A copy of the kernel object shares the compiled code.
  const auto copy = kernel;
  CHECK(&copy.compile() == &kernel.compile());
}

TEST_CASE("spmv with int64 indices on a matrix wider than a vector register, repeated",
          "[correctness][spmv][int64]") {
  const Shape s{"wide", 7, 130, 40};
  const auto a = with_index<std::int64_t>(random_csr<double>(s, 81));
  const auto x = sp::Tensor<double>::random({s.cols}, 82, -1, 1);
  auto y = sp::Tensor<double>::full({s.rows}, poison<double>());
  const auto k = sp::ops::spmv<double, sp::ops::J64>();
  for (int rep = 0; rep < 3; ++rep) {
    k(a, x, y);
    check_close<double>(ref_spmv(a, x.values()), y.values(), "spmv i64 repeated");
  }
}

TEST_CASE("results do not depend on the number of threads of the runtime", "[correctness][spmm][threads]") {
  const Shape s{"irregular", 257, 190, 9, 0.2};
  const auto a = random_csr<double>(s, 91);
  const auto b = sp::Tensor<double>::random({s.cols, 33}, 92, -1, 1);
  const auto ref = ref_spmm(a, b.values(), 33);
  for (int threads : {1, 2, 3, 8}) {
    INFO("threads " << threads);
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    auto c = sp::Tensor<double>::full({s.rows, 33}, poison<double>());
    sp::ops::spmm<double>().with_runtime(rt)(a, b, c);
    check_close<double>(ref, c.values(), "spmm threads");
    auto y = sp::Tensor<double>::full({s.rows}, poison<double>());
    sp::ops::row_sum<double>().with_runtime(rt)(a, y);
    check_close<double>(ref_row_sum(a), y.values(), "row_sum threads");
  }
}

TEST_CASE("one kernel object called concurrently from several threads", "[correctness][spmm][threads]") {
  const auto kernel = sp::ops::spmm<float>();  // not compiled yet: the threads race to compile it
  constexpr int kThreads = 4;
  std::vector<sp::Csr<float>> as;
  std::vector<sp::Tensor<float>> bs, cs;
  for (int t = 0; t < kThreads; ++t) {
    as.push_back(random_csr<float>({"irregular", 100 + 37 * t, 90 + t, 5, 0.1}, 93 + t));
    bs.push_back(sp::Tensor<float>::random({as.back().cols(), 7 + t}, 97 + t, -1, 1));
    cs.push_back(sp::Tensor<float>::full({as.back().rows(), 7 + t}, poison<float>()));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep) kernel(as[t], bs[t], cs[t]);
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t)
    check_close<float>(ref_spmm(as[t], bs[t].values(), 7 + t), cs[t].values(), "concurrent spmm");
}
