// Malformed inputs handed to a kernel call: CSR arrays whose indptr is not monotone or does
// not start at 0, indices out of range, nnz mismatches, wrong array lengths, Eigen matrices
// in a form spindle cannot view, malformed ragged and CSF structures. Each is a FormatError
// (ShapeError for dense shapes) raised while the argument is built, before the kernel runs:
// the output keeps its sentinel and the caller's arrays keep their contents.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

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

// ---------------------------------------------------------------------------------------
// Hostile CSR arrays (issue 8): each malformed structure is a FormatError (DTypeError for a
// bad index dtype) naming the structure and the row or position, raised before anything is
// read out of bounds; sizes that overflow are reported, never computed with.

namespace {

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

sp::Csr<float> csr(std::int64_t rows, std::int64_t cols, std::vector<int> indptr,
                   std::vector<int> indices) {
  std::vector<float> values(indices.size(), 1.0f);
  return sp::Csr<float>(rows, cols, std::move(indptr), std::move(indices), std::move(values), "H");
}

sp::CompressedLevelRef level(const std::vector<int>& indptr, const std::vector<int>& indices,
                             std::int64_t length) {
  sp::CompressedLevelRef ref;
  ref.name = "Level 'L'";
  ref.parents = static_cast<std::int64_t>(indptr.size()) - 1;
  ref.length = length;
  ref.nnz = static_cast<std::int64_t>(indices.size());
  ref.indptr = indptr.data();
  ref.indices = indices.data();
  ref.index_dtype = sp::DType::i32;
  return ref;
}

}  // namespace

TEST_CASE("CSR sizes: negative, too large for the index type, overflowing", "[error][format][hostile]") {
  SPINDLE_EXPECT_ERROR(csr(-1, 4, {0}, {}), sp::FormatError, "Csr 'H': row count is negative (-1)");
  SPINDLE_EXPECT_ERROR(csr(3, -4, {0, 0, 0, 0}, {}), sp::FormatError,
                       "Csr 'H': column count is negative (-4)");
  SPINDLE_EXPECT_ERROR(csr(3000000000LL, 4, {0}, {}), sp::FormatError,
                       "Csr 'H': row count=3000000000 does not fit the index type i32");
  SPINDLE_EXPECT_ERROR(csr(1, 2147483648LL, {0, 0}, {}), sp::FormatError,
                       "column count=2147483648 does not fit the index type i32");
  // rows + 1 would overflow int64: the check must not compute it.
  const std::vector<std::int64_t> one{0};
  SPINDLE_EXPECT_ERROR((sp::validate_compressed<std::int64_t>("Csr 'H'", kI64Max, 4, 0, one, {})),
                       sp::FormatError, "indptr has 1 entries, expected rows + 1 = 9223372036854775808");
  SPINDLE_EXPECT_ERROR((sp::validate_indptr<std::int64_t>("Ragged 'R'", kI64Max, 0, one, "block")),
                       sp::FormatError, "indptr has 1 entries, expected blocks + 1 = 9223372036854775808");
  SPINDLE_EXPECT_ERROR((sp::validate_compressed<std::int64_t>("Csr 'H'", 0, -1, 0, one, {})),
                       sp::FormatError, "Csr 'H': length is negative (-1)");
  SPINDLE_EXPECT_ERROR((sp::validate_compressed<int>("Csr 'H'", -5, 4, 0, std::vector<int>{0}, {})),
                       sp::FormatError, "row count is negative (-5)");
  SPINDLE_EXPECT_ERROR((sp::validate_compressed<int>("Csr 'H'", 0, 4, -2, std::vector<int>{0}, {})),
                       sp::FormatError, "nnz is negative (-2)");
  SPINDLE_EXPECT_ERROR((sp::validate_compressed<int>("Csr 'H'", 1, 4, 3, std::vector<int>{0, 3},
                                                     std::vector<int>{0, 1})),
                       sp::FormatError, "indices has 2 entries but nnz is 3");
  SPINDLE_EXPECT_ERROR((sp::validate_compressed<std::int64_t>(
                           "Csr 'H'", 1, std::int64_t{1} << 40, 1, std::vector<std::int64_t>{0, 1},
                           std::vector<std::int64_t>{std::int64_t{1} << 41})),
                       sp::FormatError, "index 2199023255552 out of range [0, 1099511627776) at position 0 (row 0)");
}

