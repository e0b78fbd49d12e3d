// Matrix Market coordinate files (plain or gzip, detected by magic bytes):
//   read_matrix_market<T, Index>(path)          -> Csr<T, Index>, duplicates summed
//   read_matrix_market_triplets<T>(path)        -> header + 0-based triplets in file order
//                                                  (symmetric parts mirrored, nothing merged;
//                                                  for typed edge lists such as the RGCN files)
//   parse_matrix_market_triplets<T>(text, name) -> the same from text in memory
//   write_matrix_market(path, csr, options)     -> gzip when path ends in ".gz"
// Supported: fields real/double/integer/pattern (pattern reads as 1), symmetry
// general/symmetric/skew-symmetric. Malformed input throws FormatError "file:line: what";
// an unreadable file throws IOError. The parser works on the whole buffer with from_chars.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "spindle/format/coo.hpp"
#include "spindle/format/csr.hpp"
#include "spindle/format/file_io.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

enum class MmField : std::uint8_t { real, integer, pattern };
enum class MmSymmetry : std::uint8_t { general, symmetric, skew_symmetric };

struct MatrixMarketHeader {
  std::int64_t rows = 0, cols = 0;
  std::int64_t entries = 0;  // stored entries declared by the size line
  MmField field = MmField::real;
  MmSymmetry symmetry = MmSymmetry::general;
};

template <class T>
struct MatrixMarketTriplets {
  MatrixMarketHeader header;
  std::vector<Triplet<T>> entries;  // 0-based; mirrored entries follow their source entry
};

struct MatrixMarketWriteOptions {
  bool pattern = false;  // write only the coordinates
  std::string comment;   // written as '%' lines after the banner (may hold newlines)
};

namespace detail {

class MmLexer {
 public:
  MmLexer(std::string_view text, std::string_view source)
      : p_(text.data()), end_(p_ + text.size()), source_(source) {}

  // Next line without its terminator; false at the end of the text.
  bool next_line(std::string_view& line) {
    if (p_ >= end_) return false;
    const char* nl =
        static_cast<const char*>(std::memchr(p_, '\n', static_cast<std::size_t>(end_ - p_)));
    const char* e = nl ? nl : end_;
    line = std::string_view(p_, static_cast<std::size_t>(e - p_));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    p_ = nl ? nl + 1 : end_;
    ++line_no_;
    return true;
  }
  std::int64_t line_no() const { return line_no_; }

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw FormatError(message(source_, ":", line_no_, ": ", parts...));
  }

 private:
  const char* p_;
  const char* end_;
  std::string_view source_;
  std::int64_t line_no_ = 0;
};

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

inline std::string_view next_token(std::string_view& rest) {
  std::size_t b = 0;
  while (b < rest.size() && is_blank(rest[b])) ++b;
  std::size_t e = b;
  while (e < rest.size() && !is_blank(rest[e])) ++e;
  const std::string_view tok = rest.substr(b, e - b);
  rest.remove_prefix(e);
  return tok;
}

inline bool blank_line(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return is_blank(c); });
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// Parses a whole token as a number of type V; false if it is not one.
template <class V>
bool parse_number(std::string_view tok, V& out) {
  if (tok.size() > 1 && tok[0] == '+' && tok[1] != '-') tok.remove_prefix(1);
  const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), out);
  return r.ec == std::errc() && r.ptr == tok.data() + tok.size();
}

