// Matrix Market reading of every variant (plain and gzip temp files), malformed input, and
// writing round trips.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "format_test_util.hpp"
#include "spindle/format/matrix_market.hpp"

using namespace spindle;
using Catch::Matchers::Contains;
using spindle_format_test::TempFile;

namespace {

const char* kGeneralReal =
    "%%MatrixMarket matrix coordinate real general\n"
    "% a comment\n"
    "%\n"
    "3 4 5\n"
    "1 1 1.5\n"
    "3 4 -2e1\n"
    "2 2 3\n"
    "1 1 0.5\n"  // duplicate: summed
    "3 1 +4.25\n";

// Reads `text` through a temp file, plain or gzip according to the GENERATE'd flag.
template <class T, class Index = std::int32_t>
Csr<T, Index> read_text(const std::string& text, bool gzip, const char* suffix = ".mtx") {
  TempFile f(gzip ? std::string(suffix) + ".gz" : suffix);
  f.write(text, gzip);
  return read_matrix_market<T, Index>(f.path());
}

std::string error_of(const std::string& text) {
  TempFile f(".mtx");
  f.write(text);
  try {
    read_matrix_market<double>(f.path());
  } catch (const FormatError& e) {
    const std::string what = e.what();
    // Strip the temp path so the tests can match "file:line" by the line part.
    const auto colon = what.find(".mtx:");
    return colon == std::string::npos ? what : what.substr(colon + 4);
  }
  return "no error";
}

}  // namespace

TEST_CASE("Matrix Market general real, plain and gzip", "[format]") {
  const bool gzip = GENERATE(false, true);
  auto a = read_text<double>(kGeneralReal, gzip);
  CHECK(a.rows() == 3);
  CHECK(a.cols() == 4);
  CHECK(a.nnz() == 4);
  CHECK(a.sorted());
  const auto d = a.to_dense();
  CHECK(d(0, 0) == 2.0);
  CHECK(d(2, 3) == -20.0);
  CHECK(d(1, 1) == 3.0);
  CHECK(d(2, 0) == 4.25);
}

TEST_CASE("Matrix Market fields and symmetries", "[format]") {
  const bool gzip = GENERATE(false, true);
  SECTION("pattern reads as ones") {
    auto a = read_text<float>("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n1 3\n2 1\n",
                              gzip);
    CHECK(a.nnz() == 2);
    CHECK(a.to_dense()(0, 2) == 1.0f);
    CHECK(a.to_dense()(1, 0) == 1.0f);
  }
  SECTION("integer into int and float") {
    const char* text = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 -7\n2 2 9\n";
    auto i = read_text<std::int32_t>(text, gzip);
    CHECK(i.to_dense()(0, 0) == -7);
    auto f = read_text<float, std::int64_t>(text, gzip);
    CHECK(f.to_dense()(1, 1) == 9.0f);
  }
  SECTION("double is an alias of real") {
    auto a = read_text<double>("%%MatrixMarket matrix coordinate double general\n1 1 1\n1 1 0.25\n",
                               gzip);
    CHECK(a.values()[0] == 0.25);
  }
  SECTION("symmetric mirrors off-diagonal entries") {
    auto a = read_text<double>(
        "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 1\n2 1 2\n3 2 3\n", gzip);
    CHECK(a.nnz() == 5);
    CHECK(a.to_dense()(0, 1) == 2.0);
    CHECK(a.to_dense()(1, 0) == 2.0);
    CHECK(a.to_dense()(1, 2) == 3.0);
    CHECK(a.to_dense()(0, 0) == 1.0);
  }
  SECTION("skew-symmetric mirrors with a sign") {
    auto a = read_text<double>(
        "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 5\n", gzip);
    CHECK(a.to_dense()(1, 0) == 5.0);
    CHECK(a.to_dense()(0, 1) == -5.0);
  }
  SECTION("symmetric pattern") {
    auto a = read_text<float>(
        "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n", gzip);
    CHECK(a.nnz() == 3);
  }
  SECTION("banner case, CRLF, blank lines, empty matrix") {
    auto a = read_text<float>(
        "%%matrixmarket MATRIX Coordinate Real General\r\n%c\r\n\r\n2 2 1\r\n2 2 3\r\n\r\n", gzip);
    CHECK(a.to_dense()(1, 1) == 3.0f);
    auto e = read_text<float>("%%MatrixMarket matrix coordinate real general\n0 0 0\n", gzip);
    CHECK(e.rows() == 0);
    CHECK(e.nnz() == 0);
    auto n = read_text<float>("%%MatrixMarket matrix coordinate real general\n5 7 0", gzip);
    CHECK(n.cols() == 7);
    CHECK(n.nnz() == 0);
  }
}

