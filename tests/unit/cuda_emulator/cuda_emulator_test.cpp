// The CPU emulator of generated CUDA kernels (tests/support/cuda_emulator.hpp): hand-written
// kernels in the CUDA subset the emitter uses, checked against plain loops; barrier and warp
// divergence reported as RuntimeError; compile errors and invalid launch configurations.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>

#include "support/cuda_emulator.hpp"

using namespace spindle;
using spindle::test::CudaEmulator;
using Catch::Matchers::Contains;

namespace {

struct LaunchSpec {
  std::string symbol;
  std::array<int, 3> block;
};

codegen::CudaSource make_source(const std::string& name, const std::string& text, std::vector<std::string> types,
                                const std::vector<LaunchSpec>& launches) {
  codegen::CudaSource src;
  src.source = text;
  src.module_symbol = name;
  src.param_types = std::move(types);
  for (const auto& l : launches) {
    codegen::CudaLaunch launch;
    launch.symbol = l.symbol;
    launch.block = l.block;
    src.launches.push_back(launch);
  }
  return src;
}

// params[k] = &value of parameter k, as for cuLaunchKernel.
template <class... T>
std::array<void*, sizeof...(T)> params(T&... values) {
  return {static_cast<void*>(&values)...};
}

}  // namespace

TEST_CASE("emulated vector add with a guard, float scalar read from an int64 slot", "[cuda_emulator]") {
  auto src = make_source("vadd", R"(
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                                long long n, float alpha) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = __ldg(a + i) + alpha * b[i];
}
)",
                         {"const float*", "const float*", "float*", "long long", "float"}, {{"vadd", {128, 1, 1}}});
  CudaEmulator emu(src);
  const long long n = 1000;
  std::vector<float> a(n), b(n), c(n + 24, -7.0f);
  for (long long i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(3 * i + 1);
  }
  long long alpha_slot = 0;  // the argument binder's int64 slot, float in its leading bytes
  float alpha = 0.5f;
  std::memcpy(&alpha_slot, &alpha, sizeof alpha);
  const float* pa = a.data();
  const float* pb = b.data();
  float* pc = c.data();
  long long nn = n;
  auto p = params(pa, pb, pc, nn, alpha_slot);
  emu.launch(src.launches[0], {(n + 127) / 128, 1, 1}, p.data());
  for (long long i = 0; i < n; ++i) REQUIRE(c[i] == a[i] + 0.5f * b[i]);
  for (long long i = n; i < n + 24; ++i) CHECK(c[i] == -7.0f);  // the guard held (grid covers 1024)
}

