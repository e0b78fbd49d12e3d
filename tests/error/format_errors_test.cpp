// Malformed inputs handed to a kernel call: CSR arrays whose indptr is not monotone or does
// not start at 0, indices out of range, nnz mismatches, wrong array lengths, Eigen matrices
// in a form spindle cannot view, malformed ragged and CSF structures. Each is a FormatError
// (ShapeError for dense shapes) raised while the argument is built, before the kernel runs:
// the output keeps its sentinel and the caller's arrays keep their contents.
#include <catch2/catch.hpp>

#include "error/error_support.hpp"
#include "spindle/eigen.hpp"

namespace {

using namespace spindle_error_test;
namespace sp = spindle;

// A 3x4 CSR: row 0 = {0, 2}, row 1 = {}, row 2 = {1, 3}
struct Arrays {
  std::vector<int> indptr{0, 2, 2, 4};
  std::vector<int> indices{0, 2, 1, 3};
  std::vector<float> values{1, 2, 3, 4};
};

struct Call {
  sp::Tensor<float> x = sp::Tensor<float>::random({4}, 941);
  sp::Tensor<float> y = sp::Tensor<float>::full({3}, sentinel<float>());
  bool output_untouched() const {
    for (float v : y.values())
      if (v != sentinel<float>()) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("the well-formed arrays work (control for the cases below)", "[error][format]") {
  Arrays arr;
  Call c;
  sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y);
  CHECK(c.y(0) == Approx(1 * c.x(0) + 2 * c.x(2)));
  CHECK(c.y(1) == 0.0f);
  CHECK(c.y(2) == Approx(3 * c.x(1) + 4 * c.x(3)));
}

TEST_CASE("indptr that is not monotone is a FormatError", "[error][format][indptr]") {
  Arrays arr;
  arr.indptr = {0, 3, 2, 4};
  const Arrays copy = arr;
  Call c;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y),
                       sp::FormatError, "indptr is not monotone at row 1");
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::CsrView<float>(3, 4, 4, arr.indptr.data(), arr.indices.data(),
                                                                 arr.values.data()),
                                              c.x, c.y),
                       sp::FormatError, "indptr is not monotone");
  CHECK(c.output_untouched());
  CHECK(arr.indptr == copy.indptr);
  CHECK(arr.values == copy.values);
}

TEST_CASE("indptr that does not start at 0 is a FormatError", "[error][format][indptr]") {
  Arrays arr;
  arr.indptr = {1, 2, 2, 4};
  Call c;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y),
                       sp::FormatError, "indptr[0] must be 0, found 1");
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::CsrView<float>(3, 4, 4, arr.indptr.data(), arr.indices.data(),
                                                                 arr.values.data()),
                                              c.x, c.y),
                       sp::FormatError, "indptr[0] must be 0");
  CHECK(c.output_untouched());
}

TEST_CASE("a column index out of range is a FormatError", "[error][format][indices]") {
  Call c;
  SECTION("too large") {
    Arrays arr;
    arr.indices = {0, 2, 1, 4};
    SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y),
                         sp::FormatError, "index 4 out of range [0, 4) at position 3 (row 2)");
  }
  SECTION("negative") {
    Arrays arr;
    arr.indices = {0, -1, 1, 3};
    SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::CsrView<float>(3, 4, 4, arr.indptr.data(), arr.indices.data(),
                                                                   arr.values.data()),
                                                c.x, c.y),
                         sp::FormatError, "index -1 out of range");
  }
  CHECK(c.output_untouched());
}

TEST_CASE("an nnz mismatch is a FormatError", "[error][format][nnz]") {
  Call c;
  SECTION("indptr ends before the last index") {
    Arrays arr;
    arr.indptr = {0, 2, 2, 3};
    SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y),
                         sp::FormatError, "nnz mismatch: indptr[3]=3 but 4 indices");
  }
  SECTION("a CsrView told the wrong nnz") {
    Arrays arr;
    SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::CsrView<float>(3, 4, 3, arr.indptr.data(), arr.indices.data(),
                                                                   arr.values.data()),
                                                c.x, c.y),
                         sp::FormatError, "nnz mismatch");
  }
  SECTION("fewer values than indices") {
    Arrays arr;
    arr.values.pop_back();
    SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y),
                         sp::FormatError, "values has 3 entries but indices has 4");
  }
  CHECK(c.output_untouched());
}

