// The matrices of a spindle-bench run: Matrix Market files and the generated R-MAT graph,
// loaded once (shared by the CPU and the CUDA backends).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <spindle/spindle.hpp>

#include "cli.hpp"
#include "report.hpp"
#include "rmat.hpp"

namespace bench {

template <class T>
struct Loaded {
  MatrixInfo info;
  spindle::Csr<T> a;
};

// (A + I) (x) B with B a dense d x d block of values 1 / (1 + i + j): each vertex of A's mesh
// carries d unknowns coupled to all d of each neighbour's (a vector-valued FEM operator).
template <class T>
spindle::Csr<T> kron_block(const spindle::Csr<T>& a, int d) {
  const std::int64_t rows = a.rows() * d, cols = a.cols() * d;
  std::vector<std::int32_t> ptr{0}, idx, row;
  std::vector<T> val;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    row.assign(a.indices().begin() + a.indptr()[r], a.indices().begin() + a.indptr()[r + 1]);
    if (r < a.cols() && std::find(row.begin(), row.end(), r) == row.end()) row.push_back(static_cast<std::int32_t>(r));
    std::sort(row.begin(), row.end());
    for (int i = 0; i < d; ++i) {
      for (auto c : row)
        for (int j = 0; j < d; ++j) {
          idx.push_back(static_cast<std::int32_t>(c * d + j));
          val.push_back(static_cast<T>(1.0 / (1 + i + j)));
        }
      if (idx.size() > static_cast<std::size_t>(INT32_MAX)) throw std::runtime_error("--kron-block: too many entries");
      ptr.push_back(static_cast<std::int32_t>(idx.size()));
    }
  }
  return spindle::Csr<T>(rows, cols, std::move(ptr), std::move(idx), std::move(val),
                         a.name() + "-kron" + std::to_string(d));
}

template <class T>
std::vector<Loaded<T>> load_matrices(const Config& cfg) {
  std::vector<Loaded<T>> out;
  for (auto& path : cfg.matrices) {
    std::fprintf(stderr, "[bench] reading %s\n", path.c_str());
    spindle::Timer t;
    Loaded<T> m{{}, spindle::read_matrix_market<T>(path)};
    m.info = {m.a.name(), path, m.a.rows(), m.a.cols(), m.a.nnz(), t.seconds(), {}};
    out.push_back(std::move(m));
  }
  if (cfg.rmat_scale > 0) {
    RmatParams p{cfg.rmat_scale, cfg.edge_factor, cfg.seed};
    std::fprintf(stderr, "[bench] generating %s\n", rmat_name(p).c_str());
    spindle::Timer t;
    Loaded<T> m{{}, generate_rmat<T>(p)};
    m.info = {m.a.name(), "R-MAT a=.57 b=.19 c=.19, seed " + std::to_string(cfg.seed), m.a.rows(), m.a.cols(),
              m.a.nnz(), t.seconds(), {}};
    out.push_back(std::move(m));
  }
  if (cfg.kron_block > 1)
    for (auto& m : out) {
      m.a = kron_block(m.a, cfg.kron_block);
      m.info.name = m.a.name(), m.info.rows = m.a.rows(), m.info.cols = m.a.cols(), m.info.nnz = m.a.nnz();
      m.info.source += " (A + I) kron dense " + std::to_string(cfg.kron_block) + "x" + std::to_string(cfg.kron_block);
    }
  // The input features that format and composition choices read (spindle/inspect).
  for (auto& m : out) m.info.features = spindle::inspect::graph_features(m.a);
  return out;
}

}  // namespace bench
