// Helpers shared by the format tests: temporary files (plain or gzip) and the data folder.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>

// Checks that expr throws Type (or a subclass) whose what() satisfies a string matcher.
#define SPINDLE_CHECK_THROWS(expr, Type, matcher) \
  CHECK_THROWS_MATCHES(expr, Type, ::spindle_format_test::what(matcher))

#ifndef SPINDLE_TEST_DATA_DIR
#define SPINDLE_TEST_DATA_DIR "../shared/data"
#endif

namespace spindle_format_test {

// Applies a string matcher (Contains, Contains && Contains, ...) to an exception's what().
template <class M>
class WhatMatcher : public Catch::MatcherBase<std::exception> {
 public:
  explicit WhatMatcher(M m) : m_(std::move(m)) {}
  bool match(const std::exception& e) const override { return m_.match(e.what()); }
  std::string describe() const override { return "what() " + m_.describe(); }

 private:
  M m_;
};
template <class M>
WhatMatcher<M> what(M m) {
  return WhatMatcher<M>(std::move(m));
}

// A file under the system temp folder, removed when the object goes away.
class TempFile {
 public:
  explicit TempFile(std::string_view suffix) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("spindle_fmt_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
              std::string(suffix)))
                .string();
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& path() const { return path_; }

  // Writes `text` as is (gzip = false) or gzip-compressed, independent of Spindle's writer.
  const TempFile& write(std::string_view text, bool gzip = false) const {
    if (gzip) {
      gzFile f = gzopen(path_.c_str(), "wb");
      gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
      gzclose(f);
    } else {
      std::ofstream(path_, std::ios::binary) << text;
    }
    return *this;
  }
  std::string read_raw() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string path_;
};

// Path of a file in the shared data folder, or "" (and a warning) when the folder is absent.
inline std::string data_file(std::string_view rel) {
  const std::filesystem::path p = std::filesystem::path(SPINDLE_TEST_DATA_DIR) / rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

}  // namespace spindle_format_test
