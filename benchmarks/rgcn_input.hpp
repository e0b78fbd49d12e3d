// The input of rgcn_spmm: a typed graph (a Matrix Market file whose values are relation ids
// 1..R, as data/rgcn) turned into the RGCN aggregation C = sum_r Dinv_r A_r XW_r, A_r(i, j)
// for an edge j -> i of relation r (row = the receiving node), Dinv_r the inverse of A_r's
// row degrees (mean aggregation, PyG's RGCNConv(aggr='mean')). Spindle runs it on the
// relations as Ell3dBuckets; the peers (and Spindle's CSR SpMM) run the same sum as one SpMM
// of the relations side by side (spindle::side_by_side: [A_1 ... A_R], N x RN) times
// XW [R N, K] — XW's row-major [R, N, K] storage is exactly that matrix.
#pragma once

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
// when m is not a typed graph: a non-square matrix, one not read from a file, or a value that
// is not a relation id (spindle::relations_of_typed_edges).
template <class T>
std::optional<Loaded<T>> rgcn_input(const Loaded<T>& m) {
  // The file's entries, not m.a: two edges of different relations between the same nodes are
  // two entries there, which a Csr would add up into one value.
  if (m.info.rows != m.info.cols || !std::filesystem::is_regular_file(m.info.source)) {
    std::fprintf(stderr, "[bench] %s rgcn_spmm: skipped, needs a square typed graph from a file\n",
                 m.info.name.c_str());
    return std::nullopt;
  }
  const auto file = spindle::read_matrix_market_triplets<T>(m.info.source);
  spindle::Timer t;
  std::vector<spindle::Csr<T>> rels;  // A_r, rows = the receiving nodes
  try {
    rels = spindle::relations_of_typed_edges<T>(file.header.rows, file.entries);
  } catch (const spindle::FormatError& e) {
    std::fprintf(stderr, "[bench] %s rgcn_spmm: skipped, not a typed graph: %s\n", m.info.name.c_str(), e.what());
    return std::nullopt;
  }
  for (auto& g : rels)  // mean aggregation: Dinv_r A_r
    for (std::int64_t i = 0; i < g.rows(); ++i) {
      const auto lo = g.indptr()[i], hi = g.indptr()[i + 1];
      for (auto q = lo; q < hi; ++q) g.values()[q] = T(1) / static_cast<T>(hi - lo);
    }
  const auto relations = static_cast<std::int64_t>(rels.size());
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
