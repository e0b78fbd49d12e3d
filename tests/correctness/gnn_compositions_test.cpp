// Every composition of every GNN layer expression (gnn/layers.hpp: GCN, GIN, GAT, SGC,
// TAGCN, SAGE-mean, RGCN; promoted and pruned alike) run by gnn::execute against one plain
// reference: the layer's matrix expression evaluated with Eigen dense matrices and plain
// loops (unweighted sparse leaves as their 0/1 pattern, diagonal leaves as row scalings). Random graphs with empty
// rows, both scenarios (K_in > K_out and K_in < K_out), a one-node and an empty graph, and
// the promoted GCN compositions on cora in float. Operand errors: missing and mismatched.
#include <catch2/catch.hpp>

#include <Eigen/Dense>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "correctness_support.hpp"
#include "spindle/gnn.hpp"
#include "spindle/gnn/execute.hpp"
#include "spindle/gnn/layer.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/engines.hpp"
#include "support/reference_interpreter.hpp"

namespace sp = spindle;
namespace gnn = spindle::gnn;
using spindle_test::Shape;

namespace {

using Mat = Eigen::MatrixXd;

// Operands of every layer: sparse A, alpha, A1, A2; diagonals D, Dinv, Dinv1, Dinv2, S;
// dense H and weights W, W0..W2, Wself, Wneigh.
template <class T>
struct Operands {
  std::map<std::string, sp::Csr<T>> sparse;
  std::map<std::string, sp::Tensor<T>> diag, dense;
  gnn::Bindings<T> bindings() const {
    gnn::Bindings<T> b;
    for (const auto& [n, a] : sparse) b.sparse(n, a);
    for (const auto& [n, d] : diag) b.diagonal(n, d.view());
    for (const auto& [n, x] : dense) b.dense(n, x.view());
    return b;
  }
};

template <class T>
Operands<T> make_operands(std::int64_t n, std::int64_t k_in, std::int64_t k_out, std::uint64_t seed) {
  Operands<T> o;
  const Shape g{"graph", n, n, 4.0, 0.2};
  o.sparse.emplace("A", spindle_test::random_csr<T>(g, seed, 0.5, 2.0));
  o.sparse.emplace("alpha", spindle_test::random_csr<T>(g, seed + 1, 0.1, 1.0));
  o.sparse.emplace("A1", spindle_test::random_csr<T>(Shape{"r1", n, n, 3.0, 0.3}, seed + 2, 0.5, 2.0));
  o.sparse.emplace("A2", spindle_test::random_csr<T>(Shape{"r2", n, n, 2.0, 0.1}, seed + 3, 0.5, 2.0));
  std::uint64_t s = seed + 10;
  for (const char* d : {"D", "Dinv", "Dinv1", "Dinv2", "S"})
    o.diag.emplace(d, sp::Tensor<T>::random({n}, s++, 0.25, 1.5));
  o.dense.emplace("H", sp::Tensor<T>::random({n, k_in}, s++, -1, 1));
  for (const char* w : {"W", "W0", "W1", "W2", "Wself", "Wneigh"})
    o.dense.emplace(w, sp::Tensor<T>::random({k_in, k_out}, s++, -1, 1));
  return o;
}

template <class T>
Mat reference(const gnn::Expr& e, const Operands<T>& o);

// left * r, where left is a factor of a product: a diagonal or sparse leaf scales or
// gathers the rows of r directly (O(N) or O(nnz) per column of r), anything else is
// evaluated densely first. A product is evaluated from the right with this, so no step
// multiplies two N x N matrices (on cora D·A·D·H·W would otherwise cost 2 x 2708^3).
template <class T>
Mat multiply_left(const gnn::Expr& left, const Operands<T>& o, const Mat& r) {
  using Op = gnn::ExprNode::Op;
  if (left->op != Op::product && left->op != Op::sum) {
    if (left->info.kind == gnn::MatrixKind::diagonal) {
      const auto& d = o.diag.at(left->name);
      REQUIRE(d.dim(0) == r.rows());
      Mat out = r;
      for (std::int64_t i = 0; i < d.dim(0); ++i) out.row(i) *= static_cast<double>(d.values()[i]);
      return out;
    }
    if (left->info.kind == gnn::MatrixKind::sparse_unweighted || left->info.kind == gnn::MatrixKind::sparse_weighted) {
      const auto& a = o.sparse.at(left->name);
      REQUIRE(a.cols() == r.rows());
      const bool unit = left->info.kind == gnn::MatrixKind::sparse_unweighted;
      Mat out = Mat::Zero(a.rows(), r.cols());
      for (std::int64_t i = 0; i < a.rows(); ++i)
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
          out.row(i) += (unit ? 1.0 : static_cast<double>(a.values()[q])) * r.row(a.indices()[q]);
      return out;
    }
  }
  return reference(left, o) * r;
}

// Dense evaluation of the expression itself (not of a composition).
template <class T>
Mat reference(const gnn::Expr& e, const Operands<T>& o) {
  using Op = gnn::ExprNode::Op;
  if (e->op == Op::product) {
    Mat r = reference(e->children.back(), o);
    for (std::size_t i = e->children.size() - 1; i-- > 0;) r = multiply_left(e->children[i], o, r);
    return r;
  }
  if (e->op == Op::sum) {
    Mat r = reference(e->children[0], o);
    for (std::size_t i = 1; i < e->children.size(); ++i) r += reference(e->children[i], o);
    return r;
  }
  const std::string& n = e->name;
  switch (e->info.kind) {
    case gnn::MatrixKind::diagonal: {
      const auto& d = o.diag.at(n);
      Mat r = Mat::Zero(d.dim(0), d.dim(0));
      for (std::int64_t i = 0; i < d.dim(0); ++i) r(i, i) = d.values()[i];
      return r;
    }
    case gnn::MatrixKind::sparse_unweighted:
    case gnn::MatrixKind::sparse_weighted: {
      const auto& a = o.sparse.at(n);
      Mat r = Mat::Zero(a.rows(), a.cols());
      const bool unit = e->info.kind == gnn::MatrixKind::sparse_unweighted;
      for (std::int64_t i = 0; i < a.rows(); ++i)
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
          r(i, a.indices()[q]) += unit ? 1.0 : static_cast<double>(a.values()[q]);
      return r;
    }
    default: {
      const auto& x = o.dense.at(n);
      Mat r(x.dim(0), x.dim(1));
      for (std::int64_t i = 0; i < x.dim(0); ++i)
        for (std::int64_t j = 0; j < x.dim(1); ++j) r(i, j) = x.values()[i * x.dim(1) + j];
      return r;
    }
  }
}

// The GAT layer holds Θ = H·W: bind it as the value "(H·W)".
template <class T>
sp::Tensor<T> held_theta(const Operands<T>& o) {
  const Mat hw = reference(gnn::dense("H", "N", "K_in") * gnn::weight("W", "K_in", "K_out"), o);
  auto t = sp::Tensor<T>::zeros({hw.rows(), hw.cols()});
  for (Eigen::Index i = 0; i < hw.rows(); ++i)
    for (Eigen::Index j = 0; j < hw.cols(); ++j) t.values()[i * hw.cols() + j] = static_cast<T>(hw(i, j));
  return t;
}

// |got - ref| <= tol * (1 + max |ref|) elementwise.
template <class T>
void check_matches(const sp::Tensor<T>& got, const Mat& ref, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.dim(0) == ref.rows());
  REQUIRE(got.dim(1) == ref.cols());
  const double scale = 1.0 + (ref.size() ? ref.cwiseAbs().maxCoeff() : 0.0);
  double worst = 0;
  for (Eigen::Index i = 0; i < ref.rows(); ++i)
    for (Eigen::Index j = 0; j < ref.cols(); ++j) {
      const double g = static_cast<double>(got.values()[i * ref.cols() + j]);
      worst = std::max(worst, std::isnan(g) ? INFINITY : std::abs(g - ref(i, j)));
    }
  CHECK(worst <= tol * scale);
}

template <class T>
void check_every_composition(const gnn::LayerExpr& layer, std::int64_t n, std::int64_t k_in, std::int64_t k_out,
                             std::uint64_t seed, double tol) {
  const auto o = make_operands<T>(n, k_in, k_out, seed);
  auto b = o.bindings();
  const auto theta = held_theta(o);
  b.value("(H·W)", theta.view());
  const Mat ref = reference(layer.expr, o);
  const auto c = gnn::candidates(layer);
  for (const auto& r : c.ranked)
    check_matches(gnn::execute(r.composition, b), ref, tol,
                  layer.name + " N=" + std::to_string(n) + " K_in=" + std::to_string(k_in) + " K_out=" +
                      std::to_string(k_out) + " " + r.composition.text);
}

}  // namespace

TEST_CASE("gnn compositions: every composition of every layer matches the dense reference (double)", "[gnn]") {
  int sparse_adds = 0;  // steps summing sparse and diagonal terms (assembling kernels)
  for (const auto& layer : gnn::layers::all()) {
    check_every_composition<double>(layer, 53, 7, 3, 11, 1e-12);  // K_in > K_out
    check_every_composition<double>(layer, 41, 3, 9, 12, 1e-12);  // K_in < K_out
    for (const auto& r : gnn::candidates(layer).ranked)
      for (const auto& st : r.composition.steps) sparse_adds += st.prim == gnn::Primitive::sparse_add;
  }
  CHECK(sparse_adds > 0);
}

