// Call-time argument errors (runtime/bind_args.hpp): one case per user error, each checking
// the exception type and a stable message substring, and that the failed call modified
// none of the caller's data (outputs keep their sentinel, inputs keep their bytes).
#include <catch2/catch.hpp>

#include <algorithm>
#include <span>

#include "error/error_support.hpp"
#include "spindle/driver/pipeline.hpp"
#include "spindle/runtime/bind_args.hpp"
#include "spindle/eigen.hpp"
#include "spindle/kernel.hpp"

namespace {

using namespace spindle_error_test;
namespace sp = spindle;

// A square 40x40 matrix, inputs and sentinel-filled outputs for spmv / spmm / sddmm.
struct Fixture {
  sp::Csr<float> a = sp::Csr<float>::random(40, 40, 4, 901);
  sp::Tensor<float> x = sp::Tensor<float>::random({40}, 902);
  sp::Tensor<float> y = sp::Tensor<float>::full({40}, sentinel<float>());
  sp::Tensor<float> b = sp::Tensor<float>::random({40, 7}, 903);
  sp::Tensor<float> c = sp::Tensor<float>::full({40, 7}, sentinel<float>());
};

}  // namespace

// --- element types -------------------------------------------------------------------------

TEST_CASE("a type-erased argument with the wrong element type is a DTypeError", "[error][dtype]") {
  Fixture f;
  const auto ad = sp::Csr<double>::random(40, 40, 4, 904);
  const auto before_a = snapshot(ad), before_y = snapshot(f.y);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(Erased{ad.storage()}, f.x, f.y), sp::DTypeError,
                       "holds f64 values but the buffer is declared f32");
  const auto xd = sp::Tensor<double>::random({40}, 905);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, Erased{xd.storage()}, f.y), sp::DTypeError,
                       "holds f64 values but the buffer is declared f32");
  CHECK(snapshot(ad) == before_a);
  CHECK(snapshot(f.y) == before_y);
}

TEST_CASE("indices of the wrong integer type are a DTypeError", "[error][dtype]") {
  Fixture f;
  const sp::Csr<float, std::int64_t> a64(f.a.rows(), f.a.cols(),
                                         std::vector<std::int64_t>(f.a.indptr().begin(), f.a.indptr().end()),
                                         std::vector<std::int64_t>(f.a.indices().begin(), f.a.indices().end()),
                                         std::vector<float>(f.a.values().begin(), f.a.values().end()));
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(a64, f.x, f.y), sp::DTypeError,
                       "stores the indices of axis J as i64 but the axis is declared i32");
  SPINDLE_EXPECT_ERROR((sp::ops::spmv<float, sp::ops::J64>()(f.a, f.x, f.y)), sp::DTypeError,
                       "stores the indices of axis J as i32 but the axis is declared i64");
  CHECK(snapshot(f.y) == snapshot(sp::Tensor<float>::full({40}, sentinel<float>())));
}

TEST_CASE("a scalar where a buffer is expected is a UserError", "[error][arguments]") {
  Fixture f;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, 1.0f, f.y), sp::UserError,
                       "must be a tensor or sparse matrix, got a scalar");
  CHECK(snapshot(f.y) == snapshot(sp::Tensor<float>::full({40}, sentinel<float>())));
}

// --- shapes --------------------------------------------------------------------------------

TEST_CASE("rows of A differ from rows of C: ShapeError on axis I", "[error][shape]") {
  Fixture f;
  auto c = sp::Tensor<float>::full({41, 7}, sentinel<float>());
  const auto before = snapshot(c);
  SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(f.a, f.b, c), sp::ShapeError, "axis I has extent 40");
  CHECK(snapshot(c) == before);
}

TEST_CASE("columns of A differ from rows of B: ShapeError on axis J", "[error][shape]") {
  Fixture f;
  const auto b = sp::Tensor<float>::random({39, 7}, 906);
  const auto before = snapshot(f.c);
  SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(f.a, b, f.c), sp::ShapeError, "axis J has extent 40");
  const auto x = sp::Tensor<float>::random({41}, 907);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, x, f.y), sp::ShapeError, "axis J has extent 40");
  CHECK(snapshot(f.c) == before);
}

