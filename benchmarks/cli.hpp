// Command line of spindle-bench: the Config it fills, --help text and parsing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef SPINDLE_BENCH_DEFAULT_MATRIX
#define SPINDLE_BENCH_DEFAULT_MATRIX "data/cora.mtx.gz"
#endif
#ifndef SPINDLE_BENCH_DATA_DIR
#define SPINDLE_BENCH_DATA_DIR ""
#endif

namespace bench {

struct Config {
  std::string backend = "cpu";  // cpu | cuda
  std::vector<std::string> ops;
  std::vector<std::string> matrices;  // Matrix Market paths
  int rmat_scale = -1;                // < 0: no R-MAT graph
  int edge_factor = 16;
  std::uint64_t seed = 1;
  bool random_values = false;  // --values random
  std::vector<int> feats;
  std::vector<int> threads;
  int reps = 0;  // 0: adaptive (min_reps and min_time per system and case)
  int min_reps = 10;
  int max_reps = 100000;
  double min_time = 0.2;  // seconds of timed calls per system and case
  int warmup = 2;
  std::string dtype = "f32";
  int block = 4;  // bsr_spmm: block size (square blocks; 2, 3, 4 or 8); sr_bcrs_spmm: rows per panel t
  int group = 1;  // sr_bcrs_spmm: vectors per group g (1 or 4)
  int hyb_partitions = 1;  // hyb_spmm: column partitions c
  int hyb_width = 32;      // hyb_spmm: largest bucket width k (a power of two)
  std::string tuning_file;  // tuned_spmm, tuned_spmv: tuning records to reuse and extend ("" = none)
  // scheduled_spmm: Spindle's CSR SpMM under this user schedule (docs/schedules.md)
  std::string schedule = "split(k, 16).vectorize(k_i).parallel(i)";
  int kron_block = 1;       // every matrix becomes (A + I) (x) a dense D x D block (D > 1)
  int coo_repeats = 1;      // coo2csr: each entry of A given as this many triplets (duplicates)
  double tolerance = -1;  // < 0: per dtype (1e-4 for f32, 1e-10 for f64)
  bool json = false;
  std::string json_file;  // also write the JSON document here
  bool graphblas = true;
  bool mkl = true;
  bool compile_latency = true;
  bool explain = false;
  bool triad_only = false;
  bool loop_order = false;  // --loop-order: the loop-order study (benchmarks/loop_order.hpp) only
  bool einsum = false;      // --einsum: the einsum front end vs lambda kernels (benchmarks/einsum_bench.hpp) only
  // --backend cuda
  bool compile_latency_only = false;  // --compile-latency: only the NVRTC compile latency
  int cuda_arch = 80;                 // NVRTC target when there is no GPU
  bool cusparse = true;
  // Hidden: the disk-cache child (--disk-hit-child DIR OP DTYPE).
  bool disk_child = false;
  std::string child_dir, child_op;
  // Hidden: the CUDA disk-cache child (--cuda-disk-hit-child DIR OP FEAT ARCH DTYPE).
  bool cuda_disk_child = false;
  int child_feat = 0, child_arch = 0;
};

inline const char* kUsage = R"(spindle-bench: Spindle vs Eigen (and SuiteSparse:GraphBLAS, Intel MKL) on sparse kernels

usage: spindle-bench [options]
  --backend cpu|cuda   cpu: Spindle vs Eigen/GraphBLAS/MKL on this CPU; cuda: Spindle's GPU build
                       vs cuSPARSE (see "CUDA backend" below)                 [cpu]
  --op LIST            spmm, spmv, sddmm, spgemm, spadd, spmul, bsr_spmm, dbsr_spmm, sr_bcrs_spmm,
                       ell_spmm, hyb_spmm, tuned_spmm, scheduled_spmm, tuned_spmv, fused_sddmm,
                       rgcn_spmm (comma list, repeatable).
                       spgemm: C = A A,
                       spadd: C = A + A^T, spmul: C = A .* A^T (A instead of A^T when A
                       is not square), transpose: C = A^T, coo2csr: C = A rebuilt from its
                       entries as triplets in a random order, prune, dense2csr: sparse CSR
                       results (no K); bsr_spmm/dbsr_spmm/sr_bcrs_spmm/ell_spmm/hyb_spmm: Spindle's
                       BSR or DBSR (--block), SR-BCRS (--block rows per panel, --group), ELL or hyb(c, k) (--hyb) SpMM; tuned_spmm: the format spindle::tune::tune_spmm picks for the
                       matrix, K and thread count (tuned before timing; its report goes to
                       stderr); scheduled_spmm: Spindle's CSR SpMM under --schedule; each
                       with Spindle's CSR SpMM (default schedule) and the peers' CSR SpMM;
                       tuned_spmv: the schedule spindle::tune::tune_spmv picks (partial row
                       sums or not), with Spindle's default SpMV and the peers' SpMV;
                       fused_sddmm: SDDMM with the rows and nonzeros fused into one loop
                       (sparse_fuse), with Spindle's default SDDMM and the peers' SDDMM;
                       rgcn_spmm: the RGCN aggregation C = sum_r Dinv_r A_r XW_r on a typed
                       graph (values = relation ids 1..R, e.g. data/rgcn), Spindle on
                       Ell3dBuckets (ops::rgcn_buckets_spmm), Spindle's CSR SpMM and the
                       peers on the relations stacked side by side (N x RN times [RN, K])
                                                          [spmm; cuda: spmm,sddmm]
  --block B            bsr_spmm/dbsr_spmm block size B x B: 2, 3, 4 or 8;
                       sr_bcrs_spmm: B rows per panel (t)                    [4]
  --group G            sr_bcrs_spmm: G vectors per group (g): 1 or 4          [1]
  --hyb C,K            hyb_spmm: C column partitions, buckets up to width K (a power
                       of two, <= 1024)                                        [1,32]
  --tuning-file PATH   tuned_spmm, tuned_spmv: reuse and append tuning records (JSON Lines)
  --schedule TEXT      scheduled_spmm: a user schedule of the SpMM kernel (loops i, j, k;
                       docs/schedules.md)   [split(k, 16).vectorize(k_i).parallel(i)]
  --kron-block D       replace each matrix A by (A + I) (x) a dense D x D block: the operator
                       of a D-component finite-element problem on A's mesh (exact aligned
                       blocks, for the block formats)                          [off]
  --matrix PATH        Matrix Market file (.mtx or .mtx.gz); comma list, repeatable.
                       A path that does not exist is also looked up in the shared
                       data folder, with .mtx.gz appended (e.g. gnn/pubmed)  [bundled cora]
  --rmat SCALE         add a Graph500 R-MAT graph with 2^SCALE vertices
  --edge-factor N      R-MAT edges per vertex before duplicates are removed   [16]
  --values file|random the matrices' values: as the files give them (the graphs: all 1, which
                       GraphBLAS stores "iso" and never moves), or drawn in [-1, 1] (--seed) [file]
  --coo-repeats N      coo2csr: each entry of A as N triplets at its coordinate, values
                       that sum to its value, all in one random order (duplicates to fold)  [1]
  --seed N             seed of the R-MAT graph and the dense operands        [1]
  --feat LIST          feature sizes K for spmm and sddmm     [32,128; cuda: 32,128,512]
  --threads LIST       thread counts (every system runs with the same count) [1,2,4..hardware]
  --reps N             exactly N timed calls per system and case  [adaptive: >= 10 and >= 0.2 s]
  --min-time S         adaptive mode: seconds of timed calls per system     [0.2]
  --warmup N           untimed calls per system before timing                [2]
  --dtype f32|f64      element type                                           [f32]
  --tolerance X        max |spindle - eigen| / max |eigen| accepted   [1e-4 f32, 1e-10 f64]
  --json               print one JSON document on stdout (progress on stderr)
  --json-file PATH     print the tables and also write the JSON document to PATH
  --no-graphblas       leave SuiteSparse:GraphBLAS out
  --no-mkl             leave Intel MKL out (measured when the build found it: scripts/install-peers.sh)
  --no-compile-latency skip the compile-latency measurements
  --explain            print the generated code of every benchmarked kernel (stderr)
  --triad-only         measure the bandwidth roofline (triad) only
  --loop-order         only the loop-order study: SpMM, SDDMM, A^T B and X^T dC written in
                       every order, each run as written and in Spindle's order (auto/best)
  --einsum             only the einsum study: SpMV, SpMM, SDDMM and A^T Z through
                       spindle::einsum / einsum_into vs the lambda kernels; first-call
                       costs and the per-call dispatch overhead
  --help               this text

