// Block and padded formats as kernel arguments: BSR SpMM with compile-time block extents
// (dense_fixed_n<N>) and ELL SpMM (ops.hpp), against the plain CSR loop of the matrix they
// were built from, on every test shape, several block shapes and feature sizes, the real
// matrices, with 1 and 3 threads; the kernels' IR against the reference interpreter; the
// CUDA builds through NVRTC and the emulator; and the call-time errors of compile-time
// extents.
#include <catch2/catch.hpp>

#include <limits>

#include "correctness/correctness_support.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/engines.hpp"
#include "support/reference_interpreter.hpp"

using namespace spindle_test;
namespace sp = spindle;

namespace {

template <class T>
sp::Tensor<T> poisoned(std::vector<std::int64_t> shape) {
  return sp::Tensor<T>::full(std::move(shape), std::numeric_limits<T>::quiet_NaN());
}

sp::runtime::Runtime& runtime_with_threads(int threads) {
  static std::map<int, std::unique_ptr<sp::runtime::Runtime>> rts;
  auto& rt = rts[threads];
  if (!rt) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    rt = std::make_unique<sp::runtime::Runtime>(o);
  }
  return *rt;
}

// Y = A X through BsrSpmm<T, BR, BC> against the CSR loop, 1 and 3 threads.
template <class T, std::int64_t BR, std::int64_t BC>
void check_bsr_spmm(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  const auto bsr = sp::Bsr<T>::from_csr(a, BR, BC);
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 5, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  const sp::ops::BsrSpmm<T, BR, BC> spmm;
  for (int threads : {1, 3}) {
    INFO(what << " blocks " << BR << "x" << BC << " k=" << k << " threads " << threads);
    auto y = poisoned<T>({a.rows(), k});
    auto kernel = spmm.kernel().with_runtime(runtime_with_threads(threads));
    // the same math as BsrSpmm, through the runtime under test: padded views of X and Y
    const std::int64_t mb = bsr.block_row_count(), nb = bsr.block_col_count();
    std::vector<T> xp(static_cast<std::size_t>(nb * BC * k), T(0)), yp(static_cast<std::size_t>(mb * BR * k), T(7));
    std::copy(x.values().begin(), x.values().end(), xp.begin());
    kernel(bsr, sp::TensorView<const T>(xp.data(), {nb, BC, k}), sp::TensorView<T>(yp.data(), {mb, BR, k}));
    std::copy(yp.begin(), yp.begin() + static_cast<std::ptrdiff_t>(y.size()), y.values().begin());
    check_close<T>(ref, y.values(), what + " bsr_spmm kernel");
    for (std::int64_t q = y.size(); q < static_cast<std::int64_t>(yp.size()); ++q)
      REQUIRE(yp[static_cast<std::size_t>(q)] == T(0));  // padding rows: out is zero-filled
  }
  auto y = poisoned<T>({a.rows(), k});
  spmm(bsr, x, y);
  check_close<T>(ref, y.values(), what + " BsrSpmm");
}

template <class T>
void check_ell_spmm(const sp::Csr<T>& a, std::int64_t width, std::int64_t k, const std::string& what) {
  const auto ell = sp::Ell<T>::from_csr(a, width);
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 6, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  for (int threads : {1, 3}) {
    INFO(what << " ell width " << ell.width() << " k=" << k << " threads " << threads);
    auto y = poisoned<T>({a.rows(), k});
    sp::ops::ell_spmm<T>().with_runtime(runtime_with_threads(threads))(ell, x, y);
    check_close<T>(ref, y.values(), what + " ell_spmm");
  }
}