TEST_CASE("feature sizes of B and C differ: ShapeError on axis K", "[error][shape]") {
  Fixture f;
  auto c = sp::Tensor<float>::full({40, 8}, sentinel<float>());
  const auto before = snapshot(c);
  SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(f.a, f.b, c), sp::ShapeError, "axis K has extent 7");
  CHECK(snapshot(c) == before);
  // The same with Eigen types
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::SparseMatrix<float, Eigen::RowMajor, int> ea = sp::to_eigen(f.a);
  const RowMat eb = RowMat::Random(40, 7);
  RowMat ec = RowMat::Constant(40, 6, sentinel<float>());
  SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(ea, eb, ec), sp::ShapeError, "axis K has extent 7");
  CHECK((ec.array() == sentinel<float>()).all());
}

TEST_CASE("the sddmm features disagree with the matrix: ShapeError", "[error][shape]") {
  Fixture f;
  const auto x = sp::Tensor<float>::random({40, 16}, 908);
  const auto y = sp::Tensor<float>::random({40, 15}, 909);
  auto c = sp::Csr<float>(40, 40, std::vector<int>(f.a.indptr().begin(), f.a.indptr().end()),
                          std::vector<int>(f.a.indices().begin(), f.a.indices().end()),
                          std::vector<float>(static_cast<std::size_t>(f.a.nnz()), sentinel<float>()));
  const auto before = snapshot(c);
  SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, y, c), sp::ShapeError, "axis K has extent 16");
  CHECK(snapshot(c) == before);
}

// --- levels --------------------------------------------------------------------------------

TEST_CASE("a tensor with the wrong number of levels is a ShapeError", "[error][levels]") {
  Fixture f;
  const auto before = snapshot(f.y);
  // 1-D tensor where the 2-level sparse matrix goes
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.x, f.x, f.y), sp::ShapeError,
                       "has 1 level(s) but buffer 'a' has 2 axes");
  // a CSR where the dense vector goes
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, f.a, f.y), sp::ShapeError,
                       "has 2 level(s) but buffer 'b' has 1 axes");
  // a 3-level CSF where a CSR goes
  const auto csf = sp::Csf<float>::random({40, 40, 3}, 0.05, 910);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(csf, f.x, f.y), sp::ShapeError,
                       "has 3 level(s) but buffer 'a' has 2 axes");
  CHECK(snapshot(f.y) == before);
}

TEST_CASE("a dense matrix where a sparse buffer is expected is a ShapeError (level kind)", "[error][levels]") {
  Fixture f;
  const auto dense = f.a.to_dense();  // 2 levels, both dense_fixed
  const auto before = snapshot(f.y);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(dense, f.x, f.y), sp::ShapeError,
                       "level 1 is dense_fixed but axis J is sparse_variable");
  CHECK(snapshot(f.y) == before);
}

TEST_CASE("a sparse level kind mismatch is a ShapeError", "[error][levels]") {
  Fixture f;
  // a ragged (dense_variable) second level where a compressed (sparse_variable) one goes
  const auto ragged = sp::Ragged<float>::random({3, 0, 5}, {}, 911);
  auto y = sp::Tensor<float>::full({3}, sentinel<float>());
  const auto before = snapshot(y);
  SPINDLE_EXPECT_ERROR(sp::ops::row_sum<float>()(ragged, y), sp::ShapeError,
                       "level 1 is dense_variable but axis J is sparse_variable");
  CHECK(snapshot(y) == before);
  // a CSF (compressed second level) where the ragged batch goes
  const auto csf = sp::Csf<float>::random({2, 5, 4}, 0.3, 912);
  const auto w = sp::Tensor<float>::random({2, 4, 3}, 913);
  auto c = sp::Ragged<float>::zeros({5, 5}, {3});
  for (float& v : c.values()) v = sentinel<float>();
  const auto before_c = snapshot(c);
  SPINDLE_EXPECT_ERROR(sp::ops::ragged_matmul<float>()(csf, w, c), sp::ShapeError,
                       "level 1 is sparse_variable but axis R is dense_variable");
  CHECK(snapshot(c) == before_c);
}

// --- counts and structure -------------------------------------------------------------------

