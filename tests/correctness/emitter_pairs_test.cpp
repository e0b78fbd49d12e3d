// The C and CUDA emitters print every expression unambiguously (issue 15 §1: `-(-t)` was
// printed as `--t`, a decrement). Every pair of expression formers — unary minus, the
// arithmetic operators, min/max, comparisons inside select, &&, ||, !, casts, abs, the
// float intrinsics, negative literals on either side — is nested both ways (the inner one
// as each operand of the outer one), for f32, f64, i32 and i64, in one kernel per type
// written through the public DSL. Its results on the C engine (ORC; the system compiler in
// builds without LLVM) and in the CUDA emulator (NVRTC compiles the CUDA source too) are
// compared with the reference interpreter of the kernel language on the front end's IR.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "spindle/spindle.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/reference_interpreter.hpp"

namespace {

namespace sp = spindle;

struct Row : sp::dense_fixed {};
struct Case : sp::dense_fixed {};

template <class T>
using V = sp::Value<T>;

template <class T>
struct Former {
  std::string name;
  int arity;  // 1: f(a) (b unused), 2: f(a, b)
  std::function<V<T>(const V<T>&, const V<T>&)> f;
};

template <class T>
V<T> in_range(const V<T>& a) {
  if constexpr (std::is_floating_point_v<T>)
    return sp::select(sp::abs(a) < T(1e6), a, V<T>(T(0)));
  else
    return a;
}

// Every way an expression of type T can be formed from one or two expressions of type T.
template <class T>
std::vector<Former<T>> formers() {
  constexpr bool fl = std::is_floating_point_v<T>;
  using Other = std::conditional_t<fl, std::int64_t, double>;
  std::vector<Former<T>> f = {
      {"neg", 1, [](const V<T>& a, const V<T>&) { return -a; }},
      {"neg_neg", 1, [](const V<T>& a, const V<T>&) { return -(-a); }},
      {"add", 2, [](const V<T>& a, const V<T>& b) { return a + b; }},
      {"sub", 2, [](const V<T>& a, const V<T>& b) { return a - b; }},
      {"mul", 2, [](const V<T>& a, const V<T>& b) { return a * b; }},
      {"sub_neg", 2, [](const V<T>& a, const V<T>& b) { return a - -b; }},
      {"add_neg", 2, [](const V<T>& a, const V<T>& b) { return a + -b; }},
      {"lit_minus", 1, [](const V<T>& a, const V<T>&) { return T(-2) - a; }},
      {"minus_neglit", 1, [](const V<T>& a, const V<T>&) { return a - T(-3); }},
      {"neglit_times", 1, [](const V<T>& a, const V<T>&) { return a * T(-1); }},
      {"neg_of_neglit", 1, [](const V<T>&, const V<T>&) { return -V<T>(T(-2)); }},
      {"min", 2, [](const V<T>& a, const V<T>& b) { return sp::min(a, b); }},
      {"max", 2, [](const V<T>& a, const V<T>& b) { return sp::max(a, -b); }},
      {"sel_lt", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a < b, a, -b); }},
      {"sel_le", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a <= -b, b, a); }},
      {"sel_gt", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a > b, a - b, b); }},
      {"sel_ge", 2, [](const V<T>& a, const V<T>& b) { return sp::select(T(0) >= a, a, b); }},
      {"sel_eq", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a == b, a, b + T(1)); }},
      {"sel_ne", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a != -b, -a, b); }},
      {"and", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a < b && b > T(0), a, b); }},
      {"or", 2, [](const V<T>& a, const V<T>& b) { return sp::select(a < T(-1) || b == a, b, a); }},
      {"not", 2, [](const V<T>& a, const V<T>& b) { return sp::select(!(a < b), a, b); }},
      {"not_not", 2, [](const V<T>& a, const V<T>& b) { return sp::select(!!(a <= b) && !(b < T(0)), b, a); }},
      // (a float beyond the integer range, inf or NaN, converts with undefined behaviour: 0 instead)
      {"cast", 1, [](const V<T>& a, const V<T>&) { return sp::cast<T>(sp::cast<Other>(in_range(a))); }},
      {"cast_neg", 1, [](const V<T>& a, const V<T>&) { return sp::cast<T>(-sp::cast<Other>(-in_range(a))); }},
      {"abs", 1, [](const V<T>& a, const V<T>&) { return sp::abs(a); }},
      {"neg_abs", 1, [](const V<T>& a, const V<T>&) { return -sp::abs(-a); }},
  };
  if constexpr (fl) {
    f.push_back({"div", 2, [](const V<T>& a, const V<T>& b) { return a / b; }});
    f.push_back({"div_neg", 2, [](const V<T>& a, const V<T>& b) { return -a / -b; }});
    f.push_back({"exp", 1, [](const V<T>& a, const V<T>&) { return sp::exp(-sp::abs(a)); }});
    f.push_back({"sqrt", 1, [](const V<T>& a, const V<T>&) { return sp::sqrt(sp::abs(a)); }});
    f.push_back({"tanh", 1, [](const V<T>& a, const V<T>&) { return -sp::tanh(-a); }});
    f.push_back({"pow", 2, [](const V<T>& a, const V<T>& b) { return sp::pow(sp::abs(a) + T(1), sp::min(b, T(2))); }});
    f.push_back({"log", 1, [](const V<T>& a, const V<T>&) { return sp::log(sp::abs(a) + T(0.5)); }});
  } else {
    // Integer division and remainder by expressions that are never 0.
    auto nonzero = [](const V<T>& b) { return sp::select(b == T(0), V<T>(T(7)), b); };
    f.push_back({"div", 2, [nonzero](const V<T>& a, const V<T>& b) { return a / nonzero(b); }});
    f.push_back({"div_neg", 2, [nonzero](const V<T>& a, const V<T>& b) { return -a / -nonzero(b); }});
    f.push_back({"mod", 2, [nonzero](const V<T>& a, const V<T>& b) { return a % nonzero(b); }});
    f.push_back({"mod_neglit", 1, [](const V<T>& a, const V<T>&) { return a % T(-3); }});
    f.push_back({"lit_mod", 1, [nonzero](const V<T>& a, const V<T>&) { return T(-7) % nonzero(a); }});
  }
  return f;
}

