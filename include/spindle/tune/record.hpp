// Tuning records: what a tuner chose for one kernel, input and machine, so later runs reuse the
// choice without measuring again. One JSON object per line (JSON Lines) in a file the caller
// names; a line is appended with one O_APPEND write, so two processes tuning at once both keep
// their lines, and a reader sees whole lines only. Example line:
//
//   {"version":1,"kernel":"spmm","dtype":"f32","index":"i32","rows":15439,"cols":15439,
//    "nnz":252241,"fingerprint":"9c1f...","feature":32,"threads":2,"machine":"41d0...",
//    "choice":"bsr 4x4","tuning_s":1.92,"times_ms":{"csr":2.41,"bsr 4x4":1.22}}
//
// The key is (kernel, dtype, index, fingerprint, feature, threads, machine); a later line with
// the same key wins. A file that cannot be read, a line that is not such an object, or a
// field of the wrong type raises CacheError naming the file, the line and what was wrong: a
// broken record file is reported, never silently ignored or overwritten.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "spindle/runtime/posix.hpp"
#include "spindle/support/error.hpp"

namespace spindle::tune {

struct TuningRecord {
  std::string kernel;       // "spmm"
  std::string dtype;        // value type, "f32" / "f64"
  std::string index;        // index type, "i32" / "i64"
  std::int64_t rows = 0, cols = 0, nnz = 0;
  std::string fingerprint;  // csr_fingerprint(): the matrix's structure
  std::int64_t feature = 0; // K, the dense operand's column count
  std::int64_t threads = 0; // runtime threads the times were measured with
  std::string machine;      // hash of the engine identity (compiler, target, CPU, features)
  std::string choice;       // the winning candidate's name
  double tuning_s = 0;      // wall time the tuning took
  std::vector<std::pair<std::string, double>> times_ms;  // measured candidates, median ms per call

  bool same_key(const TuningRecord& o) const {
    return kernel == o.kernel && dtype == o.dtype && index == o.index && fingerprint == o.fingerprint &&
           feature == o.feature && threads == o.threads && machine == o.machine && rows == o.rows &&
           cols == o.cols && nnz == o.nnz;
  }
};

namespace detail {

inline void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else out += c;
  }
  out += '"';
}

inline std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", std::isfinite(v) ? v : 0.0);
  return buf;
}

// A strict reader of the one object shape a record line has: string, integer and number
// fields and one nested object of numbers. Errors name the column.
class RecordLineParser {
 public:
  explicit RecordLineParser(std::string_view s) : s_(s) {}

  // Fills `r`; returns "" or what is wrong.
  std::string parse(TuningRecord& r) {
    std::map<std::string, bool> seen;
    skip();
    if (!eat('{')) return at("expected '{'");
    skip();
    if (!eat('}')) {
      for (;;) {
        skip();
        std::string key;
        if (!string(key)) return at("expected a field name in quotes");
        skip();
        if (!eat(':')) return at("expected ':' after \"" + key + "\"");
        skip();
        if (seen[key]) return at("field \"" + key + "\" appears twice");
        seen[key] = true;
        if (std::string e = field(key, r); !e.empty()) return e;
        skip();
        if (eat(',')) continue;
        if (eat('}')) break;
        return at("expected ',' or '}'");
      }
    }
    skip();
    if (p_ != s_.size()) return at("text after the object");
    for (const char* k : {"version", "kernel", "dtype", "index", "rows", "cols", "nnz", "fingerprint", "feature",
                          "threads", "machine", "choice"})
      if (!seen[k]) return std::string("field \"") + k + "\" is missing";
    return {};
  }

 private:
  std::string field(const std::string& key, TuningRecord& r) {
    auto str = [&](std::string& dst) -> std::string {
      return string(dst) ? std::string() : at("field \"" + key + "\" must be a string");
    };
    auto integer = [&](std::int64_t& dst) -> std::string {
      double v = 0;
      if (!number(v) || v != std::floor(v) || std::fabs(v) > 9.0e15)
        return at("field \"" + key + "\" must be an integer");
      dst = static_cast<std::int64_t>(v);
      return {};
    };
    if (key == "version") {
      std::int64_t v = 0;
      if (std::string e = integer(v); !e.empty()) return e;
      if (v != 1) return "version " + std::to_string(v) + " is not one this Spindle reads (1)";
      return {};
    }
    if (key == "kernel") return str(r.kernel);
    if (key == "dtype") return str(r.dtype);
    if (key == "index") return str(r.index);
    if (key == "fingerprint") return str(r.fingerprint);
    if (key == "machine") return str(r.machine);
    if (key == "choice") return str(r.choice);
    if (key == "rows") return integer(r.rows);
    if (key == "cols") return integer(r.cols);
    if (key == "nnz") return integer(r.nnz);
    if (key == "feature") return integer(r.feature);
    if (key == "threads") return integer(r.threads);
    if (key == "tuning_s") return number(r.tuning_s) ? std::string() : at("field \"tuning_s\" must be a number");
    if (key == "times_ms") {
      if (!eat('{')) return at("field \"times_ms\" must be an object");
      skip();
      if (eat('}')) return {};
      for (;;) {
        skip();
        std::string name;
        double v = 0;
        if (!string(name)) return at("expected a candidate name in quotes in \"times_ms\"");
        skip();
        if (!eat(':')) return at("expected ':' in \"times_ms\"");
        skip();
        if (!number(v)) return at("the time of \"" + name + "\" must be a number");
        r.times_ms.emplace_back(name, v);
        skip();
        if (eat(',')) continue;
        if (eat('}')) return {};
        return at("expected ',' or '}' in \"times_ms\"");
      }
    }
    return at("unknown field \"" + key + "\"");
  }

