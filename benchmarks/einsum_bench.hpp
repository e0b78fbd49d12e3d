// spindle-bench --einsum: what does the subscript front end cost next to a lambda kernel?
// (issue 17 §3.) Per graph and feature size, SpMV, SpMM, SDDMM and A^T Z run three ways,
// interleaved: the library's lambda kernel (ops::spmv/spmm/sddmm, a lambda for A^T Z) into a
// preallocated output, spindle::einsum_into into the same output, and spindle::einsum (which
// allocates its result every call). Results are checked against the kernel's. Then the
// first-call costs of einsum (parse + plan + build the stage-I IR, the IR passes and code
// generation, the JIT) and the per-call dispatch overhead on a 1x1 input.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <spindle/einsum.hpp>
#include <spindle/spindle.hpp>

#include "cli.hpp"
#include "matrices.hpp"
#include "timing.hpp"

namespace bench {

namespace einsum_bench {

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};

template <class T>
double max_rel(std::span<const T> a, std::span<const T> b) {
  double scale = 0, diff = 0;
  for (auto v : b) scale = std::max(scale, std::fabs(static_cast<double>(v)));
  for (std::size_t q = 0; q < a.size() && q < b.size(); ++q)
    diff = std::max(diff, std::fabs(static_cast<double>(a[q]) - static_cast<double>(b[q])));
  return a.size() != b.size() ? INFINITY : diff / std::max(scale, 1e-30);
}

inline double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace einsum_bench

template <class T>
int run_einsum_bench(const Config& cfg) {
  using namespace einsum_bench;
  using sp::in, sp::out, sp::iter, sp::dense;
  TimingPolicy policy{cfg.warmup, cfg.reps, cfg.min_reps, cfg.max_reps, cfg.min_time};
  const double tol = cfg.tolerance > 0 ? cfg.tolerance : (sizeof(T) == 4 ? 1e-5 : 1e-12);
  auto matrices = load_matrices<T>(cfg);
  int mismatches = 0;
  std::vector<double> into_ratios, alloc_ratios;
  std::printf("einsum vs the lambda kernel, median ms (einsum_into: the same output; einsum: allocates it)\n");
  for (int threads : cfg.threads) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    auto spmv = sp::ops::spmv<T>().with_runtime(rt);
    auto spmm = sp::ops::spmm<T>().with_runtime(rt);
    auto sddmm = sp::ops::sddmm<T>().with_runtime(rt);
    auto spmm_t = sp::kernel("spmm_t", [](in<T, I, J> a, in<T, I, K> z, out<T, dense<J>, K> c, iter<I> i, iter<J> j,
                                          iter<K> k) { c(j, k) += a(i, j) * z(i, k); })
                      .with_runtime(rt);
    for (auto& m : matrices)
      for (int f : cfg.feats) {
        const auto& a = m.a;
        const auto x = sp::Tensor<T>::random({a.cols()}, 1, -1, 1);
        const auto X = sp::Tensor<T>::random({a.cols(), f}, 2, -1, 1);
        const auto Z = sp::Tensor<T>::random({a.rows(), f}, 3, -1, 1);
        sp::Tensor<T> y1 = sp::Tensor<T>::zeros({a.rows()}), y2 = y1;
        sp::Tensor<T> c1 = sp::Tensor<T>::zeros({a.rows(), f}), c2 = c1;
        sp::Tensor<T> t1 = sp::Tensor<T>::zeros({a.cols(), f}), t2 = t1;
        sp::Csr<T> s1 = a, s2 = a;
        struct Case {
          std::string name;
          std::function<void()> kernel, into, alloc;
          std::function<double()> diff;
        };
        std::vector<Case> cases;
        if (f == cfg.feats.front())
          cases.push_back({"spmv ij,j->i", [&] { spmv(a, x, y1); }, [&] { sp::einsum_into(rt, "ij,j->i", y2, a, x); },
                           [&] { (void)sp::einsum(rt, "ij,j->i", a, x); },
                           [&] { return max_rel<T>(y2.values(), y1.values()); }});
        cases.push_back({"spmm ij,jk->ik", [&] { spmm(a, X, c1); }, [&] { sp::einsum_into(rt, "ij,jk->ik", c2, a, X); },
                         [&] { (void)sp::einsum(rt, "ij,jk->ik", a, X); },
                         [&] { return max_rel<T>(c2.values(), c1.values()); }});
        cases.push_back({"sddmm ij,ik,jk->ij", [&] { sddmm(a, Z, X, s1); },
                         [&] { sp::einsum_into(rt, "ij,ik,jk->ij", s2, a, Z, X); },
                         [&] { (void)sp::einsum(rt, "ij,ik,jk->ij", a, Z, X); },
                         [&] { return max_rel<T>(s2.values(), s1.values()); }});
        cases.push_back({"spmm_t ij,ik->jk", [&] { spmm_t(a, Z, t1); }, [&] { sp::einsum_into(rt, "ij,ik->jk", t2, a, Z); },
                         [&] { (void)sp::einsum(rt, "ij,ik->jk", a, Z); },
                         [&] { return max_rel<T>(t2.values(), t1.values()); }});
        for (auto& c : cases) {
          std::fprintf(stderr, "[bench] einsum: %s on %s, K=%d, %d thread(s)\n", c.name.c_str(), m.info.name.c_str(),
                       f, threads);
          c.kernel();
          c.into();
          const double err = c.diff();
          if (err > tol) ++mismatches;
          std::vector<Contender> cs{{"kernel", c.kernel, {}}, {"einsum_into", c.into, {}}, {"einsum", c.alloc, {}}};
          measure_interleaved({&cs[0], &cs[1], &cs[2]}, policy);
          const double k = cs[0].samples.median(), r1 = cs[1].samples.median() / k, r2 = cs[2].samples.median() / k;
          into_ratios.push_back(r1);
          alloc_ratios.push_back(r2);
          std::printf("%-22s %-16s K=%-4d t=%d | kernel %.4f | einsum_into %.4f (%.2fx) | einsum %.4f (%.2fx) | "
                      "max rel diff %.1e%s\n",
                      c.name.c_str(), m.info.name.c_str(), f, threads, k * 1e3, cs[1].samples.median() * 1e3, r1,
                      cs[2].samples.median() * 1e3, r2, err, err > tol ? " [MISMATCH]" : "");
          std::fflush(stdout);
        }
      }
  }
  auto geomean = [](const std::vector<double>& v) {
    double g = 0;
    for (double r : v) g += std::log(r);
    return v.empty() ? NAN : std::exp(g / static_cast<double>(v.size()));
  };
  std::printf("einsum_into / kernel: geomean %.3f; einsum / kernel: geomean %.3f over %zu cases; %d mismatch(es)\n",
              geomean(into_ratios), geomean(alloc_ratios), into_ratios.size(), mismatches);

