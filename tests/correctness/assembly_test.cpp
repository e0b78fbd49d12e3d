// Sparse outputs of unknown pattern (docs/language.md §4.6): kernels that assemble a CSR —
// SpGEMM, sparse add, and user kernels with other reductions, assignments, index and value
// types — checked against dense references and the reference interpreter on every CPU engine
// with 1 and 3 threads, on every test shape and on real graphs; and the rules (definition
// errors, call-time shape errors that leave the output untouched). Also the §3 rule these
// kernels rely on: a child of a root dense axis iterates the fiber at another iterator's
// coordinate (row j of B[dense<J>, K]).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

#include "correctness/correctness_support.hpp"
#include "spindle/ops.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/engines.hpp"
#include "support/reference_interpreter.hpp"

namespace sp = spindle;
using namespace spindle_test;

namespace {

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::sparse_variable<sp::dense<J>> {};
struct CK : sp::assembled<I, K> {};
struct J2 : sp::sparse_variable<I>, sp::coordinates_of<J> {};
struct CJ : sp::assembled<I, J> {};
struct F : sp::dense_fixed {};

// (row, col) -> value of a Csr, checking that its rows are sorted and free of duplicates.
template <class T, class Index>
std::map<std::pair<std::int64_t, std::int64_t>, double> entries(const sp::Csr<T, Index>& c) {
  std::map<std::pair<std::int64_t, std::int64_t>, double> m;
  REQUIRE(c.sorted());
  for (std::int64_t r = 0; r < c.rows(); ++r) {
    auto idx = c.row_indices(r);
    auto val = c.row_values(r);
    for (std::size_t q = 0; q < idx.size(); ++q) {
      if (q > 0) REQUIRE(idx[q - 1] < idx[q]);
      REQUIRE(idx[q] >= 0);
      REQUIRE(static_cast<std::int64_t>(idx[q]) < c.cols());
      m[{r, static_cast<std::int64_t>(idx[q])}] = static_cast<double>(val[q]);
    }
  }
  return m;
}

// The pattern and values of A B computed by a plain triple loop over the stored entries.
template <class T, class Index>
std::map<std::pair<std::int64_t, std::int64_t>, double> product_reference(const sp::Csr<T, Index>& a,
                                                                          const sp::Csr<T, Index>& b) {
  std::map<std::pair<std::int64_t, std::int64_t>, double> m;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    auto ai = a.row_indices(r);
    auto av = a.row_values(r);
    for (std::size_t p = 0; p < ai.size(); ++p) {
      auto bi = b.row_indices(ai[p]);
      auto bv = b.row_values(ai[p]);
      for (std::size_t q = 0; q < bi.size(); ++q)
        m[{r, static_cast<std::int64_t>(bi[q])}] += static_cast<double>(av[p]) * static_cast<double>(bv[q]);
    }
  }
  return m;
}

template <class T, class Index>
std::map<std::pair<std::int64_t, std::int64_t>, double> add_reference(const sp::Csr<T, Index>& a,
                                                                      const sp::Csr<T, Index>& b, double alpha,
                                                                      double beta) {
  std::map<std::pair<std::int64_t, std::int64_t>, double> m;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    for (std::size_t q = 0; q < a.row_indices(r).size(); ++q)
      m[{r, static_cast<std::int64_t>(a.row_indices(r)[q])}] += alpha * static_cast<double>(a.row_values(r)[q]);
    for (std::size_t q = 0; q < b.row_indices(r).size(); ++q)
      m[{r, static_cast<std::int64_t>(b.row_indices(r)[q])}] += beta * static_cast<double>(b.row_values(r)[q]);
  }
  return m;
}

template <class T, class Index>
std::map<std::pair<std::int64_t, std::int64_t>, double> multiply_reference(const sp::Csr<T, Index>& a,
                                                                           const sp::Csr<T, Index>& b) {
  std::map<std::pair<std::int64_t, std::int64_t>, double> m;
  const auto ea = entries(a), eb = entries(b);
  for (auto& [rc, v] : ea)
    if (auto it = eb.find(rc); it != eb.end()) m[rc] = v * it->second;
  return m;
}

// Same pattern exactly; values within a relative tolerance of the double reference.
void check_same(const std::map<std::pair<std::int64_t, std::int64_t>, double>& got,
                const std::map<std::pair<std::int64_t, std::int64_t>, double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  auto g = got.begin();
  for (auto w = want.begin(); w != want.end(); ++w, ++g) {
    INFO("entry (" << w->first.first << ", " << w->first.second << ")");
    REQUIRE(g->first == w->first);
    REQUIRE(std::fabs(g->second - w->second) <= tol * (1 + std::fabs(w->second)));
  }
}

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 1e-4 : 1e-10;
}

}  // namespace

namespace spindle::test {
// A target that only records whether a call got as far as allocating the output.
struct RecordingTarget final : sp::runtime::AssemblyTarget {
  bool allocated = false;
  std::vector<std::int64_t> scratch;
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>&, void*& i, void*& v) override {
    allocated = true;
    scratch.assign(static_cast<std::size_t>(2 * nnz + 2), 0);
    i = scratch.data();
    v = scratch.data() + nnz + 1;
  }
  void commit() override {}
};
}  // namespace spindle::test

namespace {

// A host Csr receiving the arrays of the CUDA build (run_assembled_cuda_build).
template <class T, class Index>
struct HostCsrTarget final : sp::runtime::AssemblyTarget {
  sp::Csr<T, Index>& out;
  sp::detail::CsrAssembly<T, Index> inner;
  explicit HostCsrTarget(sp::Csr<T, Index>& c) : out(c), inner(c) {}
  void allocate(std::int64_t nnz, const std::vector<std::int64_t>& row_ptr, void*& i, void*& v) override {
    inner.allocate(nnz, row_ptr, i, v);
  }
  void commit() override { inner.commit(); }
};

// Runs the CUDA build of an assembling kernel (the GPU when there is one, else the GPU steps
// in the emulator with every module also compiled by NVRTC) into `out`.
template <class Kernel, class T, class Index, class... Inputs>
void run_cuda_assembled(const Kernel& k, sp::Csr<T, Index>& out, spindle::test::NvrtcCheck& nvrtc,
                        spindle::test::EmulatorCache& cache, std::int64_t budget, const Inputs&... inputs) {
  std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(inputs)..., sp::detail::make_call_arg(out)};
  HostCsrTarget<T, Index> target(out);
  spindle::test::run_assembled_cuda_build(k.ir(), args, target, &nvrtc, &cache, budget);
}

// Runs `kernel` on every CPU engine and thread count and its CUDA build (the GPU, else the
// emulator, with a scratch budget that makes rows share workers and one that does not), and
// compares each output with the interpreter's on the same inputs.
// `cuda`: also the CUDA build (NVRTC to cubin, emulated without a GPU); kernels whose rows are
// scattered have none, and their CUDA build must say so.
template <class Kernel, class MakeOut, class... Inputs>
void check_assembled_on(bool cuda, const Kernel& kernel, MakeOut make_out, const Inputs&... inputs) {
  static spindle::test::NvrtcCheck nvrtc;
  static spindle::test::EmulatorCache cache;
  using Out = decltype(make_out());
  Out shell = make_out();
  std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(inputs)..., sp::detail::make_call_arg(shell)};
  spindle::test::Interpreter interp(kernel.ir(), args);
  interp.run();
  const auto want = interp.assembled(kernel.ir().buffers.back().buffer->name);
  auto same = [&](const Out& got) {
    auto have = entries(got);
    REQUIRE(have.size() == want.size());
    for (auto& w : want) {
      auto it = have.find({w.row, w.col});
      REQUIRE(it != have.end());
      double expect = sp::is_float(sp::dtype_v<typename Out::value_type>) ? w.f : static_cast<double>(w.i);
      CHECK(std::fabs(it->second - expect) <= w.error_bound + 1e-6 * std::fabs(expect));
    }
  };
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO(kernel.name() << " engine " << engine << " threads " << threads);
      Out got = make_out();
      kernel.with_runtime(spindle::test::engine_runtime(engine, threads))(inputs..., got);
      same(got);
    }
  if (!cuda) {
    Out got = make_out();
    CHECK_THROWS_WITH(run_cuda_assembled(kernel, got, nvrtc, cache, std::int64_t{1} << 24, inputs...),
                      Catch::Contains("written at scattered rows") && Catch::Contains("assembled on the CPU only"));
    return;
  }
  for (std::int64_t budget : {std::int64_t{20} * std::max<std::int64_t>(shell.cols(), 1) * 4, std::int64_t{1} << 24}) {
    INFO(kernel.name() << " CUDA build (" << spindle::test::cuda_engine_name() << "), scratch budget " << budget);
    Out got = make_out();
    run_cuda_assembled(kernel, got, nvrtc, cache, budget, inputs...);
    same(got);
  }
}

template <class Kernel, class MakeOut, class... Inputs>
void check_assembled(const Kernel& kernel, MakeOut make_out, const Inputs&... inputs) {
  check_assembled_on(true, kernel, make_out, inputs...);
}

}  // namespace