CUDA backend (--backend cuda; ops spmm and sddmm; --threads and --no-graphblas do not apply,
--explain prints the CUDA variants):
  NVRTC compile latency first (runs without a GPU: the target is then --cuda-arch); with a
  GPU, Spindle vs cusparseSpMM (ALG_DEFAULT, CSR_ALG1, CSR_ALG2) / cusparseSDDMM, median
  kernel time from CUDA events, checked against Spindle's CPU result and cuSPARSE's.
  Without a GPU it says why and exits 0 after the compile-latency part.
  --compile-latency    only the NVRTC compile latency
  --cuda-arch N        NVRTC target without a GPU (80 = sm_80)                [80]
  --no-cusparse        leave cuSPARSE out

Exit status: 0 when every result matched Eigen, 1 on a mismatch, 2 on a usage error
(cuda: 1 also when an NVRTC compile failed; a missing GPU, NVRTC or cuSPARSE is not an error).
)";

inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

inline long parse_int(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < lo || x > hi)
    throw std::invalid_argument(flag + ": expected an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "], got '" + v + "'");
  return x;
}

inline double parse_double(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= 0))
    throw std::invalid_argument(flag + ": expected a non-negative number, got '" + v + "'");
  return x;
}

// A path as given, else <data dir>/<path>[.mtx.gz].
inline std::string resolve_matrix(const std::string& p) {
  namespace fs = std::filesystem;
  if (fs::exists(p)) return p;
  std::string dir = SPINDLE_BENCH_DATA_DIR;
  if (!dir.empty()) {
    for (const char* ext : {"", ".mtx.gz", ".mtx"})
      if (fs::exists(dir + "/" + p + ext)) return dir + "/" + p + ext;
  }
  throw std::invalid_argument("--matrix: no file '" + p + "'" +
                              (dir.empty() ? "" : " (nor under " + dir + ")"));
}