  // Factorisation: multi-operand statements as one statement (SPINDLE_EINSUM_PATH=single),
  // as einsum factors them, and factored by hand (each order a user might write, as separate
  // einsum calls). auto / best hand <= 1.2 wanted.
  std::vector<double> path_ratios;
  std::printf("einsum factorisation, median ms: one statement | einsum (auto path) | by hand, each order\n");
  for (int threads : cfg.threads) {
    sp::Options o = sp::Options::from_env(), os = o;
    o.num_threads = os.num_threads = threads;
    os.einsum_single = true;
    sp::runtime::Runtime rt(o), rt_single(os);
    for (auto& m : matrices)
      for (int f : cfg.feats) {
        const auto& a = m.a;
        const std::int64_t l = 16;  // the layer's output features
        const auto d1 = sp::Tensor<T>::random({a.rows()}, 21, 0, 1), d2 = sp::Tensor<T>::random({a.cols()}, 22, 0, 1);
        const auto X = sp::Tensor<T>::random({a.cols(), f}, 23, -1, 1), W = sp::Tensor<T>::random({f, l}, 24, -1, 1);
        const auto Q = sp::Tensor<T>::random({a.rows(), f}, 25, -1, 1), Kt = sp::Tensor<T>::random({a.cols(), f}, 26, -1, 1);
        const auto V = sp::Tensor<T>::random({a.cols(), l}, 27, -1, 1);
        struct PathCase {
          std::string name;
          std::function<sp::Tensor<T>(sp::runtime::Runtime&)> one;
          std::vector<std::pair<std::string, std::function<sp::Tensor<T>()>>> hand;
        };
        std::vector<PathCase> cases;
        cases.push_back({"gcn i,ij,j,jk,kl->il",
                         [&](sp::runtime::Runtime& r) { return sp::einsum(r, "i,ij,j,jk,kl->il", d1, a, d2, X, W).tensor(); },
                         {{"(DAD)(XW)",
                           [&] {
                             auto s = sp::einsum(rt, "i,ij,j->ij", d1, a, d2);
                             auto t = sp::einsum(rt, "jk,kl->jl", X, W);
                             return sp::einsum(rt, "ij,jl->il", s.csr(), t.tensor()).tensor();
                           }},
                          {"((DAD)X)W", [&] {
                             auto s = sp::einsum(rt, "i,ij,j->ij", d1, a, d2);
                             auto t = sp::einsum(rt, "ij,jk->ik", s.csr(), X);
                             return sp::einsum(rt, "ik,kl->il", t.tensor(), W).tensor();
                           }}}});
        cases.push_back({"attention ij,ik,jk,jl->il",
                         [&](sp::runtime::Runtime& r) { return sp::einsum(r, "ij,ik,jk,jl->il", a, Q, Kt, V).tensor(); },
                         {{"(SDDMM)V", [&] {
                            auto s = sp::einsum(rt, "ij,ik,jk->ij", a, Q, Kt);
                            return sp::einsum(rt, "ij,jl->il", s.csr(), V).tensor();
                          }}}});
        for (auto& c : cases) {
          std::fprintf(stderr, "[bench] einsum path: %s on %s, K=%d, %d thread(s)\n", c.name.c_str(),
                       m.info.name.c_str(), f, threads);
          const auto ref = c.hand[0].second();
          const auto got = c.one(rt);
          const double err = max_rel<T>(got.values(), ref.values());
          if (err > 1e-3) ++mismatches;  // different association: the float tolerance of a long sum
          std::vector<Contender> cs{{"auto", [&] { (void)c.one(rt); }, {}}};
          for (auto& h : c.hand) cs.push_back({h.first, [&] { (void)h.second(); }, {}});
          // The single statement is far slower; time it with a few calls only.
          Contender single{"one statement", [&] { (void)c.one(rt_single); }, {}};
          std::vector<Contender*> ptrs;
          for (auto& x : cs) ptrs.push_back(&x);
          measure_interleaved(ptrs, policy);
          TimingPolicy few{1, 3, 3, 3, 0};
          measure_interleaved({&single}, few);
          double best = INFINITY;
          std::string best_name;
          for (std::size_t q = 1; q < cs.size(); ++q)
            if (cs[q].samples.median() < best) best = cs[q].samples.median(), best_name = cs[q].name;
          const double ratio = cs[0].samples.median() / best;
          path_ratios.push_back(ratio);
          std::printf("%-26s %-16s K=%-4d t=%d | one statement %.3f | auto %.3f |", c.name.c_str(),
                      m.info.name.c_str(), f, threads, single.samples.median() * 1e3, cs[0].samples.median() * 1e3);
          for (std::size_t q = 1; q < cs.size(); ++q)
            std::printf(" %s %.3f", cs[q].name.c_str(), cs[q].samples.median() * 1e3);
          std::printf(" | auto/best hand %.2f | one statement/auto %.1fx | max rel diff %.1e%s\n", ratio,
                      single.samples.median() / cs[0].samples.median(), err, err > 1e-3 ? " [MISMATCH]" : "");
          std::fflush(stdout);
        }
      }
  }
  std::printf("einsum factorisation: auto / best hand-factored geomean %.3f over %zu cases\n", geomean(path_ratios),
              path_ratios.size());

