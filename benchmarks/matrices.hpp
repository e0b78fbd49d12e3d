// The matrices of a spindle-bench run: Matrix Market files and the generated R-MAT graph,
// loaded once (shared by the CPU and the CUDA backends).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
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
  // rgcn_spmm (rgcn_input.hpp): a is the relations stacked side by side and these are the
  // same relations as Ell3dBuckets; null for every other matrix.
  std::shared_ptr<const spindle::Ell3dBuckets<T>> relations;
};

template <class T>
std::vector<Loaded<T>> load_matrices(const Config& cfg) {
  std::vector<Loaded<T>> out;
  for (auto& path : cfg.matrices) {
    std::fprintf(stderr, "[bench] reading %s\n", path.c_str());
    spindle::Timer t;
    Loaded<T> m{{}, spindle::read_matrix_market<T>(path), nullptr};
    m.info = {m.a.name(), path, m.a.rows(), m.a.cols(), m.a.nnz(), t.seconds(), {}};
    out.push_back(std::move(m));
  }
  if (cfg.rmat_scale > 0) {
    RmatParams p{cfg.rmat_scale, cfg.edge_factor, cfg.seed};
    std::fprintf(stderr, "[bench] generating %s\n", rmat_name(p).c_str());
    spindle::Timer t;
    Loaded<T> m{{}, generate_rmat<T>(p), nullptr};
    m.info = {m.a.name(), "R-MAT a=.57 b=.19 c=.19, seed " + std::to_string(cfg.seed), m.a.rows(), m.a.cols(),
              m.a.nnz(), t.seconds(), {}};
    out.push_back(std::move(m));
  }
  if (cfg.kron_block > 1)
    for (auto& m : out) {
      m.a = spindle::kron_blocks(m.a, cfg.kron_block);
      m.info.name += "-kron" + std::to_string(cfg.kron_block);
      m.info.rows = m.a.rows(), m.info.cols = m.a.cols(), m.info.nnz = m.a.nnz();
      m.info.source += " (A + I) kron dense " + std::to_string(cfg.kron_block) + "x" + std::to_string(cfg.kron_block);
    }
  // --values random: every stored value drawn uniformly in [-1, 1] (a weighted graph). The
  // graphs are patterns whose values are all 1, which SuiteSparse:GraphBLAS stores as one
  // value (an "iso" matrix) and then never reads or moves per entry.
  if (cfg.random_values)
    for (auto& m : out) {
      std::mt19937_64 draw(cfg.seed + 101);
      std::uniform_real_distribution<double> u(-1.0, 1.0);
      for (auto& v : m.a.values()) v = static_cast<T>(u(draw));
      m.info.source += " (values drawn in [-1, 1])";
    }
  // The input features that format and composition choices read (spindle/inspect).
  for (auto& m : out) m.info.features = spindle::inspect::graph_features(m.a);
  return out;
}

}  // namespace bench
