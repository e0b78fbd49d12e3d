// graph_features(csr): the features of a sparse matrix (a graph's adjacency) that input-aware
// choices read — GRANII's featurizer (seed 004 §IV-B), and the inputs of the format tuner
// (hyb bucket widths from the degree distribution). Cost: O(rows) for everything about row
// degrees, O(rows + sample) for the edge measures (a fixed number of nonzeros drawn with a
// seeded generator, one per stratum of the positions: exact when nnz <= sample), and one
// O(nnz) early-exit scan of the values for
// `unit_weights` (exact on purpose: a kernel that skips the values must never be chosen for a
// weighted graph). No NaN for empty inputs: every ratio over zero items is 0.
// graph_features_kept(csr) is the same with the default options, its structure part computed
// once per matrix and kept with it (Csr::memo()): a graph's later layers and sizes pay only
// the values scan. unit_weights is never kept (the values are mutable).
//
//   const spindle::GraphFeatures f = spindle::inspect::graph_features(a);
//   f.degree_gini, f.bandwidth_mean, f.to_vector(k_in, k_out) ...
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <span>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/random.hpp"
#include "spindle/support/timer.hpp"

namespace spindle {

struct GraphFeatures {
  // Shape (exact).
  std::int64_t rows = 0, cols = 0, nnz = 0;
  double density = 0;  // nnz / (rows * cols)
  // Row degrees (stored entries per row; exact, O(rows)).
  double degree_mean = 0, degree_std = 0, degree_cv = 0;  // cv = std / mean
  std::int64_t degree_min = 0, degree_max = 0;
  double degree_gini = 0;          // 0: all rows equal; -> 1: all entries in one row
  double empty_row_fraction = 0;   // rows with no entry / rows
  double max_to_mean = 0;          // degree_max / degree_mean (load imbalance of a row split)
  // Values (exact, early exit).
  bool unit_weights = true;  // every stored value is exactly 1 (an unweighted graph)
  // Edge measures (over `sampled_edges` nonzeros; exact when nnz <= the sample size).
  std::int64_t sampled_edges = 0;
  double bandwidth_mean = 0;      // mean |i - j| / max(rows, cols): 0 = on the diagonal
  double near_diagonal = 0;       // fraction with |i - j| <= max(rows, cols) / 64
  double column_gap_mean = 0;     // mean gap to the previous column of the same row / cols (sorted rows)
  double symmetric_fraction = 0;  // fraction of (i, j) whose (j, i) is stored too (square matrices)
  double seconds = 0;             // time graph_features took

