// Matrix Market reading of every variant (plain and gzip temp files), malformed input, and
// writing round trips.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "format_test_util.hpp"
#include "spindle/format/matrix_market.hpp"

using namespace spindle;
using namespace std::string_literals;
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

// ---------------------------------------------------------------------------------------
// Hostile input (issue 8): every case is a temp file read through read_matrix_market with
// the given limits; the error must have the expected type, name the file and say what.

namespace {

const std::string kReal = "%%MatrixMarket matrix coordinate real general\n";
const std::string kInt = "%%MatrixMarket matrix coordinate integer general\n";
const std::string kPattern = "%%MatrixMarket matrix coordinate pattern general\n";
const std::string kSym = "%%MatrixMarket matrix coordinate real symmetric\n";
const std::string kSkew = "%%MatrixMarket matrix coordinate real skew-symmetric\n";
const std::string kIntSkew = "%%MatrixMarket matrix coordinate integer skew-symmetric\n";

// Reads `text` (gzip-compressed first when asked) from a temp file; the thrown error must be
// a Type naming the file and containing `expected`.
#define CHECK_MM_THROWS(T, Index, text, gzip, limits, Type, expected)                           \
  do {                                                                                          \
    TempFile f_((gzip) ? ".mtx.gz" : ".mtx");                                                   \
    f_.write((text), (gzip));                                                                   \
    SPINDLE_CHECK_THROWS((read_matrix_market<T, Index>(f_.path(), Duplicates::sum, (limits))), \
                         Type, Contains(f_.path()) && Contains(expected));                      \
  } while (0)
#define CHECK_MM_FORMAT(text, expected) \
  CHECK_MM_THROWS(double, std::int32_t, text, false, MatrixMarketLimits{}, FormatError, expected)

MatrixMarketLimits small_limits() {
  MatrixMarketLimits l;
  l.max_decompressed_bytes = 1u << 20;
  l.max_line_bytes = 256;
  l.max_unbacked_bytes = 1024;
  return l;
}

// A gzip member of `text` made with zlib directly (deflate with a gzip wrapper).
std::string gzip_bytes(std::string_view text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace

TEST_CASE("Matrix Market allocation is bounded by the input, not by the size line",
          "[format][hostile]") {
  // 85 bytes that declare a 2e9 x 2e9 matrix with 1e9 entries: the entry array is sized by
  // the bytes that follow (at most 1 entry), and the count mismatch is an error.
  const std::string bomb = kReal + "2000000000 2000000000 1000000000\n1 1 1\n";
  CHECK_MM_THROWS(double, std::int64_t, bomb, false, MatrixMarketLimits{}, FormatError,
                  ":3: expected 1000000000 entries, found 1 (end of file)");
  CHECK_MM_THROWS(double, std::int64_t, bomb, true, MatrixMarketLimits{}, FormatError,
                  "expected 1000000000 entries, found 1");
  SPINDLE_CHECK_THROWS(parse_matrix_market_triplets<double>(bomb, "bomb.mtx"), FormatError,
                       Contains("bomb.mtx:3: expected 1000000000 entries, found 1"));
  // A well-formed file with 2e9 rows and one entry would need 8 GB of row pointers: over
  // the unbacked-memory limit, a ResourceError that names the size.
  CHECK_MM_THROWS(float, std::int32_t, kReal + "2000000000 2000000000 1\n1 1 1\n", false,
                  MatrixMarketLimits{}, ResourceError,
                  "declares 2000000000 rows, whose row pointers need 8000000004 bytes");
  CHECK_MM_THROWS(float, std::int64_t, kPattern + "1000000000000 2 0\n", false,
                  MatrixMarketLimits{}, ResourceError, "max_unbacked_bytes=268435456");
  CHECK_MM_THROWS(float, std::int32_t, kPattern + "1000 1000 0\n", false, small_limits(),
                  ResourceError, "row pointers need 4004 bytes");
  // ... and the limit is a knob: raised, the same file reads.
  TempFile ok(".mtx");
  ok.write(kPattern + "1000 1000 1\n1000 1000\n");
  MatrixMarketLimits raised = small_limits();
  raised.max_unbacked_bytes = 1u << 20;
  CHECK(read_matrix_market<float>(ok.path(), Duplicates::sum, raised).rows() == 1000);
  // Sizes that do not fit 64 bits, or the index type.
  CHECK_MM_FORMAT(kReal + "99999999999999999999 3 1\n",
                  ":2: bad size line: rows '99999999999999999999' does not fit a 64-bit integer");
  CHECK_MM_FORMAT(kReal + "3 3 99999999999999999999\n",
                  ":2: bad size line: entries '99999999999999999999' does not fit");
  CHECK_MM_FORMAT(kReal + "3000000000 2 0\n", ":2: matrix 3000000000x2 does not fit the index type");
  CHECK_MM_FORMAT(kReal + "3 -3 1\n", ":2: bad size line: cols is negative (-3)");
  CHECK_MM_FORMAT(kReal + "-1 3 1\n", ":2: bad size line: rows is negative (-1)");
  CHECK_MM_FORMAT(kReal + "3 3 -1\n", ":2: bad size line: entries is negative (-1)");
  CHECK_MM_FORMAT(kReal + "3.0 3 1\n", ":2: bad size line: expected 'rows cols entries'");
  // Mirroring counts against the index type: 2 stored entries become 4 triplets.
  SPINDLE_CHECK_THROWS(
      parse_matrix_market_triplets<double>(kSym + "3 3 2\n2 1 1\n3 1 1\n", "sym.mtx", 3),
      FormatError, Contains("sym.mtx:4: more than 3 stored entries (after mirroring)"));
}

TEST_CASE("Matrix Market gzip input is bounded and checked", "[format][hostile][gzip]") {
  // A gzip bomb: 8 MiB of '0' compress to about 8 KiB.
  const std::string zeros(8u << 20, '0');
  CHECK_MM_THROWS(float, std::int32_t, zeros, true, small_limits(), ResourceError,
                  "decompresses to more than 1048576 bytes (max_decompressed_bytes)");
  // The same through the in-memory entry point, with a bomb built by deflate directly.
  const std::string gz = gzip_bytes(zeros);
  CHECK(gz.size() < 64u << 10);
  SPINDLE_CHECK_THROWS(parse_matrix_market<float>(gz, "bomb.gz", Duplicates::sum, small_limits()),
                       ResourceError, Contains("'bomb.gz' decompresses to more than 1048576"));
  SPINDLE_CHECK_THROWS(gunzip(gz, "bomb.gz", 4096), ResourceError,
                       Contains("more than 4096 bytes"));
  // The limit is exact: a file of n decompressed bytes reads with limit n, not n - 1.
  const std::string text = std::string(kGeneralReal);
  MatrixMarketLimits exact;
  exact.max_decompressed_bytes = text.size();
  CHECK(parse_matrix_market<double>(gzip_bytes(text), "x.gz", Duplicates::sum, exact).nnz() == 4);
  exact.max_decompressed_bytes = text.size() - 1;
  CHECK_MM_THROWS(double, std::int32_t, text, true, exact, ResourceError,
                  "decompresses to more than");
  // Concatenated members (what `cat a.gz b.gz` gives) read as one text...
  const std::string two = gzip_bytes(kPattern + "2 2 2\n") + gzip_bytes("1 1\n2 2\n");
  CHECK(parse_matrix_market<float>(two, "two.gz").nnz() == 2);
  // ... but bytes after the last member, a cut stream or flipped bits are errors.
  TempFile trailing(".mtx.gz");
  trailing.write(gzip_bytes(text) + "garbage");
  SPINDLE_CHECK_THROWS(read_matrix_market<double>(trailing.path()), IOError,
                       Contains(trailing.path()) && Contains("7 bytes of trailing data"));
  const std::string whole = gzip_bytes(text);
  SPINDLE_CHECK_THROWS(parse_matrix_market<double>(whole.substr(0, whole.size() - 5), "cut.gz"),
                       IOError, Contains("'cut.gz'") && Contains("truncated or corrupt"));
  SPINDLE_CHECK_THROWS(parse_matrix_market<double>(std::string("\x1f\x8b", 2), "magic.gz"),
                       IOError, Contains("'magic.gz'") && Contains("unexpected end of file"));
  std::string flipped = whole;
  for (std::size_t k = 12; k < flipped.size() - 8; ++k) flipped[k] = static_cast<char>(~flipped[k]);
  SPINDLE_CHECK_THROWS(parse_matrix_market<double>(flipped, "flipped.gz"), IOError,
                       Contains("'flipped.gz'"));
  std::string bad_crc = whole;
  bad_crc[bad_crc.size() - 6] = static_cast<char>(bad_crc[bad_crc.size() - 6] ^ 1);
  SPINDLE_CHECK_THROWS(parse_matrix_market<double>(bad_crc, "crc.gz"), IOError,
                       Contains("incorrect data check"));
  // A gzip of something that is not a Matrix Market file, and of nothing at all.
  CHECK_MM_THROWS(double, std::int32_t, "hello\n", true, MatrixMarketLimits{}, FormatError,
                  ":1: not a Matrix Market file");
  CHECK_MM_THROWS(double, std::int32_t, "", true, MatrixMarketLimits{}, FormatError,
                  ":0: empty file");
}

TEST_CASE("Matrix Market integer overflow is detected", "[format][hostile][overflow]") {
  // Summing duplicates of an integer matrix.
  CHECK_MM_THROWS(std::int32_t, std::int32_t, kInt + "2 2 2\n1 2 2147483647\n1 2 1\n", false,
                  MatrixMarketLimits{}, FormatError,
                  "the sum of the duplicate entries at (0, 1) overflows i32");
  CHECK_MM_THROWS(std::int32_t, std::int32_t, kInt + "2 2 2\n2 2 -2147483648\n2 2 -1\n", false,
                  MatrixMarketLimits{}, FormatError, "overflows i32 (-2147483648 + -1)");
  CHECK_MM_THROWS(std::int64_t, std::int64_t,
                  kInt + "1 1 2\n1 1 9223372036854775807\n1 1 9223372036854775807\n", false,
                  MatrixMarketLimits{}, FormatError, "overflows i64");
  // Negating the smallest integer for the mirror of a skew-symmetric entry.
  CHECK_MM_THROWS(std::int32_t, std::int32_t, kIntSkew + "2 2 1\n2 1 -2147483648\n", false,
                  MatrixMarketLimits{}, FormatError,
                  ":3: value -2147483648 of entry (2, 1) cannot be negated for its mirror in i32");
  CHECK_MM_THROWS(std::int64_t, std::int64_t, kIntSkew + "2 2 1\n2 1 -9223372036854775808\n",
                  false, MatrixMarketLimits{}, FormatError, "cannot be negated for its mirror in i64");
  // ... which is fine in floating point.
  TempFile skew_float(".mtx");
  skew_float.write(kIntSkew + "2 2 1\n2 1 -2147483648\n");
  CHECK(read_matrix_market<double>(skew_float.path()).to_dense()(0, 1) == 2147483648.0);
  // Tokens that do not fit 64 bits.
  CHECK_MM_THROWS(std::int64_t, std::int64_t, kInt + "1 1 1\n1 1 9223372036854775808\n", false,
                  MatrixMarketLimits{}, FormatError,
                  ":3: integer value 9223372036854775808 does not fit a 64-bit integer");
  CHECK_MM_THROWS(std::int32_t, std::int32_t, kInt + "1 1 1\n1 1 -2147483649\n", false,
                  MatrixMarketLimits{}, FormatError, ":3: value -2147483649 does not fit the value type i32");
  CHECK_MM_FORMAT(kReal + "3 3 1\n99999999999999999999 1 1\n",
                  ":3: row index 99999999999999999999 out of range [1, 3]");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 -99999999999999999999 1\n",
                  ":3: column index -99999999999999999999 out of range [1, 3]");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1 1e400\n", ":3: real value 1e400 is out of the range of a double");
  CHECK_MM_THROWS(float, std::int32_t, kReal + "3 3 1\n1 1 -1e300\n", false, MatrixMarketLimits{},
                  FormatError, ":3: value -1e300 does not fit the value type f32");
  // Denormals are values, not errors.
  TempFile tiny(".mtx");
  tiny.write(kReal + "1 1 1\n1 1 4e-320\n");
  CHECK(read_matrix_market<double>(tiny.path()).values()[0] > 0.0);
}

TEST_CASE("Matrix Market symmetric files store one triangle", "[format][hostile][symmetric]") {
  CHECK_MM_FORMAT(kSym + "3 3 2\n1 1 1\n1 2 5\n",
                  ":4: entry (1, 2) lies above the diagonal in a symmetric file");
  // Both triangles stored: the first pair found above the diagonal is named.
  CHECK_MM_FORMAT(kSym + "3 3 4\n2 1 1\n3 2 1\n1 2 1\n2 3 1\n",
                  ":5: entry (1, 2) lies above the diagonal");
  CHECK_MM_FORMAT(kSkew + "3 3 1\n2 3 1\n",
                  ":3: entry (2, 3) lies above the diagonal in a skew-symmetric file");
  CHECK_MM_FORMAT("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 1\n1 2\n",
                  ":3: entry (1, 2) lies above the diagonal");
  CHECK_MM_THROWS(std::int32_t, std::int32_t, kIntSkew + "3 3 1\n3 3 4\n", false,
                  MatrixMarketLimits{}, FormatError, ":3: diagonal entry (3, 3) in a skew-symmetric file");
  CHECK_MM_FORMAT(kSkew + "2 3 0\n", ":2: skew-symmetric matrix must be square, got 2x3");
}

TEST_CASE("Matrix Market malformed text names what and where", "[format][hostile]") {
  // Bytes that are not text.
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1\0 1\n"s, ":3: embedded NUL byte at column 4");
  CHECK_MM_FORMAT("%%MatrixMarket\0 matrix coordinate real general\n"s, ":1: embedded NUL byte at column 15");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1 \x01\x02\n", ":3: expected a real value, found '\\x01\\x02'");
  CHECK_MM_FORMAT("\xEF\xBB\xBF" + kReal + "1 1 0\n", ":1: not a Matrix Market file");
  // Lines that are too long (the default limit is 64 KiB; the test lowers it).
  CHECK_MM_THROWS(double, std::int32_t, kReal + "% " + std::string(300, 'x') + "\n1 1 0\n", false,
                  small_limits(), FormatError,
                  ":2: line of 302 bytes is longer than the limit of 256 bytes (max_line_bytes)");
  CHECK_MM_FORMAT(kReal + "1 1 1\n1 1 " + std::string(70000, '1') + "\n", ":3: line of 70004 bytes");
  // NaN, inf and fractions where integers are expected.
  CHECK_MM_THROWS(double, std::int32_t, kInt + "1 1 1\n1 1 nan\n", false, MatrixMarketLimits{},
                  FormatError, ":3: expected an integer value, found 'nan'");
  CHECK_MM_THROWS(std::int64_t, std::int64_t, kInt + "1 1 1\n1 1 -inf\n", false,
                  MatrixMarketLimits{}, FormatError, ":3: expected an integer value, found '-inf'");
  CHECK_MM_THROWS(std::int64_t, std::int64_t, kInt + "1 1 1\n1 1 1e3\n", false, MatrixMarketLimits{},
                  FormatError, ":3: expected an integer value, found '1e3'");
  CHECK_MM_FORMAT(kReal + "3 3 1\nnan 1 1\n", ":3: expected an integer row index, found 'nan'");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 0x1 1\n", ":3: expected an integer column index, found '0x1'");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1 0x10\n", ":3: expected a real value, found '0x10'");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1 1.5.5\n", ":3: expected a real value, found '1.5.5'");
  // Trailing garbage, extra and missing lines.
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1 1\ngarbage\n",
                  ":4: more entries than the 1 declared in the size line (found 'garbage')");
  CHECK_MM_FORMAT(kReal + "3 3 1\n1 1 1 %comment\n", ":3: unexpected text '%comment' after the entry");
  CHECK_MM_FORMAT(kReal + "3 3 2\n1 1 1\n% trailing comment\n\n",
                  ":5: expected 2 entries, found 1 (end of file)");
  CHECK_MM_FORMAT(kReal, ":1: missing size line 'rows cols entries' (end of file)");
  CHECK_MM_FORMAT(kReal + "3 3 1 extra\n", ":2: bad size line: unexpected text");
  CHECK_MM_FORMAT(kReal + "3 3 1\n-1 1 1\n", ":3: row index -1 out of range [1, 3]");
  CHECK_MM_FORMAT(kReal + "3 3 1\n0 1 1\n", ":3: row index 0 out of range [1, 3]");
  CHECK_MM_FORMAT(kReal + "0 0 1\n1 1 1\n", ":3: row index 1 out of range [1, 0]");
  // Banner problems.
  CHECK_MM_FORMAT("\n\n", ":1: not a Matrix Market file");
  CHECK_MM_FORMAT("%%MatrixMarket matrix\n", ":1: bad banner: format must be 'coordinate', found ''");
  CHECK_MM_FORMAT("%%MatrixMarket matrix coordinate\n", ":1: unsupported field ''");
  CHECK_MM_FORMAT("%%MatrixMarket matrix coordinate real symmetrical\n",
                  ":1: unsupported symmetry 'symmetrical'");
  CHECK_MM_FORMAT("%%MatrixMarket matrix coordinate real general extra\n",
                  ":1: unexpected text 'extra' after the banner");
  CHECK_MM_FORMAT("%%MatrixMarket matrix coordinate " + std::string(100, 'r') + " general\n",
                  ":1: unsupported field 'rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr...'");
  // Duplicates::error names the coordinate.
  TempFile dup(".mtx");
  dup.write(kReal + "2 2 2\n1 2 1\n1 2 2\n");
  SPINDLE_CHECK_THROWS(read_matrix_market<double>(dup.path(), Duplicates::error), FormatError,
                       Contains("duplicate entry (0, 1)"));
}

