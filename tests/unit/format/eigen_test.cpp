// spindle/eigen.hpp: zero-copy views of Eigen matrices, layout checks, converters.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/eigen.hpp"
#include "spindle/format/csr.hpp"

using namespace spindle;
using Catch::Matchers::Contains;
using SpRow = Eigen::SparseMatrix<float, Eigen::RowMajor>;
using DenseRow = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

TEST_CASE("view of a row-major Eigen sparse matrix is zero-copy", "[format][eigen]") {
  const auto a = Csr<float>::random(40, 30, 5.0, 21);
  SpRow e = to_eigen(a);
  REQUIRE(e.isCompressed());
  CHECK(e.nonZeros() == a.nnz());

  auto v = view(e);
  static_assert(std::is_same_v<decltype(v), CsrView<float, int>>);
  CHECK(v.values().data() == e.valuePtr());
  CHECK(v.indptr().data() == e.outerIndexPtr());
  CHECK(v.indices().data() == e.innerIndexPtr());
  CHECK(v.sorted());
  CHECK(v.to_dense() == a.to_dense());
  v.values()[0] = 123.0f;  // mutable through a mutable view
  CHECK(e.valuePtr()[0] == 123.0f);

  const SpRow& ce = e;
  auto cv = view(ce);
  static_assert(std::is_same_v<decltype(cv), CsrView<const float, int>>);
  CHECK_FALSE(cv.storage().writable);
  CHECK(cv.storage().data == e.valuePtr());

  Eigen::Map<SpRow> m(e.rows(), e.cols(), e.nonZeros(), e.outerIndexPtr(), e.innerIndexPtr(),
                      e.valuePtr());
  CHECK(view(m).values().data() == e.valuePtr());

  const StorageView s = storage_of(e);
  CHECK(s.data == e.valuePtr());
  CHECK(s.levels[1].indptr == e.outerIndexPtr());
  CHECK(s.writable);
  CHECK_FALSE(storage_of(ce).writable);
}

TEST_CASE("view of an uncompressed Eigen sparse matrix is rejected", "[format][eigen]") {
  SpRow e(3, 3);
  e.reserve(Eigen::VectorXi::Constant(3, 2));
  e.insert(0, 1) = 1.0f;
  e.insert(2, 2) = 2.0f;
  REQUIRE_FALSE(e.isCompressed());
  SPINDLE_CHECK_THROWS(view(e), FormatError,
                       Contains("Eigen::SparseMatrix 3x3 is not in compressed mode") &&
                           Contains("makeCompressed()"));
  e.makeCompressed();
  CHECK(view(e).nnz() == 2);
  // An index corrupted behind Eigen's back is caught when the view is made.
  e.innerIndexPtr()[1] = 7;
  SPINDLE_CHECK_THROWS(view(e), FormatError,
                       Contains("index 7 out of range [0, 3) at position 1 (row 2)"));
}

TEST_CASE("view of row-major dense Eigen matrices and maps", "[format][eigen]") {
  DenseRow d(3, 4);
  d.setRandom();
  auto v = view(d);
  static_assert(std::is_same_v<decltype(v), TensorView<double>>);
  CHECK(v.data() == d.data());
  CHECK(v.shape() == std::vector<std::int64_t>{3, 4});
  CHECK(v(2, 1) == d(2, 1));
  v(1, 3) = 9.0;
  CHECK(d(1, 3) == 9.0);
  const DenseRow& cd = d;
  static_assert(std::is_same_v<decltype(view(cd)), TensorView<const double>>);
  CHECK_FALSE(storage_of(cd).writable);
  CHECK(storage_of(d).data == d.data());

  std::vector<float> buf(6, 1.0f);
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> map(buf.data(),
                                                                                        2, 3);
  CHECK(view(map).data() == buf.data());
  CHECK(storage_of(map).levels[1].length == 3);
  Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> cmap(
      buf.data(), 2, 3);
  static_assert(std::is_same_v<decltype(view(cmap)), TensorView<const float>>);
  CHECK(
      storage_of(Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                     buf.data(), 3, 2))
          .levels[0]
          .length == 3);

  // Vectors are contiguous in either major order.
  Eigen::VectorXf col = Eigen::VectorXf::LinSpaced(5, 0, 4);
  auto vc = view(col);
  CHECK(vc.rank() == 1);
  CHECK(vc.dim(0) == 5);
  CHECK(vc.data() == col.data());
  Eigen::RowVectorXd row(3);
  CHECK(view(row).shape() == std::vector<std::int64_t>{3});
  Eigen::MatrixXf one_col(4, 1);
  CHECK(view(one_col).shape() == std::vector<std::int64_t>{4, 1});
  Eigen::ArrayXXf empty(0, 0);
  CHECK(view(empty).size() == 0);
}

