// NVRTC compile latency of `spindle-bench --backend cuda`, once per (operator, schedule
// variant) of the benchmarked feature sizes. Runs with or without a GPU:
//
//   with a GPU   the NvrtcEngine targets the device's architecture; a cache fill is NVRTC
//                compile + cuModuleLoadData, a disk hit is read + validate + cuModuleLoadData
//   without one  the NvrtcEngine has a fixed architecture (--cuda-arch, default 80) and the
//                KernelCache sits on CompileOnlyNvrtcEngine: same name and identity (so the
//                same cache keys and disk files), compile() is NVRTC's, and load() checks the
//                artifact as NvrtcEngine::load does before it calls the driver (a cubin's ELF
//                header, PTX's terminating NUL) and keeps the bytes: loading a module needs a
//                GPU, so the "load" parts are not measured ("needs GPU").
//
// Figures (microseconds, medians unless noted):
//   lower_codegen  driver::lower_for_cuda + schedule_and_emit_cuda of the variant (the
//                  CompileRequest that CompiledCudaKernel builds for that feature size)
//   nvrtc_init     first KernelCache::identity() of a fresh engine: NVRTC version and
//                  architectures (and, for the first variant of the process, dlopen of NVRTC)
//   cold           KernelCache::lookup with empty memory and an empty temporary disk
//                  directory: NVRTC compile (+ module load with a GPU, + writing the entry);
//                  the first one apart (for the first variant it includes NVRTC's own
//                  initialisation), then the median of kColdReps more, each with a fresh
//                  engine, cache and directory; compile/load split from CacheStats
//   memory_hit     KernelCache::lookup of a request that is in memory (key hash + map)
//   disk_hit       in a fresh process (this executable re-run with the hidden
//                  --cuda-disk-hit-child DIR OP FEAT ARCH DTYPE): a new NvrtcEngine and
//                  KernelCache on the same directory (engine: identity, which loads NVRTC),
//                  then lookup(), which must be a disk hit (get). With a GPU the child creates
//                  the CUDA context first, untimed. The parent also reports the child's whole
//                  wall time (exec, loading the libraries, lowering).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <spindle/driver/pipeline.hpp>
#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/runtime/kernel_cache.hpp>
#include <spindle/spindle.hpp>

#include "compile_latency.hpp"
#include "timing.hpp"

namespace bench {

// A module that is the artifact's bytes (nothing is loaded into a GPU).
class ArtifactModule final : public spindle::runtime::LoadedModule {
 public:
  explicit ArtifactModule(std::span<const std::uint8_t> bytes) : bytes_(bytes.begin(), bytes.end()) {}
  void* entry() const override { return const_cast<std::uint8_t*>(bytes_.data()); }
  std::size_t size() const { return bytes_.size(); }

 private:
  std::vector<std::uint8_t> bytes_;
};

// See the top of the file: NVRTC compile, and a load() that validates without a GPU.
class CompileOnlyNvrtcEngine final : public spindle::runtime::Engine {
 public:
  explicit CompileOnlyNvrtcEngine(spindle::cuda::NvrtcEngine& nvrtc) : nvrtc_(nvrtc) {}
  std::string name() const override { return nvrtc_.name(); }
  std::string identity() const override { return nvrtc_.identity(); }
  std::vector<std::uint8_t> compile(const spindle::runtime::CompileRequest& request) override {
    return nvrtc_.compile(request);
  }
  std::shared_ptr<spindle::runtime::LoadedModule> load(std::span<const std::uint8_t> artifact,
                                                       const spindle::runtime::CompileRequest& request) override {
    const bool ptx = nvrtc_.target().ptx;
    const bool elf = artifact.size() >= 4 && artifact[0] == 0x7f && artifact[1] == 'E' && artifact[2] == 'L' &&
                     artifact[3] == 'F';
    SPINDLE_CHECK(ptx ? (!artifact.empty() && artifact.back() == 0) : elf, spindle::RuntimeError, "CUDA module '",
                  request.symbol, "': the ", artifact.size(), "-byte artifact is not ",
                  ptx ? "NUL-terminated PTX text" : "a cubin (no ELF header)");
    return std::make_shared<ArtifactModule>(artifact);
  }