TEST_CASE("gnn compositions: one node and no nodes", "[gnn]") {
  for (const auto& layer : {gnn::layers::gcn(), gnn::layers::gin(), gnn::layers::sage_mean()}) {
    check_every_composition<double>(layer, 1, 4, 2, 21, 1e-12);
    check_every_composition<double>(layer, 0, 4, 2, 22, 1e-12);
  }
}

TEST_CASE("gnn compositions: float, promoted compositions", "[gnn]") {
  const auto o = make_operands<float>(300, 32, 16, 31);
  const auto b = o.bindings();
  for (const auto& layer : {gnn::layers::gcn(), gnn::layers::gin(), gnn::layers::sage_mean(), gnn::layers::sgc()}) {
    const Mat ref = reference(layer.expr, o);
    for (const auto& r : gnn::candidates(layer).promoted())
      check_matches(gnn::execute(r.composition, b), ref, 2e-5, layer.name + " float " + r.composition.text);
  }
}

TEST_CASE("gnn compositions: the promoted GCN compositions agree on cora", "[gnn][graphs]") {
  const auto cora = spindle_test::load_graph<float>("gnn/cora.mtx.gz", 41);
  if (!cora) return;
  Operands<float> o;
  const std::int64_t n = cora->rows();
  o.sparse.emplace("A", *cora);
  auto d = sp::Tensor<float>::zeros({n});
  for (std::int64_t i = 0; i < n; ++i)
    d.values()[i] = 1.0f / std::sqrt(static_cast<float>(cora->indptr()[i + 1] - cora->indptr()[i] + 1));
  o.diag.emplace("D", d);
  o.dense.emplace("H", sp::Tensor<float>::random({n, 64}, 42, -1, 1));
  o.dense.emplace("W", sp::Tensor<float>::random({64, 16}, 43, -1, 1));
  const Mat ref = reference(gnn::layers::gcn().expr, o);
  const auto b = o.bindings();
  for (const auto& r : gnn::candidates(gnn::layers::gcn()).promoted())
    check_matches(gnn::execute(r.composition, b), ref, 2e-5, "cora " + r.composition.text);
}

TEST_CASE("gnn execute: GEMMs that are only terms of a dense sum accumulate into the sum's buffer, broadcasts fold into SpMMs, same result",
          "[gnn]") {
  // SAGE-mean (H·Wself + (Dinv·A·H)·Wneigh), TAGCN and GIN forms: every composition, wide and
  // narrow outputs (the two GEMM forms), run fused (execute) and step by step (execute with
  // step times), twice with one workspace (buffers reused).
  // The first two products of a sum run as one pair pass (row form, or dot-product form for
  // the narrow K_out 3); a third (TAGCN's three hops) accumulates.
  // GCN's and SGC's broadcasts fold into their SpMMs (broadcasts_folded), either side.
  std::size_t fused = 0, pairs = 0, accumulated = 0, folded = 0;
  for (const auto& layer :
       {gnn::layers::sage_mean(), gnn::layers::tagcn(), gnn::layers::gin(), gnn::layers::gcn(), gnn::layers::sgc()})
    for (auto [n, kin, kout] :
         {std::tuple<std::int64_t, std::int64_t, std::int64_t>{57, 6, 3}, {40, 5, 21}, {1, 2, 9}, {30, 24, 10}}) {
      const auto o = make_operands<double>(n, kin, kout, 61);
      const auto b = o.bindings();
      const Mat ref = reference(layer.expr, o);
      for (const auto& r : gnn::candidates(layer).ranked) {
        const std::string what = layer.name + " N=" + std::to_string(n) + " K_out=" + std::to_string(kout) + " " +
                                 r.composition.text;
        const auto into = gnn::gemms_into_sums(r.composition);
        for (int by : gnn::broadcasts_folded(r.composition)) folded += by >= 0;
        std::size_t expected_pairs = 0;  // sums with two products inside them (one inner width here)
        for (std::size_t s = 0; s < into.size(); ++s) {
          const auto& st = r.composition.steps[s];
          if (st.prim == gnn::Primitive::dense_add) {
            int products = 0;
            for (int a : st.args) products += into[static_cast<std::size_t>(a)];
            if (products >= 2) ++expected_pairs;
            if (products >= 3) ++accumulated;
          }
          if (!into[s]) continue;
          ++fused;
          REQUIRE(st.prim == gnn::Primitive::gemm);
          REQUIRE(static_cast<int>(s) != r.composition.result);
        }
        pairs += expected_pairs;
        gnn::Workspace<double> ws, timed;
        std::vector<double> ms;
        for (int round = 0; round < 2; ++round) {
          const auto got = gnn::execute(r.composition, b, ws);
          CHECK(ws.gemm_pairs == expected_pairs);
          const auto sep = gnn::execute(r.composition, b, timed, &ms);
          CHECK(timed.gemm_pairs == 0);
          check_matches(sp::Tensor<double>::from(std::vector<double>(got.values().begin(), got.values().end()), got.shape()),
                        ref, 1e-12, what + " fused");
          check_matches(sp::Tensor<double>::from(std::vector<double>(sep.values().begin(), sep.values().end()), sep.shape()),
                        ref, 1e-12, what + " step by step");
        }
      }
    }
  CHECK(fused > 0);
  CHECK(pairs > 0);
  CHECK(accumulated > 0);
  CHECK(folded > 0);
}

TEST_CASE("gnn execute: a missing or mismatched operand is a ShapeError naming it, before any kernel runs", "[gnn]") {
  auto o = make_operands<double>(20, 4, 3, 51);
  const auto c = gnn::candidates(gnn::layers::gcn()).ranked.front().composition;
  SECTION("missing") {
    gnn::Bindings<double> b;
    b.sparse("A", o.sparse.at("A")).dense("H", o.dense.at("H").view()).dense("W", o.dense.at("W").view());
    CHECK_THROWS_WITH(gnn::execute(c, b), Catch::Contains("no diagonal operand bound for 'D'"));
  }
  SECTION("mismatched N") {
    auto b = o.bindings();
    const auto short_d = sp::Tensor<double>::zeros({19});
    b.diagonal("D", short_d.view());
    CHECK_THROWS_AS(gnn::execute(c, b), sp::ShapeError);
    CHECK_THROWS_WITH(gnn::execute(c, b), Catch::Contains("N = 19"));
  }
  SECTION("mismatched K_in") {
    auto b = o.bindings();
    const auto w = sp::Tensor<double>::zeros({5, 3});
    b.dense("W", w.view());
    CHECK_THROWS_WITH(gnn::execute(c, b), Catch::Contains("K_in"));
  }
}

TEST_CASE("gnn layers: GCNConv selects a composition per graph and sizes and matches the reference", "[gnn]") {
  const Shape s{"graph", 120, 120, 6.0, 0.1};
  const auto a = spindle_test::random_csr<double>(s, 61, 0.5, 2.0);
  const auto a2 = spindle_test::random_csr<double>(Shape{"graph2", 90, 90, 3.0, 0.0}, 62, 0.5, 2.0);
  for (auto [kin, kout] : {std::pair<std::int64_t, std::int64_t>{12, 4}, {4, 12}}) {
    INFO("K_in " << kin << " K_out " << kout);
    auto w = sp::Tensor<double>::random({kin, kout}, 63, -1, 1);
    gnn::GCNConv<double> conv(w, gnn::CostModel{});
    for (const auto* g : {&a, &a2}) {
      Operands<double> o;
      o.sparse.emplace("A", *g);
      o.diag.emplace("D", gnn::inverse_sqrt_degree(*g));
      o.dense.emplace("H", sp::Tensor<double>::random({g->rows(), kin}, 64, -1, 1));
      o.dense.emplace("W", w);
      const Mat ref = reference(gnn::layers::gcn().expr, o);
      check_matches(conv(*g, o.dense.at("H").view()), ref, 1e-12, "GCNConv");
      const std::string first = conv.explain();
      CHECK(first.find("  * ") != std::string::npos);
      // The second call reuses the choice.
      check_matches(conv(*g, o.dense.at("H").view()), ref, 1e-12, "GCNConv again");
      CHECK(conv.explain() == first);
    }
  }
}

TEST_CASE("gnn layers: AdaptiveLayer runs GIN and SAGE-mean with the selected composition", "[gnn]") {
  for (const auto& layer : {gnn::layers::gin(), gnn::layers::sage_mean()}) {
    const auto o = make_operands<double>(70, 6, 3, 71);
    const auto b = o.bindings();
    gnn::AdaptiveLayer<double> l(layer, gnn::CostModel{});
    check_matches(l(b), reference(layer.expr, o), 1e-12, layer.name);
    const auto& chosen = l.chosen(b);
    bool promoted = false;
    for (const auto& r : l.compositions().ranked) promoted |= r.promoted && r.composition.text == chosen.text;
    CHECK(promoted);
  }
}

// --- backward -------------------------------------------------------------------------------
// Gradients of L = sum(out ∘ G) by gnn::backward against the expression's own dense gradient
// (reference_backward below: product rule over the expression tree, independent of any
// composition), for every composition of every layer; finite differences of Spindle's
// forward check the reference itself.

