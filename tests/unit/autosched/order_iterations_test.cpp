// order_iterations: stage I -> stage I. Which order the cost model picks for the kernels of
// the Scorch suite written in every order, and which iterations it must leave alone.
#include <catch2/catch.hpp>

#include <spindle/autosched/order_iterations.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

namespace {

struct N : sp::dense_fixed {};
struct M : sp::dense_fixed {};

sp::ir::Function ordered(const sp::ir::Function& f, int threads = 2) {
  auto c = ctx(f);
  c.num_threads = threads;
  return sp::autosched::order_iterations(f, c);
}

// The "sp_iter name([A, B], "SR")" lines of a stage-I function, one per iteration.
std::string iterations(const sp::ir::Function& f) {
  std::string text = sp::ir::to_string(f), out;
  std::size_t pos = 0;
  while ((pos = text.find("sp_iter ", pos)) != std::string::npos) {
    std::size_t end = text.find(" as ", pos);
    out += text.substr(pos + 8, end - pos - 8) + "\n";
    pos = end;
  }
  return out;
}

}  // namespace

TEST_CASE("order_iterations: SpMM written in any order runs i, j, k", "[autosched][order_iterations]") {
  auto ijk = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                          sp::out<float, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                          sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto ikj = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                          sp::out<float, I, K> c, sp::iter<I> i, sp::iter<K> k,
                                          sp::iter<J> j) { c(i, k) += a(i, j) * b(j, k); });
  auto kij = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                          sp::out<float, I, K> c, sp::iter<K> k, sp::iter<I> i,
                                          sp::iter<J> j) { c(i, k) += a(i, j) * b(j, k); });
  CHECK(iterations(ikj) == "spmm([I, K, J], \"SSR\")\n");
  CHECK(iterations(ordered(ikj)) == "spmm([I, J, K], \"SRS\")\n");
  CHECK(iterations(ordered(kij)) == "spmm([I, J, K], \"SRS\")\n");
  // The written order wins ties and a kernel already in the best order is the same IR.
  CHECK(ordered(ijk).body.same_as(ijk.body));
  // Lowered, the reordered kernel is the kernel written i, j, k (init before the j loop).
  CHECK(body(stage2(ordered(kij))) == body(stage2(ijk)));
  CHECK(sp::autosched::describe_loop_orders(kij, ordered(kij)) ==
        "# loop order: spmm [K, I, J] -> [I, J, K] (order_iterations; SPINDLE_LOOP_ORDER=written keeps the "
        "written order)\n");
  CHECK(sp::autosched::describe_loop_orders(ijk, ordered(ijk)).empty());
}

TEST_CASE("order_iterations: SDDMM puts the feature loop innermost", "[autosched][order_iterations]") {
  auto kij = sp::define_kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x,
                                           sp::in<float, sp::dense<J>, K> y, sp::out<float, I, J> c, sp::iter<K> k,
                                           sp::iter<I> i, sp::iter<J> j) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  CHECK(iterations(ordered(kij)) == "sddmm([I, J, K], \"SSR\")\n");
  auto ikj = sp::define_kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x,
                                           sp::in<float, sp::dense<J>, K> y, sp::out<float, I, J> c, sp::iter<I> i,
                                           sp::iter<K> k, sp::iter<J> j) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  CHECK(iterations(ordered(ikj)) == "sddmm([I, J, K], \"SSR\")\n");
}

TEST_CASE("order_iterations: dense GEMM runs i, k, n, the dot-product form stays", "[autosched][order_iterations]") {
  auto ink = sp::define_kernel("gemm", [](sp::in<float, I, K> a, sp::in<float, K, N> b, sp::out<float, I, N> c,
                                          sp::iter<I> i, sp::iter<N> n, sp::iter<K> k) { c(i, n) += a(i, k) * b(k, n); });
  CHECK(iterations(ordered(ink)) == "gemm([I, K, N], \"SRS\")\n");
  // C = X W^T reads both operands along k: i, n, k is already best.
  auto nt = sp::define_kernel("gemm_nt", [](sp::in<float, I, K> x, sp::in<float, N, K> w, sp::out<float, I, N> c,
                                            sp::iter<I> i, sp::iter<N> n, sp::iter<K> k) { c(i, n) += x(i, k) * w(n, k); });
  CHECK(ordered(nt).body.same_as(nt.body));
}