TEST_CASE("a value count that does not match the structure is a ShapeError", "[error][nnz]") {
  Fixture f;
  sp::StorageView v = f.a.storage();
  v.value_count -= 1;
  const auto before = snapshot(f.y);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(Erased{v}, f.x, f.y), sp::ShapeError,
                       "values but its structure has");
  sp::StorageView t = f.x.storage();
  t.value_count += 1;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, Erased{t}, f.y), sp::ShapeError, "values but its structure has");
  CHECK(snapshot(f.y) == before);
}

TEST_CASE("an output whose sparsity structure differs from the input's is a ShapeError", "[error][nnz]") {
  Fixture f;
  const auto x = sp::Tensor<float>::random({40, 4}, 914);
  const auto y = sp::Tensor<float>::random({40, 4}, 915);
  SECTION("different nnz") {
    auto c = sp::Csr<float>::random(40, 40, 5, 916);
    for (float& v : c.values()) v = sentinel<float>();
    const auto before = snapshot(c);
    SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, y, c), sp::ShapeError,
                         "share axis J but their arguments have different sparsity structure");
    CHECK(snapshot(c) == before);
  }
  SECTION("same nnz and indptr, different column indices") {
    std::vector<int> idx(f.a.indices().begin(), f.a.indices().end());
    std::size_t r = 0;  // the first non-empty row
    while (f.a.indptr()[r + 1] == f.a.indptr()[r]) ++r;
    int& last = idx[static_cast<std::size_t>(f.a.indptr()[r + 1] - 1)];
    last = last == 39 ? 38 : 39;  // still in range; the row may now be unsorted
    sp::Csr<float> c(40, 40, std::vector<int>(f.a.indptr().begin(), f.a.indptr().end()), idx,
                     std::vector<float>(static_cast<std::size_t>(f.a.nnz()), sentinel<float>()));
    const auto before = snapshot(c);
    SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, y, c), sp::ShapeError, "different sparsity structure");
    CHECK(snapshot(c) == before);
  }
}

// --- sortedness -----------------------------------------------------------------------------

TEST_CASE("unsorted indices where the kernel binary-searches them are a FormatError", "[error][sorted]") {
  Fixture f;
  sp::RandomCsrOptions o;
  o.shuffle_rows = true;
  const auto unsorted = sp::Csr<float>::random(40, 40, 8, 917, o);
  REQUIRE_FALSE(unsorted.sorted());  // Csr keeps the caller's order and records it
  const auto before_c = snapshot(f.c), before_a = snapshot(unsorted);
  SPINDLE_EXPECT_ERROR(sp::ops::spmm_dense_j<float>()(unsorted, f.b, f.c), sp::FormatError,
                       "searches or merges the coordinates of axis J (binary search, co-iteration)");
  // the same through a CsrView over raw arrays: row 0 is {3, 1}
  const std::vector<int> ptr{0, 2, 3}, idx{3, 1, 0};
  std::vector<float> val{1, 2, 3};
  const sp::CsrView<float> view(2, 4, 3, ptr.data(), idx.data(), val.data());
  REQUIRE_FALSE(view.sorted());
  const auto b = sp::Tensor<float>::random({4, 2}, 918);
  auto c = sp::Tensor<float>::full({2, 2}, sentinel<float>());
  SPINDLE_EXPECT_ERROR(sp::ops::spmm_dense_j<float>()(view, b, c), sp::FormatError, "not sorted");
  CHECK(snapshot(c) == snapshot(sp::Tensor<float>::full({2, 2}, sentinel<float>())));
  CHECK(snapshot(f.c) == before_c);
  CHECK(snapshot(unsorted) == before_a);
  CHECK(val == std::vector<float>{1, 2, 3});

  // Control: spmm does not search, so the same unsorted matrix is fine there.
  sp::ops::spmm<float>()(unsorted, f.b, f.c);
  const auto dense = unsorted.to_dense();
  for (std::int64_t i = 0; i < 40; ++i)
    for (std::int64_t k = 0; k < 7; ++k) {
      double s = 0;
      for (std::int64_t j = 0; j < 40; ++j) s += static_cast<double>(dense(i, j)) * f.b(j, k);
      CHECK(f.c(i, k) == Approx(s).margin(1e-5));
    }
}