inline MatrixMarketHeader parse_mm_header(MmLexer& lex) {
  MatrixMarketHeader h;
  std::string_view line;
  if (!lex.next_line(line)) lex.fail("empty file; expected a '%%MatrixMarket' banner");
  std::string_view rest = line;
  const std::string banner = lower(next_token(rest));
  if (banner != "%%matrixmarket")
    lex.fail("not a Matrix Market file: the first line must start with '%%MatrixMarket', found '",
             line.substr(0, 40), "'");
  const std::string object = lower(next_token(rest)), format = lower(next_token(rest)),
                    field = lower(next_token(rest)), symmetry = lower(next_token(rest));
  if (object != "matrix") lex.fail("unsupported object '", object, "'; only 'matrix' is supported");
  if (format == "array")
    lex.fail(
        "'array' (dense) Matrix Market files are not supported; hint: convert to 'coordinate'");
  if (format != "coordinate")
    lex.fail("bad banner: format must be 'coordinate', found '", format, "'");
  if (field == "real" || field == "double")
    h.field = MmField::real;
  else if (field == "integer")
    h.field = MmField::integer;
  else if (field == "pattern")
    h.field = MmField::pattern;
  else
    lex.fail("unsupported field '", field, "'; expected real, double, integer or pattern");
  if (symmetry == "general")
    h.symmetry = MmSymmetry::general;
  else if (symmetry == "symmetric")
    h.symmetry = MmSymmetry::symmetric;
  else if (symmetry == "skew-symmetric")
    h.symmetry = MmSymmetry::skew_symmetric;
  else
    lex.fail("unsupported symmetry '", symmetry,
             "'; expected general, symmetric or skew-symmetric");
  if (h.field == MmField::pattern && h.symmetry == MmSymmetry::skew_symmetric)
    lex.fail("a pattern file cannot be skew-symmetric");
  if (!blank_line(rest)) lex.fail("unexpected text '", next_token(rest), "' after the banner");

  while (true) {
    if (!lex.next_line(line)) lex.fail("missing size line 'rows cols entries' (end of file)");
    if (!line.empty() && line[0] == '%') continue;
    if (blank_line(line)) continue;
    break;
  }
  rest = line;
  std::int64_t* dims[3] = {&h.rows, &h.cols, &h.entries};
  for (std::int64_t* d : dims)
    if (!parse_number(next_token(rest), *d) || *d < 0)
      lex.fail("bad size line: expected 'rows cols entries' as non-negative integers, found '",
               line, "'");
  if (!blank_line(rest))
    lex.fail("bad size line: unexpected text after 'rows cols entries' in '", line, "'");
  if (h.symmetry != MmSymmetry::general && h.rows != h.cols)
    lex.fail(h.symmetry == MmSymmetry::symmetric ? "symmetric" : "skew-symmetric",
             " matrix must be square, got ", h.rows, "x", h.cols);
  return h;
}

template <class T>
MatrixMarketTriplets<T> parse_mm(std::string_view text, std::string_view source,
                                 std::int64_t max_extent) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "spindle: Matrix Market values must be float, double, int32 or int64");
  MmLexer lex(text, source);
  MatrixMarketTriplets<T> out;
  MatrixMarketHeader& h = out.header;
  h = parse_mm_header(lex);
  if constexpr (std::is_integral_v<T>) {
    if (h.field == MmField::real)
      throw DTypeError(message(source,
                               ":1: the file holds real values but the requested value type is ",
                               dtype_name(dtype_v<T>), "; hint: read it as float or double"));
  }
  if (h.rows > max_extent || h.cols > max_extent)
    lex.fail("matrix ", h.rows, "x", h.cols,
             " does not fit the index type; hint: use Index = std::int64_t");
  const bool mirror = h.symmetry != MmSymmetry::general;
  const std::int64_t cap = static_cast<std::int64_t>(text.size() / 4 + 1);
  out.entries.reserve(static_cast<std::size_t>(std::min(h.entries, cap) * (mirror ? 2 : 1)));
  std::string_view line;
  std::int64_t seen = 0;
  while (lex.next_line(line)) {
    if (line.empty() || line[0] == '%' || blank_line(line)) continue;
    if (seen == h.entries)
      lex.fail("more entries than the ", h.entries, " declared in the size line");
    std::string_view rest = line;
    std::int64_t r = 0, c = 0;
    const std::string_view rt = next_token(rest);
    if (!parse_number(rt, r)) lex.fail("expected an integer row index, found '", rt, "'");
    const std::string_view ct = next_token(rest);
    if (ct.empty()) lex.fail("missing column index after row index ", r);
    if (!parse_number(ct, c)) lex.fail("expected an integer column index, found '", ct, "'");
    if (r < 1 || r > h.rows) lex.fail("row index ", r, " out of range [1, ", h.rows, "]");
    if (c < 1 || c > h.cols) lex.fail("column index ", c, " out of range [1, ", h.cols, "]");
    T v = T(1);
    if (h.field != MmField::pattern) {
      const std::string_view vt = next_token(rest);
      if (vt.empty())
        lex.fail("missing value for a ", h.field == MmField::real ? "real" : "integer", " entry");
      bool ok;
      if (h.field == MmField::integer) {
        std::int64_t iv = 0;
        ok = parse_number(vt, iv);
        if constexpr (std::is_integral_v<T>) {
          if (ok && (iv < std::numeric_limits<T>::min() || iv > std::numeric_limits<T>::max()))
            lex.fail("value ", iv, " does not fit the value type ", dtype_name(dtype_v<T>));
        }
        v = static_cast<T>(iv);
      } else {
        double dv = 0;
        ok = parse_number(vt, dv);
        v = static_cast<T>(dv);
      }
      if (!ok)
        lex.fail("expected ", h.field == MmField::real ? "a real" : "an integer", " value, found '",
                 vt, "'");
    }
    if (!blank_line(rest)) lex.fail("unexpected text '", next_token(rest), "' after the entry");
    if (r == c && h.symmetry == MmSymmetry::skew_symmetric)
      lex.fail("diagonal entry (", r, ", ", c, ") in a skew-symmetric file");
    out.entries.push_back({r - 1, c - 1, v});
    if (mirror && r != c)
      out.entries.push_back({c - 1, r - 1, h.symmetry == MmSymmetry::symmetric ? v : T(-v)});
    ++seen;
  }
  if (seen < h.entries)
    lex.fail("expected ", h.entries, " entries, found ", seen, " (end of file)");
  return out;
}

}  // namespace detail

