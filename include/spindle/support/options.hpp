// Run-time options of Spindle. Environment variables are read once, here, into an
// Options value that a Runtime owns; nothing else in the library reads the environment
// (the CUDA layer has its own, runtime/cuda/cuda_options.hpp).
//
//   SPINDLE_CACHE_DIR      disk-cache directory, an absolute path (default:
//                          $XDG_CACHE_HOME/spindle, else $HOME/.cache/spindle, else no
//                          disk cache). The directory must belong to the current user and
//                          not be writable by group or others, or the disk cache is not
//                          used (runtime/kernel_cache.hpp says why, once, on stderr)
//   SPINDLE_DISK_CACHE     0/off/false disables the disk cache, 1/on/true enables it
//   SPINDLE_ENGINE         "orc" (in-process Clang + LLVM ORC) or "system" (system C
//                          compiler + dlopen); default: orc when built with LLVM
//   SPINDLE_CC             command of the system engine's compiler, split on blanks,
//                          e.g. "ccache gcc" (default: cc)
//   SPINDLE_NUM_THREADS    threads of the runtime pool, 1..4096 (default: hardware
//                          concurrency)
//   SPINDLE_DEBUG          1/on/true logs the engine choice, each pass and its time, JIT
//                          compile times and kernel-cache hits and misses to stderr
//   SPINDLE_DUMP_DIR       an existing, writable directory where the IR after each pass
//                          and the generated source are written
//   SPINDLE_LOOP_ORDER     "auto" (default: order_iterations picks each iteration's loop
//                          order) or "written" (loops in the order the kernel lists its
//                          iterators; for measuring orders, see spindle-bench --loop-order)
//   SPINDLE_EINSUM_PATH    "auto" (default: a multi-operand einsum may run as a sequence of
//                          statements, autosched/einsum_path.hpp) or "single" (always one
//                          statement; for measuring, see spindle-bench --einsum)
//
// Every value is validated: a malformed one raises UserError (UnavailableError for
// SPINDLE_ENGINE=orc in a build without LLVM) naming the variable, its value and what is
// accepted; nothing is silently ignored. Booleans accept 0/1/on/off/true/false in any
// case. A variable set to the empty string counts as unset. The default runtime reads the
// environment on the first kernel call, so the error surfaces there (runtime/runtime.hpp).
#pragma once

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "spindle/support/error.hpp"