TEST_CASE("order_iterations: a weight gradient keeps its output row in registers across the long axis",
          "[autosched][order_iterations]") {
  // dW(k, n) += X(i, k) dC(i, n): k, i, n accumulates the row dW(k, :) over i (register_tile);
  // i, k, n would re-load and store it for every i.
  auto ikn = sp::define_kernel("dw", [](sp::in<float, I, K> x, sp::in<float, I, N> dc, sp::out<float, K, N> dw,
                                        sp::iter<I> i, sp::iter<K> k, sp::iter<N> n) { dw(k, n) += x(i, k) * dc(i, n); });
  CHECK(iterations(ordered(ikn, 1)) == "dw([K, I, N], \"SRS\")\n");
  // With several threads an outermost reduction loop could not run in parallel either.
  CHECK(iterations(ordered(ikn, 2)) == "dw([K, I, N], \"SRS\")\n");
}

TEST_CASE("order_iterations: a dense iterator into a sparse slot searches in every order",
          "[autosched][order_iterations]") {
  // The search for jd in row i + 1 costs the same whichever loop is inner: keep i outer
  // (spatial, parallel).
  auto k = sp::define_kernel("next_row", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                            sp::iter<I> i, sp::iter<sp::dense<J>> jd) { y(i) += a(i + 1, jd) * x(jd); });
  CHECK(ordered(k).body.same_as(k.body));
}

TEST_CASE("order_iterations: iterations whose result could depend on the order", "[autosched][order_iterations]") {
  SECTION("a local declared outside the iteration and written inside it") {
    auto f = sp::define_kernel("outer_local", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                                 sp::out<float, M> y) {
      sp::local<float> t(0.0f);
      sp::for_each<I, K, J>([&](sp::iter<I> i, sp::iter<K> k, sp::iter<J> j) { t = t * 0.5f + a(i, j) * b(j, k); });
      sp::for_each<M>([&](sp::iter<M> m) { y(m) = t; });
    });
    CHECK(ordered(f).body.same_as(f.body));
  }
  SECTION("a local declared inside the iteration is private to each point") {
    auto f = sp::define_kernel("inner_local", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                                 sp::out<float, I, K> c, sp::iter<I> i, sp::iter<K> k, sp::iter<J> j) {
      sp::local<float> t(a(i, j));
      t *= 2.0f;
      c(i, k) += t * b(j, k);
    });
    CHECK(iterations(ordered(f)) == "inner_local([I, J, K], \"SRS\")\n");
  }
  SECTION("a body that reads what it reduces into keeps its reduction axes in the written order") {
    // out(i) += out(i) * 0.5 + a(l) b(m): each element's updates run in the order m, l.
    auto f = sp::define_kernel("reads_own", [](sp::in<float, N> a, sp::in<float, M> b, sp::out<float, K> out,
                                               sp::iter<M> m, sp::iter<N> l, sp::iter<K> i) {
      out(i) += out(i) * 0.5f + a(l) * b(m);
    });
    auto g = ordered(f);
    std::string it = iterations(g);
    INFO(it);
    CHECK(it.find("M") < it.find("N"));
  }
  SECTION("nested iterations: only the innermost one is reordered") {
    auto f = sp::define_kernel("nested", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                            sp::out<float, I, K> c, sp::iter<I> i) {
      sp::for_each<K, J>([&](sp::iter<K> k, sp::iter<J> j) { c(i, k) += a(i, j) * b(j, k); });
    });
    CHECK(iterations(ordered(f)) == "nested([I], \"S\")\nnested1([J, K], \"RS\")\n");
  }
  SECTION("SPINDLE_LOOP_ORDER=written") {
    auto f = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                          sp::out<float, I, K> c, sp::iter<K> k, sp::iter<I> i,
                                          sp::iter<J> j) { c(i, k) += a(i, j) * b(j, k); });
    auto c = ctx(f);
    c.keep_loop_order = true;
    CHECK(sp::autosched::order_iterations(f, c).body.same_as(f.body));
  }
}
