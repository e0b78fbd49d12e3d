// A CPU emulator for the CUDA kernels Spindle generates, so that machines with no GPU (CI,
// developers) can check what generated CUDA code computes.
//
//   CudaEmulator emu(cuda_source);                  // compiles; CompileError with the log
//   void* params[] = {&a, &c, &n, &alpha};          // params[k] -> value of parameter k
//   emu.launch(cuda_source.launches[0], {grid_x, grid_y, grid_z}, params);
//
// How: a shim (kCudaEmulatorShim) that defines the CUDA subset the emitter uses for the host
// compiler is put in front of CudaSource::source, a trampoline per launch symbol (generated
// from CudaSource::param_types, checked against the kernel's real signature) after it, and
// the whole is compiled as C++17 by EmulatorOptions::cxx (default "c++") into a shared
// object, loaded with the system engine's loader (memfd + dlopen).
//
// Execution model (the point of the emulator is to be faithful here):
// - Blocks run one after another (z, then y, then x outermost to innermost). The threads of a
//   block are cooperative fibers (ucontext, one private stack per thread, allocated once and
//   reused, with a guard page below each); a thread runs until it reaches a barrier, a warp
//   operation or its end, then the next thread runs. Threads run in linear-id order
//   (x + y*Bx + z*Bx*By).
// - __syncthreads(): every thread of the block must arrive, at the same __syncthreads (same
//   source line). A thread that exits while others wait at a barrier, or threads waiting at
//   different barriers, is "barrier divergence": launch() throws spindle::RuntimeError naming
//   the kernel, the block, the threads and the lines.
// - Warps are 32 consecutive linear thread ids. __syncwarp() waits for every live (not exited)
//   lane of the warp. __shfl_{xor,down,up,}_sync deposit the lane's value and wait for every
//   live lane of the warp; every lane of each width group (and each lane read from) must take
//   part (an exited or nonexistent lane is an error), all lanes must use the same operation,
//   width and value size, and the source lane follows the PTX shfl.sync rules (xor: lane ^
//   mask, valid while <= the group's last lane; down: lane + delta, same bound; up: lane -
//   delta, >= the group's first lane; idx: group start + (src & (width-1)); otherwise the
//   lane's own value). A warp with lanes at a warp operation and lanes at __syncthreads is
//   an error. Only the full mask 0xffffffff is emulated.
// - __shared__ variables become function-local `static`s placed in one ELF section
//   ("spindle_emu_shared"): one copy shared by the threads of the block, exact because blocks
//   are sequential. CUDA does not initialise shared memory, so the section is filled with
//   0xFF bytes (a NaN for float/double, -1 for integers) before every block: a kernel must
//   write shared memory before reading it in each block, and one that does not reads NaN.
//   `extern __shared__` (dynamic shared memory) is not supported.
// - threadIdx/blockIdx/blockDim/gridDim are globals of the shared object that the scheduler
//   writes before it resumes a fiber. Atomics are plain read-modify-write functions (all
//   fibers run on one OS thread and switch only at barriers and warp operations), so they
//   are exact; races on plain writes are not detected, but a kernel that reads another
//   thread's shared data without a barrier sees the (forward) run order, often garbage.
// - A launch checks the CUDA limits of its configuration: 1..1024 threads per block (x, y <=
//   1024, z <= 64), grid x in 1..2^31-1 and y, z in 1..65535 (an empty grid is an error as in
//   CUDA: skip such launches), static shared memory <= 48 KiB.
// - Kernel local arrays live on the fiber stack (EmulatorOptions::stack_bytes, 64 KiB); an
//   overflow hits the guard page (SIGSEGV). One launch at a time per emulator (a mutex).
//
// Test support only (tests/support): the shim defines what the emitter uses, not all of CUDA.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "spindle/codegen/cuda_abi.hpp"
#include "spindle/runtime/posix.hpp"
#include "spindle/runtime/system_engine.hpp"
#include "spindle/support/error.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define SPINDLE_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPINDLE_EMU_ASAN 1
#endif
#endif
#ifdef SPINDLE_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace spindle::test {