TEST_CASE("emulated block reduction through __shared__ and __syncthreads over 256 threads", "[cuda_emulator]") {
  auto src = make_source("block_sum", R"(
extern "C" __global__ void block_sum(const float* __restrict__ a, float* __restrict__ out, long long n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  long long i = (long long)blockIdx.x * 256 + t;
  s[t] = i < n ? a[i] : 0.0f;
  __syncthreads();
#pragma unroll
  for (int o = 128; o > 0; o >>= 1) {
    if (t < o) s[t] += s[t + o];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void read_uninit(const float* __restrict__ a, float* __restrict__ out, long long n) {
  __shared__ float u[4];
  if (threadIdx.x == 0) out[blockIdx.x] = u[1];  // reads before any write in this block
  __syncthreads();
  u[threadIdx.x & 3] = 1.0f;
}
)",
                         {"const float*", "float*", "long long"},
                         {{"block_sum", {256, 1, 1}}, {"read_uninit", {256, 1, 1}}});
  CudaEmulator emu(src);
  CHECK(emu.shared_section_bytes() >= 256 * sizeof(float) + 4 * sizeof(float));
  long long n = 1000;
  std::vector<float> a(n), out(4, -1.0f);
  for (long long i = 0; i < n; ++i) a[i] = static_cast<float>((i * 7) % 13);
  const float* pa = a.data();
  float* po = out.data();
  auto p = params(pa, po, n);
  emu.launch(src.launches[0], {4, 1, 1}, p.data());
  for (int blk = 0; blk < 4; ++blk) {
    float expect = 0;
    for (long long i = blk * 256; i < std::min<long long>(n, (blk + 1) * 256); ++i) expect += a[i];
    CHECK(out[blk] == expect);
  }

  SECTION("shared memory is filled with NaN before every block (CUDA does not zero it)") {
    std::fill(out.begin(), out.end(), 0.0f);
    emu.launch(src.launches[1], {3, 1, 1}, p.data());
    for (int blk = 0; blk < 3; ++blk) CHECK(std::isnan(out[blk]));  // not block 0's leftover 1.0f
  }
}

TEST_CASE("emulated warp shuffles follow the shfl.sync lane rules", "[cuda_emulator]") {
  auto src = make_source("shuffles", R"(
extern "C" __global__ void shuffles(const float* __restrict__ a, float* __restrict__ xs, double* __restrict__ ds,
                                    long long* __restrict__ ls, int* __restrict__ is, long long width) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int w = (int)width;
  float v = a[i];
  for (int m = w / 2; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m, w);
  xs[i] = v;
  double d = (double)a[i];
  for (int o = w / 2; o > 0; o >>= 1) d += __shfl_down_sync(0xffffffffu, d, o, w);
  ds[i] = d;
  long long q = (long long)i * 1000003LL;
  __syncwarp();
  ls[i] = __shfl_xor_sync(0xffffffffu, q, 1, w);
  is[i] = __shfl_down_sync(0xffffffffu, i, 3, w);
}
)",
                         {"const float*", "float*", "double*", "long long*", "int*", "long long"},
                         {{"shuffles", {64, 1, 1}}});
  CudaEmulator emu(src);
  long long width = GENERATE(32, 8);
  INFO("width " << width);
  const int total = 128;
  std::vector<float> a(total), xs(total);
  std::vector<double> ds(total);
  std::vector<long long> ls(total);
  std::vector<int> is(total);
  for (int i = 0; i < total; ++i) a[i] = static_cast<float>((i * 5) % 17 - 8);
  const float* pa = a.data();
  float* px = xs.data();
  double* pd = ds.data();
  long long* pl = ls.data();
  int* pi = is.data();
  auto p = params(pa, px, pd, pl, pi, width);
  emu.launch(src.launches[0], {2, 1, 1}, p.data());

  const int w = static_cast<int>(width);
  // Reference: the xor butterfly gives every lane its group's sum.
  for (int i = 0; i < total; ++i) {
    int first = i / w * w;
    float sum = 0;
    for (int k = first; k < first + w; ++k) sum += a[k];
    REQUIRE(xs[i] == sum);
  }
  // Reference: the down loop, lanes past the end of their group read their own value.
  std::vector<double> d(a.begin(), a.end());
  for (int o = w / 2; o > 0; o >>= 1) {
    std::vector<double> next(total);
    for (int i = 0; i < total; ++i) {
      int lane_in_group = i % w;
      next[i] = d[i] + (lane_in_group + o < w ? d[i + o] : d[i]);
    }
    d = next;
  }
  for (int i = 0; i < total; ++i) REQUIRE(ds[i] == d[i]);
  for (int i = 0; i < total; i += w) CHECK(ds[i] == static_cast<double>(xs[i]));  // group leaders hold the sum
  for (int i = 0; i < total; ++i) {
    CHECK(ls[i] == static_cast<long long>(i ^ 1) * 1000003LL);
    CHECK(is[i] == (i % w + 3 < w ? i + 3 : i));
  }
}

TEST_CASE("emulated atomics from many blocks into one value", "[cuda_emulator]") {
  auto src = make_source("atomics", R"(
static __device__ __forceinline__ void atomic_max_float(float* p, float v) {
  unsigned int* u = (unsigned int*)p;
  unsigned int old = *u;
  while (__uint_as_float(old) < v) {
    unsigned int seen = atomicCAS(u, old, __float_as_uint(v));
    if (seen == old) break;
    old = seen;
  }
}
extern "C" __global__ void atomics(const float* __restrict__ a, float* __restrict__ fsum, double* __restrict__ dsum,
                                   int* __restrict__ imax, float* __restrict__ fmax_out,
                                   unsigned long long* __restrict__ count) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(fsum, a[i]);
  atomicAdd(dsum, 0.25);
  atomicMax(imax, i);
  atomic_max_float(fmax_out, a[i]);
  atomicAdd(count, 1ull);
}
)",
                         {"const float*", "float*", "double*", "int*", "float*", "unsigned long long*"},
                         {{"atomics", {128, 1, 1}}});
  CudaEmulator emu(src);
  const int blocks = 64, total = blocks * 128;
  std::vector<float> a(total, 1.0f);
  a[5000] = 42.0f;
  float fsum = 0, fmax_v = -1.0f;
  double dsum = 0;
  int imax = -1;
  unsigned long long count = 0;
  const float* pa = a.data();
  float* pfs = &fsum;
  double* pds = &dsum;
  int* pim = &imax;
  float* pfm = &fmax_v;
  unsigned long long* pc = &count;
  auto p = params(pa, pfs, pds, pim, pfm, pc);
  emu.launch(src.launches[0], {blocks, 1, 1}, p.data());
  CHECK(fsum == static_cast<float>(total - 1 + 42));
  CHECK(dsum == 0.25 * total);
  CHECK(imax == total - 1);
  CHECK(fmax_v == 42.0f);
  CHECK(count == static_cast<unsigned long long>(total));
}