// A merge (union_of / intersection_of) walks each fiber in coordinate order: an unsorted
// fiber would give a coordinate twice or miss it, so it is a FormatError before anything is
// written (found on 2026-11-28: sparse_add of an unsorted Csr returned row {0, 2, 0}).
TEST_CASE("unsorted indices of a co-iterated operand are a FormatError", "[error][sorted][coiteration]") {
  // row 0 of `unsorted` stores columns {2, 0}
  const sp::Csr<float> unsorted(2, 3, std::vector<int>{0, 2, 3}, std::vector<int>{2, 0, 1}, std::vector<float>{1, 2, 3});
  const sp::Csr<float> sorted(2, 3, std::vector<int>{0, 2, 3}, std::vector<int>{0, 2, 1}, std::vector<float>{10, 20, 30});
  REQUIRE_FALSE(unsorted.sorted());
  const auto before = snapshot(unsorted);
  // Assembled outputs (the append case of assemble_rows): the output keeps its old pattern.
  sp::Csr<float> c(2, 3, std::vector<int>{0, 1, 1}, std::vector<int>{1}, std::vector<float>{sentinel<float>()});
  const auto before_c = snapshot(c);
  SPINDLE_EXPECT_ERROR(sp::ops::sparse_add<float>()(unsorted, sorted, 1.0f, 1.0f, c), sp::FormatError,
                       "merges the coordinates of axis J");
  SPINDLE_EXPECT_ERROR(sp::ops::sparse_add<float>()(sorted, unsorted, 1.0f, 1.0f, c), sp::FormatError, "not sorted");
  SPINDLE_EXPECT_ERROR(sp::ops::sparse_multiply<float>()(sorted, unsorted, c), sp::FormatError, "not sorted");
  CHECK(snapshot(c) == before_c);
  // A merge into a dense output (no assembly): the dot of each row pair on the intersection.
  struct I : sp::dense_fixed {};
  struct J : sp::sparse_variable<I> {};
  struct J2 : sp::sparse_variable<I>, sp::coordinates_of<J> {};
  using X = sp::intersection_of<J, J2>;
  const auto dot = sp::kernel("rowdot", [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I> y,
                                           sp::iter<I> i) {
    sp::for_each<X>([&](sp::iter<X> j) { y(i) += a(i, j) * b(i, j); });
  });
  auto y = sp::Tensor<float>::full({2}, sentinel<float>());
  SPINDLE_EXPECT_ERROR(dot(unsorted, sorted, y), sp::FormatError, "not sorted");
  CHECK(snapshot(y) == snapshot(sp::Tensor<float>::full({2}, sentinel<float>())));
  CHECK(snapshot(unsorted) == before);
  // Control: sorted operands.
  dot(sorted, sorted, y);
  CHECK(y(0) == 10.0f * 10.0f + 20.0f * 20.0f);
  CHECK(y(1) == 30.0f * 30.0f);
  const sp::Csr<float> ok = unsorted.canonical();
  sp::ops::sparse_multiply<float>()(ok, sorted, c);
  CHECK(c.nnz() == 3);
  CHECK(c.values()[0] == 2.0f * 10.0f);  // column 0 of row 0
}

// --- writability and aliasing ---------------------------------------------------------------

TEST_CASE("a read-only argument for an `out` buffer is a UserError", "[error][readonly]") {
  Fixture f;
  const auto y = sp::Tensor<float>::full({40}, sentinel<float>());
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, f.x, y), sp::UserError,
                       "is written by the kernel but was passed read-only");
  CHECK(snapshot(y) == snapshot(sp::Tensor<float>::full({40}, sentinel<float>())));
  // const Eigen output
  using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMat ec = RowMat::Constant(40, 7, sentinel<float>());
  SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(f.a, f.b, ec), sp::UserError, "passed read-only");
  CHECK((ec.array() == sentinel<float>()).all());
  // const sparse output of sddmm
  const auto x = sp::Tensor<float>::random({40, 3}, 919);
  const sp::Csr<float> c(40, 40, std::vector<int>(f.a.indptr().begin(), f.a.indptr().end()),
                         std::vector<int>(f.a.indices().begin(), f.a.indices().end()),
                         std::vector<float>(static_cast<std::size_t>(f.a.nnz()), sentinel<float>()));
  const auto before = snapshot(c);
  SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, x, c), sp::UserError, "passed read-only");
  CHECK(snapshot(c) == before);
}