TEST_CASE("column-major or strided dense Eigen matrices are rejected", "[format][eigen]") {
  Eigen::MatrixXf cm(3, 4);
  SPINDLE_CHECK_THROWS(view(cm), ShapeError,
                       Contains("Eigen matrix 3x4 is column-major") && Contains("Eigen::RowMajor"));
  CHECK_THROWS_AS(storage_of(cm), ShapeError);
  std::vector<float> buf(12);
  Eigen::Map<Eigen::MatrixXf> cmap(buf.data(), 3, 4);
  CHECK_THROWS_AS(view(cmap), ShapeError);

  DenseRow d(4, 5);
  auto block = d.block(1, 1, 2, 2);
  SPINDLE_CHECK_THROWS(view(block), ShapeError, Contains("needs contiguous rows"));
  auto rows = d.middleRows(1, 2);  // full rows are contiguous
  CHECK(view(rows).data() == d.data() + 5);
  Eigen::Map<Eigen::VectorXf, 0, Eigen::InnerStride<2>> strided(buf.data(), 6);
  SPINDLE_CHECK_THROWS(view(strided), ShapeError, Contains("inner stride 2"));
}

TEST_CASE("Eigen converters round trip", "[format][eigen]") {
  auto a = Csr<double>::random(25, 35, 4.0, 5);
  CHECK(to_csr(to_eigen(a)).to_dense() == a.to_dense());
  Eigen::SparseMatrix<double> colmajor = to_eigen(a);  // converted by Eigen
  auto back = to_csr(colmajor);
  CHECK(back.to_dense() == a.to_dense());
  CHECK(back.sorted());
  CHECK(to_csr<std::int64_t>(colmajor).storage().levels[1].index_dtype == DType::i64);

  Csr<double> unsorted(1, 4, {0, 3}, {3, 0, 3}, {1, 2, 3});
  auto eu = to_eigen(unsorted);
  CHECK(eu.coeff(0, 3) == 4.0);
  CHECK(eu.nonZeros() == 2);

  auto t = Tensor<float>::random({3, 5}, 2);
  auto et = to_eigen(t);
  CHECK(et(2, 4) == t(2, 4));
  CHECK_THROWS_AS(to_eigen(Tensor<float>::zeros({2, 2, 2})), ShapeError);
}

TEST_CASE("Eigen::SparseVector is a zero-copy sparse vector argument, converters round trip", "[format][eigen]") {
  Eigen::SparseVector<float> v(10);
  v.insert(7) = 2.0f;
  v.insert(1) = -3.0f;  // Eigen keeps the indices sorted
  v.insert(4) = 5.0f;
  const StorageView s = storage_of(v);
  REQUIRE(s.levels.size() == 1);
  CHECK(s.levels[0].kind == LevelKind::sparse_fixed);
  CHECK(s.levels[0].length == 10);
  CHECK(s.levels[0].nnz_per_row == 3);
  CHECK(s.data == v.valuePtr());  // zero-copy
  CHECK(s.writable);
  const auto& cv = v;
  CHECK_FALSE(storage_of(cv).writable);
  const SparseVector<float> x = to_sparse_vector(v);
  CHECK(std::vector<std::int32_t>(x.indices().begin(), x.indices().end()) == std::vector<std::int32_t>{1, 4, 7});
  CHECK(x.at(4) == 5.0f);
  const auto back = to_eigen(x);
  CHECK(back.nonZeros() == 3);
  CHECK(back.coeff(7) == 2.0f);
  CHECK(back.coeff(0) == 0.0f);
  Eigen::SparseVector<double, Eigen::RowMajor, std::int64_t> row(5);
  row.insert(2) = 1.0;
  CHECK(storage_of(row).levels[0].index_dtype == DType::i64);
}
