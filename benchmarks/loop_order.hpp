// spindle-bench --loop-order: does the order in which a kernel lists its iterators still
// matter? (issue 17, Scorch Algorithm 1.) Each kernel below is written in every legal
// order; every written order runs as written (a runtime with keep_loop_order, i.e.
// SPINDLE_LOOP_ORDER=written), and the kernel with Spindle's order (order_iterations) runs
// once per written order too — all of those must lower to the same code. The report gives,
// per case, each written order's time, the best of them (the exhaustive search) and
// auto / best, which the issue wants <= 1.15; and the time order_iterations took.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <spindle/spindle.hpp>

#include "cli.hpp"
#include "matrices.hpp"
#include "timing.hpp"

namespace bench {

namespace loop_order {

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};
struct N : sp::dense_fixed {};

// One kernel in one written order, bound to its arguments.
struct Written {
  std::string order;
  std::function<void(sp::runtime::Runtime&)> compile;  // binds the runtime, compiles
  std::function<void()> run;
  std::function<std::string()> source;  // the scheduled stage-III IR
  std::function<double()> order_micros;  // order_iterations' time in the last compile
  std::function<Written()> fresh;        // the same kernel and arguments, its own binding
};

template <class Kern, class... Args>
Written written(std::string order, Kern kern, Args&... args) {
  auto bound = std::make_shared<Kern>(kern);
  Written w;
  w.order = std::move(order);
  w.compile = [bound, kern](sp::runtime::Runtime& rt) {
    *bound = kern.with_runtime(rt);
    bound->compile();
  };
  w.run = [bound, &args...] { (*bound)(args...); };
  w.source = [bound] { return sp::ir::to_string(bound->compile().lowered().stage3); };
  w.fresh = [order = w.order, kern, &args...] { return written(order, kern, args...); };
  w.order_micros = [bound] {
    for (auto& p : bound->compile().lowered().passes)
      if (p.pass == "order_iterations") return p.micros;
    return 0.0;
  };
  return w;
}

template <class T>
struct Case {
  std::string kernel;
  std::vector<Written> orders;
  std::function<void()> reset;                 // zero the output
  std::function<std::vector<double>()> output;  // copy of the output
};

template <class T>
std::vector<double> values(const sp::Tensor<T>& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

// The suite on matrix `a` with feature size f. Operands live in `store` (stable addresses).
template <class T>
std::vector<Case<T>> suite(const sp::Csr<T>& a, std::int64_t f, std::vector<std::shared_ptr<void>>& store) {
  auto keep = [&](auto&& v) {
    auto p = std::make_shared<std::decay_t<decltype(v)>>(std::move(v));
    store.push_back(p);
    return p;
  };
  auto A = keep(sp::Csr<T>(a));
  auto B = keep(sp::Tensor<T>::random({a.cols(), f}, 11, -1, 1));
  auto X = keep(sp::Tensor<T>::random({a.rows(), f}, 12, -1, 1));
  auto Bt = keep(sp::Tensor<T>::random({a.rows(), f}, 13, -1, 1));
  auto C = keep(sp::Tensor<T>::zeros({a.rows(), f}));
  auto Ct = keep(sp::Tensor<T>::zeros({a.cols(), f}));
  auto S = keep(sp::Csr<T>(a));
  auto Xd = keep(sp::Tensor<T>::random({a.rows(), f}, 14, -1, 1));
  auto Dc = keep(sp::Tensor<T>::random({a.rows(), f}, 15, -1, 1));
  auto Dw = keep(sp::Tensor<T>::zeros({f, f}));
  auto& a_ = *A;
  auto& s_ = *S;
  auto &b_ = *B, &x_ = *X, &bt_ = *Bt, &c_ = *C, &ct_ = *Ct, &xd_ = *Xd, &dc_ = *Dc, &dw_ = *Dw;
  using sp::in, sp::out, sp::iter, sp::dense;
  std::vector<Case<T>> cases;

  // SpMM C = A B.
  Case<T> spmm{"spmm c(i,k) += a(i,j) b(j,k)", {}, [&c_] { std::fill(c_.values().begin(), c_.values().end(), T(0)); }, [&c_] { return values(c_); }};
  spmm.orders.push_back(written("i,j,k", sp::kernel("lo_spmm_ijk", [](in<T, I, J> a, in<T, dense<J>, K> b, out<T, I, K> c, iter<I> i, iter<J> j, iter<K> k) { c(i, k) += a(i, j) * b(j, k); }), a_, b_, c_));
  spmm.orders.push_back(written("i,k,j", sp::kernel("lo_spmm_ikj", [](in<T, I, J> a, in<T, dense<J>, K> b, out<T, I, K> c, iter<I> i, iter<K> k, iter<J> j) { c(i, k) += a(i, j) * b(j, k); }), a_, b_, c_));
  spmm.orders.push_back(written("k,i,j", sp::kernel("lo_spmm_kij", [](in<T, I, J> a, in<T, dense<J>, K> b, out<T, I, K> c, iter<K> k, iter<I> i, iter<J> j) { c(i, k) += a(i, j) * b(j, k); }), a_, b_, c_));
  cases.push_back(std::move(spmm));

  // SDDMM C = A .* (X Y^T).
  Case<T> sddmm{"sddmm c(i,j) += a(i,j) x(i,k) y(j,k)", {}, [&s_] { std::fill(s_.values().begin(), s_.values().end(), T(0)); },
                [&s_] { return std::vector<double>(s_.values().begin(), s_.values().end()); }};
  sddmm.orders.push_back(written("i,j,k", sp::kernel("lo_sddmm_ijk", [](in<T, I, J> a, in<T, I, K> x, in<T, dense<J>, K> y, out<T, I, J> c, iter<I> i, iter<J> j, iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); }), a_, x_, b_, s_));
  sddmm.orders.push_back(written("i,k,j", sp::kernel("lo_sddmm_ikj", [](in<T, I, J> a, in<T, I, K> x, in<T, dense<J>, K> y, out<T, I, J> c, iter<I> i, iter<K> k, iter<J> j) { c(i, j) += a(i, j) * x(i, k) * y(j, k); }), a_, x_, b_, s_));
  sddmm.orders.push_back(written("k,i,j", sp::kernel("lo_sddmm_kij", [](in<T, I, J> a, in<T, I, K> x, in<T, dense<J>, K> y, out<T, I, J> c, iter<K> k, iter<I> i, iter<J> j) { c(i, j) += a(i, j) * x(i, k) * y(j, k); }), a_, x_, b_, s_));
  cases.push_back(std::move(sddmm));

  // Transposed SpMM C = A^T B (the input gradient of a GNN aggregation, no transpose built).
  Case<T> spmmt{"spmm_t c(j,k) += a(i,j) b(i,k)", {}, [&ct_] { std::fill(ct_.values().begin(), ct_.values().end(), T(0)); }, [&ct_] { return values(ct_); }};
  spmmt.orders.push_back(written("i,j,k", sp::kernel("lo_spmm_t_ijk", [](in<T, I, J> a, in<T, I, K> b, out<T, dense<J>, K> c, iter<I> i, iter<J> j, iter<K> k) { c(j, k) += a(i, j) * b(i, k); }), a_, bt_, ct_));
  spmmt.orders.push_back(written("i,k,j", sp::kernel("lo_spmm_t_ikj", [](in<T, I, J> a, in<T, I, K> b, out<T, dense<J>, K> c, iter<I> i, iter<K> k, iter<J> j) { c(j, k) += a(i, j) * b(i, k); }), a_, bt_, ct_));
  spmmt.orders.push_back(written("k,i,j", sp::kernel("lo_spmm_t_kij", [](in<T, I, J> a, in<T, I, K> b, out<T, dense<J>, K> c, iter<K> k, iter<I> i, iter<J> j) { c(j, k) += a(i, j) * b(i, k); }), a_, bt_, ct_));
  cases.push_back(std::move(spmmt));

  // Weight gradient dW = X^T dC (dense, reduction over the rows of the graph).
  Case<T> dw{"dw w(k,n) += x(i,k) d(i,n)", {}, [&dw_] { std::fill(dw_.values().begin(), dw_.values().end(), T(0)); }, [&dw_] { return values(dw_); }};
  dw.orders.push_back(written("i,k,n", sp::kernel("lo_dw_ikn", [](in<T, I, K> x, in<T, I, N> d, out<T, K, N> w, iter<I> i, iter<K> k, iter<N> n) { w(k, n) += x(i, k) * d(i, n); }), xd_, dc_, dw_));
  dw.orders.push_back(written("i,n,k", sp::kernel("lo_dw_ink", [](in<T, I, K> x, in<T, I, N> d, out<T, K, N> w, iter<I> i, iter<N> n, iter<K> k) { w(k, n) += x(i, k) * d(i, n); }), xd_, dc_, dw_));
  dw.orders.push_back(written("k,i,n", sp::kernel("lo_dw_kin", [](in<T, I, K> x, in<T, I, N> d, out<T, K, N> w, iter<K> k, iter<I> i, iter<N> n) { w(k, n) += x(i, k) * d(i, n); }), xd_, dc_, dw_));
  dw.orders.push_back(written("k,n,i", sp::kernel("lo_dw_kni", [](in<T, I, K> x, in<T, I, N> d, out<T, K, N> w, iter<K> k, iter<N> n, iter<I> i) { w(k, n) += x(i, k) * d(i, n); }), xd_, dc_, dw_));
  dw.orders.push_back(written("n,i,k", sp::kernel("lo_dw_nik", [](in<T, I, K> x, in<T, I, N> d, out<T, K, N> w, iter<N> n, iter<I> i, iter<K> k) { w(k, n) += x(i, k) * d(i, n); }), xd_, dc_, dw_));
  dw.orders.push_back(written("n,k,i", sp::kernel("lo_dw_nki", [](in<T, I, K> x, in<T, I, N> d, out<T, K, N> w, iter<N> n, iter<K> k, iter<I> i) { w(k, n) += x(i, k) * d(i, n); }), xd_, dc_, dw_));
  cases.push_back(std::move(dw));
  return cases;
}

inline double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0, diff = 0;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (std::size_t q = 0; q < a.size() && q < b.size(); ++q) diff = std::max(diff, std::fabs(a[q] - b[q]));
  return a.size() != b.size() ? INFINITY : diff / std::max(scale, 1e-30);
}

}  // namespace loop_order