namespace {

// Accumulates dL/d(leaf) as dense matrices, for dL/d(e) = g.
template <class T>
void reference_backward(const gnn::Expr& e, const Mat& g, const Operands<T>& o, std::map<std::string, Mat>& out) {
  using Op = gnn::ExprNode::Op;
  if (e->op == Op::sum) {
    for (const auto& c : e->children) reference_backward(c, g, o, out);
    return;
  }
  if (e->op == Op::product) {
    const std::size_t m = e->children.size();
    std::vector<Mat> val;
    for (const auto& c : e->children) val.push_back(reference(c, o));
    for (std::size_t k = 0; k < m; ++k) {
      Mat gk = g;
      for (std::size_t j = 0; j < k; ++j) gk = val[j].transpose() * gk;  // (f1..f(k-1))^T g
      for (std::size_t j = m; j-- > k + 1;) gk = gk * val[j].transpose();  // ... (f(k+1)..fm)^T
      reference_backward(e->children[k], gk, o, out);
    }
    return;
  }
  auto [it, fresh] = out.emplace(e->name, g);
  if (!fresh) it->second += g;
}

// The gradient of a leaf as backward returns it: dense whole, diagonal its diagonal, sparse
// weighted its stored entries.
template <class T>
Mat project(const std::string& name, const Mat& g, const Operands<T>& o) {
  if (o.diag.count(name)) return g.diagonal();
  if (o.sparse.count(name)) {
    const auto& a = o.sparse.at(name);
    Mat r(a.nnz(), 1);
    for (std::int64_t i = 0; i < a.rows(); ++i)
      for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q) r(q, 0) = g(i, a.indices()[q]);
    return r;
  }
  return g;
}

template <class T>
Mat to_mat(sp::TensorView<const T> v) {
  const Eigen::Index r = v.dim(0), c = v.rank() == 2 ? v.dim(1) : 1;
  Mat m(r, c);
  for (Eigen::Index i = 0; i < r; ++i)
    for (Eigen::Index j = 0; j < c; ++j) m(i, j) = static_cast<double>(v.values()[i * c + j]);
  return m;
}

void check_close(const Mat& got, const Mat& ref, double tol, const std::string& what) {
  INFO(what);
  REQUIRE(got.rows() == ref.rows());
  REQUIRE(got.cols() == ref.cols());
  const double scale = 1.0 + (ref.size() ? ref.cwiseAbs().maxCoeff() : 0.0);
  const double worst = ref.size() ? (got - ref).cwiseAbs().maxCoeff() : 0.0;
  CHECK(worst <= tol * scale);
}

// The names a composition reads that have a gradient (every input but pattern-only sparse).
std::set<std::string> differentiable_inputs(const gnn::Composition& c) {
  std::set<std::string> r;
  for (const auto& st : c.steps)
    if (st.prim == gnn::Primitive::input && st.value->info.kind != gnn::MatrixKind::sparse_unweighted)
      r.insert(st.reused ? st.value->key : st.value->name);
  return r;
}

// How many gradient sums backward should form as two GEMM products in one pass: values on a
// path from a differentiable leaf that are the left operand of two or more GEMMs (SAGE's H in
// H·Wself and H·Wneigh; every GEMM of these layers maps K_in to K_out).
std::size_t expected_gradient_pairs(const gnn::Composition& c) {
  std::vector<char> needs(c.steps.size(), 0);
  std::vector<int> gemm_uses(c.steps.size(), 0);
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const auto& st = c.steps[s];
    if (st.prim == gnn::Primitive::input) needs[s] = st.value->info.kind != gnn::MatrixKind::sparse_unweighted;
    for (int a : st.args) needs[s] |= needs[static_cast<std::size_t>(a)];
    if (st.prim == gnn::Primitive::gemm) ++gemm_uses[static_cast<std::size_t>(st.args.at(0))];
  }
  std::size_t r = 0;
  for (std::size_t s = 0; s < c.steps.size(); ++s) r += needs[s] && gemm_uses[s] >= 2;
  return r;
}

// The differentiable names of a layer's operands as a layer trains them: every one but the
// diagonals (degree normalisations are derived from the graph, not trained).
std::set<std::string> trained_inputs(const gnn::Composition& c) {
  std::set<std::string> r;
  for (const auto& st : c.steps)
    if (st.prim == gnn::Primitive::input && st.value->info.kind != gnn::MatrixKind::sparse_unweighted &&
        st.value->info.kind != gnn::MatrixKind::diagonal)
      r.insert(st.reused ? st.value->key : st.value->name);
  return r;
}

// How many row broadcasts backward should fold into SpMM passes for the gradients in `wrt`:
// an SpMM C = A X on a path from `wrt` whose X is a row broadcast diag(d) Z read by it alone,
// d not on such a path (dZ in the SpMM's pass); and an SpMM whose value is read only by a row
// broadcast diag(d) C (not itself folded that way), with A's values not differentiated (dC's
// scaling in the SpMM's pass).
std::size_t expected_gradient_folds(const gnn::Composition& c, const std::set<std::string>& wrt) {
  const std::size_t n = c.steps.size();
  std::vector<char> needs(n, 0);
  std::vector<int> users(n, 0), user(n, -1);
  for (std::size_t s = 0; s < n; ++s) {
    const auto& st = c.steps[s];
    if (st.prim == gnn::Primitive::input) needs[s] = wrt.count(st.reused ? st.value->key : st.value->name) > 0;
    for (int a : st.args) {
      needs[s] |= needs[static_cast<std::size_t>(a)];
      ++users[static_cast<std::size_t>(a)];
      user[static_cast<std::size_t>(a)] = static_cast<int>(s);
    }
  }
  auto is_spmm = [&](std::size_t s) {
    return c.steps[s].prim == gnn::Primitive::spmm_weighted || c.steps[s].prim == gnn::Primitive::spmm_unweighted;
  };
  auto arg = [&](std::size_t s, std::size_t k) { return static_cast<std::size_t>(c.steps[s].args.at(k)); };
  std::vector<char> out_folded(n, 0);
  std::size_t r = 0;
  for (std::size_t s = 0; s < n; ++s) {
    if (!is_spmm(s) || !needs[s] || !needs[arg(s, 1)]) continue;
    const std::size_t x = arg(s, 1);
    if (c.steps[x].prim == gnn::Primitive::row_broadcast && users[x] == 1 && !needs[arg(x, 0)]) {
      out_folded[x] = 1;
      ++r;
    }
  }
  for (std::size_t s = 0; s < n; ++s) {
    if (!is_spmm(s) || !needs[s] || users[s] != 1) continue;
    const bool da = c.steps[s].prim == gnn::Primitive::spmm_weighted && needs[arg(s, 0)];
    const auto u = static_cast<std::size_t>(user[s]);
    if (!da && c.steps[u].prim == gnn::Primitive::row_broadcast && arg(u, 1) == s && !out_folded[u]) ++r;
  }
  return r;
}

// Row broadcasts folded into SpMM passes by the backward runs of check_every_gradient.
std::size_t folds_seen = 0;

// Returns how many compositions formed a gradient sum of two GEMM products in one pass.
template <class T>
std::size_t check_every_gradient(const gnn::LayerExpr& layer, std::int64_t n, std::int64_t k_in, std::int64_t k_out,
                                 std::uint64_t seed, double tol, std::size_t stride = 1) {
  std::size_t paired = 0;
  auto o = make_operands<T>(n, k_in, k_out, seed);
  o.dense.emplace("(H·W)", held_theta(o));
  auto b = o.bindings();
  const Mat ref_out = reference(layer.expr, o);
  const auto g = sp::Tensor<T>::random({ref_out.rows(), ref_out.cols()}, seed + 99, -1, 1);
  const Mat gm = to_mat<T>(g.view());
  std::map<std::string, Mat> ref;
  reference_backward(layer.expr, gm, o, ref);
  // A held value Θ = (H·W) enters as a dense leaf of its own: dL/dΘ = (factors left of it)^T G.
  std::map<std::string, Mat> ref_held;
  if (!layer.available.empty()) {
    Operands<T> oh = o;
    reference_backward(gnn::sparse("alpha", "N", "N", true) * gnn::dense("(H·W)", "N", "K_out"), gm, oh, ref_held);
  }
  const auto c = gnn::candidates(layer);
  for (std::size_t i = 0; i < c.ranked.size(); ++i) {
    const auto& r = c.ranked[i];
    if (i % stride != 0 && !r.promoted) continue;
    const std::string what = layer.name + " N=" + std::to_string(n) + " " + r.composition.text;
    gnn::Workspace<T> ws;
    gnn::execute(r.composition, b, ws);
    const auto wrt = differentiable_inputs(r.composition);
    const auto grads = gnn::backward(r.composition, ws, g.view(), wrt);
    for (const auto& name : wrt) {
      const auto& full = ref_held.count(name) ? ref_held.at(name) : ref.at(name);
      check_close(to_mat<T>(grads.at(name)), project(name, full, o), tol, what + " d" + name);
    }
    {
      INFO(what);
      CHECK(ws.gradient_pairs == expected_gradient_pairs(r.composition));
    }
    paired += ws.gradient_pairs > 0;
    // Run twice: buffers reused, results unchanged.
    gnn::execute(r.composition, b, ws);
    const auto again = gnn::backward(r.composition, ws, g.view(), wrt);
    for (const auto& name : wrt) CHECK(to_mat<T>(again.at(name)) == to_mat<T>(grads.at(name)));
    // As a layer trains (no diagonal's gradient asked for): row broadcasts fold into the SpMMs.
    const auto trained = trained_inputs(r.composition);
    if (trained.empty()) continue;
    gnn::execute(r.composition, b, ws);
    const auto tg = gnn::backward(r.composition, ws, g.view(), trained);
    for (const auto& name : trained) {
      const auto& full = ref_held.count(name) ? ref_held.at(name) : ref.at(name);
      check_close(to_mat<T>(tg.at(name)), project(name, full, o), tol, what + " d" + name + " (trained operands only)");
    }
    {
      INFO(what);
      CHECK(ws.gradient_folds == expected_gradient_folds(r.composition, trained));
      // what the cost models assume (backward_inputs)
      std::vector<char> needs(r.composition.steps.size(), 0);
      for (std::size_t s = 0; s < needs.size(); ++s) {
        const auto& st = r.composition.steps[s];
        if (st.prim == gnn::Primitive::input) needs[s] = trained.count(st.reused ? st.value->key : st.value->name) > 0;
        for (int a : st.args) needs[s] |= needs[static_cast<std::size_t>(a)];
      }
      const auto folds = gnn::gradient_broadcast_folds(r.composition, needs);
      CHECK(static_cast<std::size_t>(std::count_if(folds.begin(), folds.end(), [](gnn::GradientFold f) {
              return f != gnn::GradientFold::none;
            })) == ws.gradient_folds);
    }
    folds_seen += ws.gradient_folds;
    // The same with every broadcast gradient as a kernel of its own.
    gnn::Workspace<T> unfolded;
    unfolded.fold_gradient_broadcasts = false;
    gnn::execute(r.composition, b, unfolded);
    const auto ug = gnn::backward(r.composition, unfolded, g.view(), trained);
    CHECK(unfolded.gradient_folds == 0);
    for (const auto& name : trained) {
      const auto& full = ref_held.count(name) ? ref_held.at(name) : ref.at(name);
      check_close(to_mat<T>(ug.at(name)), project(name, full, o), tol, what + " d" + name + " (no folds)");
    }
  }
  return paired;
}

}  // namespace

