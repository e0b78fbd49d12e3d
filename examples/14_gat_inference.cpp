// 14_gat_inference: one GAT layer (Velickovic et al., one head) for inference, every stage a
// Spindle kernel: Θ = H W; per-node attention terms el = Θ a_l, er = Θ a_r; edge scores
// LeakyReLU(el(i) + er(j)) on the graph's pattern; a softmax over each row's edges; and the
// aggregation alpha · Θ through a GRANII layer, which chooses between reusing Θ
// (alpha·(H·W)) and aggregating H first ((alpha·H)·W) by the sizes and the graph.
// Checked against a plain loop.
//
//   14_gat_inference [graph.mtx[.gz]] [K_in] [K_out]      (default: the bundled cora, 64 -> 16)
#include <spindle/gnn.hpp>
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace sp = spindle;
namespace gnn = spindle::gnn;
using sp::ops::I;
using sp::ops::J;
using sp::ops::K;

int main(int argc, char** argv) {
  // GAT attends over each node's neighbours and itself: add the missing self loops.
  const auto g = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  std::vector<sp::Triplet<float>> t;
  for (std::int64_t i = 0; i < g.rows(); ++i) {
    for (auto q = g.indptr()[i]; q < g.indptr()[i + 1]; ++q) t.push_back({i, std::int64_t{g.indices()[q]}, 1.0f});
    t.push_back({i, i, 1.0f});
  }
  const auto a = sp::Csr<float>::from_triplets(g.rows(), g.cols(), t, sp::Duplicates::keep_last);
  const std::int64_t n = a.rows(), k_in = argc > 2 ? std::atoll(argv[2]) : 64, k_out = argc > 3 ? std::atoll(argv[3]) : 16;

  const auto h = sp::Tensor<float>::random({n, k_in}, 1, -1, 1);
  const auto w = sp::Tensor<float>::random({k_in, k_out}, 2, -0.3, 0.3);
  const auto a_l = sp::Tensor<float>::random({k_out}, 3, -1, 1);
  const auto a_r = sp::Tensor<float>::random({k_out}, 4, -1, 1);

  // Θ = H W, el = Θ a_l, er = Θ a_r.
  auto theta = sp::Tensor<float>::zeros({n, k_out});
  gnn::kernels::gemm<float>()(h.view(), w.view(), theta);
  auto project = sp::kernel("gat_project", [](sp::in<float, I, K> x, sp::in<float, K> v, sp::out<float, I> y,
                                              sp::iter<I> i, sp::iter<K> k) { y(i) += x(i, k) * v(k); });
  auto el = sp::Tensor<float>::zeros({n}), er = sp::Tensor<float>::zeros({n});
  project(theta, a_l, el);
  project(theta, a_r, er);

  // Edge scores LeakyReLU(el(i) + er(j)) with slope 0.2, then a softmax over each row.
  auto scores_k = sp::kernel("gat_scores", [](sp::in<float, I, J> pattern, sp::in<float, I> l,
                                              sp::in<float, sp::dense<J>> r, sp::out<float, I, J> s, sp::iter<I> i,
                                              sp::iter<J> j) {
    (void)pattern;
    auto e = l(i) + r(j);
    s(i, j) = sp::max(e, 0.2f * e);
  });
  auto scores = a, alpha = a;
  scores_k(a, el, er, scores);
  sp::ops::softmax<float>()(scores, alpha);

  // The aggregation: alpha · H · W, with Θ = H·W already held.
  gnn::AdaptiveLayer<float> aggregate(gnn::layers::gat(), gnn::CostModel::load(SPINDLE_EXAMPLE_GNN_MODEL));
  gnn::Bindings<float> b;
  b.sparse("alpha", alpha).dense("H", h.view()).dense("W", w.view()).value("(H·W)", theta.view());
  const auto out = aggregate(b, "alpha");
  std::printf("GAT %lld -> %lld on %lld nodes, %lld edges (with self loops)\n%s", static_cast<long long>(k_in),
              static_cast<long long>(k_out), static_cast<long long>(n), static_cast<long long>(a.nnz()),
              aggregate.explain().c_str());

  // A plain loop in double.
  std::vector<double> th(static_cast<std::size_t>(n * k_out), 0.0);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < k_in; ++k)
      for (std::int64_t o = 0; o < k_out; ++o) th[i * k_out + o] += double(h(i, k)) * w(k, o);
  double err = 0, scale = 1e-30;
  for (std::int64_t i = 0; i < n; ++i) {
    auto dot = [&](std::int64_t v, const sp::Tensor<float>& vec) {
      double s = 0;
      for (std::int64_t o = 0; o < k_out; ++o) s += th[v * k_out + o] * vec(o);
      return s;
    };
    std::vector<double> e;
    double m = -INFINITY;
    for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q) {
      const double x = dot(i, a_l) + dot(a.indices()[q], a_r);
      e.push_back(std::max(x, 0.2 * x));
      m = std::max(m, e.back());
    }
    double z = 0;
    for (double& x : e) z += (x = std::exp(x - m));
    for (std::int64_t o = 0; o < k_out; ++o) {
      double s = 0;
      for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
        s += e[static_cast<std::size_t>(q - a.indptr()[i])] / z * th[a.indices()[q] * k_out + o];
      err = std::max(err, std::abs(s - out(i, o)));
      scale = std::max(scale, std::abs(s));
    }
  }
  std::printf("max error vs loop %.3g (relative %.3g)\n", err, err / scale);
  return err / scale <= 1e-4 ? 0 : 1;
}
