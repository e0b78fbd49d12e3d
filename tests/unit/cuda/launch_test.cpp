// Launch grids: evaluate_int over scalar parameters (C division semantics, select, casts,
// errors), zero-sized grids that launch nothing, and - with a GPU - a real launch, 10k
// launches without leaking device memory, and launch errors that name the configuration.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "cuda_test_support.hpp"
#include "spindle/ir/ops.hpp"

using namespace spindle;
using namespace spindle::cuda;
using Catch::Contains;

TEST_CASE("launch: evaluate_int follows the generated code's integer semantics", "[cuda]") {
  ir::Var n("n", DType::i64), m("m", DType::i64);
  std::vector<ir::Var> vars{n, m};
  auto eval = [&](const ir::Expr& e, std::int64_t nv, std::int64_t mv) {
    std::int64_t values[2] = {nv, mv};
    return evaluate_int(e, vars, values);
  };
  ir::Expr ceil_div = (ir::Expr(n) + 127) / ir::int_imm(128);
  CHECK(eval(ceil_div, 10, 0) == 1);
  CHECK(eval(ceil_div, 300, 0) == 3);
  CHECK(eval(ceil_div, 0, 0) == 0);
  CHECK(eval(ir::Expr(n) % ir::Expr(m), 10, 3) == 1);
  // / and % truncate toward zero, as in C.
  ir::Expr neg_n = ir::int_imm(0) - ir::Expr(n);
  CHECK(eval(neg_n / ir::Expr(m), 10, 3) == -3);
  CHECK(eval(neg_n % ir::Expr(m), 10, 3) == -1);
  CHECK(eval(ir::unary(ir::UnOp::neg, n), 7, 0) == -7);
  CHECK(eval(ir::min(n, m), 10, 3) == 3);
  CHECK(eval(ir::max(n, m), 10, 3) == 10);
  CHECK(eval(ir::select(ir::Expr(n) > ir::Expr(m), n, m), 10, 3) == 10);
  CHECK(eval(ir::select(ir::Expr(n) > ir::Expr(m), n, m), 2, 3) == 3);
  CHECK(eval(ir::binary(ir::BinOp::eq, n, m), 4, 4) == 1);
  CHECK(eval(ir::binary(ir::BinOp::ne, n, m), 4, 4) == 0);
  CHECK(eval(ir::Expr(n) <= ir::Expr(m), 4, 4) == 1);
  CHECK(eval(ir::Expr(n) >= ir::Expr(m), 3, 4) == 0);
  CHECK(eval(ir::unary(ir::UnOp::lnot, ir::Expr(n) < ir::Expr(m)), 3, 4) == 0);
  // select and && evaluate only what they need: no division by zero here.
  CHECK(eval(ir::select(ir::binary(ir::BinOp::eq, m, ir::int_imm(0)), ir::int_imm(0), ir::Expr(n) / ir::Expr(m)), 9,
             0) == 0);
  CHECK(eval(ir::binary(ir::BinOp::ne, m, ir::int_imm(0)) && ir::binary(ir::BinOp::gt, ir::Expr(n) / ir::Expr(m),
                                                                          ir::int_imm(1)),
             9, 0) == 0);
  CHECK(eval(ir::binary(ir::BinOp::lor, ir::binary(ir::BinOp::eq, m, ir::int_imm(0)),
                        ir::binary(ir::BinOp::gt, ir::Expr(n) / ir::Expr(m), ir::int_imm(1))),
             9, 0) == 1);
  // Casts to integer types.
  CHECK(eval(ir::cast(DType::i32, n), (std::int64_t{1} << 32) + 5, 0) == 5);
  CHECK(eval(ir::cast(DType::i32, n), -1, 0) == -1);
  CHECK(eval(ir::cast(DType::i64, ir::cast(DType::i32, n)), 42, 0) == 42);
  CHECK(eval(ir::cast(DType::boolean, n), 42, 0) == 1);

  SECTION("errors") {
    CHECK_THROWS_WITH(eval(ir::Expr(n) / ir::Expr(m), 1, 0), Contains("divides by zero"));
    CHECK_THROWS_AS(eval(ir::Expr(n) % ir::Expr(m), 1, 0), RuntimeError);
    CHECK_THROWS_WITH(eval(ir::Expr(n) * ir::Expr(m), INT64_MAX, 2), Contains("overflows"));
    ir::Var stranger("stranger", DType::i64);
    CHECK_THROWS_AS(eval(ir::Expr(stranger) + 1, 1, 1), InternalError);
    CHECK_THROWS_WITH(eval(ir::Expr(stranger) + 1, 1, 1), Contains("'stranger'"));
    CHECK_THROWS_AS(eval(ir::float_imm(1.5), 1, 1), InternalError);
    CHECK_THROWS_AS(eval(ir::cast(DType::f32, n), 1, 1), InternalError);
    CHECK_THROWS_AS(eval(ir::cast(DType::i64, ir::float_imm(2.0)), 1, 1), InternalError);
  }
}

