// sort_rows: the host step after the numeric phase of an assembled output whose rows were
// gathered in the order their columns were first written (runtime/assembled_kernel_impl.hpp,
// lower/assemble_rows.hpp's workspace path): each row's (column, value) pairs sorted by column.
//
// A row is a concatenation of ascending runs (each input fiber the numeric phase walks adds
// one), its columns distinct. Rows of at most `sorted_up_to` entries are left alone: the
// numeric phase wrote them in column order (its ranked epilogue, lower::ranks_short_rows).
// Every other row is read once, branch-free, for a descent and its least and greatest column;
// a row without a descent is done. Then, by length n and column range s = max - min + 1:
//   n <= 32             each pair to its rank among the row's (RowSorter::ranked);
//   s <= 16 n           a bucket pass: a bit per column of the range and the value at its
//                       column in per-thread scratch of the range, read back in column order (a dense row:
//                       ppi's or bcsstk25's products);
//   otherwise           an LSD radix sort of the pairs on (column - min): P passes of
//                       ceil(bits(s - 1) / P) bits each, P chosen to minimise P (2^w + 2n)
//                       (digits of at most 11 bits), between the row and per-thread scratch.
// A sparse row over a wide range (a graph's product: pubmed, ogbn-arxiv) has few entries per
// word of a bitmap, whose read-back then mispredicts per word; the radix passes cost the
// same whatever the range's density. (This replaced a natural merge sort of the runs:
// docs/results/2026-12-06-spgemm-radix-row-sort.txt.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "spindle/ir/dtype.hpp"
#include "spindle/runtime/thread_pool.hpp"
#include "spindle/support/error.hpp"

namespace spindle::runtime {

namespace sort_rows_detail {

inline int bit_width(std::uint64_t v) { return v == 0 ? 0 : 64 - __builtin_clzll(v); }

// The radix passes for n keys spanning `range` (max - min > 0): how many, and the digit width.
// (The cost p (2^w + 2n) falls, then rises with p: the search stops at its first rise.)
inline std::pair<int, int> radix_passes(std::int64_t n, std::uint64_t range) {
  const int width = bit_width(range);
  int digit = 0;
  std::int64_t best = 0;
  for (int p = (width + 10) / 11; p <= width; ++p) {  // digits of at most 11 bits
    const int w = (width + p - 1) / p;
    const std::int64_t cost = p * ((std::int64_t{1} << w) + 2 * n);
    if (digit != 0 && cost >= best) break;
    best = cost, digit = w;
  }
  return {(width + digit - 1) / digit, digit};  // no pass whose digits are all zero
}

// Stable sorts of one row's (column, value) pairs by column, with scratch kept between rows
// (one sorter per thread). Both keep the order of equal columns (combine_segments relies on
// it: the writes of one element are folded in the order the kernel made them).
template <class I, class V>
class RowSorter {
 public:
  // One read of a row, branch-free (it vectorises; a loop that stops at the first descent
  // mispredicts once per row): whether its columns strictly ascend, and the least and
  // greatest (both x[0]... for n < 2, and I(0) for n == 0).
  struct Scan {
    bool ascending;
    I lo, hi;
  };
  static Scan scan(const I* x, std::int64_t n) {
    unsigned descents = 0;
    I lo = n > 0 ? x[0] : I(0), hi = lo;
    for (std::int64_t q = 1; q < n; ++q) {
      descents |= static_cast<unsigned>(x[q - 1] >= x[q]);
      lo = std::min(lo, x[q]);
      hi = std::max(hi, x[q]);
    }
    return {descents == 0, lo, hi};
  }
  // Sorts a row that scan() found not ascending, lo and hi its least and greatest column:
  // by ranks up to 32 pairs, by radix passes past that (nothing to do when lo == hi).
  void sort(I* x, V* v, std::int64_t n, I lo, I hi) {
    if (lo == hi) return;  // one column: already in order (stable)
    if (n <= 32) ranked(x, v, n);
    else radix(x, v, n, lo, hi);
  }
  // A short row (32 pairs or so): each pair goes to its rank, the number of columns smaller
  // than its own plus the number of equal ones before it (stable), through scratch. The
  // comparisons are branch-free and vectorise; an insertion sort's shifts mispredicted once
  // per pair on rows in random order, about twice as slow from 8 to 64 pairs.
  void ranked(I* x, V* v, std::int64_t n) {
    if (tx_.size() < static_cast<std::size_t>(n)) tx_.resize(static_cast<std::size_t>(n)), tv_.resize(tx_.size());
    for (std::int64_t q = 0; q < n; ++q) {
      const I key = x[q];
      I rank = 0;  // counted in the index type: as many lanes as the columns
      for (std::int64_t p = 0; p < q; ++p) rank += static_cast<I>(x[p] <= key);
      for (std::int64_t p = q; p < n; ++p) rank += static_cast<I>(x[p] < key);
      tx_[static_cast<std::size_t>(rank)] = key;
      tv_[static_cast<std::size_t>(rank)] = v[q];
    }
    std::copy(tx_.begin(), tx_.begin() + n, x);
    std::copy(tv_.begin(), tv_.begin() + n, v);
  }
  // An LSD radix sort on (column - lo), lo < hi the least and greatest column, between the
  // pairs and scratch: radix_passes(n, hi - lo) passes.
  void radix(I* x, V* v, std::int64_t n, I lo, I hi) {
    const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);
    const auto [passes, digit] = radix_passes(n, range);
    const std::uint64_t mask = (std::uint64_t{1} << digit) - 1;
    const std::size_t buckets = std::size_t{1} << digit;
    if (pa_.size() < static_cast<std::size_t>(n)) pa_.resize(static_cast<std::size_t>(n)), pb_.resize(pa_.size());
    if (count_.size() < buckets) count_.resize(buckets);
    for (std::int64_t q = 0; q < n; ++q) pa_[static_cast<std::size_t>(q)] = Pair{x[q], v[q]};
    Pair* from = pa_.data();
    Pair* to = pb_.data();
    const auto lo64 = static_cast<std::uint64_t>(lo);
    for (int pass = 0; pass < passes; ++pass) {
      const int shift = pass * digit;
      std::fill(count_.begin(), count_.begin() + static_cast<std::ptrdiff_t>(buckets), std::uint64_t{0});
      for (std::int64_t q = 0; q < n; ++q) ++count_[((static_cast<std::uint64_t>(from[q].key) - lo64) >> shift) & mask];
      std::uint64_t sum = 0;
      for (std::size_t k = 0; k < buckets; ++k) {
        const std::uint64_t c = count_[k];
        count_[k] = sum;
        sum += c;
      }
      for (std::int64_t q = 0; q < n; ++q) to[count_[((static_cast<std::uint64_t>(from[q].key) - lo64) >> shift) & mask]++] = from[q];
      std::swap(from, to);
    }
    for (std::int64_t q = 0; q < n; ++q) x[q] = from[q].key, v[q] = from[q].value;
  }

