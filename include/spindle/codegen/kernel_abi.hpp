// The calling convention between the host and a generated CPU kernel. It is defined once
// here: as a C++ struct for the runtime and as C text that the emitter puts at the top of
// every generated unit, so generated code needs no #include.
//
//   int <symbol>(void* const* buffers, const int64_t* scalars, const spindle_rt* rt);
//
// `buffers` holds the data pointers of the stage-III buffer parameters in the order of
// ir::Function::buffer_params, `scalars` the symbolic shape parameters in the order of
// ir::Function::scalar_params. `rt` gives access to the runtime thread pool; a null rt
// runs parallel loops serially. The function returns 0.
#pragma once

#include <cstdint>

namespace spindle::codegen {

// Body of an outlined parallel loop: runs iterations [begin, end).
using ParallelBody = void (*)(void* closure, std::int64_t begin, std::int64_t end);

struct KernelRuntimeAbi {
  // Runs body over [0, n) in chunks of at least `grain` iterations on the pool.
  void (*parallel_for)(void* pool, std::int64_t n, std::int64_t grain, ParallelBody body,
                       void* closure);
  void* pool;
};

using KernelEntry = int (*)(void* const* buffers, const std::int64_t* scalars,
                            const KernelRuntimeAbi* rt);

inline constexpr const char* kernel_abi_c_text =
    "typedef struct spindle_rt {\n"
    "  void (*parallel_for)(void* pool, long long n, long long grain,\n"
    "                       void (*body)(void* closure, long long begin, long long end),\n"
    "                       void* closure);\n"
    "  void* pool;\n"
    "} spindle_rt;\n";

}  // namespace spindle::codegen
