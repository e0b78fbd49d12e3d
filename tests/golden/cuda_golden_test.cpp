// Golden tests of the CUDA path: for each operator of spindle/ops.hpp and each variant the
// default GPU schedule can pick, the scheduled stage-III IR, the launch configuration and
// the generated CUDA, compared with tests/golden/data/cuda/<name>.txt (regenerate with
// SPINDLE_UPDATE_GOLDEN=1 and review the diff). The same texts are compiled by NVRTC to
// cubin for sm_70, sm_80 and sm_90 on every machine (no GPU needed).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <spindle/driver/pipeline.hpp>
#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/spindle.hpp>

#include "golden/golden_support.hpp"

namespace {

namespace ops = spindle::ops;
namespace sp = spindle;

struct Case {
  std::string name;
  sp::ir::Function stage1;
  std::int64_t feature;
  bool aligned = true;
  bool spmm_by_nonzeros = false;  // SPINDLE_CUDA_SPMM=nonzeros
};

std::vector<Case> cases() {
  return {
      {"spmm_cf1", ops::spmm<float>().ir(), 32},
      {"spmm_cf2", ops::spmm<float>().ir(), 64},
      {"spmm_cf4_float4", ops::spmm<float>().ir(), 128},
      {"spmm_cf4", ops::spmm<float>().ir(), 130},
      {"spmm_f64_cf4", ops::spmm<double>().ir(), 256},
      {"spmm_nnz_cf1", ops::spmm<float>().ir(), 32, true, true},
      {"spmm_nnz_cf4_float4", ops::spmm<float>().ir(), 128, true, true},
      {"sddmm_lanes8_float4", ops::sddmm<float>().ir(), 32},
      {"sddmm_lanes32_float4", ops::sddmm<float>().ir(), 512},
      {"sddmm_lanes32", ops::sddmm<float>().ir(), 30, false},
      {"spmm_dense_j", ops::spmm_dense_j<float>().ir(), 32},
      {"spmv", ops::spmv<float>().ir(), 0},
      {"spmv_i64", ops::spmv<double, ops::J64>().ir(), 0},
      {"row_sum", ops::row_sum<float>().ir(), 0},
      {"scale", ops::scale<float>().ir(), 0},
      {"softmax", ops::softmax<float>().ir(), 0},
      {"ragged_matmul", ops::ragged_matmul<float>().ir(), 0},
      {"csf_reduce", ops::csf_reduce<double>().ir(), 0},
      {"bsr_spmm_4x4", ops::bsr_spmm_kernel<float, 4, 4>().ir(), 32},
      {"ell_spmm", ops::ell_spmm<float>().ir(), 32},
      {"coo_spmm", ops::coo_spmm<float>().ir(), 0},
      {"segment_sum", ops::segment_sum<double, std::int64_t>().ir(), 0},
  };
}

sp::driver::CudaLowered lower(const Case& c) {
  sp::driver::PipelineOptions o;
  o.context.kernel = c.stage1.name;
  if (!c.spmm_by_nonzeros) return sp::driver::lower_to_cuda(c.stage1, o, c.feature, c.aligned);
  auto prepared = sp::driver::lower_for_cuda(c.stage1, o);
  return sp::driver::schedule_and_emit_cuda(
      prepared, o, sp::autosched::cuda_variant(prepared.plan.pattern, c.feature, c.aligned, false, true));
}

std::string text(const sp::driver::CudaLowered& l) {
  std::string s = "# default GPU schedule: " + std::string(sp::autosched::cuda_pattern_name(l.plan.pattern)) + ", " +
                  l.variant.describe() + "\n" + sp::ir::to_string(l.stage3);
  for (auto& x : l.source.launches)
    s += "# launch " + x.symbol + ": grid (" + sp::ir::to_string(x.grid[0]) + ", " + sp::ir::to_string(x.grid[1]) +
         ", " + sp::ir::to_string(x.grid[2]) + "), block (" + std::to_string(x.block[0]) + ", " +
         std::to_string(x.block[1]) + ", " + std::to_string(x.block[2]) + "), static shared " +
         std::to_string(x.static_shared_bytes) + " B\n";
  return s + "# generated CUDA\n" + l.source.source;
}

bool is_elf(const std::vector<std::uint8_t>& b) {
  return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}

bool contains(const std::vector<std::uint8_t>& bytes, const std::string& s) {
  return std::search(bytes.begin(), bytes.end(), s.begin(), s.end()) != bytes.end();
}

}  // namespace