template <class T>
int run_loop_order(const Config& cfg) {
  using namespace loop_order;
  TimingPolicy policy{cfg.warmup, cfg.reps, cfg.min_reps, cfg.max_reps, cfg.min_time};
  const double tol = cfg.tolerance > 0 ? cfg.tolerance : (sizeof(T) == 4 ? 1e-4 : 1e-10);
  auto matrices = load_matrices<T>(cfg);
  int mismatches = 0, disagreements = 0;
  std::vector<double> ratios;
  double worst = 0, max_order_us = 0;
  std::printf("loop order: every written order as written (SPINDLE_LOOP_ORDER=written) vs Spindle's order "
              "(order_iterations), median ms; auto/best <= 1.15 wanted\n");
  for (int threads : cfg.threads) {
    sp::Options ow = sp::Options::from_env(), oa = ow;
    ow.num_threads = oa.num_threads = threads;
    ow.keep_loop_order = true;
    oa.keep_loop_order = false;
    sp::runtime::Runtime rt_written(ow), rt_auto(oa);
    for (auto& m : matrices)
      for (int f : cfg.feats) {
        std::vector<std::shared_ptr<void>> store;
        auto cases = suite<T>(m.a, f, store);
        for (auto& c : cases) {
          std::fprintf(stderr, "[bench] loop order: %s on %s, K=%d, %d thread(s)\n", c.kernel.c_str(),
                       m.info.name.c_str(), f, threads);
          // Spindle's order from every written order: one kernel.
          // The scheduled stage-III IR without the kernel's name (lo_<kernel>_<order>).
          const std::string name = "lo_" + c.kernel.substr(0, c.kernel.find(' ')) + "_";
          auto code = [&](const Written& w) {
            std::string src = w.source();
            for (std::size_t p = 0; (p = src.find(name, p)) != std::string::npos; p += name.size())
              src.replace(p + name.size(), 3, "XYZ");
            return src;
          };
          std::vector<Written> autos;
          std::string auto_source;
          bool agree = true;
          for (auto& w : c.orders) {
            autos.push_back(w.fresh());
            autos.back().compile(rt_auto);
            max_order_us = std::max(max_order_us, autos.back().order_micros());
            if (auto_source.empty()) auto_source = code(autos.back());
            agree = agree && code(autos.back()) == auto_source;
          }
          disagreements += agree ? 0 : 1;
          std::string same_as = "none";  // the written order whose code Spindle's order is
          for (auto& w : c.orders) {
            w.compile(rt_written);
            if (same_as == "none" && code(w) == auto_source) same_as = w.order;
          }
          // Results: every order against the first.
          c.reset();
          c.orders[0].run();
          const std::vector<double> ref = c.output();
          double err = 0;
          for (auto* list : {&c.orders, &autos})
            for (auto& w : *list) {
              c.reset();
              w.run();
              err = std::max(err, max_rel_diff(c.output(), ref));
            }
          if (err > tol) ++mismatches;
          std::vector<Contender> cs;
          for (auto& w : c.orders) cs.push_back({w.order, w.run, {}});
          cs.push_back({"auto", autos[0].run, {}});
          std::vector<Contender*> ptrs;
          for (auto& x : cs) ptrs.push_back(&x);
          measure_interleaved(ptrs, policy);
          double best = INFINITY;
          std::string best_order;
          for (std::size_t q = 0; q + 1 < cs.size(); ++q)
            if (cs[q].samples.median() < best) best = cs[q].samples.median(), best_order = cs[q].name;
          const double ratio = cs.back().samples.median() / best;
          ratios.push_back(ratio);
          worst = std::max(worst, ratio);
          std::printf("%-38s %-16s K=%-4d t=%d |", c.kernel.c_str(), m.info.name.c_str(), f, threads);
          for (std::size_t q = 0; q + 1 < cs.size(); ++q)
            std::printf(" %s %.3f", cs[q].name.c_str(), cs[q].samples.median() * 1e3);
          std::printf(" | best %s | auto (= %s) %.3f ms | auto/best %.2f%s%s\n", best_order.c_str(), same_as.c_str(),
                      cs.back().samples.median() * 1e3, ratio, agree ? "" : " [auto orders differ]",
                      err > tol ? " [MISMATCH]" : "");
          std::fflush(stdout);
        }
      }
  }
  double g = 0;
  for (double r : ratios) g += std::log(r);
  g = ratios.empty() ? NAN : std::exp(g / static_cast<double>(ratios.size()));
  std::printf("auto/best: geomean %.3f, worst %.3f over %zu cases; order_iterations took at most %.0f us; "
              "%d case(s) where written orders lowered to different code under auto; %d mismatch(es)\n",
              g, worst, ratios.size(), max_order_us, disagreements, mismatches);
  return mismatches ? 1 : 0;
}

}  // namespace bench
