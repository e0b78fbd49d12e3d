// Spindle: a sparse tensor compiler as a header-only C++20 DSL with a JIT backend.
//
//   #include <spindle/spindle.hpp>
//
// This umbrella header pulls in the DSL (axes, buffers, iterators, kernel), the host
// formats (Csr, Tensor, Ragged, Csf, Bsr, Ell, Matrix Market IO), input features
// (inspect::graph_features) and the CPU runtime. It includes
// no LLVM, Clang, CUDA or Eigen headers; Eigen interop is in <spindle/eigen.hpp>.
#pragma once

#include "spindle/format/bsr.hpp"
#include "spindle/format/dbsr.hpp"
#include "spindle/format/csf.hpp"
#include "spindle/format/csr.hpp"
#include "spindle/format/dcsr.hpp"
#include "spindle/format/ell.hpp"
#include "spindle/format/kron_blocks.hpp"
#include "spindle/format/matrix_market.hpp"
#include "spindle/format/ragged.hpp"
#include "spindle/format/side_by_side.hpp"
#include "spindle/format/typed_edges.hpp"
#include "spindle/format/sparse_vector.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/inspect/graph_features.hpp"
#include "spindle/kernel.hpp"
#include "spindle/ops.hpp"
#include "spindle/runtime/runtime.hpp"