TEMPLATE_TEST_CASE("SpGEMM and sparse add assemble the exact pattern and values on every shape, engine and thread count",
                   "[correctness][assembly]", float, double) {
  using T = TestType;
  for (const Shape& s : matrix_shapes()) {
    for (int variant = 0; variant < 2; ++variant) {
      // A (rows x cols) times B (cols x n): n differs from rows so that C is rectangular.
      const std::int64_t n = variant == 0 ? s.rows : s.rows / 2 + 3;
      auto a = random_csr<T>(s, 11 + variant);
      Shape sb{"b", s.cols, n, s.avg_nnz_per_row, 0.3};
      auto b = random_csr<T>(sb, 23 + variant);
      auto a2 = random_csr<T>(s, 31 + variant);
      auto want_product = product_reference(a, b);
      auto want_sum = add_reference(a, a2, 1.5, -0.5);
      for (const auto& engine : spindle::test::cpu_engines())
        for (int threads : {1, 3}) {
          INFO(s << " variant " << variant << " engine " << engine << " threads " << threads);
          auto& rt = spindle::test::engine_runtime(engine, threads);
          sp::Csr<T> c(a.rows(), b.cols(), "c");
          sp::ops::spgemm<T>().with_runtime(rt)(a, b, c);
          CHECK(c.rows() == a.rows());
          CHECK(c.cols() == b.cols());
          CHECK(c.name() == "c");
          check_same(entries(c), want_product, tolerance<T>());
          // A Dcsr output: the same entries, only the rows that got some stored.
          sp::Dcsr<T> dc(a.rows(), b.cols(), "dc");
          sp::ops::spgemm<T>().with_runtime(rt)(a, b, dc);
          const auto want_d = sp::Dcsr<T>::from_csr(c);
          CHECK(dc.name() == "dc");
          CHECK(dc.rows() == c.rows());
          CHECK(dc.cols() == c.cols());
          REQUIRE(dc.stored_rows() == want_d.stored_rows());
          CHECK(std::equal(dc.row_ids().begin(), dc.row_ids().end(), want_d.row_ids().begin()));
          CHECK(std::equal(dc.indptr().begin(), dc.indptr().end(), want_d.indptr().begin()));
          CHECK(std::equal(dc.indices().begin(), dc.indices().end(), want_d.indices().begin()));
          CHECK(std::equal(dc.values().begin(), dc.values().end(), want_d.values().begin()));
          sp::Csr<T> d(a.rows(), a.cols());
          sp::ops::sparse_add<T>().with_runtime(rt)(a, a2, T(1.5), T(-0.5), d);
          check_same(entries(d), want_sum, tolerance<T>());
          // A second call replaces the pattern (the output's old entries do not matter).
          sp::ops::sparse_add<T>().with_runtime(rt)(a, a, T(1), T(1), d);
          check_same(entries(d), add_reference(a, a, 1, 1), tolerance<T>());
          // The element-wise product: the intersection of the patterns.
          sp::Csr<T> e(a.rows(), a.cols());
          sp::ops::sparse_multiply<T>().with_runtime(rt)(a, a2, e);
          check_same(entries(e), multiply_reference(a, a2), tolerance<T>());
        }
    }
  }
}

TEST_CASE("SpGEMM on real graphs matches Eigen's sparse product, with 64-bit indices too",
          "[correctness][assembly][graphs]") {
  for (const std::string& file : {std::string("gnn/cora.mtx.gz"), std::string("matrices/wiki-Vote.mtx.gz")}) {
    if (sanitized_build && file != "gnn/cora.mtx.gz") continue;  // wiki-Vote squared: 145 s under ASan
    auto loaded = load_graph<double>(file);
    if (!loaded) {
      WARN("skipping " << file << ": not in the shared data");
      continue;
    }
    const auto& a = *loaded;
    INFO(file << " " << a.rows() << "x" << a.cols() << " nnz " << a.nnz());
    auto want = product_reference(a, a);
    for (int threads : {1, 2}) {
      auto& rt = spindle::test::engine_runtime(spindle::test::cpu_engines().front(), threads);
      sp::Csr<double> c(a.rows(), a.cols());
      sp::ops::spgemm<double>().with_runtime(rt)(a, a, c);
      check_same(entries(c), want, 1e-12);
      auto a64 = with_index<std::int64_t>(a);
      sp::Csr<double, std::int64_t> c64(a.rows(), a.cols());
      sp::ops::spgemm<double, std::int64_t>().with_runtime(rt)(a64, a64, c64);
      check_same(entries(c64), want, 1e-12);
    }
  }
}

