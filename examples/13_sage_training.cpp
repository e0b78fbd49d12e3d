// 13_sage_training: training a 2-layer GraphSAGE (mean) with Spindle's layers and their
// backward passes. Each layer picks its composition per graph and sizes (GRANII) and keeps
// what its backward needs; the loss, ReLU and optimiser (Adam) are plain loops here.
//
// The shared graphs come without node features or labels, so the task is a teacher-student
// one that needs the graph to solve: a fixed random 2-layer GraphSAGE (the teacher) labels
// every node from random features; a student with its own initial weights learns those
// labels on 70 % of the nodes and is scored on the other 30 %. A student that ignored the
// edges could not recover the labels (they depend on the neighbours' features).
//
//   13_sage_training [graph.mtx[.gz]] [epochs]        (default: the bundled cora, 60 epochs)
// Exit code 1 if the loss does not fall or the test accuracy stays near the majority class.
#include <spindle/gnn.hpp>
#include <spindle/spindle.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace sp = spindle;
namespace gnn = spindle::gnn;
using Tensor = sp::Tensor<float>;

namespace {

constexpr std::int64_t kFeatures = 32, kHidden = 32, kClasses = 6;

Tensor glorot(std::int64_t in, std::int64_t out, std::uint64_t seed) {
  const double r = std::sqrt(6.0 / static_cast<double>(in + out));
  return Tensor::random({in, out}, seed, -r, r);
}

// Adam on one parameter tensor.
struct Adam {
  std::vector<float> m, v;
  int t = 0;
  void step(Tensor& w, sp::TensorView<const float> g, float lr = 0.01f) {
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
    if (m.empty()) m.assign(w.values().size(), 0.0f), v.assign(w.values().size(), 0.0f);
    ++t;
    const float c1 = 1 - std::pow(b1, static_cast<float>(t)), c2 = 1 - std::pow(b2, static_cast<float>(t));
    for (std::size_t q = 0; q < m.size(); ++q) {
      m[q] = b1 * m[q] + (1 - b1) * g.values()[q];
      v[q] = b2 * v[q] + (1 - b2) * g.values()[q] * g.values()[q];
      w.values()[q] -= lr * (m[q] / c1) / (std::sqrt(v[q] / c2) + eps);
    }
  }
};

// A 2-layer GraphSAGE: conv1 -> ReLU -> conv2 (logits).
struct Sage2 {
  gnn::SAGEConv<float> conv1, conv2;
  Tensor hidden;  // ReLU(conv1(A, X)), kept for conv2's backward
  Sage2(std::uint64_t seed, const gnn::CostModel& model)
      : conv1(glorot(kFeatures, kHidden, seed), glorot(kFeatures, kHidden, seed + 1), model),
        conv2(glorot(kHidden, kClasses, seed + 2), glorot(kHidden, kClasses, seed + 3), model) {}
  sp::TensorView<const float> forward(const sp::Csr<float>& a, const Tensor& x) {
    const auto z = conv1.forward(a, x.view());
    hidden = Tensor::zeros(z.shape());
    for (std::size_t q = 0; q < hidden.values().size(); ++q) hidden.values()[q] = std::max(0.0f, z.values()[q]);
    return conv2.forward(a, hidden.view());
  }
};

}  // namespace