// A balanced select tree: cases[lo..hi) chosen by the value of iterator e.
template <class T>
V<T> choose(const sp::iter<Case>& e, const std::vector<V<T>>& cases, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return cases[lo];
  std::size_t mid = (lo + hi) / 2;
  return sp::select(e < std::int64_t(mid), choose(e, cases, lo, mid), choose(e, cases, mid, hi));
}

// The formers the CUDA dialect prints its own way or that print a leading token (unary
// minus, negative literals, casts, calls): the CUDA emulator run pairs these with every
// former (compiling all pairs there takes 20 s per type; the rest of the printer is shared
// with C, which checks every pair).
bool cuda_core(const std::string& n) {
  for (const char* c : {"neg", "neg_neg", "sub_neg", "lit_minus", "neg_of_neglit", "cast_neg", "neg_abs", "exp",
                        "tanh", "pow", "div_neg", "lit_mod", "and", "not_not"})
    if (n == c) return true;
  return false;
}

// One kernel computing every pair (outer, inner) that `keep` accepts, one per Case.
template <class T>
auto pairs_kernel(const std::string& name, const std::vector<Former<T>>& fs,
                  const std::function<bool(const Former<T>&, const Former<T>&)>& keep, std::vector<std::string>& names) {
  return sp::kernel(name, [&](sp::in<T, Row> x, sp::in<T, Row> w, sp::out<T, Row, Case> y, sp::iter<Row> r,
                              sp::iter<Case> e) {
    const V<T> a = x(r), b = w(r);
    std::vector<V<T>> cases;
    for (const auto& outer : fs)
      for (const auto& inner : fs) {
        if (!keep(outer, inner)) continue;
        const V<T> g = inner.f(a, b);
        cases.push_back(outer.f(g, b));
        names.push_back(outer.name + "(" + inner.name + "(x, w), w)");
        if (outer.arity == 2) {
          cases.push_back(outer.f(b, g));
          names.push_back(outer.name + "(w, " + inner.name + "(x, w))");
        }
      }
    y(r, e) = choose(e, cases, 0, cases.size());
  });
}

template <class T, class K>
void check_pairs_of(const K& k, const std::vector<std::string>& names, bool cuda);

