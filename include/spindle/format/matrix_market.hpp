// Matrix Market coordinate files (plain or gzip, detected by magic bytes):
//   read_matrix_market<T, Index>(path)          -> Csr<T, Index>, duplicates summed
//   parse_matrix_market<T, Index>(bytes, name)  -> the same from bytes in memory (plain or gzip)
//   read_matrix_market_triplets<T>(path)        -> header + 0-based triplets in file order
//                                                  (symmetric parts mirrored, nothing merged;
//                                                  for typed edge lists such as the RGCN files)
//   parse_matrix_market_triplets<T>(text, name) -> the same from text in memory
//   write_matrix_market(path, csr, options)     -> gzip when path ends in ".gz"
// Supported: fields real/double/integer/pattern (pattern reads as 1), symmetry
// general/symmetric/skew-symmetric (symmetric files store the lower triangle only).
// Malformed input throws FormatError "file:line: what"; an unreadable file throws IOError.
// The parser works on the whole buffer with from_chars.
//
// Untrusted input is safe to read: allocation is bounded by what the input contains, not by
// what its size line declares (the entry arrays grow as entries are read; a CSR's row
// pointers may take max(MatrixMarketLimits::max_unbacked_bytes, 8 bytes per input byte)),
// gzip input is bounded by max_decompressed_bytes, lines by max_line_bytes, and integer
// overflow (sizes, duplicate sums, skew-symmetric negation) is detected. A limit that is hit
// or an allocation that fails throws ResourceError naming the size, the limit and the file.
#pragma once

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
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

// Resource limits of the readers. The defaults accept every real file we know of; lower them
// for untrusted input (the fuzz targets do), raise them for bigger files.
struct MatrixMarketLimits {
  // Decompressed size of gzip input (ResourceError beyond it).
  std::uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes;
  // Length of one line without its terminator (FormatError beyond it). The format itself
  // allows 1024 characters.
  std::size_t max_line_bytes = std::size_t{1} << 16;
  // Memory not backed by entries of the file, i.e. the row pointers of a CSR ((rows + 1)
  // indices, which a size line can declare with a few bytes). Allowed up to the larger of
  // this and 8 bytes per byte of (decompressed) input; ResourceError beyond it.
  std::uint64_t max_unbacked_bytes = std::uint64_t{256} << 20;
  // Raw size of a regular file, and of input that is not a regular file (a pipe, a device,
  // /proc), read as a bounded stream (file_io.hpp, FileReadLimits; ResourceError beyond).
  std::uint64_t max_file_bytes = FileReadLimits{}.max_file_bytes;
  std::uint64_t max_stream_bytes = FileReadLimits{}.max_stream_bytes;
  FileReadLimits file_limits() const { return {max_decompressed_bytes, max_file_bytes, max_stream_bytes}; }
};

namespace detail {

// A piece of input for a message: at most 40 characters, non-printable bytes as \xNN.
inline std::string shown(std::string_view s) {
  std::string out;
  const std::size_t n = std::min<std::size_t>(s.size(), 40);
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > n) out += "...";
  return out;
}

class MmLexer {
 public:
  MmLexer(std::string_view text, std::string_view source, std::size_t max_line_bytes)
      : begin_(text.data()),
        p_(text.data()),
        end_(p_ + text.size()),
        source_(source),
        max_line_(max_line_bytes) {}

  // Next line without its terminator; false at the end of the text. Lines longer than the
  // limit and lines holding a NUL byte are FormatErrors.
  bool next_line(std::string_view& line) {
    if (p_ >= end_) return false;
    const char* nl =
        static_cast<const char*>(std::memchr(p_, '\n', static_cast<std::size_t>(end_ - p_)));
    const char* e = nl ? nl : end_;
    line = std::string_view(p_, static_cast<std::size_t>(e - p_));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    p_ = nl ? nl + 1 : end_;
    ++line_no_;
    if (line.size() > max_line_)
      fail("line of ", line.size(), " bytes is longer than the limit of ", max_line_,
           " bytes (max_line_bytes)");
    if (const void* nul = std::memchr(line.data(), '\0', line.size()))
      fail("embedded NUL byte at column ",
           static_cast<const char*>(nul) - line.data() + 1, "; this is not a text file");
    return true;
  }
  std::int64_t line_no() const { return line_no_; }
  // Bytes not yet handed out as lines.
  std::size_t remaining() const { return static_cast<std::size_t>(end_ - p_); }
  std::size_t total() const { return static_cast<std::size_t>(end_ - begin_); }
  std::string_view source() const { return source_; }

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    throw FormatError(message(source_, ":", line_no_, ": ", parts...));
  }

 private:
  const char* begin_;
  const char* p_;
  const char* end_;
  std::string_view source_;
  std::size_t max_line_;
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

