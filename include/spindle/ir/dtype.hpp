// Element types of the IR and of host data.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "spindle/support/error.hpp"

namespace spindle {

enum class DType : std::uint8_t { f16, f32, f64, i32, i64, boolean };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
  }
  return "?";
}

inline bool is_float(DType t) { return t == DType::f16 || t == DType::f32 || t == DType::f64; }
inline bool is_int(DType t) { return t == DType::i32 || t == DType::i64; }
inline int dtype_bytes(DType t) {
  switch (t) {
    case DType::f16: return 2;
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

// The DType of a C++ scalar type, checked at compile time.
template <class T>
struct dtype_of {
  static_assert(sizeof(T) == 0,
                "spindle: unsupported element type; use float, double, std::int32_t or std::int64_t");
};
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <class T>
inline constexpr DType dtype_v = dtype_of<std::remove_cv_t<T>>::value;

}  // namespace spindle