TEST_CASE("CSR indptr: start, monotonicity, end, length", "[error][format][hostile]") {
  SPINDLE_EXPECT_ERROR(csr(3, 4, {}, {}), sp::FormatError, "indptr has 0 entries, expected rows + 1 = 4");
  SPINDLE_EXPECT_ERROR(csr(3, 4, {0, 2, 2, 4, 4}, {0, 2, 1, 3}), sp::FormatError,
                       "indptr has 5 entries, expected rows + 1 = 4");
  SPINDLE_EXPECT_ERROR(csr(3, 4, {-1, 2, 2, 4}, {0, 2, 1, 3}), sp::FormatError,
                       "indptr[0] must be 0, found -1");
  SPINDLE_EXPECT_ERROR(csr(3, 4, {0, 2, 4, 3}, {0, 2, 1, 3}), sp::FormatError,
                       "indptr is not monotone at row 2 (indptr[2]=4 > indptr[3]=3)");
  SPINDLE_EXPECT_ERROR(csr(3, 4, {0, -2, 2, 4}, {0, 2, 1, 3}), sp::FormatError,
                       "indptr is not monotone at row 0 (indptr[0]=0 > indptr[1]=-2)");
  SPINDLE_EXPECT_ERROR(csr(3, 4, {0, 2, 2, 5}, {0, 2, 1, 3}), sp::FormatError,
                       "nnz mismatch: indptr[3]=5 but 4 indices");
  SPINDLE_EXPECT_ERROR(csr(3, 4, {0, 2147483647, 2147483647, 2147483647}, {0, 2, 1, 3}),
                       sp::FormatError, "nnz mismatch: indptr[3]=2147483647 but 4 indices");
  SPINDLE_EXPECT_ERROR(csr(0, 4, {3}, {0, 1, 2}), sp::FormatError, "indptr[0] must be 0, found 3");
  SPINDLE_EXPECT_ERROR((sp::validate_indptr<int>("Ragged 'R'", 2, 3, std::vector<int>{0, 4, 3}, "block")),
                       sp::FormatError, "Ragged 'R': indptr is not monotone at block 1");
}

TEST_CASE("CSR indices: range, order, values", "[error][format][hostile]") {
  SPINDLE_EXPECT_ERROR(csr(3, 4, {0, 2, 2, 4}, {0, 2, 1, -2147483647 - 1}), sp::FormatError,
                       "index -2147483648 out of range [0, 4) at position 3 (row 2)");
  SPINDLE_EXPECT_ERROR(csr(1, 0, {0, 1}, {0}), sp::FormatError,
                       "index 0 out of range [0, 0) at position 0 (row 0)");
  SPINDLE_EXPECT_ERROR(csr(2, 4, {0, 0, 1}, {4}), sp::FormatError, "index 4 out of range [0, 4) at position 0 (row 1)");
  SPINDLE_EXPECT_ERROR((sp::Csr<double, std::int64_t>(1, 3, {0, 2}, {0, 1}, {1.0})), sp::FormatError,
                       "values has 1 entries but indices has 2");
  const auto unsorted = csr(2, 4, {0, 2, 4}, {0, 3, 2, 2});
  CHECK_FALSE(unsorted.sorted());
  const auto order = sp::validate_compressed<int>("Csr 'H'", 2, 4, 4, unsorted.indptr(), unsorted.indices());
  SPINDLE_EXPECT_ERROR(sp::require_sorted(order, "Csr 'H'", "row", "spmv"), sp::FormatError,
                       "indices of row 1 are not strictly ascending at position 3 (indices[2]=2 >= indices[3]=2); required by spmv");
}