TEST_CASE("an output that aliases an input is a UserError", "[error][alias]") {
  Fixture f;
  SECTION("spmm writing into its own dense input") {
    auto b = sp::Tensor<float>::random({40, 7}, 920);
    const auto before = snapshot(b);
    SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(f.a, b, b.view()), sp::UserError, "overlaps");
    CHECK(snapshot(b) == before);
  }
  SECTION("a partial overlap: the output view starts inside the input") {
    std::vector<float> buf(40 * 7 + 7, 0.5f);
    sp::TensorView<float> in(buf.data(), {40, 7});
    sp::TensorView<float> out(buf.data() + 7, {40, 7});
    const std::vector<float> before = buf;
    SPINDLE_EXPECT_ERROR(sp::ops::spmm<float>()(f.a, in, out), sp::UserError, "overlaps");
    CHECK(buf == before);
  }
  SECTION("sddmm writing into the values of its sparse input") {
    auto a = f.a;
    const auto x = sp::Tensor<float>::random({40, 3}, 921);
    const auto before = snapshot(a);
    SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(a, x, x, a), sp::UserError, "overlaps");
    CHECK(snapshot(a) == before);
  }
}

// --- aliasing of written values with any array of the call -----------------------------------
//
// The values an out/inout argument receives must not overlap another argument's values, nor
// any indptr/indices array (of any argument, its own included); read-only arrays may be
// shared. The arguments below are StorageViews pointed into other arguments' arrays (the
// binder compares addresses only; the kernel never runs), and each test checks that the
// bytes behind every argument are what they were before the call.

namespace {

// Raw CSR arrays owned by the test (a copy of the fixture's matrix), so that views can point
// anywhere into them.
struct RawCsr {
  std::int64_t rows = 0, cols = 0, nnz = 0;
  std::vector<int> ptr, idx;
  std::vector<float> val;
  explicit RawCsr(const sp::Csr<float>& a)
      : rows(a.rows()), cols(a.cols()), nnz(a.nnz()), ptr(a.indptr().begin(), a.indptr().end()),
        idx(a.indices().begin(), a.indices().end()), val(a.values().begin(), a.values().end()) {}
  sp::CsrView<float> view() { return sp::CsrView<float>(rows, cols, nnz, ptr.data(), idx.data(), val.data()); }
  std::vector<unsigned char> bytes() const {
    auto b = bytes_of(std::span<const int>(ptr));
    auto i = bytes_of(std::span<const int>(idx));
    auto v = bytes_of(std::span<const float>(val));
    b.insert(b.end(), i.begin(), i.end());
    b.insert(b.end(), v.begin(), v.end());
    return b;
  }
};

// A writable argument whose values live at `data` (any array of the test) and whose shape
// and structure are those of `like`.
sp::StorageView writable_at(sp::StorageView like, void* data) {
  like.data = data;
  like.writable = true;
  like.kind = "TensorView";
  return like;
}

}  // namespace

TEST_CASE("an output whose values are an input's indptr array is a UserError", "[error][alias][binding]") {
  Fixture f;
  RawCsr a(f.a);
  REQUIRE(a.ptr.size() * sizeof(int) >= 40 * sizeof(float));
  const auto before = a.bytes();
  // y (40 floats) written over the 41 row pointers of a: would corrupt a's structure
  const Erased y{writable_at(f.y.storage(), a.ptr.data())};
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(a.view(), f.x, y), sp::UserError,
                       "output argument 2 ('c') overlaps input argument 0 ('a') in memory");
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(a.view(), f.x, y), sp::UserError,
                       "its values share 160 byte(s) with the indptr of axis J of 'a'; writing them would corrupt "
                       "the sparsity structure of 'a'");
  // the same over a's column indices, starting in the middle of them
  const Erased y2{writable_at(f.y.storage(), a.idx.data() + 10)};
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(a.view(), f.x, y2), sp::UserError,
                       "with the indices of axis J of 'a'");
  CHECK(a.bytes() == before);  // the output's bytes are a's arrays: untouched
  CHECK(snapshot(f.y) == snapshot(sp::Tensor<float>::full({40}, sentinel<float>())));
}