// The CUDA subset for the host compiler. Everything here must stay self-contained (no
// #include) so that an emulated module compiles in a fraction of a second. The layout of
// spindle_emu_hooks_t / spindle_emu_module_t is mirrored by cuda_emu_detail::Hooks / Module.
inline constexpr const char* kCudaEmulatorShim = R"SHIM(// ---- spindle CUDA emulator shim ----
typedef unsigned long long spindle_emu_u64;
struct uint3 { unsigned int x, y, z; };
struct dim3 { unsigned int x, y, z; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return double2{x, y}; }
static inline int2 make_int2(int x, int y) { return int2{x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static __attribute__((section("spindle_emu_shared")))

struct spindle_emu_hooks_t {
  void* ctx;
  void (*sync_threads)(void* ctx, int line);
  void (*sync_warp)(void* ctx, unsigned mask, int line);
  spindle_emu_u64 (*shuffle)(void* ctx, int kind, unsigned mask, spindle_emu_u64 bits, int size, int arg,
                             int width, int line);
};
struct spindle_emu_module_t {
  int version;
  uint3* thread_idx;
  uint3* block_idx;
  dim3* block_dim;
  dim3* grid_dim;
  spindle_emu_hooks_t* hooks;
  unsigned char* shared_begin;
  unsigned char* shared_end;
  int launch_count;
  const char* const* symbols;
  void (*const* trampolines)(void* const*);
};

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
spindle_emu_hooks_t spindle_emu_hooks;
static constexpr int warpSize = 32;
__attribute__((section("spindle_emu_shared"), used)) static unsigned char spindle_emu_shared_anchor[1];
extern "C" unsigned char __start_spindle_emu_shared[], __stop_spindle_emu_shared[];

struct spindle_emu_syncthreads_at {
  int line;
  void operator()() const { spindle_emu_hooks.sync_threads(spindle_emu_hooks.ctx, line); }
};
struct spindle_emu_syncwarp_at {
  int line;
  void operator()(unsigned mask = 0xffffffffu) const { spindle_emu_hooks.sync_warp(spindle_emu_hooks.ctx, mask, line); }
};
template <class T>
static inline T spindle_emu_shuffle(int line, int kind, unsigned mask, T v, int arg, int width) {
  static_assert(sizeof(T) <= 8, "spindle CUDA emulator: shuffles move values of at most 8 bytes");
  spindle_emu_u64 bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = spindle_emu_hooks.shuffle(spindle_emu_hooks.ctx, kind, mask, bits, (int)sizeof(T), arg, width, line);
  T r;
  __builtin_memcpy(&r, &bits, sizeof(T));
  return r;
}
#define SPINDLE_EMU_SHUFFLE(NAME, KIND)                                                      \
  struct NAME {                                                                              \
    int line;                                                                                \
    template <class T>                                                                       \
    T operator()(unsigned mask, T v, int arg, int width = 32) const {                        \
      return spindle_emu_shuffle(line, KIND, mask, v, arg, width);                          \
    }                                                                                        \
  };
SPINDLE_EMU_SHUFFLE(spindle_emu_shfl_xor_at, 0)
SPINDLE_EMU_SHUFFLE(spindle_emu_shfl_down_at, 1)
SPINDLE_EMU_SHUFFLE(spindle_emu_shfl_up_at, 2)
SPINDLE_EMU_SHUFFLE(spindle_emu_shfl_idx_at, 3)
#undef SPINDLE_EMU_SHUFFLE
#define __syncthreads spindle_emu_syncthreads_at{__LINE__}
#define __syncwarp spindle_emu_syncwarp_at{__LINE__}
#define __shfl_xor_sync spindle_emu_shfl_xor_at{__LINE__}
#define __shfl_down_sync spindle_emu_shfl_down_at{__LINE__}
#define __shfl_up_sync spindle_emu_shfl_up_at{__LINE__}
#define __shfl_sync spindle_emu_shfl_idx_at{__LINE__}
static inline void __threadfence() {}
static inline void __threadfence_block() {}

// Atomics: plain read-modify-write (fibers switch only at barriers and warp operations).
static inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p = o + v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p = (int)((unsigned)o + (unsigned)v); return o; }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline spindle_emu_u64 atomicAdd(spindle_emu_u64* p, spindle_emu_u64 v) { spindle_emu_u64 o = *p; *p = o + v; return o; }
static inline int atomicCAS(int* p, int cmp, int v) { int o = *p; if (o == cmp) *p = v; return o; }
static inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) { unsigned o = *p; if (o == cmp) *p = v; return o; }
static inline spindle_emu_u64 atomicCAS(spindle_emu_u64* p, spindle_emu_u64 cmp, spindle_emu_u64 v) { spindle_emu_u64 o = *p; if (o == cmp) *p = v; return o; }
static inline int atomicExch(int* p, int v) { int o = *p; *p = v; return o; }
static inline unsigned atomicExch(unsigned* p, unsigned v) { unsigned o = *p; *p = v; return o; }
static inline float atomicExch(float* p, float v) { float o = *p; *p = v; return o; }
static inline spindle_emu_u64 atomicExch(spindle_emu_u64* p, spindle_emu_u64 v) { spindle_emu_u64 o = *p; *p = v; return o; }
static inline int atomicMax(int* p, int v) { int o = *p; *p = o > v ? o : v; return o; }
static inline unsigned atomicMax(unsigned* p, unsigned v) { unsigned o = *p; *p = o > v ? o : v; return o; }
static inline long long atomicMax(long long* p, long long v) { long long o = *p; *p = o > v ? o : v; return o; }
static inline int atomicMin(int* p, int v) { int o = *p; *p = o < v ? o : v; return o; }
static inline unsigned atomicMin(unsigned* p, unsigned v) { unsigned o = *p; *p = o < v ? o : v; return o; }
static inline long long atomicMin(long long* p, long long v) { long long o = *p; *p = o < v ? o : v; return o; }

