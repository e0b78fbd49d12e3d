// Graph500-style R-MAT graphs for spindle-bench.
//
// 2^scale vertices and edge_factor * 2^scale directed edges drawn by recursive quadrant
// choice with the Graph500 probabilities a = 0.57, b = 0.19, c = 0.19 (d = 0.05), no
// per-level noise. As in the Graph500 generator the vertex labels are then permuted at
// random, so that the high-degree vertices are not all packed at the low ids (which would
// flatter cache locality). Self-loops are kept; duplicate edges are removed. The result is
// a sorted CSR matrix whose values are uniform in [0.5, 1.5). Deterministic for a seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <spindle/format/csr.hpp>
#include <spindle/format/random.hpp>

namespace bench {

struct RmatParams {
  int scale = 16;
  int edge_factor = 16;
  std::uint64_t seed = 1;
  double a = 0.57, b = 0.19, c = 0.19;
};

inline std::string rmat_name(const RmatParams& p) {
  return "rmat-s" + std::to_string(p.scale) + "-e" + std::to_string(p.edge_factor);
}

// The sorted, de-duplicated edge list as keys (row << 32 | col).
inline std::vector<std::uint64_t> rmat_edges(const RmatParams& p) {
  const std::int64_t n = std::int64_t{1} << p.scale;
  const std::int64_t m = n * p.edge_factor;
  spindle::Rng rng(p.seed * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull);
  // Random relabelling of the vertices (Fisher-Yates).
  std::vector<std::uint32_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0u);
  for (std::int64_t k = n - 1; k > 0; --k) std::swap(perm[k], perm[rng.below(k + 1)]);
  const double ab = p.a + p.b, abc = p.a + p.b + p.c;
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(m));
  for (std::int64_t e = 0; e < m; ++e) {
    std::uint64_t r = 0, c = 0;
    for (int level = 0; level < p.scale; ++level) {
      const double u = rng.uniform();
      const std::uint64_t down = u >= ab, right = (u >= p.a && u < ab) || u >= abc;
      r = (r << 1) | down;
      c = (c << 1) | right;
    }
    keys[e] = (std::uint64_t{perm[r]} << 32) | perm[c];
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

template <class T>
spindle::Csr<T> generate_rmat(const RmatParams& p) {
  const std::int64_t n = std::int64_t{1} << p.scale;
  const std::vector<std::uint64_t> keys = rmat_edges(p);
  std::vector<std::int32_t> indptr(static_cast<std::size_t>(n) + 1, 0), indices(keys.size());
  std::vector<T> values(keys.size());
  spindle::Rng rng(p.seed + 17);
  for (std::size_t e = 0; e < keys.size(); ++e) {
    ++indptr[(keys[e] >> 32) + 1];
    indices[e] = static_cast<std::int32_t>(keys[e] & 0xffffffffu);
    values[e] = rng.value<T>(0.5, 1.5);
  }
  for (std::int64_t r = 0; r < n; ++r) indptr[r + 1] += indptr[r];
  return spindle::Csr<T>(n, n, std::move(indptr), std::move(indices), std::move(values), rmat_name(p));
}

}  // namespace bench