TEST_CASE("an output whose values are its own indices array is a UserError", "[error][alias][binding]") {
  Fixture f;
  const auto x = sp::Tensor<float>::random({40, 3}, 922);
  RawCsr c(f.a);  // same structure as a, its own arrays
  REQUIRE(c.idx.size() == c.val.size());
  const auto before = c.bytes(), before_a = snapshot(f.a);
  // c's values pointer aliases c's own column indices (nnz ints == nnz floats)
  const Erased out{writable_at(c.view().storage(), c.idx.data())};
  SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, x, out), sp::UserError,
                       "output argument 3 ('d') overlaps itself in memory");
  SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, x, out), sp::UserError,
                       "with its own indices of axis J; writing them would corrupt its own sparsity structure");
  // and over its own indptr
  const Erased out2{writable_at(c.view().storage(), c.ptr.data())};
  SPINDLE_EXPECT_ERROR(sp::ops::sddmm<float>()(f.a, x, x, out2), sp::UserError, "with its own indptr of axis J");
  CHECK(c.bytes() == before);
  CHECK(snapshot(f.a) == before_a);
}

TEST_CASE("an output partially overlapping an input's values is a UserError", "[error][alias][binding]") {
  Fixture f;
  // one block: a's values, then room for y; y starts 3 values before their end
  const std::size_t nnz = static_cast<std::size_t>(f.a.nnz());
  std::vector<float> block(nnz + 40, sentinel<float>());
  std::copy(f.a.values().begin(), f.a.values().end(), block.begin());
  const sp::CsrView<float> a(40, 40, f.a.nnz(), f.a.indptr().data(), f.a.indices().data(), block.data());
  sp::TensorView<float> y(block.data() + nnz - 3, {40});
  const std::vector<float> before = block;
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(a, f.x, y), sp::UserError,
                       "output argument 2 ('c') overlaps input argument 0 ('a') in memory: its values share 12 "
                       "byte(s) with the values of 'a'");
  CHECK(block == before);
  // one value further on, the two ranges only touch: fine (and y gets A x)
  sp::TensorView<float> y_after(block.data() + nnz, {40});
  sp::ops::spmv<float>()(a, f.x, y_after);
  CHECK(std::equal(block.begin(), block.begin() + static_cast<std::ptrdiff_t>(nnz), f.a.values().begin()));
  const auto dense = f.a.to_dense();
  for (std::int64_t i = 0; i < 40; ++i) {
    double s = 0;
    for (std::int64_t j = 0; j < 40; ++j) s += static_cast<double>(dense(i, j)) * f.x(j);
    CHECK(y_after.data()[i] == Approx(s).margin(1e-5));
  }
}

TEST_CASE("two outputs whose values overlap are a UserError", "[error][alias][binding]") {
  using sp::ops::I;
  auto two = sp::kernel("two_outputs", [](sp::in<float, I> x, sp::out<float, I> y, sp::out<float, I> z,
                                          sp::iter<I> i) {
    y(i) = x(i);
    z(i) = x(i) * 2.0f;
  });
  const auto x = sp::Tensor<float>::random({40}, 923);
  std::vector<float> block(60, sentinel<float>());
  sp::TensorView<float> y(block.data(), {40}), z(block.data() + 20, {40});
  const std::vector<float> before = block;
  const auto before_x = snapshot(x);
  SPINDLE_EXPECT_ERROR(two(x, y, z), sp::UserError,
                       "output argument 1 ('b') overlaps output argument 2 ('c') in memory");
  SPINDLE_EXPECT_ERROR(two(x, y, z), sp::UserError,
                       "its values share 80 byte(s) with the values of 'c'; two written arguments must not share");
  // the same output passed twice
  SPINDLE_EXPECT_ERROR(two(x, y, y), sp::UserError, "output argument 1 ('b') overlaps output argument 2 ('c')");
  CHECK(block == before);
  CHECK(snapshot(x) == before_x);
  // disjoint outputs in one block: fine
  sp::TensorView<float> z_after(block.data() + 40, {20});
  auto x20 = sp::Tensor<float>::random({20}, 924);
  sp::TensorView<float> y20(block.data() + 20, {20});
  two(x20, y20, z_after);
  for (std::size_t i = 0; i < 20; ++i) {
    CHECK(block[20 + i] == x20.values()[i]);
    CHECK(block[40 + i] == 2.0f * x20.values()[i]);
    CHECK(block[i] == sentinel<float>());
  }
}

