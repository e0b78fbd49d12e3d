// Reading element q of an array kept as raw bytes of a known dtype (the test targets that keep
// an assembled output's arrays: spindle-kernel-fuzz's KeptAssembly, spindle-frontend-fuzz's
// ErasedCsrTarget). Test support only.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "spindle/ir/dtype.hpp"

namespace spindle::test {

// An i32 or i64 element as int64.
inline std::int64_t load_int(const std::vector<unsigned char>& bytes, DType t, std::int64_t q) {
  if (t == DType::i64) {
    std::int64_t x;
    std::memcpy(&x, bytes.data() + q * 8, 8);
    return x;
  }
  std::int32_t x;
  std::memcpy(&x, bytes.data() + q * 4, 4);
  return x;
}

// An f32 or f64 element as double.
inline double load_float(const std::vector<unsigned char>& bytes, DType t, std::int64_t q) {
  if (t == DType::f64) {
    double x;
    std::memcpy(&x, bytes.data() + q * 8, 8);
    return x;
  }
  float x;
  std::memcpy(&x, bytes.data() + q * 4, 4);
  return x;
}

}  // namespace spindle::test
