// 12_gcn_layer: a GCN layer that picks its composition from the input (GRANII). The layer
// expression D^-1/2 A D^-1/2 H W has 12 re-associations; 4 survive pruning; the cost model
// (data/gnn-cost-model.txt, trained by spindle-profile) chooses one per graph and sizes.
#include <spindle/gnn.hpp>
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace sp = spindle;
namespace gnn = spindle::gnn;

int main(int argc, char** argv) {
  const auto A = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  const auto model = gnn::CostModel::load(SPINDLE_EXAMPLE_GNN_MODEL);
  for (auto [k_in, k_out] : {std::pair<std::int64_t, std::int64_t>{256, 16}, {16, 256}}) {
    const auto H = sp::Tensor<float>::random({A.rows(), k_in}, 1, -1, 1);
    const auto W = sp::Tensor<float>::random({k_in, k_out}, 2, -1, 1);
    gnn::GCNConv<float> conv(W, model);
    const auto out = conv(A, H.view());
    std::cout << "K_in " << k_in << " -> K_out " << k_out << ":\n" << conv.explain();

    // Check against a plain loop: out = D A D (H W), d(i) = deg(i)^-1/2.
    std::vector<double> hw(static_cast<std::size_t>(A.rows() * k_out), 0.0);
    for (std::int64_t i = 0; i < A.rows(); ++i)
      for (std::int64_t k = 0; k < k_in; ++k)
        for (std::int64_t o = 0; o < k_out; ++o) hw[i * k_out + o] += double(H(i, k)) * W(k, o);
    auto d = [&](std::int64_t i) {
      const auto n = A.indptr()[i + 1] - A.indptr()[i];
      return n ? 1.0 / std::sqrt(double(n)) : 0.0;
    };
    double err = 0, scale = 1;
    for (std::int64_t i = 0; i < A.rows(); ++i)
      for (std::int64_t o = 0; o < k_out; ++o) {
        double s = 0;
        for (auto q = A.indptr()[i]; q < A.indptr()[i + 1]; ++q) s += d(i) * d(A.indices()[q]) * hw[A.indices()[q] * k_out + o];
        err = std::max(err, std::abs(s - out(i, o)));
        scale = std::max(scale, std::abs(s));
      }
    std::printf("max error vs loop %.3g (relative %.3g)\n\n", err, err / scale);
    if (err / scale > 1e-4) return 1;
  }
  return 0;
}
