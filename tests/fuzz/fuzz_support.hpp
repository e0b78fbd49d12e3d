// Shared pieces of the libFuzzer targets: the rule that only spindle::Error may escape the
// code under test (anything else, and any sanitizer report, is a finding), and a per-process
// scratch file for the entry points that only take paths.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "spindle/support/error.hpp"

namespace spindle_fuzz {

// Runs f(); a spindle::Error is the expected answer to bad input, anything else aborts
// (libFuzzer then saves the input as a crash).
template <class F>
bool expect_only_spindle_errors(const char* what, F&& f) {
  try {
    f();
    return true;
  } catch (const spindle::Error&) {
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FINDING: %s threw a non-spindle exception: %s\n", what, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "FINDING: %s threw a non-std exception\n", what);
    std::abort();
  }
}

// Aborts with a message when an invariant of a successfully built structure does not hold.
#define SPINDLE_FUZZ_ASSERT(cond)                                                        \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "FINDING: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                               \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

// A file in the temp folder owned by this process, rewritten per input.
// Removed at exit (a crashing run leaves it behind in the temp folder).
inline const std::string& scratch_path() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/spindle_fuzz_" + std::to_string(::getpid());
  }();
  static const bool registered = [] {
    std::atexit([] { std::remove(scratch_path().c_str()); });
    return true;
  }();
  (void)registered;
  return path;
}

inline void write_scratch(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
  std::fclose(f);
}

}  // namespace spindle_fuzz
