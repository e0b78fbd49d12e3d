// The CUDA build of every operator of spindle/ops.hpp against the references (and the CPU
// backend) on random matrices of every test shape, several feature sizes (so every schedule
// variant runs) and the real graphs.
//
// Where: on a machine with a GPU the kernels run on it (arguments mirrored into device
// memory, outputs copied back). Without a GPU (CI) the same generated CUDA runs in the CPU
// emulator of tests/support/cuda_emulator.hpp, which executes thread blocks with faithful
// barrier and warp-shuffle semantics; so the generated code is checked on every machine,
// and on the GPU when there is one (tests tagged [gpu] only run there).
//
// Tolerance: the model of correctness_support.hpp; the GPU schedules sum in another order
// than the references (per-lane partial sums, warp butterflies), which the model's
// re-association headroom covers.
#include <catch2/catch.hpp>

#include <spindle/driver/pipeline.hpp>
#include <spindle/runtime/bind_args.hpp>
#include <map>
#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/support/hash.hpp>

#include "correctness/correctness_support.hpp"
#include "support/emulated_cuda_call.hpp"

using namespace spindle_test;
namespace sp = spindle;

namespace {

template <class A>
sp::runtime::CallArg call_arg(A&& a) {
  return sp::detail::make_call_arg(std::forward<A>(a));
}

// Runs the CUDA build of `kernel` on host arguments, writing the outputs into them: on the
// GPU through the kernel's own compile_cuda() cache when one runs, else in the emulator.
template <class K, class... A>
void run_cuda(const K& kernel, A&&... args) {
  std::vector<sp::runtime::CallArg> call{call_arg(args)...};
  if (spindle::test::gpu_runs()) return spindle::test::call_on_gpu(kernel.ir(), kernel.compile_cuda(), call);
  static spindle::test::EmulatorCache modules;  // one compile per module
  spindle::test::run_cuda_emulated(kernel.ir(), call, nullptr, &modules);
}

const char* where() { return spindle::test::gpu_runs() ? "GPU" : "CUDA emulator"; }

// Feature sizes that reach every SpMM/SDDMM variant: 1 (cf 1, lanes 1), 7 (unaligned rows),
// 32 (lanes 8, float4), 33 (cf 2), 64, 130 (cf 4 without float4), 256 (cf 4 with float4).
const std::vector<std::int64_t>& gpu_features() {
  static const std::vector<std::int64_t> f{1, 7, 32, 33, 64, 130, 256};
  return f;
}

}  // namespace

TEMPLATE_TEST_CASE("cuda: spmm matches the reference for every shape and variant", "[cuda][correctness][spmm]", float,
                   double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(from_range(gpu_features()));
  INFO(s << " K=" << k << " " << dtype_label<T>() << " on the " << where());
  const auto a = random_csr<T>(s, 31);
  const auto b = sp::Tensor<T>::random({s.cols, k}, 32, -1, 1);
  auto c = sp::Tensor<T>::full({s.rows, k}, nan_v<T>);
  run_cuda(sp::ops::spmm<T>(), a, b, c);
  check_close<T>(ref_spmm(a, b.values(), k), c.values(), "cuda spmm");
}

TEMPLATE_TEST_CASE("cuda: sddmm matches the reference for every shape and variant", "[cuda][correctness][sddmm]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(from_range(gpu_features()));
  INFO(s << " K=" << k << " " << dtype_label<T>() << " on the " << where());
  const auto a = random_csr<T>(s, 101);
  const auto x = sp::Tensor<T>::random({s.rows, k}, 102, -1, 1);
  const auto y = sp::Tensor<T>::random({s.cols, k}, 103, -1, 1);
  auto c = same_structure(a, nan_v<T>);
  run_cuda(sp::ops::sddmm<T>(), a, x, y, c);
  check_close<T>(ref_sddmm(a, x.values(), y.values(), k), c.values(), "cuda sddmm", 2);
}

