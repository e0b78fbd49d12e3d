// 11_cuda_spmm: the same SpMM definition on the GPU. With a GPU: copy A and B to device
// memory, call the kernel with the device containers (it runs the CUDA build: default
// GE-SpMM schedule, NVRTC-compiled, cached), copy C back and check it against the CPU run.
// Without a GPU: say why, and still show what would run — the default schedule chosen for
// this feature size and the NVRTC compile of its CUDA to a cubin for sm_80.
#include <spindle/driver/pipeline.hpp>  // for lower_variant()
#include <spindle/runtime/cuda/cuda.hpp>
#include <spindle/spindle.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sp = spindle;

int main(int argc, char** argv) {
  const auto A = sp::read_matrix_market<float>(argc > 1 ? argv[1] : SPINDLE_EXAMPLE_DATA);
  const std::int64_t F = 64;
  auto spmm = sp::ops::spmm<float>();
  const auto B = sp::Tensor<float>::random({A.cols(), F}, 2);
  auto C_cpu = sp::Tensor<float>::zeros({A.rows(), F});
  spmm(A, B, C_cpu);

  if (!sp::cuda_available()) {
    std::printf("no GPU: %s\n", sp::cuda_unavailable_reason().c_str());
    const auto& gpu = spmm.compile_cuda();  // lowering needs no GPU
    auto variant = gpu.lower_variant(F);
    std::printf("default GPU schedule: %s, variant %s, %zu launch(es), block %dx%d\n", gpu.pattern().c_str(),
                variant.variant.describe().c_str(), variant.source.launches.size(),
                variant.source.launches[0].block[0], variant.source.launches[0].block[1]);
    try {
      auto cubin = sp::cuda::compile_cuda_for_arch(variant.source.source, variant.source.module_symbol, 80);
      std::printf("NVRTC: %zu-byte cubin for sm_80\n", cubin.size());
    } catch (const sp::UnavailableError& e) {
      std::printf("NVRTC not available either: %s\n", e.what());
    }
    return 0;
  }
  auto dA = sp::DeviceCsr<float>::from_host(A);
  auto dB = sp::DeviceTensor<float>::from_host(B);
  auto dC = sp::DeviceTensor<float>::zeros({A.rows(), F});
  spmm(dA, dB, dC);  // device arguments: the CUDA build of the same kernel
  const auto C_gpu = dC.to_host();
  double err = 0;
  for (std::int64_t q = 0; q < C_cpu.size(); ++q)
    err = std::max(err, static_cast<double>(std::abs(C_cpu.values()[q] - C_gpu.values()[q])));
  std::printf("GPU %s: C[0, 0..3] = %.4f %.4f %.4f %.4f, max |GPU - CPU| = %.3g\n",
              sp::default_cuda_runtime().device().description().c_str(), C_gpu(0, 0), C_gpu(0, 1), C_gpu(0, 2),
              C_gpu(0, 3), err);
  return err <= 1e-3 ? 0 : 1;
}