TEST_CASE("spindle::unsorted: SpGEMM's rows as gathered hold the sorted product's entries, marked unsorted: kernels "
          "that walk fibers take them, a co-iteration refuses them, rows assembled in order stay marked sorted",
          "[correctness][assembly]") {
  // Each row's (column, value) pairs, sorted by column (values compared exactly: the row sort
  // only moves them).
  auto rows_of = [](const sp::Csr<float>& c) {
    std::vector<std::vector<std::pair<std::int64_t, float>>> rows(static_cast<std::size_t>(c.rows()));
    for (std::int64_t r = 0; r < c.rows(); ++r) {
      auto idx = c.row_indices(r);
      auto val = c.row_values(r);
      auto& row = rows[static_cast<std::size_t>(r)];
      for (std::size_t q = 0; q < idx.size(); ++q) row.emplace_back(idx[q], val[q]);
      std::sort(row.begin(), row.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (std::size_t q = 1; q < row.size(); ++q) REQUIRE(row[q - 1].first < row[q].first);  // distinct
    }
    return rows;
  };
  std::vector<std::pair<std::string, sp::Csr<float>>> inputs;
  for (const Shape& s : matrix_shapes())
    if (s.rows == s.cols) inputs.emplace_back(s.name, random_csr<float>(s, 5));
  if (auto cora = load_graph<float>("gnn/cora.mtx.gz")) inputs.emplace_back("cora", *cora);
  else WARN("skipping cora: not in the shared data");
  for (const auto& [name, a] : inputs)
    for (const auto& engine : spindle::test::cpu_engines())
      for (int threads : {1, 3}) {
        INFO(name << " engine " << engine << " threads " << threads);
        auto& rt = spindle::test::engine_runtime(engine, threads);
        auto spgemm = sp::ops::spgemm<float>().with_runtime(rt);
        sp::Csr<float> sorted(a.rows(), a.cols(), "sorted"), loose(a.rows(), a.cols(), "loose");
        spgemm(a, a, sorted);
        spgemm(a, a, sp::unsorted(loose));
        CHECK(sorted.sorted());
        CHECK(loose.name() == "loose");
        REQUIRE(loose.nnz() == sorted.nnz());
        CHECK(std::equal(loose.indptr().begin(), loose.indptr().end(), sorted.indptr().begin()));
        CHECK(rows_of(loose) == rows_of(sorted));
        const sp::Csr<float> canon = loose.canonical();
        CHECK(std::equal(canon.indices().begin(), canon.indices().end(), sorted.indices().begin()));
        CHECK(std::equal(canon.values().begin(), canon.values().end(), sorted.values().begin()));
        if (loose.nnz() == 0) continue;
        // SpMM walks each fiber in stored order: the same product up to the order of its sums.
        const std::int64_t k = 5;
        const auto x = sp::Tensor<float>::random({a.cols(), k}, 41, -1, 1);
        auto y_sorted = sp::Tensor<float>::zeros({a.rows(), k}), y_loose = sp::Tensor<float>::zeros({a.rows(), k});
        sp::ops::spmm<float>().with_runtime(rt)(sorted, x, y_sorted);
        sp::ops::spmm<float>().with_runtime(rt)(loose, x, y_loose);
        for (std::size_t q = 0; q < y_sorted.values().size(); ++q)
          REQUIRE(y_loose.values()[q] == Approx(y_sorted.values()[q]).epsilon(1e-4).margin(1e-4));
        // A co-iteration needs sorted fibers: a FormatError before anything is written.
        if (!loose.sorted()) {
          sp::Csr<float> sum(a.rows(), a.cols(), "sum");
          CHECK_THROWS_AS(sp::ops::sparse_add<float>().with_runtime(rt)(loose, sorted, 1.0f, 1.0f, sum),
                          sp::FormatError);
          CHECK(sum.nnz() == 0);
        }
      }
  // Rows assembled in column order anyway (a merge) are committed sorted and marked so.
  const auto a = random_csr<float>(matrix_shapes().back(), 9);
  sp::Csr<float> merged(a.rows(), a.cols()), want(a.rows(), a.cols());
  sp::ops::sparse_add<float>()(a, a, 1.0f, 2.0f, sp::unsorted(merged));
  sp::ops::sparse_add<float>()(a, a, 1.0f, 2.0f, want);
  CHECK(merged.sorted());
  CHECK(std::equal(merged.indices().begin(), merged.indices().end(), want.indices().begin(), want.indices().end()));
  // A call that fails leaves the output as it was.
  sp::Csr<float> wrong(a.rows() + 1, a.cols());
  CHECK_THROWS_AS(sp::ops::spgemm<float>()(a, a, sp::unsorted(wrong)), sp::ShapeError);
  CHECK(wrong.nnz() == 0);
  CHECK(wrong.rows() == a.rows() + 1);
}

TEST_CASE("assembled outputs agree with the reference interpreter on every engine and the CUDA build: +=, max_with, =, int values, a write-free kernel",
          "[correctness][assembly]") {
  // SpGEMM, a max-plus product, a scaled copy of A's pattern (=), counting paths of length two
  // in int64, and a kernel whose writes never happen (B has no entries): the empty output.
  auto spgemm = sp::kernel("spgemm", sp::names{"A", "B", "C"},
                           [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, CK> c,
                              sp::iter<I> i) {
                             sp::for_each<J>([&](sp::iter<J> j) {
                               sp::for_each<K>([&](sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
                             });
                           });
  auto maxplus = sp::kernel("maxplus", sp::names{"A", "B", "C"},
                            [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, CK> c,
                               sp::iter<I> i, sp::iter<J> j) {
                              sp::for_each<K>([&](sp::iter<K> k) { c(i, k).max_with(a(i, j) + b(j, k)); });
                            });
  auto scaled = sp::kernel("scaled_copy", sp::names{"A", "C"},
                           [](sp::in<float, I, J> a, sp::out<float, I, CJ> c, sp::iter<I> i, sp::iter<J> j) {
                             c(i, j) = a(i, j) * 2.0f;
                           });
  auto paths = sp::kernel("paths", sp::names{"A", "B", "C"},
                          [](sp::in<std::int64_t, I, J> a, sp::in<std::int64_t, sp::dense<J>, K> b,
                             sp::out<std::int64_t, I, CK> c, sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) {
                            c(i, k) += a(i, j) * b(j, k);
                          });
  struct CK64 : sp::assembled<I, K, std::int64_t> {};
  auto paths64 = sp::kernel("paths64", sp::names{"A", "B", "C"},
                            [](sp::in<double, I, J> a, sp::in<double, sp::dense<J>, K> b,
                               sp::out<double, I, CK64> c, sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) {
                              c(i, k) += a(i, j) * b(j, k);
                            });
  const Shape shape{"irregular", 61, 47, 4, 0.2};
  auto a = random_csr<float>(shape, 5);
  auto b = random_csr<float>(Shape{"b", 47, 53, 3, 0.3}, 6);
  auto ai = sp::Csr<std::int64_t>::pattern(a.rows(), a.cols(), {a.indptr().begin(), a.indptr().end()},
                                           {a.indices().begin(), a.indices().end()});
  auto bi = sp::Csr<std::int64_t>::pattern(b.rows(), b.cols(), {b.indptr().begin(), b.indptr().end()},
                                           {b.indices().begin(), b.indices().end()});
  sp::Csr<float> empty_b(47, 53);

  auto check = [](auto& kernel, auto make_out, auto&&... inputs) { check_assembled(kernel, make_out, inputs...); };
  check(spgemm, [] { return sp::Csr<float>(61, 53); }, a, b);
  check(maxplus, [] { return sp::Csr<float>(61, 53); }, a, b);
  check(scaled, [] { return sp::Csr<float>(61, 47); }, a);
  check(paths, [] { return sp::Csr<std::int64_t>(61, 53); }, ai, bi);
  const auto ad = random_csr<double>(shape, 7), bd = random_csr<double>(Shape{"b", 47, 53, 3, 0.3}, 8);
  check(paths64, [] { return sp::Csr<double, std::int64_t>(61, 53); }, ad, bd);  // 64-bit output indices
  check(spgemm, [] { return sp::Csr<float>(61, 53); }, a, empty_b);
  sp::Csr<float> c(61, 53);
  spgemm(a, empty_b, c);
  CHECK(c.nnz() == 0);
  CHECK(spgemm.explain().find("# assembled output 'C'") != std::string::npos);
}

TEST_CASE("the CUDA build of SpGEMM and sparse add assembles the exact pattern (NVRTC to cubin, emulated without a GPU)",
          "[correctness][assembly][cuda]") {
  spindle::test::NvrtcCheck nvrtc;
  spindle::test::EmulatorCache cache;
  auto spgemm = sp::ops::spgemm<float>();
  auto add = sp::ops::sparse_add<float>();
  INFO("CUDA engine: " << spindle::test::cuda_engine_name());
  for (const Shape& s : matrix_shapes()) {
    const std::int64_t n = s.rows / 2 + 3;
    auto a = random_csr<float>(s, 11);
    auto b = random_csr<float>(Shape{"b", s.cols, n, s.avg_nnz_per_row, 0.3}, 23);
    auto a2 = random_csr<float>(s, 31);
    // A budget of a few columns' scratch makes several rows share a GPU worker; a large one
    // gives each row its own.
    for (std::int64_t budget : {std::int64_t{20} * 3 * std::max<std::int64_t>(1, n), std::int64_t{1} << 24}) {
      INFO(s << " scratch budget " << budget);
      sp::Csr<float> c(a.rows(), b.cols(), "c");
      run_cuda_assembled(spgemm, c, nvrtc, cache, budget, a, b);
      CHECK(c.name() == "c");
      check_same(entries(c), product_reference(a, b), 1e-4);
      sp::Csr<float> d(a.rows(), a.cols());
      run_cuda_assembled(add, d, nvrtc, cache, budget, a, a2, 1.5f, -0.5f);
      check_same(entries(d), add_reference(a, a2, 1.5, -0.5), 1e-4);
    }
  }
  if (nvrtc.available && !spindle::test::gpu_runs()) CHECK(nvrtc.compiled >= 3);  // both phases of each kernel, the sort
  // As a user calls it on the GPU: device inputs and a DeviceCsr output (needs a GPU).
  if (spindle::test::gpu_runs()) {
    auto a = random_csr<float>(Shape{"a", 300, 200, 6, 0.3}, 41);
    auto b = random_csr<float>(Shape{"b", 200, 250, 5, 0.3}, 42);
    auto da = sp::DeviceCsr<float>::from_host(a);
    auto db = sp::DeviceCsr<float>::from_host(b);
    sp::DeviceCsr<float> dc(300, 250, "c");
    spgemm(da, db, dc);
    check_same(entries(dc.to_host()), product_reference(a, b), 1e-4);
    sp::DeviceCsr<float> wrong(301, 250);
    CHECK_THROWS_AS(spgemm(da, db, wrong), sp::ShapeError);
    CHECK(wrong.nnz() == 0);
  } else {
    WARN("no GPU: the DeviceCsr call of an assembling kernel is compiled, not run");
  }
  // Lowering for the GPU needs no GPU.
  CHECK(spgemm.compile_assembled_cuda().explain().find("on the GPU") != std::string::npos);
  CHECK(spgemm.compile_assembled_cuda().numeric().explain().find("spindle_blocks") != std::string::npos);
}

TEST_CASE("the CUDA build of SpGEMM on cora (rows of hundreds of entries: the heap sort) equals the reference",
          "[correctness][assembly][cuda][graphs]") {
  spindle::test::NvrtcCheck nvrtc;
  spindle::test::EmulatorCache cache;
  // Rows longer than 32 entries take the heap sort: cora's A A has rows of hundreds.
  if (auto g = load_graph<float>("gnn/cora.mtx.gz")) {
    sp::Csr<float> c(g->rows(), g->cols());
    run_cuda_assembled(sp::ops::spgemm<float>(), c, nvrtc, cache, std::int64_t{1} << 22, *g, *g);
    std::int64_t longest = 0;
    for (std::int64_t r = 0; r < c.rows(); ++r)
      longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(c.row_indices(r).size()));
    CHECK(longest > 32);
    check_same(entries(c), product_reference(*g, *g), 1e-4);
  }
}

TEST_CASE("the GPU row sort orders every row by column and keeps each value with its column",
          "[correctness][assembly][cuda]") {
  // Rows of 0, 1, 2, 31, 32, 33 and 700 entries (insertion sort, heap sort), sorted, reversed,
  // shuffled, with the value of each entry derived from its column.
  spindle::test::NvrtcCheck nvrtc;
  spindle::test::EmulatorCache cache;
  std::mt19937_64 rng(7);
  std::vector<std::int64_t> lengths{0, 1, 2, 31, 32, 33, 700, 5, 64};
  std::vector<std::int64_t> row_ptr{0};
  std::vector<std::int32_t> idx;
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    std::vector<std::int32_t> cols(static_cast<std::size_t>(lengths[r]));
    for (std::size_t q = 0; q < cols.size(); ++q) cols[q] = static_cast<std::int32_t>(3 * q + r);
    if (r % 3 == 1) std::reverse(cols.begin(), cols.end());
    if (r % 3 == 2) std::shuffle(cols.begin(), cols.end(), rng);
    idx.insert(idx.end(), cols.begin(), cols.end());
    row_ptr.push_back(static_cast<std::int64_t>(idx.size()));
  }
  std::vector<double> val(idx.size());
  for (std::size_t q = 0; q < idx.size(); ++q) val[q] = 0.5 * idx[q] + 1;
  auto sort = sp::codegen::cuda_sort_rows(sp::DType::i32, sp::DType::f64);
  spindle::test::EmulatedAssemblyDevice dev(&nvrtc, &cache, 1 << 20);
  dev.sort_rows(sort, static_cast<std::int64_t>(lengths.size()), row_ptr.data(), idx.data(), val.data());
  for (std::size_t r = 0; r < lengths.size(); ++r)
    for (std::int64_t q = row_ptr[r]; q < row_ptr[r + 1]; ++q) {
      INFO("row " << r << " position " << q);
      if (q > row_ptr[r]) REQUIRE(idx[static_cast<std::size_t>(q) - 1] < idx[static_cast<std::size_t>(q)]);
      REQUIRE(val[static_cast<std::size_t>(q)] == 0.5 * idx[static_cast<std::size_t>(q)] + 1);
    }
  if (nvrtc.available) CHECK(nvrtc.compiled == 1);
}

TEST_CASE("a child of a root dense axis iterates the fiber at another iterator's coordinate (SpGEMM into a dense matrix)",
          "[correctness][assembly][language]") {
  // §3: for_each<K> under j iterates row j of b[dense<J>, K]; the dense product must equal A B.
  struct KD : sp::dense_fixed {};
  auto kernel = sp::kernel("spgemm_dense_out",
                           [](sp::in<double, I, J> a, sp::in<double, sp::dense<J>, K> b, sp::out<double, I, sp::dense<K>> c,
                              sp::iter<I> i, sp::iter<J> j) {
                             sp::for_each<K>([&](sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
                           });
  for (const Shape& s : matrix_shapes()) {
    auto a = random_csr<double>(s, 3);
    auto b = random_csr<double>(Shape{"b", s.cols, 17, 3, 0.2}, 4);
    auto want = product_reference(a, b);
    for (const auto& engine : spindle::test::cpu_engines())
      for (int threads : {1, 3}) {
        INFO(s << " engine " << engine << " threads " << threads);
        auto c = sp::Tensor<double>::zeros({a.rows(), b.cols()});
        kernel.with_runtime(spindle::test::engine_runtime(engine, threads))(a, b, c);
        for (std::int64_t r = 0; r < a.rows(); ++r)
          for (std::int64_t q = 0; q < b.cols(); ++q) {
            auto it = want.find({r, q});
            double expect = it == want.end() ? 0.0 : it->second;
            REQUIRE(std::fabs(c(r, q) - expect) <= 1e-12 * (1 + std::fabs(expect)));
          }
      }
  }
}

TEST_CASE("fibers by coordinate: the interpreter and the CUDA build (NVRTC, emulated without a GPU) agree on cora",
          "[correctness][assembly][language][cuda]") {
  spindle::test::NvrtcCheck nvrtc;
  auto kernel = sp::kernel("spgemm_dense_out_f32",
                           [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, sp::dense<K>> c,
                              sp::iter<I> i, sp::iter<J> j) {
                             sp::for_each<K>([&](sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
                           });
  auto a = load_graph<float>("gnn/cora.mtx.gz");
  if (!a) return;
  // B: the first 300 columns of A (so C = A B is 2708 x 300, dense enough to compare).
  std::vector<sp::Triplet<float>> t;
  for (std::int64_t r = 0; r < a->rows(); ++r)
    for (std::size_t q = 0; q < a->row_indices(r).size(); ++q)
      if (a->row_indices(r)[q] < 300) t.push_back({r, a->row_indices(r)[q], a->row_values(r)[q]});
  auto b = sp::Csr<float>::from_triplets(a->rows(), 300, t);
  auto want = product_reference(*a, b);
  auto run = [&](auto&& how) {
    auto c = sp::Tensor<float>::full({a->rows(), b.cols()}, 99.0f);
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(*a);
    args[1].view = sp::storage_of(b);
    args[2].view = sp::storage_of(c);
    how(args);
    return c;
  };
  auto check = [&](const sp::Tensor<float>& c, const char* what) {
    INFO(what);
    for (std::int64_t r = 0; r < c.dim(0); ++r)
      for (std::int64_t q = 0; q < c.dim(1); ++q) {
        auto it = want.find({r, q});
        double expect = it == want.end() ? 0.0 : it->second;
        REQUIRE(std::fabs(c(r, q) - expect) <= 1e-4 * (1 + std::fabs(expect)));
      }
  };
  check(run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); }), "interpreter");
  check(run([&](auto& args) { kernel.compile().call(args); }), "compiled");
  check(run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); }), "CUDA build");
}