TEST_CASE("gnn backward: every composition of every layer has the expression's gradient (double)", "[gnn][backward]") {
  for (const auto& layer : gnn::layers::all()) {
    const std::size_t stride = layer.name == "TAGCN" ? 97 : layer.name == "SGC" ? 7 : 1;
    const std::size_t folds_before = folds_seen;
    const std::size_t paired = check_every_gradient<double>(layer, 37, 5, 3, 81, 1e-11, stride) +  // K_in > K_out
                               check_every_gradient<double>(layer, 29, 3, 6, 82, 1e-11, stride);   // K_in < K_out
    if (layer.name == "SAGE-mean" || layer.name == "TAGCN") CHECK(paired > 0);
    // GCN's and SAGE-mean's normalisations go back inside the SpMM's pass in some compositions.
    if (layer.name == "GCN" || layer.name == "SAGE-mean") CHECK(folds_seen > folds_before);
  }
}

TEST_CASE("gnn backward: one node, no nodes, empty rows, float at GNN sizes", "[gnn][backward]") {
  for (const auto& layer : {gnn::layers::gcn(), gnn::layers::gin(), gnn::layers::sage_mean(), gnn::layers::gat()}) {
    check_every_gradient<double>(layer, 1, 4, 2, 91, 1e-11);
    check_every_gradient<double>(layer, 0, 4, 2, 92, 1e-11);
  }
  // The weight gradient's row blocks: row counts around the block size, with and without a tail.
  for (std::int64_t n : {255, 256, 257, 513})
    check_every_gradient<float>(gnn::layers::gcn(), n, 48, 20, 93 + static_cast<std::uint64_t>(n), 2e-4);
  // SAGE's H feeds two GEMMs in some compositions: dH's two products in one pass, whether
  // K_in >= K_out or K_in < K_out.
  CHECK(check_every_gradient<float>(gnn::layers::sage_mean(), 600, 40, 16, 94, 2e-4) > 0);
  CHECK(check_every_gradient<float>(gnn::layers::sage_mean(), 600, 16, 40, 94, 2e-4) > 0);
  // Both GEMM forms (outputs narrower than a SIMD vector take the dot-product form) and the
  // weight gradient of a narrow output (formed transposed).
  check_every_gradient<float>(gnn::layers::gcn(), 300, 24, 6, 95, 2e-4);
  CHECK(check_every_gradient<float>(gnn::layers::sage_mean(), 300, 4, 24, 96, 2e-4) > 0);
  check_every_gradient<float>(gnn::layers::gin(), 300, 15, 16, 97, 2e-4);
}

TEST_CASE("gnn backward: finite differences of Spindle's forward agree with backward", "[gnn][backward]") {
  for (const auto& layer : {gnn::layers::gcn(), gnn::layers::gin(), gnn::layers::sage_mean(), gnn::layers::gat(),
                            gnn::layers::rgcn()}) {
    auto o = make_operands<double>(17, 4, 3, 101);
    o.dense.emplace("(H·W)", held_theta(o));
    for (const auto& r : gnn::candidates(layer).promoted()) {
      const auto& c = r.composition;
      const auto g = sp::Tensor<double>::random({17, 3}, 102, -1, 1);
      auto loss = [&](const Operands<double>& p) {
        const auto out = gnn::execute(c, p.bindings());
        double l = 0;
        for (std::size_t q = 0; q < out.values().size(); ++q) l += out.values()[q] * g.values()[q];
        return l;
      };
      gnn::Workspace<double> ws;
      auto b = o.bindings();
      gnn::execute(c, b, ws);
      const auto wrt = differentiable_inputs(c);
      const auto grads = gnn::backward(c, ws, g.view(), wrt);
      for (const auto& name : wrt) {
        INFO(layer.name << " " << c.text << " d" << name);
        const auto got = grads.at(name);
        // Three entries of each operand: first, middle, last.
        const std::int64_t count = static_cast<std::int64_t>(got.values().size());
        for (std::int64_t q : {std::int64_t{0}, count / 2, count - 1}) {
          if (q < 0 || q >= count) continue;
          Operands<double> plus = o, minus = o;
          auto entry = [&](Operands<double>& p) -> double& {
            if (p.sparse.count(name)) return p.sparse.at(name).values()[q];
            if (p.diag.count(name)) return p.diag.at(name).values()[q];
            return p.dense.at(name).values()[q];
          };
          const double h = 1e-6;
          entry(plus) += h;
          entry(minus) -= h;
          const double fd = (loss(plus) - loss(minus)) / (2 * h);
          CHECK(std::abs(fd - got.values()[q]) <= 1e-6 * (1 + std::abs(fd)));
        }
      }
    }
  }
}

TEST_CASE("gnn backward: errors name what is wrong", "[gnn][backward]") {
  const auto o = make_operands<double>(20, 4, 3, 111);
  const auto b = o.bindings();
  const auto c = gnn::candidates(gnn::layers::gcn()).promoted().front().composition;
  gnn::Workspace<double> ws;
  const auto g = sp::Tensor<double>::zeros({20, 3});
  CHECK_THROWS_WITH(gnn::backward(c, ws, g.view(), {"W"}), Catch::Contains("no forward run"));
  gnn::execute(c, b, ws);
  CHECK_THROWS_AS(gnn::backward(c, ws, g.view(), {"Q"}), sp::UserError);
  CHECK_THROWS_WITH(gnn::backward(c, ws, g.view(), {"Q"}), Catch::Contains("'Q' is not an operand"));
  CHECK_THROWS_WITH(gnn::backward(c, ws, g.view(), {"A"}), Catch::Contains("unweighted"));
  const auto bad = sp::Tensor<double>::zeros({20, 4});
  CHECK_THROWS_AS(gnn::backward(c, ws, bad.view(), {"W"}), sp::ShapeError);
  const auto other = gnn::candidates(gnn::layers::gcn()).promoted().back().composition;
  CHECK_THROWS_WITH(gnn::backward(other, ws, g.view(), {"W"}), Catch::Contains("no forward run"));
}

