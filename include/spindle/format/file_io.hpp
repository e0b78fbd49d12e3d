// Whole-file reading and chunked writing for the text formats, with transparent gzip:
// read_file_bytes() recognises gzip by its magic bytes (1f 8b), whatever the extension;
// FileWriter compresses when asked to (Matrix Market writing does so for paths ending in
// ".gz"). Failures throw IOError naming the path and the system's or zlib's reason.
//
// Resources are bounded: the decompressed size of gzip input is limited by
// `max_decompressed_bytes` (default kDefaultMaxDecompressedBytes = 4 GiB; pass a larger
// value for bigger files, a smaller one for untrusted input); the raw bytes of a regular file
// by max_file_bytes, and of anything else (pipes, devices, /proc) by max_stream_bytes
// (FileReadLimits). Exceeding a bound, or running out of memory while reading, throws
// ResourceError naming the file, the size and the limit.
// gunzip() does the same for bytes already in memory.
#pragma once

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "spindle/support/error.hpp"

namespace spindle {

// Default bound on the decompressed size of one gzip input (4 GiB).
inline constexpr std::uint64_t kDefaultMaxDecompressedBytes = std::uint64_t{4} << 30;

inline bool ends_with_gz(std::string_view path) {
  return path.size() >= 3 && path.substr(path.size() - 3) == ".gz";
}

// True when `bytes` starts with the gzip magic bytes 1f 8b.
inline bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

namespace detail {

// Resizes `s` to `n` bytes; allocation failure becomes a ResourceError naming `what`.
inline void resize_or_throw(std::string& s, std::size_t n, std::string_view source,
                            std::string_view what) {
  try {
    s.resize(n);
  } catch (const std::bad_alloc&) {
    throw ResourceError(message("cannot allocate ", n, " bytes for ", what, " of '", source,
                                "': out of memory"));
  } catch (const std::length_error&) {
    throw ResourceError(message("cannot allocate ", n, " bytes for ", what, " of '", source,
                                "': larger than a string can hold"));
  }
}

}  // namespace detail

// Inflates gzip data held in memory (one member or several concatenated ones, as gzip
// writes them). Corrupt or truncated data, or bytes after the last member that are not
// another member, throw IOError "cannot read gzip file '<source>': ... (truncated or
// corrupt)"; output beyond max_decompressed_bytes throws ResourceError.
inline std::string gunzip(std::string_view compressed, std::string_view source,
                          std::uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes) {
  const auto corrupt = [&](std::string_view why) {
    return IOError(message("cannot read gzip file '", source, "': ", why, " (truncated or corrupt)"));
  };
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw ResourceError(message("cannot decompress '", source, "': zlib could not allocate its state"));
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end_guard{&zs};

  // The output may hold max + 1 bytes, so that exceeding the limit is seen.
  const std::uint64_t cap64 =
      std::min<std::uint64_t>(max_decompressed_bytes, std::string().max_size() - 1) + 1;
  const auto cap = static_cast<std::size_t>(cap64);
  std::string out;
  std::size_t produced = 0;
  const unsigned char* in = reinterpret_cast<const unsigned char*>(compressed.data());
  std::size_t left = compressed.size();
  for (;;) {
    if (produced == out.size()) {
      if (out.size() >= cap)
        throw ResourceError(message("'", source, "' decompresses to more than ",
                                    max_decompressed_bytes,
                                    " bytes (max_decompressed_bytes); hint: raise the limit if "
                                    "the file is genuine"));
      const std::size_t want =
          std::min(cap, std::max<std::size_t>(out.size() * 2, std::size_t{1} << 16));
      detail::resize_or_throw(out, want, source, "the decompressed data");
    }
    zs.next_in = const_cast<unsigned char*>(in);
    zs.avail_in = static_cast<uInt>(std::min<std::size_t>(left, UINT_MAX));
    zs.next_out = reinterpret_cast<unsigned char*>(out.data() + produced);
    zs.avail_out = static_cast<uInt>(std::min<std::size_t>(out.size() - produced, UINT_MAX));
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t consumed = in_before - zs.avail_in;
    in += consumed;
    left -= consumed;
    produced += out_before - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (left == 0) break;
      if (!is_gzip(std::string_view(reinterpret_cast<const char*>(in), left)))
        throw corrupt(message(left, " bytes of trailing data after the gzip stream"));
      if (inflateReset(&zs) != Z_OK) throw corrupt("zlib could not restart");
      continue;
    }
    if (rc == Z_MEM_ERROR)
      throw ResourceError(message("cannot decompress '", source, "': zlib ran out of memory"));
    if (rc == Z_BUF_ERROR || (rc == Z_OK && consumed == 0 && out_before == zs.avail_out)) {
      if (zs.avail_out == 0) continue;  // output full: grow
      if (left == 0) throw corrupt("unexpected end of file");
      throw corrupt("no progress");
    }
    if (rc != Z_OK) throw corrupt(zs.msg ? zs.msg : "invalid compressed data");
    if (left == 0 && zs.avail_out != 0) throw corrupt("unexpected end of file");
  }
  if (produced > max_decompressed_bytes)
    throw ResourceError(message("'", source, "' decompresses to more than ", max_decompressed_bytes,
                                " bytes (max_decompressed_bytes); hint: raise the limit if the "
                                "file is genuine"));
  out.resize(produced);
  return out;
}

