// The NVRTC engine without a GPU: target resolution, cubins for fixed architectures, PTX
// for architectures newer than NVRTC knows, too-old architectures, compile errors, identity
// and determinism; load() and a device-derived target need a GPU.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <filesystem>
#include <string>

#include "cuda_test_support.hpp"

using namespace spindle;
using namespace spindle::cuda;
using Catch::Contains;

namespace {

const std::vector<int> kNvrtc13 = {75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121};

std::string as_text(const std::vector<std::uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace

TEST_CASE("nvrtc: target resolution clamps to what NVRTC supports", "[cuda]") {
  auto t = resolve_cuda_target(80, kNvrtc13);
  CHECK((t.arch == 80 && !t.ptx && t.name() == "sm_80" && t.option() == "--gpu-architecture=sm_80"));
  t = resolve_cuda_target(90, kNvrtc13);
  CHECK((t.arch == 90 && !t.ptx));
  // Same major, newer minor: the cubin of the newest supported minor runs there.
  t = resolve_cuda_target(122, kNvrtc13);
  CHECK((t.arch == 121 && !t.ptx && t.requested == 122));
  t = resolve_cuda_target(101, kNvrtc13);
  CHECK((t.arch == 100 && !t.ptx));
  // Newer than everything: PTX of the newest, JIT-compiled by the driver.
  t = resolve_cuda_target(130, kNvrtc13);
  CHECK((t.arch == 121 && t.ptx && t.name() == "compute_121"));
  // No supported arch of the same major below it: PTX of the newest one below.
  t = resolve_cuda_target(72, {60, 75, 80});
  CHECK((t.arch == 60 && t.ptx));
  // The list may come in any order.
  t = resolve_cuda_target(86, {90, 86, 80});
  CHECK((t.arch == 86 && !t.ptx));
  try {
    resolve_cuda_target(70, kNvrtc13, "NVRTC 13.0");
    FAIL("sm_70 resolved with NVRTC 13");
  } catch (const UnavailableError& e) {
    CHECK_THAT(e.what(), Contains("CUDA architecture sm_70 is older than every architecture NVRTC 13.0 supports"));
    CHECK_THAT(e.what(), Contains("(sm_75, sm_80, sm_86"));
    CHECK_THAT(e.what(), Contains("install-nvrtc12.sh"));
  }
  CHECK_THROWS_AS(resolve_cuda_target(80, {}), UnavailableError);
  CHECK_THROWS_AS(NvrtcEngine(CudaOptions{}, 8), UserError);
}

TEST_CASE("nvrtc: compiles a kernel to a cubin for sm_75, sm_80 and sm_90", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready()) return;
  int arch = GENERATE(75, 80, 90);
  INFO("sm_" << arch);
  NvrtcEngine engine(CudaOptions::from_env(), arch);
  CHECK(engine.name() == "nvrtc");
  CHECK(engine.target().name() == "sm_" + std::to_string(arch));
  auto cubin = engine.compile({spindle::cuda::test::axpy_source("spindle_axpy_f32"), "spindle_axpy_f32", "axpy"});
  CHECK(spindle::cuda::test::has_elf_magic(cubin));
  CHECK(spindle::cuda::test::contains_bytes(cubin, "spindle_axpy_f32"));
  // compile_cuda_for_arch is the same compile without an engine object.
  CHECK(compile_cuda_for_arch(spindle::cuda::test::axpy_source("spindle_axpy_f32"), "spindle_axpy_f32", arch) == cubin);
}

TEST_CASE("nvrtc: an architecture newer than NVRTC supports gives PTX", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready()) return;
  NvrtcEngine probe(CudaOptions::from_env(), 80);
  std::vector<int> archs = probe.supported_archs();
  REQUIRE(!archs.empty());
  int newest = *std::max_element(archs.begin(), archs.end());
  int future = (newest / 10 + 1) * 10;  // the next major, e.g. 130 for NVRTC 13
  NvrtcEngine engine(CudaOptions::from_env(), future);
  CudaTarget t = engine.target();
  CHECK(t.ptx);
  CHECK(t.arch == newest);
  CHECK(t.requested == future);
  auto ptx = engine.compile({spindle::cuda::test::axpy_source("spindle_axpy_ptx"), "spindle_axpy_ptx", "axpy"});
  REQUIRE(!ptx.empty());
  CHECK(ptx.back() == 0);  // cuModuleLoadData needs NUL-terminated PTX
  CHECK_FALSE(spindle::cuda::test::has_elf_magic(ptx));
  std::string text = as_text(ptx);
  CHECK_THAT(text, Contains(".target sm_" + std::to_string(newest)));
  CHECK_THAT(text, Contains(".entry spindle_axpy_ptx"));
  CHECK_THAT(engine.identity(), Contains("target compute_" + std::to_string(newest)));
}

TEST_CASE("nvrtc: sm_70 needs an NVRTC that still supports it", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready()) return;
  NvrtcEngine engine(CudaOptions::from_env(), 70);
  std::vector<int> archs = engine.supported_archs();
  bool supported = std::find(archs.begin(), archs.end(), 70) != archs.end();
  if (supported) {
    auto cubin = engine.compile({spindle::cuda::test::axpy_source("spindle_axpy_sm70"), "spindle_axpy_sm70", "axpy"});
    CHECK(spindle::cuda::test::has_elf_magic(cubin));
  } else {
    CHECK_THROWS_WITH(engine.compile({spindle::cuda::test::axpy_source("spindle_axpy_sm70"), "spindle_axpy_sm70", "axpy"}),
                      Contains("sm_70 is older than every architecture"));
  }
}