TEST_CASE("an inout argument aliasing an input's values is a UserError", "[error][alias][binding]") {
  using sp::ops::I;
  using sp::ops::J;
  Fixture f;
  auto acc = sp::kernel("spmv_acc", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::inout<float, I> y,
                                       sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  auto x = sp::Tensor<float>::random({40}, 925);
  const auto before_x = snapshot(x), before_a = snapshot(f.a);
  SPINDLE_EXPECT_ERROR(acc(f.a, x, x.view()), sp::UserError,
                       "inout argument 2 ('c') overlaps input argument 1 ('b') in memory: its values share 160 "
                       "byte(s) with the values of 'b'");
  // an inout over the values of the sparse input
  RawCsr a(f.a);
  const auto before_raw = a.bytes();
  const Erased y{writable_at(f.y.storage(), a.val.data())};
  SPINDLE_EXPECT_ERROR(acc(a.view(), x, y), sp::UserError,
                       "inout argument 2 ('c') overlaps input argument 0 ('a')");
  CHECK(snapshot(x) == before_x);
  CHECK(snapshot(f.a) == before_a);
  CHECK(a.bytes() == before_raw);
}

TEST_CASE("inputs and outputs may share indptr and indices arrays", "[error][alias][binding]") {
  using sp::ops::I;
  using sp::ops::J;
  Fixture f;
  // two sparse inputs over the very same structure arrays, different values
  auto dot = sp::kernel("row_dot", [](sp::in<float, I, J> a, sp::in<float, I, J> b, sp::out<float, I> y,
                                      sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * b(i, j); });
  std::vector<float> bval(static_cast<std::size_t>(f.a.nnz()));
  for (std::size_t k = 0; k < bval.size(); ++k) bval[k] = 0.25f * static_cast<float>(k % 7) - 0.5f;
  const sp::CsrView<const float> b(40, 40, f.a.nnz(), f.a.indptr().data(), f.a.indices().data(), bval.data());
  const auto before_a = snapshot(f.a);
  REQUIRE_NOTHROW(dot(f.a, b, f.y));
  for (std::int64_t i = 0; i < 40; ++i) {
    double s = 0;
    for (auto k = f.a.indptr()[static_cast<std::size_t>(i)]; k < f.a.indptr()[static_cast<std::size_t>(i) + 1]; ++k)
      s += static_cast<double>(f.a.values()[static_cast<std::size_t>(k)]) * bval[static_cast<std::size_t>(k)];
    CHECK(f.y(i) == Approx(s).margin(1e-5));
  }
  // an sddmm output sharing a's structure arrays (its own values): fine too
  const auto x = sp::Tensor<float>::random({40, 3}, 926);
  std::vector<float> cval(static_cast<std::size_t>(f.a.nnz()), sentinel<float>());
  const sp::CsrView<float> c(40, 40, f.a.nnz(), f.a.indptr().data(), f.a.indices().data(), cval.data());
  REQUIRE_NOTHROW(sp::ops::sddmm<float>()(f.a, x, x, c));
  const auto dense = f.a.to_dense();
  for (std::int64_t i = 0; i < 40; ++i)
    for (auto k = f.a.indptr()[static_cast<std::size_t>(i)]; k < f.a.indptr()[static_cast<std::size_t>(i) + 1]; ++k) {
      const std::int64_t j = f.a.indices()[static_cast<std::size_t>(k)];
      double s = 0;
      for (std::int64_t q = 0; q < 3; ++q) s += static_cast<double>(x(i, q)) * x(j, q);
      CHECK(cval[static_cast<std::size_t>(k)] == Approx(dense(i, j) * s).margin(1e-5));
    }
  CHECK(snapshot(f.a) == before_a);
}

TEST_CASE("device arguments get the same aliasing check on device addresses", "[error][alias][binding]") {
  // A GPU binder over device-flagged views: addresses are compared, never dereferenced, so
  // host arrays stand in for device memory here.
  const auto kernel = sp::ops::spmv<float>();
  sp::driver::PipelineOptions o;
  o.context.kernel = kernel.name();
  const auto prepared = sp::driver::lower_for_cuda(kernel.ir(), o);
  const sp::runtime::ArgBinder binder(prepared.stage1, prepared.unscheduled, /*device=*/true);
  std::vector<void*> bufs(prepared.unscheduled.buffers.size());
  std::vector<std::int64_t> scalars(prepared.unscheduled.scalars.size());
  Fixture f;
  auto on_device = [](sp::StorageView v) {
    v.on_device = true;
    return v;
  };
  std::vector<sp::runtime::CallArg> call(3);
  call[0].view = on_device(f.a.storage());
  call[1].view = on_device(f.x.storage());
  call[2].view = on_device(f.y.storage());
  REQUIRE_NOTHROW(binder.bind(call, bufs.data(), scalars.data()));
  call[2].view.data = const_cast<int*>(f.a.indptr().data());
  SPINDLE_EXPECT_ERROR(binder.bind(call, bufs.data(), scalars.data()), sp::UserError,
                       "output argument 2 ('c') overlaps input argument 0 ('a') in memory: its values share 160 "
                       "byte(s) with the indptr of axis J of 'a'");
  // x and c in one allocation, c starting at x's last entry: they share exactly 4 bytes and
  // nothing else lies under c, whatever the heap put after x (a's indptr, in one build).
  std::vector<float> block(2 * 40 - 1);
  call[1].view.data = block.data();
  call[2].view.data = block.data() + 39;
  SPINDLE_EXPECT_ERROR(binder.bind(call, bufs.data(), scalars.data()), sp::UserError,
                       "its values share 4 byte(s) with the values of 'b'");
}

// --- runtime configuration ----------------------------------------------------------------

TEST_CASE("an unknown engine name is a UserError", "[error][engine]") {
  Fixture f;
  sp::Options o = sp::Options::from_env();
  o.engine = "no-such-engine";
  sp::runtime::Runtime rt(o);
  const auto k = sp::ops::spmv<float>().with_runtime(rt);
  const auto before = snapshot(f.y);
  SPINDLE_EXPECT_ERROR(k(f.a, f.x, f.y), sp::UserError, "unknown engine 'no-such-engine'");
  CHECK(snapshot(f.y) == before);
}

#ifndef SPINDLE_WITH_ORC
TEST_CASE("asking for the ORC engine in a build without LLVM is an UnavailableError", "[error][engine]") {
  Fixture f;
  sp::Options o = sp::Options::from_env();
  o.engine = "orc";
  sp::runtime::Runtime rt(o);
  const auto before = snapshot(f.y);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>().with_runtime(rt)(f.a, f.x, f.y), sp::UnavailableError,
                       "has no LLVM");
  CHECK(snapshot(f.y) == before);
}
#endif