enum class NumParse : std::uint8_t { ok, invalid, out_of_range };

// Parses a whole token as a number of type V (a leading '+' allowed).
template <class V>
NumParse parse_number_ex(std::string_view tok, V& out) {
  if (tok.size() > 1 && tok[0] == '+' && tok[1] != '-') tok.remove_prefix(1);
  if (tok.empty()) return NumParse::invalid;
  const auto r = std::from_chars(tok.data(), tok.data() + tok.size(), out);
  if (r.ptr != tok.data() + tok.size()) return NumParse::invalid;
  if (r.ec == std::errc::result_out_of_range) return NumParse::out_of_range;
  return r.ec == std::errc() ? NumParse::ok : NumParse::invalid;
}

// Parses a whole token as a number of type V; false if it is not one (or out of range).
template <class V>
bool parse_number(std::string_view tok, V& out) {
  return parse_number_ex(tok, out) == NumParse::ok;
}

// A real value. from_chars reports underflow (denormals, 1e-400) as out of range; those read
// as the nearest double (strtod), overflow (1e400) is an error of the caller.
inline NumParse parse_real(std::string_view tok, double& out) {
  const NumParse p = parse_number_ex(tok, out);
  if (p != NumParse::out_of_range || tok.size() > 1000) return p;
  const std::string z(tok);
  errno = 0;
  const double v = std::strtod(z.c_str(), nullptr);
  if (std::isinf(v)) return NumParse::out_of_range;
  out = v;
  return NumParse::ok;
}

inline MatrixMarketHeader parse_mm_header(MmLexer& lex) {
  MatrixMarketHeader h;
  std::string_view line;
  if (!lex.next_line(line)) lex.fail("empty file; expected a '%%MatrixMarket' banner");
  std::string_view rest = line;
  const std::string banner = lower(next_token(rest));
  if (banner != "%%matrixmarket")
    lex.fail("not a Matrix Market file: the first line must start with '%%MatrixMarket', found '",
             shown(line), "'");
  const std::string object = lower(next_token(rest)), format = lower(next_token(rest)),
                    field = lower(next_token(rest)), symmetry = lower(next_token(rest));
  if (object != "matrix")
    lex.fail("unsupported object '", shown(object), "'; only 'matrix' is supported");
  if (format == "array")
    lex.fail(
        "'array' (dense) Matrix Market files are not supported; hint: convert to 'coordinate'");
  if (format != "coordinate")
    lex.fail("bad banner: format must be 'coordinate', found '", shown(format), "'");
  if (field == "real" || field == "double")
    h.field = MmField::real;
  else if (field == "integer")
    h.field = MmField::integer;
  else if (field == "pattern")
    h.field = MmField::pattern;
  else
    lex.fail("unsupported field '", shown(field), "'; expected real, double, integer or pattern");
  if (symmetry == "general")
    h.symmetry = MmSymmetry::general;
  else if (symmetry == "symmetric")
    h.symmetry = MmSymmetry::symmetric;
  else if (symmetry == "skew-symmetric")
    h.symmetry = MmSymmetry::skew_symmetric;
  else
    lex.fail("unsupported symmetry '", shown(symmetry),
             "'; expected general, symmetric or skew-symmetric");
  if (h.field == MmField::pattern && h.symmetry == MmSymmetry::skew_symmetric)
    lex.fail("a pattern file cannot be skew-symmetric");
  if (!blank_line(rest))
    lex.fail("unexpected text '", shown(next_token(rest)), "' after the banner");

  while (true) {
    if (!lex.next_line(line)) lex.fail("missing size line 'rows cols entries' (end of file)");
    if (!line.empty() && line[0] == '%') continue;
    if (blank_line(line)) continue;
    break;
  }
  rest = line;
  std::int64_t* dims[3] = {&h.rows, &h.cols, &h.entries};
  const char* names[3] = {"rows", "cols", "entries"};
  for (int k = 0; k < 3; ++k) {
    const std::string_view tok = next_token(rest);
    switch (parse_number_ex(tok, *dims[k])) {
      case NumParse::ok:
        break;
      case NumParse::out_of_range:
        lex.fail("bad size line: ", names[k], " '", shown(tok),
                 "' does not fit a 64-bit integer");
      case NumParse::invalid:
        lex.fail("bad size line: expected 'rows cols entries' as non-negative integers, found '",
                 shown(line), "'");
    }
    if (*dims[k] < 0) lex.fail("bad size line: ", names[k], " is negative (", *dims[k], ")");
  }
  if (!blank_line(rest))
    lex.fail("bad size line: unexpected text after 'rows cols entries' in '", shown(line), "'");
  if (h.symmetry != MmSymmetry::general && h.rows != h.cols)
    lex.fail(h.symmetry == MmSymmetry::symmetric ? "symmetric" : "skew-symmetric",
             " matrix must be square, got ", h.rows, "x", h.cols);
  return h;
}