  // The features as one named vector, with the layer sizes that the cost models also take
  // (GRANII: K_in, K_out). Names and order are stable: models are trained on them.
  std::vector<std::pair<std::string, double>> to_vector(std::int64_t k_in = 0, std::int64_t k_out = 0) const {
    return {{"rows", double(rows)},
            {"cols", double(cols)},
            {"nnz", double(nnz)},
            {"density", density},
            {"degree_mean", degree_mean},
            {"degree_std", degree_std},
            {"degree_cv", degree_cv},
            {"degree_min", double(degree_min)},
            {"degree_max", double(degree_max)},
            {"degree_gini", degree_gini},
            {"empty_row_fraction", empty_row_fraction},
            {"max_to_mean", max_to_mean},
            {"unit_weights", unit_weights ? 1.0 : 0.0},
            {"bandwidth_mean", bandwidth_mean},
            {"near_diagonal", near_diagonal},
            {"column_gap_mean", column_gap_mean},
            {"symmetric_fraction", symmetric_fraction},
            {"k_in", double(k_in)},
            {"k_out", double(k_out)}};
  }
  std::string describe() const;
};

struct GraphFeatureOptions {
  std::int64_t sample = 4096;  // nonzeros drawn for the edge measures
  std::uint64_t seed = 1;
};

namespace inspect {

namespace detail {

// Gini coefficient of non-negative counts given as a histogram (count -> rows with it):
// G = sum_i (2i - n - 1) x_(i) / (n sum x) over the sorted values, 1-based i.
inline double gini_of_histogram(const std::vector<std::int64_t>& hist, std::int64_t n, double total) {
  if (n == 0 || total <= 0) return 0;
  double acc = 0;
  std::int64_t seen = 0;  // values before this bucket
  for (std::size_t v = 0; v < hist.size(); ++v) {
    const std::int64_t c = hist[v];
    if (c == 0) continue;
    // Ranks seen+1 .. seen+c: sum of (2i - n - 1) = c (2 seen + c + 1) - c (n + 1).
    const double ranks = double(c) * (2.0 * double(seen) + double(c) + 1.0) - double(c) * (double(n) + 1.0);
    acc += ranks * double(v);
    seen += c;
  }
  return acc / (double(n) * total);
}

// Every stored value is exactly 1: blocks of 1024 compared without a branch (so the compiler
// vectorises them), an exit after the first block with another value.
template <class T>
bool all_ones(std::span<const T> v) {
  constexpr std::size_t block = 1024;
  for (std::size_t b = 0; b < v.size(); b += block) {
    const std::size_t e = std::min(v.size(), b + block);
    bool other = false;
    for (std::size_t i = b; i < e; ++i) other |= v[i] != T(1);
    if (other) return false;
  }
  return true;
}

// Everything but unit_weights and seconds: what the structure alone decides.
template <class T, class Index>
GraphFeatures structure_features(const Csr<T, Index>& a, const GraphFeatureOptions& o) {
  GraphFeatures f;
  f.rows = a.rows();
  f.cols = a.cols();
  f.nnz = a.nnz();
  const auto ptr = a.indptr();
  const auto idx = a.indices();
  if (f.rows > 0 && f.cols > 0) f.density = double(f.nnz) / (double(f.rows) * double(f.cols));

  // Row degrees: one pass, a histogram for the Gini coefficient (counting sort).
  if (f.rows > 0) {
    std::int64_t mn = f.nnz, mx = 0, empty = 0;
    double sum = 0, sq = 0;
    for (std::int64_t r = 0; r < f.rows; ++r) {
      const std::int64_t d = std::int64_t(ptr[r + 1]) - std::int64_t(ptr[r]);
      mn = std::min(mn, d);
      mx = std::max(mx, d);
      empty += d == 0;
      sum += double(d);
      sq += double(d) * double(d);
    }
    std::vector<std::int64_t> hist(static_cast<std::size_t>(mx) + 1, 0);
    for (std::int64_t r = 0; r < f.rows; ++r) ++hist[static_cast<std::size_t>(ptr[r + 1] - ptr[r])];
    f.degree_min = mn;
    f.degree_max = mx;
    f.degree_mean = sum / double(f.rows);
    f.degree_std = std::sqrt(std::max(0.0, sq / double(f.rows) - f.degree_mean * f.degree_mean));
    f.degree_cv = f.degree_mean > 0 ? f.degree_std / f.degree_mean : 0;
    f.degree_gini = detail::gini_of_histogram(hist, f.rows, sum);
    f.empty_row_fraction = double(empty) / double(f.rows);
    f.max_to_mean = f.degree_mean > 0 ? double(mx) / f.degree_mean : 0;
  }

  // Edge measures over a sample of stored positions (all of them when nnz <= sample): one
  // position drawn uniformly from each of `sample` equal strata of [0, nnz) (a jittered
  // stratified sample: random, so no aliasing with a regular pattern, and in increasing
  // order, so the row of each position comes from one forward walk over indptr instead of
  // a binary search per position: 5x faster on cora).
  if (f.nnz > 0) {
    const bool all = f.nnz <= o.sample;
    const std::int64_t n = all ? f.nnz : std::max<std::int64_t>(o.sample, 1);
    const double extent = double(std::max(f.rows, f.cols));
    const double near = extent / 64.0;
    const double stratum = double(f.nnz) / double(n);
    Rng rng(o.seed);
    double band = 0, gap = 0;
    std::int64_t close = 0, gaps = 0, mirrored = 0, r = 0;
    for (std::int64_t s = 0; s < n; ++s) {
      const std::int64_t p =
          all ? s : std::min(f.nnz - 1, static_cast<std::int64_t>((double(s) + rng.uniform()) * stratum));
      while (std::int64_t(ptr[r + 1]) <= p) ++r;
      const std::int64_t c = idx[p];
      const double dist = std::abs(double(r) - double(c));
      band += dist / extent;
      close += dist <= near;
      if (a.sorted() && p > std::int64_t(ptr[r])) {
        gap += double(c - std::int64_t(idx[p - 1])) / double(f.cols);
        ++gaps;
      }
      if (f.rows == f.cols) {
        const auto lo = idx.begin() + ptr[c], hi = idx.begin() + ptr[c + 1];
        mirrored += a.sorted() ? std::binary_search(lo, hi, Index(r)) : std::find(lo, hi, Index(r)) != hi;
      }
    }
    f.sampled_edges = n;
    f.bandwidth_mean = band / double(n);
    f.near_diagonal = double(close) / double(n);
    f.column_gap_mean = gaps ? gap / double(gaps) : 0;
    f.symmetric_fraction = f.rows == f.cols ? double(mirrored) / double(n) : 0;
  }
  return f;
}

// The kept structure features of a matrix (one memo entry per matrix, default options).
struct KeptStructureFeatures {
  GraphFeatures f;
};

}  // namespace detail

template <class T, class Index>
GraphFeatures graph_features(const Csr<T, Index>& a, const GraphFeatureOptions& o = {}) {
  Timer timer;
  GraphFeatures f = detail::structure_features(a, o);
  f.unit_weights = detail::all_ones(a.values());
  f.seconds = timer.seconds();
  return f;
}

// graph_features(a) with its structure part computed on the first call for this matrix (or a
// copy of it) and kept; seconds is this call's time.
template <class T, class Index>
GraphFeatures graph_features_kept(const Csr<T, Index>& a) {
  Timer timer;
  GraphFeatures f =
      a.memo().template get<detail::KeptStructureFeatures>([&] {
        return detail::KeptStructureFeatures{detail::structure_features(a, GraphFeatureOptions{})};
      }).f;
  f.unit_weights = detail::all_ones(a.values());
  f.seconds = timer.seconds();
  return f;
}

}  // namespace inspect

inline std::string GraphFeatures::describe() const {
  char b[512];
  std::snprintf(b, sizeof b,
                "%lld x %lld, nnz %lld; degree mean %.2f std %.2f max %lld gini %.3f, empty rows %.1f%%; %s; "
                "edges (%lld sampled): bandwidth %.3f, near diagonal %.1f%%, column gap %.4f, symmetric %.1f%%",
                (long long)rows, (long long)cols, (long long)nnz, degree_mean, degree_std, (long long)degree_max,
                degree_gini, 100 * empty_row_fraction, unit_weights ? "unweighted" : "weighted",
                (long long)sampled_edges, bandwidth_mean, 100 * near_diagonal, column_gap_mean,
                100 * symmetric_fraction);
  return b;
}

}  // namespace spindle