// DCSR SpMV and SpMM over the stored rows only: the CSR loop on every CPU engine with 1 and
// 3 threads; the rows A does not store come out 0 (the output starts poisoned).
template <class T>
void check_dcsr(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  const auto d = sp::Dcsr<T>::from_csr(a);
  REQUIRE(d.nnz() == a.nnz());
  const auto back = d.to_csr();
  REQUIRE(std::equal(back.indptr().begin(), back.indptr().end(), a.indptr().begin(), a.indptr().end()));
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 6, -1, 1);
  const auto x1 = sp::Tensor<T>::random({a.cols()}, 7, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  const auto ref1 = ref_spmv(a, x1.values());
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO(what << " dcsr (" << d.stored_rows() << " of " << a.rows() << " rows stored) k=" << k << " engine "
                << engine << " threads " << threads);
      auto& rt = spindle::test::engine_runtime(engine, threads);
      auto y = poisoned<T>({a.rows(), k});
      sp::ops::dcsr_spmm<T>().with_runtime(rt)(d, x, y);
      check_close<T>(ref, y.values(), what + " dcsr_spmm");
      auto y1 = poisoned<T>({a.rows()});
      sp::ops::dcsr_spmv<T>().with_runtime(rt)(d, x1, y1);
      check_close<T>(ref1, y1.values(), what + " dcsr_spmv");
    }
}

}  // namespace

TEMPLATE_TEST_CASE("DCSR SpMV and SpMM match the CSR loop, on hypersparse, empty and real matrices",
                   "[correctness][formats][dcsr]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  for (std::int64_t k : {1, 7, 33}) check_dcsr<T>(random_csr<T>(s, 61), k, s.name);
  // Hypersparse: 97 % of 20011 rows empty.
  check_dcsr<T>(random_csr<T>(Shape{"hypersparse", 20011, 3001, 5, 0.97}, 62), 16, "hypersparse");
}

TEST_CASE("DCSR on real graphs, against the interpreter and the CUDA build, structure errors",
          "[correctness][formats][dcsr][interpreter][cuda]") {
  for (const char* file : {"gnn/cora.mtx.gz", "matrices/bcsstk25.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_dcsr<float>(*a, 32, file);
  }
  // A small matrix with empty rows at both ends and in the middle, through the interpreter
  // and the CUDA build (emulated here, on the GPU where there is one).
  const auto a = random_csr<float>(Shape{"gaps", 41, 23, 3, 0.5}, 63);
  const auto d = sp::Dcsr<float>::from_csr(a);
  const std::int64_t k = 5;
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 64, -1, 1);
  const auto kernel = sp::ops::dcsr_spmm<float>();
  spindle::test::NvrtcCheck nvrtc;
  auto run = [&](auto&& how) {
    auto y = sp::Tensor<float>::full({a.rows(), k}, 99.0f);
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(d);
    args[1].view = sp::storage_of(x);
    args[2].view = sp::storage_of(y);
    how(args);
    return y;
  };
  const auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
  check_close<float>(ref_spmm(a, x.values(), k), want.values(), "dcsr interpreter vs CSR loop");
  const auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
  check_close<float>(ref_spmm(a, x.values(), k), emulated.values(), "dcsr CUDA build vs CSR loop");
  // Structure errors name the place.
  using D = sp::Dcsr<float>;
  CHECK_THROWS_WITH(D(5, 4, {1, 1}, {0, 1, 2}, {0, 1}, {1, 1}), Catch::Contains("row ids are not strictly ascending at stored row 1"));
  CHECK_THROWS_WITH(D(5, 4, {5}, {0, 1}, {0}, {1}), Catch::Contains("row id 5 out of range [0, 5)"));
  CHECK_THROWS_WITH(D(5, 4, {0, 2}, {0, 1}, {0}, {1}), Catch::Contains("indptr has 2 entries, expected stored rows + 1 = 3"));
  CHECK_THROWS_WITH(D(5, 4, {0}, {0, 1}, {4}, {1}), Catch::Contains("index 4 out of range [0, 4)"));
  CHECK_THROWS_AS(D(5, 4, {0}, {0, 1}, {0}, {}), sp::FormatError);
  // A DCSR where a CSR is expected: the row level is sparse, the binder says so.
  auto y = sp::Tensor<float>::zeros({a.rows(), k});
  CHECK_THROWS_AS(sp::ops::spmm<float>()(d, x, y), sp::ShapeError);
}

