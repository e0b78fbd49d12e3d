// sddmm, row_sum and scale (ops.hpp) against plain CSR loops, on random matrices of every
// test shape, f32 and f64, with spindle containers and Eigen types. The sparse output of
// sddmm and scale shares the input's structure: as a copy of it, as a view over the very
// same indptr/indices arrays, and as an Eigen matrix.
#include <catch2/catch.hpp>

#include <limits>

#include "correctness/correctness_support.hpp"
#include "correctness/eigen_support.hpp"
#include "spindle/eigen.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

template <class T>
std::span<const T> span_of(const T* p, std::int64_t n) {
  return {p, static_cast<std::size_t>(n)};
}

}  // namespace

TEMPLATE_TEST_CASE("sddmm matches a CSR loop, with an output that shares the input's structure",
                   "[correctness][sddmm]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(from_range(feature_sizes()));
  INFO(s << " K=" << k << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 101);
  const auto x = sp::Tensor<T>::random({s.rows, k}, 102, -1, 1);
  const auto y = sp::Tensor<T>::random({s.cols, k}, 103, -1, 1);
  const auto ref = ref_sddmm(a, x.values(), y.values(), k);
  const auto sddmm = sp::ops::sddmm<T>();

  SECTION("output: a Csr with a copy of the structure") {
    auto c = same_structure(a, nan_v<T>);
    sddmm(a, x, y, c);
    check_close<T>(ref, c.values(), "sddmm copy", 2);
  }
  SECTION("output: a CsrView over the input's own indptr/indices arrays") {
    std::vector<T> out(static_cast<std::size_t>(a.nnz()), nan_v<T>);
    sp::CsrView<T> c(a.rows(), a.cols(), a.nnz(), a.indptr().data(), a.indices().data(), out.data());
    sddmm(a, x, y, c);
    check_close<T>(ref, std::span<const T>(out), "sddmm shared arrays", 2);
    // the input is untouched
    CHECK(to_vector<T>(a.values()) == to_vector<T>(random_csr<T>(s, 101).values()));
  }
  SECTION("Eigen: sparse input and output, row-major dense features") {
    const EigenCsr<T> ea = sp::to_eigen(a);
    EigenCsr<T> ec = ea;
    for (Eigen::Index q = 0; q < ec.nonZeros(); ++q) ec.valuePtr()[q] = nan_v<T>;
    const RowMat<T> ex = sp::to_eigen(x);
    const RowMat<T> ey = sp::to_eigen(y);
    sddmm(ea, ex, ey, ec);
    check_close<T>(ref, span_of(ec.valuePtr(), ec.nonZeros()), "sddmm eigen", 2);
  }
}

TEMPLATE_TEST_CASE("row_sum matches a CSR loop", "[correctness][row_sum]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 111);
  const auto ref = ref_row_sum(a);
  SECTION("spindle containers") {
    auto y = sp::Tensor<T>::full({s.rows}, nan_v<T>);
    sp::ops::row_sum<T>()(a, y);
    check_close<T>(ref, y.values(), "row_sum");
  }
  SECTION("Eigen sparse matrix and vector, checked against Eigen's row sums") {
    const EigenCsr<T> ea = sp::to_eigen(a);
    Vec<T> y = Vec<T>::Constant(s.rows, nan_v<T>);
    sp::ops::row_sum<T>()(ea, y);
    Eigen::VectorXd expected = Eigen::VectorXd::Zero(s.rows);
    for (int r = 0; r < ea.outerSize(); ++r)
      for (typename EigenCsr<T>::InnerIterator it(ea, r); it; ++it) expected[r] += it.value();
    auto refs = ref;
    for (std::size_t q = 0; q < refs.size(); ++q) refs[q].value = expected[static_cast<Eigen::Index>(q)];
    check_close<T>(refs, span_of(y.data(), y.size()), "row_sum eigen");
  }
}

TEMPLATE_TEST_CASE("scale (param alpha, row and column scaling) matches an element-wise loop",
                   "[correctness][scale]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const double alpha = GENERATE(1.0, -0.5, 3.25);
  INFO(s << " alpha=" << alpha << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 121);
  const auto r = sp::Tensor<T>::random({s.rows}, 122, 0.5, 2);
  const auto c = sp::Tensor<T>::random({s.cols}, 123, 0.5, 2);
  std::vector<double> ref(static_cast<std::size_t>(a.nnz()));
  for (std::int64_t i = 0; i < a.rows(); ++i)
    for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
      ref[static_cast<std::size_t>(q)] = static_cast<double>(static_cast<T>(alpha)) * r.values()[i] *
                                         a.values()[q] * c.values()[a.indices()[q]];
  SECTION("spindle containers, alpha passed as T") {
    auto b = same_structure(a, nan_v<T>);
    sp::ops::scale<T>()(a, r, c, static_cast<T>(alpha), b);
    check_elementwise<T>(uniform_ops(ref, 3), b.values(), "scale");
  }
  SECTION("alpha passed as another arithmetic type (double / int converts)") {
    auto b = same_structure(a, nan_v<T>);
    sp::ops::scale<T>()(a, r, c, alpha, b);
    check_elementwise<T>(uniform_ops(ref, 3), b.values(), "scale double alpha");
    if (alpha == 1.0) {
      auto b2 = same_structure(a, nan_v<T>);
      sp::ops::scale<T>()(a, r, c, 1, b2);
      check_elementwise<T>(uniform_ops(ref, 3), b2.values(), "scale int alpha");
    }
  }
  SECTION("Eigen sparse in and out, Eigen vectors") {
    const EigenCsr<T> ea = sp::to_eigen(a);
    EigenCsr<T> eb = ea;
    const Vec<T> er = Eigen::Map<const Vec<T>>(r.data(), s.rows);
    const Vec<T> ecol = Eigen::Map<const Vec<T>>(c.data(), s.cols);
    sp::ops::scale<T>()(ea, er, ecol, static_cast<T>(alpha), eb);
    check_elementwise<T>(uniform_ops(ref, 3), span_of(eb.valuePtr(), eb.nonZeros()), "scale eigen");
  }
}

TEST_CASE("scale computes the GCN normalisation D^-1/2 A D^-1/2 on a graph", "[correctness][scale][graph]") {
  auto g = load_graph<double>("gnn/cora.mtx.gz");
  if (!g) return;
  // Degrees via the row_sum kernel on the pattern (all ones).
  auto ones = same_structure(*g, 1.0);
  auto deg = sp::Tensor<double>::zeros({g->rows()});
  sp::ops::row_sum<double>()(ones, deg);
  auto inv_sqrt = sp::Tensor<double>::zeros({g->rows()});
  for (std::int64_t i = 0; i < g->rows(); ++i) {
    double d = 0;
    for (auto q = g->indptr()[i]; q < g->indptr()[i + 1]; ++q) d += 1;
    REQUIRE(deg(i) == d);
    inv_sqrt(i) = d > 0 ? 1.0 / std::sqrt(d) : 0.0;
  }
  auto norm = same_structure(*g, 0.0);
  sp::ops::scale<double>()(ones, inv_sqrt, inv_sqrt, 1.0, norm);
  std::vector<double> ref(static_cast<std::size_t>(g->nnz()));
  for (std::int64_t i = 0; i < g->rows(); ++i)
    for (auto q = g->indptr()[i]; q < g->indptr()[i + 1]; ++q)
      ref[static_cast<std::size_t>(q)] = inv_sqrt(i) * inv_sqrt(g->indices()[q]);
  check_elementwise<double>(uniform_ops(ref, 3), norm.values(), "gcn norm");
}