TEST_CASE("nvrtc: NVRTC 12 from scripts/install-nvrtc12.sh compiles for sm_70", "[cuda]") {
  // scripts/test.sh names NVRTC 12 in SPINDLE_TEST_NVRTC12 (not in its ASan stage, where
  // NVRTC 12 fails its builtin operations).
  const char* env = std::getenv("SPINDLE_TEST_NVRTC12");
  if (!env || !*env) {
    WARN("SPINDLE_TEST_NVRTC12 is not set (scripts/test.sh sets it from scripts/install-nvrtc12.sh); skipped");
    return;
  }
  std::string lib = env;
  if (!std::filesystem::exists(lib)) {
    WARN("NVRTC 12 not installed at " << lib << " (run scripts/install-nvrtc12.sh); skipped");
    return;
  }
  CudaOptions o;
  o.nvrtc_library = lib;
  NvrtcEngine engine(o, 70);
  CHECK(engine.nvrtc_version().first == 12);
  CHECK(engine.target().name() == "sm_70");
  CHECK_THAT(engine.identity(), Contains("nvrtc 12."));
  auto cubin = engine.compile({spindle::cuda::test::axpy_source("spindle_axpy_sm70"), "spindle_axpy_sm70", "axpy"});
  CHECK(spindle::cuda::test::has_elf_magic(cubin));
  CHECK(spindle::cuda::test::contains_bytes(cubin, "spindle_axpy_sm70"));
}

TEST_CASE("nvrtc: a compile error quotes the bad line, the log and the options", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready()) return;
  std::string source =
      "extern \"C\" __global__ void spindle_broken(float* y) {\n"
      "  int i = threadIdx.x;\n"
      "  y[i] = undeclared_value * 2.0f;\n"
      "}\n";
  NvrtcEngine engine(CudaOptions::from_env(), 80);
  try {
    engine.compile({source, "spindle_broken_module", "broken"});
    FAIL("a broken kernel compiled");
  } catch (const CompileError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Contains("NVRTC: compiling CUDA module 'spindle_broken_module' (kernel 'broken') for sm_80"));
    CHECK_THAT(what, Contains("spindle_broken_module.cu(3): error"));
    CHECK_THAT(what, Contains("line 3 |   y[i] = undeclared_value * 2.0f;"));
    CHECK_THAT(what, Contains("options: --gpu-architecture=sm_80 -std=c++17 -default-device"));
    CHECK_THAT(e.log(), Contains("undeclared_value"));
    CHECK(e.options() == "--gpu-architecture=sm_80 -std=c++17 -default-device");
    CHECK(e.source() == source);
  }
}

TEST_CASE("nvrtc: identity names the version, library, target and options, artifacts are deterministic",
          "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready()) return;
  NvrtcEngine a(CudaOptions::from_env(), 80), b(CudaOptions::from_env(), 90);
  auto [major, minor] = a.nvrtc_version();
  CHECK(major >= 12);
  std::string id = a.identity();
  CHECK_THAT(id, Contains(message("nvrtc ", major, ".", minor, " (")));
  CHECK_THAT(id, Contains("libnvrtc"));
  CHECK_THAT(id, Contains("target sm_80 --gpu-architecture=sm_80 -std=c++17 -default-device"));
  CHECK(a.identity() != b.identity());
  runtime::CompileRequest req{spindle::cuda::test::axpy_source("spindle_axpy_det"), "spindle_axpy_det", "axpy"};
  CHECK(a.compile(req) == a.compile(req));
  CHECK(a.compile(req) != b.compile(req));
}

TEST_CASE("nvrtc: load and a device-derived target need a GPU", "[cuda]") {
  if (!spindle::cuda::test::nvrtc_ready()) return;
  if (cuda_available()) {
    NvrtcEngine engine;
    CudaContext& ctx = CudaContext::process();
    CHECK(engine.target().requested == ctx.device().arch());
    runtime::CompileRequest req{spindle::cuda::test::axpy_source("spindle_axpy_load"), "spindle_axpy_load", "axpy"};
    auto module = std::static_pointer_cast<CudaModule>(engine.load(engine.compile(req), req));
    CHECK(module->entry() != nullptr);
    CHECK(module->function("spindle_axpy_load") != nullptr);
    CHECK(module->function("spindle_axpy_load") == module->function("spindle_axpy_load"));
    CHECK_THROWS_WITH(module->function("no_such_kernel"),
                      Contains("CUDA module 'spindle_axpy_load' has no kernel 'no_such_kernel'"));
    // A damaged artifact is rejected before the driver sees it.
    std::vector<std::uint8_t> junk(64, 0x42);
    CHECK_THROWS_AS(engine.load(junk, req), RuntimeError);
    return;
  }
  NvrtcEngine device_engine;  // no fixed arch: asks the device
  CHECK_THROWS_AS(device_engine.identity(), UnavailableError);
  NvrtcEngine fixed(CudaOptions::from_env(), 80);
  runtime::CompileRequest req{spindle::cuda::test::axpy_source("spindle_axpy_load"), "spindle_axpy_load", "axpy"};
  auto cubin = fixed.compile(req);
  CHECK(spindle::cuda::test::has_elf_magic(cubin));
  CHECK_THROWS_WITH(fixed.load(cubin, req), Contains("CUDA is unavailable"));
  CHECK_THROWS_AS(fixed.load(cubin, req), UnavailableError);
}