namespace spindle {

// Upper bound of SPINDLE_NUM_THREADS / Options::num_threads.
inline constexpr int kMaxThreads = 4096;

namespace detail {

inline std::string env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

inline std::string lower_ascii(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

// 0/off/false -> false, 1/on/true -> true (any case); UserError otherwise.
inline bool parse_env_bool(const char* name, const std::string& value) {
  std::string v = lower_ascii(value);
  if (v == "1" || v == "on" || v == "true") return true;
  if (v == "0" || v == "off" || v == "false") return false;
  throw UserError(message(name, "='", value, "' is not a boolean",
                          "\n  hint: use one of 0, 1, on, off, true, false"));
}

// A thread count in [1, kMaxThreads], digits only; UserError otherwise.
inline int parse_env_threads(const char* name, const std::string& value) {
  bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string::npos;
  long n = !digits ? -1 : value.size() > 9 ? kMaxThreads + 1 : std::strtol(value.c_str(), nullptr, 10);
  SPINDLE_CHECK(n >= 1 && n <= kMaxThreads, UserError, name, "='", value, "' is not a thread count: ",
                digits ? "" : "not a decimal number; ", "expected an integer from 1 to ", kMaxThreads,
                "\n  hint: unset it to use every core");
  return static_cast<int>(n);
}

// An existing, writable directory; UserError naming what is wrong otherwise.
inline void check_env_directory(const char* name, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    throw UserError(message(name, "='", path, "' cannot be used: ",
                            std::error_code(err, std::generic_category()).message(),
                            "\n  hint: create the directory first, or unset ", name));
  }
  SPINDLE_CHECK(S_ISDIR(st.st_mode), UserError, name, "='", path, "' is not a directory",
                "\n  hint: point it at an existing directory, or unset ", name);
  SPINDLE_CHECK(::access(path.c_str(), W_OK | X_OK) == 0, UserError, name, "='", path,
                "' is a directory this process cannot write to", "\n  hint: chmod u+w it or choose another one");
}

// An absolute path that is a directory where it exists (it is created on first use).
inline std::string env_cache_dir(const std::string& value) {
  SPINDLE_CHECK(value[0] == '/', UserError, "SPINDLE_CACHE_DIR='", value, "' is not an absolute path",
                "\n  hint: use a path that starts with '/', e.g. $HOME/.cache/spindle");
  struct stat st {};
  SPINDLE_CHECK(::stat(value.c_str(), &st) != 0 || S_ISDIR(st.st_mode), UserError, "SPINDLE_CACHE_DIR='", value,
                "' exists and is not a directory", "\n  hint: point it at a directory, or unset it");
  return value;
}

// SPINDLE_CACHE_DIR, else $XDG_CACHE_HOME/spindle, else $HOME/.cache/spindle, else "" (no
// disk cache). A relative XDG_CACHE_HOME is invalid by the XDG specification and skipped.
inline std::string default_cache_dir() {
  if (std::string dir = env_value("SPINDLE_CACHE_DIR"); !dir.empty()) return env_cache_dir(dir);
  if (std::string xdg = env_value("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') return xdg + "/spindle";
  if (std::string home = env_value("HOME"); !home.empty() && home[0] == '/') return home + "/.cache/spindle";
  return "";
}

// "orc" or "system"; UserError for other names, UnavailableError for orc without LLVM.
inline std::string env_engine(const std::string& value) {
  SPINDLE_CHECK(value == "orc" || value == "system", UserError, "SPINDLE_ENGINE='", value,
                "' is not an engine: the accepted values are 'orc' (in-process Clang + LLVM ORC) and "
                "'system' (system C compiler + dlopen)");
#ifndef SPINDLE_WITH_ORC
  SPINDLE_CHECK(value != "orc", UnavailableError,
                "SPINDLE_ENGINE='orc' was requested but this build of Spindle has no LLVM (SPINDLE_WITH_ORC is "
                "not defined)\n  hint: use SPINDLE_ENGINE=system (the engine this build uses by default), or "
                "configure with SPINDLE_WITH_LLVM=ON");
#endif
  return value;
}

// At least one word (split on blanks like the system engine does).
inline std::string env_compiler(const std::string& value) {
  SPINDLE_CHECK(value.find_first_not_of(" \t") != std::string::npos, UserError, "SPINDLE_CC='", value,
                "' names no compiler\n  hint: set it to a command such as 'cc' or 'ccache gcc', or unset it");
  SPINDLE_CHECK(value.find_first_of("\n\r") == std::string::npos, UserError, "SPINDLE_CC='", value,
                "' contains a line break\n  hint: set it to a command such as 'cc' or 'ccache gcc'");
  return value;
}

}  // namespace detail

struct Options {
  std::string cache_dir;  // "" = no disk cache
  bool disk_cache = true;
  std::string engine;  // "" = default
  std::string system_cc = "cc";
  int num_threads = 0;  // 0 = hardware concurrency
  bool debug = false;
  std::string dump_dir;
  bool keep_loop_order = false;  // SPINDLE_LOOP_ORDER=written
  bool einsum_single = false;    // SPINDLE_EINSUM_PATH=single

  // Throws UserError (or UnavailableError, see the top of this file) for a bad value.
  static Options from_env() {
    using namespace detail;
    Options o;
    o.cache_dir = default_cache_dir();
    if (std::string v = env_value("SPINDLE_DISK_CACHE"); !v.empty()) o.disk_cache = parse_env_bool("SPINDLE_DISK_CACHE", v);
    if (std::string v = env_value("SPINDLE_ENGINE"); !v.empty()) o.engine = env_engine(v);
    if (std::string v = env_value("SPINDLE_CC"); !v.empty()) o.system_cc = env_compiler(v);
    if (std::string v = env_value("SPINDLE_NUM_THREADS"); !v.empty()) o.num_threads = parse_env_threads("SPINDLE_NUM_THREADS", v);
    if (o.num_threads <= 0) o.num_threads = static_cast<int>(std::thread::hardware_concurrency());
    if (o.num_threads <= 0) o.num_threads = 1;
    if (o.num_threads > kMaxThreads) o.num_threads = kMaxThreads;
    if (std::string v = env_value("SPINDLE_DEBUG"); !v.empty()) o.debug = parse_env_bool("SPINDLE_DEBUG", v);
    if (std::string v = env_value("SPINDLE_DUMP_DIR"); !v.empty()) {
      check_env_directory("SPINDLE_DUMP_DIR", v);
      o.dump_dir = v;
    }
    if (std::string v = env_value("SPINDLE_LOOP_ORDER"); !v.empty()) {
      SPINDLE_CHECK(v == "auto" || v == "written", UserError, "SPINDLE_LOOP_ORDER='", v,
                    "' is not a loop-order mode: the accepted values are 'auto' (Spindle picks the order of "
                    "each iteration's loops) and 'written' (the order the kernel lists its iterators)");
      o.keep_loop_order = v == "written";
    }
    if (std::string v = env_value("SPINDLE_EINSUM_PATH"); !v.empty()) {
      SPINDLE_CHECK(v == "auto" || v == "single", UserError, "SPINDLE_EINSUM_PATH='", v,
                    "' is not an einsum path mode: the accepted values are 'auto' (a multi-operand einsum may "
                    "run as a sequence of statements) and 'single' (always one statement)");
      o.einsum_single = v == "single";
    }
    return o;
  }
};

}  // namespace spindle