// Reserves room for n more elements of v, growing geometrically but never past `bound`
// elements; allocation failure is a ResourceError naming the bytes and the file.
template <class E>
void grow_entries(std::vector<E>& v, std::size_t bound, std::string_view source) {
  const std::size_t want =
      std::min(bound, std::max<std::size_t>(v.capacity() * 2, v.size() + 1024));
  try {
    v.reserve(std::max(want, v.size() + 1));
  } catch (const std::exception&) {  // bad_alloc, length_error
    throw ResourceError(message("cannot allocate ", std::max(want, v.size() + 1) * sizeof(E),
                                " bytes for the entries of '", source, "': out of memory"));
  }
}

template <class T>
MatrixMarketTriplets<T> parse_mm(std::string_view text, std::string_view source,
                                 std::int64_t max_extent, const MatrixMarketLimits& limits = {}) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "spindle: Matrix Market values must be float, double, int32 or int64");
  MmLexer lex(text, source, limits.max_line_bytes);
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
  const char* const sym_name = h.symmetry == MmSymmetry::symmetric ? "symmetric" : "skew-symmetric";

  // Entries the rest of the text can hold: each takes at least "i j\n" (4 bytes) or
  // "i j v\n" (6 bytes), the last one without its newline. The entry array never grows
  // past that (or the declared count), whatever the size line says.
  const std::size_t min_entry = h.field == MmField::pattern ? 4 : 6;
  const std::size_t fit = (lex.remaining() + 1) / min_entry;
  const std::size_t declared = static_cast<std::uint64_t>(h.entries) < fit
                                   ? static_cast<std::size_t>(h.entries)
                                   : fit;
  const std::size_t bound = declared * (mirror ? 2 : 1);  // no overflow: declared <= bytes / 4
  grow_entries(out.entries, std::min<std::size_t>(bound, std::size_t{1} << 16), source);
  const auto max_triplets = static_cast<std::uint64_t>(max_extent);

  std::string_view line;
  std::int64_t seen = 0;
  while (lex.next_line(line)) {
    if (line.empty() || line[0] == '%' || blank_line(line)) continue;
    if (seen == h.entries)
      lex.fail("more entries than the ", h.entries, " declared in the size line (found '",
               shown(line), "')");
    std::string_view rest = line;
    std::int64_t rc[2] = {0, 0};
    const std::int64_t extent[2] = {h.rows, h.cols};
    const char* what[2] = {"row", "column"};
    for (int k = 0; k < 2; ++k) {
      const std::string_view tok = next_token(rest);
      if (tok.empty()) {
        if (k == 0) lex.fail("expected an integer row index, found an empty line");
        lex.fail("missing column index after row index ", rc[0]);
      }
      switch (parse_number_ex(tok, rc[k])) {
        case NumParse::ok:
          break;
        case NumParse::out_of_range:
          lex.fail(what[k], " index ", shown(tok), " out of range [1, ", extent[k], "]");
        case NumParse::invalid:
          lex.fail("expected an integer ", what[k], " index, found '", shown(tok), "'");
      }
    }
    const std::int64_t r = rc[0], c = rc[1];
    if (r < 1 || r > h.rows) lex.fail("row index ", r, " out of range [1, ", h.rows, "]");
    if (c < 1 || c > h.cols) lex.fail("column index ", c, " out of range [1, ", h.cols, "]");
    T v = T(1);
    if (h.field != MmField::pattern) {
      const std::string_view vt = next_token(rest);
      if (vt.empty())
        lex.fail("missing value for a ", h.field == MmField::real ? "real" : "integer", " entry");
      if (h.field == MmField::integer) {
        std::int64_t iv = 0;
        switch (parse_number_ex(vt, iv)) {
          case NumParse::ok:
            break;
          case NumParse::out_of_range:
            lex.fail("integer value ", shown(vt), " does not fit a 64-bit integer");
          case NumParse::invalid:
            lex.fail("expected an integer value, found '", shown(vt), "'");
        }
        if constexpr (std::is_integral_v<T>) {
          if (iv < std::numeric_limits<T>::min() || iv > std::numeric_limits<T>::max())
            lex.fail("value ", iv, " does not fit the value type ", dtype_name(dtype_v<T>));
        }
        v = static_cast<T>(iv);
      } else {
        double dv = 0;
        switch (parse_real(vt, dv)) {
          case NumParse::ok:
            break;
          case NumParse::out_of_range:
            lex.fail("real value ", shown(vt), " is out of the range of a double");
          case NumParse::invalid:
            lex.fail("expected a real value, found '", shown(vt), "'");
        }
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isfinite(dv) && std::fabs(dv) > static_cast<double>(std::numeric_limits<T>::max()))
            lex.fail("value ", shown(vt), " does not fit the value type ", dtype_name(dtype_v<T>));
        }
        v = static_cast<T>(dv);
      }
    }
    if (!blank_line(rest))
      lex.fail("unexpected text '", shown(next_token(rest)), "' after the entry");
    if (mirror && r < c)
      lex.fail("entry (", r, ", ", c, ") lies above the diagonal in a ", sym_name,
               " file, which stores the lower triangle only (row >= column); hint: the file "
               "stores both triangles, declare it 'general'");
    if (r == c && h.symmetry == MmSymmetry::skew_symmetric)
      lex.fail("diagonal entry (", r, ", ", c, ") in a skew-symmetric file");
    T mirrored = v;
    if (h.symmetry == MmSymmetry::skew_symmetric) {
      if constexpr (std::is_integral_v<T>) {
        if (v == std::numeric_limits<T>::min())
          lex.fail("value ", v, " of entry (", r, ", ", c,
                   ") cannot be negated for its mirror in ", dtype_name(dtype_v<T>));
      }
      mirrored = static_cast<T>(-v);
    }
    const std::size_t adding = mirror && r != c ? 2 : 1;
    if (out.entries.size() + adding > max_triplets)
      lex.fail("more than ", max_extent,
               " stored entries (after mirroring) do not fit the index type; hint: use "
               "Index = std::int64_t");
    if (out.entries.capacity() - out.entries.size() < adding)
      grow_entries(out.entries, std::max(bound, out.entries.size() + adding), source);
    out.entries.push_back({r - 1, c - 1, v});
    if (adding == 2) out.entries.push_back({c - 1, r - 1, mirrored});
    ++seen;
  }
  if (seen < h.entries)
    lex.fail("expected ", h.entries, " entries, found ", seen, " (end of file)");
  return out;
}