TEST_CASE("gnn layers: GCNConv, SAGEConv and GINConv forward and backward match the reference", "[gnn][backward]") {
  const auto a = spindle_test::random_csr<double>(Shape{"graph", 150, 150, 5.0, 0.1}, 121, 0.5, 2.0);
  for (auto [kin, kout] : {std::pair<std::int64_t, std::int64_t>{9, 4}, {4, 9}}) {
    INFO("K_in " << kin << " K_out " << kout);
    Operands<double> o;
    o.sparse.emplace("A", a);
    o.diag.emplace("D", gnn::inverse_sqrt_degree(a));
    o.diag.emplace("Dinv", gnn::inverse_degree(a));
    o.diag.emplace("S", sp::Tensor<double>::full({150}, 1.25));
    o.dense.emplace("H", sp::Tensor<double>::random({150, kin}, 122, -1, 1));
    for (const char* w : {"W", "Wself", "Wneigh"})
      o.dense.emplace(w, sp::Tensor<double>::random({kin, kout}, 123 + std::string(w).size(), -1, 1));
    const auto g = sp::Tensor<double>::random({150, kout}, 124, -1, 1);
    gnn::GCNConv<double> gcn(o.dense.at("W"), gnn::CostModel{});
    gnn::SAGEConv<double> sage(o.dense.at("Wself"), o.dense.at("Wneigh"), gnn::CostModel{});
    gnn::GINConv<double> gin(o.dense.at("W"), 0.25, gnn::CostModel{});
    const std::vector<std::pair<gnn::GraphConv<double>*, gnn::LayerExpr>> convs{
        {&gcn, gnn::layers::gcn()}, {&sage, gnn::layers::sage_mean()}, {&gin, gnn::layers::gin()}};
    for (auto& [conv, layer] : convs) {
      INFO(layer.name);
      const auto out = conv->forward(a, o.dense.at("H").view());
      check_close(to_mat<double>(out), reference(layer.expr, o), 1e-12, layer.name + " forward");
      std::map<std::string, Mat> ref;
      reference_backward(layer.expr, to_mat<double>(g.view()), o, ref);
      const auto grads = conv->backward(g.view());
      for (const auto& [name, gw] : grads.weights) check_close(to_mat<double>(gw), ref.at(name), 1e-12, "d" + name);
      check_close(to_mat<double>(grads.input), ref.at("H"), 1e-12, "dH");
      CHECK(conv->backward(g.view(), false).input.values().empty());
    }
  }
  gnn::GCNConv<double> fresh(sp::Tensor<double>::zeros({3, 2}), gnn::CostModel{});
  const auto g = sp::Tensor<double>::zeros({4, 2});
  CHECK_THROWS_WITH(fresh.backward(g.view()), Catch::Contains("backward before any forward"));
  CHECK_THROWS_AS(gnn::SAGEConv<double>(sp::Tensor<double>::zeros({3, 2}), sp::Tensor<double>::zeros({3, 4})),
                  sp::ShapeError);
}

TEST_CASE("gnn layers: degree normalisations are kept with the graph's structure, never with its address", "[gnn]") {
  auto a = spindle_test::random_csr<double>(Shape{"graph", 120, 120, 4.0, 0.2}, 211, 0.5, 2.0);
  const auto b = spindle_test::random_csr<double>(Shape{"graph", 120, 120, 9.0, 0.05}, 212, 0.5, 2.0);  // other degrees
  auto operands = [&](const sp::Csr<double>& g) {
    Operands<double> o;
    o.sparse.emplace("A", g);
    o.diag.emplace("D", gnn::inverse_sqrt_degree(g));
    o.diag.emplace("Dinv", gnn::inverse_degree(g));
    o.dense.emplace("H", sp::Tensor<double>::random({120, 6}, 213, -1, 1));
    for (const char* w : {"W", "Wself", "Wneigh"})
      o.dense.emplace(w, sp::Tensor<double>::random({6, 5}, 214 + std::string(w).size(), -1, 1));
    return o;
  };
  const auto oa = operands(a), ob = operands(b);
  gnn::GCNConv<double> gcn(oa.dense.at("W"), gnn::CostModel{});
  gnn::SAGEConv<double> sage(oa.dense.at("Wself"), oa.dense.at("Wneigh"), gnn::CostModel{});
  const std::vector<std::pair<gnn::GraphConv<double>*, gnn::LayerExpr>> convs{{&gcn, gnn::layers::gcn()},
                                                                             {&sage, gnn::layers::sage_mean()}};
  for (auto& [conv, layer] : convs)
    check_close(to_mat<double>(conv->forward(a, oa.dense.at("H").view())), reference(layer.expr, oa), 1e-12,
                layer.name + " on a");
  // Computed once per structure: a copy shares the kept diagonals; the values are the plain functions'.
  const auto d = gnn::kept_inverse_sqrt_degree(a), dinv = gnn::kept_inverse_degree(a);
  const sp::Csr<double> copy = a;
  CHECK(gnn::kept_inverse_sqrt_degree(copy) == d);
  CHECK(gnn::kept_inverse_degree(copy) == dinv);
  CHECK(std::equal(d->values().begin(), d->values().end(), oa.diag.at("D").values().begin()));
  CHECK(std::equal(dinv->values().begin(), dinv->values().end(), oa.diag.at("Dinv").values().begin()));
  // The same Csr object given b's structure (its arrays may stay where they were): b's degrees.
  a = b;
  CHECK(gnn::kept_inverse_sqrt_degree(a) != d);
  for (auto& [conv, layer] : convs) {
    check_close(to_mat<double>(conv->forward(a, ob.dense.at("H").view())), reference(layer.expr, ob), 1e-12,
                layer.name + " on a given b's structure");
    // and backward reads the degrees of that forward
    const auto g = sp::Tensor<double>::random({120, 5}, 219, -1, 1);
    std::map<std::string, Mat> ref;
    reference_backward(layer.expr, to_mat<double>(g.view()), ob, ref);
    check_close(to_mat<double>(conv->backward(g.view()).input), ref.at("H"), 1e-12, layer.name + " dH on b");
  }
  // The kept diagonal outlives the layer's use but not the graph's last copy.
  std::weak_ptr<const sp::Tensor<double>> weak = gnn::kept_inverse_degree(b);
  {
    sp::Csr<double> temp = spindle_test::random_csr<double>(Shape{"graph", 30, 30, 3.0, 0.0}, 220, 0.5, 2.0);
    std::weak_ptr<const sp::Tensor<double>> w2 = gnn::kept_inverse_degree(temp);
    CHECK(!w2.expired());
    temp = sp::Csr<double>();
    CHECK(w2.expired());
  }
  CHECK(!weak.expired());
}

// --- the GNN kernels against the language's semantics ------------------------------------
// Every kernel of gnn/primitives.hpp (forward and backward) run by the reference interpreter
// and by every CPU engine with 1 and 2 threads and by its CUDA build (on the GPU when there
// is one, else in the emulator after an NVRTC compile to cubin): each output element within
// the interpreter's float error bound.

namespace {

// `k(ins..., out)`: out (a Tensor or Csr, its initial contents as given) is compared.
double extra_tolerance = 0;  // see gat_scores_backward below

template <class Kernel, class Out, class... In>
void check_kernel(const std::string& what, const Kernel& k, const Out& out0, const In&... ins) {
  INFO(what);
  std::vector<sp::runtime::CallArg> args;
  auto ref = out0;
  ((args.emplace_back().view = sp::storage_of(ins)), ...);
  args.emplace_back().view = sp::storage_of(ref);
  spindle::test::Interpreter interp(k.ir(), args);
  interp.run();
  const sp::ir::BufferNode* out = nullptr;
  for (auto& fb : k.ir().buffers)
    if ((fb.buffer->role == sp::ir::BufferRole::output || fb.buffer->role == sp::ir::BufferRole::inout) &&
        fb.origin.kind == sp::ir::ParamOrigin::values)
      out = fb.buffer.get();
  REQUIRE(out);
  auto compare = [&](const Out& got, const std::string& engine) {
    INFO(engine);
    const auto g = got.values();
    const auto r = ref.values();
    REQUIRE(g.size() == r.size());
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t p = 0; p < r.size(); ++p) {
      const double diff = std::abs(static_cast<double>(g[p]) - static_cast<double>(r[p]));
      const bool ok = diff <= interp.error_bound(out, static_cast<std::int64_t>(p)) + extra_tolerance + 1e-30;
      bad += !ok;
      if (!ok) worst = std::max(worst, diff);
    }
    INFO("largest difference beyond the bound " << worst);
    CHECK(bad == 0);
  };
  for (const auto& e : spindle::test::cpu_engines())
    for (int threads : {1, 2}) {
      auto got = out0;
      k.with_runtime(spindle::test::engine_runtime(e, threads))(ins..., got);
      compare(got, e + " " + std::to_string(threads) + " thread(s)");
    }
  static spindle::test::NvrtcCheck nvrtc;
  static spindle::test::EmulatorCache cache;
  auto got = out0;
  std::vector<sp::runtime::CallArg> cargs;
  ((cargs.emplace_back().view = sp::storage_of(ins)), ...);
  cargs.emplace_back().view = sp::storage_of(got);
  spindle::test::run_cuda_build(k.ir(), cargs, &nvrtc, &cache);
  compare(got, spindle::test::cuda_engine_name());
}

}  // namespace

TEST_CASE("gnn backward: the weight gradient x^T g is the plain product for every row count, width and thread count",
          "[gnn][backward]") {
  // matmul_tn cuts the rows into threads x sub-blocks x R rows, then P blocks of one sub-block,
  // then the rest: row counts around those cuts, narrow g (the transposed form), no rows.
  auto& pool = sp::runtime::Runtime::default_instance().pool();
  const int saved = pool.num_threads();
  gnn::Workspace<float> ws;
  for (int threads : {1, 2, 3}) {
    pool.set_num_threads(threads);
    for (std::int64_t rows : {0, 1, 2, 3, 5, 64, 127, 128, 129, 257, 383, 1001, 4099}) {
      for (auto [k, n] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 5}, {17, 40}, {64, 8}, {8, 64}, {130, 33}}) {
        INFO(threads << " threads, " << rows << " rows, K " << k << ", N " << n);
        const auto x = sp::Tensor<float>::random({rows, k}, 151 + rows, -1, 1);
        const auto g = sp::Tensor<float>::random({rows, n}, 152 + k, -1, 1);
        auto out = sp::Tensor<float>::full({k, n}, 5.0f);
        gnn::detail::matmul_tn<float>(x.view(), g.view(), out, ws, 1, 2);
        double worst = 0;
        for (std::int64_t a = 0; a < k; ++a)
          for (std::int64_t b = 0; b < n; ++b) {
            double ref = 0, mag = 0;
            for (std::int64_t i = 0; i < rows; ++i) {
              const double t = double(x.values()[i * k + a]) * g.values()[i * n + b];
              ref += t;
              mag += std::abs(t);
            }
            worst = std::max(worst, std::abs(out.values()[a * n + b] - ref) / (mag + 1e-30));
          }
        CHECK(worst <= 1e-5);
      }
    }
  }
  pool.set_num_threads(saved);
}