TEST_CASE("CSR type-erased levels are checked like typed ones", "[error][format][hostile]") {
  const std::vector<int> indptr{0, 2, 2, 4}, indices{0, 2, 1, 3};
  CHECK(sp::validate_compressed(level(indptr, indices, 4)).sorted);
  auto ref = level(indptr, indices, 3);
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::FormatError,
                       "Level 'L': index 3 out of range [0, 3) at position 3 (row 2)");
  ref = level(indptr, indices, 4);
  ref.index_dtype = sp::DType::f32;
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::DTypeError, "Level 'L': index dtype must be i32 or i64, got f32");
  ref = level(indptr, indices, 4);
  ref.parents = -3;
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::FormatError, "Level 'L': row count is negative (-3)");
  ref = level(indptr, indices, 4);
  ref.indptr = nullptr;
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::FormatError, "Level 'L': indptr is null");
  ref = level(indptr, indices, 4);
  ref.indices = nullptr;
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::FormatError, "Level 'L': indices is null but nnz is 4");
  ref = level(indptr, indices, 4);
  ref.nnz = 5;
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::FormatError, "Level 'L': nnz mismatch: indptr[3]=4 but 5 indices");
  ref = level(indptr, indices, 4);
  ref.length = 3000000000LL;
  SPINDLE_EXPECT_ERROR(sp::validate_compressed(ref), sp::FormatError, "length=3000000000 does not fit the index type i32");
}

TEST_CASE("CSR from triplets: range, duplicates, integer overflow", "[error][format][hostile]") {
  using T32 = sp::Triplet<std::int32_t>;
  using T64 = sp::Triplet<std::int64_t>;
  SPINDLE_EXPECT_ERROR((sp::Csr<float>::from_triplets(2, 2, {{0, 0, 1.f}, {2, 0, 1.f}}, sp::Duplicates::sum, "T")),
                       sp::FormatError, "Csr 'T': triplet 1 (2, 0) is out of range for a 2x2 matrix");
  SPINDLE_EXPECT_ERROR((sp::Csr<float>::from_triplets(2, 2, {{0, -1, 1.f}}, sp::Duplicates::sum, "T")),
                       sp::FormatError, "triplet 0 (0, -1) is out of range");
  SPINDLE_EXPECT_ERROR((sp::Csr<float>::from_triplets(-2, 2, std::vector<sp::Triplet<float>>{}, sp::Duplicates::sum, "T")), sp::FormatError,
                       "Csr 'T': row count is negative (-2)");
  SPINDLE_EXPECT_ERROR((sp::Csr<float>::from_triplets(2, 2, {{1, 1, 1.f}, {1, 1, 2.f}}, sp::Duplicates::error, "T")),
                       sp::FormatError, "Csr 'T': duplicate entry (1, 1)");
  SPINDLE_EXPECT_ERROR((sp::Csr<std::int32_t>::from_triplets(
                           2, 2, std::vector<T32>{{0, 1, 2147483647}, {0, 1, 1}}, sp::Duplicates::sum, "T")),
                       sp::FormatError, "Csr 'T': the sum of the duplicate entries at (0, 1) overflows i32 (2147483647 + 1)");
  SPINDLE_EXPECT_ERROR((sp::Csr<std::int64_t, std::int64_t>::from_triplets(
                           2, 2, std::vector<T64>{{1, 0, -1}, {1, 0, std::numeric_limits<std::int64_t>::min()}},
                           sp::Duplicates::sum, "T")),
                       sp::FormatError, "overflows i64");
  // keep_last never adds, so the same values are fine.
  const auto kept = sp::Csr<std::int32_t>::from_triplets(
      2, 2, std::vector<T32>{{0, 1, 2147483647}, {0, 1, 1}}, sp::Duplicates::keep_last, "T");
  CHECK(kept.values()[0] == 1);
}