// Bit casts and loads.
static inline unsigned __float_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
static inline int __float_as_int(float f) { int u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
static inline long long __double_as_longlong(double d) { long long u; __builtin_memcpy(&u, &d, 8); return u; }
static inline double __longlong_as_double(long long u) { double d; __builtin_memcpy(&d, &u, 8); return d; }
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __popcll(spindle_emu_u64 v) { return __builtin_popcountll(v); }
static inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz((unsigned)v); }
static inline int __ffs(int v) { return __builtin_ffs(v); }

// Math (libm; the driver links it).
extern "C" {
float expf(float) noexcept; float logf(float) noexcept; float sqrtf(float) noexcept; float fabsf(float) noexcept;
float tanhf(float) noexcept; float powf(float, float) noexcept; float fminf(float, float) noexcept;
float fmaxf(float, float) noexcept; float exp2f(float) noexcept; float log2f(float) noexcept;
float floorf(float) noexcept; float ceilf(float) noexcept; float fmaf(float, float, float) noexcept;
float sinf(float) noexcept; float cosf(float) noexcept; float erff(float) noexcept;
float expm1f(float) noexcept; float log1pf(float) noexcept;
double exp(double) noexcept; double log(double) noexcept; double sqrt(double) noexcept; double fabs(double) noexcept;
double tanh(double) noexcept; double pow(double, double) noexcept; double fmin(double, double) noexcept;
double fmax(double, double) noexcept; double exp2(double) noexcept; double log2(double) noexcept;
double floor(double) noexcept; double ceil(double) noexcept; double fma(double, double, double) noexcept;
double sin(double) noexcept; double cos(double) noexcept; double erf(double) noexcept;
double expm1(double) noexcept; double log1p(double) noexcept;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __expf(float x) { return expf(x); }
static inline float __logf(float x) { return logf(x); }
static inline float __fdividef(float a, float b) { return a / b; }
#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
// ---- end of shim ----
)SHIM";

struct EmulatorOptions {
  std::string cxx = "c++";                       // host C++ compiler (split on spaces: "ccache c++")
  std::vector<std::string> flags = {"-O2"};      // added to the fixed flags below
  std::size_t stack_bytes = 64 * 1024;           // per emulated thread
};

namespace cuda_emu_detail {

inline constexpr const char* kFixedFlags[] = {"-std=c++17", "-fPIC", "-shared", "-fvisibility=hidden",
                                              "-fno-strict-aliasing", "-fno-math-errno",
                                              "-Wno-unknown-pragmas"};
inline constexpr int kVersion = 1;
inline constexpr int kWarp = 32;

// Mirrors of the shim's structs (plain C layout).
struct Dim {
  unsigned x, y, z;
};
struct Hooks {
  void* ctx;
  void (*sync_threads)(void* ctx, int line);
  void (*sync_warp)(void* ctx, unsigned mask, int line);
  unsigned long long (*shuffle)(void* ctx, int kind, unsigned mask, unsigned long long bits, int size, int arg,
                                int width, int line);
};
struct Module {
  int version;
  Dim* thread_idx;
  Dim* block_idx;
  Dim* block_dim;
  Dim* grid_dim;
  Hooks* hooks;
  unsigned char* shared_begin;
  unsigned char* shared_end;
  int launch_count;
  const char* const* symbols;
  void (*const* trampolines)(void* const*);
};

inline const char* shuffle_name(int kind) {
  switch (kind) {
    case 0: return "__shfl_xor_sync";
    case 1: return "__shfl_down_sync";
    case 2: return "__shfl_up_sync";
    case 3: return "__shfl_sync";
    default: return "__syncwarp";
  }
}

inline constexpr int kSyncWarp = 4;

// The trampolines and the module descriptor, appended after the kernel source.
inline std::string trampolines(const codegen::CudaSource& src, std::vector<std::string>& symbols) {
  std::string params, call_args, types_text;
  for (std::size_t k = 0; k < src.param_types.size(); ++k) {
    const std::string& t = src.param_types[k];
    params += (k ? ", " : "") + t;
    types_text += (k ? ", " : "") + t;
    call_args += message(k ? ", " : "", "*static_cast<spindle_emu_arg<", t, ">>(p[", k, "])");
  }
  std::string out =
      "\n#line 1 \"spindle_emu_trampolines\"\n"
      "template <class T> using spindle_emu_arg = T*;\n"
      "template <class A, class B> struct spindle_emu_same { static constexpr bool value = false; };\n"
      "template <class A> struct spindle_emu_same<A, A> { static constexpr bool value = true; };\n";
  for (const auto& l : src.launches)
    if (std::find(symbols.begin(), symbols.end(), l.symbol) == symbols.end()) symbols.push_back(l.symbol);
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const std::string& s = symbols[i];
    out += message("static_assert(spindle_emu_same<decltype(&", s, "), void (*)(", params,
                   ")>::value, \"kernel '", s, "': its parameter types differ from CudaSource::param_types (",
                   types_text, ")\");\n");
    out += message("static void spindle_emu_tramp_", i, "(void* const* p) { ", s, "(", call_args, "); }\n");
  }
  out += "static const char* const spindle_emu_symbols[] = {";
  for (const auto& s : symbols) out += "\"" + s + "\", ";
  out += "nullptr};\nstatic void (*const spindle_emu_trampolines[])(void* const*) = {";
  for (std::size_t i = 0; i < symbols.size(); ++i) out += message("spindle_emu_tramp_", i, ", ");
  out += message(
      "nullptr};\n"
      "extern \"C\" __attribute__((visibility(\"default\"))) const spindle_emu_module_t* spindle_emu_module_info() {\n"
      "  static const spindle_emu_module_t info = {",
      kVersion, ", &threadIdx, &blockIdx, &blockDim, &gridDim, &spindle_emu_hooks,\n"
      "      __start_spindle_emu_shared, __stop_spindle_emu_shared, ", symbols.size(),
      ", spindle_emu_symbols, spindle_emu_trampolines};\n"
      "  return &info;\n}\n");
  return out;
}

}  // namespace cuda_emu_detail