TEST_CASE("an indptr of the wrong length is a FormatError", "[error][format][indptr]") {
  Arrays arr;
  arr.indptr = {0, 2, 4};
  Call c;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(sp::Csr<float>(3, 4, arr.indptr, arr.indices, arr.values), c.x, c.y),
                       sp::FormatError, "indptr has 3 entries, expected rows + 1 = 4");
  CHECK(c.output_untouched());
}

TEST_CASE("an Eigen sparse matrix in uncompressed mode is a FormatError", "[error][format][eigen]") {
  Eigen::SparseMatrix<float, Eigen::RowMajor, int> m(3, 4);
  m.reserve(Eigen::VectorXi::Constant(3, 2));
  m.insert(0, 1) = 1.0f;
  m.insert(2, 3) = 2.0f;
  REQUIRE_FALSE(m.isCompressed());
  Call c;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(m, c.x, c.y), sp::FormatError, "not in compressed mode");
  CHECK(c.output_untouched());
  CHECK_FALSE(m.isCompressed());  // the caller's matrix was not compressed behind its back
  m.makeCompressed();
  sp::ops::spmv<float>()(m, c.x, c.y);
  CHECK(c.y(0) == Approx(c.x(1)));
}

TEST_CASE("a column-major Eigen matrix is a ShapeError", "[error][format][eigen]") {
  sp::Csr<float> a(3, 4, {0, 2, 2, 4}, {0, 2, 1, 3}, {1, 2, 3, 4});
  const Eigen::MatrixXf b = Eigen::MatrixXf::Random(4, 5);  // column-major
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> c =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>::Constant(3, 5, sentinel<float>());
  SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(a, b, c), sp::ShapeError, "is column-major");
  CHECK((c.array() == sentinel<float>()).all());
}

TEST_CASE("a malformed ragged batch is a FormatError", "[error][format][ragged]") {
  SPINDLE_EXPECT_ERROR(sp::Ragged<float>({0, 3, 2}, {4}, std::vector<float>(8)), sp::FormatError,
                       "indptr is not monotone at block 1");
  SPINDLE_EXPECT_ERROR(sp::Ragged<float>({}, {4}, {}), sp::FormatError, "row_ptr is empty");
  SPINDLE_EXPECT_ERROR(sp::Ragged<float>({0, 1, 3}, {4}, std::vector<float>(11)), sp::ShapeError,
                       "11 values do not fill 3 rows");
}

TEST_CASE("a malformed CSF level is a FormatError", "[error][format][csf]") {
  std::vector<sp::CsfLevel<int>> levels(2);
  levels[0].indptr = {0, 1, 2};
  levels[0].indices = {0, 1};
  levels[1].indptr = {0, 2, 1};  // not monotone at fiber 1
  levels[1].indices = {0, 1};
  SPINDLE_EXPECT_ERROR(sp::Csf<float>({2, 2, 2}, levels, {1, 2}, "T"), sp::FormatError,
                       "Csf 'T' level 2: indptr is not monotone at fiber 1");
  levels[1].indptr = {0, 1, 2};
  levels[1].indices = {0, 2};  // out of range for extent 2
  SPINDLE_EXPECT_ERROR(sp::Csf<float>({2, 2, 2}, levels, {1, 2}, "T"), sp::FormatError, "index 2 out of range [0, 2)");
  levels[1].indices = {0, 1};
  SPINDLE_EXPECT_ERROR(sp::Csf<float>({2, 2, 2}, levels, {1, 2, 3}, "T"), sp::FormatError,
                       "values has 3 entries but the last level has 2 positions");
}