int main(int argc, char** argv) {
  const auto a = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 60;
  const std::int64_t n = a.rows();
  const auto model = gnn::CostModel::load(SPINDLE_EXAMPLE_GNN_MODEL);
  const Tensor x = Tensor::random({n, kFeatures}, 1, -1, 1);

  // Labels from the teacher.
  std::vector<int> label(static_cast<std::size_t>(n));
  {
    Sage2 teacher(100, model);
    const auto logits = teacher.forward(a, x);
    for (std::int64_t i = 0; i < n; ++i) {
      const float* row = logits.values().data() + i * kClasses;
      label[i] = static_cast<int>(std::max_element(row, row + kClasses) - row);
    }
  }
  std::vector<char> train(static_cast<std::size_t>(n));
  std::int64_t n_train = 0;
  for (std::int64_t i = 0; i < n; ++i) n_train += (train[i] = ((i * 2654435761u) >> 7) % 10 < 7);
  std::vector<std::int64_t> count(kClasses, 0);
  for (std::int64_t i = 0; i < n; ++i) count[label[i]] += !train[i];
  const double majority = static_cast<double>(*std::max_element(count.begin(), count.end())) /
                          static_cast<double>(std::max<std::int64_t>(1, n - n_train));

  Sage2 student(200, model);
  // Choose compositions by forward + backward cost: the first layer needs its weights'
  // gradients only, the second also its input's.
  student.conv1.set_training(false);
  student.conv2.set_training(true);
  std::vector<Adam> opt(4);
  Tensor d_logits = Tensor::zeros({n, kClasses});
  double first_loss = 0, loss = 0, accuracy = 0, ms = 0;
  std::printf("%lld nodes, %lld edges; %lld training nodes; majority class %.1f %% of the test nodes\n",
              static_cast<long long>(n), static_cast<long long>(a.nnz()), static_cast<long long>(n_train),
              100 * majority);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto started = std::chrono::steady_clock::now();
    const auto logits = student.forward(a, x);
    // Softmax cross-entropy over the training nodes; accuracy over the test nodes.
    loss = 0;
    std::int64_t correct = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const float* z = logits.values().data() + i * kClasses;
      float* dz = d_logits.values().data() + i * kClasses;
      const float zmax = *std::max_element(z, z + kClasses);
      double sum = 0;
      for (std::int64_t c = 0; c < kClasses; ++c) sum += std::exp(double(z[c] - zmax));
      if (train[i]) {
        loss -= double(z[label[i]] - zmax) - std::log(sum);
        for (std::int64_t c = 0; c < kClasses; ++c)
          dz[c] = static_cast<float>((std::exp(double(z[c] - zmax)) / sum - (c == label[i])) / double(n_train));
      } else {
        std::fill(dz, dz + kClasses, 0.0f);
        correct += std::max_element(z, z + kClasses) - z == label[i];
      }
    }
    loss /= static_cast<double>(n_train);
    accuracy = static_cast<double>(correct) / static_cast<double>(std::max<std::int64_t>(1, n - n_train));
    if (epoch == 0) first_loss = loss;

    // Backward: conv2 (weights and its input), ReLU, conv1 (weights only).
    const auto g2 = student.conv2.backward(d_logits.view());
    Tensor d_hidden = Tensor::zeros(student.hidden.shape());
    for (std::size_t q = 0; q < d_hidden.values().size(); ++q)
      d_hidden.values()[q] = student.hidden.values()[q] > 0 ? g2.input.values()[q] : 0.0f;
    opt[2].step(student.conv2.weight("Wself"), g2.weights.at("Wself"));
    opt[3].step(student.conv2.weight("Wneigh"), g2.weights.at("Wneigh"));
    const auto g1 = student.conv1.backward(d_hidden.view(), false);
    opt[0].step(student.conv1.weight("Wself"), g1.weights.at("Wself"));
    opt[1].step(student.conv1.weight("Wneigh"), g1.weights.at("Wneigh"));
    const double epoch_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    if (epoch > 0) ms += epoch_ms;
    if (epoch % 10 == 0 || epoch == epochs - 1)
      std::printf("epoch %3d  loss %.4f  test accuracy %.1f %%  (%.1f ms)\n", epoch, loss, 100 * accuracy, epoch_ms);
  }
  std::printf("mean epoch (forward + loss + backward + Adam) %.2f ms\n", ms / std::max(1, epochs - 1));
  std::printf("layer 1: %s", student.conv1.explain().c_str());
  const bool ok = loss < 0.6 * first_loss && accuracy > majority + 0.2;
  std::printf("%s: loss %.4f -> %.4f, test accuracy %.1f %% (majority class %.1f %%)\n", ok ? "ok" : "FAILED",
              first_loss, loss, 100 * accuracy, 100 * majority);
  return ok ? 0 : 1;
}
