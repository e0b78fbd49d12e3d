// spindle-bench: runs sparse operators (spmm, spmv, sddmm, spgemm, spadd) with Spindle and, in the same
// run, with Eigen and SuiteSparse:GraphBLAS, on Matrix Market files or a generated R-MAT
// graph, at the given feature sizes and thread counts. Prints median times, GFLOP/s,
// effective GB/s, the fraction of a triad roofline measured on the spot and the time
// ratios, plus Spindle's compile latency. With --backend cuda: Spindle's GPU build of the
// same kernels against cuSPARSE (cuda_bench.hpp). See --help and benchmarks/README.md.
#include <spindle/eigen.hpp>
#include <spindle/spindle.hpp>
#include <spindle/tune.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "compile_latency.hpp"
#include "cuda_bench.hpp"
#include "einsum_bench.hpp"
#include "loop_order.hpp"
#include "matrices.hpp"
#include "peers_eigen.hpp"
#include "peers_graphblas.hpp"
#include "peers_mkl.hpp"
#include "report.hpp"
#include "rgcn_input.hpp"
#include "rmat.hpp"
#include "roofline.hpp"
#include "timing.hpp"

namespace bench {

template <class T>
struct Kernels {
  decltype(spindle::ops::spmm<T>()) spmm = spindle::ops::spmm<T>();
  decltype(spindle::ops::spmv<T>()) spmv = spindle::ops::spmv<T>();
  decltype(spindle::ops::sddmm<T>()) sddmm = spindle::ops::sddmm<T>();
  // Kernels that assemble a sparse output (a symbolic and a numeric phase): compile_assembled().
  decltype(spindle::ops::spgemm<T>()) spgemm = spindle::ops::spgemm<T>();
  decltype(spindle::ops::sparse_add<T>()) spadd = spindle::ops::sparse_add<T>();
  decltype(spindle::ops::sparse_multiply<T>()) spmul = spindle::ops::sparse_multiply<T>();
  // Aᵀ by a kernel whose output rows are scattered (lower/assemble_scattered.hpp).
  decltype(spindle::ops::csr_to_csc<T>()) transpose = spindle::ops::csr_to_csc<T>();
  // The entries with |a| > t, written under spindle::when (docs/language.md §4.7).
  decltype(spindle::ops::prune<T>()) prune = spindle::ops::prune<T>();
  decltype(spindle::ops::dense_to_csr<T>()) dense_to_csr = spindle::ops::dense_to_csr<T>();
  // COO -> CSR: an indirect write at scattered rows, duplicates summed (lower/assemble_scattered.hpp).
  decltype(spindle::ops::coo_to_csr<T>()) coo_to_csr = spindle::ops::coo_to_csr<T>();
  decltype(spindle::ops::ell_spmm<T>()) ell_spmm = spindle::ops::ell_spmm<T>();
  spindle::ops::HybSpmm<T> hyb_spmm;
  spindle::ops::RgcnBucketsSpmm<T> rgcn;  // rgcn_spmm: the aggregation over Ell3dBuckets
  decltype(spindle::ops::spmm<T>()) scheduled_spmm = spindle::ops::spmm<T>();  // with --schedule (main)
  // SDDMM with the rows and their nonzeros fused into one loop (docs/schedules.md, sparse_fuse).
  decltype(spindle::ops::sddmm<T>()) fused_sddmm =
      spindle::ops::sddmm<T>().with_schedule(spindle::Schedule().sparse_fuse("sddmm", {"I", "J"}));
  spindle::ops::BsrSpmm<T, 2, 2> bsr2;
  spindle::ops::BsrSpmm<T, 3, 3> bsr3;
  spindle::ops::BsrSpmm<T, 4, 4> bsr4;
  spindle::ops::BsrSpmm<T, 8, 8> bsr8;
  spindle::ops::DbsrSpmm<T, 2, 2> dbsr2;
  spindle::ops::DbsrSpmm<T, 3, 3> dbsr3;
  spindle::ops::DbsrSpmm<T, 4, 4> dbsr4;
  spindle::ops::DbsrSpmm<T, 8, 8> dbsr8;
  spindle::ops::SrBcrsSpmm<T, 2, 1> srb2;
  spindle::ops::SrBcrsSpmm<T, 4, 1> srb4;
  spindle::ops::SrBcrsSpmm<T, 8, 1> srb8;
  spindle::ops::SrBcrsSpmm<T, 2, 4> srb2g4;
  spindle::ops::SrBcrsSpmm<T, 4, 4> srb4g4;
  spindle::ops::SrBcrsSpmm<T, 8, 4> srb8g4;
  // f(the SR-BCRS SpMM of t rows per panel and groups of g): t 2, 4 or 8 (3 runs 4), g 1 or 4.
  template <class F>
  void with_sr_bcrs(int t, int g, F&& f) {
    if (g == 4) {
      if (t == 2) f(srb2g4); else if (t == 8) f(srb8g4); else f(srb4g4);
    } else {
      if (t == 2) f(srb2); else if (t == 8) f(srb8); else f(srb4);
    }
  }
  // Y = A X with A in DBSR of b x b blocks (b = the matrix's block size).
  void dbsr_spmm(const spindle::Dbsr<T>& a, spindle::TensorView<const T> x, spindle::TensorView<T> y) {
    switch (a.block_rows()) {
      case 2: dbsr2(a, x, y); break;
      case 3: dbsr3(a, x, y); break;
      case 4: dbsr4(a, x, y); break;
      default: dbsr8(a, x, y); break;
    }
  }
  // Y = A X with A in BSR of b x b blocks (b = the matrix's block size).
  void bsr_spmm(const spindle::Bsr<T>& a, spindle::TensorView<const T> x, spindle::TensorView<T> y) {
    switch (a.block_rows()) {
      case 2: bsr2(a, x, y); break;
      case 3: bsr3(a, x, y); break;
      case 4: bsr4(a, x, y); break;
      default: bsr8(a, x, y); break;
    }
  }
};

inline void set_threads(int t, bool graphblas, bool mkl) {
  spindle::runtime::Runtime::default_instance().pool().set_num_threads(t);
  eigen_set_threads(t);
  if (graphblas) graphblas_set_threads(t);
  if (mkl) mkl_set_threads(t);
}

// One (matrix, op, feat): how each system runs it and how its result is checked.
template <class T>
struct OpCase {
  std::string op;
  std::int64_t feat = 1;
  std::function<void()> spindle, eigen, graphblas, mkl;
  std::function<void()> mkl_prepare;  // hint + optimize, after the case's thread count is set
  std::function<void()> spindle_prepare;  // tuned_spmm: tune for the case's thread count
  std::function<void()> poison;                                  // fills Spindle's output with NaN
  std::function<double()> spindle_error, grb_error, mkl_error;  // vs Eigen's output
  // bsr_spmm / ell_spmm: Spindle's CSR SpMM as a second contender.
  std::function<void()> spindle_csr;
  std::function<double()> csr_error;
  // spgemm: Spindle's rows as gathered (spindle::unsorted), like for like with MKL's unsorted
  // product; checked after sorting a copy.
  std::function<void()> spindle_unsorted;
  std::function<double()> unsorted_error;
  std::string format;  // "bsr 4x4 (padding 1.31, 12.3 MB)", for the label
  // spgemm / spadd: runs after Eigen's checked call (the reference); B's rows and entries,
  // C's entries (from Eigen's result) and spgemm's multiply-adds, for the model.
  std::function<void()> reference_done;
  std::int64_t b_rows = 0, nnz_b = 0, nnz_out = 0, mult_adds = 0;
};

// Ops without a feature size K.
inline bool op_has_no_feat(const std::string& op) { return spmv_op(op) || sparse_result_op(op); }

template <class T>
void run_matrix(const Config& cfg, const Loaded<T>& m, Kernels<T>& k, const std::vector<TriadResult>& triads,
                Report& report) {
  const spindle::Csr<T>& a = m.a;
  const std::int64_t rows = a.rows(), cols = a.cols(), nnz = a.nnz();
  EigenPeer<T> eigen(a);
  std::unique_ptr<GraphBlasPeer<T>> grb;
  if (cfg.graphblas && graphblas_available()) grb = std::make_unique<GraphBlasPeer<T>>(a);
  std::unique_ptr<MklPeer<T>> mkl;
  if (cfg.mkl && mkl_available()) mkl = std::make_unique<MklPeer<T>>(a);
  int threads_now = 1;
  for (const std::string& op : cfg.ops) {
    std::vector<int> feats = op_has_no_feat(op) ? std::vector<int>{1} : cfg.feats;
    for (int feat : feats) {
      const std::uint64_t seed = cfg.seed * 1000003 + static_cast<std::uint64_t>(feat);
      // Operands shared by all systems (row-major Eigen storage that Spindle views directly).
      DenseRM<T> x, y, ys, ye;
      DenseVec<T> xv, yvs, yve;
      std::vector<T> cs, ce, cs2;
      std::unique_ptr<spindle::CsrView<T>> cview, cview2;
      std::unique_ptr<spindle::Bsr<T>> bsr;
      std::unique_ptr<spindle::Dbsr<T>> dbsr;
      std::unique_ptr<spindle::SrBcrs<T>> srb;
      std::unique_ptr<spindle::Ell<T>> ell;
      std::unique_ptr<spindle::Hyb<T>> hyb;
      std::unique_ptr<spindle::tune::TunedSpmm<T>> tuned;
      DenseRM<T> yc, ym;
      DenseVec<T> yvm, yvc;
      std::unique_ptr<spindle::tune::TunedSpmv<T>> tuned_v;
      // spgemm / spadd: B (A itself for spgemm; A^T for spadd when A is square, else A),
      // Spindle's sparse result and Eigen's as the reference.
      std::unique_ptr<spindle::Csr<T>> b_own;
      const spindle::Csr<T>* b = &a;
      std::unique_ptr<spindle::Csr<T>> csp, csu;
      CsrResult<T> cref;
      OpCase<T> c;
      c.op = op;
      c.feat = feat;
      const bool format_case =
          op == "bsr_spmm" || op == "dbsr_spmm" || op == "sr_bcrs_spmm" || op == "ell_spmm" || op == "hyb_spmm" || op == "tuned_spmm" || op == "scheduled_spmm" || op == "rgcn_spmm";
      if (op == "rgcn_spmm" && !m.relations) continue;  // rgcn_input said why; runs on the stacked matrix
      if (op == "spmm" || format_case) {
        // Y = A X: Eigen's result is the reference; the peers run on A in CSR.
        x = random_dense<T>(cols, feat, seed);
        ys.resize(rows, feat);
        ye.resize(rows, feat);
        c.spindle = [&] { k.spmm(a, x, ys); };
        c.eigen = [&] { eigen.spmm(x, ye); };
        c.poison = [&] { ys.setConstant(std::numeric_limits<T>::quiet_NaN()); };
        c.spindle_error = [&] { return relative_error(ys.data(), ye.data(), ye.size()); };
        if (grb) {
          grb->prepare_spmm(x.data(), feat);
          c.graphblas = [&] { grb->spmm(); };
          c.grb_error = [&] { return relative_error(grb->dense_result(feat).data(), ye.data(), ye.size()); };
        }
        if (mkl) {
          ym.resize(rows, feat);
          c.mkl_prepare = [&] { mkl->prepare_spmm(feat); };
          c.mkl = [&] { mkl->spmm(x.data(), feat, ym.data()); };
          c.mkl_error = [&] { return relative_error(ym.data(), ye.data(), ye.size()); };
        }
      }
      if (format_case) {
        // Spindle runs A converted to the format; its CSR SpMM becomes a second contender.
        yc.resize(rows, feat);
        c.spindle_csr = [&] { k.spmm(a, x, yc); };
        c.csr_error = [&] { return relative_error(yc.data(), ye.data(), ye.size()); };
        spindle::Timer conv;
        if (op == "bsr_spmm") {
          bsr = std::make_unique<spindle::Bsr<T>>(spindle::Bsr<T>::from_csr(a, cfg.block, cfg.block));
          char buf[160];
          std::snprintf(buf, sizeof buf, "bsr %dx%d, padding %.2f, %.1f MB, from CSR in %.1f ms", cfg.block, cfg.block,
                        bsr->padding_ratio(), static_cast<double>(bsr->bytes()) / 1e6, conv.seconds() * 1e3);
          c.format = buf;
          c.spindle = [&] {
            k.bsr_spmm(*bsr, spindle::TensorView<const T>(x.data(), {cols, feat}),
                       spindle::TensorView<T>(ys.data(), {rows, feat}));
          };
        } else if (op == "dbsr_spmm") {
          dbsr = std::make_unique<spindle::Dbsr<T>>(spindle::Dbsr<T>::from_csr(a, cfg.block, cfg.block));
          char buf[200];
          std::snprintf(buf, sizeof buf, "dbsr %dx%d, %lld of %lld block rows stored, padding %.2f, %.1f MB, from CSR in %.1f ms",
                        cfg.block, cfg.block, static_cast<long long>(dbsr->stored_block_rows()),
                        static_cast<long long>(dbsr->block_row_count()), dbsr->padding_ratio(),
                        static_cast<double>(dbsr->bytes()) / 1e6, conv.seconds() * 1e3);
          c.format = buf;
          c.spindle = [&] {
            k.dbsr_spmm(*dbsr, spindle::TensorView<const T>(x.data(), {cols, feat}),
                        spindle::TensorView<T>(ys.data(), {rows, feat}));
          };
        } else if (op == "sr_bcrs_spmm") {
          const int t = cfg.block == 3 ? 4 : cfg.block;
          srb = std::make_unique<spindle::SrBcrs<T>>(spindle::SrBcrs<T>::from_csr(a, t, cfg.group));
          char buf[200];
          std::snprintf(buf, sizeof buf, "sr-bcrs t=%d g=%d, %lld groups, padding %.2f, %.1f MB, from CSR in %.1f ms", t,
                        cfg.group, static_cast<long long>(srb->group_count()), srb->padding_ratio(),
                        static_cast<double>(srb->bytes()) / 1e6, conv.seconds() * 1e3);
          c.format = buf;
          c.spindle = [&, t] {
            k.with_sr_bcrs(t, cfg.group, [&](auto& op) {
              op(*srb, spindle::TensorView<const T>(x.data(), {cols, feat}), spindle::TensorView<T>(ys.data(), {rows, feat}));
            });
          };
        } else if (op == "hyb_spmm") {
          hyb = std::make_unique<spindle::Hyb<T>>(spindle::Hyb<T>::from_csr(a, cfg.hyb_partitions, cfg.hyb_width));
          char buf[200];
          std::snprintf(buf, sizeof buf, "%s, from CSR in %.1f ms", hyb->description().c_str(), conv.seconds() * 1e3);
          c.format = buf;
          c.spindle = [&] {
            k.hyb_spmm(*hyb, spindle::TensorView<const T>(x.data(), {cols, feat}),
                       spindle::TensorView<T>(ys.data(), {rows, feat}));
          };
        } else if (op == "rgcn_spmm") {
          // a is the relations side by side (N x RN) and x, [RN, K] row-major, is XW [R, N, K].
          const auto& rel = *m.relations;
          char buf[240];
          std::snprintf(buf, sizeof buf, "%s, padding %.2f, %.2f MB", rel.description().c_str(), rel.padding_ratio(),
                        static_cast<double>(rel.bytes()) / 1e6);
          c.format = buf;
          c.spindle = [&] {
            k.rgcn(*m.relations, spindle::TensorView<const T>(x.data(), {m.relations->relations(), m.relations->cols(), feat}),
                   spindle::TensorView<T>(ys.data(), {rows, feat}));
          };
        } else if (op == "scheduled_spmm") {
          c.format = "schedule " + k.scheduled_spmm.schedule().to_string();
          c.spindle = [&] { k.scheduled_spmm(a, x, ys); };
        } else if (op == "tuned_spmm") {
          // Tuned per thread count (the record key includes it), after set_threads below.
          c.spindle_prepare = [&] {
            spindle::tune::TuneOptions o;
            o.record_file = cfg.tuning_file;
            o.progress = false;
            tuned = std::make_unique<spindle::tune::TunedSpmm<T>>(spindle::tune::tune_spmm(a, feat, o));
            std::fprintf(stderr, "%s", tuned->report().c_str());
            char buf[200];
            std::snprintf(buf, sizeof buf, "tuned: %s, tuning %.2f s%s", tuned->choice().c_str(),
                          tuned->tuning_seconds(), tuned->from_record() ? " (recorded)" : "");
            c.format = buf;
          };
          c.spindle = [&] {
            (*tuned)(spindle::TensorView<const T>(x.data(), {cols, feat}), spindle::TensorView<T>(ys.data(), {rows, feat}));
          };
        } else {
          ell = std::make_unique<spindle::Ell<T>>(spindle::Ell<T>::from_csr(a));
          char buf[160];
          std::snprintf(buf, sizeof buf, "ell width %lld, padding %.2f, %.1f MB, from CSR in %.1f ms",
                        static_cast<long long>(ell->width()), ell->padding_ratio(),
                        static_cast<double>(ell->bytes()) / 1e6, conv.seconds() * 1e3);
          c.format = buf;
          c.spindle = [&] { k.ell_spmm(*ell, x, ys); };
        }
        if (!c.format.empty()) std::fprintf(stderr, "[bench] %s: %s\n", m.info.name.c_str(), c.format.c_str());
      }
      if (spmv_op(op)) {
        xv = random_vector<T>(cols, seed);
        yvs.resize(rows);
        yve.resize(rows);
        c.spindle = [&] { k.spmv(a, xv, yvs); };
        if (op == "tuned_spmv") {
          // Tuned per thread count (the record key includes it); the default schedule becomes a
          // second contender.
          yvc.resize(rows);
          c.spindle_csr = [&] { k.spmv(a, xv, yvc); };
          c.csr_error = [&] { return relative_error(yvc.data(), yve.data(), yve.size()); };
          c.spindle_prepare = [&] {
            spindle::tune::TuneOptions o;
            o.record_file = cfg.tuning_file;
            o.progress = false;
            tuned_v = std::make_unique<spindle::tune::TunedSpmv<T>>(spindle::tune::tune_spmv(a, o));
            std::fprintf(stderr, "%s", tuned_v->report().c_str());
            char buf[200];
            std::snprintf(buf, sizeof buf, "tuned: %s, tuning %.2f s%s", tuned_v->choice().c_str(),
                          tuned_v->tuning_seconds(), tuned_v->from_record() ? " (recorded)" : "");
            c.format = buf;
          };
          c.spindle = [&] {
            (*tuned_v)(spindle::TensorView<const T>(xv.data(), {cols}), spindle::TensorView<T>(yvs.data(), {rows}));
          };
        }
        c.eigen = [&] { eigen.spmv(xv, yve); };
        c.poison = [&] { yvs.setConstant(std::numeric_limits<T>::quiet_NaN()); };
        c.spindle_error = [&] { return relative_error(yvs.data(), yve.data(), yve.size()); };
        if (grb) {
          grb->prepare_spmv(xv.data());
          c.graphblas = [&] { grb->spmv(); };
          c.grb_error = [&] { return relative_error(grb->vector_result().data(), yve.data(), yve.size()); };
        }
        if (mkl) {
          yvm.resize(rows);
          c.mkl_prepare = [&] { mkl->prepare_spmv(); };
          c.mkl = [&] { mkl->spmv(xv.data(), yvm.data()); };
          c.mkl_error = [&] { return relative_error(yvm.data(), yve.data(), yve.size()); };
        }
      } else if (op == "sddmm" || op == "fused_sddmm") {  // x rows x K, y cols x K; the output shares A's structure
        x = random_dense<T>(rows, feat, seed);
        y = random_dense<T>(cols, feat, seed + 7);
        cs.assign(static_cast<std::size_t>(nnz), T(0));
        ce.assign(static_cast<std::size_t>(nnz), T(0));
        cview = std::make_unique<spindle::CsrView<T>>(rows, cols, nnz, a.indptr().data(), a.indices().data(),
                                                      cs.data(), "C");
        c.spindle = [&] { k.sddmm(a, x, y, *cview); };
        if (op == "fused_sddmm") {  // the fused kernel; the default (row loop) is the second contender
          c.format = "schedule " + k.fused_sddmm.schedule().to_string();
          c.spindle = [&] { k.fused_sddmm(a, x, y, *cview); };
          cs2.assign(static_cast<std::size_t>(nnz), T(0));
          cview2 = std::make_unique<spindle::CsrView<T>>(rows, cols, nnz, a.indptr().data(), a.indices().data(),
                                                         cs2.data(), "C");
          c.spindle_csr = [&] { k.sddmm(a, x, y, *cview2); };
          c.csr_error = [&] { return relative_error(cs2.data(), ce.data(), nnz); };
        }
        c.eigen = [&] { eigen.sddmm(x, y, ce.data(), threads_now); };
        c.poison = [&] { std::fill(cs.begin(), cs.end(), std::numeric_limits<T>::quiet_NaN()); };
        c.spindle_error = [&] { return relative_error(cs.data(), ce.data(), nnz); };
        if (grb) {
          grb->prepare_sddmm(x.data(), y.data(), feat);
          c.graphblas = [&] { grb->sddmm(); };
          c.grb_error = [&] { return relative_error(grb->pattern_result().data(), ce.data(), nnz); };
        }
      }
      // Sparse results: Spindle writes a Csr `csp` of crows x ccols; the reference is the sorted
      // result of `ref` (Eigen); the checks compare with it. An empty C of the right shape is the
      // poison: a call that writes nothing shows as a pattern mismatch.
      auto check_sparse_result = [&](EigenPeer<T>& ref, std::int64_t crows, std::int64_t ccols) {
        csp = std::make_unique<spindle::Csr<T>>(crows, ccols, "C");
        c.poison = [&, crows, ccols] { *csp = spindle::Csr<T>(crows, ccols, "C"); };
        c.reference_done = [&] {
          cref = csr_result(ref.sparse_result());
          sort_rows(cref);  // Eigen's rows come sorted; made sure of, as the reference
          c.nnz_out = cref.nnz();
        };
        c.spindle_error = [&] { return sparse_result_error(csr_result(*csp), cref, "spindle " + m.info.name + " " + op); };
      };
      auto check_grb_result = [&](GraphBlasPeer<T>& g) {
        c.grb_error = [&] { return sparse_result_error(g.sparse_result(), cref, "graphblas " + m.info.name + " " + op); };
      };
      // prune: A with values drawn in [-1, 1] (the graphs are patterns of ones), every system
      // on that copy; C keeps the entries with |a| > 0.5 (about half).
      std::unique_ptr<spindle::Csr<T>> a_vals;
      std::unique_ptr<EigenPeer<T>> eigen_vals;
      std::unique_ptr<GraphBlasPeer<T>> grb_vals;
      const T threshold = T(0.5);
      if (op == "prune") {
        a_vals = std::make_unique<spindle::Csr<T>>(a);
        std::mt19937_64 draw(seed);
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        for (auto& v : a_vals->values()) v = static_cast<T>(u(draw));
        eigen_vals = std::make_unique<EigenPeer<T>>(*a_vals);
        check_sparse_result(*eigen_vals, rows, cols);
        c.spindle = [&] { k.prune(*a_vals, threshold, *csp); };
        c.eigen = [&] { eigen_vals->prune(threshold); };
        if (grb) {
          grb_vals = std::make_unique<GraphBlasPeer<T>>(*a_vals);
          grb_vals->prepare_sparse(cols, rows);
          c.graphblas = [&] { grb_vals->prune(threshold); };
          check_grb_result(*grb_vals);
        }
      }
      // dense2csr: A held as a dense row-major matrix (skipped above 512 MB), C its nonzeros.
      DenseRM<T> dense_a;
      if (op == "dense2csr") {
        const double mb = static_cast<double>(rows) * static_cast<double>(cols) * sizeof(T) / 1e6;
        if (mb > 512) {
          std::fprintf(stderr, "[bench] %s dense2csr: skipped, A as a dense matrix would take %.0f MB (> 512)\n",
                       m.info.name.c_str(), mb);
          continue;
        }
        dense_a = DenseRM<T>::Zero(rows, cols);
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) dense_a(r, a.indices()[q]) = a.values()[q];
        check_sparse_result(eigen, rows, cols);
        c.spindle = [&] { k.dense_to_csr(spindle::TensorView<const T>(dense_a.data(), {rows, cols}), *csp); };
        c.eigen = [&] { eigen.dense_to_sparse(dense_a); };
        if (grb) {
          grb->prepare_dense(dense_a.data());
          c.graphblas = [&] { grb->dense2csr(); };
          check_grb_result(*grb);
        }
      }
      // coo2csr: A's entries as (row, col, value) triplets in a random order (seeded), C = A
      // rebuilt from them; every system gets the same order. With --coo-repeats N each entry
      // is N triplets at its coordinate (the first N - 1 values drawn in [-1, 1], the last
      // one the rest), so every system sums duplicates.
      std::vector<std::int32_t> coo_row, coo_col;
      spindle::Tensor<T> coo_val;
      if (op == "coo2csr") {
        const std::int64_t repeats = cfg.coo_repeats, entries = nnz * repeats;
        std::vector<std::int64_t> order(static_cast<std::size_t>(entries));
        for (std::int64_t q = 0; q < entries; ++q) order[static_cast<std::size_t>(q)] = q;
        std::mt19937_64 draw(seed);
        std::shuffle(order.begin(), order.end(), draw);
        std::vector<T> part(static_cast<std::size_t>(entries));  // the values of the triplets of entry q: q * repeats ...
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        for (std::int64_t q = 0; q < nnz; ++q) {
          T rest = a.values()[static_cast<std::size_t>(q)];
          for (std::int64_t t = 0; t + 1 < repeats; ++t) {
            const T w = static_cast<T>(u(draw));
            part[static_cast<std::size_t>(q * repeats + t)] = w;
            rest -= w;
          }
          part[static_cast<std::size_t>(q * repeats + repeats - 1)] = rest;
        }
        std::vector<std::int64_t> row_of(static_cast<std::size_t>(nnz));
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q) row_of[static_cast<std::size_t>(q)] = r;
        std::vector<T> vals;
        std::vector<Eigen::Triplet<T, int>> trips;
        std::vector<std::uint64_t> gi, gj;
        for (std::int64_t t : order) {
          const auto s = static_cast<std::size_t>(t / repeats);
          coo_row.push_back(static_cast<std::int32_t>(row_of[s]));
          coo_col.push_back(static_cast<std::int32_t>(a.indices()[s]));
          vals.push_back(part[static_cast<std::size_t>(t)]);
          trips.emplace_back(coo_row.back(), coo_col.back(), vals.back());
          gi.push_back(static_cast<std::uint64_t>(coo_row.back()));
          gj.push_back(static_cast<std::uint64_t>(coo_col.back()));
        }
        eigen.set_coo(std::move(trips));
        check_sparse_result(eigen, rows, cols);
        c.nnz_b = entries;  // the triplets, for the model (and the table's nnz(B))
        // mkl_sparse_convert_csr keeps a COO handle's duplicates as separate entries (measured:
        // the pattern differs from every other system's), so it is not timed with repeats.
        const bool mkl_coo = mkl && repeats == 1;
        if (mkl && !mkl_coo)
          std::fprintf(stderr, "[bench] %s coo2csr: mkl not timed with --coo-repeats > 1 (its conversion does not sum "
                               "duplicates)\n", m.info.name.c_str());
        if (mkl_coo) mkl->set_coo(coo_row, coo_col, vals);
        if (grb) grb->set_coo(std::move(gi), std::move(gj), vals);
        coo_val = spindle::Tensor<T>::from(std::move(vals), {entries});
        c.spindle = [&, entries] {
          k.coo_to_csr(spindle::TensorView<const std::int32_t>(coo_row.data(), {entries}),
                       spindle::TensorView<const std::int32_t>(coo_col.data(), {entries}), coo_val, *csp);
        };
        c.eigen = [&] { eigen.coo_to_csr(); };
        if (grb) {
          grb->prepare_sparse(cols, rows);
          c.graphblas = [&] { grb->coo2csr(); };
          check_grb_result(*grb);
        }
        if (mkl_coo) {
          c.mkl = [&] { mkl->coo2csr(); };
          c.mkl_error = [&] { return sparse_result_error(mkl->sparse_result(), cref, "mkl " + m.info.name + " coo2csr"); };
        }
      }
      if (sparse_result_op(op) && op != "prune" && op != "dense2csr" && op != "coo2csr") {
        if (op != "spgemm" && op != "transpose" && rows == cols) {
          // A^T, through Eigen (row-major storage of the transpose, sorted rows).
          typename EigenPeer<T>::Sparse at = eigen.matrix().transpose();
          at.makeCompressed();
          b_own = std::make_unique<spindle::Csr<T>>(spindle::to_csr(at));
          b = b_own.get();
        }
        if (op == "spgemm" && cols != rows) {
          std::fprintf(stderr, "[bench] %s spgemm: skipped, C = A A needs a square A (%lld x %lld)\n",
                       m.info.name.c_str(), static_cast<long long>(rows), static_cast<long long>(cols));
          continue;
        }
        const bool transposing = op == "transpose";  // C = Aᵀ: no B, C is cols x rows
        const std::int64_t crows = transposing ? cols : rows, bcols = transposing ? rows : b->cols();
        check_sparse_result(eigen, crows, bcols);
        c.b_rows = transposing ? 0 : b->rows();
        c.nnz_b = transposing ? 0 : b->nnz();
        if (op == "spgemm") c.mult_adds = spgemm_mult_adds(a, *b);
        if (!transposing) eigen.set_b(*b);
        if (transposing) {
          c.spindle = [&] { k.transpose(a, *csp); };
          c.eigen = [&] { eigen.transpose(); };
        } else if (op == "spgemm") {
          c.spindle = [&] { k.spgemm(a, *b, *csp); };
          c.eigen = [&] { eigen.spgemm(); };
          csu = std::make_unique<spindle::Csr<T>>(crows, bcols, "C");
          c.spindle_unsorted = [&] { k.spgemm(a, *b, spindle::unsorted(*csu)); };
          c.unsorted_error = [&] {
            return sparse_result_error(csr_result(csu->canonical()), cref, "spindle-unsorted " + m.info.name + " spgemm");
          };
        } else if (op == "spadd") {
          c.spindle = [&] { k.spadd(a, *b, T(1), T(1), *csp); };
          c.eigen = [&] { eigen.spadd(); };
        } else {
          c.spindle = [&] { k.spmul(a, *b, *csp); };
          c.eigen = [&] { eigen.spmul(); };
        }
        if (grb) {
          if (!transposing) grb->set_b(*b);
          grb->prepare_sparse(bcols, crows);
          if (transposing)
            c.graphblas = [&] { grb->transpose(); };
          else if (op == "spgemm")
            c.graphblas = [&] { grb->spgemm(); };
          else if (op == "spadd")
            c.graphblas = [&] { grb->spadd(); };
          else
            c.graphblas = [&] { grb->spmul(); };
          check_grb_result(*grb);
        }
        if (mkl && op != "spmul") {  // MKL has no element-wise product of sparse matrices
          if (!transposing) mkl->set_b(*b);
          c.mkl_prepare = [&] { mkl->prepare_sparse(); };
          if (transposing)
            c.mkl = [&] { mkl->transpose(); };
          else if (op == "spgemm")
            c.mkl = [&] { mkl->spgemm(); };
          else
            c.mkl = [&] { mkl->spadd(); };
          c.mkl_error = [&] {
            std::int64_t unsorted = 0;
            auto res = mkl->sparse_result(&unsorted);
            std::fprintf(stderr, "[bench] mkl %s %s: %lld of %lld rows of the result unsorted before mkl_sparse_order\n",
                         m.info.name.c_str(), op.c_str(), static_cast<long long>(unsorted), static_cast<long long>(rows));
            return sparse_result_error(res, cref, "mkl " + m.info.name + " " + op);
          };
        }
      }
      for (int t : cfg.threads) {
        threads_now = t;
        set_threads(t, grb != nullptr, mkl != nullptr);
        // Spindle's tuner times its candidates: first, after the timing's quiet pause, so that
        // no peer's OpenMP workers still spin on the other core (tuning right after MKL's
        // optimize step timed pubmed's default SpMV at 2 threads as 0.133 ms, its 1-thread
        // time, instead of 0.047, and chose a slower format).
        if (c.spindle_prepare) {
          std::this_thread::sleep_for(bench::kQuiesceSeconds);
          c.spindle_prepare();
        }
        // MKL's optimize step plans for the current thread count: redo it per count.
        if (c.mkl_prepare) c.mkl_prepare();
        std::fprintf(stderr, "[bench] %s %s K=%d threads=%d\n", m.info.name.c_str(), op.c_str(), feat, t);
        CaseResult r;
        r.matrix = m.info.name;
        r.op = op;
        r.rows = rows, r.cols = cols, r.nnz = nnz, r.feat = feat, r.threads = t;
        for (auto& tr : triads)
          if (tr.threads == t) r.triad_gbs = tr.best_gbs;
        // Correctness guard: Spindle (output poisoned first, so unwritten entries show) and
        // GraphBLAS against Eigen.
        c.poison();
        c.spindle();
        c.eigen();
        if (c.reference_done) c.reference_done();
        CaseShape shape{op == "tuned_spmv" ? std::string("spmv") : op == "fused_sddmm" ? std::string("sddmm")
                        : c.spindle_csr ? std::string("spmm") : op, rows, cols, nnz, feat, static_cast<int>(sizeof(T)), 4};
        shape.b_rows = c.b_rows, shape.nnz_b = c.nnz_b, shape.nnz_out = c.nnz_out, shape.mult_adds = c.mult_adds;
        r.nnz_b = c.nnz_b, r.nnz_out = c.nnz_out, r.mult_adds = c.mult_adds;
        r.flops = model_flops(shape);
        r.bytes = model_bytes(shape);
        std::vector<Contender> cont{{"spindle", c.spindle, {}}, {"eigen", c.eigen, {}}};
        std::vector<double> errors{c.spindle_error(), 0.0};
        const bool sparse_out = sparse_result_op(op);
        std::vector<std::string> labels{
            op == "tuned_spmm"   ? "spindle::tune::tune_spmm (" + c.format + ", engine " + report.engine + ")"
            : op == "tuned_spmv" ? "spindle::tune::tune_spmv (" + c.format + ", engine " + report.engine + ")"
            : op == "rgcn_spmm"  ? "spindle::ops::rgcn_buckets_spmm (" + c.format + ", engine " + report.engine + ")"
            : c.spindle_csr   ? "spindle::ops::" + op + " (" + c.format + ", engine " + report.engine + ")"
            : op == "spgemm"  ? "spindle::ops::spgemm (engine " + report.engine +
                                   ", symbolic + numeric phases, rows sorted; C = A A)"
            : op == "spadd"   ? "spindle::ops::sparse_add (engine " + report.engine +
                                  ", union of the rows merged and appended in column order; C = 1 A + 1 B, B = " +
                                  (b_own ? "A^T" : "A") + ")"
            : op == "transpose" ? "spindle::ops::csr_to_csc (engine " + report.engine +
                                      ", C = A^T: rows scattered, A's rows in blocks per thread, segments folded by the host)"
            : op == "coo2csr" ? "spindle::ops::coo_to_csr (engine " + report.engine +
                                    ", C = A from its entries in a random order: rows scattered, duplicates summed)"
            : op == "dense2csr" ? "spindle::ops::dense_to_csr (engine " + report.engine +
                                      ", C = the nonzeros of D, written under spindle::when, rows appended; D row-major)"
            : op == "prune" ? "spindle::ops::prune (engine " + report.engine +
                                  ", C = the entries of A with |a| > 0.5, written under spindle::when; rows in blocks per thread)"
            : op == "spmul"   ? "spindle::ops::sparse_multiply (engine " + report.engine +
                                  ", intersection of the rows merged and appended in column order; C = A .* B, B = " +
                                  (b_own ? "A^T" : "A") + ")"
                          : "spindle::ops::" + op + " (engine " + report.engine + ", default CPU schedule)",
            op == "sddmm" || op == "fused_sddmm" ? std::string("eigen (row loop + .dot, OpenMP rows)")
            : op == "spgemm" ? std::string("eigen (SparseMatrix<RowMajor> * SparseMatrix, single-threaded)")
            : op == "spadd"  ? std::string("eigen (SparseMatrix<RowMajor> + SparseMatrix, single-threaded)")
            : op == "spmul"  ? std::string("eigen (SparseMatrix<RowMajor>.cwiseProduct(SparseMatrix), single-threaded)")
            : op == "transpose" ? std::string("eigen (SparseMatrix<RowMajor> = A.transpose(), single-threaded)")
            : op == "prune" ? std::string("eigen (C = A, then C.prune(|v| > 0.5), single-threaded)")
            : op == "dense2csr" ? std::string("eigen (C = D.sparseView(), row-major, single-threaded)")
            : op == "coo2csr" ? std::string("eigen (SparseMatrix<RowMajor>::setFromTriplets, single-threaded)")
                             : std::string("eigen (SparseMatrix<RowMajor> * dense, noalias)")};
        if (c.spindle_csr) {
          c.spindle_csr();
          cont.push_back({"spindle-csr", c.spindle_csr, {}});
          errors.push_back(c.csr_error());
          labels.push_back(op == "tuned_spmv"    ? "spindle::ops::spmv (CSR, the default schedule)"
                           : op == "fused_sddmm" ? "spindle::ops::sddmm (CSR, the default schedule: a row loop)"
                           : op == "rgcn_spmm"   ? "spindle::ops::spmm (CSR of the relations side by side)"
                                                 : "spindle::ops::spmm (CSR, the default format)");
        }
        if (c.graphblas) {
          c.graphblas();
          cont.push_back({"graphblas", c.graphblas, {}});
          errors.push_back(c.grb_error());
          labels.push_back(op == "transpose" ? std::string("graphblas (GrB_transpose, by row, wait)")
                           : op == "coo2csr" ? std::string("graphblas (GrB_Matrix_clear + GrB_Matrix_build, PLUS dup, by row, wait)")
                           : op == "prune" ? std::string("graphblas (GrB_select, a user IndexUnaryOp |x| > 0.5, wait)")
                           : op == "dense2csr" ? std::string("graphblas (GrB_select VALUENE 0 on a full matrix, wait)")
                           : op == "spadd"   ? std::string("graphblas (GrB_eWiseAdd, PLUS, wait)")
                           : op == "spmul" ? std::string("graphblas (GrB_eWiseMult, TIMES, wait)")
                           : "graphblas (" +
                                 std::string(op == "sddmm" || op == "fused_sddmm" ? "masked mxm X*Y' on A + eWiseMult A"
                                             : spmv_op(op) ? "GrB_mxv"
                                                            : "GrB_mxm C += A X, C full by row zeroed each call") +
                                 ", PLUS_TIMES, wait)");
        }
        if (c.mkl) {
          c.mkl();
          cont.push_back({"mkl", c.mkl, {}});
          errors.push_back(c.mkl_error());
          labels.push_back(op == "coo2csr" ? std::string("mkl_sparse_convert_csr from a COO handle + mkl_sparse_order "
                                                         "(previous result destroyed in the call)")
                           : sparse_out ? std::string(op == "spgemm"      ? "mkl_sparse_spmm"
                                                    : op == "transpose" ? "mkl_sparse_convert_csr(TRANSPOSE)"
                                                                        : "mkl_sparse_?_add") +
                                            " (previous result destroyed in the call; rows as MKL leaves them, "
                                            "mkl_sparse_order before the check, untimed)"
                                      : std::string(spmv_op(op) ? "mkl_sparse_?_mv" : "mkl_sparse_?_mm, row-major") +
                                            " (inspector-executor, hinted + optimized)");
        }
        if (c.spindle_unsorted) {
          c.spindle_unsorted();
          cont.push_back({"spindle-unsorted", c.spindle_unsorted, {}});
          errors.push_back(c.unsorted_error());
          labels.push_back("spindle::ops::spgemm into spindle::unsorted(C) (rows as the numeric phase gathers them, like "
                           "mkl's; x < 1: faster than Spindle's sorted rows)");
        }
        if (c.mkl && op == "spgemm") {
          // Like for like with the systems whose rows come sorted: the same call, then mkl_sparse_order.
          std::function<void()> sorted = [&] { mkl->spgemm_sorted(); };
          sorted();
          cont.push_back({"mkl-sorted", sorted, {}});
          errors.push_back(c.mkl_error());
          labels.push_back("mkl_sparse_spmm + mkl_sparse_order (rows sorted in the timed call)");
        }
        std::vector<Contender*> ptrs;
        for (auto& x : cont) ptrs.push_back(&x);
        measure_interleaved(ptrs, {cfg.warmup, cfg.reps, cfg.min_reps, cfg.max_reps, cfg.min_time});
        for (std::size_t s = 0; s < cont.size(); ++s) {
          SystemResult x;
          x.name = cont[s].name;
          x.label = labels[s];
          x.median_s = cont[s].samples.median();
          x.min_s = cont[s].samples.min();
          x.reps = static_cast<int>(cont[s].samples.seconds.size());
          x.gflops = r.flops / x.median_s * 1e-9;
          x.gbs = r.bytes / x.median_s * 1e-9;
          x.roofline = r.triad_gbs > 0 ? x.gbs / r.triad_gbs : NAN;
          x.rel_error = errors[s];
          x.ok = errors[s] <= cfg.tolerance;
          if (!x.ok) {
            ++report.mismatches;
            std::fprintf(stderr, "[bench] MISMATCH: %s %s %s K=%d threads=%d: relative error %.3g vs Eigen\n",
                         x.name.c_str(), m.info.name.c_str(), op.c_str(), feat, t, errors[s]);
          }
          r.systems.push_back(x);
        }
        for (auto& x : r.systems) x.ratio = x.median_s / r.systems[0].median_s;
        report.cases.push_back(std::move(r));
      }
    }
  }
}