// A deterministic mini-fuzz: every prefix and many single-byte corruptions of valid files
// (plain and gzip) either read or raise a spindle::Error; nothing else escapes.
TEST_CASE("Matrix Market truncations and corruptions raise only spindle errors",
          "[format][hostile]") {
  const std::string valid[] = {kGeneralReal, kSym + "3 3 3\n1 1 1\n2 1 2\n3 2 3\n",
                               kIntSkew + "3 3 2\n2 1 -7\n3 1 2147483647\n",
                               kPattern + "2 3 2\n1 3\n2 1\n"};
  const char replacements[] = {'\0', '\n', ' ', '-', '9', '%', 'e', '.', '\x8b', '\x1f'};
  std::size_t inputs = 0, errors = 0;
  const auto attempt = [&](std::string_view bytes) {
    ++inputs;
    try {
      (void)parse_matrix_market<std::int32_t>(bytes, "m.mtx", Duplicates::sum, small_limits());
    } catch (const Error&) {
      ++errors;
    }
    try {
      (void)parse_matrix_market<float, std::int64_t>(bytes, "m.mtx", Duplicates::sum,
                                                     small_limits());
    } catch (const Error&) {
    }
  };
  for (const std::string& v : valid) {
    const std::string gz = gzip_bytes(v);
    for (std::size_t n = 0; n <= v.size(); ++n) attempt(std::string_view(v).substr(0, n));
    for (std::size_t n = 0; n <= gz.size(); ++n) attempt(std::string_view(gz).substr(0, n));
    for (std::size_t k = 0; k < v.size(); ++k)
      for (char c : replacements) {
        std::string m = v;
        m[k] = c;
        attempt(m);
      }
  }
  CHECK(inputs > 1000);
  CHECK(errors > 0);
}