// The (rows + 1)-entry row pointers of a CSR are the one allocation a size line can ask
// for without entries to back it: bounded by MatrixMarketLimits::max_unbacked_bytes or 8
// bytes per input byte, whichever is larger.
template <class Index>
void check_unbacked(const MatrixMarketHeader& h, std::size_t input_bytes, std::string_view source,
                    const MatrixMarketLimits& limits) {
  const std::uint64_t need = (static_cast<std::uint64_t>(h.rows) + 1) * sizeof(Index);
  const std::uint64_t allowed = std::max<std::uint64_t>(
      limits.max_unbacked_bytes,
      input_bytes > std::numeric_limits<std::uint64_t>::max() / 8 ? std::numeric_limits<std::uint64_t>::max()
                                                                  : std::uint64_t{8} * input_bytes);
  if (need > allowed)
    throw ResourceError(message(
        source, ": the size line declares ", h.rows, " rows, whose row pointers need ", need,
        " bytes, more than the ", allowed, " bytes allowed for ", input_bytes,
        " bytes of input (max_unbacked_bytes=", limits.max_unbacked_bytes,
        "); hint: raise MatrixMarketLimits::max_unbacked_bytes if the file is genuine"));
}

template <class T, class Index>
Csr<T, Index> mm_to_csr(const MatrixMarketTriplets<T>& m, std::string_view source,
                        Duplicates policy) {
  const auto slash = source.find_last_of('/');
  std::string name(slash == std::string_view::npos ? source : source.substr(slash + 1));
  try {
    return Csr<T, Index>::from_triplets(m.header.rows, m.header.cols, m.entries, policy,
                                        std::move(name));
  } catch (const FormatError& e) {  // duplicates (policy error, integer sum overflow)
    throw FormatError(message(source, ": ", e.what(), " (coordinates 0-based)"));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  const std::uint64_t bytes =
      (static_cast<std::uint64_t>(m.header.rows) + 1) * sizeof(Index) * 2 +
      static_cast<std::uint64_t>(m.entries.size()) * (sizeof(Index) + sizeof(T));
  throw ResourceError(message("cannot allocate about ", bytes, " bytes for the ", m.header.rows,
                              "x", m.header.cols, " CSR with ", m.entries.size(),
                              " entries read from '", source, "': out of memory"));
}

template <class T, class Index>
Csr<T, Index> parse_mm_csr(std::string_view text, std::string_view source, Duplicates policy,
                           const MatrixMarketLimits& limits) {
  auto m = parse_mm<T>(text, source, std::numeric_limits<Index>::max(), limits);
  check_unbacked<Index>(m.header, text.size(), source, limits);
  return mm_to_csr<T, Index>(m, source, policy);
}

}  // namespace detail