TEST_CASE("kron_blocks: (A + I) with each entry a dense d x d block, rows sorted, diagonal added once",
          "[correctness][formats]") {
  // A = [[0, 5], [7, 0], [0, 0]] (3 x 2; row 1 stored unsorted is not possible here: one entry),
  // rows 0 and 1 gain their diagonal, row 2 has none (2 >= cols).
  const sp::Csr<float> a(3, 2, {0, 1, 2, 2}, {1, 0}, {5.f, 7.f});
  const auto k = sp::kron_blocks(a, 2, [](int i, int j, std::int64_t c) { return 100 * c + 10 * i + j; });
  REQUIRE(k.rows() == 6);
  REQUIRE(k.cols() == 4);
  const std::vector<std::int32_t> ptr{0, 4, 8, 12, 16, 16, 16}, idx{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  CHECK(std::vector<std::int32_t>(k.indptr().begin(), k.indptr().end()) == ptr);
  CHECK(std::vector<std::int32_t>(k.indices().begin(), k.indices().end()) == idx);
  // Row 1 of the result (block row 0, i = 1): blocks of columns 0 and 1, entries 100 c + 10 + j.
  const std::vector<float> row1{10, 11, 110, 111};
  CHECK(std::vector<float>(k.values().begin() + 4, k.values().begin() + 8) == row1);
  // The default block 1 / (1 + i + j), and d = 1 is A + I.
  const auto d1 = sp::kron_blocks(a, 1);
  CHECK(d1.nnz() == 4);
  CHECK(d1.values()[0] == 1.f);
  CHECK_THROWS_AS(sp::kron_blocks(a, 0), sp::ShapeError);
}

TEMPLATE_TEST_CASE("BSR SpMM with compile-time block extents matches the CSR loop", "[correctness][formats][bsr]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 21);
  for (std::int64_t k : {1, 7, 33}) {
    check_bsr_spmm<T, 1, 1>(a, k, s.name);
    check_bsr_spmm<T, 4, 4>(a, k, s.name);
    check_bsr_spmm<T, 3, 5>(a, k, s.name);
  }
  check_bsr_spmm<T, 2, 2>(a, 16, s.name);
  check_bsr_spmm<T, 8, 8>(a, 16, s.name);
}

TEST_CASE("BSR SpMM on real matrices (FEM blocks and a graph)", "[correctness][formats][bsr][graphs]") {
  for (const char* file : {"matrices/bcsstk25.mtx.gz", "gnn/cora.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_bsr_spmm<float, 4, 4>(*a, 32, file);
    check_bsr_spmm<float, 2, 3>(*a, 5, file);
  }
}

TEMPLATE_TEST_CASE("ELL SpMM matches the CSR loop (exact and wider than the longest row)",
                   "[correctness][formats][ell]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 31);
  for (std::int64_t k : {1, 7, 33}) check_ell_spmm<T>(a, -1, k, s.name);
  std::int64_t longest = 0;
  for (std::int64_t r = 0; r < a.rows(); ++r) longest = std::max<std::int64_t>(longest, a.indptr()[r + 1] - a.indptr()[r]);
  if (a.rows() > 0 && longest + 3 > a.cols())  // a row holds distinct columns: at most cols slots
    REQUIRE_THROWS_AS(sp::Ell<T>::from_csr(a, longest + 3), sp::ShapeError);
  check_ell_spmm<T>(a, std::min<std::int64_t>(longest + 3, a.rows() > 0 ? a.cols() : longest + 3), 16, s.name);
}

TEST_CASE("BSR and ELL SpMM agree with the reference interpreter, and their CUDA builds compile and run emulated",
          "[correctness][formats][interpreter][cuda]") {
  const Shape s{"irregular", 37, 29, 5, 0.2};
  const auto a = random_csr<float>(s, 41);
  const std::int64_t k = 6;
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 42, -1, 1);
  spindle::test::NvrtcCheck nvrtc;
  {  // BSR 4x3
    const auto bsr = sp::Bsr<float>::from_csr(a, 4, 3);
    const std::int64_t mb = bsr.block_row_count(), nb = bsr.block_col_count();
    std::vector<float> xp(static_cast<std::size_t>(nb * 3 * k), 0.0f);
    std::copy(x.values().begin(), x.values().end(), xp.begin());
    const auto kernel = sp::ops::bsr_spmm_kernel<float, 4, 3>();
    auto run = [&](auto&& how) {
      auto y = sp::Tensor<float>::full({mb, 4, k}, 99.0f);
      std::vector<sp::runtime::CallArg> args(3);
      args[0].view = sp::storage_of(bsr);
      args[1].view = sp::storage_of(sp::TensorView<const float>(xp.data(), {nb, 3, k}));
      args[2].view = sp::storage_of(y);
      how(args);
      return y;
    };
    auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
    auto got = run([&](auto& args) { kernel.compile().call(args); });
    auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
    for (std::int64_t q = 0; q < want.size(); ++q) {
      INFO("bsr element " << q);
      REQUIRE(got.values()[q] == Approx(want.values()[q]).margin(1e-5));
      REQUIRE(emulated.values()[q] == Approx(want.values()[q]).margin(1e-5));
    }
    CHECK_THAT(kernel.explain(), Catch::Contains("BI") && Catch::Contains("length=4"));
  }
  {  // ELL, width longest + 2
    std::int64_t longest = 0;
    for (std::int64_t r = 0; r < a.rows(); ++r)
      longest = std::max<std::int64_t>(longest, a.indptr()[r + 1] - a.indptr()[r]);
    const auto ell = sp::Ell<float>::from_csr(a, longest + 2);
    const auto kernel = sp::ops::ell_spmm<float>();
    auto run = [&](auto&& how) {
      auto y = sp::Tensor<float>::full({a.rows(), k}, 99.0f);
      std::vector<sp::runtime::CallArg> args(3);
      args[0].view = sp::storage_of(ell);
      args[1].view = sp::storage_of(x);
      args[2].view = sp::storage_of(y);
      how(args);
      return y;
    };
    auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
    auto got = run([&](auto& args) { kernel.compile().call(args); });
    auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
    check_close<float>(ref_spmm(a, x.values(), k), want.values(), "ell interpreter vs CSR loop");
    for (std::int64_t q = 0; q < want.size(); ++q) {
      INFO("ell element " << q);
      REQUIRE(got.values()[q] == Approx(want.values()[q]).margin(1e-5));
      REQUIRE(emulated.values()[q] == Approx(want.values()[q]).margin(1e-5));
    }
  }
}

TEST_CASE("a compile-time extent is a constant in the generated code and checked at call time",
          "[correctness][formats][errors]") {
  const auto a = random_csr<float>(Shape{"sq", 16, 16, 4}, 51);
  const auto bsr2 = sp::Bsr<float>::from_csr(a, 2, 2);
  const auto kernel = sp::ops::bsr_spmm_kernel<float, 4, 4>();
  const std::string src = kernel.explain();
  CHECK_THAT(src, !Catch::Contains("BI_len") && !Catch::Contains("BJ_len"));
  auto x = sp::Tensor<float>::zeros({8, 4, 3});
  auto y = sp::Tensor<float>::zeros({8, 4, 3});
  // a 2x2-block matrix into the 4x4 kernel: the block-row level has extent 2, not 4
  REQUIRE_THROWS_MATCHES(kernel(bsr2, x, y), sp::ShapeError,
                         Catch::Matchers::Predicate<sp::ShapeError>([](const sp::ShapeError& e) {
                           std::string m = e.what();
                           return m.find("compile-time extent 4") != std::string::npos &&
                                  m.find("BI") != std::string::npos && m.find("extent 2") != std::string::npos;
                         }, "names the axis and both extents"));
  // the wrapper names the block shapes
  const sp::ops::BsrSpmm<float, 4, 4> spmm;
  auto x2 = sp::Tensor<float>::zeros({16, 3});
  auto y2 = sp::Tensor<float>::full({16, 3}, 5.0f);
  REQUIRE_THROWS_WITH(spmm(bsr2, x2, y2), Catch::Contains("2x2 blocks") && Catch::Contains("from_csr(csr, 4, 4)"));
  REQUIRE(y2.values()[0] == 5.0f);  // nothing written
  auto x3 = sp::Tensor<float>::zeros({15, 3});
  REQUIRE_THROWS_AS(spmm(sp::Bsr<float>::from_csr(a, 4, 4), x3, y2), sp::ShapeError);
}