TEST_CASE("Matrix Market from a device, a FIFO or /proc: a bounded stream, never beyond its limit",
          "[format][hostile][stream]") {
  // Issue 15 §4: /dev/zero allocated 2 GiB before failing (an allocator abort under ASan).
  // Non-regular files are read as streams up to max_stream_bytes (default 256 MiB).
  MatrixMarketLimits limits;
  limits.max_stream_bytes = 1u << 20;
  SPINDLE_CHECK_THROWS(read_matrix_market<float>("/dev/zero", Duplicates::sum, limits), ResourceError,
                       Contains("'/dev/zero' is a stream (not a regular file) of at least") &&
                           Contains("max_stream_bytes"));
  // The default bound holds too (256 MiB read, then a clear error).
  SPINDLE_CHECK_THROWS(read_matrix_market<float>("/dev/zero"), ResourceError,
                       Contains("more than the limit of 268435456 bytes"));
  SPINDLE_CHECK_THROWS(read_file_bytes("/dev/zero", FileReadLimits{kDefaultMaxDecompressedBytes, 1u << 30, 4096}),
                       ResourceError, Contains("limit of 4096 bytes"));
  // A small /proc file is a stream that fits: read, then rejected as not Matrix Market.
  SPINDLE_CHECK_THROWS(read_matrix_market<float>("/proc/self/status"), FormatError,
                       Contains("not a Matrix Market file"));
  // /dev/null: an empty stream.
  SPINDLE_CHECK_THROWS(read_matrix_market<float>("/dev/null"), FormatError, Contains("empty file"));
  // A regular file larger than max_file_bytes is refused before it is read.
  TempFile f(".mtx");
  f.write(kGeneralReal);
  MatrixMarketLimits small;
  small.max_file_bytes = 16;
  SPINDLE_CHECK_THROWS(read_matrix_market<float>(f.path(), Duplicates::sum, small), ResourceError,
                       Contains("max_file_bytes"));
  small.max_file_bytes = std::string(kGeneralReal).size();
  CHECK(read_matrix_market<float>(f.path(), Duplicates::sum, small).nnz() == 4);
  // A FIFO whose writer sends a whole matrix reads like a file.
  const std::string fifo = f.path() + ".fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] {
    std::FILE* w = std::fopen(fifo.c_str(), "wb");
    if (!w) return;
    std::fputs(kGeneralReal, w);
    std::fclose(w);
  });
  const auto a = read_matrix_market<double>(fifo);
  writer.join();
  ::unlink(fifo.c_str());
  CHECK(a.nnz() == 4);
}