TEST_CASE("launch: a grid with a zero dimension launches nothing and needs no device", "[cuda]") {
  ir::Var n("n", DType::i64);
  codegen::CudaLaunch l;
  l.symbol = "spindle_never_launched";
  l.grid = {(ir::Expr(n) + 127) / ir::int_imm(128), ir::Expr(), ir::Expr()};
  l.block = {128, 1, 1};
  std::int64_t zero = 0;
  CudaRuntime rt(Options::from_env(), CudaOptions::from_env());
  // fn and params are never touched for an empty grid.
  CHECK_NOTHROW(launch(rt, nullptr, l, nullptr, {n}, &zero, nullptr));
  std::int64_t negative = -1000;
  CHECK_THROWS_WITH(launch(rt, nullptr, l, nullptr, {n}, &negative, nullptr),
                    Contains("kernel 'spindle_never_launched' with grid (-6, 1, 1), block (128, 1, 1)"));
  if (!cuda_available()) {
    std::int64_t some = 1000;
    CHECK_THROWS_AS(launch(rt, nullptr, l, nullptr, {n}, &some, nullptr), UnavailableError);
  }
}

namespace {

struct Axpy {
  CudaRuntime& rt;
  std::string symbol;
  std::shared_ptr<CudaModule> module;
  void* fn;
  ir::Var n{"n", DType::i64};
  codegen::CudaLaunch config;

  Axpy(CudaRuntime& r, const std::string& sym, const std::string& source, int block = 128)
      : rt(r), symbol(sym), module(r.load({source, sym, "axpy"})), fn(module->function(sym)) {
    config.symbol = sym;
    config.grid = {(ir::Expr(n) + (block - 1)) / ir::int_imm(block), ir::Expr(), ir::Expr()};
    config.block = {block, 1, 1};
  }

  void run(DeviceTensor<float>& y, const DeviceTensor<float>& x, float a, CUstream stream) {
    CUdeviceptr yp = y.device_ptr(), xp = x.device_ptr();
    long long count = y.size();
    void* params[] = {&yp, &xp, &a, &count};
    std::int64_t scalars[] = {count};
    launch(rt, fn, config, params, {n}, scalars, stream);
  }
};

}  // namespace

TEST_CASE("launch: axpy on the GPU, 10k launches without leaking device memory", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready() || !spindle::cuda::test::gpu_ready()) return;
  CudaRuntime rt(Options::from_env(), CudaOptions::from_env());
  Axpy axpy(rt, "spindle_test_axpy", spindle::cuda::test::axpy_source("spindle_test_axpy"));
  const std::int64_t n = 1000;
  Tensor<float> xh = Tensor<float>::random({n}, 1, -1.0, 1.0), yh = Tensor<float>::random({n}, 2, -1.0, 1.0);
  auto x = DeviceTensor<float>::from_host(xh);
  auto y = DeviceTensor<float>::from_host(yh);
  axpy.run(y, x, 2.0f, rt.stream().handle());
  rt.stream().synchronize();
  Tensor<float> got = y.to_host();
  for (std::int64_t i = 0; i < n; ++i) REQUIRE(got(i) == 2.0f * xh(i) + yh(i));

  // Warm up (the driver allocates some resources lazily), then 10k launches, each with a
  // freshly allocated and freed device tensor.
  auto before = rt.context().memory_info();
  for (int i = 0; i < 10000; ++i) {
    DeviceTensor<float> tmp({256}, rt.context());
    tmp.fill_zero(&rt.stream());
    axpy.run(tmp, x, 1.0f, rt.stream().handle());  // reads x[0..256)
  }
  rt.synchronize();
  auto after = rt.context().memory_info();
  INFO("free bytes before " << before.first << ", after " << after.first);
  CHECK(after.first + (4u << 20) >= before.first);  // 10k leaked tensors would be >= 10 MB
}

TEST_CASE("launch: errors name the kernel and the launch configuration (GPU)", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready() || !spindle::cuda::test::gpu_ready()) return;
  CudaRuntime rt(Options::from_env(), CudaOptions::from_env());
  auto x = DeviceTensor<float>::zeros({4096}, rt.context());
  auto y = DeviceTensor<float>::zeros({4096}, rt.context());

  SECTION("a block larger than the device allows is refused before the driver sees it") {
    Axpy axpy(rt, "spindle_test_axpy_big", spindle::cuda::test::axpy_source("spindle_test_axpy_big"), 2048);
    CHECK_THROWS_WITH(axpy.run(y, x, 1.0f, nullptr),
                      Contains("kernel 'spindle_test_axpy_big' with grid (2, 1, 1), block (2048, 1, 1)") &&
                          Contains("block dimension x = 2048 is outside [1, "));
  }
  SECTION("the driver's refusal is reported with the function's limits") {
    // __launch_bounds__(64): the compiled function accepts at most 64 threads per block.
    std::string source =
        "extern \"C\" __global__ void __launch_bounds__(64) spindle_test_bounded(float* __restrict__ y, "
        "const float* __restrict__ x, float a, long long n) {\n"
        "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) y[i] = a * x[i] + y[i];\n"
        "}\n";
    Axpy axpy(rt, "spindle_test_bounded", source, 256);
    try {
      axpy.run(y, x, 1.0f, nullptr);
      FAIL("a launch beyond __launch_bounds__ succeeded");
    } catch (const RuntimeError& e) {
      std::string what = e.what();
      CHECK_THAT(what, Contains("CUDA launch of kernel 'spindle_test_bounded' with grid (16, 1, 1), block (256, 1, 1), "
                                "0 bytes of static shared memory"));
      CHECK_THAT(what, Contains("cuLaunchKernel returned CUDA_ERROR_"));
      CHECK_THAT(what, Contains("allows at most 64 threads per block"));
    }
  }
}