class CudaEmulator {
 public:
  explicit CudaEmulator(const codegen::CudaSource& src, EmulatorOptions options = {})
      : src_(src), options_(std::move(options)) {
    std::vector<std::string> symbols;
    std::string module_name = src.module_symbol.empty() ? std::string("cuda_module") : src.module_symbol;
    full_source_ = std::string(kCudaEmulatorShim) + "#line 1 \"" + module_name + ".cu\"\n" + src.source + "\n" +
                   cuda_emu_detail::trampolines(src, symbols);
    std::vector<std::uint8_t> so = compile(module_name);
    runtime::SystemEngine loader{Options{}};
    module_ = loader.load(so, runtime::CompileRequest{full_source_, "spindle_emu_module_info", module_name});
    auto info_fn = reinterpret_cast<const cuda_emu_detail::Module* (*)()>(module_->entry());
    info_ = info_fn();
    SPINDLE_CHECK(info_ && info_->version == cuda_emu_detail::kVersion &&
                      info_->launch_count == static_cast<int>(symbols.size()),
                  InternalError, "CUDA emulator: the module descriptor of '", module_name,
                  "' does not match the emulator (shim version mismatch)");
    info_->hooks->ctx = this;
    info_->hooks->sync_threads = &CudaEmulator::hook_sync_threads;
    info_->hooks->sync_warp = &CudaEmulator::hook_sync_warp;
    info_->hooks->shuffle = &CudaEmulator::hook_shuffle;
    page_ = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    stack_bytes_ = (std::max<std::size_t>(options_.stack_bytes, 16384) + page_ - 1) / page_ * page_;
  }

  CudaEmulator(const CudaEmulator&) = delete;
  CudaEmulator& operator=(const CudaEmulator&) = delete;
  ~CudaEmulator() {
    if (stacks_) ::munmap(stacks_, stacks_size_);
  }

  // Runs one launch: `grid` blocks (already evaluated), l.block threads each; params[k]
  // points at the value of kernel parameter k (as for cuLaunchKernel). Throws RuntimeError
  // for an invalid configuration, barrier or warp divergence.
  void launch(const codegen::CudaLaunch& l, std::array<std::int64_t, 3> grid, void* const* params) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string kernel = l.symbol;
    int index = -1;
    for (int i = 0; i < info_->launch_count; ++i)
      if (l.symbol == info_->symbols[i]) index = i;
    SPINDLE_CHECK(index >= 0, UserError, "CUDA emulator: kernel '", kernel, "' is not a launch of module '",
                  src_.module_symbol, "'\n  hint: launch one of CudaSource::launches");
    const auto& b = l.block;
    std::int64_t threads = std::int64_t{b[0]} * b[1] * b[2];
    SPINDLE_CHECK(b[0] >= 1 && b[1] >= 1 && b[2] >= 1 && b[0] <= 1024 && b[1] <= 1024 && b[2] <= 64 && threads <= 1024,
                  RuntimeError, "CUDA emulator: invalid block (", b[0], ",", b[1], ",", b[2], ") for kernel '",
                  kernel, "': CUDA needs 1..1024 threads per block with x,y <= 1024 and z <= 64");
    SPINDLE_CHECK(grid[0] >= 1 && grid[1] >= 1 && grid[2] >= 1 && grid[0] <= 2147483647 && grid[1] <= 65535 &&
                      grid[2] <= 65535,
                  RuntimeError, "CUDA emulator: invalid grid (", grid[0], ",", grid[1], ",", grid[2],
                  ") for kernel '", kernel, "': CUDA needs x in 1..2^31-1 and y,z in 1..65535",
                  "\n  hint: an empty grid is a launch error in CUDA too; skip launches with no work");
    SPINDLE_CHECK(l.static_shared_bytes >= 0 && l.static_shared_bytes <= 48 * 1024, RuntimeError,
                  "CUDA emulator: kernel '", kernel, "' declares ", l.static_shared_bytes,
                  " bytes of static shared memory; CUDA allows at most 49152");
    SPINDLE_CHECK(params != nullptr || src_.param_types.empty(), UserError, "CUDA emulator: kernel '", kernel,
                  "' takes ", src_.param_types.size(), " parameters but params is null");