TEST_CASE("messages name Eigen arguments after their temporary views are gone", "[error][eigen]") {
  // storage_of(Eigen matrix) builds a temporary CsrView; the error message is formatted later
  // and must not read that view's memory (the sanitizer build checks this).
  Fixture f;
  Eigen::SparseMatrix<float, Eigen::RowMajor, int> ea = sp::to_eigen(f.a);
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, ea, f.y), sp::ShapeError,
                       "(CsrView<f32,i32> 40x40 nnz=");
  SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(f.a, ea, f.y), sp::ShapeError, "'Eigen::SparseMatrix')");
  CHECK(snapshot(f.y) == snapshot(sp::Tensor<float>::full({40}, sentinel<float>())));
}

namespace {
// An allocator that has no memory to give: what a Csr's arrays meet when an assembled output
// is larger than memory.
template <class T>
struct NoMemory {
  using value_type = T;
  NoMemory() = default;
  template <class U>
  NoMemory(const NoMemory<U>&) {}
  T* allocate(std::size_t) { throw std::bad_alloc(); }
  void deallocate(T*, std::size_t) {}
  bool operator==(const NoMemory&) const { return true; }
};
}  // namespace

TEST_CASE("an assembled output larger than memory is a ResourceError naming its entries and bytes",
          "[error][resource]") {
  std::vector<std::int32_t, NoMemory<std::int32_t>> indices;
  std::vector<float, NoMemory<float>> values;
  SPINDLE_EXPECT_ERROR(sp::detail::allocate_assembled("Csr", 1000000000, indices, values), sp::ResourceError,
                       "the assembled Csr has 1000000000 entries; cannot allocate their 8 GB");
  CHECK(indices.empty());
  CHECK(values.empty());
}