 private:
  spindle::cuda::NvrtcEngine& nvrtc_;
};

// An NVRTC engine and a KernelCache on `dir`: the real engine with a GPU (arch = nullopt:
// the device's), the compile-only adapter without one (arch fixed).
struct NvrtcCacheUnderTest {
  NvrtcCacheUnderTest(const spindle::cuda::CudaOptions& options, bool gpu, int fixed_arch, const std::string& dir)
      : nvrtc(std::make_unique<spindle::cuda::NvrtcEngine>(options, gpu ? std::nullopt : std::optional<int>(fixed_arch))) {
    if (!gpu) adapter = std::make_unique<CompileOnlyNvrtcEngine>(*nvrtc);
    spindle::runtime::Engine& e = adapter ? static_cast<spindle::runtime::Engine&>(*adapter) : *nvrtc;
    cache = std::make_unique<spindle::runtime::KernelCache>(e, dir, true);
  }
  std::unique_ptr<spindle::cuda::NvrtcEngine> nvrtc;
  std::unique_ptr<CompileOnlyNvrtcEngine> adapter;
  std::unique_ptr<spindle::runtime::KernelCache> cache;  // declared last: destroyed first
};

struct CudaCompileLatency {
  std::string op, variant, module, target;
  std::int64_t feat = 0;
  std::vector<std::int64_t> same_module_feats;  // later feature sizes that select this variant
  bool gpu = false;  // modules were loaded into a GPU
  double lower_codegen_us = NAN, nvrtc_init_us = NAN;
  double cold_first_us = NAN, cold_median_us = NAN, cold_compile_us = NAN, cold_load_us = NAN;
  double memory_hit_us = NAN;
  double disk_hit_us = NAN, disk_engine_us = NAN, disk_get_us = NAN, disk_child_wall_us = NAN;
  std::string disk_event;
  double artifact_bytes = NAN;
  bool ok = true;
  bool unavailable = false;  // NVRTC could not be loaded (not a failure of Spindle)
  std::string error;
};

// The request CompiledCudaKernel compiles for `feat` (16-byte aligned operands).
inline spindle::runtime::CompileRequest cuda_compile_request(const spindle::ir::Function& stage1, std::int64_t feat,
                                                             std::string* variant = nullptr) {
  spindle::driver::PipelineOptions o;
  o.context.kernel = stage1.name;
  auto prepared = spindle::driver::lower_for_cuda(stage1, o);
  const auto env = spindle::cuda::CudaOptions::from_env();
  auto v = spindle::autosched::cuda_variant(prepared.plan.pattern, feat, true, env.sddmm_by_rows, env.spmm_by_nonzeros);
  auto lowered = spindle::driver::schedule_and_emit_cuda(prepared, o, v);
  if (variant) *variant = v.describe();
  return {lowered.source.source, lowered.source.module_symbol, stage1.name};
}

// "sm_90 (the device's)" or "sm_80 (fixed: no GPU, compile only)"; never throws.
inline std::string describe_target(const NvrtcCacheUnderTest& t, bool gpu) {
  try {
    auto target = t.nvrtc->target();
    std::string s = target.name();
    if (target.arch != target.requested) s += spindle::message(" for sm_", target.requested);
    return s + (gpu ? " (the device's)" : " (fixed: no GPU, compile only)");
  } catch (const std::exception&) {
    return "unknown";
  }
}

// The --cuda-disk-hit-child side: prints "spindle-bench-cuda-disk-hit TOTAL ENGINE GET EVENT".
// arch 0: the device's (a GPU is needed); otherwise fixed, compile-only.
template <class T>
int cuda_disk_hit_child(const std::string& dir, const std::string& op, std::int64_t feat, int arch) {
  const auto options = spindle::cuda::CudaOptions::from_env();
  const bool gpu = arch == 0;
  auto req = with_op_kernel<T>(op, [&](auto k) { return cuda_compile_request(k.ir(), feat); });
  if (gpu) spindle::cuda::CudaContext::process(options);  // untimed: a real process has its context
  spindle::Timer total;
  NvrtcCacheUnderTest t(options, gpu, arch, dir);
  t.cache->identity();
  const double engine_us = total.micros();
  auto r = t.cache->lookup(req);
  const double total_us = total.micros();
  std::string event = spindle::runtime::to_string(r.event);
  for (char& c : event) c = c == ' ' ? '_' : c;
  std::printf("spindle-bench-cuda-disk-hit %.3f %.3f %.3f %s\n", total_us, engine_us, r.seconds * 1e6, event.c_str());
  return r.event == spindle::runtime::CacheEvent::disk_hit ? 0 : 3;
}

// gpu: a usable GPU is present (modules are loaded); fixed_arch: the target without one.
template <class T>
CudaCompileLatency measure_cuda_compile_latency(const std::string& op, std::int64_t feat, bool gpu, int fixed_arch) {
  CudaCompileLatency c;
  c.op = op;
  c.feat = feat;
  c.gpu = gpu;
  std::vector<std::string> dirs;
  try {
    constexpr int kReps = 9, kColdReps = 3;
    const auto options = spindle::cuda::CudaOptions::from_env();
    auto stage1 = with_op_kernel<T>(op, [](auto k) { return k.ir(); });
    spindle::runtime::CompileRequest req;
    c.lower_codegen_us = median_micros([&] { req = cuda_compile_request(stage1, feat, &c.variant); }, kReps);
    c.module = req.symbol;

    Samples cold;
    std::unique_ptr<NvrtcCacheUnderTest> t;
    for (int r = 0; r <= kColdReps; ++r) {
      dirs.push_back(make_temp_dir());
      t = std::make_unique<NvrtcCacheUnderTest>(options, gpu, fixed_arch, dirs.back());
      spindle::Timer ti;
      t->cache->identity();
      if (r == 0) c.nvrtc_init_us = ti.micros();
      auto res = t->cache->lookup(req);
      if (res.event != spindle::runtime::CacheEvent::compiled)
        throw spindle::InternalError(std::string("cold lookup was a ") + spindle::runtime::to_string(res.event));
      if (r == 0) {
        c.cold_first_us = res.seconds * 1e6;
        auto st = t->cache->stats();
        c.cold_compile_us = st.compile_seconds * 1e6;
        c.cold_load_us = gpu ? st.load_seconds * 1e6 : NAN;
        c.target = describe_target(*t, gpu);
      } else {
        cold.seconds.push_back(res.seconds);
      }
    }
    c.cold_median_us = cold.median() * 1e6;
    c.memory_hit_us = per_call_micros([&] { t->cache->lookup(req); });
    std::error_code ec;
    auto entry = std::filesystem::file_size(t->cache->entry_path(t->cache->key(req)), ec);
    if (!ec) c.artifact_bytes = static_cast<double>(entry) - sizeof(spindle::runtime::CacheEntryHeader);

    int status = 0;
    spindle::Timer wall;
    std::string out = run_self({"--cuda-disk-hit-child", dirs.back(), op, std::to_string(feat),
                                std::to_string(gpu ? 0 : fixed_arch), sizeof(T) == 4 ? "f32" : "f64"},
                               &status);
    c.disk_child_wall_us = wall.micros();
    std::istringstream in(out.substr(std::min(out.find("spindle-bench-cuda-disk-hit"), out.size())));
    std::string tag;
    in >> tag >> c.disk_hit_us >> c.disk_engine_us >> c.disk_get_us >> c.disk_event;
    if (tag != "spindle-bench-cuda-disk-hit" || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      throw spindle::RuntimeError("disk-hit child failed (event '" + c.disk_event + "', output: " + out + ")");
  } catch (const spindle::UnavailableError& e) {
    c.ok = false;
    c.unavailable = true;
    c.error = e.what();
  } catch (const std::exception& e) {
    c.ok = false;
    c.error = e.what();
  }
  for (auto& d : dirs) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  return c;
}

}  // namespace bench
