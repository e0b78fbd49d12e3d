// A typed edge list (a heterogeneous graph: each entry (row, col, r) an edge row -> col of
// relation r, as the Matrix Market files of data/rgcn) split into one Csr per relation,
// rows = the receiving nodes: relation r's matrix has A_r(col, row) = 1 for each of its edges
// (a repeated edge once). These are the graphs of an RGCN layer (gnn::RGCNConv), the input of
// Ell3dBuckets::from_relations and of side_by_side.
//
//   auto file = spindle::read_matrix_market_triplets<float>("aifb.mtx.gz");
//   auto rels = spindle::relations_of_typed_edges(file.header.rows, file.entries);  // rels[r - 1]
//
// Relation ids are the integers 1..R (R = the largest id; a relation without edges gets an
// empty matrix). FormatError naming the entry for an id that is not an integer in
// [1, max_relations]; ShapeError for an endpoint outside [0, nodes).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "spindle/format/coo.hpp"
#include "spindle/format/csr.hpp"

namespace spindle {

template <class T, class Index = std::int32_t>
std::vector<Csr<T, Index>> relations_of_typed_edges(std::int64_t nodes, const std::vector<Triplet<T>>& edges,
                                                    std::int64_t max_relations = 1 << 16) {
  std::int64_t relations = 0;
  for (std::size_t q = 0; q < edges.size(); ++q) {
    const auto& e = edges[q];
    const double v = static_cast<double>(e.value);
    SPINDLE_CHECK(v >= 1 && v <= static_cast<double>(max_relations) && std::floor(v) == v, FormatError,
                  "relations_of_typed_edges: edge ", q, " (", e.row, " -> ", e.col, ") has relation id ", v,
                  ", not an integer in [1, ", max_relations, "]");
    SPINDLE_CHECK(e.row >= 0 && e.row < nodes && e.col >= 0 && e.col < nodes, ShapeError,
                  "relations_of_typed_edges: edge ", q, " (", e.row, " -> ", e.col, ") is outside the ", nodes,
                  " nodes");
    relations = std::max(relations, static_cast<std::int64_t>(v));
  }
  std::vector<std::vector<Triplet<T>>> by_relation(static_cast<std::size_t>(relations));
  for (const auto& e : edges)
    by_relation[static_cast<std::size_t>(e.value) - 1].push_back({e.col, e.row, T(1)});
  std::vector<Csr<T, Index>> out;
  out.reserve(by_relation.size());
  for (const auto& t : by_relation) out.push_back(Csr<T, Index>::from_triplets(nodes, nodes, t, Duplicates::keep_last));
  return out;
}

}  // namespace spindle