  // First call: a fresh runtime without the disk cache, so the plan is built and compiled.
  {
    sp::Options o = sp::Options::from_env();
    o.disk_cache = false;
    o.num_threads = cfg.threads.front();
    std::printf("einsum first call (fresh runtime, no disk cache): plan = parse + checks + stage-I IR; passes + "
                "emit from CompileStats; JIT = the engine's compile and load\n");
    for (std::string spec : {"ij,j->i", "ij,jk->ik", "ij,ik,jk->ij", "ij,ik->jk", "ij,jk,kl->il"}) {
      sp::runtime::Runtime rt(o);
      const auto A = sp::Csr<T>::random(64, 64, 4, 5);
      const auto v = sp::Tensor<T>::random({64}, 6), M = sp::Tensor<T>::random({64, 8}, 7);
      const auto W = sp::Tensor<T>::random({8, 8}, 8);
      std::vector<sp::StorageView> views{A.storage()};
      if (spec == "ij,j->i") views.push_back(v.storage());
      if (spec == "ij,jk->ik" || spec == "ij,ik->jk") views.push_back(M.storage());
      if (spec == "ij,ik,jk->ij") views.push_back(M.storage()), views.push_back(M.storage());
      if (spec == "ij,jk,kl->il") views.push_back(M.storage()), views.push_back(W.storage());
      auto t0 = std::chrono::steady_clock::now();
      auto s = sp::parse_einsum(spec, views.size());
      std::vector<sp::EinsumOperandFormat> formats;
      std::vector<std::int64_t> stored;
      for (auto& w : views) formats.push_back(sp::einsum_format_of(w)), stored.push_back(w.value_count);
      const int d = sp::choose_einsum_driver(s, formats, stored);
      auto f = sp::build_einsum_function(s, formats, sp::dtype_v<T>, d, sp::einsum_sparse_output(s, formats, d));
      const double build_us = micros_since(t0);
      t0 = std::chrono::steady_clock::now();
      auto plan = sp::detail::einsum_plan(spec, views, sp::dtype_v<T>, rt);
      const double plan_us = micros_since(t0);
      const auto& st = plan->kernel->stats();
      std::printf("  %-14s front end %.0f us | passes + emit %.0f us | JIT %.0f us | first plan in all %.0f us\n",
                  spec.c_str(), build_us, st.lower_micros, st.load_micros, plan_us);
    }
  }
  // Dispatch: a 1x1 SpMM, where the call is all overhead.
  {
    sp::Options o = sp::Options::from_env();
    o.num_threads = 1;
    sp::runtime::Runtime rt(o);
    auto spmm = sp::ops::spmm<T>().with_runtime(rt);
    const auto A = sp::Csr<T>::random(1, 1, 1, 9);
    const auto X = sp::Tensor<T>::random({1, 1}, 10);
    sp::Tensor<T> C = sp::Tensor<T>::zeros({1, 1});
    std::vector<Contender> cs{{"kernel", [&] { spmm(A, X, C); }, {}},
                              {"einsum_into", [&] { sp::einsum_into(rt, "ij,jk->ik", C, A, X); }, {}},
                              {"einsum", [&] { (void)sp::einsum(rt, "ij,jk->ik", A, X); }, {}}};
    TimingPolicy p;
    p.min_reps = 2000;
    p.min_time = 0.2;
    measure_interleaved({&cs[0], &cs[1], &cs[2]}, p);
    std::printf("dispatch, 1x1 SpMM (median us per call): kernel %.2f | einsum_into %.2f | einsum %.2f\n",
                cs[0].samples.median() * 1e6, cs[1].samples.median() * 1e6, cs[2].samples.median() * 1e6);
  }
  return mismatches ? 1 : 0;
}

}  // namespace bench
