// Shared pieces of the error tests: an exception matcher on what(), a snapshot of the bytes
// of the caller's arguments (to show that a failed call modified nothing), and a
// type-erased argument that carries any StorageView (the path where only run time can tell
// the element type).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "spindle/spindle.hpp"

// Checks that `expr` throws `Type` (or a subclass) whose message contains `substring`.
#define SPINDLE_EXPECT_ERROR(expr, Type, substring) \
  CHECK_THROWS_MATCHES(expr, Type, ::spindle_error_test::WhatContains(substring))

namespace spindle_error_test {

class WhatContains : public Catch::MatcherBase<std::exception> {
 public:
  explicit WhatContains(std::string s) : s_(std::move(s)) {}
  bool match(const std::exception& e) const override {
    return std::string(e.what()).find(s_) != std::string::npos;
  }
  std::string describe() const override { return "what() contains \"" + s_ + "\""; }

 private:
  std::string s_;
};

// A user-defined argument type without value_type: the kernel-call layer cannot check its
// element type at compile time and must do it at run time (spindle::arg_traits primary rule).
struct Erased {
  spindle::StorageView view;
  spindle::StorageView storage() const { return view; }
};

// The bytes of one span, to compare after a failed call.
template <class T>
std::vector<unsigned char> bytes_of(std::span<const T> s) {
  std::vector<unsigned char> b(s.size_bytes());
  if (!b.empty()) std::memcpy(b.data(), s.data(), b.size());
  return b;
}

// Snapshot of every array of a Csr / Tensor / Ragged (values and structure).
template <class T, class I>
std::vector<unsigned char> snapshot(const spindle::Csr<T, I>& a) {
  auto v = bytes_of(a.values());
  auto p = bytes_of(a.indptr());
  auto q = bytes_of(a.indices());
  v.insert(v.end(), p.begin(), p.end());
  v.insert(v.end(), q.begin(), q.end());
  return v;
}
template <class T>
std::vector<unsigned char> snapshot(const spindle::Tensor<T>& t) {
  return bytes_of(t.values());
}
template <class T>
std::vector<unsigned char> snapshot(const spindle::Ragged<T>& r) {
  auto v = bytes_of(r.values());
  auto p = bytes_of(r.row_ptr());
  v.insert(v.end(), p.begin(), p.end());
  return v;
}

// A recognisable fill for output buffers (a failed call must leave it in place).
template <class T>
constexpr T sentinel() {
  return static_cast<T>(-12345);
}

}  // namespace spindle_error_test
