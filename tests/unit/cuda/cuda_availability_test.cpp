// CUDA availability: cuda_available() / cuda_unavailable_reason() / CudaContext when the
// driver library is missing, when cuInit fails, when there is no device or the requested
// one is absent (a fake driver library), and when NVRTC cannot be loaded.
#include <catch2/catch.hpp>

#include "cuda_test_support.hpp"

using namespace spindle;
using namespace spindle::cuda;
using Catch::Contains;

TEST_CASE("cuda: the default configuration is either usable or says why not", "[cuda]") {
  if (cuda_available()) {
    CHECK(cuda_unavailable_reason().empty());
    CudaContext& ctx = CudaContext::process();
    CHECK(ctx.device().arch() >= 50);
    CHECK(!ctx.device().name.empty());
    CHECK(&CudaContext::process() == &ctx);
    return;
  }
  // No GPU here (as on CI): the reason names the driver library that was looked for.
  std::string reason = cuda_unavailable_reason();
  CHECK_THAT(reason, Contains("CUDA is unavailable"));
  CHECK_THAT(reason, Contains("libcuda.so.1"));
  try {
    CudaContext::process();
    FAIL("CudaContext::process() succeeded without a usable GPU");
  } catch (const UnavailableError& e) {
    CHECK_THAT(e.what(), Contains(reason));
    CHECK_THAT(e.what(), Contains("a CUDA context was requested for device 0"));
  }
  // Device memory needs the context too.
  CHECK_THROWS_AS(DeviceTensor<float>::from_host(Tensor<float>::zeros({4})), UnavailableError);
  CHECK_THROWS_AS(default_cuda_runtime().stream(), UnavailableError);
}

TEST_CASE("cuda: a missing driver library is reported with the path and dlerror", "[cuda]") {
  CudaOptions o;
  o.driver_library = "/nonexistent/spindle-test/libcuda.so.1";
  CHECK_FALSE(cuda_available(o));
  std::string reason = cuda_unavailable_reason(o);
  CHECK_THAT(reason, Contains("the CUDA driver library could not be loaded"));
  CHECK_THAT(reason, Contains("/nonexistent/spindle-test/libcuda.so.1: "));
  CHECK_THAT(reason, Contains("No such file"));  // dlerror()
  CHECK_THAT(reason, Contains("SPINDLE_CUDA_DRIVER_LIBRARY"));
  CHECK_THROWS_AS(driver_api(o), UnavailableError);
  CHECK_THROWS_WITH(CudaContext::process(o), Contains("/nonexistent/spindle-test/libcuda.so.1"));
  CHECK_THROWS_AS(CudaContext(o), UnavailableError);
}

TEST_CASE("cuda: a driver without the needed symbols is reported with the symbol", "[cuda]") {
  CudaOptions o;
  o.driver_library = "libz.so.1";  // loads, but is not a driver
  CHECK_FALSE(cuda_available(o));
  CHECK_THAT(cuda_unavailable_reason(o), Contains("'libz.so.1' does not export cuInit"));
}

TEST_CASE("cuda: cuInit failure, no device and a missing ordinal (fake driver)", "[cuda]") {
  runtime::test::ScratchDir dir;
  SECTION("cuInit fails") {
    std::string lib = spindle::cuda::test::build_fake_driver(dir.path(), 100, 0);
    if (lib.empty()) {
      WARN("no C compiler; skipped");
      return;
    }
    CudaOptions o;
    o.driver_library = lib;
    CHECK_FALSE(cuda_available(o));
    std::string reason = cuda_unavailable_reason(o);
    CHECK_THAT(reason, Contains("cuInit(0) in '" + lib + "' (driver API version 12.4) failed"));
    CHECK_THAT(reason, Contains("CUDA_ERROR_NO_DEVICE 100 (no CUDA-capable device is detected)"));
    CHECK_THROWS_WITH(CudaContext::process(o), Contains("cuInit(0)"));
    // The driver's (failed) result is remembered, as the driver does.
    CHECK(cuda_unavailable_reason(o) == reason);
  }
  SECTION("no device") {
    std::string lib = spindle::cuda::test::build_fake_driver(dir.path(), 0, 0);
    if (lib.empty()) {
      WARN("no C compiler; skipped");
      return;
    }
    CudaOptions o;
    o.driver_library = lib;
    CHECK_FALSE(cuda_available(o));
    CHECK_THAT(cuda_unavailable_reason(o), Contains("reports no CUDA device (cuDeviceGetCount = 0)"));
  }
  SECTION("the requested device is absent") {
    std::string lib = spindle::cuda::test::build_fake_driver(dir.path(), 0, 2);
    if (lib.empty()) {
      WARN("no C compiler; skipped");
      return;
    }
    CudaOptions o;
    o.driver_library = lib;
    o.device = 3;
    CHECK_FALSE(cuda_available(o));
    std::string reason = cuda_unavailable_reason(o);
    CHECK_THAT(reason, Contains("device 3 was requested"));
    CHECK_THAT(reason, Contains("reports 2 device(s)"));
    CHECK_THROWS_AS(CudaContext(o), UnavailableError);
  }
}

TEST_CASE("cuda: SPINDLE_NVRTC_LIBRARY naming a missing file is not silently replaced", "[cuda]") {
  CudaOptions o;
  o.nvrtc_library = "/nonexistent/spindle-test/libnvrtc.so.12";
  CHECK(o.nvrtc_candidates() == std::vector<std::string>{"/nonexistent/spindle-test/libnvrtc.so.12"});
  try {
    nvrtc_api(o);
    FAIL("loading a missing NVRTC succeeded");
  } catch (const UnavailableError& e) {
    CHECK_THAT(e.what(), Contains("NVRTC (the CUDA runtime compiler) could not be loaded"));
    CHECK_THAT(e.what(), Contains("/nonexistent/spindle-test/libnvrtc.so.12: "));
    CHECK_THAT(e.what(), Contains("SPINDLE_NVRTC_LIBRARY"));
  }
  NvrtcEngine engine(o, 80);
  CHECK_THROWS_AS(engine.identity(), UnavailableError);
  CHECK_THROWS_WITH(engine.compile({spindle::cuda::test::axpy_source("k"), "k", "k"}),
                    Contains("/nonexistent/spindle-test/libnvrtc.so.12"));
  CHECK_THROWS_AS(compile_cuda_for_arch(spindle::cuda::test::axpy_source("k"), "k", 80, o), UnavailableError);
}

TEST_CASE("cuda: the default NVRTC search order", "[cuda]") {
  CudaOptions o;
  o.cuda_home = "/opt/cuda-x/";
  CHECK(o.nvrtc_candidates() ==
        std::vector<std::string>{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/opt/cuda-x/lib64/libnvrtc.so.13",
                                 "/opt/cuda-x/lib64/libnvrtc.so.12", "/opt/cuda-x/lib64/libnvrtc.so"});
  CHECK(o.driver_candidates() == std::vector<std::string>{"libcuda.so.1"});
}
