// cuda_sort_rows: the CUDA module that sorts each row of an assembled CSR output by column on
// the GPU (the last step of runtime/cuda/assembled_cuda_kernel.hpp; the CPU path sorts on the
// host). Written here, not lowered from the IR: it is one fixed algorithm per (index type,
// value type), not a user kernel.
//
// One thread per row: a row already in order is only checked; up to 32 entries an insertion
// sort; longer rows a heap sort (in place, O(n log n), no scratch memory), moving the values
// with their columns. Parameters: (const long long* row_ptr, I* indices, V* values,
// long long rows); the grid is ceil(rows / 128) blocks of 128 threads.
#pragma once

#include <string>

#include "spindle/codegen/cuda_abi.hpp"
#include "spindle/ir/ops.hpp"
#include "spindle/support/error.hpp"

namespace spindle::codegen {

struct SortRowsSource {
  CudaSource source;
  ir::Var rows;  // the grid's variable: the last parameter
};

inline SortRowsSource cuda_sort_rows(DType index, DType value) {
  auto c_type = [](DType t) -> std::string {
    switch (t) {
      case DType::i32: return "int";
      case DType::i64: return "long long";
      case DType::f32: return "float";
      case DType::f64: return "double";
      default: throw InternalError(message("cuda_sort_rows: unsupported type ", dtype_name(t)));
    }
  };
  const std::string I = c_type(index), V = c_type(value);
  const std::string name = std::string("spindle_sort_rows_") + dtype_name(index) + "_" + dtype_name(value);
  const std::string sift = name + "_sift";
  std::string src;
  src += "// Sorts each CSR row by column: one thread per row (spindle/codegen/cuda_sort_rows.hpp).\n";
  src += "static __device__ void " + sift + "(" + I + "* x, " + V + "* v, long long s, long long n) {\n";
  src += "  for (;;) {\n";
  src += "    long long c = 2 * s + 1;\n";
  src += "    if (c >= n) return;\n";
  src += "    if (c + 1 < n && x[c] < x[c + 1]) ++c;\n";
  src += "    if (!(x[s] < x[c])) return;\n";
  src += "    const " + I + " tx = x[s]; x[s] = x[c]; x[c] = tx;\n";
  src += "    const " + V + " tv = v[s]; v[s] = v[c]; v[c] = tv;\n";
  src += "    s = c;\n";
  src += "  }\n";
  src += "}\n";
  src += "extern \"C\" __global__ void __launch_bounds__(128) " + name + "(const long long* __restrict__ row_ptr, " + I +
         "* __restrict__ idx, " + V + "* __restrict__ val, long long rows) {\n";
  src += "  const long long r = (long long)blockIdx.x * 128 + (long long)threadIdx.x;\n";
  src += "  if (r >= rows) return;\n";
  src += "  const long long b = row_ptr[r], n = row_ptr[r + 1] - b;\n";
  src += "  " + I + "* x = idx + b;\n";
  src += "  " + V + "* v = val + b;\n";
  src += "  bool sorted = true;\n";
  src += "  for (long long q = 1; q < n && sorted; ++q) sorted = x[q - 1] <= x[q];\n";
  src += "  if (sorted) return;\n";
  src += "  if (n <= 32) {\n";
  src += "    for (long long q = 1; q < n; ++q) {\n";
  src += "      const " + I + " key = x[q];\n";
  src += "      const " + V + " kv = v[q];\n";
  src += "      long long p = q - 1;\n";
  src += "      for (; p >= 0 && x[p] > key; --p) { x[p + 1] = x[p]; v[p + 1] = v[p]; }\n";
  src += "      x[p + 1] = key;\n";
  src += "      v[p + 1] = kv;\n";
  src += "    }\n";
  src += "    return;\n";
  src += "  }\n";
  src += "  for (long long s = n / 2; s-- > 0;) " + sift + "(x, v, s, n);\n";
  src += "  for (long long e = n - 1; e > 0; --e) {\n";
  src += "    const " + I + " tx = x[0]; x[0] = x[e]; x[e] = tx;\n";
  src += "    const " + V + " tv = v[0]; v[0] = v[e]; v[e] = tv;\n";
  src += "    " + sift + "(x, v, 0, e);\n";
  src += "  }\n";
  src += "}\n";

  SortRowsSource out;
  out.rows = ir::Var("rows", DType::i64);
  out.source.source = std::move(src);
  out.source.module_symbol = name;
  out.source.param_types = {"const long long*", I + "*", V + "*", "long long"};
  CudaLaunch l;
  l.symbol = name;
  l.grid[0] = (ir::Expr(out.rows) + 127) / ir::int_imm(128);
  l.grid[1] = ir::int_imm(1);
  l.grid[2] = ir::int_imm(1);
  l.block = {128, 1, 1};
  out.source.launches.push_back(std::move(l));
  return out;
}

}  // namespace spindle::codegen
