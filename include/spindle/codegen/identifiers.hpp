// Legal identifiers for generated C and CUDA. Every name in generated code comes from a
// user name (axis type, kernel name, argument names given with spindle::names, locals) or
// from the emitter itself; legal_identifier() turns any of them into a name that is legal
// in C11/C23 and in CUDA C++ and cannot mean anything else there:
//   * characters other than [A-Za-z0-9_] become '_', runs of '_' collapse to one (C++
//     reserves every name containing "__", C every name starting with "__" or "_X");
//   * a name starting with a digit or '_' gets the prefix "v";
//   * keywords of C and C++ (CUDA is C++: `and`, `class`, `new`, `this` are keywords
//     there), CUDA's built-in variables, types and functions the generated code uses
//     (`threadIdx`, `float4`, `atomicAdd`, `expf`, ...), names the kernel ABI and the
//     prelude define (`rt`, `buffers`, `scalars`, `spindle_*`, `SPINDLE_*`), predefined
//     macros of GNU C (`linux`, `unix`) and `main` get the suffix "_".
// Uniqueness within a unit is the printer's job (CFamilyPrinter::fresh).
#pragma once

#include <cctype>
#include <set>
#include <string>
#include <string_view>

namespace spindle::codegen {

inline bool is_reserved_identifier(std::string_view n) {
  static const std::set<std::string_view> words{
      // C11 and C23 keywords (and the macros of <stdbool.h>, <stdalign.h>, ...)
      "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
      "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
      "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
      "bool", "true", "false", "nullptr", "alignas", "alignof", "static_assert", "thread_local", "typeof",
      "typeof_unqual", "constexpr", "noreturn", "complex", "imaginary", "asm", "fortran", "NULL",
      // C++ keywords and alternative tokens (CUDA C++)
      "and", "and_eq", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "consteval", "constinit", "const_cast", "co_await", "co_return", "co_yield", "decltype", "delete",
      "dynamic_cast", "explicit", "export", "friend", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "operator", "or", "or_eq", "private", "protected", "public", "reinterpret_cast", "requires", "static_cast",
      "template", "this", "throw", "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq",
      "final", "override", "import", "module", "std",
      // CUDA built-in variables and types the generated code may name
      "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "char1", "char2", "char3", "char4",
      "uchar1", "uchar2", "uchar3", "uchar4", "short1", "short2", "short3", "short4", "ushort1", "ushort2",
      "ushort3", "ushort4", "int1", "int2", "int3", "int4", "uint1", "uint2", "uint3", "uint4", "long1", "long2",
      "long3", "long4", "ulong1", "ulong2", "ulong3", "ulong4", "longlong1", "longlong2", "longlong3",
      "longlong4", "ulonglong1", "ulonglong2", "ulonglong3", "ulonglong4", "float1", "float2", "float3",
      "float4", "double1", "double2", "double3", "double4", "half", "half2",
      // functions the generated code calls (CUDA math and atomics, C math names)
      "atomicAdd", "atomicSub", "atomicMin", "atomicMax", "atomicCAS", "atomicExch", "atomicInc", "atomicDec",
      "atomicAnd", "atomicOr", "atomicXor", "exp", "expf", "log", "logf", "sqrt", "sqrtf", "fabs", "fabsf",
      "tanh", "tanhf", "pow", "powf", "min", "max", "fmin", "fminf", "fmax", "fmaxf", "abs", "printf", "malloc",
      "free", "memcpy", "memset", "assert", "make_float2", "make_float4", "make_double2", "make_int2",
      "make_int4",
      // the kernel ABI, GNU C's predefined macros, and the program entry
      "rt", "buffers", "scalars", "linux", "unix", "i386", "main"};
  if (n.empty() || words.count(n)) return true;
  if (n[0] == '_' || std::isdigit(static_cast<unsigned char>(n[0]))) return true;  // _X, __x, _x: reserved or file-scope
  if (n.find("__") != std::string_view::npos) return true;  // reserved anywhere in C++
  std::string lower;
  for (char c : n.substr(0, 7)) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "spindle";  // the prelude's spindle_* helpers and SPINDLE_* macros
}

// A legal, unreserved identifier made from `base` (see the top of the file); `base` itself
// when it is one already.
inline std::string legal_identifier(std::string_view base) {
  std::string n;
  for (char c : base) {
    char d = std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 128 ? c : '_';
    if (d == '_' && !n.empty() && n.back() == '_') continue;  // no "__"
    n += d;
  }
  if (n.empty() || n[0] == '_' || std::isdigit(static_cast<unsigned char>(n[0]))) n = (n.empty() || n[0] != '_' ? "v_" : "v") + n;
  std::string lower;
  for (char c : n.substr(0, 7)) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "spindle") n = "u_" + n;
  while (is_reserved_identifier(n)) n += n.back() == '_' ? "x" : "_";
  return n;
}

// The part of a symbol (spindle_<part>_<hash>) made from a kernel name: [A-Za-z0-9_] only,
// no "__", at most 48 characters.
inline std::string symbol_part(std::string_view name) {
  std::string n;
  for (char c : name) {
    char d = std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 128 ? c : '_';
    if (d == '_' && (n.empty() || n.back() == '_')) continue;
    n += d;
    if (n.size() == 48) break;
  }
  while (!n.empty() && n.back() == '_') n.pop_back();
  return n.empty() ? "kernel" : n;
}

// A user name inside a C comment: printable ASCII, no "*/" or "/*", at most 80 characters.
inline std::string comment_text(std::string_view text) {
  std::string n;
  for (char c : text) {
    char d = c >= 32 && c < 127 ? c : '?';
    if (!n.empty() && ((n.back() == '*' && d == '/') || (n.back() == '/' && d == '*'))) d = '_';
    n += d;
    if (n.size() == 80) break;
  }
  return n;
}

}  // namespace spindle::codegen
