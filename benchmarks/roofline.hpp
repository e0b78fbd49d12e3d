// The bandwidth roofline of spindle-bench: a STREAM-style triad measured in the same run,
// and the compulsory-traffic model that turns a kernel time into effective GB/s.
//
// Triad: a[i] = b[i] + s * c[i] over three double arrays of kTriadElems elements each
// (3 x 128 MiB, twelve times the 32 MiB L3), run on a private thread pool with the thread
// count of the case, one contiguous block per thread (initialised the same way). Bytes counted as in STREAM: 24 per element (read b and
// c, write a; the write-allocate read of a is not counted). The reported bandwidth is the
// best of kTriadReps runs (STREAM's convention); the median is reported too.
//
// Traffic model (compulsory bytes: every array touched once, nothing re-read):
//   spmm   C[m,K] = A[m,n] X[n,K]:  A (indptr (m+1) + indices nnz) * idx + values nnz * val
//                                   + X n*K*val (read) + C m*K*val (write)
//   spmv   the same with K = 1
//   sddmm  C = A .* (X[m,K] Y[n,K]^T) on A's pattern: A structure + A values
//                                   + X m*K*val + Y n*K*val + C values nnz*val (write;
//                                   C shares A's indptr/indices)
// Effective GB/s = model bytes / median time; roofline fraction = effective GB/s / triad.
// A fraction above 1 means the kernel ran from cache (the operands fit in L2/L3), which is
// expected for small graphs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <spindle/runtime/thread_pool.hpp>

#include "timing.hpp"

namespace bench {

struct TriadResult {
  int threads = 1;
  double best_gbs = 0, median_gbs = 0;
  double array_mib = 0;
  int reps = 0;
};

inline constexpr std::int64_t kTriadElems = std::int64_t{1} << 24;  // 128 MiB per array
inline constexpr int kTriadReps = 10;

inline TriadResult measure_triad(int threads) {
  const std::int64_t n = kTriadElems;
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  spindle::runtime::ThreadPool pool(threads);
  const std::int64_t blocks = threads;  // one contiguous block per thread
  auto blocked = [&](auto&& body) {
    pool.parallel_for(blocks, 1, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t t = lo; t < hi; ++t) body(t * n / blocks, (t + 1) * n / blocks);
    });
  };
  blocked([&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) a[i] = 0.0, b[i] = 1.0, c[i] = 2.0;
  });
  const double s = 3.0;
  double* __restrict pa = a.get();
  const double* __restrict pb = b.get();
  const double* __restrict pc = c.get();
  Samples samples;
  for (int r = 0; r < kTriadReps + 1; ++r) {
    double t = time_call([&] {
      blocked([&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t i = lo; i < hi; ++i) pa[i] = pb[i] + s * pc[i];
      });
    });
    if (r > 0) samples.seconds.push_back(t);  // the first run is a warm-up
  }
  volatile double sink = pa[n / 2];
  (void)sink;
  const double bytes = 24.0 * static_cast<double>(n);
  TriadResult out;
  out.threads = threads;
  out.best_gbs = bytes / samples.min() * 1e-9;
  out.median_gbs = bytes / samples.median() * 1e-9;
  out.array_mib = 8.0 * static_cast<double>(n) / (1 << 20);
  out.reps = kTriadReps;
  return out;
}

struct CaseShape {
  std::string op;
  std::int64_t rows = 0, cols = 0, nnz = 0, feat = 1;
  int value_bytes = 4, index_bytes = 4;
  // spgemm / spadd (sparse operands and a sparse result): B's shape and entries, C's entries
  // and, for spgemm, the multiply-adds (sum over A's entries a_ij of nnz(row j of B)).
  std::int64_t b_rows = 0, nnz_b = 0, nnz_out = 0, mult_adds = 0;
};

inline double model_flops(const CaseShape& c) {
  const double nnz = static_cast<double>(c.nnz), k = static_cast<double>(c.feat);
  if (c.op == "spmm") return 2.0 * nnz * k;
  if (c.op == "spmv") return 2.0 * nnz;
  if (c.op == "spgemm") return 2.0 * static_cast<double>(c.mult_adds);
  if (c.op == "spadd") return nnz + static_cast<double>(c.nnz_b);  // one addition per input entry
  if (c.op == "spmul") return static_cast<double>(c.nnz_out);       // one product per result entry
  if (c.op == "transpose" || c.op == "coo2csr") return 0;           // a data movement
  if (c.op == "prune") return nnz;                                   // one comparison per entry
  if (c.op == "dense2csr") return static_cast<double>(c.rows) * static_cast<double>(c.cols);  // one per element
  return 2.0 * nnz * k + nnz;  // sddmm: a K-long dot per nonzero, then the scaling by A
}

inline double model_bytes(const CaseShape& c) {
  const double m = static_cast<double>(c.rows), n = static_cast<double>(c.cols);
  const double nnz = static_cast<double>(c.nnz), k = static_cast<double>(c.feat);
  const double vb = c.value_bytes, ib = c.index_bytes;
  const double a = (m + 1) * ib + nnz * ib + nnz * vb;
  if (c.op == "spmm") return a + n * k * vb + m * k * vb;
  if (c.op == "spmv") return a + n * vb + m * vb;
  if (c.op == "transpose") return a + (n + 1) * ib + nnz * (ib + vb);  // A read, Aᵀ written
  if (c.op == "coo2csr")  // the triplets (nnz_b of them) read, C written
    return static_cast<double>(c.nnz_b) * (2 * ib + vb) + (m + 1) * ib + nnz * (ib + vb);
  if (c.op == "prune") return a + (m + 1) * ib + static_cast<double>(c.nnz_out) * (ib + vb);  // A read, C written
  if (c.op == "dense2csr") return m * n * vb + (m + 1) * ib + static_cast<double>(c.nnz_out) * (ib + vb);
  if (sparse_result_op(c.op)) {
    // A and B read once, C (row offsets, indices, values) written once; B's rows are
    // A's columns (spgemm) or A's rows (spadd), given as b_rows.
    const double nb = static_cast<double>(c.nnz_b), nc = static_cast<double>(c.nnz_out);
    return a + (static_cast<double>(c.b_rows) + 1) * ib + nb * (ib + vb) + (m + 1) * ib + nc * (ib + vb);
  }
  return a + m * k * vb + n * k * vb + nnz * vb;  // sddmm
}

}  // namespace bench