template <class T>
int run(const Config& cfg) {
  if (cfg.disk_child) return disk_hit_child<T>(cfg.child_dir, cfg.child_op);
  if (cfg.cuda_disk_child) return cuda_disk_hit_child<T>(cfg.child_dir, cfg.child_op, cfg.child_feat, cfg.child_arch);
  if (cfg.backend == "cuda") return run_cuda<T>(cfg);
  if (cfg.loop_order) return run_loop_order<T>(cfg);
  if (cfg.einsum) return run_einsum_bench<T>(cfg);
  Report report;
  report.dtype = cfg.dtype;
  report.hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
  report.load_before = load_average();
  report.tolerance = cfg.tolerance;
  report.eigen_openmp = eigen_has_openmp();
  report.graphblas_version = cfg.graphblas ? graphblas_version() : "";
  report.mkl_version = cfg.mkl ? mkl_version() : "";
  report.timing = cfg.reps > 0 ? std::to_string(cfg.reps) + " timed calls per system and case"
                               : "adaptive, >= " + std::to_string(cfg.min_reps) + " calls and >= " +
                                     fmt("%g", cfg.min_time) + " s per system and case";
  report.timing += ", " + std::to_string(cfg.warmup) +
                   " warm-up calls, interleaved rotating rounds (each system: 8 ms pause, an untimed "
                   "lead-in call if a call takes < 50 ms, a batch of timed calls)";

  for (int t : cfg.threads) {
    std::fprintf(stderr, "[bench] triad with %d thread(s)\n", t);
    report.triads.push_back(measure_triad(t));
  }
  if (!cfg.triad_only) {
    if (cfg.compile_latency)
      for (auto& op : cfg.ops) {
        if (!compile_latency_measurable(op)) {
          std::fprintf(stderr, "[bench] compile latency of %s: not measured (%s; see the kernel lines)\n", op.c_str(),
                       sparse_result_op(op) ? "a kernel assembling a sparse output has two phases"
                                            : "no single ready-made kernel");
          continue;
        }
        std::fprintf(stderr, "[bench] compile latency of %s\n", op.c_str());
        report.compile.push_back(measure_compile_latency<T>(op));
      }
    // The default runtime (and its engine) is created only now, so that the compile-latency
    // figures above include the first JIT use of the process.
    report.engine = spindle::runtime::Runtime::default_instance().engine().name();
    Kernels<T> k;
    k.scheduled_spmm = k.spmm.with_schedule(spindle::Schedule::parse(cfg.schedule));
    for (auto& op : cfg.ops) {
      const spindle::runtime::CompiledKernel* ck = nullptr;
      std::string text;
      if (op == "spmm") ck = &k.spmm.compile(), text = cfg.explain ? k.spmm.explain() : "";
      if (op == "spmv") ck = &k.spmv.compile(), text = cfg.explain ? k.spmv.explain() : "";
      if (op == "sddmm") ck = &k.sddmm.compile(), text = cfg.explain ? k.sddmm.explain() : "";
      if (op == "fused_sddmm") ck = &k.fused_sddmm.compile(), text = cfg.explain ? k.fused_sddmm.explain() : "";
      if (op == "ell_spmm") ck = &k.ell_spmm.compile(), text = cfg.explain ? k.ell_spmm.explain() : "";
      if (op == "hyb_spmm")  // the width-8 part kernel stands for the others (one per bucket width)
        ck = &k.hyb_spmm.compile(8), text = cfg.explain ? k.hyb_spmm.explain(8) : "";
      if (op == "tuned_spmm") ck = &k.spmm.compile(), text = "";  // its candidates compile while it tunes
      if (op == "tuned_spmv") ck = &k.spmv.compile(), text = "";
      if (op == "rgcn_spmm") ck = &k.rgcn.kernel().compile(), text = cfg.explain ? k.rgcn.explain() : "";
      if (op == "scheduled_spmm")
        ck = &k.scheduled_spmm.compile(), text = cfg.explain ? k.scheduled_spmm.explain() : "";
      if (sparse_result_op(op)) {
        // compile() throws for a kernel that assembles its output: its two phases, one line each.
        const spindle::runtime::AssembledKernel& ak = op == "spgemm"      ? k.spgemm.compile_assembled()
                                                      : op == "spadd"     ? k.spadd.compile_assembled()
                                                      : op == "transpose" ? k.transpose.compile_assembled()
                                                      : op == "prune"     ? k.prune.compile_assembled()
                                                      : op == "dense2csr" ? k.dense_to_csr.compile_assembled()
                                                                          : k.spmul.compile_assembled();
        text = cfg.explain ? (op == "spgemm"      ? k.spgemm.explain()
                              : op == "spadd"     ? k.spadd.explain()
                              : op == "transpose" ? k.transpose.explain()
                              : op == "prune"     ? k.prune.explain()
                              : op == "dense2csr" ? k.dense_to_csr.explain()
                                                  : k.spmul.explain())
                           : "";
        for (auto [phase, pk] : {std::pair{".symbolic", &ak.symbolic()}, std::pair{".numeric", &ak.numeric()}})
          report.kernels.push_back({op + phase, spindle::runtime::code_source_name(pk->stats().source),
                                    pk->stats().lower_micros, pk->stats().load_micros});
        if (cfg.explain) std::fprintf(stderr, "%s\n", text.c_str());
        continue;
      }
      if (op == "bsr_spmm") {
        auto use = [&](const auto& kb) { ck = &kb.compile(), text = cfg.explain ? kb.explain() : ""; };
        if (cfg.block == 2) use(k.bsr2.kernel());
        if (cfg.block == 3) use(k.bsr3.kernel());
        if (cfg.block == 4) use(k.bsr4.kernel());
        if (cfg.block == 8) use(k.bsr8.kernel());
      }
      if (op == "dbsr_spmm") {
        auto use = [&](const auto& kb) { ck = &kb.compile(), text = cfg.explain ? kb.explain() : ""; };
        if (cfg.block == 2) use(k.dbsr2.kernel());
        if (cfg.block == 3) use(k.dbsr3.kernel());
        if (cfg.block == 4) use(k.dbsr4.kernel());
        if (cfg.block == 8) use(k.dbsr8.kernel());
      }
      if (op == "sr_bcrs_spmm")
        k.with_sr_bcrs(cfg.block == 3 ? 4 : cfg.block, cfg.group, [&](const auto& kb) {
          ck = &kb.kernel().compile(), text = cfg.explain ? kb.explain() : "";
        });
      report.kernels.push_back({op, spindle::runtime::code_source_name(ck->stats().source), ck->stats().lower_micros,
                                ck->stats().load_micros});
      if (cfg.explain) std::fprintf(stderr, "%s\n", text.c_str());
    }
    auto matrices = load_matrices<T>(cfg);
    // rgcn_spmm runs on each typed graph's relations, stacked side by side (rgcn_input.hpp).
    std::vector<Loaded<T>> stacked;
    if (std::find(cfg.ops.begin(), cfg.ops.end(), "rgcn_spmm") != cfg.ops.end())
      for (const auto& m : matrices)
        if (auto s = rgcn_input(m)) stacked.push_back(std::move(*s));
    for (auto& m : matrices) report.matrices.push_back(m.info);
    for (auto& m : stacked) report.matrices.push_back(m.info);
    for (auto& m : matrices) run_matrix<T>(cfg, m, k, report.triads, report);
    Config rgcn_cfg = cfg;
    rgcn_cfg.ops = {"rgcn_spmm"};
    for (auto& m : stacked) run_matrix<T>(rgcn_cfg, m, k, report.triads, report);
  }
  report.load_after = load_average();
  if (cfg.json)
    std::fputs(to_json(report).c_str(), stdout);
  else
    print_tables(stdout, report);
  if (!cfg.json_file.empty()) {
    std::FILE* f = std::fopen(cfg.json_file.c_str(), "w");
    if (!f || std::fputs(to_json(report).c_str(), f) < 0 || std::fclose(f) != 0)
      throw std::runtime_error("cannot write " + cfg.json_file);
  }
  if (cfg.graphblas) graphblas_finalize();
  return report.mismatches ? 1 : 0;
}

}  // namespace bench

int main(int argc, char** argv) {
  bench::Config cfg;
  try {
    if (!bench::parse_args(argc, argv, cfg)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spindle-bench: %s\n", e.what());
    return 2;
  }
  try {
    return cfg.dtype == "f64" ? bench::run<double>(cfg) : bench::run<float>(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spindle-bench: error: %s\n", e.what());
    return 4;
  }
}