template <class T>
MatrixMarketTriplets<T> parse_matrix_market_triplets(
    std::string_view text, std::string_view source = "<memory>",
    std::int64_t max_extent = std::numeric_limits<std::int64_t>::max()) {
  return detail::parse_mm<T>(text, source, max_extent);
}

template <class T>
MatrixMarketTriplets<T> read_matrix_market_triplets(const std::string& path) {
  const std::string text = read_file_bytes(path);
  return detail::parse_mm<T>(text, path, std::numeric_limits<std::int64_t>::max());
}

// Reads a coordinate file into a Csr named after the file; duplicates merged by `policy`.
template <class T, class Index = std::int32_t>
Csr<T, Index> read_matrix_market(const std::string& path, Duplicates policy = Duplicates::sum) {
  const std::string text = read_file_bytes(path);
  auto m = detail::parse_mm<T>(text, path, std::numeric_limits<Index>::max());
  const auto slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return Csr<T, Index>::from_triplets(m.header.rows, m.header.cols, m.entries, policy,
                                      std::move(name));
}

// Writes a general coordinate file (field integer for integral T, real otherwise, or
// pattern); gzip-compressed when path ends in ".gz". Values use the shortest exact form.
template <class T, class Index>
void write_matrix_market(const std::string& path, const Csr<T, Index>& csr,
                         const MatrixMarketWriteOptions& options = {}) {
  FileWriter out(path, ends_with_gz(path));
  const char* field = options.pattern ? "pattern" : std::is_integral_v<T> ? "integer" : "real";
  out.append(message("%%MatrixMarket matrix coordinate ", field, " general\n"));
  std::string_view comment = options.comment;
  while (!comment.empty()) {
    const auto nl = comment.find('\n');
    out.append(message("% ", comment.substr(0, nl), "\n"));
    comment.remove_prefix(nl == std::string_view::npos ? comment.size() : nl + 1);
  }
  out.append(message(csr.rows(), " ", csr.cols(), " ", csr.nnz(), "\n"));
  const auto indptr = csr.indptr();
  const auto indices = csr.indices();
  const auto values = csr.values();
  char buf[96];
  for (std::int64_t r = 0; r < csr.rows(); ++r) {
    for (Index q = indptr[r]; q < indptr[r + 1]; ++q) {
      char* p = std::to_chars(buf, buf + 24, r + 1).ptr;
      *p++ = ' ';
      p = std::to_chars(p, p + 24, static_cast<std::int64_t>(indices[q]) + 1).ptr;
      if (!options.pattern) {
        *p++ = ' ';
        p = std::to_chars(p, buf + sizeof buf - 1, values[q]).ptr;
      }
      *p++ = '\n';
      out.buffer().append(buf, static_cast<std::size_t>(p - buf));
      out.maybe_flush();
    }
  }
  out.close();
}

}  // namespace spindle