// Throws std::invalid_argument on a usage error; returns false after --help.
inline bool parse_args(int argc, char** argv, Config& c) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool rmat_or_matrix = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(a + ": missing value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return false;
    } else if (a == "--backend") {
      c.backend = value();
      if (c.backend != "cpu" && c.backend != "cuda")
        throw std::invalid_argument("--backend: cpu or cuda, got '" + c.backend + "'");
    } else if (a == "--compile-latency") {
      c.compile_latency_only = true;
    } else if (a == "--cuda-arch") {
      c.cuda_arch = static_cast<int>(parse_int(a, value(), 10, 9999));
    } else if (a == "--no-cusparse") {
      c.cusparse = false;
    } else if (a == "--op") {
      for (auto& op : split_list(value())) {
        if (op != "spmm" && op != "spmv" && op != "sddmm" && op != "spgemm" && op != "spadd" && op != "spmul" && op != "transpose" && op != "coo2csr" && op != "prune" && op != "dense2csr" && op != "bsr_spmm" && op != "dbsr_spmm" &&
            op != "sr_bcrs_spmm" && op != "ell_spmm" && op != "hyb_spmm" && op != "tuned_spmm" && op != "scheduled_spmm" && op != "tuned_spmv" && op != "fused_sddmm" && op != "rgcn_spmm")
          throw std::invalid_argument("--op: unknown operator '" + op +
                                      "' (spmm, spmv, sddmm, spgemm, spadd, spmul, transpose, coo2csr, prune, dense2csr, bsr_spmm, dbsr_spmm, sr_bcrs_spmm, ell_spmm, hyb_spmm, tuned_spmm, scheduled_spmm, tuned_spmv, fused_sddmm, rgcn_spmm)");
        c.ops.push_back(op);
      }
    } else if (a == "--block") {
      c.block = static_cast<int>(parse_int(a, value(), 2, 8));
      if (c.block != 2 && c.block != 3 && c.block != 4 && c.block != 8)
        throw std::invalid_argument("--block: 2, 3, 4 or 8");
    } else if (a == "--group") {
      c.group = static_cast<int>(parse_int(a, value(), 1, 4));
      if (c.group != 1 && c.group != 4) throw std::invalid_argument("--group: 1 or 4");
    } else if (a == "--schedule") {
      c.schedule = value();
    } else if (a == "--hyb") {
      const auto parts = split_list(value());
      if (parts.size() != 2) throw std::invalid_argument("--hyb: C,K (column partitions, largest bucket width)");
      c.hyb_partitions = static_cast<int>(parse_int(a, parts[0], 1, 1 << 20));
      c.hyb_width = static_cast<int>(parse_int(a, parts[1], 1, 1024));
      if ((c.hyb_width & (c.hyb_width - 1)) != 0) throw std::invalid_argument("--hyb: K must be a power of two");
    } else if (a == "--tuning-file") {
      c.tuning_file = value();
    } else if (a == "--kron-block") {
      c.kron_block = static_cast<int>(parse_int(a, value(), 1, 16));
    } else if (a == "--matrix") {
      for (auto& m : split_list(value())) c.matrices.push_back(resolve_matrix(m));
      rmat_or_matrix = true;
    } else if (a == "--rmat") {
      c.rmat_scale = static_cast<int>(parse_int(a, value(), 1, 29));
      rmat_or_matrix = true;
    } else if (a == "--edge-factor") {
      c.edge_factor = static_cast<int>(parse_int(a, value(), 1, 1024));
    } else if (a == "--values") {
      const std::string v = value();
      if (v != "file" && v != "random") throw std::invalid_argument("--values: file or random");
      c.random_values = v == "random";
    } else if (a == "--coo-repeats") {
      c.coo_repeats = static_cast<int>(parse_int(a, value(), 1, 64));
    } else if (a == "--seed") {
      c.seed = static_cast<std::uint64_t>(parse_int(a, value(), 0, 1L << 62));
    } else if (a == "--feat") {
      for (auto& f : split_list(value())) c.feats.push_back(static_cast<int>(parse_int(a, f, 1, 1 << 16)));
    } else if (a == "--threads") {
      for (auto& t : split_list(value())) c.threads.push_back(static_cast<int>(parse_int(a, t, 1, 1024)));
    } else if (a == "--reps") {
      c.reps = static_cast<int>(parse_int(a, value(), 1, 10000000));
    } else if (a == "--min-time") {
      c.min_time = parse_double(a, value());
    } else if (a == "--warmup") {
      c.warmup = static_cast<int>(parse_int(a, value(), 0, 1000));
    } else if (a == "--dtype") {
      c.dtype = value();
      if (c.dtype != "f32" && c.dtype != "f64") throw std::invalid_argument("--dtype: f32 or f64");
    } else if (a == "--tolerance") {
      c.tolerance = parse_double(a, value());
    } else if (a == "--json") {
      c.json = true;
    } else if (a == "--json-file") {
      c.json_file = value();
    } else if (a == "--no-graphblas") {
      c.graphblas = false;
    } else if (a == "--no-mkl") {
      c.mkl = false;
    } else if (a == "--no-compile-latency") {
      c.compile_latency = false;
    } else if (a == "--explain") {
      c.explain = true;
    } else if (a == "--triad-only") {
      c.triad_only = true;
    } else if (a == "--loop-order") {
      c.loop_order = true;
    } else if (a == "--einsum") {
      c.einsum = true;
    } else if (a == "--disk-hit-child") {
      c.disk_child = true;
      c.child_dir = value();
      c.child_op = value();
      c.dtype = value();
    } else if (a == "--cuda-disk-hit-child") {
      c.cuda_disk_child = true;
      c.child_dir = value();
      c.child_op = value();
      c.child_feat = static_cast<int>(parse_int(a, value(), 1, 1 << 16));
      c.child_arch = static_cast<int>(parse_int(a, value(), 0, 9999));
      c.dtype = value();
    } else {
      throw std::invalid_argument("unknown option '" + a + "' (see --help)");
    }
  }
  const bool cuda = c.backend == "cuda";
  if (cuda) {
    for (auto& op : c.ops)
      if (op != "spmm" && op != "sddmm")
        throw std::invalid_argument("--op " + op + ": the CUDA backend measures spmm and sddmm");
    if (c.triad_only) throw std::invalid_argument("--triad-only: CPU backend only (the CUDA roofline is always measured)");
    if (c.loop_order) throw std::invalid_argument("--loop-order: CPU backend only");
    if (c.einsum) throw std::invalid_argument("--einsum: CPU backend only");
    if (c.compile_latency_only && !c.compile_latency)
      throw std::invalid_argument("--compile-latency and --no-compile-latency exclude each other");
  } else if (c.compile_latency_only) {
    throw std::invalid_argument("--compile-latency: CUDA backend only (--backend cuda)");
  }
  if (c.ops.empty()) c.ops = cuda ? std::vector<std::string>{"spmm", "sddmm"} : std::vector<std::string>{"spmm"};
  if (!rmat_or_matrix) c.matrices = {SPINDLE_BENCH_DEFAULT_MATRIX};
  if (c.feats.empty()) c.feats = cuda ? std::vector<int>{32, 128, 512} : std::vector<int>{32, 128};
  if (c.threads.empty()) {
    // 1, 2, 4, ... up to the hardware thread count, and that count itself.
    int hw = std::max(static_cast<int>(std::thread::hardware_concurrency()), 1);
    for (int t = 1; t < hw; t *= 2) c.threads.push_back(t);
    c.threads.push_back(hw);
  }
  if (c.tolerance < 0) c.tolerance = c.dtype == "f32" ? 1e-4 : 1e-10;
  return true;
}

}  // namespace bench