template <class T>
void check_pairs(const char* type) {
  const auto fs = formers<T>();
  std::vector<std::string> all_names, cuda_names;  // what each case computes
  auto k = pairs_kernel<T>(std::string("pairs_") + type, fs, [](auto&, auto&) { return true; }, all_names);
  auto kc = pairs_kernel<T>(std::string("cuda_pairs_") + type, fs,
                            [](const Former<T>& o, const Former<T>& i) { return cuda_core(o.name) || cuda_core(i.name); },
                            cuda_names);
  check_pairs_of<T>(k, all_names, false);
  check_pairs_of<T>(kc, cuda_names, true);
}

template <class T, class K>
void check_pairs_of(const K& k, const std::vector<std::string>& names, bool cuda) {
  const std::int64_t rows = 23, n = static_cast<std::int64_t>(names.size());
  INFO(k.name() << ": " << n << " expressions");
  auto x = sp::Tensor<T>::zeros({rows});
  auto w = sp::Tensor<T>::zeros({rows});
  for (std::int64_t q = 0; q < rows; ++q) {  // negatives, zeros, equal pairs, fractions for floats
    x(q) = static_cast<T>(std::is_floating_point_v<T> ? (q - 11) * 0.75 : (q - 11));
    w(q) = static_cast<T>(std::is_floating_point_v<T> ? ((q * 7) % 9 - 4) * 0.5 : (q * 7) % 9 - 4);
  }
  auto ref = sp::Tensor<T>::zeros({rows, n});
  {
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(x);
    args[1].view = sp::storage_of(w);
    args[2].view = sp::storage_of(ref);
    spindle::test::Interpreter interp(k.ir(), args);
    interp.run();
  }
  auto compare = [&](const sp::Tensor<T>& got, const std::string& engine) {
    long bad = 0;
    for (std::int64_t q = 0; q < rows; ++q)
      for (std::int64_t c = 0; c < n; ++c) {
        const double want = ref(q, c), have = got(q, c);
        const double tol = std::is_same_v<T, float> ? 1e-5 : std::is_same_v<T, double> ? 1e-12 : 0;
        const bool same = (std::isnan(want) && std::isnan(have)) || want == have ||
                          std::abs(want - have) <= tol * std::max(1.0, std::abs(want));
        if (!same && bad++ < 5)
          FAIL_CHECK(engine << ": " << names[static_cast<std::size_t>(c)] << " at x = " << double(x(q))
                            << ", w = " << double(w(q)) << ": interpreter " << want << ", engine " << have);
      }
    CHECK(bad == 0);
  };
  if (!cuda) {
    // The C text is the same for both CPU engines; the system compiler takes 3x as long on
    // these large units, so it runs here only in builds without LLVM (CI's no-LLVM stage).
#ifdef SPINDLE_WITH_ORC
    const char* engine = "orc";
#else
    const char* engine = "system";
#endif
    sp::Options o = sp::Options::from_env();
    o.engine = engine;
    o.disk_cache = false;
    sp::runtime::Runtime rt(o);
    auto y = sp::Tensor<T>::zeros({rows, n});
    k.with_runtime(rt)(x, w, y);
    compare(y, engine);
    return;
  }
  auto y = sp::Tensor<T>::zeros({rows, n});
  std::vector<sp::runtime::CallArg> args(3);
  args[0].view = sp::storage_of(x);
  args[1].view = sp::storage_of(w);
  args[2].view = sp::storage_of(y);
  spindle::test::NvrtcCheck nvrtc;
  nvrtc.ptx_only = true;
  spindle::test::run_cuda_build(k.ir(), args, &nvrtc);
  compare(y, "cuda emulator");
}

}  // namespace

TEST_CASE("emitter: every pair of expression formers prints unambiguously (f32)", "[correctness][emitter][pairs]") {
  check_pairs<float>("f32");
}
TEST_CASE("emitter: every pair of expression formers prints unambiguously (f64)", "[correctness][emitter][pairs]") {
  check_pairs<double>("f64");
}
TEST_CASE("emitter: every pair of expression formers prints unambiguously (i32)", "[correctness][emitter][pairs]") {
  check_pairs<std::int32_t>("i32");
}
TEST_CASE("emitter: every pair of expression formers prints unambiguously (i64)", "[correctness][emitter][pairs]") {
  check_pairs<std::int64_t>("i64");
}