TEST_CASE("gnn kernels: forward and backward primitives agree with the reference interpreter on every engine",
          "[gnn][interpreter]") {
  namespace kn = gnn::kernels;
  for (auto [n, kin, kout] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{70, 5, 19}, {33, 17, 3}, {1, 2, 2},
                              {0, 3, 4}}) {
    INFO("N " << n << " K_in " << kin << " K_out " << kout);
    const auto a = spindle_test::random_csr<float>(Shape{"graph", n, n, 4.0, 0.2}, 131, 0.5, 2.0);
    auto pattern_out = a;
    for (float& v : pattern_out.values()) v = 7.0f;  // overwritten by the kernels
    const auto d = sp::Tensor<float>::random({n}, 132, 0.25, 1.5);
    const auto dk = sp::Tensor<float>::random({kin}, 133, 0.25, 1.5);
    const auto x = sp::Tensor<float>::random({n, kin}, 134, -1, 1);
    const auto y = sp::Tensor<float>::random({n, kin}, 135, -1, 1);
    const auto w = sp::Tensor<float>::random({kin, kout}, 136, -1, 1);
    const auto wt = sp::Tensor<float>::random({kout, kin}, 137, -1, 1);
    const auto g = sp::Tensor<float>::random({n, kout}, 138, -1, 1);
    const auto junk = [](std::vector<std::int64_t> shape) { return sp::Tensor<float>::full(std::move(shape), 3.0f); };
    check_kernel("row_broadcast", kn::row_broadcast<float>(), junk({n, kin}), d, x);
    check_kernel("column_broadcast", kn::column_broadcast<float>(), junk({n, kin}), dk, x);
    check_kernel("spmm_unweighted", kn::spmm_unweighted<float>(), junk({n, kin}), a, x);
    // SpMMs with the row broadcasts around them folded in (weighted and pattern-only A)
    check_kernel("spmm_row_scaled_u", kn::spmm_row_scaled<float, false>(), junk({n, kin}), a, d, x);
    check_kernel("spmm_row_scaled_w", kn::spmm_row_scaled<float, true>(), junk({n, kin}), a, d, x);
    check_kernel("spmm_column_scaled_u", kn::spmm_column_scaled<float, false>(), junk({n, kin}), a, d, x);
    check_kernel("spmm_column_scaled_w", kn::spmm_column_scaled<float, true>(), junk({n, kin}), a, d, x);
    const auto d3 = sp::Tensor<float>::random({n}, 144, -1.5, 1.0);
    check_kernel("spmm_both_scaled_u", kn::spmm_both_scaled<float, false>(), junk({n, kin}), a, d, d3, x);
    check_kernel("spmm_both_scaled_w", kn::spmm_both_scaled<float, true>(), junk({n, kin}), a, d, d3, x);
    check_kernel("scale_pattern", kn::scale_pattern<float>(), pattern_out, a, d, d);
    check_kernel("gemm", kn::gemm<float>(), junk({n, kout}), x, w);
    check_kernel("gemm_nt", kn::gemm_nt<float>(), junk({n, kout}), x, wt);
    check_kernel("transpose", kn::transpose<float>(), junk({kout, kin}), w);
    check_kernel("dense_add", kn::dense_add<float>(), junk({n, kin}), x, y);
    // inout: the output's values enter the sum (g and y, random)
    check_kernel("gemm_accumulate", kn::gemm_accumulate<float>(), g, x, w);
    check_kernel("gemm_nt_accumulate", kn::gemm_nt_accumulate<float>(), g, x, wt);
    check_kernel("dense_accumulate", kn::dense_accumulate<float>(), y, x);
    const auto v = sp::Tensor<float>::random({kin, kout}, 142, -1, 1);
    const auto vt = sp::Tensor<float>::random({kout, kin}, 143, -1, 1);
    check_kernel("gemm_pair", kn::gemm_pair<float>(), junk({n, kout}), x, w, y, v);
    check_kernel("gemm_nt_pair", kn::gemm_nt_pair<float>(), junk({n, kout}), x, wt, y, vt);
    check_kernel("row_dot", kn::row_dot<float>(), junk({n}), x, y);
    check_kernel("column_dot", kn::column_dot<float>(), junk({kin}), x, y);
    check_kernel("sddmm_pattern", kn::sddmm_pattern<float>(), pattern_out, a, x, y);
    // one block of one sub-block, and (n >= 4) two blocks of two sub-blocks of n / 4 rows
    const sp::TensorView<const float> x4(x.values().data(), {1, 1, n, kin}), g4(g.values().data(), {1, 1, n, kout});
    check_kernel("gemm_tn_blocks", kn::gemm_tn_blocks<float>(), junk({1, kin, kout}), x4, g4);
    if (n >= 4) {
      const sp::TensorView<const float> xs(x.values().data(), {2, 2, n / 4, kin}), gs(g.values().data(), {2, 2, n / 4, kout});
      check_kernel("gemm_tn_blocks", kn::gemm_tn_blocks<float>(), junk({2, kin, kout}), xs, gs);
    }
    const auto parts = sp::Tensor<float>::random({3, kin, kout}, 139, -1, 1);
    check_kernel("sum_blocks", kn::sum_blocks<float>(), junk({kin, kout}), parts);
    // RGCNConv's gather and scatter (a relation's support): nodes in a scrambled order, some
    // twice (the scatter adds both).
    const std::int64_t m = n == 0 ? 0 : n / 2 + 2;
    auto idx = sp::Tensor<std::int32_t>::zeros({m});
    for (std::int64_t q = 0; q < m; ++q) idx.values()[q] = static_cast<std::int32_t>((q * 7 + 3) % n);
    check_kernel("gather_rows", kn::gather_rows<float>(), junk({m, kin}), x, idx);
    const auto ym = sp::Tensor<float>::random({m, kin}, 145, -1, 1);
    check_kernel("scatter_add_rows", kn::scatter_add_rows<float>(), y, ym, idx);
    const auto d2 = sp::Tensor<float>::random({n}, 140, -1.5, 1.0);
    check_kernel("gat_scores", kn::gat_scores<float>(), pattern_out, a, d2, d);
    auto alpha = a, dalpha = a, s = a;
    sp::Rng rng(141);
    for (auto* m : {&alpha, &dalpha, &s})
      for (float& v : m->values()) v = rng.value<float>(-1.0, 1.0);
    // The interpreter's bound covers an element's own reductions, not a reduced local used
    // after it: the row's dot (sum of alpha dalpha) is summed in another order by an engine
    // (FMA, vector partial sums), and that difference passes through dalpha - dot. Allow it:
    // a few units of rounding of the largest row's sum of |alpha dalpha|, times |alpha|.
    double row_abs = 0;
    for (std::int64_t i = 0; i < alpha.rows(); ++i) {
      double r = 0;
      for (auto q = alpha.indptr()[i]; q < alpha.indptr()[i + 1]; ++q)
        r += std::abs(double(alpha.values()[q]) * dalpha.values()[q]);
      row_abs = std::max(row_abs, r);
    }
    extra_tolerance = 8 * std::numeric_limits<float>::epsilon() * row_abs;
    check_kernel("gat_scores_backward", kn::gat_scores_backward<float>(), pattern_out, alpha, dalpha, s);
    extra_tolerance = 0;
  }
}

