// The input of rgcn_spmm: a typed graph (a Matrix Market file whose values are relation ids
// 1..R, as data/rgcn) turned into the RGCN aggregation C = sum_r Dinv_r A_r XW_r, A_r(i, j)
// for an edge j -> i of relation r (row = the receiving node), Dinv_r the inverse of A_r's
// row degrees (mean aggregation, PyG's RGCNConv(aggr='mean')). Spindle runs it on the
// relations as Ell3dBuckets; the peers (and Spindle's CSR SpMM) run the same sum as one SpMM
// of the relations side by side (spindle::side_by_side: [A_1 ... A_R], N x RN) times
// XW [R N, K] — XW's row-major [R, N, K] storage is exactly that matrix.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spindle/spindle.hpp>

#include "matrices.hpp"

namespace bench {

// The stacked matrix (with the buckets in `relations`), or nothing (and a line on stderr)
// when m is not a typed graph: a non-square matrix or a value that is not an id 1..1024.
template <class T>
std::optional<Loaded<T>> rgcn_input(const Loaded<T>& m) {
  // The file's entries, not m.a: two edges of different relations between the same nodes are
  // two entries there, which a Csr would add up into one value.
  std::vector<spindle::Triplet<T>> edges;
  std::int64_t n = 0, relations = 0;
  bool typed = m.info.rows == m.info.cols && std::filesystem::is_regular_file(m.info.source);
  if (typed) {
    auto file = spindle::read_matrix_market_triplets<T>(m.info.source);
    n = file.header.rows;
    edges = std::move(file.entries);
  }
  for (std::size_t q = 0; typed && q < edges.size(); ++q) {
    const double v = static_cast<double>(edges[q].value);
    typed = v >= 1 && v <= 1024 && std::floor(v) == v;
    if (typed) relations = std::max<std::int64_t>(relations, static_cast<std::int64_t>(v));
  }
  if (!typed || relations == 0) {
    std::fprintf(stderr,
                 "[bench] %s rgcn_spmm: skipped, needs a square typed graph from a file (values = relation ids "
                 "1..1024)\n",
                 m.info.name.c_str());
    return std::nullopt;
  }
  spindle::Timer t;
  std::vector<std::vector<spindle::Triplet<T>>> by_rel(static_cast<std::size_t>(relations));
  for (const auto& e : edges)  // an edge row -> col: row = the sender j, col = the receiver i
    by_rel[static_cast<std::size_t>(e.value) - 1].push_back({e.col, e.row, T(1)});
  std::vector<spindle::Csr<T>> rels;  // A_r, duplicate edges once (Duplicates::keep_last)
  for (std::int64_t r = 0; r < relations; ++r) {
    auto g = spindle::Csr<T>::from_triplets(n, n, by_rel[static_cast<std::size_t>(r)], spindle::Duplicates::keep_last);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto lo = g.indptr()[i], hi = g.indptr()[i + 1];
      for (auto q = lo; q < hi; ++q) g.values()[q] = T(1) / static_cast<T>(hi - lo);
    }
    rels.push_back(std::move(g));
  }
  Loaded<T> out;
  out.a = spindle::side_by_side(rels, m.info.name + "-stacked");
  out.relations = std::make_shared<const spindle::Ell3dBuckets<T>>(spindle::Ell3dBuckets<T>::from_relations(rels));
  out.info = {out.a.name(),
              m.info.source + " (" + std::to_string(relations) + " relations, mean-normalised, side by side)",
              out.a.rows(), out.a.cols(), out.a.nnz(), m.info.load_s + t.seconds(),
              spindle::inspect::graph_features(out.a)};
  std::fprintf(stderr, "[bench] %s: %s, padding %.2f, %.2f MB, built in %.1f ms\n", m.info.name.c_str(),
               out.relations->description().c_str(), out.relations->padding_ratio(),
               static_cast<double>(out.relations->bytes()) / 1e6, t.seconds() * 1e3);
  return out;
}

}  // namespace bench
