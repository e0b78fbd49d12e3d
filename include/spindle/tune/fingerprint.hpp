// What a tuner keys a decision on about its input: the structure of a sparse matrix (shape,
// row pointers, column indices; not the values, which do not change which format or schedule
// is fastest) as a 128-bit hash, and per-block-size statistics of that structure (the
// format tuner's cost model input). Both O(nnz).
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/support/hash.hpp"

namespace spindle::tune {

// Hex digest of the shape, the index type and the index arrays of `a`.
template <class T, class Index>
std::string csr_fingerprint(const Csr<T, Index>& a) {
  Hasher h;
  h.add(std::string_view("csr")).add(static_cast<std::uint64_t>(sizeof(Index)));
  h.add(static_cast<std::uint64_t>(a.rows())).add(static_cast<std::uint64_t>(a.cols()));
  h.add(static_cast<std::uint64_t>(a.nnz()));
  const auto ptr = a.indptr();
  const auto idx = a.indices();
  h.add(std::string_view(reinterpret_cast<const char*>(ptr.data()), ptr.size_bytes()));
  h.add(std::string_view(reinterpret_cast<const char*>(idx.data()), idx.size_bytes()));
  return h.digest().hex();
}

// The number of br x bc blocks (aligned to multiples of the block shape) that hold at least
// one stored entry of `a`: what Bsr::from_csr(a, br, bc).nnz_blocks() would be, without
// building it.
template <class T, class Index>
std::int64_t count_blocks(const Csr<T, Index>& a, std::int64_t br, std::int64_t bc) {
  if (a.rows() == 0 || a.cols() == 0) return 0;
  const std::int64_t mb = (a.rows() + br - 1) / br, nb = (a.cols() + bc - 1) / bc;
  std::vector<std::int64_t> mark(static_cast<std::size_t>(nb), -1);
  const auto ptr = a.indptr();
  const auto idx = a.indices();
  std::int64_t blocks = 0;
  for (std::int64_t bi = 0; bi < mb; ++bi) {
    const std::int64_t r0 = bi * br, r1 = std::min(a.rows(), r0 + br);
    for (std::int64_t q = ptr[r0]; q < ptr[r1]; ++q) {
      const std::int64_t bj = static_cast<std::int64_t>(idx[q]) / bc;
      if (mark[bj] != bi) mark[bj] = bi, ++blocks;
    }
  }
  return blocks;
}

// The slots and pieces of hyb(1, k) (Hyb::from_csr(a, 1, k)) without building it: a row of n
// entries is n / k pieces of k slots and one piece of the rest, padded to a power of two.
struct HybCounts {
  double slots = 0, pieces = 0;
};
template <class T, class Index>
HybCounts count_hyb_slots(const Csr<T, Index>& a, std::int64_t k) {
  HybCounts c;
  const auto ptr = a.indptr();
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const std::int64_t n = static_cast<std::int64_t>(ptr[r + 1] - ptr[r]), rest = n % k;
    c.slots += static_cast<double>(
        n / k * k + (rest ? static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(rest))) : 0));
    c.pieces += static_cast<double>(n / k + (rest ? 1 : 0));
  }
  return c;
}

}  // namespace spindle::tune