TEST_CASE("Matrix Market gzip is detected by magic bytes, not by extension", "[format]") {
  TempFile gz_named_plain(".mtx");
  gz_named_plain.write(kGeneralReal, true);  // gzip content, .mtx name
  CHECK(read_matrix_market<double>(gz_named_plain.path()).nnz() == 4);
  TempFile plain_named_gz(".mtx.gz");
  plain_named_gz.write(kGeneralReal, false);  // plain content, .gz name
  CHECK(read_matrix_market<double>(plain_named_gz.path()).nnz() == 4);
}

TEST_CASE("Matrix Market triplets keep file order and duplicates", "[format]") {
  TempFile f(".mtx");
  f.write("%%MatrixMarket matrix coordinate integer general\n3 3 3\n1 2 7\n1 2 8\n3 1 1\n");
  const auto t = read_matrix_market_triplets<std::int64_t>(f.path());
  CHECK(t.header.rows == 3);
  CHECK(t.header.entries == 3);
  CHECK(t.header.field == MmField::integer);
  REQUIRE(t.entries.size() == 3);
  CHECK(t.entries[0] == Triplet<std::int64_t>{0, 1, 7});
  CHECK(t.entries[1] == Triplet<std::int64_t>{0, 1, 8});
  CHECK(t.entries[2] == Triplet<std::int64_t>{2, 0, 1});
  const auto s = parse_matrix_market_triplets<float>(
      "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n2 1 4\n", "mem");
  CHECK(s.header.symmetry == MmSymmetry::symmetric);
  CHECK(s.entries.size() == 2);
}