// The default SDDMM schedule over a CSR splits the nonzeros evenly across the threads (each
// finds its row by a binary search); SPINDLE_CUDA_SDDMM=rows keeps a warp per row. Both on
// every shape (empty rows, 0xN, Nx0, ...) in the emulator, whatever the machine has.
TEMPLATE_TEST_CASE("cuda: both sddmm schedules (nonzero-parallel, a warp per row) match the reference in the emulator",
                   "[cuda][correctness][sddmm]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  const std::int64_t k = GENERATE(1, 8, 33, 128);
  const char* mode = GENERATE("nonzeros", "rows");
  INFO(s << " K=" << k << " " << dtype_label<T>() << " SPINDLE_CUDA_SDDMM=" << mode);
  const auto a = random_csr<T>(s, 104);
  const auto x = sp::Tensor<T>::random({s.rows, k}, 105, -1, 1);
  const auto y = sp::Tensor<T>::random({s.cols, k}, 106, -1, 1);
  auto c = same_structure(a, nan_v<T>);
  struct ScheduleEnv {  // SPINDLE_CUDA_SDDMM for this case only
    explicit ScheduleEnv(const char* m) { ::setenv("SPINDLE_CUDA_SDDMM", m, 1); }
    ~ScheduleEnv() { ::unsetenv("SPINDLE_CUDA_SDDMM"); }
  } env(mode);
  std::vector<sp::runtime::CallArg> call{call_arg(a), call_arg(x), call_arg(y), call_arg(c)};
  std::vector<void*> bufs;
  std::vector<std::int64_t> scalars;
  std::vector<sp::ir::Var> vars;
  const auto source = spindle::test::emulated_cuda_source(sp::ops::sddmm<T>().ir(), call, bufs, scalars, vars);
  CHECK((source.source.find("search_step") != std::string::npos) == (std::string(mode) == "nonzeros"));
  static spindle::test::EmulatorCache modules;
  spindle::test::run_cuda_emulated(sp::ops::sddmm<T>().ir(), call, nullptr, &modules);
  check_close<T>(ref_sddmm(a, x.values(), y.values(), k), c.values(), "cuda sddmm", 2);
}

// The SpMM schedules over a CSR: GE-SpMM (a warp per row, the default) and, with
// SPINDLE_CUDA_SPMM=nonzeros, chunks of consecutive nonzeros per warp with atomic row
// updates (C initialised by a first launch). Both on every shape and on a skewed matrix
// whose long rows span several chunks (and chunks that span many short and empty rows), in
// the emulator, whatever the machine has.
TEMPLATE_TEST_CASE("cuda: both spmm schedules (a warp per row, nonzero-parallel) match the reference in the emulator",
                   "[cuda][correctness][spmm]", float, double) {
  using T = TestType;
  const char* mode = GENERATE("rows", "nonzeros");
  struct ScheduleEnv {  // SPINDLE_CUDA_SPMM for this case only
    explicit ScheduleEnv(const char* m) { ::setenv("SPINDLE_CUDA_SPMM", m, 1); }
    ~ScheduleEnv() { ::unsetenv("SPINDLE_CUDA_SPMM"); }
  } env(mode);
  static spindle::test::EmulatorCache modules;
  static spindle::test::NvrtcCheck nvrtc;  // and every variant's module through NVRTC to a cubin
  auto check = [&](const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
    INFO(what << " K=" << k << " " << dtype_label<T>() << " SPINDLE_CUDA_SPMM=" << mode);
    const auto b = sp::Tensor<T>::random({a.cols(), k}, 33, -1, 1);
    auto c = sp::Tensor<T>::full({a.rows(), k}, nan_v<T>);
    std::vector<sp::runtime::CallArg> call{call_arg(a), call_arg(b), call_arg(c)};
    std::vector<void*> bufs;
    std::vector<std::int64_t> scalars;
    std::vector<sp::ir::Var> vars;
    const auto source = spindle::test::emulated_cuda_source(sp::ops::spmm<T>().ir(), call, bufs, scalars, vars);
    CHECK((source.source.find("search_step") != std::string::npos) == (std::string(mode) == "nonzeros"));
    spindle::test::run_cuda_emulated(sp::ops::spmm<T>().ir(), call, &nvrtc, &modules);
    check_close<T>(ref_spmm(a, b.values(), k), c.values(), "cuda spmm " + what, 2);
  };
  for (const Shape& s : matrix_shapes())
    for (std::int64_t k : {1, 7, 33, 130, 256}) check(random_csr<T>(s, 107), k, s.name);
  // Skewed: rows 3 and 70 hold 300 and 1000 entries (several 64-position chunks), the rest
  // 0-3 entries with runs of empty rows, so chunks start inside long rows and cross many rows.
  std::vector<std::int32_t> ptr{0}, idx;
  std::vector<T> val;
  for (std::int32_t r = 0; r < 200; ++r) {
    const std::int32_t n = r == 3 ? 300 : r == 70 ? 1000 : (r % 7 < 3 ? 0 : r % 4);
    for (std::int32_t q = 0; q < n; ++q) {
      idx.push_back(static_cast<std::int32_t>((q * 7 + r) % 1200));
      val.push_back(static_cast<T>(((q * 13 + r) % 17) / 8.0 - 1));
    }
    std::sort(idx.end() - n, idx.end());
    idx.erase(std::unique(idx.end() - n, idx.end()), idx.end());
    val.resize(idx.size());
    ptr.push_back(static_cast<std::int32_t>(idx.size()));
  }
  const sp::Csr<T> skewed(200, 1200, ptr, idx, val);
  for (std::int64_t k : {1, 32, 130}) check(skewed, k, "skewed");
}