TEST_CASE("gnn layers: RGCNConv sums per-relation compositions, forward and backward match the reference",
          "[gnn][backward]") {
  const std::int64_t n = 90;
  for (auto [kin, kout] : {std::pair<std::int64_t, std::int64_t>{7, 3}, {3, 7}}) {
    INFO("K_in " << kin << " K_out " << kout);
    Operands<double> o;
    o.dense.emplace("H", sp::Tensor<double>::random({n, kin}, 141, -1, 1));
    o.dense.emplace("W0", sp::Tensor<double>::random({kin, kout}, 142, -1, 1));
    gnn::Expr expr = gnn::dense("H", "N", "K_in") * gnn::weight("W0", "K_in", "K_out");
    std::vector<sp::Tensor<double>> wr;
    std::vector<const sp::Csr<double>*> graphs;
    // Four relations: a dense-ish one (run on all nodes), a sparse one with empty rows (run on
    // the rows it writes and the columns it reads), an empty one (skipped), and one whose
    // every row reads the same three hub nodes (all rows kept, three columns gathered).
    const std::vector<Shape> shapes{{"r1", n, n, 9.0, 0.0}, {"r2", n, n, 1.0, 0.5}, {"r3", n, n, 0.0, 1.0}};
    for (std::size_t r = 0; r < shapes.size() + 1; ++r) {
      const std::string s = std::to_string(r + 1);
      auto a = r < shapes.size() ? spindle_test::random_csr<double>(shapes[r], 143 + r, 0.5, 2.0) : [&] {
        std::vector<sp::Triplet<double>> t;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t j : {5, 17, 60})
            if ((i + j) % 4 != 0) t.push_back({i, j, 1.0 + double(i % 3)});
        return sp::Csr<double>::from_triplets(n, n, t);
      }();
      o.diag.emplace("Dinv" + s, gnn::inverse_degree(a));
      o.sparse.emplace("A" + s, std::move(a));
      o.dense.emplace("W" + s, sp::Tensor<double>::random({kin, kout}, 150 + r, -1, 1));
      wr.push_back(o.dense.at("W" + s));
      expr = expr + gnn::diagonal("Dinv" + s, "N") * gnn::sparse("A" + s, "N", "N") * gnn::dense("H", "N", "K_in") *
                        gnn::weight("W" + s, "K_in", "K_out");
    }
    for (std::size_t r = 0; r < shapes.size() + 1; ++r) graphs.push_back(&o.sparse.at("A" + std::to_string(r + 1)));
    gnn::RGCNConv<double> conv(o.dense.at("W0"), wr, gnn::CostModel{});
    const auto g = sp::Tensor<double>::random({n, kout}, 160, -1, 1);
    std::map<std::string, Mat> ref;
    reference_backward(expr, to_mat<double>(g.view()), o, ref);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the supports and the choices
      INFO("call " << call);
      const auto out = conv.forward(graphs, o.dense.at("H").view());
      check_close(to_mat<double>(out), reference(expr, o), 1e-12, "RGCN forward");
      const auto grads = conv.backward(g.view());
      CHECK(grads.weights.size() == 5);
      for (const auto& [name, gw] : grads.weights) check_close(to_mat<double>(gw), ref.at(name), 1e-12, "d" + name);
      check_close(to_mat<double>(grads.input), ref.at("H"), 1e-12, "dH");
    }
    // What each relation ran on: r1 all nodes, r2 its rows and columns, r3 nothing, r4 all
    // rows and its three columns.
    CHECK((conv.support(0)->rows == nullptr && conv.support(0)->cols == nullptr));
    CHECK((conv.support(1)->rows != nullptr && conv.support(1)->cols != nullptr));
    CHECK(conv.support(1)->a->nnz() == graphs[1]->nnz());
    CHECK(conv.support(2)->a == nullptr);
    CHECK((conv.support(3)->rows == nullptr && conv.support(3)->cols != nullptr));
    CHECK(conv.support(3)->a->cols() == 3);
    CHECK(conv.support(3)->cols->values()[2] == 60);
  }
  CHECK_THROWS_AS(gnn::RGCNConv<double>(sp::Tensor<double>::zeros({3, 2}), {sp::Tensor<double>::zeros({2, 2})}),
                  sp::ShapeError);
  // A graph whose size is not H's node count.
  gnn::RGCNConv<double> conv(sp::Tensor<double>::zeros({2, 2}), {sp::Tensor<double>::zeros({2, 2})});
  const sp::Csr<double> small(4, 5);
  const auto h = sp::Tensor<double>::zeros({4, 2});
  CHECK_THROWS_WITH(conv.forward({&small}, h.view()),
                    Catch::Contains("relation 1's graph is 4 x 5 but H has 4 rows"));
  gnn::RGCNConv<double> fresh(sp::Tensor<double>::zeros({2, 2}), {sp::Tensor<double>::zeros({2, 2})});
  CHECK_THROWS_AS(fresh.backward(sp::Tensor<double>::zeros({4, 2}).view()), sp::UserError);
}

// RGCNConv on the shared typed graphs (AIFB: 78 relations, MUTAG: 46), forward and backward
// against plain loops over the typed edges in double: the per-relation supports, gathers and
// scatters on real graphs with hub rows, empty rows and relations of one edge.
TEST_CASE("gnn layers: RGCNConv on the RGCN graphs matches plain loops over the typed edges, forward and backward",
          "[gnn][backward][graphs]") {
  for (const char* file : {"rgcn/aifb.mtx.gz", "rgcn/mutag.mtx.gz"}) {
    const auto path = spindle_test::data_file(file);
    if (!path) {
      WARN("skipping " << file << ": not found under " << spindle_test::data_dir());
      continue;
    }
    INFO(file);
    const auto t = sp::read_matrix_market_triplets<float>(*path);
    const std::int64_t n = t.header.rows, kin = 6, kout = 5;
    const auto rels = sp::relations_of_typed_edges<float>(n, t.entries);
    std::vector<const sp::Csr<float>*> graphs;
    for (const auto& a : rels) graphs.push_back(&a);
    std::vector<sp::Tensor<float>> w;
    for (std::size_t r = 0; r < rels.size(); ++r) w.push_back(sp::Tensor<float>::random({kin, kout}, 300 + r, -1, 1));
    const auto w0 = sp::Tensor<float>::random({kin, kout}, 299, -1, 1);
    const auto h = sp::Tensor<float>::random({n, kin}, 298, -1, 1);
    const auto d = sp::Tensor<float>::random({n, kout}, 297, -1, 1);
    gnn::RGCNConv<float> conv(w0, w);
    const auto out = conv.forward(graphs, h.view());
    const auto grads = conv.backward(d.view());
    // Reference: out = H W0 + sum_r Dinv_r A_r H W_r; dW0 = H^T d; dW_r = (Dinv_r A_r H)^T d;
    // dH = d W0^T + sum_r A_r^T Dinv_r d W_r^T.
    const std::size_t nk = static_cast<std::size_t>(n);
    std::vector<double> ref(nk * kout, 0.0), dh(nk * kin, 0.0);
    std::vector<std::vector<double>> dw(rels.size() + 1, std::vector<double>(kin * kout, 0.0));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t a = 0; a < kin; ++a)
        for (std::int64_t o = 0; o < kout; ++o) {
          ref[i * kout + o] += double(h(i, a)) * w0(a, o);
          dw[0][a * kout + o] += double(h(i, a)) * d(i, o);
          dh[i * kin + a] += double(d(i, o)) * w0(a, o);
        }
    std::int64_t kept_rows = 0, kept_cols = 0;
    for (std::size_t r = 0; r < rels.size(); ++r) {
      const auto& a = rels[r];
      std::vector<double> agg(kin);
      for (std::int64_t i = 0; i < n; ++i) {
        const auto deg = a.indptr()[i + 1] - a.indptr()[i];
        if (deg == 0) continue;
        std::fill(agg.begin(), agg.end(), 0.0);
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
          for (std::int64_t c = 0; c < kin; ++c) agg[c] += double(h(a.indices()[q], c)) / double(deg);
        for (std::int64_t c = 0; c < kin; ++c)
          for (std::int64_t o = 0; o < kout; ++o) {
            ref[i * kout + o] += agg[c] * w[r](c, o);
            dw[r + 1][c * kout + o] += agg[c] * d(i, o);
          }
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
          for (std::int64_t c = 0; c < kin; ++c)
            for (std::int64_t o = 0; o < kout; ++o)
              dh[a.indices()[q] * kin + c] += double(d(i, o)) * w[r](c, o) / double(deg);
      }
      const auto s = conv.support(r);
      kept_rows += s->rows != nullptr;
      kept_cols += s->cols != nullptr;
    }
    CHECK(kept_rows > 0);
    CHECK(kept_cols > 0);
    auto check = [](sp::TensorView<const float> got, const std::vector<double>& want, const std::string& what) {
      REQUIRE(static_cast<std::size_t>(got.size()) == want.size());
      double err = 0, scale = 1e-30;
      for (std::size_t q = 0; q < want.size(); ++q) {
        err = std::max(err, std::abs(double(got.values()[q]) - want[q]));
        scale = std::max(scale, std::abs(want[q]));
      }
      INFO(what << ": max error " << err << ", largest value " << scale);
      CHECK(err <= 2e-5 * scale);
    };
    check(out, ref, "forward");
    check(grads.input, dh, "dH");
    check(grads.weights.at("W0"), dw[0], "dW0");
    for (std::size_t r = 0; r < rels.size(); ++r)
      check(grads.weights.at("W" + std::to_string(r + 1)), dw[r + 1], "dW" + std::to_string(r + 1));
  }
}

TEST_CASE("gnn layers: AdaptiveLayer runs GAT with or without H and W bound beside the held Θ", "[gnn]") {
  const auto o = make_operands<double>(60, 5, 3, 171);
  const auto theta = held_theta(o);
  const Mat ref = reference(gnn::layers::gat().expr, o);
  gnn::AdaptiveLayer<double> l(gnn::layers::gat(), gnn::CostModel{});
  SECTION("all bound: either composition") {
    auto b = o.bindings();
    b.value("(H·W)", theta.view());
    check_matches(l(b, "alpha"), ref, 1e-12, "GAT, all bound");
  }
  SECTION("only alpha and Θ bound: the composition that reuses Θ") {
    gnn::Bindings<double> b;
    b.sparse("alpha", o.sparse.at("alpha")).value("(H·W)", theta.view());
    check_matches(l(b, "alpha"), ref, 1e-12, "GAT, held Θ only");
    CHECK(l.last_run()->text == "(alpha·(H·W))");
  }
  SECTION("nothing to run: the missing operand is named") {
    gnn::Bindings<double> b;
    b.sparse("alpha", o.sparse.at("alpha"));
    CHECK_THROWS_AS(l(b, "alpha"), sp::ShapeError);
  }
}