 private:
  struct Pair {
    I key;
    V value;
  };
  std::vector<Pair> pa_, pb_;
  std::vector<std::uint64_t> count_;
  std::vector<I> tx_;
  std::vector<V> tv_;
};

}  // namespace sort_rows_detail

template <class I, class V>
void sort_rows(ThreadPool& pool, std::int64_t rows, const std::int64_t* row_ptr, I* idx, V* val,
               std::int64_t sorted_up_to = 1) {
  const std::int64_t grain = std::max<std::int64_t>(64, rows / (4 * std::max(1, pool.num_threads())));
  pool.parallel_for(rows, grain, [&](std::int64_t b, std::int64_t e) {
    std::vector<std::uint64_t> bits;
    std::vector<V> dense;
    sort_rows_detail::RowSorter<I, V> sorter;
    for (std::int64_t r = b; r < e; ++r) {
      const std::int64_t n = row_ptr[r + 1] - row_ptr[r];
      if (n < 2 || n <= sorted_up_to) continue;
      I* x = idx + row_ptr[r];
      V* v = val + row_ptr[r];
      const auto [ascending, lo, hi] = sorter.scan(x, n);  // (a row's columns are distinct)
      if (ascending) continue;  // one run: already sorted
      const std::uint64_t range = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo);  // > 0
      if (n > 32 && range < 16 * static_cast<std::uint64_t>(n)) {  // dense enough: a bitmap over the range
        const auto span = static_cast<std::size_t>(range) + 1;
        if (dense.size() < span) {
          dense.resize(span);
          bits.assign((span + 63) / 64, 0);  // left all zero by every use
        }
        const auto lo64 = static_cast<std::uint64_t>(lo);
        for (std::int64_t q = 0; q < n; ++q) {
          const std::uint64_t c = static_cast<std::uint64_t>(x[q]) - lo64;
          bits[c >> 6] |= std::uint64_t{1} << (c & 63);
          dense[c] = v[q];
        }
        std::int64_t out = 0;
        for (std::uint64_t w = 0; w <= range >> 6; ++w) {
          for (std::uint64_t word = bits[w]; word; word &= word - 1) {
            const std::uint64_t c = (w << 6) + static_cast<std::uint64_t>(__builtin_ctzll(word));
            x[out] = static_cast<I>(lo64 + c), v[out] = dense[c], ++out;
          }
          bits[w] = 0;
        }
        continue;
      }
      sorter.sort(x, v, n, lo, hi);  // ranks, or LSD passes (stable: exact for any keys)
    }
  });
}

template <class I>
void sort_rows_by_value_type(ThreadPool& pool, DType vt, std::int64_t rows, const std::int64_t* row_ptr, I* idx,
                             void* val, std::int64_t sorted_up_to = 1) {
  switch (vt) {
    case DType::f32:
      return sort_rows(pool, rows, row_ptr, idx, static_cast<float*>(val), sorted_up_to);
    case DType::f64:
      return sort_rows(pool, rows, row_ptr, idx, static_cast<double*>(val), sorted_up_to);
    case DType::i32:
      return sort_rows(pool, rows, row_ptr, idx, static_cast<std::int32_t*>(val), sorted_up_to);
    case DType::i64:
      return sort_rows(pool, rows, row_ptr, idx, static_cast<std::int64_t*>(val), sorted_up_to);
    default:
      throw InternalError("sort_rows: unsupported value type");
  }
}

}  // namespace spindle::runtime
