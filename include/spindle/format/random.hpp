// A small deterministic random generator for the random() constructors of the host formats.
// std::uniform_*_distribution differ between standard libraries, so the same seed would give
// different matrices on different platforms; this generator (SplitMix64) and the helpers
// below give the same stream everywhere.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace spindle {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n); n must be positive. Exact: draws below 2^64 mod n are
  // rejected so that every residue is equally likely.
  std::int64_t below(std::int64_t n) {
    const auto un = static_cast<std::uint64_t>(n);
    const std::uint64_t reject_below = (0 - un) % un;
    for (;;) {
      const std::uint64_t r = next();
      if (r >= reject_below) return static_cast<std::int64_t>(r % un);
    }
  }

  // A value of type T: floating types uniform in [lo, hi), integral types uniform in the
  // integers of [lo, hi] (hi included, so random<int>(0, 3) can give 3).
  template <class T>
  T value(double lo, double hi) {
    if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(lo + (hi - lo) * uniform());
    } else {
      const double a = std::ceil(lo), b = std::floor(hi);
      if (b <= a) return static_cast<T>(a);
      return static_cast<T>(a + static_cast<double>(below(static_cast<std::int64_t>(b - a) + 1)));
    }
  }

 private:
  std::uint64_t state_;
};

}  // namespace spindle