TEST_CASE("fibers by coordinate: the fiber is the one the iterator was taken at (fuzz regressions)",
          "[correctness][assembly][language]") {
  // spindle-kernel-fuzz seeds 900002795, 900002807, 902002788, 902002805: a parent iterated
  // again further in, or listed after its child in the same iteration, must not move the
  // child's fiber (lowering, loop order) nor let a write pick another fiber (front end).
  struct R : sp::sparse_variable<sp::dense<I>> {};
  auto nested = sp::kernel("nested_view", [](sp::in<float, sp::dense<I>, R> b, sp::out<float, I> y, sp::iter<I> i,
                                             sp::iter<R> r) {
    sp::for_each<sp::dense<I>>([&](sp::iter<sp::dense<I>> d) { y(i) += b(d, r) * 2.0f + 1.0f; });
  });
  auto later = sp::kernel("parent_later", [](sp::in<float, sp::dense<I>, R> b, sp::out<float, I> y, sp::iter<I> i,
                                             sp::iter<R> r, sp::iter<sp::dense<I>> d) { y(i) += b(d, r) + 1.0f; });
  auto write_at_i = sp::kernel("write_at_i", [](sp::in<float, sp::dense<I>, R> b, sp::out<float, sp::dense<I>, R> f,
                                                sp::iter<I> i, sp::iter<R> r) { f(i, r) += b(i, r) * 3.0f; });
  CHECK_THROWS_WITH(sp::kernel("write_at_d", [](sp::out<float, sp::dense<I>, R> f, sp::iter<I> i, sp::iter<R> r,
                                                sp::iter<sp::dense<I>> d) { f(d, r) += 1.0f; }),
                    Catch::Contains("must use the iterator of R itself"));
  auto b = random_csr<float>(Shape{"b", 23, 19, 4, 0.2}, 9);
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO("engine " << engine << " threads " << threads);
      auto& rt = spindle::test::engine_runtime(engine, threads);
      auto against_interpreter = [&](const auto& k) {
        auto y = sp::Tensor<float>::full({23}, 5.0f), y_ref = y;
        k.with_runtime(rt)(b, y);
        std::vector<sp::runtime::CallArg> args(2);
        args[0].view = sp::storage_of(b);
        args[1].view = sp::storage_of(y_ref);
        spindle::test::Interpreter(k.ir(), args).run();
        for (std::int64_t q = 0; q < 23; ++q) REQUIRE(y(q) == y_ref(q));
      };
      against_interpreter(nested);
      against_interpreter(later);
      auto f = same_structure(b, 7.0f), f_ref = f;
      write_at_i.with_runtime(rt)(b, f);
      std::vector<sp::runtime::CallArg> args(2);
      args[0].view = sp::storage_of(b);
      args[1].view = sp::storage_of(f_ref);
      spindle::test::Interpreter(write_at_i.ir(), args).run();
      for (std::int64_t q = 0; q < f.nnz(); ++q) REQUIRE(f.values()[q] == f_ref.values()[q]);
    }
}

TEST_CASE("assembled outputs: definition errors name the rule, call errors leave the output untouched",
          "[correctness][assembly][errors]") {
  using Catch::Matchers::Contains;
  // Read of the assembled output.
  CHECK_THROWS_WITH(sp::kernel("reads", [](sp::in<float, I, J> a, sp::out<float, I, CJ> c, sp::iter<I> i,
                                           sp::iter<J> j) { c(i, j) += a(i, j) * c(i, j); }),
                    Contains("its pattern is assembled by this kernel"));
  // Rows scattered (not the first iterator of the top-level iteration) with two operators.
  CHECK_THROWS_WITH(sp::kernel("rows", [](sp::in<float, I, J> a, sp::out<float, I, CJ> c, sp::iter<F> f, sp::iter<I> i,
                                          sp::iter<J> j) {
                      c(i, j) += a(i, j);
                      c(i, j).max_with(a(i, j));
                    }),
                    Contains("whose rows are scattered") && Contains("all of them use one operator"));
  // (A column index over other coordinates is a compile-time error, as for any slot.)
  // Written in two top-level iterations.
  CHECK_THROWS_WITH(sp::kernel("twice", [](sp::in<float, I, J> a, sp::out<float, I, CJ> c) {
                      sp::for_each<I, J>([&](sp::iter<I> i, sp::iter<J> j) { c(i, j) += a(i, j); });
                      sp::for_each<I, J>([&](sp::iter<I> i, sp::iter<J> j) { c(i, j) += a(i, j); });
                    }),
                    Contains("already written in another top-level iteration"));
  // Another written buffer in the same kernel.
  CHECK_THROWS_WITH(sp::kernel("other", [](sp::in<float, I, J> a, sp::out<float, I, CJ> c, sp::out<float, I> y,
                                           sp::iter<I> i, sp::iter<J> j) {
                      c(i, j) += a(i, j);
                      y(i) += a(i, j);
                    }),
                    Contains("runs its body twice"));
  // An assembled axis in an `in` buffer.
  CHECK_THROWS_WITH(sp::kernel("input", [](sp::in<float, I, CJ> a, sp::out<float, I> y, sp::iter<I> i) { y(i) += 1.0f; }),
                    Contains("only an `out` buffer may have one"));

  // Call time: an output whose shape differs from the inputs' extents, untouched by the error.
  auto a = random_csr<float>(Shape{"a", 20, 30, 3}, 1);
  auto b = random_csr<float>(Shape{"b", 30, 25, 3}, 2);
  auto spgemm = sp::ops::spgemm<float>();
  sp::Csr<float> wrong = random_csr<float>(Shape{"w", 20, 26, 2}, 3);
  const auto before = entries(wrong);
  CHECK_THROWS_AS(spgemm(a, b, wrong), sp::ShapeError);
  CHECK_THROWS_WITH(spgemm(a, b, wrong), Contains("the assembled output 'C' was passed as 20 x 26"));
  CHECK(entries(wrong) == before);
  sp::Csr<float> rows_wrong(21, 25);
  CHECK_THROWS_AS(spgemm(a, b, rows_wrong), sp::ShapeError);
  CHECK(rows_wrong.nnz() == 0);
  sp::Dcsr<float> dcsr_wrong = sp::Dcsr<float>::from_csr(wrong);
  CHECK_THROWS_AS(spgemm(a, b, dcsr_wrong), sp::ShapeError);
  CHECK(entries(dcsr_wrong.to_csr()) == before);
  // Inner dimensions that differ are the inputs' error, found before anything is written.
  auto b_bad = random_csr<float>(Shape{"b", 31, 25, 3}, 2);
  sp::Csr<float> c(20, 25);
  CHECK_THROWS_AS(spgemm(a, b_bad, c), sp::ShapeError);
  // 2^31 rows or more: the 32-bit column markers cannot hold the row numbers (a view that only
  // claims the size: the check comes before anything is read).
  {
    std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(a), sp::detail::make_call_arg(b),
                                           sp::detail::make_call_arg(c)};
    args[2].view.levels[0].length = std::int64_t{1} << 31;
    spindle::test::RecordingTarget unused;
    CHECK_THROWS_WITH(spgemm.compile_assembled().call(args, unused), Contains("at most 2^31 - 1 are supported"));
    CHECK_FALSE(unused.allocated);
  }
  // An assembled kernel has no single-kernel or CUDA build.
  CHECK_THROWS_WITH(spgemm.compile(), Contains("is an assembled output"));
  CHECK_THROWS_WITH(spgemm.compile_cuda(), Contains("is an assembled output"));
}