TEST_CASE("emulated barrier and warp divergence raise RuntimeError", "[cuda_emulator]") {
  auto src = make_source("diverge", R"(
extern "C" __global__ void early_return(float* __restrict__ x, long long n) {
  __shared__ float s[64];
  if (threadIdx.x == 5 && blockIdx.x == 1) return;
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[63 - threadIdx.x];
}
extern "C" __global__ void two_barriers(float* __restrict__ x, long long n) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
}
extern "C" __global__ void shuffle_after_exit(float* __restrict__ x, long long n) {
  if (threadIdx.x == 40) return;
  x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1, 32);
}
extern "C" __global__ void shuffle_vs_barrier(float* __restrict__ x, long long n) {
  if (threadIdx.x < 16) x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, x[threadIdx.x], 1, 16);
  __syncthreads();
}
extern "C" __global__ void reverse(float* __restrict__ x, long long n) {
  __shared__ float s[64];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[63 - threadIdx.x];
}
)",
                         {"float*", "long long"},
                         {{"early_return", {64, 1, 1}},
                          {"two_barriers", {64, 1, 1}},
                          {"shuffle_after_exit", {64, 1, 1}},
                          {"shuffle_vs_barrier", {64, 1, 1}},
                          {"reverse", {64, 1, 1}}});
  CudaEmulator emu(src);
  std::vector<float> x(64);
  std::iota(x.begin(), x.end(), 0.0f);
  float* px = x.data();
  long long n = 64;
  auto p = params(px, n);

  SECTION("a thread returns before __syncthreads") {
    REQUIRE_THROWS_MATCHES(emu.launch(src.launches[0], {2, 1, 1}, p.data()), RuntimeError,
                           Catch::Matchers::Predicate<RuntimeError>([](const RuntimeError& e) {
                             std::string m = e.what();
                             return m.find("barrier divergence in kernel 'early_return' block (1,0,0)") == 0 &&
                                    m.find("thread (5,0,0) exited while thread (0,0,0) waits at __syncthreads (line 6)") !=
                                        std::string::npos;
                           }));
  }
  SECTION("threads wait at different __syncthreads") {
    CHECK_THROWS_WITH(emu.launch(src.launches[1], {1, 1, 1}, p.data()),
                      Contains("barrier divergence") && Contains("on line 11") && Contains("on line 13"));
  }
  SECTION("a shuffle whose width group has an exited lane") {
    CHECK_THROWS_WITH(emu.launch(src.launches[2], {1, 1, 1}, p.data()),
                      Contains("warp divergence in kernel 'shuffle_after_exit'") &&
                          Contains("lane 8 (thread (40,0,0)) has exited"));
  }
  SECTION("lanes of one warp at a shuffle and at __syncthreads") {
    CHECK_THROWS_WITH(emu.launch(src.launches[3], {1, 1, 1}, p.data()),
                      Contains("warp divergence") && Contains("__shfl_xor_sync (width 16") &&
                          Contains("__syncthreads (line 22)"));
  }
  // After any of the errors above, the emulator still runs a correct kernel.
  std::iota(x.begin(), x.end(), 0.0f);
  emu.launch(src.launches[4], {1, 1, 1}, p.data());
  for (int i = 0; i < 64; ++i) REQUIRE(x[i] == static_cast<float>(63 - i));
}

TEST_CASE("emulated multi-dimensional blocks: threadIdx.y, warps of linear ids, shared tiles", "[cuda_emulator]") {
  auto src = make_source("tiles", R"(
extern "C" __global__ void tiles(const float* __restrict__ in, float* __restrict__ out, float* __restrict__ flipped,
                                 float* __restrict__ row_sums, long long W) {
  __shared__ float tile[4][32];
  long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  long long y = (long long)blockIdx.y * blockDim.y + threadIdx.y;
  float v = in[y * W + x];
  out[y * W + x] = 2.0f * v + (float)threadIdx.y;
  tile[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  flipped[y * W + x] = tile[3 - threadIdx.y][31 - threadIdx.x];
  float s = v;
  for (int m = 16; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m, 32);  // one warp = one row y
  if (threadIdx.x == 0) row_sums[y * gridDim.x + blockIdx.x] = s;
}
)",
                         {"const float*", "float*", "float*", "float*", "long long"}, {{"tiles", {32, 4, 1}}});
  CudaEmulator emu(src);
  const long long W = 64, H = 12;
  std::vector<float> in(W * H), out(W * H), flipped(W * H), row_sums(H * 2);
  for (long long i = 0; i < W * H; ++i) in[i] = static_cast<float>((i * 3) % 29);
  const float* pin = in.data();
  float* po = out.data();
  float* pf = flipped.data();
  float* pr = row_sums.data();
  long long w = W;
  auto p = params(pin, po, pf, pr, w);
  emu.launch(src.launches[0], {2, 3, 1}, p.data());
  for (long long y = 0; y < H; ++y)
    for (long long x = 0; x < W; ++x) {
      REQUIRE(out[y * W + x] == 2.0f * in[y * W + x] + static_cast<float>(y % 4));
      long long sy = y / 4 * 4 + (3 - y % 4), sx = x / 32 * 32 + (31 - x % 32);
      REQUIRE(flipped[y * W + x] == in[sy * W + sx]);
    }
  for (long long y = 0; y < H; ++y)
    for (long long bx = 0; bx < 2; ++bx) {
      float sum = 0;
      for (long long x = bx * 32; x < bx * 32 + 32; ++x) sum += in[y * W + x];
      CHECK(row_sums[y * 2 + bx] == sum);
    }
}

