// Whole-file reading and chunked writing for the text formats, with transparent gzip:
// read_file_bytes() recognises gzip by its magic bytes (1f 8b), whatever the extension;
// FileWriter compresses when asked to (Matrix Market writing does so for paths ending in
// ".gz"). Failures throw IOError naming the path and the system's or zlib's reason.
#pragma once

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "spindle/support/error.hpp"

namespace spindle {

inline bool ends_with_gz(std::string_view path) {
  return path.size() >= 3 && path.substr(path.size() - 3) == ".gz";
}

namespace detail {

inline std::string read_gzip(const std::string& path, long size_hint) {
  gzFile f = gzopen(path.c_str(), "rb");
  SPINDLE_CHECK(f != nullptr, IOError, "cannot open '", path,
                "': ", errno ? std::strerror(errno) : "zlib could not allocate its state");
  gzbuffer(f, 1u << 18);
  std::string out;
  out.reserve(size_hint > 0 ? static_cast<std::size_t>(size_hint) * 4 : 1u << 20);
  constexpr unsigned chunk = 1u << 20;
  for (;;) {
    const std::size_t old = out.size();
    out.resize(old + chunk);
    const int got = gzread(f, out.data() + old, chunk);
    if (got < 0) {
      int err = 0;
      const std::string why = gzerror(f, &err);
      gzclose_r(f);
      throw IOError(
          message("cannot read gzip file '", path, "': ", why, " (truncated or corrupt)"));
    }
    out.resize(old + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  int err = Z_OK;
  const std::string why = gzerror(f, &err);
  gzclose_r(f);
  SPINDLE_CHECK(err == Z_OK || err == Z_STREAM_END, IOError, "cannot read gzip file '", path,
                "': ", why, " (truncated or corrupt)");
  return out;
}

}  // namespace detail

// The bytes of a file, gunzipped if it starts with the gzip magic bytes.
inline std::string read_file_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  SPINDLE_CHECK(f != nullptr, IOError, "cannot open '", path, "': ", std::strerror(errno));
  long size = -1;  // known only for regular files
  struct stat st;
  if (::fstat(::fileno(f), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      std::fclose(f);
      throw IOError(message("cannot read '", path, "': it is a directory"));
    }
    if (S_ISREG(st.st_mode)) size = static_cast<long>(st.st_size);
  }
  unsigned char magic[2] = {0, 0};
  const std::size_t m = std::fread(magic, 1, 2, f);
  if (m == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    std::fclose(f);
    return detail::read_gzip(path, size);
  }
  std::string out(reinterpret_cast<const char*>(magic), m);
  if (size > 0) out.reserve(static_cast<std::size_t>(size));
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  const int saved = errno;
  std::fclose(f);
  SPINDLE_CHECK(!failed, IOError, "cannot read '", path, "': ", std::strerror(saved));
  return out;
}

// Buffered writer to a plain or gzip-compressed file. close() reports errors; the
// destructor closes silently (never throws).
class FileWriter {
 public:
  FileWriter(std::string path, bool gzip) : path_(std::move(path)), gzip_(gzip) {
    if (gzip_) {
      gz_ = gzopen(path_.c_str(), "wb6");
      SPINDLE_CHECK(gz_ != nullptr, IOError, "cannot create '", path_, "': ", std::strerror(errno));
    } else {
      file_ = std::fopen(path_.c_str(), "wb");
      SPINDLE_CHECK(file_ != nullptr, IOError, "cannot create '", path_,
                    "': ", std::strerror(errno));
    }
    buffer_.reserve(kFlushAt + 256);
  }
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  ~FileWriter() {
    if (gz_) gzclose_w(gz_);
    if (file_) std::fclose(file_);
  }

  std::string& buffer() { return buffer_; }
  void append(std::string_view s) {
    buffer_.append(s);
    if (buffer_.size() >= kFlushAt) flush();
  }
  // Call after appending to buffer() directly.
  void maybe_flush() {
    if (buffer_.size() >= kFlushAt) flush();
  }
  void flush() {
    if (buffer_.empty()) return;
    bool ok;
    if (gzip_)
      ok = gzwrite(gz_, buffer_.data(), static_cast<unsigned>(buffer_.size())) ==
           static_cast<int>(buffer_.size());
    else
      ok = std::fwrite(buffer_.data(), 1, buffer_.size(), file_) == buffer_.size();
    SPINDLE_CHECK(ok, IOError, "cannot write '", path_, "': ", std::strerror(errno));
    buffer_.clear();
  }
  void close() {
    flush();
    int rc;
    if (gzip_) {
      rc = gzclose_w(gz_);
      gz_ = nullptr;
    } else {
      rc = std::fclose(file_);
      file_ = nullptr;
    }
    SPINDLE_CHECK(rc == 0, IOError, "cannot finish writing '", path_, "': ", std::strerror(errno));
  }

 private:
  static constexpr std::size_t kFlushAt = 1u << 20;
  std::string path_;
  bool gzip_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  std::string buffer_;
};

}  // namespace spindle