namespace {

auto union_add_kernel() {
  using U = sp::union_of<J, J2>;
  return sp::kernel("union_add", sp::names{"A", "B", "C"},
                    [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, CJ> c, sp::iter<I> i,
                       sp::iter<U> j) { c(i, j) = a(i, j) * 2.0f - b(i, j); });  // one rounding, FMA or not
}
auto inter_mul_kernel() {
  using X = sp::intersection_of<J2, J>;
  return sp::kernel("inter_mul", sp::names{"A", "B", "C"},
                    [](sp::in<double, I, J> a, sp::in<double, I, J2> b, sp::out<double, I, CJ> c, sp::iter<I> i) {
                      sp::for_each<X>([&](sp::iter<X> j) { c(i, j) += a(i, j) * b(i, j); });
                    });
}

// A matrix over a's pattern, row by row (r % 5): a's row; a's row less its last entry; a's
// row and one more column after its last; a's row less its first entry; b's row. Values
// drawn in [-1, 1]. The operands of a merge then share whole rows, prefixes, nothing.
template <class T>
sp::Csr<T> sharing_pattern(const sp::Csr<T>& a, const sp::Csr<T>& b, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<std::int32_t> indptr{0}, indices;
  std::vector<T> values;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    auto ai = a.row_indices(r);
    std::vector<std::int32_t> row(ai.begin(), ai.end());
    switch (r % 5) {
      case 1: if (!row.empty()) row.pop_back(); break;
      case 2: if (row.empty() ? a.cols() > 0 : row.back() + 1 < a.cols()) row.push_back(row.empty() ? 0 : row.back() + 1); break;
      case 3: if (!row.empty()) row.erase(row.begin()); break;
      case 4: row.assign(b.row_indices(r).begin(), b.row_indices(r).end()); break;
      default: break;
    }
    for (auto c : row) indices.push_back(c), values.push_back(static_cast<T>(u(rng)));
    indptr.push_back(static_cast<std::int32_t>(indices.size()));
  }
  return sp::Csr<T>(a.rows(), a.cols(), std::move(indptr), std::move(indices), std::move(values));
}

}  // namespace

namespace {

// The union kernel's sum of (a, b) and the intersection kernel's product of (ad, bd) on every
// CPU engine with 1 and 3 threads against the plain references (and `more(rt)` there), then
// both through the CUDA build.
template <class Add, class Mul, class More>
void check_union_and_intersection(const Add& add, const Mul& mul, const Shape& s, const sp::Csr<float>& a,
                                  const sp::Csr<float>& b, const sp::Csr<double>& ad, const sp::Csr<double>& bd,
                                  More more) {
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO("engine " << engine << " threads " << threads);
      auto& rt = spindle::test::engine_runtime(engine, threads);
      sp::Csr<float> c(s.rows, s.cols);
      add.with_runtime(rt)(a, b, c);
      check_same(entries(c), add_reference(a, b, 2, -1), tolerance<float>());
      sp::Csr<double> d(s.rows, s.cols);
      mul.with_runtime(rt)(ad, bd, d);
      check_same(entries(d), multiply_reference(ad, bd), tolerance<double>());
      more(rt);
    }
  check_assembled(add, [&] { return sp::Csr<float>(s.rows, s.cols); }, a, b);
  check_assembled(mul, [&] { return sp::Csr<double>(s.rows, s.cols); }, ad, bd);
}

}  // namespace

TEST_CASE("co-iteration into assembled outputs: the sparse add on the union and the element-wise product on the "
          "intersection have exactly those patterns, on every shape, engine, thread count and the CUDA build",
          "[correctness][assembly][coiteration]") {
  auto add = union_add_kernel();
  auto mul = inter_mul_kernel();
  for (const Shape& s : matrix_shapes()) {
    INFO(s);
    const auto a = random_csr<float>(s, 41), b = random_csr<float>(s, 42);
    const auto ad = random_csr<double>(s, 43), bd = random_csr<double>(s, 44);
    check_union_and_intersection(add, mul, s, a, b, ad, bd, [](auto&) {});
  }
}

TEST_CASE("co-iteration over operands that share rows, prefixes of rows or nothing (the common-prefix loop, then "
          "the merge) gives the union's and the intersection's patterns, on every engine and the CUDA build",
          "[correctness][assembly][coiteration]") {
  auto add = union_add_kernel();
  auto mul = inter_mul_kernel();
  for (const Shape& s : matrix_shapes()) {
    INFO(s);
    const auto a = random_csr<float>(s, 51), other = random_csr<float>(s, 52);
    const auto b = sharing_pattern(a, other, 53);
    const auto ad = random_csr<double>(s, 54), otherd = random_csr<double>(s, 55);
    const auto bd = sharing_pattern(ad, otherd, 56);
    check_union_and_intersection(add, mul, s, a, b, ad, bd, [&](auto& rt) {
      sp::Csr<float> c(s.rows, s.cols);
      add.with_runtime(rt)(a, a, c);  // one pattern: every row is the common prefix
      check_same(entries(c), add_reference(a, a, 2, -1), tolerance<float>());
      sp::Csr<double> e(s.rows, s.cols);
      sp::ops::sparse_add<double>().with_runtime(rt)(ad, bd, 1.5, -0.5, e);
      check_same(entries(e), add_reference(ad, bd, 1.5, -0.5), tolerance<double>());
      sp::ops::sparse_multiply<double>().with_runtime(rt)(bd, ad, e);
      check_same(entries(e), multiply_reference(bd, ad), tolerance<double>());
    });
  }
}

TEST_CASE("bounded rows: a merge's rows are counted by the fibers' lengths, then appended block after block and "
          "moved together: rows that keep fewer entries than their bound give the exact pattern on every engine, "
          "thread count and target",
          "[correctness][assembly][coiteration]") {
  using U = sp::union_of<J, J2>;
  // A union whose write is conditional: most rows keep fewer entries than their bound.
  auto kept = sp::kernel("kept_difference", sp::names{"A", "B", "C"},
                         [](sp::in<float, I, J> a, sp::in<float, I, J2> b, sp::out<float, I, CJ> c, sp::iter<I> i,
                            sp::iter<U> j) {
                           sp::when(a(i, j) - b(i, j) > 0.25f, [&] { c(i, j) = a(i, j) - b(i, j); });
                         });
  auto mul = inter_mul_kernel();
  CHECK_THAT(kept.explain(), Catch::Contains("an upper bound of each row's entries") &&
                                 Catch::Contains("spindle_merge_bound") && Catch::Contains("spindle_cursor"));
  CHECK_THAT(mul.explain(), Catch::Contains("the least for an intersection"));
  for (const Shape& s : matrix_shapes()) {
    INFO(s);
    const auto a = random_csr<float>(s, 61), other = random_csr<float>(s, 62);
    const auto b = sharing_pattern(a, other, 63);
    std::map<std::pair<std::int64_t, std::int64_t>, double> want;  // in float, as the kernel
    const auto ea = entries(a), eb = entries(b);
    for (const auto& [at, v] : add_reference(a, b, 1, -1)) {
      const float d = static_cast<float>(ea.count(at) ? ea.at(at) : 0) - static_cast<float>(eb.count(at) ? eb.at(at) : 0);
      if (d > 0.25f) want[at] = d;
    }
    for (const auto& engine : spindle::test::cpu_engines())
      for (int threads : {1, 2, 3}) {
        INFO("engine " << engine << " threads " << threads);
        auto& rt = spindle::test::engine_runtime(engine, threads);
        sp::Csr<float> c(s.rows, s.cols);
        kept.with_runtime(rt)(a, b, c);
        check_same(entries(c), want, 1e-6);
        sp::Dcsr<float> d(s.rows, s.cols);
        kept.with_runtime(rt)(a, b, d);
        check_same(entries(d.to_csr()), want, 1e-6);
        // A target that cannot shrink in place: allocated anew at the exact size and filled.
        sp::Csr<float> e(s.rows, s.cols);
        std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(a), sp::detail::make_call_arg(b),
                                               sp::detail::make_call_arg(e)};
        HostCsrTarget<float, std::int32_t> target(e);
        kept.with_runtime(rt).compile_assembled().call(args, target);
        check_same(entries(e), want, 1e-6);
        // The intersection of rows that share prefixes: at most the shorter row each.
        const auto bd = sharing_pattern(random_csr<double>(s, 64), random_csr<double>(s, 65), 66);
        const auto ad = random_csr<double>(s, 67);
        sp::Csr<double> m(s.rows, s.cols);
        mul.with_runtime(rt)(ad, bd, m);
        check_same(entries(m), multiply_reference(ad, bd), tolerance<double>());
      }
    check_assembled(kept, [&] { return sp::Csr<float>(s.rows, s.cols); }, a, b);
  }
}

// --- Scattered rows (docs/language.md §4.6): the output written at a row other than the first
// iterator of the top-level iteration — conversions and scatters as kernels.