TEST_CASE("emulated two-launch source: the second launch reads what the first wrote", "[cuda_emulator]") {
  auto src = make_source("two_step", R"(
static __device__ __forceinline__ float square(float v) { return v * v; }
extern "C" __global__ void step1(const float* __restrict__ a, float* __restrict__ tmp, float* __restrict__ out,
                                 long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tmp[i] = square(a[i]);
}
extern "C" __global__ void step2(const float* __restrict__ a, float* __restrict__ tmp, float* __restrict__ out,
                                 long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tmp[i] + tmp[n - 1 - i] + sqrtf(fabsf(a[i]));
}
)",
                         {"const float*", "float*", "float*", "long long"},
                         {{"step1", {64, 1, 1}}, {"step2", {32, 2, 1}}});
  CudaEmulator emu(src);
  long long n = 300;
  std::vector<float> a(n), tmp(n), out(n);
  for (long long i = 0; i < n; ++i) a[i] = static_cast<float>(i % 11) - 3.0f;
  const float* pa = a.data();
  float* pt = tmp.data();
  float* po = out.data();
  auto p = params(pa, pt, po, n);
  emu.launch(src.launches[0], {(n + 63) / 64, 1, 1}, p.data());
  // step2's block is (32,2,1): 64 threads, but it indexes with blockDim.x only, so it
  // needs twice the blocks and its y=1 threads recompute the same elements.
  emu.launch(src.launches[1], {(n + 31) / 32, 1, 1}, p.data());
  for (long long i = 0; i < n; ++i)
    REQUIRE(out[i] == a[i] * a[i] + a[n - 1 - i] * a[n - 1 - i] + std::sqrt(std::fabs(a[i])));
}

TEST_CASE("emulated modules: compile errors and invalid launches", "[cuda_emulator]") {
  SECTION("a kernel that does not compile raises CompileError with the log") {
    auto src = make_source("broken", "extern \"C\" __global__ void broken(float* x) {\n  x[0] = undeclared_thing;\n}\n",
                           {"float*"}, {{"broken", {32, 1, 1}}});
    try {
      CudaEmulator emu(src);
      FAIL("no CompileError");
    } catch (const CompileError& e) {
      CHECK_THAT(std::string(e.what()), Contains("compiling module 'broken'"));
      CHECK_THAT(e.log(), Contains("undeclared_thing") && Contains("broken.cu:2"));
      CHECK_THAT(e.source(), Contains("spindle CUDA emulator shim"));
    }
  }
  SECTION("param_types that differ from the kernel's signature") {
    auto src = make_source("mismatch", "extern \"C\" __global__ void k(float* x, long long n) { x[0] = (float)n; }\n",
                           {"float*", "int"}, {{"k", {32, 1, 1}}});
    CHECK_THROWS_MATCHES(CudaEmulator(src), CompileError,
                         Catch::Matchers::Predicate<CompileError>([](const CompileError& e) {
                           return e.log().find("parameter types differ from CudaSource::param_types") !=
                                  std::string::npos;
                         }));
  }
  SECTION("launch configurations CUDA would reject") {
    auto src = make_source("cfg", "extern \"C\" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n",
                           {"float*"}, {{"k", {32, 1, 1}}});
    CudaEmulator emu(src);
    std::vector<float> x(32, 0.0f);
    float* px = x.data();
    auto p = params(px);
    codegen::CudaLaunch big = src.launches[0];
    big.block = {2048, 1, 1};
    CHECK_THROWS_WITH(emu.launch(big, {1, 1, 1}, p.data()), Contains("invalid block (2048,1,1)"));
    CHECK_THROWS_WITH(emu.launch(src.launches[0], {0, 1, 1}, p.data()), Contains("invalid grid (0,1,1)"));
    codegen::CudaLaunch other = src.launches[0];
    other.symbol = "nope";
    CHECK_THROWS_AS(emu.launch(other, {1, 1, 1}, p.data()), UserError);
    emu.launch(src.launches[0], {1, 1, 1}, p.data());
    CHECK(std::count(x.begin(), x.end(), 1.0f) == 32);
  }
}