  void skip() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r')) ++p_;
  }
  bool eat(char c) {
    if (p_ < s_.size() && s_[p_] == c) return ++p_, true;
    return false;
  }
  bool string(std::string& out) {
    if (!eat('"')) return false;
    out.clear();
    while (p_ < s_.size()) {
      const char c = s_[p_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= s_.size()) return false;
      const char e = s_[p_++];
      if (e == '"' || e == '\\' || e == '/') out += e;
      else if (e == 'n') out += '\n';
      else if (e == 't') out += '\t';
      else if (e == 'u' && p_ + 4 <= s_.size()) {
        unsigned v = 0;
        for (int i = 0; i < 4; ++i) {
          const char h = s_[p_++];
          if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
          v = v * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        if (v >= 0x80) return false;  // records hold ASCII only
        out += static_cast<char>(v);
      } else return false;
    }
    return false;
  }
  bool number(double& v) {
    const std::size_t b = p_;
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    while (p_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p_])) || s_[p_] == '.' || s_[p_] == 'e' ||
                              s_[p_] == 'E' || s_[p_] == '+' || s_[p_] == '-'))
      ++p_;
    if (p_ == b) return false;
    const std::string text(s_.substr(b, p_ - b));
    char* end = nullptr;
    errno = 0;
    v = std::strtod(text.c_str(), &end);
    return end == text.c_str() + text.size() && errno == 0 && std::isfinite(v);
  }
  std::string at(const std::string& what) const { return what + " (column " + std::to_string(p_ + 1) + ")"; }

  std::string_view s_;
  std::size_t p_ = 0;
};

}  // namespace detail

// The record as one line (no newline).
inline std::string to_json_line(const TuningRecord& r) {
  using detail::append_json_string;
  std::string s = "{\"version\":1,\"kernel\":";
  append_json_string(s, r.kernel);
  s += ",\"dtype\":", append_json_string(s, r.dtype);
  s += ",\"index\":", append_json_string(s, r.index);
  s += ",\"rows\":" + std::to_string(r.rows) + ",\"cols\":" + std::to_string(r.cols) + ",\"nnz\":" +
       std::to_string(r.nnz) + ",\"fingerprint\":";
  append_json_string(s, r.fingerprint);
  s += ",\"feature\":" + std::to_string(r.feature) + ",\"threads\":" + std::to_string(r.threads) + ",\"machine\":";
  append_json_string(s, r.machine);
  s += ",\"choice\":", append_json_string(s, r.choice);
  s += ",\"tuning_s\":" + detail::number_text(r.tuning_s) + ",\"times_ms\":{";
  for (std::size_t i = 0; i < r.times_ms.size(); ++i) {
    if (i) s += ',';
    append_json_string(s, r.times_ms[i].first);
    s += ':' + detail::number_text(r.times_ms[i].second);
  }
  return s + "}}";
}

// One line parsed; CacheError naming `where` (file:line) when it is not a record.
inline TuningRecord parse_record_line(std::string_view line, const std::string& where) {
  TuningRecord r;
  detail::RecordLineParser p(line);
  const std::string e = p.parse(r);
  SPINDLE_CHECK(e.empty(), CacheError, "tuning record ", where, ": ", e,
                "\n  hint: the file holds one JSON object per line as written by spindle::tune; remove or "
                "repair the line (or the file) and tune again");
  return r;
}

// Every record of the file, in order; a missing file has none. CacheError for a file that
// cannot be read (not a regular file, over 64 MiB, an I/O error) or a broken line.
inline std::vector<TuningRecord> read_records(const std::string& path) {
  const auto r = runtime::posix::read_regular_file(path, 64ull << 20);
  if (r.status == runtime::posix::ReadStatus::missing) return {};
  SPINDLE_CHECK(r.status != runtime::posix::ReadStatus::not_regular, CacheError, "tuning record file '", path,
                "' is a ", runtime::posix::file_type_name(r.mode), ", not a regular file");
  SPINDLE_CHECK(r.status != runtime::posix::ReadStatus::too_large, CacheError, "tuning record file '", path,
                "' is larger than 64 MiB (", r.size, " bytes); it is not a record file written by spindle::tune");
  SPINDLE_CHECK(r.status == runtime::posix::ReadStatus::ok, CacheError, "cannot read tuning record file '", path,
                "': ", runtime::posix::errno_text(r.err));
  std::vector<TuningRecord> out;
  const std::string_view text(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
  std::size_t line_no = 0, b = 0;
  while (b < text.size()) {
    std::size_t e = text.find('\n', b);
    if (e == std::string_view::npos) e = text.size();
    ++line_no;
    const std::string_view line = text.substr(b, e - b);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos)
      out.push_back(parse_record_line(line, "'" + path + "' line " + std::to_string(line_no)));
    b = e + 1;
  }
  return out;
}

// The last record of the file with the key of `key` (its choice and times are ignored).
inline std::optional<TuningRecord> find_record(const std::string& path, const TuningRecord& key) {
  std::optional<TuningRecord> found;
  for (auto& r : read_records(path))
    if (r.same_key(key)) found = std::move(r);
  return found;
}

// Appends the record as one line with one write (O_APPEND: concurrent writers keep whole
// lines). CacheError when the file cannot be opened or written.
inline void append_record(const std::string& path, const TuningRecord& rec) {
  const std::string line = to_json_line(rec) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  SPINDLE_CHECK(fd >= 0, CacheError, "cannot open tuning record file '", path,
                "' for appending: ", runtime::posix::errno_text(errno));
  const bool ok = runtime::posix::write_all(fd, line.data(), line.size());
  const int err = errno;
  ::close(fd);
  SPINDLE_CHECK(ok, CacheError, "cannot write tuning record file '", path, "': ", runtime::posix::errno_text(err));
}

}  // namespace spindle::tune