namespace {

struct E : sp::dense_fixed {};                        // the entries of a COO matrix
struct N : sp::dense_fixed {};                        // its columns
struct CN : sp::assembled<I, N> {};                   // COO -> CSR: rows I, columns N
struct CT : sp::assembled<sp::dense<J>, I> {};        // the transpose: rows over J's coordinates
struct V : sp::sparse_root<> {};                      // sparse vectors
struct W : sp::sparse_root<> {};
struct CO : sp::assembled<sp::dense<V>, W> {};        // their outer product
struct H : sp::dense_fixed {};                        // pooled rows
struct CH : sp::assembled<H, J> {};

auto transpose_kernel() {
  return sp::kernel("csr_to_csc", sp::names{"A", "C"},
                    [](sp::in<double, I, J> a, sp::out<double, sp::dense<J>, CT> c, sp::iter<I> i, sp::iter<J> j) {
                      c(j, i) = a(i, j);
                    });
}
auto coo_kernel() {
  return sp::kernel("coo_to_csr", sp::names{"row", "col", "val", "C"},
                    [](sp::in<std::int32_t, E> r, sp::in<std::int64_t, E> cl, sp::in<double, E> v,
                       sp::out<double, I, CN> c, sp::iter<E> e) { c(r(e), cl(e)) += v(e); });
}

// Random triplets of a rows x cols matrix, about a third of them repeating an earlier
// coordinate, in random order.
struct Triplets {
  sp::Tensor<std::int32_t> row;
  sp::Tensor<std::int64_t> col;
  sp::Tensor<double> val;
  std::map<std::pair<std::int64_t, std::int64_t>, double> sum, max;
};
Triplets random_triplets(std::int64_t rows, std::int64_t cols, std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> r;
  std::vector<std::int64_t> c;
  std::vector<double> v;
  Triplets t;
  if (rows == 0 || cols == 0) n = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    if (q > 0 && rng() % 3 == 0) {
      const std::size_t k = rng() % r.size();
      r.push_back(r[k]), c.push_back(c[k]);
    } else {
      r.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(rows)));
      c.push_back(static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(cols)));
    }
    v.push_back(static_cast<double>(static_cast<int>(rng() % 17)) - 8.0);
    const std::pair<std::int64_t, std::int64_t> rc{r.back(), c.back()};
    t.sum[rc] += v.back();
    auto [it, fresh] = t.max.try_emplace(rc, v.back());
    if (!fresh) it->second = std::max(it->second, v.back());
  }
  t.row = sp::Tensor<std::int32_t>::from(r, {n});
  t.col = sp::Tensor<std::int64_t>::from(c, {n});
  t.val = sp::Tensor<double>::from(v, {n});
  return t;
}

}  // namespace

TEST_CASE("scattered rows: CSR -> CSC and COO -> CSR (duplicates summed or maxed) as kernels assemble exactly what the "
          "host conversions give, on every shape, engine and thread count",
          "[correctness][assembly][scattered]") {
  auto transpose = transpose_kernel();
  auto coo = coo_kernel();
  auto coo_max = sp::kernel("coo_to_csr_max", sp::names{"row", "col", "val", "C"},
                            [](sp::in<std::int32_t, E> r, sp::in<std::int64_t, E> cl, sp::in<double, E> v,
                               sp::out<double, I, CN> c, sp::iter<E> e) { c(r(e), cl(e)).max_with(v(e)); });
  CHECK(transpose.explain().find("written at scattered rows") != std::string::npos);
  for (const Shape& s : matrix_shapes()) {
    auto a = random_csr<double>(s, 41);
    const auto want = sp::transpose(a).matrix;
    auto t = random_triplets(s.rows, s.cols, s.rows * 3 + 5, 43);
    for (const auto& engine : spindle::test::cpu_engines())
      for (int threads : {1, 3}) {
        INFO(s << " engine " << engine << " threads " << threads);
        auto& rt = spindle::test::engine_runtime(engine, threads);
        sp::Csr<double> c = random_csr<double>(Shape{"old", s.cols, s.rows, 2}, 3);  // replaced
        transpose.with_runtime(rt)(a, c);
        REQUIRE(c.rows() == a.cols());
        REQUIRE(c.cols() == a.rows());
        CHECK(std::equal(c.indptr().begin(), c.indptr().end(), want.indptr().begin(), want.indptr().end()));
        CHECK(std::equal(c.indices().begin(), c.indices().end(), want.indices().begin(), want.indices().end()));
        CHECK(std::equal(c.values().begin(), c.values().end(), want.values().begin(), want.values().end()));
        sp::Csr<double> d(s.rows, s.cols);
        coo.with_runtime(rt)(t.row, t.col, t.val, d);
        check_same(entries(d), t.sum, 0);
        {  // A target that cannot shrink in place: the folded entries copied into new arrays.
          sp::Csr<double> e(s.rows, s.cols);
          std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(t.row), sp::detail::make_call_arg(t.col),
                                                 sp::detail::make_call_arg(t.val), sp::detail::make_call_arg(e)};
          HostCsrTarget<double, std::int32_t> target(e);
          coo.with_runtime(rt).compile_assembled().call(args, target);
          check_same(entries(e), t.sum, 0);
        }
        sp::Dcsr<double> dd(s.rows, s.cols);  // only the rows that get entries stored
        coo.with_runtime(rt)(t.row, t.col, t.val, dd);
        check_same(entries(dd.to_csr()), t.sum, 0);
        coo_max.with_runtime(rt)(t.row, t.col, t.val, d);
        check_same(entries(d), t.max, 0);
        // The library's conversions (ops.hpp), with 64-bit indices too.
        sp::Csr<double> at(s.cols, s.rows);
        sp::ops::csr_to_csc<double>().with_runtime(rt)(a, at);
        CHECK(std::equal(at.indices().begin(), at.indices().end(), want.indices().begin(), want.indices().end()));
        CHECK(std::equal(at.values().begin(), at.values().end(), want.values().begin(), want.values().end()));
        sp::Csr<double, std::int64_t> at64(s.cols, s.rows);
        sp::ops::csr_to_csc<double, std::int64_t>().with_runtime(rt)(with_index<std::int64_t>(a), at64);
        CHECK(std::equal(at64.indptr().begin(), at64.indptr().end(), want.indptr().begin(), want.indptr().end()));
        CHECK(std::equal(at64.indices().begin(), at64.indices().end(), want.indices().begin(), want.indices().end()));
        sp::Csr<double, std::int64_t> d64(s.rows, s.cols);
        sp::ops::coo_to_csr<double, std::int64_t>().with_runtime(rt)(
            sp::Tensor<std::int64_t>::from({t.row.data(), t.row.data() + t.row.size()}, {t.row.size()}), t.col, t.val, d64);
        check_same(entries(d64), t.sum, 0);
      }
  }
}

TEST_CASE("scattered rows: a transpose of rows that are not sorted, duplicate columns included, is still sorted and "
          "combined (segments are taken as ascending only when every input fiber is sorted)",
          "[correctness][assembly][scattered]") {
  auto transpose = transpose_kernel();
  auto sum_transpose = sp::kernel("csr_to_csc_sum", sp::names{"A", "C"},
                                  [](sp::in<double, I, J> a, sp::out<double, sp::dense<J>, CT> c, sp::iter<I> i,
                                     sp::iter<J> j) { c(j, i) += a(i, j); });
  REQUIRE(transpose.explain().find("segments ascending by construction") != std::string::npos);
  // Row 0 holds column 3 twice: `=` keeps the later write, `+=` sums them.
  sp::Csr<double> dup(3, 4, {0, 3, 3, 6}, {3, 0, 3, 1, 3, 0}, {1, 2, 3, 4, 5, 6});
  REQUIRE_FALSE(dup.sorted());
  using Entries = std::map<std::pair<std::int64_t, std::int64_t>, double>;
  auto rows_ascend = [](const sp::Csr<double>& m) {  // the stored order, which entries() does not see
    for (std::int64_t r = 0; r < m.rows(); ++r)
      for (auto q = m.indptr()[r] + 1; q < m.indptr()[r + 1]; ++q)
        if (m.indices()[q - 1] >= m.indices()[q]) return false;
    return true;
  };
  const Entries last{{{0, 0}, 2}, {{0, 2}, 6}, {{1, 2}, 4}, {{3, 0}, 3}, {{3, 2}, 5}};
  const Entries sum{{{0, 0}, 2}, {{0, 2}, 6}, {{1, 2}, 4}, {{3, 0}, 4}, {{3, 2}, 5}};
  // Rows of a random matrix shuffled (distinct columns, not sorted): the host transpose of
  // the sorted matrix.
  auto a = random_csr<double>(Shape{"shuffled", 57, 43, 9}, 71);
  std::vector<std::int32_t> idx(a.indices().begin(), a.indices().end());
  std::vector<double> val(a.values().begin(), a.values().end());
  std::mt19937_64 rng(5);
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const auto lo = static_cast<std::size_t>(a.indptr()[r]), hi = static_cast<std::size_t>(a.indptr()[r + 1]);
    for (std::size_t q = hi; q > lo + 1; --q) {
      const std::size_t k = lo + rng() % (q - lo);
      std::swap(idx[q - 1], idx[k]);
      std::swap(val[q - 1], val[k]);
    }
  }
  sp::Csr<double> shuffled(a.rows(), a.cols(), {a.indptr().begin(), a.indptr().end()}, idx, val);
  REQUIRE_FALSE(shuffled.sorted());
  const auto want = sp::transpose(a).matrix;
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO("engine " << engine << " threads " << threads);
      auto& rt = spindle::test::engine_runtime(engine, threads);
      sp::Csr<double> c(4, 3);
      transpose.with_runtime(rt)(dup, c);
      CHECK(rows_ascend(c));
      check_same(entries(c), last, 0);
      sp::Csr<double> d(4, 3);
      sum_transpose.with_runtime(rt)(dup, d);
      CHECK(rows_ascend(d));
      check_same(entries(d), sum, 0);
      sp::Csr<double> t(a.cols(), a.rows());
      transpose.with_runtime(rt)(shuffled, t);
      CHECK(std::equal(t.indptr().begin(), t.indptr().end(), want.indptr().begin(), want.indptr().end()));
      CHECK(std::equal(t.indices().begin(), t.indices().end(), want.indices().begin(), want.indices().end()));
      CHECK(std::equal(t.values().begin(), t.values().end(), want.values().begin(), want.values().end()));
    }
}