TEST_CASE("Matrix Market malformed input names file and line", "[format]") {
  const std::string banner = "%%MatrixMarket matrix coordinate real general\n";
  CHECK_THAT(error_of("%%MatrixMarkt matrix coordinate real general\n1 1 0\n"),
             Contains(":1: not a Matrix Market file"));
  CHECK_THAT(error_of(""), Contains(":0: empty file"));
  CHECK_THAT(error_of("%%MatrixMarket vector coordinate real general\n"),
             Contains(":1: unsupported object 'vector'"));
  CHECK_THAT(error_of("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n"),
             Contains(":1: 'array' (dense) Matrix Market files are not supported"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate complex general\n"),
             Contains(":1: unsupported field 'complex'"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate real hermitian\n"),
             Contains(":1: unsupported symmetry 'hermitian'"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate pattern skew-symmetric\n"),
             Contains(":1: a pattern file cannot be skew-symmetric"));
  CHECK_THAT(error_of(banner + "% only comments\n"),
             Contains(":2: missing size line 'rows cols entries' (end of file)"));
  CHECK_THAT(error_of(banner + "3 x 2\n"), Contains(":2: bad size line"));
  CHECK_THAT(error_of(banner + "3 3\n"), Contains(":2: bad size line"));
  CHECK_THAT(error_of(banner + "3 -3 1\n"), Contains(":2: bad size line"));
  CHECK_THAT(error_of(banner + "3 3 1 4\n"), Contains(":2: bad size line: unexpected text"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate real symmetric\n3 4 0\n"),
             Contains(":2: symmetric matrix must be square, got 3x4"));
  CHECK_THAT(error_of(banner + "3 3 3\n1 1 1\n2 2 2\n"),
             Contains(":4: expected 3 entries, found 2 (end of file)"));
  CHECK_THAT(error_of(banner + "3 3 1\n1 1 1\n2 2 2\n"),
             Contains(":4: more entries than the 1 declared in the size line"));
  CHECK_THAT(error_of(banner + "3 3 1\n4 1 1\n"), Contains(":3: row index 4 out of range [1, 3]"));
  CHECK_THAT(error_of(banner + "3 3 1\n1 0 1\n"),
             Contains(":3: column index 0 out of range [1, 3]"));
  CHECK_THAT(error_of(banner + "3 3 1\nx1 1 1\n"),
             Contains(":3: expected an integer row index, found 'x1'"));
  CHECK_THAT(error_of(banner + "3 3 1\n1 1.5 1\n"),
             Contains(":3: expected an integer column index, found '1.5'"));
  CHECK_THAT(error_of(banner + "3 3 1\n1\n"),
             Contains(":3: missing column index after row index 1"));
  CHECK_THAT(error_of(banner + "3 3 1\n1 1\n"), Contains(":3: missing value for a real entry"));
  CHECK_THAT(error_of(banner + "3 3 1\n1 1 abc\n"),
             Contains(":3: expected a real value, found 'abc'"));
  CHECK_THAT(error_of(banner + "3 3 1\n1 1 1 7\n"),
             Contains(":3: unexpected text '7' after the entry"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 2.5\n"),
             Contains(":3: expected an integer value, found '2.5'"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 2\n"),
             Contains(":3: diagonal entry (1, 1) in a skew-symmetric file"));
  CHECK_THAT(error_of("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 2\n"),
             Contains(":3: unexpected text '2' after the entry"));
}

TEST_CASE("Matrix Market type and file errors", "[format]") {
  TempFile f(".mtx");
  f.write("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 0.5\n");
  SPINDLE_CHECK_THROWS(read_matrix_market<std::int32_t>(f.path()), DTypeError,
                       Contains("holds real values but the requested value type is i32"));
  TempFile big(".mtx");
  big.write("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 3000000000\n");
  SPINDLE_CHECK_THROWS(read_matrix_market<std::int32_t>(big.path()), FormatError,
                       Contains(":3: value 3000000000 does not fit the value type i32"));
  TempFile huge(".mtx");
  huge.write("%%MatrixMarket matrix coordinate pattern general\n2 3000000000 0\n");
  SPINDLE_CHECK_THROWS(read_matrix_market<float>(huge.path()), FormatError,
                       Contains(":2: matrix 2x3000000000 does not fit the index type"));
  CHECK(read_matrix_market<float, std::int64_t>(huge.path()).cols() == 3000000000LL);

  SPINDLE_CHECK_THROWS(
      read_matrix_market<float>("/nonexistent/dir/x.mtx"), IOError,
      Contains("cannot open '/nonexistent/dir/x.mtx'") && Contains("No such file or directory"));
  SPINDLE_CHECK_THROWS(read_matrix_market<float>("/tmp"), IOError, Contains("is a directory"));

  TempFile truncated(".mtx.gz");
  truncated.write(std::string(kGeneralReal) + std::string(2000, '%'), true);
  const std::string gz = truncated.read_raw();
  truncated.write(gz.substr(0, gz.size() / 2));
  SPINDLE_CHECK_THROWS(read_matrix_market<float>(truncated.path()), IOError,
                       Contains("truncated or corrupt"));
}

TEST_CASE("Matrix Market write/read round trip", "[format]") {
  const bool gzip = GENERATE(false, true);
  TempFile f(gzip ? ".mtx.gz" : ".mtx");
  SECTION("real values keep every bit") {
    auto a = Csr<double>::random(200, 150, 6.0, 12, {0.2, -1e6, 1e6});
    write_matrix_market(f.path(), a, {false, "round trip\nsecond line"});
    CHECK((f.read_raw().substr(0, 2) == "\x1f\x8b") == gzip);
    auto b = read_matrix_market<double>(f.path());
    CHECK(b.to_dense() == a.to_dense());
    const auto t = read_matrix_market_triplets<double>(f.path());
    CHECK(t.header.field == MmField::real);
  }
  SECTION("float, integer and pattern") {
    auto a = Csr<float>::random(50, 60, 3.0, 1);
    write_matrix_market(f.path(), a);
    CHECK(read_matrix_market<float>(f.path()).to_dense() == a.to_dense());
    auto i = Csr<std::int64_t, std::int64_t>::random(40, 40, 2.0, 2, {0, -100, 100});
    write_matrix_market(f.path(), i);
    CHECK(read_matrix_market_triplets<std::int64_t>(f.path()).header.field == MmField::integer);
    CHECK(read_matrix_market<std::int64_t, std::int64_t>(f.path()).to_dense() == i.to_dense());
    MatrixMarketWriteOptions opts;
    opts.pattern = true;
    write_matrix_market(f.path(), a, opts);
    auto p = read_matrix_market<float>(f.path());
    CHECK(
        std::equal(p.indices().begin(), p.indices().end(), a.indices().begin(), a.indices().end()));
    CHECK(p.values()[0] == 1.0f);
  }
  SECTION("empty matrix") {
    write_matrix_market(f.path(), Csr<float>());
    CHECK(read_matrix_market<float>(f.path()).rows() == 0);
  }
}