    kernel_ = kernel;
    trampoline_ = info_->trampolines[index];
    params_ = params;
    block_ = {static_cast<unsigned>(b[0]), static_cast<unsigned>(b[1]), static_cast<unsigned>(b[2])};
    nthreads_ = static_cast<int>(threads);
    ensure_stacks(nthreads_);
    *info_->block_dim = block_;
    *info_->grid_dim = {static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                        static_cast<unsigned>(grid[2])};
    for (std::int64_t bz = 0; bz < grid[2]; ++bz)
      for (std::int64_t by = 0; by < grid[1]; ++by)
        for (std::int64_t bx = 0; bx < grid[0]; ++bx) {
          *info_->block_idx = {static_cast<unsigned>(bx), static_cast<unsigned>(by), static_cast<unsigned>(bz)};
          run_block();
          if (!error_.empty()) {
            std::string e = std::move(error_);
            error_.clear();
            throw RuntimeError(e);
          }
        }
  }

  // The translation unit handed to the host compiler (shim + kernel source + trampolines).
  const std::string& full_source() const { return full_source_; }
  // Bytes of the __shared__ section (all kernels of the module together, plus 1 anchor byte).
  std::size_t shared_section_bytes() const {
    return static_cast<std::size_t>(info_->shared_end - info_->shared_begin);
  }

 private:
  enum class Wait : std::uint8_t { ready, barrier, warp, exited };
  struct Lane {
    ucontext_t ctx;
    Wait wait = Wait::ready;
    int line = 0;
    int kind = 0;  // warp operation: shuffle kind 0..3, or kSyncWarp
    int size = 0, arg = 0, width = 0;
    unsigned long long bits = 0, result = 0;
    void* fake_stack = nullptr;  // ASan fiber bookkeeping
  };

  std::vector<std::uint8_t> compile(const std::string& module_name) {
    std::vector<std::string> argv = runtime::detail::split_command(options_.cxx);
    if (argv.empty()) argv.push_back("c++");
    std::string flags_text;
    for (const char* f : cuda_emu_detail::kFixedFlags) {
      argv.push_back(f);
      flags_text += std::string(flags_text.empty() ? "" : " ") + f;
    }
    for (const auto& f : options_.flags) {
      argv.push_back(f);
      flags_text += " " + f;
    }
    runtime::posix::TempDir dir("spindle-cuda-emu-");
    SPINDLE_CHECK(!dir.path().empty(), IOError, "CUDA emulator: cannot create a temporary directory under /tmp: ",
                  runtime::posix::errno_text(dir.error()));
    std::string source_path = dir.path() + "/" + "kernel.cpp", object_path = dir.path() + "/kernel.so";
    {
      int fd = ::open(source_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      bool ok = fd >= 0 && runtime::posix::write_all(fd, full_source_.data(), full_source_.size());
      int err = errno;
      if (fd >= 0) ::close(fd);
      SPINDLE_CHECK(ok, IOError, "CUDA emulator: cannot write '", source_path, "': ", runtime::posix::errno_text(err));
    }
    argv.insert(argv.end(), {"-o", object_path, source_path});
    runtime::posix::ProcessResult r = runtime::posix::run_process(argv);
    SPINDLE_CHECK(r.spawn_errno == 0, UnavailableError, "CUDA emulator: the C++ compiler '", argv[0],
                  "' could not be run: ", runtime::posix::errno_text(r.spawn_errno),
                  "\n  hint: install a C++ compiler or set EmulatorOptions::cxx");
    if (r.exit_code != 0) {
      std::size_t pos = r.output.find("error");
      std::string first = pos == std::string::npos ? r.output.substr(0, r.output.find('\n'))
                                                   : r.output.substr(pos, r.output.find('\n', pos) - pos);
      throw CompileError(message("CUDA emulator: compiling module '", module_name, "' with '", argv[0],
                                 "' failed (exit status ", r.exit_code, "): ", first,
                                 "\n  hint: lines of '", module_name,
                                 ".cu' are lines of CudaSource::source; the full log is in CompileError::log()"),
                         full_source_, r.output, flags_text);
    }
    int err = 0;
    auto bytes = runtime::posix::read_file(object_path, &err);
    SPINDLE_CHECK(bytes && !bytes->empty(), IOError, "CUDA emulator: cannot read '", object_path,
                  "': ", runtime::posix::errno_text(err));
    return std::move(*bytes);
  }

  void ensure_stacks(int n) {
    if (n <= stack_count_) return;
    if (stacks_) ::munmap(stacks_, stacks_size_);
    stacks_ = nullptr;
    std::size_t slot = stack_bytes_ + page_;
    stacks_size_ = slot * static_cast<std::size_t>(n);
    void* p = ::mmap(nullptr, stacks_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    SPINDLE_CHECK(p != MAP_FAILED, RuntimeError, "CUDA emulator: cannot map ", stacks_size_, " bytes of fiber stacks: ",
                  runtime::posix::errno_text(errno));
    stacks_ = static_cast<unsigned char*>(p);
    for (int t = 0; t < n; ++t) ::mprotect(stacks_ + slot * static_cast<std::size_t>(t), page_, PROT_NONE);  // guard
    stack_count_ = n;
    lanes_ = std::vector<Lane>(static_cast<std::size_t>(n));
  }
  unsigned char* stack_of(int t) const { return stacks_ + (stack_bytes_ + page_) * static_cast<std::size_t>(t) + page_; }

  std::string thread_text(int t) const {
    unsigned x = static_cast<unsigned>(t) % block_.x, y = static_cast<unsigned>(t) / block_.x % block_.y,
             z = static_cast<unsigned>(t) / (block_.x * block_.y);
    return message("thread (", x, ",", y, ",", z, ")");
  }
  std::string where_text() const {
    const cuda_emu_detail::Dim& b = *info_->block_idx;
    return message("kernel '", kernel_, "' block (", b.x, ",", b.y, ",", b.z, ")");
  }
  std::string op_text(const Lane& l) const {
    if (l.wait == Wait::barrier) return message("__syncthreads (line ", l.line, ")");
    if (l.kind == cuda_emu_detail::kSyncWarp) return message("__syncwarp (line ", l.line, ")");
    return message(cuda_emu_detail::shuffle_name(l.kind), " (width ", l.width, ", ", l.size, "-byte value, line ",
                   l.line, ")");
  }

  // ---- fibers ----
  static inline thread_local CudaEmulator* running_ = nullptr;

  static void fiber_main() {
    CudaEmulator* e = running_;
    e->fiber_entered();
    e->trampoline_(e->params_);
    e->lanes_[static_cast<std::size_t>(e->current_)].wait = Wait::exited;
    e->to_scheduler(/*exiting=*/true);
  }

  void fiber_entered() {
#ifdef SPINDLE_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &main_stack_bottom_, &main_stack_size_);
#endif
  }

  // From a fiber back to the scheduler; returns when the scheduler resumes this fiber.
  void to_scheduler(bool exiting) {
    Lane& lane = lanes_[static_cast<std::size_t>(current_)];
#ifdef SPINDLE_EMU_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &lane.fake_stack, main_stack_bottom_, main_stack_size_);
#else
    (void)exiting;
#endif
    ::swapcontext(&lane.ctx, &scheduler_);
#ifdef SPINDLE_EMU_ASAN
    __sanitizer_finish_switch_fiber(lane.fake_stack, &main_stack_bottom_, &main_stack_size_);
#endif
  }

  void resume(int t) {
    Lane& lane = lanes_[static_cast<std::size_t>(t)];
    current_ = t;
    unsigned u = static_cast<unsigned>(t);
    *info_->thread_idx = {u % block_.x, u / block_.x % block_.y, u / (block_.x * block_.y)};
#ifdef SPINDLE_EMU_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack_of(t), stack_bytes_);
#endif
    ::swapcontext(&scheduler_, &lane.ctx);
#ifdef SPINDLE_EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }

  // Records an error from inside a fiber and leaves it for good (it is never resumed; kernel
  // code owns no resources, so abandoning its stack is clean).
  void fail_in_fiber(std::string what) {
    if (error_.empty()) error_ = std::move(what);
    lanes_[static_cast<std::size_t>(current_)].wait = Wait::exited;
    to_scheduler(true);
  }

  static void hook_sync_threads(void* ctx, int line) {
    auto* e = static_cast<CudaEmulator*>(ctx);
    Lane& lane = e->lanes_[static_cast<std::size_t>(e->current_)];
    lane.wait = Wait::barrier;
    lane.line = line;
    e->to_scheduler(false);
  }

  static void hook_sync_warp(void* ctx, unsigned mask, int line) {
    auto* e = static_cast<CudaEmulator*>(ctx);
    if (mask != 0xffffffffu)
      e->fail_in_fiber(message("CUDA emulator: ", e->where_text(), ": ", e->thread_text(e->current_),
                               " calls __syncwarp(0x", to_hex(mask), ") at line ", line,
                               "; only the full mask 0xffffffff is emulated"));
    Lane& lane = e->lanes_[static_cast<std::size_t>(e->current_)];
    lane.wait = Wait::warp;
    lane.kind = cuda_emu_detail::kSyncWarp;
    lane.line = line;
    lane.size = lane.arg = lane.width = 0;
    e->to_scheduler(false);
  }

  static unsigned long long hook_shuffle(void* ctx, int kind, unsigned mask, unsigned long long bits, int size,
                                         int arg, int width, int line) {
    auto* e = static_cast<CudaEmulator*>(ctx);
    if (mask != 0xffffffffu)
      e->fail_in_fiber(message("CUDA emulator: ", e->where_text(), ": ", e->thread_text(e->current_), " calls ",
                               cuda_emu_detail::shuffle_name(kind), " with mask 0x", to_hex(mask), " at line ", line,
                               "; only the full mask 0xffffffff is emulated"));
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
      e->fail_in_fiber(message("CUDA emulator: ", e->where_text(), ": ", e->thread_text(e->current_), " calls ",
                               cuda_emu_detail::shuffle_name(kind), " with width ", width, " at line ", line,
                               "; the width must be a power of two in 1..32"));
    Lane& lane = e->lanes_[static_cast<std::size_t>(e->current_)];
    lane.wait = Wait::warp;
    lane.kind = kind;
    lane.line = line;
    lane.bits = bits;
    lane.size = size;
    lane.arg = arg;
    lane.width = width;
    e->to_scheduler(false);
    return e->lanes_[static_cast<std::size_t>(e->current_)].result;
  }

  static std::string to_hex(unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return buf;
  }

  // ---- the block scheduler ----
  // getcontext in a function of its own: nothing of the caller is live across it.
  __attribute__((noinline)) static void capture_context(ucontext_t* c) { ::getcontext(c); }

  void run_block() {
    if (info_->shared_end > info_->shared_begin)
      std::memset(info_->shared_begin, 0xFF, static_cast<std::size_t>(info_->shared_end - info_->shared_begin));
    for (int t = 0; t < nthreads_; ++t) {
      Lane& lane = lanes_[static_cast<std::size_t>(t)];
      lane.wait = Wait::ready;
      lane.fake_stack = nullptr;
#ifdef SPINDLE_EMU_ASAN
      __asan_unpoison_memory_region(stack_of(t), stack_bytes_);
#endif
      capture_context(&lane.ctx);
      lane.ctx.uc_stack.ss_sp = stack_of(t);
      lane.ctx.uc_stack.ss_size = stack_bytes_;
      lane.ctx.uc_link = nullptr;
      ::makecontext(&lane.ctx, &CudaEmulator::fiber_main, 0);
    }
    CudaEmulator* saved = running_;
    running_ = this;
    struct Restore {
      CudaEmulator* saved;
      ~Restore() { running_ = saved; }
    } restore{saved};
    for (;;) {
      for (int t = 0; t < nthreads_; ++t) {
        if (lanes_[static_cast<std::size_t>(t)].wait != Wait::ready) continue;
        resume(t);
        if (!error_.empty()) return;
      }
      // Every thread now waits at a barrier or a warp operation, or has exited.
      bool released = false;
      for (int w = 0; w * cuda_emu_detail::kWarp < nthreads_; ++w) {
        released |= resolve_warp(w);
        if (!error_.empty()) return;
      }
      if (released) continue;
      int waiting = -1, exited = -1;
      for (int t = 0; t < nthreads_; ++t) {
        const Lane& l = lanes_[static_cast<std::size_t>(t)];
        if (l.wait == Wait::barrier && waiting < 0) waiting = t;
        if (l.wait == Wait::exited && exited < 0) exited = t;
      }
      if (waiting < 0) return;  // all exited: the block is done
      const Lane& first = lanes_[static_cast<std::size_t>(waiting)];
      if (exited >= 0) {
        error_ = message("barrier divergence in ", where_text(), ": ", thread_text(exited), " exited while ",
                         thread_text(waiting), " waits at __syncthreads (line ", first.line, ")",
                         "\n  hint: every thread of a block must reach each __syncthreads; guard the work, "
                         "not the barrier (no early return before a barrier)");
        return;
      }
      for (int t = 0; t < nthreads_; ++t) {
        Lane& l = lanes_[static_cast<std::size_t>(t)];
        if (l.line != first.line) {
          error_ = message("barrier divergence in ", where_text(), ": ", thread_text(waiting),
                           " waits at __syncthreads on line ", first.line, " while ", thread_text(t),
                           " waits at __syncthreads on line ", l.line,
                           "\n  hint: a __syncthreads inside a branch must be reached by all threads of the block");
          return;
        }
      }
      for (int t = 0; t < nthreads_; ++t) lanes_[static_cast<std::size_t>(t)].wait = Wait::ready;
    }
  }

  // Completes the warp operation of warp w if every live lane has reached one; false if the
  // warp has no lane at a warp operation. Sets error_ on divergence.
  bool resolve_warp(int w) {
    const int base = w * cuda_emu_detail::kWarp, count = std::min(cuda_emu_detail::kWarp, nthreads_ - base);
    int at_op = -1, at_barrier = -1;
    for (int i = 0; i < count; ++i) {
      const Lane& l = lanes_[static_cast<std::size_t>(base + i)];
      if (l.wait == Wait::warp && at_op < 0) at_op = base + i;
      if (l.wait == Wait::barrier && at_barrier < 0) at_barrier = base + i;
    }
    if (at_op < 0) return false;
    const Lane& ref = lanes_[static_cast<std::size_t>(at_op)];
    if (at_barrier >= 0) {
      error_ = message("warp divergence in ", where_text(), ": ", thread_text(at_op), " waits at ", op_text(ref),
                       " while ", thread_text(at_barrier), " of the same warp waits at ",
                       op_text(lanes_[static_cast<std::size_t>(at_barrier)]),
                       "\n  hint: every live lane of a warp must reach each warp-level operation");
      return false;
    }
    for (int i = 0; i < count; ++i) {
      const Lane& l = lanes_[static_cast<std::size_t>(base + i)];
      if (l.wait != Wait::warp) continue;
      if (l.kind != ref.kind || l.width != ref.width || l.size != ref.size) {
        error_ = message("warp divergence in ", where_text(), ": ", thread_text(at_op), " waits at ", op_text(ref),
                         " while ", thread_text(base + i), " of the same warp waits at ", op_text(l),
                         "\n  hint: the lanes of a warp must execute the same warp-level operation together");
        return false;
      }
    }
    if (ref.kind != cuda_emu_detail::kSyncWarp) {
      auto participates = [&](int lane) {
        return lane < count && lanes_[static_cast<std::size_t>(base + lane)].wait == Wait::warp;
      };
      auto absent = [&](int lane) {
        return lane >= count ? message("lane ", lane, " does not exist (the block has ", nthreads_, " threads)")
                             : message("lane ", lane, " (", thread_text(base + lane), ") has exited");
      };
      const int width = ref.width;
      for (int i = 0; i < count; ++i) {
        Lane& l = lanes_[static_cast<std::size_t>(base + i)];
        if (l.wait != Wait::warp) continue;
        const int first = i & ~(width - 1), last = first + width - 1;
        for (int g = first; g <= last; ++g)
          if (!participates(g)) {
            error_ = message("warp divergence in ", where_text(), ": ", thread_text(base + i), " (lane ", i,
                             ") calls ", op_text(l), " but ", absent(g), " and cannot take part",
                             "\n  hint: all lanes of each width group must execute the shuffle (full mask)");
            return false;
          }
        int j = i;
        bool valid = false;
        switch (l.kind) {
          case 0: j = i ^ l.arg; valid = j <= last; break;
          case 1: j = i + l.arg; valid = j <= last; break;
          case 2: j = i - l.arg; valid = j >= first; break;
          default: j = first + (l.arg & (width - 1)); valid = true; break;
        }
        if (!valid || j < 0 || j >= cuda_emu_detail::kWarp) j = i;
        if (!participates(j)) {
          error_ = message("warp divergence in ", where_text(), ": ", thread_text(base + i), " (lane ", i,
                           ") calls ", op_text(l), " and reads ", absent(j),
                           "\n  hint: all lanes read from must execute the shuffle (full mask)");
          return false;
        }
        l.result = lanes_[static_cast<std::size_t>(base + j)].bits;
      }
    }
    for (int i = 0; i < count; ++i) {
      Lane& l = lanes_[static_cast<std::size_t>(base + i)];
      if (l.wait == Wait::warp) l.wait = Wait::ready;
    }
    return true;
  }

  codegen::CudaSource src_;
  EmulatorOptions options_;
  std::string full_source_;
  std::shared_ptr<runtime::LoadedModule> module_;
  const cuda_emu_detail::Module* info_ = nullptr;
  std::mutex mutex_;

  // Launch state.
  std::string kernel_;
  void (*trampoline_)(void* const*) = nullptr;
  void* const* params_ = nullptr;
  cuda_emu_detail::Dim block_{1, 1, 1};
  int nthreads_ = 0;
  int current_ = 0;
  std::string error_;

  // Fibers.
  ucontext_t scheduler_{};
  std::vector<Lane> lanes_;
  unsigned char* stacks_ = nullptr;
  std::size_t stacks_size_ = 0, stack_bytes_ = 0, page_ = 4096;
  int stack_count_ = 0;
#ifdef SPINDLE_EMU_ASAN
  const void* main_stack_bottom_ = nullptr;  // the scheduler's stack, for ASan's fiber switches
  std::size_t main_stack_size_ = 0;
#endif
};

}  // namespace spindle::test
