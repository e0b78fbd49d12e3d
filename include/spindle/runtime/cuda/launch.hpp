// Launching one codegen::CudaLaunch: the grid is evaluated from the kernel's scalar
// parameters, checked against the device limits, and handed to cuLaunchKernel.
//
//   evaluate_int(expr, vars, values)  integer value of a grid expression (IntImm, Var,
//                                     + - * / % min max, comparisons, && ||, !, unary -,
//                                     select, casts to integer types); / and % truncate
//                                     like C, as the generated code does
//   launch(rt, fn, launch, params, vars, scalars, stream)
//
// A grid with a zero dimension launches nothing. Block and grid are checked against the
// device (RuntimeError); a failing cuLaunchKernel raises RuntimeError naming the kernel
// symbol, the grid, the block, the shared memory and the driver's error, with the
// function's own limits (registers, max threads per block) when the driver reports them.
// The static shared memory of CudaLaunch is part of the compiled function; no dynamic shared
// memory is requested.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "spindle/codegen/cuda_abi.hpp"
#include "spindle/ir/expr.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/runtime/cuda/cuda_runtime.hpp"
#include "spindle/support/error.hpp"

namespace spindle::cuda {

namespace detail {

inline void check_overflow(bool overflow, const ir::Expr& e) {
  SPINDLE_CHECK(!overflow, RuntimeError, "CUDA launch: the grid expression ", ir::to_string(e),
                " overflows 64-bit integers for the given arguments");
}

}  // namespace detail

inline std::int64_t evaluate_int(const ir::Expr& e, const std::vector<ir::Var>& vars, const std::int64_t* values) {
  SPINDLE_INTERNAL_CHECK(e.defined(), "cuda::evaluate_int", "undefined expression");
  switch (e.kind()) {
    case ir::ExprKind::IntImm: return e.as<ir::IntImmNode>()->value;
    case ir::ExprKind::Var: {
      for (std::size_t i = 0; i < vars.size(); ++i)
        if (vars[i].same_as(e)) return values[i];
      throw InternalError(message("internal error in cuda::evaluate_int: the grid expression uses variable '",
                                  e.as<ir::VarNode>()->name, "', which is not a scalar parameter of the kernel"));
    }
    case ir::ExprKind::Binary: {
      const auto* b = e.as<ir::BinaryNode>();
      std::int64_t x = evaluate_int(b->a, vars, values);
      // && and || evaluate their right side only when needed, as in C.
      if (b->op == ir::BinOp::land) return x != 0 && evaluate_int(b->b, vars, values) != 0;
      if (b->op == ir::BinOp::lor) return x != 0 || evaluate_int(b->b, vars, values) != 0;
      std::int64_t y = evaluate_int(b->b, vars, values);
      std::int64_t r = 0;
      switch (b->op) {
        case ir::BinOp::add: detail::check_overflow(__builtin_add_overflow(x, y, &r), e); return r;
        case ir::BinOp::sub: detail::check_overflow(__builtin_sub_overflow(x, y, &r), e); return r;
        case ir::BinOp::mul: detail::check_overflow(__builtin_mul_overflow(x, y, &r), e); return r;
        case ir::BinOp::div:
        case ir::BinOp::mod:
          SPINDLE_CHECK(y != 0, RuntimeError, "CUDA launch: the grid expression ", ir::to_string(e),
                        " divides by zero for the given arguments");
          detail::check_overflow(x == std::numeric_limits<std::int64_t>::min() && y == -1, e);
          return b->op == ir::BinOp::div ? x / y : x % y;
        case ir::BinOp::min: return x < y ? x : y;
        case ir::BinOp::max: return x > y ? x : y;
        case ir::BinOp::eq: return x == y;
        case ir::BinOp::ne: return x != y;
        case ir::BinOp::lt: return x < y;
        case ir::BinOp::le: return x <= y;
        case ir::BinOp::gt: return x > y;
        case ir::BinOp::ge: return x >= y;
        default: break;
      }
      break;
    }
    case ir::ExprKind::Unary: {
      const auto* u = e.as<ir::UnaryNode>();
      std::int64_t x = evaluate_int(u->a, vars, values);
      if (u->op == ir::UnOp::lnot) return x == 0;
      detail::check_overflow(x == std::numeric_limits<std::int64_t>::min(), e);
      return -x;
    }
    case ir::ExprKind::Select: {
      const auto* s = e.as<ir::SelectNode>();
      return evaluate_int(s->cond, vars, values) != 0 ? evaluate_int(s->t, vars, values)
                                                      : evaluate_int(s->f, vars, values);
    }
    case ir::ExprKind::Cast: {
      const auto* c = e.as<ir::CastNode>();
      if (!is_int(e.dtype()) && e.dtype() != DType::boolean) break;
      if (!is_int(c->value.dtype()) && c->value.dtype() != DType::boolean) break;
      std::int64_t x = evaluate_int(c->value, vars, values);
      if (e.dtype() == DType::i32) return static_cast<std::int32_t>(static_cast<std::uint32_t>(x));
      if (e.dtype() == DType::boolean) return x != 0;
      return x;
    }
    default: break;
  }
  throw InternalError(message("internal error in cuda::evaluate_int: a launch grid must be an integer expression "
                              "over the scalar parameters; cannot evaluate ",
                              ir::to_string(e)));
}

namespace detail {

inline std::string dims(const std::array<std::int64_t, 3>& d) { return message("(", d[0], ", ", d[1], ", ", d[2], ")"); }

inline std::string launch_config(const codegen::CudaLaunch& l, const std::array<std::int64_t, 3>& grid) {
  return message("kernel '", l.symbol, "' with grid ", dims(grid), ", block (", l.block[0], ", ", l.block[1], ", ",
                 l.block[2], "), ", l.static_shared_bytes, " bytes of static shared memory");
}

}  // namespace detail

// Launches `fn` (a CUfunction of l.symbol) with kernelParams `params` on `stream`.
// `scalar_vars[i]` has the value `scalars[i]` in the grid expressions.
inline void launch(CudaRuntime& rt, void* fn, const codegen::CudaLaunch& l, void** params,
                   const std::vector<ir::Var>& scalar_vars, const std::int64_t* scalars, CUstream stream) {
  std::array<std::int64_t, 3> grid{1, 1, 1};
  for (int d = 0; d < 3; ++d)
    if (l.grid[d].defined()) grid[d] = evaluate_int(l.grid[d], scalar_vars, scalars);
  for (int d = 0; d < 3; ++d)
    SPINDLE_CHECK(grid[d] >= 0, RuntimeError, "CUDA launch of ", detail::launch_config(l, grid), ": grid dimension ",
                  "xyz"[d], " is negative (", ir::to_string(l.grid[d]), ")");
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;

  CudaContext& context = rt.context();
  const CudaDevice& dev = context.device();
  std::int64_t threads = 1;
  for (int d = 0; d < 3; ++d) {
    SPINDLE_CHECK(l.block[d] >= 1 && l.block[d] <= dev.max_block_dim[d], RuntimeError, "CUDA launch of ",
                  detail::launch_config(l, grid), ": block dimension ", "xyz"[d], " = ", l.block[d],
                  " is outside [1, ", dev.max_block_dim[d], "] on ", dev.description());
    SPINDLE_CHECK(grid[d] <= dev.max_grid_dim[d], RuntimeError, "CUDA launch of ", detail::launch_config(l, grid),
                  ": grid dimension ", "xyz"[d], " = ", grid[d], " exceeds the device limit ", dev.max_grid_dim[d],
                  " on ", dev.description(), "\n  hint: the input is too large for this launch shape");
    threads *= l.block[d];
  }
  SPINDLE_CHECK(threads <= dev.max_threads_per_block, RuntimeError, "CUDA launch of ", detail::launch_config(l, grid),
                ": ", threads, " threads per block exceed the device limit ", dev.max_threads_per_block, " on ",
                dev.description());
  SPINDLE_CHECK(l.static_shared_bytes <= dev.max_shared_per_block, RuntimeError, "CUDA launch of ",
                detail::launch_config(l, grid), ": the shared memory exceeds the device limit ",
                dev.max_shared_per_block, " bytes per block on ", dev.description());

  context.make_current();
  const DriverApi& api = context.api();
  auto f = static_cast<CUfunction>(fn);
  CUresult r = api.cuLaunchKernel(f, static_cast<unsigned>(grid[0]), static_cast<unsigned>(grid[1]),
                                  static_cast<unsigned>(grid[2]), static_cast<unsigned>(l.block[0]),
                                  static_cast<unsigned>(l.block[1]), static_cast<unsigned>(l.block[2]), 0, stream,
                                  params, nullptr);
  if (r == CUDA_SUCCESS) [[likely]]
    return;
  std::string limits;
  int max_threads = 0, regs = 0, shared = 0, local = 0;
  if (api.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS &&
      api.cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f) == CUDA_SUCCESS &&
      api.cuFuncGetAttribute(&shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f) == CUDA_SUCCESS &&
      api.cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) == CUDA_SUCCESS)
    limits = message("\n  the compiled function allows at most ", max_threads, " threads per block (", regs,
                     " registers per thread, ", shared, " bytes of static shared memory, ", local,
                     " bytes of local memory per thread)");
  throw RuntimeError(message("CUDA launch of ", detail::launch_config(l, grid), " on ", dev.description(),
                             " failed: cuLaunchKernel returned ", api.error_text(r), limits));
}

}  // namespace spindle::cuda