TEST_CASE("cuda golden: scheduled IR, launches and CUDA of each operator variant", "[golden][cuda]") {
  for (auto& c : cases()) {
    INFO("case " << c.name);
    golden::check_golden("cuda/" + c.name, text(lower(c)));
  }
}

TEST_CASE("cuda golden: the variant follows the feature size", "[golden][cuda]") {
  using sp::autosched::CudaPattern;
  using sp::autosched::cuda_variant;
  CHECK(cuda_variant(CudaPattern::sddmm, 32, true).nnz_parallel);
  CHECK_FALSE(cuda_variant(CudaPattern::sddmm, 32, true, /*sddmm_by_rows=*/true).nnz_parallel);
  CHECK_FALSE(cuda_variant(CudaPattern::spmm, 32, true).nnz_parallel);
  CHECK(cuda_variant(CudaPattern::spmm, 32, true, false, /*spmm_by_nonzeros=*/true).nnz_parallel);
  CHECK(cuda_variant(CudaPattern::spmm, 1, true).cf == 1);
  CHECK(cuda_variant(CudaPattern::spmm, 33, true).cf == 2);
  CHECK(cuda_variant(CudaPattern::spmm, 512, true).vector);
  CHECK_FALSE(cuda_variant(CudaPattern::spmm, 512, false).vector);  // unaligned base address
  CHECK_FALSE(cuda_variant(CudaPattern::spmm, 514, true).vector);   // rows not 16-byte aligned
  CHECK(cuda_variant(CudaPattern::sddmm, 32, true).lanes == 8);
  CHECK(cuda_variant(CudaPattern::sddmm, 4, true).lanes == 1);
  CHECK(cuda_variant(CudaPattern::sddmm, 31, true).lanes == 32);
  CHECK_FALSE(cuda_variant(CudaPattern::sddmm, 31, true).vector);
  CHECK(cuda_variant(CudaPattern::sddmm, 0, true).lanes == 1);
}

TEST_CASE("cuda: every operator variant compiles through NVRTC to cubin for sm_70, sm_80 and sm_90",
          "[cuda][nvrtc]") {
  sp::cuda::CudaOptions options = sp::cuda::CudaOptions::from_env();
  // NVRTC 13 dropped sm_70; scripts/test.sh installs NVRTC 12 and names it here.
  sp::cuda::CudaOptions sm70 = options;
  const char* nvrtc12 = std::getenv("SPINDLE_TEST_NVRTC12");
  if (nvrtc12 && *nvrtc12) sm70.nvrtc_library = nvrtc12;
  int sm70_compiled = 0;
  for (auto& c : cases()) {
    auto l = lower(c);
    for (int arch : {70, 80, 90}) {
      INFO("case " << c.name << " sm_" << arch);
      try {
        auto bytes = sp::cuda::compile_cuda_for_arch(l.source.source, l.source.module_symbol, arch,
                                                     arch == 70 ? sm70 : options);
        CHECK(is_elf(bytes));
        for (auto& x : l.source.launches) CHECK(contains(bytes, x.symbol));
        sm70_compiled += arch == 70;
      } catch (const sp::UnavailableError& e) {
        // Only sm_70 may be missing, and only when no NVRTC 12 was provided.
        INFO(e.what());
        REQUIRE(arch == 70);
        REQUIRE(!(nvrtc12 && *nvrtc12));
        CHECK(std::string(e.what()).find("sm_70") != std::string::npos);
      }
    }
  }
  if (sm70_compiled == 0)
    WARN("sm_70 was not compiled: the loaded NVRTC does not support it and SPINDLE_TEST_NVRTC12 is not set "
         "(scripts/install-nvrtc12.sh provides one)");
}

TEST_CASE("cuda: a kernel lowers for the GPU without a GPU, and calling it with host data runs on the CPU",
          "[cuda]") {
  auto spmm = ops::spmm<float>();
  const auto& k = spmm.compile_cuda();  // lowering only: no driver, no NVRTC
  CHECK(k.pattern() == "spmm (GE-SpMM)");
  auto v128 = k.lower_variant(128);
  auto v32 = k.lower_variant(32);
  CHECK(v128.source.module_symbol != v32.source.module_symbol);
  CHECK(v128.variant.vector);
  CHECK(k.explain().find("feature size K_len") != std::string::npos);
}
