// The one translation unit with the definitions of Spindle's compile-and-call machinery
// when SPINDLE_SEPARATE_COMPILATION is set (the CMake target spindle::spindle does this and
// builds this file into libspindle_runtime). See support/linkage.hpp.
#ifndef SPINDLE_SEPARATE_COMPILATION
#define SPINDLE_SEPARATE_COMPILATION 1
#endif
#include "spindle/runtime/assembled_kernel_impl.hpp"
#include "spindle/runtime/compiled_kernel_impl.hpp"
#include "spindle/runtime/cuda/assembled_cuda_kernel_impl.hpp"
#include "spindle/runtime/cuda/compiled_cuda_kernel_impl.hpp"
#include "spindle/runtime/runtime_impl.hpp"
#include "spindle/frontend/builder_impl.hpp"
#include "spindle/frontend/iteration_inference.hpp"
#include "spindle/format/matrix_market.hpp"

namespace spindle {
SPINDLE_MM_INSTANCES()  // the reader's instantiations declared extern in matrix_market.hpp
}  // namespace spindle