TEMPLATE_TEST_CASE("cuda: spmv, row_sum and softmax match the references", "[cuda][correctness]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>() << " on the " << where());
  const auto a = random_csr<T>(s, 7);
  const auto x = sp::Tensor<T>::random({s.cols}, 8, -1, 1);
  auto y = sp::Tensor<T>::full({s.rows}, nan_v<T>);
  run_cuda(sp::ops::spmv<T>(), a, x, y);
  check_close<T>(ref_spmv(a, x.values()), y.values(), "cuda spmv");
  auto r = sp::Tensor<T>::full({s.rows}, nan_v<T>);
  run_cuda(sp::ops::row_sum<T>(), a, r);
  check_close<T>(ref_row_sum(a), r.values(), "cuda row_sum");
  auto b = same_structure(a, nan_v<T>);
  run_cuda(sp::ops::softmax<T>(), a, b);
  check_elementwise<T>(ref_softmax(a), b.values(), "cuda softmax");
}

TEMPLATE_TEST_CASE("cuda: scale, spmm_dense_j, ragged_matmul and csf_reduce agree with the CPU backend",
                   "[cuda][correctness]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>() << " on the " << where());
  const auto a = random_csr<T>(s, 11);
  // Element-wise scale: same rounding on both backends.
  const auto r = sp::Tensor<T>::random({s.rows}, 12, -1, 1);
  const auto cs = sp::Tensor<T>::random({s.cols}, 13, -1, 1);
  auto e_cpu = same_structure(a, nan_v<T>), e_gpu = same_structure(a, nan_v<T>);
  sp::ops::scale<T>()(a, r, cs, T(0.5), e_cpu);
  run_cuda(sp::ops::scale<T>(), a, r, cs, T(0.5), e_gpu);
  CHECK(to_vector<T>(e_gpu.values()) == to_vector<T>(e_cpu.values()));
  // Binary-search SpMM: same products as spmm, in the same order per output.
  const std::int64_t k = 33;
  const auto b = sp::Tensor<T>::random({s.cols, k}, 14, -1, 1);
  auto c = sp::Tensor<T>::full({s.rows, k}, nan_v<T>);
  run_cuda(sp::ops::spmm_dense_j<T>(), a, b, c);
  check_close<T>(ref_spmm(a, b.values(), k), c.values(), "cuda spmm_dense_j");
  // Ragged batched matmul and the 3-level CSF reduction, against the CPU backend.
  const std::vector<std::int64_t> rows{0, 3, 0, 7, 1, 33};
  const auto ra = sp::Ragged<T>::random(rows, {7}, 15, -1, 1);
  const auto w = sp::Tensor<T>::random({static_cast<std::int64_t>(rows.size()), 7, 9}, 16, -1, 1);
  auto rc_cpu = sp::Ragged<T>::zeros(rows, {9}), rc_gpu = sp::Ragged<T>::zeros(rows, {9});
  sp::ops::ragged_matmul<T>()(ra, w, rc_cpu);
  for (T& v : rc_gpu.values()) v = nan_v<T>;
  run_cuda(sp::ops::ragged_matmul<T>(), ra, w, rc_gpu);
  auto cpu = to_vector<T>(rc_cpu.values()), gpu = to_vector<T>(rc_gpu.values());
  REQUIRE(cpu.size() == gpu.size());
  for (std::size_t q = 0; q < cpu.size(); ++q) CHECK(gpu[q] == Approx(cpu[q]).epsilon(1e-5).margin(1e-6));
  const auto t = sp::Csf<T>::random({7, 33, 130}, 0.05, 17, -1, 1);
  const auto xv = sp::Tensor<T>::random({130}, 18, -1, 1);
  auto y_cpu = sp::Tensor<T>::full({7}, nan_v<T>), y_gpu = sp::Tensor<T>::full({7}, nan_v<T>);
  sp::ops::csf_reduce<T>()(t, xv, y_cpu);
  run_cuda(sp::ops::csf_reduce<T>(), t, xv, y_gpu);
  for (std::int64_t q = 0; q < 7; ++q)
    CHECK(y_gpu.values()[q] == Approx(y_cpu.values()[q]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("cuda: spmm and sddmm on the real graphs", "[cuda][correctness][graph]") {
  for (const char* file : {"gnn/cora.mtx.gz", "gnn/citeseer.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) continue;
    for (std::int64_t k : {32, 130}) {
      INFO(file << " K=" << k << " on the " << where());
      const auto b = sp::Tensor<float>::random({a->cols(), k}, 5, -1, 1);
      auto c = sp::Tensor<float>::full({a->rows(), k}, nan_v<float>);
      run_cuda(sp::ops::spmm<float>(), *a, b, c);
      check_close<float>(ref_spmm(*a, b.values(), k), c.values(), "cuda spmm graph");
      const auto x = sp::Tensor<float>::random({a->rows(), k}, 6, -1, 1);
      auto d = same_structure(*a, nan_v<float>);
      run_cuda(sp::ops::sddmm<float>(), *a, x, b, d);
      check_close<float>(ref_sddmm(*a, x.values(), b.values(), k), d.values(), "cuda sddmm graph", 2);
    }
  }
}

TEST_CASE("cuda: device arguments are required on the GPU path, and mixing is refused", "[cuda][error]") {
  const auto a = random_csr<float>({"small", 5, 5, 2}, 1);
  const auto x = sp::Tensor<float>::random({5}, 2, -1, 1);
  auto y = sp::Tensor<float>::full({5}, nan_v<float>);
  sp::driver::PipelineOptions o;
  auto prepared = sp::driver::lower_for_cuda(sp::ops::spmv<float>().ir(), o);
  sp::runtime::ArgBinder device_binder(prepared.stage1, prepared.unscheduled, /*device=*/true);
  std::vector<sp::runtime::CallArg> call{call_arg(a), call_arg(x), call_arg(y)};
  std::vector<void*> bufs(prepared.unscheduled.buffers.size());
  std::vector<std::int64_t> scalars(prepared.unscheduled.scalars.size());
  CHECK_THROWS_WITH(device_binder.bind(call, bufs.data(), scalars.data()),
                    Catch::Contains("is in host memory but this call runs on the GPU"));
  CHECK(std::isnan(y.values()[0]));  // nothing ran
}

// Found by spindle-kernel-fuzz on the CUDA engine (seeds 1000009, 1000015, 1000209,
// 1000006), shrunk by hand: a reduction loop outermost (the thread-per-iteration schedule
// made its reductions local and then refused the resulting store), atomic *= and min on
// integers, and a kernel whose loops all have extent 0.
TEST_CASE("cuda fuzz regression: reductions across the threads of an outer reduction loop",
          "[cuda][correctness][fuzz]") {
  struct I : sp::dense_fixed {};
  struct J : sp::sparse_variable<I> {};
  const auto a = random_csr<float>({"irregular", 57, 45, 6, 0.2}, 81);
  // y(j) over dense<J>: the row loop is a reduction for y; the max is atomic.
  auto scatter_max = sp::kernel("scatter_max", [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>> y,
                                                  sp::iter<I> i, sp::iter<J> j) { y(j).max_with(a(i, j)); });
  auto y = sp::Tensor<float>::full({45}, nan_v<float>);
  run_cuda(scatter_max, a, y);
  std::vector<float> want(45, -std::numeric_limits<float>::infinity());
  for (std::int64_t r = 0; r < 57; ++r)
    for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q)
      want[static_cast<std::size_t>(a.indices()[q])] = std::max(want[static_cast<std::size_t>(a.indices()[q])], a.values()[q]);
  for (int c = 0; c < 45; ++c) CHECK(y(c) == want[static_cast<std::size_t>(c)]);
  // Integer product and min into one element per column, from every row (CAS loops).
  struct K : sp::dense_fixed {};
  auto ints = sp::kernel("int_reduce", [](sp::in<std::int32_t, K, I> v, sp::out<std::int32_t, I> p,
                                          sp::out<std::int32_t, I> m, sp::iter<K> k, sp::iter<I> i) {
    p(i) *= v(k, i);
    m(i).min_with(v(k, i));
  });
  sp::Tensor<std::int32_t> v = sp::Tensor<std::int32_t>::zeros({6, 9});
  for (int q = 0; q < 54; ++q) v.values()[q] = (q * 7) % 5 - 2 == 0 ? 1 : (q * 7) % 5 - 2;
  auto p = sp::Tensor<std::int32_t>::full({9}, 99), m = sp::Tensor<std::int32_t>::full({9}, 99);
  run_cuda(ints, v, p, m);
  for (int c = 0; c < 9; ++c) {
    std::int32_t wp = 1, wm = std::numeric_limits<std::int32_t>::max();
    for (int r = 0; r < 6; ++r) wp *= v(r, c), wm = std::min(wm, v(r, c));
    CHECK(p(c) == wp);
    CHECK(m(c) == wm);
  }
  // Every loop of extent 0: no launch at all, and the out buffer is still filled.
  auto empty = sp::kernel("empty_rows", [](sp::in<float, I, J> a, sp::out<float, I> r, sp::iter<I> i,
                                           sp::iter<J> j) { r(i) += a(i, j); });
  const auto none = random_csr<float>({"0x0", 0, 0, 0}, 82);
  auto r0 = sp::Tensor<float>::zeros({0});
  run_cuda(empty, none, r0);
}

TEST_CASE("cuda fuzz regression: a reduction over a second sparse axis is not taken for SDDMM",
          "[cuda][correctness][fuzz]") {
  // c(i, k) sums row i of a for every stored k of row i: I, then K and J both under I. The
  // J loop's length varies by row, so it is no feature loop; the SDDMM plan took it and its
  // launch asked for a data-dependent feature size (InternalError in evaluate_int; found by
  // spindle-kernel-fuzz, seed 1004003756).
  struct I : sp::dense_fixed {};
  struct J : sp::sparse_variable<I> {};
  struct K : sp::sparse_variable<I> {};
  auto k = sp::kernel("two_children", [](sp::in<float, I, J> a, sp::out<float, I, K> c, sp::iter<I> i,
                                         sp::iter<K> kk, sp::iter<J> j) { c(i, kk) += a(i, j); });
  const auto a = random_csr<float>({"irregular", 57, 45, 6, 0.2}, 83);
  auto c = same_structure(random_csr<float>({"irregular", 57, 30, 3, 0.3}, 84), nan_v<float>);
  run_cuda(k, a, c);
  for (std::int64_t r = 0; r < 57; ++r) {
    double sum = 0;
    for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) sum += a.values()[q];
    for (auto q = c.indptr()[r]; q < c.indptr()[r + 1]; ++q) CHECK(c.values()[q] == Approx(sum).margin(1e-4));
  }
}
