// Error hierarchy of Spindle. Every failure a user can cause raises a subclass of
// spindle::Error whose message says what was attempted, on what, why it is wrong and,
// where one exists, a hint. Tests match stable substrings of these messages.
#pragma once

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace spindle {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Misuse of the DSL or of an API: wrong arity, unrelated axes, missing bindings.
class UserError : public Error {
 public:
  using Error::Error;
};

// Shapes of call arguments disagree with each other or with the kernel.
class ShapeError : public UserError {
 public:
  using UserError::UserError;
};

// Element or index dtype of an argument differs from what the kernel declares.
class DTypeError : public UserError {
 public:
  using UserError::UserError;
};

// Malformed input data: a CSR whose indptr is not monotone, indices out of range,
// a broken Matrix Market file. The message names the structure and the position.
class FormatError : public UserError {
 public:
  using UserError::UserError;
};

// A file could not be opened, read or written.
class IOError : public Error {
 public:
  using Error::Error;
};

// Generated code failed to compile. Carries the source, the compiler log and options.
class CompileError : public Error {
 public:
  CompileError(const std::string& what, std::string source, std::string log, std::string options)
      : Error(what), source_(std::move(source)), log_(std::move(log)), options_(std::move(options)) {}
  const std::string& source() const noexcept { return source_; }
  const std::string& log() const noexcept { return log_; }
  const std::string& options() const noexcept { return options_; }

 private:
  std::string source_, log_, options_;
};

// A failure while running a compiled kernel (driver error, thread pool failure).
class RuntimeError : public Error {
 public:
  using Error::Error;
};

// A library or engine that was asked for is not present; the message says what was
// looked for and where.
class UnavailableError : public Error {
 public:
  using Error::Error;
};

// A request for memory (or another bounded resource) exceeds a documented limit or cannot
// be met: input that declares gigabytes, a gzip stream that decompresses past its limit, an
// allocation that failed. The message names the size, the limit where there is one, and
// what it was for (the file).
class ResourceError : public Error {
 public:
  using Error::Error;
};

// A kernel-cache entry on disk is truncated, corrupted or from another format version.
class CacheError : public Error {
 public:
  using Error::Error;
};

// A bug in Spindle itself: an invariant of a pass does not hold. Names the pass.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {

inline void stream_all(std::ostringstream&) {}
template <class T, class... Rest>
void stream_all(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  stream_all(os, rest...);
}

}  // namespace detail

// Builds a message from pieces; only called on the failure path.
template <class... Parts>
std::string message(const Parts&... parts) {
  std::ostringstream os;
  detail::stream_all(os, parts...);
  return os.str();
}

inline std::string where(const std::source_location& loc) {
  return message(loc.file_name(), ":", loc.line());
}

}  // namespace spindle

// Throws ErrorType built from the remaining arguments when cond is false. The message is
// only assembled on failure.
#define SPINDLE_CHECK(cond, ErrorType, ...)                    \
  do {                                                         \
    if (!(cond)) throw ErrorType(::spindle::message(__VA_ARGS__)); \
  } while (0)

#define SPINDLE_INTERNAL_CHECK(cond, pass, ...)                                          \
  do {                                                                                  \
    if (!(cond))                                                                        \
      throw ::spindle::InternalError(::spindle::message("internal error in ", pass, ": ", \
                                                        __VA_ARGS__));                  \
  } while (0)