TEST_CASE("gnn layers: a layer set for training chooses by forward + backward and computes the same", "[gnn][backward]") {
  const auto a = spindle_test::random_csr<double>(Shape{"graph", 120, 120, 6.0, 0.1}, 181, 0.5, 2.0);
  const auto h = sp::Tensor<double>::random({120, 24}, 182, -1, 1);
  const auto g = sp::Tensor<double>::random({120, 6}, 183, -1, 1);
  gnn::SAGEConv<double> conv(sp::Tensor<double>::random({24, 6}, 184, -1, 1),
                             sp::Tensor<double>::random({24, 6}, 185, -1, 1), gnn::CostModel{});
  const Mat inference_out = to_mat<double>(conv.forward(a, h.view()));
  const auto g_inf = conv.backward(g.view());
  const Mat dws = to_mat<double>(g_inf.weights.at("Wself")), dh = to_mat<double>(g_inf.input);
  for (bool input_gradient : {false, true}) {
    conv.set_training(input_gradient);
    check_close(to_mat<double>(conv.forward(a, h.view())), inference_out, 1e-12, "training forward");
    CHECK(conv.adaptive().training().count("H") == (input_gradient ? 1u : 0u));
    const auto gt = conv.backward(g.view(), input_gradient);
    check_close(to_mat<double>(gt.weights.at("Wself")), dws, 1e-12, "training dWself");
    if (input_gradient) check_close(to_mat<double>(gt.input), dh, 1e-12, "training dH");
    CHECK(conv.explain().find(" + ") != std::string::npos);  // forward + backward predictions
  }
  conv.set_inference();
  CHECK(conv.adaptive().training().empty());
}

TEST_CASE("gnn backward: a graph given a new pattern at the same address is not mistaken for the old one",
          "[gnn][backward]") {
  // std::vector's copy assignment reuses its storage: after `a = b` (same sizes) a's arrays
  // sit where they were, with b's pattern. Cached copies and transposes keyed by address
  // would serve a's old pattern (the transposed SpMM of the input gradient: a silent wrong
  // answer).
  auto o = make_operands<double>(40, 3, 5, 191);
  // The same row counts, every column shifted by one: same indptr, other indices.
  const auto& a0 = o.sparse.at("alpha");
  std::vector<sp::Triplet<double>> shifted;
  for (std::int64_t i = 0; i < a0.rows(); ++i)
    for (auto q = a0.indptr()[i]; q < a0.indptr()[i + 1]; ++q)
      shifted.push_back({i, (a0.indices()[q] + 1) % a0.cols(), a0.values()[q]});
  const auto other = sp::Csr<double>::from_triplets(a0.rows(), a0.cols(), shifted);
  REQUIRE(other.nnz() == a0.nnz());
  const auto c = gnn::candidates(gnn::layers::gat()).ranked;
  const auto g = sp::Tensor<double>::random({40, 5}, 193, -1, 1);
  for (const auto& r : c) {
    INFO(r.composition.text);
    auto oo = o;
    oo.dense.emplace("(H·W)", held_theta(oo));
    gnn::Workspace<double> ws;
    gnn::execute(r.composition, oo.bindings(), ws);
    (void)gnn::backward(r.composition, ws, g.view(), differentiable_inputs(r.composition));
    auto& alpha = oo.sparse.at("alpha");
    const void* before = alpha.indptr().data();
    alpha = other;
    CHECK(alpha.indptr().data() == before);
    gnn::execute(r.composition, oo.bindings(), ws);
    const auto got = gnn::backward(r.composition, ws, g.view(), differentiable_inputs(r.composition));
    std::map<std::string, Mat> ref, ref_held;
    reference_backward(gnn::layers::gat().expr, to_mat<double>(g.view()), oo, ref);
    reference_backward(gnn::sparse("alpha", "N", "N", true) * gnn::dense("(H·W)", "N", "K_out"),
                       to_mat<double>(g.view()), oo, ref_held);
    for (const auto& name : differentiable_inputs(r.composition)) {
      const auto& full = ref_held.count(name) ? ref_held.at(name) : ref.at(name);
      check_close(to_mat<double>(got.at(name)), project(name, full, oo), 1e-12, "d" + name);
    }
  }
}

TEST_CASE("gnn layers: GATConv forward matches a loop and its gradients match finite differences", "[gnn][backward]") {
  // A graph with self loops (and a row holding only its self loop).
  auto base = spindle_test::random_csr<double>(Shape{"graph", 30, 30, 4.0, 0.2}, 201, 0.5, 2.0);
  std::vector<sp::Triplet<double>> t;
  for (std::int64_t i = 0; i < 30; ++i) {
    for (auto q = base.indptr()[i]; q < base.indptr()[i + 1]; ++q) t.push_back({i, base.indices()[q], 1.0});
    t.push_back({i, i, 1.0});
  }
  const auto a = sp::Csr<double>::from_triplets(30, 30, t, sp::Duplicates::keep_last);
  // 2 -> 16: aggregating H first, (alpha·H)·W, costs less than reusing Θ.
  std::set<std::string> seen;
  for (auto [kin, kout] : {std::pair<std::int64_t, std::int64_t>{6, 3}, {3, 6}, {2, 16}}) {
    INFO("K_in " << kin << " K_out " << kout);
    const auto h = sp::Tensor<double>::random({30, kin}, 202, -1, 1);
    const auto g = sp::Tensor<double>::random({30, kout}, 203, -1, 1);
    gnn::GATConv<double> conv(sp::Tensor<double>::random({kin, kout}, 204, -1, 1),
                              sp::Tensor<double>::random({kout}, 205, -1, 1),
                              sp::Tensor<double>::random({kout}, 206, -1, 1), gnn::CostModel{});
    // Forward against a loop.
    auto loop = [&](const sp::Tensor<double>& hh) {
      const auto& w = conv.weight("W");
      const auto& al = conv.weight("a_left");
      const auto& ar = conv.weight("a_right");
      Mat th = Mat::Zero(30, kout), out = Mat::Zero(30, kout);
      for (int i = 0; i < 30; ++i)
        for (int k = 0; k < kin; ++k)
          for (int o = 0; o < kout; ++o) th(i, o) += hh.values()[i * kin + k] * w.values()[k * kout + o];
      Eigen::VectorXd el = th * Eigen::Map<const Eigen::VectorXd>(al.values().data(), kout);
      Eigen::VectorXd er = th * Eigen::Map<const Eigen::VectorXd>(ar.values().data(), kout);
      for (int i = 0; i < 30; ++i) {
        std::vector<double> e;
        double m = -INFINITY, z = 0;
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q) {
          const double x = el(i) + er(a.indices()[q]);
          e.push_back(std::max(x, 0.2 * x));
          m = std::max(m, e.back());
        }
        for (double& x : e) z += (x = std::exp(x - m));
        for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
          out.row(i) += e[static_cast<std::size_t>(q - a.indptr()[i])] / z * th.row(a.indices()[q]);
      }
      return out;
    };
    check_close(to_mat<double>(conv.forward(a, h.view())), loop(h), 1e-12, "GAT forward");
    const auto grads = conv.backward(g.view());
    const std::string chosen = conv.adaptive().last_run()->text;
    seen.insert(chosen);
    INFO("composition " << chosen);
    auto loss = [&](const sp::Tensor<double>& hh) {
      const Mat o = loop(hh);
      double l = 0;
      for (int i = 0; i < 30; ++i)
        for (int c = 0; c < kout; ++c) l += o(i, c) * g.values()[i * kout + c];
      return l;
    };
    // Central difference of the loss in entry x (restored afterwards).
    auto central = [&](double& x, const sp::Tensor<double>& hh) {
      const double keep = x, eps = 1e-6;
      x = keep + eps;
      const double up = loss(hh);
      x = keep - eps;
      const double down = loss(hh);
      x = keep;
      return (up - down) / (2 * eps);
    };
    for (const auto& [name, got] : grads.weights) {
      auto& w = conv.weight(name);
      for (std::size_t q = 0; q < w.values().size(); q += 2) {
        INFO("d" << name << "[" << q << "]");
        CHECK(got.values()[q] == Approx(central(w.values()[q], h)).margin(1e-6));
      }
    }
    auto hp = h;
    for (std::size_t q = 0; q < hp.values().size(); q += 7) {
      INFO("dH[" << q << "]");
      CHECK(grads.input.values()[q] == Approx(central(hp.values()[q], hp)).margin(1e-6));
    }
  }
  CHECK(seen == std::set<std::string>{"(alpha·(H·W))", "((alpha·H)·W)"});  // both backward paths
  CHECK_THROWS_AS(gnn::GATConv<double>(sp::Tensor<double>::zeros({3, 2}), sp::Tensor<double>::zeros({3}),
                                       sp::Tensor<double>::zeros({2})),
                  sp::ShapeError);
}