TEST_CASE("scattered rows: the outer product of sparse vectors, pooled rows (a computed row), a transpose of real "
          "graphs, the interpreter agrees on every engine, the CUDA build refuses them",
          "[correctness][assembly][scattered]") {
  auto outer = sp::kernel("outer", sp::names{"x", "y", "C"},
                          [](sp::in<float, V> x, sp::in<float, W> y, sp::out<float, sp::dense<V>, CO> c, sp::iter<V> i,
                             sp::iter<W> j) { c(i, j) = x(i) * y(j); });
  auto pool = sp::kernel("pool_rows", sp::names{"A", "C"},
                         [](sp::in<float, I, J> a, sp::out<float, H, CH> c, sp::iter<I> i, sp::iter<J> j) {
                           c(i / 3, j) += a(i, j);
                         });
  // The rows first but written at a column's coordinate in a nested loop: c(j, i) of a
  // symmetric pattern, with a product into an int64 output.
  auto counts = sp::kernel("counts", sp::names{"A", "C"},
                           [](sp::in<std::int64_t, I, J> a, sp::out<std::int64_t, sp::dense<J>, CT> c, sp::iter<I> i) {
                             sp::for_each<J>([&](sp::iter<J> j) { c(j, i) *= a(i, j) + 2; });
                           });
  std::mt19937_64 rng(5);
  for (std::int64_t n : {0, 1, 17, 300}) {
    std::vector<std::pair<std::int32_t, float>> ex, ey;
    for (std::int64_t q = 0; q < n / 3 + (n > 0); ++q) ex.push_back({static_cast<std::int32_t>(rng() % n), float(rng() % 7) - 3});
    for (std::int64_t q = 0; q < n / 2 + (n > 0); ++q) ey.push_back({static_cast<std::int32_t>(rng() % n), float(rng() % 5) - 2});
    auto x = sp::SparseVector<float>::from_entries(n, ex), y = sp::SparseVector<float>::from_entries(n + 2, ey);
    std::map<std::pair<std::int64_t, std::int64_t>, double> want;
    for (std::int64_t p = 0; p < x.nnz(); ++p)
      for (std::int64_t q = 0; q < y.nnz(); ++q)
        want[{x.indices()[p], y.indices()[q]}] = double(x.values()[p]) * double(y.values()[q]);
    sp::Csr<float> c(n, n + 2);
    outer(x, y, c);
    check_same(entries(c), want, 0);
    check_assembled_on(false, outer, [n] { return sp::Csr<float>(n, n + 2); }, x, y);
  }
  const Shape shape{"irregular", 61, 47, 4, 0.2};
  auto a = random_csr<float>(shape, 9);
  check_assembled_on(false, pool, [] { return sp::Csr<float>(21, 47); }, a);
  auto ai = sp::Csr<std::int64_t>::pattern(a.rows(), a.cols(), {a.indptr().begin(), a.indptr().end()},
                                           {a.indices().begin(), a.indices().end()});
  check_assembled_on(false, counts, [] { return sp::Csr<std::int64_t>(47, 61); }, ai);
  check_assembled_on(false, transpose_kernel(), [] { return sp::Csr<double>(47, 61); }, random_csr<double>(shape, 10));
  auto t = random_triplets(61, 47, 400, 11);
  check_assembled_on(false, coo_kernel(), [] { return sp::Csr<double>(61, 47); }, t.row, t.col, t.val);
  // Pooled rows into too few output rows: the computed row's bound, before anything is written.
  sp::Csr<float> few = random_csr<float>(Shape{"few", 20, 47, 2}, 4);
  const auto before = entries(few);
  CHECK_THROWS_AS(pool(a, few), sp::ShapeError);
  CHECK(entries(few) == before);
  // A COO row outside the output: a FormatError naming the value and the output, nothing written.
  auto bad = random_triplets(61, 47, 50, 12);
  bad.row.data()[7] = 61;
  sp::Csr<double> d = random_csr<double>(Shape{"d", 61, 47, 2}, 5);
  const auto d_before = entries(d);
  CHECK_THROWS_AS(coo_kernel()(bad.row, bad.col, bad.val, d), sp::FormatError);
  CHECK_THROWS_WITH(coo_kernel()(bad.row, bad.col, bad.val, d), Catch::Contains("value 61 at position 7") &&
                                                                    Catch::Contains("buffer 'C'"));
  CHECK(entries(d) == d_before);
  // Real graphs: the transpose kernel equals the host transpose.
  for (const std::string& file : {std::string("gnn/cora.mtx.gz"), std::string("gnn/citeseer.mtx.gz")}) {
    auto loaded = load_graph<double>(file);
    if (!loaded) {
      WARN("skipping " << file << ": not in the shared data");
      continue;
    }
    const auto want = sp::transpose(*loaded).matrix;
    for (int threads : {1, 2}) {
      sp::Csr<double> c(loaded->cols(), loaded->rows());
      transpose_kernel().with_runtime(spindle::test::engine_runtime(spindle::test::cpu_engines().front(), threads))(*loaded, c);
      CHECK(std::equal(c.indptr().begin(), c.indptr().end(), want.indptr().begin(), want.indptr().end()));
      CHECK(std::equal(c.indices().begin(), c.indices().end(), want.indices().begin(), want.indices().end()));
      CHECK(std::equal(c.values().begin(), c.values().end(), want.values().begin(), want.values().end()));
    }
  }
}

