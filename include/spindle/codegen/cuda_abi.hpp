// The calling convention between the host and a generated CUDA kernel, and what the CUDA
// emitter hands to the runtime.
//
//   extern "C" __global__ void <symbol>(T0* __restrict__ p0, ..., long long s0, ...)
//
// Parameters: the stage-III buffer parameters in ir::Function::buffers order (device
// pointers; `const` for buffers the kernel only reads), then the scalar parameters in
// ir::Function::scalars order (long long for integers, float/double for floats). The host
// launches with cuLaunchKernel(kernelParams[k] = &value of parameter k); integer and float
// scalars are both read from the int64 scalar slots the argument binder fills (floats are
// stored in the slot's leading bytes, as for the C ABI).
//
// A kernel body may need several launches in sequence (a stage-III body with several
// top-level loop nests whose later nests read what earlier ones wrote): each is one
// CudaLaunch, with its own __global__ function, grid and block.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "spindle/ir/expr.hpp"

namespace spindle::codegen {

struct CudaLaunch {
  std::string symbol;                 // extern "C" __global__ function
  std::array<ir::Expr, 3> grid;       // blocks in x/y/z: expressions over the scalar params
  std::array<int, 3> block{1, 1, 1};  // threads in x/y/z (constants)
  std::int64_t static_shared_bytes = 0;
};

struct CudaSource {
  std::string source;                     // self-contained CUDA C++ (no #include)
  std::string module_symbol;              // names the module (cache key, messages)
  std::vector<std::string> param_types;   // C type of each kernel parameter, in order
  std::vector<CudaLaunch> launches;       // run in this order on one stream
};

}  // namespace spindle::codegen