// Bounds on the raw bytes read from one file (before any gunzip). A regular file may be
// read up to max_file_bytes (default 4 GiB); anything else that can be opened — a pipe,
// /dev/stdin, a device such as /dev/zero, a /proc file — has no size to check in advance
// and is read as a bounded stream, up to max_stream_bytes (default 256 MiB). Beyond either
// bound: ResourceError naming the file, before the memory is allocated.
struct FileReadLimits {
  std::uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes;
  std::uint64_t max_file_bytes = std::uint64_t{4} << 30;
  std::uint64_t max_stream_bytes = std::uint64_t{256} << 20;
};

// The bytes of a file, gunzipped if it starts with the gzip magic bytes (sizes bounded by
// `limits`, see above).
inline std::string read_file_bytes(const std::string& path, const FileReadLimits& limits) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  SPINDLE_CHECK(f != nullptr, IOError, "cannot open '", path, "': ", std::strerror(errno));
  struct Close {
    std::FILE*& f;
    ~Close() {
      if (f) std::fclose(f);
    }
  } close_guard{f};
  struct stat st {};
  SPINDLE_CHECK(::fstat(::fileno(f), &st) == 0, IOError, "cannot read '", path, "': ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw IOError(message("cannot read '", path, "': it is a directory"));
  const bool regular = S_ISREG(st.st_mode);
  const std::uint64_t limit = regular ? limits.max_file_bytes : limits.max_stream_bytes;
  const char* limit_name = regular ? "max_file_bytes" : "max_stream_bytes";
  const auto too_big = [&](std::uint64_t at_least) {
    return ResourceError(message("'", path, "' is ", regular ? "" : "a stream (not a regular file) of ",
                                 regular ? "" : "at least ", at_least, " bytes, more than the limit of ", limit,
                                 " bytes (FileReadLimits::", limit_name, "); hint: raise the limit if the input is ",
                                 "genuine"));
  };
  std::string out;
  const auto grow_to = [&](std::uint64_t n) {
    if (n <= out.capacity()) return;
    try {
      out.reserve(static_cast<std::size_t>(n));
    } catch (const std::exception&) {  // bad_alloc or length_error
      throw ResourceError(message("cannot allocate ", n, " bytes to read '", path, "': out of memory"));
    }
  };
  if (regular) {
    const auto size = static_cast<std::uint64_t>(st.st_size);
    if (size > limit) throw too_big(size);
    grow_to(size);
  }
  char buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) {
    const std::uint64_t need = out.size() + got;
    if (need > limit) throw too_big(need);  // also a regular file that grew while being read
    // Grow geometrically but never past the limit, so a stream allocates at most its bound.
    if (need > out.capacity()) grow_to(std::min<std::uint64_t>(limit, std::max<std::uint64_t>(need, 2 * out.capacity())));
    out.append(buf, got);
  }
  const bool failed = std::ferror(f) != 0;
  const int saved = errno;
  SPINDLE_CHECK(!failed, IOError, "cannot read '", path, "': ", std::strerror(saved));
  if (is_gzip(out)) return gunzip(out, path, limits.max_decompressed_bytes);
  return out;
}

inline std::string read_file_bytes(const std::string& path,
                                   std::uint64_t max_decompressed_bytes = kDefaultMaxDecompressedBytes) {
  FileReadLimits limits;
  limits.max_decompressed_bytes = max_decompressed_bytes;
  return read_file_bytes(path, limits);
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
