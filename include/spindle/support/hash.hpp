// Small, dependency-free hashing: a 64-bit FNV-1a for identities and a 128-bit digest
// (two independent 64-bit lanes) for cache keys, printed as 32 hex digits.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace spindle {

inline std::uint64_t fnv1a64(std::string_view s, std::uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

inline std::uint64_t hash_combine(std::uint64_t seed, std::uint64_t v) {
  return mix64(seed ^ (v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2)));
}

// 128-bit digest: lane a is FNV-1a, lane b consumes 8-byte words with a multiply-rotate
// mix. Both lanes also absorb the length.
struct Digest {
  std::uint64_t a = 0, b = 0;
  bool operator==(const Digest&) const = default;
  std::string hex() const {
    static const char* d = "0123456789abcdef";
    std::string s(32, '0');
    for (int i = 0; i < 16; ++i) {
      s[15 - i] = d[(a >> (4 * i)) & 15];
      s[31 - i] = d[(b >> (4 * i)) & 15];
    }
    return s;
  }
};

class Hasher {
 public:
  Hasher& add(std::string_view s) {
    a_ = fnv1a64(s, a_);
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      b_ = rotl(b_ ^ mix64(w), 27) * 0x9e3779b97f4a7c15ull + 0x52dce729ull;
    }
    std::uint64_t tail = 0;
    // (An empty view may hold a null pointer, which memcpy must not see even for 0 bytes.)
    if (s.size() > i) std::memcpy(&tail, s.data() + i, s.size() - i);
    b_ = rotl(b_ ^ mix64(tail ^ (s.size() << 56)), 31) * 0x9e3779b97f4a7c15ull;
    // Separator so that add("ab").add("c") differs from add("a").add("bc").
    a_ = fnv1a64(std::string_view("\x1f", 1), a_ ^ s.size());
    return *this;
  }
  Hasher& add(std::uint64_t v) {
    char buf[8];
    std::memcpy(buf, &v, 8);
    return add(std::string_view(buf, 8));
  }
  Digest digest() const { return Digest{mix64(a_), mix64(b_ ^ a_)}; }

 private:
  static std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  std::uint64_t a_ = 0xcbf29ce484222325ull;
  std::uint64_t b_ = 0x2545f4914f6cdd1dull;
};

}  // namespace spindle
