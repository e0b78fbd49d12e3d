// 15_rgcn_inference: a 2-layer RGCN (Schlichtkrull et al.) for inference on a typed graph
// (the shared RGCN graphs: AIFB, MUTAG). Each relation is its own graph; gnn::RGCNConv sums
// H W0 + sum_r D_r^-1 A_r H W_r, and every relation chooses its composition from its own
// graph and the sizes (GRANII): a relation with a few edges aggregates first, a dense one
// may multiply by its weight first. The first layer is checked against a plain loop.
//
//   15_rgcn_inference graph.mtx[.gz] [K_in] [K_hidden]
// The graph file holds one entry "src dst relation" per typed edge (relation ids 1..R, see
// ../shared/data/README.md); without an argument a small typed graph is generated.
#include <spindle/gnn.hpp>
#include <spindle/spindle.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

namespace sp = spindle;
namespace gnn = spindle::gnn;

int main(int argc, char** argv) {
  // Typed edges (src, dst, relation).
  std::vector<sp::Triplet<float>> edges;
  std::int64_t n = 0;
  if (argc > 1) {
    const auto t = sp::read_matrix_market_triplets<float>(argv[1]);
    n = t.header.rows;
    edges = t.entries;
  } else {
    n = 500;
    sp::Rng rng(7);
    for (int e = 0; e < 6000; ++e)
      edges.push_back({static_cast<std::int64_t>(rng.value<double>(0, n - 1e-9)),
                       static_cast<std::int64_t>(rng.value<double>(0, n - 1e-9)),
                       static_cast<float>(1 + (e % 7 == 0 ? 0 : e % 5))});  // 5 relations, unequal sizes
  }
  // One graph per relation: row = the receiving node (dst), column = the sender (src).
  const std::vector<sp::Csr<float>> graphs = sp::relations_of_typed_edges<float>(n, edges);
  const int relations = static_cast<int>(graphs.size());
  std::vector<const sp::Csr<float>*> ptrs;
  for (const auto& g : graphs) ptrs.push_back(&g);

  const std::int64_t k_in = argc > 2 ? std::atoll(argv[2]) : 16, k_hidden = argc > 3 ? std::atoll(argv[3]) : 16;
  const std::int64_t k_classes = 4;
  const auto model = gnn::CostModel::load(SPINDLE_EXAMPLE_GNN_MODEL);
  auto weights = [&](std::int64_t in, std::int64_t out, std::uint64_t seed) {
    std::vector<sp::Tensor<float>> w;
    const double r = 1.0 / std::sqrt(static_cast<double>(in));
    for (int q = 0; q < relations; ++q) w.push_back(sp::Tensor<float>::random({in, out}, seed + q, -r, r));
    return w;
  };
  const auto h = sp::Tensor<float>::random({n, k_in}, 1, -1, 1);
  const auto w1 = weights(k_in, k_hidden, 100);
  gnn::RGCNConv<float> conv1(sp::Tensor<float>::random({k_in, k_hidden}, 2, -0.25, 0.25), w1, model);
  gnn::RGCNConv<float> conv2(sp::Tensor<float>::random({k_hidden, k_classes}, 3, -0.25, 0.25),
                             weights(k_hidden, k_classes, 300), model);

  sp::TensorView<const float> z1, logits;
  sp::Tensor<float> h1;
  double ms[2];
  for (int call = 0; call < 2; ++call) {  // the first call selects per relation; the second reuses the choices
    const auto started = std::chrono::steady_clock::now();
    z1 = conv1.forward(ptrs, h.view());
    h1 = sp::Tensor<float>::zeros(z1.shape());
    for (std::size_t q = 0; q < h1.values().size(); ++q) h1.values()[q] = std::max(0.0f, z1.values()[q]);
    logits = conv2.forward(ptrs, h1.view());
    ms[call] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  }
  std::vector<std::int64_t> count(k_classes, 0);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* z = logits.values().data() + i * k_classes;
    ++count[std::max_element(z, z + k_classes) - z];
  }
  std::printf("%lld nodes, %zu typed edges, %d relations; 2 layers (%lld -> %lld -> %lld): first call %.2f ms "
              "(selection included), second %.2f ms\npredicted classes:",
              static_cast<long long>(n), edges.size(), relations, static_cast<long long>(k_in),
              static_cast<long long>(k_hidden), static_cast<long long>(k_classes), ms[0], ms[1]);
  for (auto c : count) std::printf(" %lld", static_cast<long long>(c));
  std::map<std::string, int> chosen;
  for (int r = 0; r < relations; ++r)
    if (const auto* c = conv1.relation(static_cast<std::size_t>(r)).last_run()) ++chosen[c->text];
  std::printf("\nlayer 1, compositions chosen over the %d relations:\n", relations);
  for (const auto& [text, k] : chosen) std::printf("  %3d x %s\n", k, text.c_str());

  // Layer 1 against a plain loop: z1 = h W0 + sum_r D_r^-1 A_r h W_r.
  const auto& w0 = conv1.weight("W0");
  double err = 0, scale = 1e-30;
  std::vector<double> row(static_cast<std::size_t>(k_hidden));
  for (std::int64_t i = 0; i < n; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (std::int64_t k = 0; k < k_in; ++k)
      for (std::int64_t o = 0; o < k_hidden; ++o) row[o] += double(h(i, k)) * w0(k, o);
    for (int r = 0; r < relations; ++r) {
      const auto& a = graphs[static_cast<std::size_t>(r)];
      const auto deg = a.indptr()[i + 1] - a.indptr()[i];
      for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
        for (std::int64_t k = 0; k < k_in; ++k)
          for (std::int64_t o = 0; o < k_hidden; ++o)
            row[o] += double(h(a.indices()[q], k)) * w1[static_cast<std::size_t>(r)](k, o) / double(deg);
    }
    for (std::int64_t o = 0; o < k_hidden; ++o) {
      err = std::max(err, std::abs(row[o] - double(z1.values()[i * k_hidden + o])));
      scale = std::max(scale, std::abs(row[o]));
    }
  }
  std::printf("layer 1: max error vs loop %.3g (relative %.3g)\n", err, err / scale);
  return err / scale <= 1e-4 ? 0 : 1;
}