TEST_CASE("scattered rows: segments that come in column order are kept as collected (values folded from the "
          "identity), one descent anywhere in any row sends every row through the sort, on every engine",
          "[correctness][assembly][scattered]") {
  // COO entries in row-major order without duplicates give segments that ascend: the host's
  // flat check (segments_ascending) keeps them. A single pair swapped inside one row, a
  // repeated column, or rows of one or no entries around the swap must still be sorted and
  // folded: the check counts descents at segment starts separately and takes them off.
  std::mt19937_64 rng(77);
  for (const Shape& s : matrix_shapes()) {
    auto a = random_csr<double>(s, 61);
    std::vector<std::int32_t> r;
    std::vector<std::int64_t> c;
    std::vector<double> v;
    for (std::int64_t i = 0; i < a.rows(); ++i)
      for (std::int64_t q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
        r.push_back(static_cast<std::int32_t>(i)), c.push_back(a.indices()[q]),
            v.push_back(q % 5 == 0 ? -0.0 : static_cast<double>(static_cast<int>(rng() % 9)) - 4.0);
    for (int variant = 0; variant < 3; ++variant) {
      auto rv = r;
      auto cv = c;
      auto vv = v;
      if (variant == 1) {  // one pair inside a row of two or more swapped
        for (std::size_t q = 1; q < rv.size(); ++q)
          if (rv[q] == rv[q - 1] && rng() % 2 == 0) {
            std::swap(cv[q], cv[q - 1]);
            break;
          }
      } else if (variant == 2 && !rv.empty()) {  // a repeated column at the end of a row
        const std::size_t q = rng() % rv.size();
        rv.insert(rv.begin() + static_cast<std::ptrdiff_t>(q) + 1, rv[q]);
        cv.insert(cv.begin() + static_cast<std::ptrdiff_t>(q) + 1, cv[q]);
        vv.insert(vv.begin() + static_cast<std::ptrdiff_t>(q) + 1, 2.5);
      }
      const auto n = static_cast<std::int64_t>(rv.size());
      auto row = sp::Tensor<std::int32_t>::from(rv, {n});
      auto col = sp::Tensor<std::int64_t>::from(cv, {n});
      auto val = sp::Tensor<double>::from(vv, {n});
      std::map<std::pair<std::int64_t, std::int64_t>, double> want;
      for (std::int64_t q = 0; q < n; ++q) want[{rv[static_cast<std::size_t>(q)], cv[static_cast<std::size_t>(q)]}] += vv[static_cast<std::size_t>(q)];
      for (const auto& engine : spindle::test::cpu_engines())
        for (int threads : {1, 3}) {
          INFO(s << " variant " << variant << " engine " << engine << " threads " << threads);
          sp::Csr<double> d(s.rows, s.cols);
          coo_kernel().with_runtime(spindle::test::engine_runtime(engine, threads))(row, col, val, d);
          check_same(entries(d), want, 0);
          for (std::int64_t i = 0; i < d.rows(); ++i)  // sorted, no repeated column
            for (std::int64_t q = d.indptr()[i] + 1; q < d.indptr()[i + 1]; ++q) CHECK(d.indices()[q - 1] < d.indices()[q]);
          for (double x : d.values())
            if (x == 0) CHECK(!std::signbit(x));  // -0.0 folded from the identity 0 is +0.0
        }
      check_assembled_on(false, coo_kernel(), [&s] { return sp::Csr<double>(s.rows, s.cols); }, row, col, val);
    }
  }
}

// --- conditional writes into assembled outputs (spindle::when, docs/language.md §4.7) --------

TEST_CASE("conditional writes: dense -> CSR drops zeros, pruning by magnitude, a transpose of the positive entries "
          "assemble exactly what passes the test, on every shape, engine and thread count, the interpreter and the "
          "CUDA build agree",
          "[correctness][assembly][when]") {
  auto dense_to_csr = sp::ops::dense_to_csr<float>();
  auto prune = sp::ops::prune<float>();
  auto positive_transpose = sp::kernel("positive_transpose", sp::names{"A", "C"},
                                       [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>, CT> c, sp::iter<I> i,
                                          sp::iter<J> j) { sp::when(a(i, j) > 0, [&] { c(j, i) = a(i, j); }); });
  std::vector<Shape> shapes = matrix_shapes();
  shapes.push_back(Shape{"large", 3001, 2999, 7, 0.1});
  for (const Shape& s : shapes) {
    INFO(s);
    auto a = random_csr<float>(s, 61);
    for (std::size_t q = 0; q < a.values().size(); q += 5) a.values()[q] = 0.0f;  // stored zeros
    if (!a.values().empty()) a.values()[a.values().size() / 2] = -0.0f;
    auto d = sp::Tensor<float>::zeros({s.rows, s.cols});
    std::map<std::pair<std::int64_t, std::int64_t>, double> nonzero, big, positive_t;
    for (std::int64_t r = 0; r < a.rows(); ++r)
      for (std::size_t q = 0; q < a.row_indices(r).size(); ++q) {
        const std::int64_t c = a.row_indices(r)[q];
        const float v = a.row_values(r)[q];
        d(r, c) = v;
        if (v != 0) nonzero[{r, c}] = v;
        if (std::fabs(v) > 0.5f) big[{r, c}] = v;
        if (v > 0) positive_t[{c, r}] = v;
      }
    for (const auto& engine : spindle::test::cpu_engines())
      for (int threads : {1, 3}) {
        INFO("engine " << engine << " threads " << threads);
        auto& rt = spindle::test::engine_runtime(engine, threads);
        sp::Csr<float> c = random_csr<float>(Shape{"old", s.rows, s.cols, 2}, 3);  // replaced
        dense_to_csr.with_runtime(rt)(d, c);
        check_same(entries(c), nonzero, 0);
        prune.with_runtime(rt)(a, 0.5f, c);
        check_same(entries(c), big, 0);
        sp::Csr<float> t(s.cols, s.rows);
        positive_transpose.with_runtime(rt)(a, t);
        check_same(entries(t), positive_t, 0);
      }
    if (s.rows * s.cols <= 130 * 130) {
      check_assembled_on(true, dense_to_csr, [&] { return sp::Csr<float>(s.rows, s.cols); }, d);
      check_assembled_on(true, prune, [&] { return sp::Csr<float>(s.rows, s.cols); }, a, 0.25f);
      check_assembled_on(false, positive_transpose, [&] { return sp::Csr<float>(s.cols, s.rows); }, a);
    }
  }
  // A dense matrix of NaNs and infinities: NaN != 0 holds, so NaN is kept; NaN > t does not, so
  // pruning drops it.
  auto d = sp::Tensor<float>::zeros({2, 3});
  d(0, 1) = std::numeric_limits<float>::quiet_NaN();
  d(1, 2) = -std::numeric_limits<float>::infinity();
  sp::Csr<float> c(2, 3);
  dense_to_csr(d, c);
  REQUIRE(c.nnz() == 2);
  CHECK(std::isnan(c.values()[0]));
  CHECK(c.values()[1] == -std::numeric_limits<float>::infinity());
  sp::Csr<float> p(2, 3);
  prune(c, 1.0f, p);
  REQUIRE(p.nnz() == 1);
  CHECK(p.indices()[0] == 2);
}

TEST_CASE("conditional writes: a test the loops do not change (hoisted out of the row blocks) assembles on every "
          "engine and the CUDA build (kernel-fuzz seed 20261294783827: the CUDA build threw on the CPU-parallel blocks)",
          "[correctness][assembly][when]") {
  auto copy_if = sp::kernel("copy_if", sp::names{"A", "t", "C"},
                            [](sp::in<float, I, J> a, sp::param<float> t, sp::out<float, I, CJ> c, sp::iter<I> i,
                               sp::iter<J> j) { sp::when(t > 0.5f, [&] { c(i, j) = a(i, j) * t; }); });
  auto copy_else = sp::kernel("copy_else", sp::names{"A", "t", "C"},
                              [](sp::in<float, I, J> a, sp::param<float> t, sp::out<float, I, CJ> c, sp::iter<I> i,
                                 sp::iter<J> j) {
                                sp::when(t > 0.5f, [&] { c(i, j) = a(i, j) * t; }, [&] { c(i, j) = a(i, j) - t; });
                              });
  for (const Shape& s : matrix_shapes()) {
    INFO(s);
    const auto a = random_csr<float>(s, 61);
    for (float t : {1.0f, 0.0f}) {
      INFO("t = " << t);
      check_assembled(copy_if, [&] { return sp::Csr<float>(s.rows, s.cols); }, a, t);
      check_assembled(copy_else, [&] { return sp::Csr<float>(s.rows, s.cols); }, a, t);
    }
  }
}

TEST_CASE("writes at an input fiber's coordinates append each row when the input's fibers are sorted and fall back to "
          "the marker when a fiber is unsorted or repeats a column, on every engine and thread count",
          "[correctness][assembly][when]") {
  // prune and a scaled pattern copy write c(i, j) = f(a(i, j)) in the loop over row i of A:
  // a sorted A takes the append path (no workspace, no sort), an A with a shuffled row or a
  // repeated column the marker path; the result is the same assembly either way (a repeated
  // column keeps the last write that ran, docs/language.md §4.6).
  auto prune = sp::ops::prune<double>();
  auto copy = sp::kernel("scaled_copy", sp::names{"A", "C"},
                         [](sp::in<double, I, J> a, sp::out<double, I, CJ> c, sp::iter<I> i, sp::iter<J> j) {
                           c(i, j) = 2.0 * a(i, j);
                         });
  const std::string path = "each row appended in column order when every input's fibers are sorted";
  CHECK_THAT(prune.explain(), Catch::Contains(path));
  CHECK_THAT(copy.explain(), Catch::Contains(path));
  std::vector<Shape> shapes = matrix_shapes();
  shapes.push_back(Shape{"large", 2003, 1999, 9, 0.1});
  std::mt19937_64 rng(11);
  for (const Shape& s : shapes) {
    const auto sorted = random_csr<double>(s, 17);
    for (int variant : {0, 1, 2}) {  // sorted, shuffled rows, shuffled rows with repeated columns
      std::vector<std::int32_t> indptr(sorted.indptr().begin(), sorted.indptr().end());
      std::vector<std::int32_t> idx(sorted.indices().begin(), sorted.indices().end());
      std::vector<double> val(sorted.values().begin(), sorted.values().end());
      if (variant >= 1)
        for (std::int64_t r = 0; r < s.rows; ++r) {
          const std::size_t lo = static_cast<std::size_t>(indptr[static_cast<std::size_t>(r)]),
                            hi = static_cast<std::size_t>(indptr[static_cast<std::size_t>(r) + 1]);
          if (variant == 2 && hi - lo >= 2) idx[hi - 1] = idx[lo];  // a repeated column
          std::vector<std::size_t> order(hi - lo);
          std::iota(order.begin(), order.end(), lo);
          std::shuffle(order.begin(), order.end(), rng);
          std::vector<std::int32_t> ci;
          std::vector<double> cv;
          for (std::size_t q : order) ci.push_back(idx[q]), cv.push_back(val[q]);
          std::copy(ci.begin(), ci.end(), idx.begin() + static_cast<std::ptrdiff_t>(lo));
          std::copy(cv.begin(), cv.end(), val.begin() + static_cast<std::ptrdiff_t>(lo));
        }
      const sp::Csr<double> a(s.rows, s.cols, indptr, idx, val);
      INFO(s << " variant " << variant);
      if (variant == 0) CHECK(a.sorted());
      // The references: positions in stored order, the last write of a column kept.
      std::map<std::pair<std::int64_t, std::int64_t>, double> big, twice;
      for (std::int64_t r = 0; r < s.rows; ++r)
        for (std::int32_t q = indptr[static_cast<std::size_t>(r)]; q < indptr[static_cast<std::size_t>(r) + 1]; ++q) {
          const double v = val[static_cast<std::size_t>(q)];
          const std::pair<std::int64_t, std::int64_t> at{r, idx[static_cast<std::size_t>(q)]};
          if (std::fabs(v) > 0.5) big[at] = v;
          twice[at] = 2.0 * v;
        }
      for (const auto& engine : spindle::test::cpu_engines())
        for (int threads : {1, 3}) {
          INFO("engine " << engine << " threads " << threads);
          auto& rt = spindle::test::engine_runtime(engine, threads);
          sp::Csr<double> c = random_csr<double>(Shape{"old", s.rows, s.cols, 2}, 3);  // replaced
          prune.with_runtime(rt)(a, 0.5, c);
          check_same(entries(c), big, 0);
          copy.with_runtime(rt)(a, c);
          check_same(entries(c), twice, 0);
        }
      if (s.rows * s.cols <= 130 * 130) {
        check_assembled_on(true, prune, [&] { return sp::Csr<double>(s.rows, s.cols); }, a, 0.25);
        check_assembled_on(true, copy, [&] { return sp::Csr<double>(s.rows, s.cols); }, a);
      }
    }
  }
}
