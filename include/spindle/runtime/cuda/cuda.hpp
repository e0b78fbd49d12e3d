// Umbrella header of the CUDA runtime layer (no CUDA header is included: NVRTC and the
// driver are loaded at run time). See docs/cuda-runtime.md.
#pragma once

#include "spindle/runtime/cuda/cuda_api.hpp"
#include "spindle/runtime/cuda/cuda_options.hpp"
#include "spindle/runtime/cuda/cuda_runtime.hpp"
#include "spindle/runtime/cuda/device.hpp"
#include "spindle/runtime/cuda/device_buffer.hpp"
#include "spindle/runtime/cuda/device_csr.hpp"
#include "spindle/runtime/cuda/device_tensor.hpp"
#include "spindle/runtime/cuda/launch.hpp"
#include "spindle/runtime/cuda/nvrtc_engine.hpp"
#include "spindle/runtime/cuda/stream.hpp"