template <class T>
MatrixMarketTriplets<T> parse_matrix_market_triplets(
    std::string_view text, std::string_view source = "<memory>",
    std::int64_t max_extent = std::numeric_limits<std::int64_t>::max(),
    const MatrixMarketLimits& limits = {}) {
  return detail::parse_mm<T>(text, source, max_extent, limits);
}

template <class T>
MatrixMarketTriplets<T> read_matrix_market_triplets(const std::string& path,
                                                    const MatrixMarketLimits& limits = {}) {
  const std::string text = read_file_bytes(path, limits.file_limits());
  return detail::parse_mm<T>(text, path, std::numeric_limits<std::int64_t>::max(), limits);
}

// Reads a coordinate file into a Csr named after the file; duplicates merged by `policy`.
template <class T, class Index = std::int32_t>
Csr<T, Index> read_matrix_market(const std::string& path, Duplicates policy = Duplicates::sum,
                                 const MatrixMarketLimits& limits = {}) {
  const std::string text = read_file_bytes(path, limits.file_limits());
  return detail::parse_mm_csr<T, Index>(text, path, policy, limits);
}

// The same from the bytes of a file held in memory (gunzipped first if they start with the
// gzip magic bytes); `source` names the input in messages and the Csr.
template <class T, class Index = std::int32_t>
Csr<T, Index> parse_matrix_market(std::string_view bytes, std::string_view source = "<memory>",
                                  Duplicates policy = Duplicates::sum,
                                  const MatrixMarketLimits& limits = {}) {
  if (is_gzip(bytes)) {
    const std::string text = gunzip(bytes, source, limits.max_decompressed_bytes);
    return detail::parse_mm_csr<T, Index>(text, source, policy, limits);
  }
  return detail::parse_mm_csr<T, Index>(bytes, source, policy, limits);
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


// Under SPINDLE_SEPARATE_COMPILATION the reader's common instantiations (float and double
// values, 32- and 64-bit indices) are compiled once in libspindle_runtime (impl/spindle.cpp),
// not in every user file that reads a matrix.
#define SPINDLE_MM_INSTANCES(EXTERN)                                                                    \
  EXTERN template MatrixMarketTriplets<float> detail::parse_mm<float>(std::string_view, std::string_view, \
                                                                       std::int64_t, const MatrixMarketLimits&); \
  EXTERN template MatrixMarketTriplets<double> detail::parse_mm<double>(                                 \
      std::string_view, std::string_view, std::int64_t, const MatrixMarketLimits&);                     \
  SPINDLE_MM_CSR_INSTANCE(EXTERN, float, std::int32_t)                                                  \
  SPINDLE_MM_CSR_INSTANCE(EXTERN, float, std::int64_t)                                                  \
  SPINDLE_MM_CSR_INSTANCE(EXTERN, double, std::int32_t)                                                 \
  SPINDLE_MM_CSR_INSTANCE(EXTERN, double, std::int64_t)
#define SPINDLE_MM_CSR_INSTANCE(EXTERN, T, Index)                                                       \
  EXTERN template Csr<T, Index> detail::parse_mm_csr<T, Index>(std::string_view, std::string_view, Duplicates, \
                                                                const MatrixMarketLimits&);
#ifdef SPINDLE_SEPARATE_COMPILATION
SPINDLE_MM_INSTANCES(extern)
#endif

}  // namespace spindle
