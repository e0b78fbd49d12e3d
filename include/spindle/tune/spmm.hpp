// The SpMM tuner (SparseTIR's tuner, seed 002 §5, over formats and schedules): Y = A X with A
// given as a CSR, run in whichever stored format (and, on CSR, whichever schedule) is fastest
// for this matrix, feature size, thread count and machine.
//
//   spindle::tune::TuneOptions opt;
//   opt.record_file = "tuning.jsonl";          // optional: reuse earlier decisions
//   auto plan = spindle::tune::tune_spmm(A, /*feature=*/128, opt);
//   plan(X, Y);                                // Y = A X in the chosen format
//   std::cout << plan.report();                // candidates, model, measured times, choice
//
// Candidates, formats and schedules together: CSR under the default schedule (ops::spmm,
// always measured: it is the default the choice must beat), CSR under user schedules of
// one register-tile width (csr_schedule_candidates), BSR
// with square blocks b = 2, 3, 4, 5, 6, 8 (ops::bsr_spmm with compile-time block sizes, so
// the block loops unroll and vectorise), ELL (ops::ell_spmm, width = the longest row) and
// hyb(1, k) (ops::HybSpmm, k from the degree distribution: hyb_candidate).
// A cost model estimates each candidate's memory traffic and multiply-adds from statistics
// of A's structure computed in O(nnz) without building the format (stored blocks per block
// size; the longest row); candidates predicted slower than CSR by more than
// `TuneOptions::prune_above` are pruned unmeasured, the `max_measured` best of the rest are
// built and timed (median of repeated calls on a pseudo-random X), and the fastest wins.
// Every measured candidate's result is compared with CSR's first: a format whose kernel
// disagrees is an InternalError, never a choice.
//
// The plan owns A in the chosen format (a copy for CSR): later changes to A's values are not
// seen; tune again (with a record file this only rebuilds the format). Any X with A.cols()
// rows works; the choice was measured for `feature` columns.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "spindle/format/bsr.hpp"
#include "spindle/format/csr.hpp"
#include "spindle/format/ell.hpp"
#include "spindle/format/hyb.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/ops.hpp"
#include "spindle/runtime/runtime.hpp"
#include "spindle/schedule/user_schedule.hpp"
#include "spindle/support/error.hpp"
#include "spindle/support/hash.hpp"
#include "spindle/support/timer.hpp"
#include "spindle/tune/fingerprint.hpp"
#include "spindle/tune/record.hpp"
#include "spindle/tune/select.hpp"

namespace spindle::tune {

template <class T, class Index = std::int32_t>
class TunedSpmm : public TunedPlan {
  static_assert(std::is_same_v<Index, std::int32_t>, "tune_spmm: the tuned kernels use 32-bit indices");

 public:
  using Run = std::function<void(TensorView<const T>, TensorView<T>)>;

  // Y = A X; ShapeError when X is not [A.cols(), K] or Y not [A.rows(), K].
  void operator()(TensorView<const T> x, TensorView<T> y) const {
    ops::detail::check_spmm_operands("tuned spmm", rows_, cols_, x, y);
    run_(x, y);
  }
  void operator()(const Tensor<T>& x, Tensor<T>& y) const { (*this)(x.view(), y.view()); }

  // A table of the candidates (model, padding, conversion, first call, median) and the choice.
  std::string report() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "tuned spmm: %lld x %lld, nnz %lld, K = %lld, %lld threads: %s%s (%.2f s)\n",
                  static_cast<long long>(rows_), static_cast<long long>(cols_), static_cast<long long>(record_.nnz),
                  static_cast<long long>(record_.feature), static_cast<long long>(record_.threads),
                  record_.choice.c_str(), from_record_ ? " (from the tuning record)" : "", record_.tuning_s);
    return buf + detail::report_candidates(candidates_, record_.choice, from_record_);
  }

 private:
  template <class U, class I2>
  friend TunedSpmm<U, I2> tune_spmm(const Csr<U, I2>&, std::int64_t, const TuneOptions&);

  std::int64_t rows_ = 0, cols_ = 0;
  Run run_;
};

namespace detail {

// The model: bytes moved per call with K columns. Measured on the development machine (2
// threads; FEM operators with exact 3x3 / 4x4 blocks, graphs, bcsstk25), SpMM is bound by
// streaming the stored values' products over K in every format: a stored slot costs about
// what a CSR nonzero costs (the rows of X a block reuses are cache hits for CSR as well), so
// a format pays for its padding almost one to one and gains a little per slot from fewer
// index loads. Padded copies of X and Y (extents not multiples of the block) count too.
struct TrafficModel {
  double value_bytes, index_bytes, k;
  double csr(double rows, double nnz) const {
    return nnz * (index_bytes + value_bytes) + nnz * k * value_bytes + rows * k * value_bytes;
  }
  // b x b blocks: one index and b*b values per block, and per slot a fraction of a CSR
  // nonzero's K-cost (bsr_slot_cost).
  double bsr(double rows, double cols, double blocks, double b, bool padded) const {
    return blocks * (index_bytes + b * b * value_bytes) + bsr_slot_cost(b) * blocks * b * b * k * value_bytes +
           rows * k * value_bytes + (padded ? 2 * (rows + cols) * k * value_bytes : 0);
  }
  // A block's b rows accumulate together in registers (register_tile's two-dimensional tiles
  // for a compile-time row extent), so each X vector loaded feeds b multiply-adds where CSR's
  // feeds one. Measured on the exact blocks of (A + I) x a dense b x b block of bcsstk25 at K
  // = 32, 128, 512 and 2 threads (docs/benchmarks.md, 2026-12-07): BSR's time over CSR's
  // 0.67-0.99 for b = 2, 0.69-0.89 for 3, 0.71-0.93 for 4, 0.51-0.72 for 8.
  static double bsr_slot_cost(double b) { return b <= 2 ? 0.85 : b <= 4 ? 0.8 : b <= 6 ? 0.72 : 0.65; }
  double ell(double rows, double width) const { return csr(rows, rows * width); }
  // hyb(c, k) (ops::HybSpmm): its slots like a block format's, a row map entry per piece, Y
  // zeroed once and read and written back by every piece (the parts add into it).
  double hyb(double rows, double slots, double pieces) const {
    return slots * (index_bytes + value_bytes) + 0.9 * slots * k * value_bytes + pieces * index_bytes +
           rows * k * value_bytes + 2 * pieces * k * value_bytes;
  }
};

template <class T>
using SpmmCandidate = Candidate<typename TunedSpmm<T>::Run>;

template <class T, std::int64_t B>
SpmmCandidate<T> bsr_candidate(const Csr<T, std::int32_t>& a, const TrafficModel& m) {
  const double blocks = static_cast<double>(count_blocks(a, B, B));
  SpmmCandidate<T> c;
  c.name = "bsr " + std::to_string(B) + "x" + std::to_string(B);
  const bool padded = a.rows() % B != 0 || a.cols() % B != 0;
  c.cost = m.bsr(static_cast<double>(a.rows()), static_cast<double>(a.cols()), blocks, static_cast<double>(B), padded);
  c.padding = blocks * B * B / std::max(1.0, static_cast<double>(a.nnz()));
  c.build = [&a]() -> typename TunedSpmm<T>::Run {
    auto bsr = std::make_shared<Bsr<T, std::int32_t>>(Bsr<T, std::int32_t>::from_csr(a, B, B));
    auto kernel = ops::bsr_spmm<T, B, B, std::int32_t>();
    return [bsr, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*bsr, x, y); };
  };
  return c;
}

// hyb(1, k) with k from A's degree distribution: the power of two in [4, 256] whose slots
// (a row of n entries is n / k pieces of k and a piece of the rest, padded to a power of
// two) and pieces cost the least in the model; O(rows) per k, without building the format.
// One column partition: on a CPU a partition re-reads and re-writes Y (the model's 2 * pieces
// term) and saves nothing the cache does not already give.
template <class T>
SpmmCandidate<T> hyb_candidate(const Csr<T, std::int32_t>& a, const TrafficModel& m) {
  double best_cost = 0, best_slots = 0;
  std::int64_t best_k = 0;
  for (std::int64_t k = 4; k <= 256; k *= 2) {
    const auto [slots, pieces] = count_hyb_slots(a, k);
    const double cost = m.hyb(static_cast<double>(a.rows()), slots, pieces);
    if (best_k == 0 || cost < best_cost) best_cost = cost, best_k = k, best_slots = slots;
  }
  SpmmCandidate<T> c;
  c.name = "hyb(1," + std::to_string(best_k) + ")";
  c.cost = best_cost;
  c.padding = best_slots / std::max(1.0, static_cast<double>(a.nnz()));
  c.build = [&a, best_k]() -> typename TunedSpmm<T>::Run {
    auto h = std::make_shared<Hyb<T, std::int32_t>>(Hyb<T, std::int32_t>::from_csr(a, 1, best_k));
    ops::HybSpmm<T, std::int32_t> kernel;
    return [h, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*h, x, y); };
  };
  return c;
}

// The schedule axis of the search, on CSR: `split("k", w).reorder({"k_o", "j", "k_i"})
// .cache_write("k_o", "c").vectorize("k_i").parallel("i")` (docs/schedules.md) for the three
// widest w of 128, 64, 32, 16, 8 no wider than K: every row's K columns in tiles of one width
// accumulated in registers, the rows split evenly across threads. The default schedule tiles
// with a cascade of widths (128, then 64, ..., then the rest, for any K) and balances skewed
// rows by nonzeros; one width is fewer loops per row, which short rows feel, and a narrower
// tile reads X in shorter runs. (Pubmed at K = 32, 2 threads: one 32-wide tile ran 1.15x
// faster than the default until register_tile gave K equal to a width a version of its own;
// since then they measure alike there.)
// The traffic model cannot tell these apart (same bytes as the default): each gets the
// default's cost, and measurement decides.
template <class T>
std::vector<SpmmCandidate<T>> csr_schedule_candidates(const Csr<T, std::int32_t>& a, std::int64_t feature,
                                                      const TrafficModel& m) {
  std::vector<SpmmCandidate<T>> out;
  for (std::int64_t w : {128, 64, 32, 16, 8}) {
    if (w > feature || out.size() == 3) continue;
    Schedule s;
    s.split("k", w).reorder({"k_o", "j", "k_i"}).cache_write("k_o", "c").vectorize("k_i").parallel("i");
    SpmmCandidate<T> c;
    c.name = "csr " + s.to_string();
    c.cost = m.csr(static_cast<double>(a.rows()), static_cast<double>(a.nnz()));
    c.build = [&a, s]() -> typename TunedSpmm<T>::Run {
      auto copy = std::make_shared<Csr<T, std::int32_t>>(a);
      auto kernel = ops::spmm<T>().with_schedule(s);
      return [copy, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*copy, x, y); };
    };
    out.push_back(std::move(c));
  }
  return out;
}

template <class T>
std::vector<SpmmCandidate<T>> spmm_candidates(const Csr<T, std::int32_t>& a, std::int64_t feature) {
  const TrafficModel m{static_cast<double>(sizeof(T)), 4.0, static_cast<double>(std::max<std::int64_t>(1, feature))};
  const double rows = static_cast<double>(a.rows()), nnz = static_cast<double>(a.nnz());
  std::vector<SpmmCandidate<T>> out;
  SpmmCandidate<T> csr;
  csr.name = "csr";
  csr.cost = m.csr(rows, nnz);
  csr.build = [&a]() -> typename TunedSpmm<T>::Run {
    auto copy = std::make_shared<Csr<T, std::int32_t>>(a);
    auto kernel = ops::spmm<T>();
    return [copy, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*copy, x, y); };
  };
  out.push_back(std::move(csr));
  if (a.rows() > 0 && a.cols() > 0 && a.nnz() > 0) {
    for (auto& c : csr_schedule_candidates<T>(a, feature, m)) out.push_back(std::move(c));
    out.push_back(bsr_candidate<T, 2>(a, m));
    out.push_back(bsr_candidate<T, 3>(a, m));
    out.push_back(bsr_candidate<T, 4>(a, m));
    out.push_back(bsr_candidate<T, 5>(a, m));
    out.push_back(bsr_candidate<T, 6>(a, m));
    out.push_back(bsr_candidate<T, 8>(a, m));
    std::int64_t width = 0;
    const auto ptr = a.indptr();
    for (std::int64_t r = 0; r < a.rows(); ++r) width = std::max<std::int64_t>(width, ptr[r + 1] - ptr[r]);
    SpmmCandidate<T> ell;
    ell.name = "ell";
    ell.cost = m.ell(rows, static_cast<double>(width));
    ell.padding = rows * static_cast<double>(width) / std::max(1.0, nnz);
    ell.build = [&a]() -> typename TunedSpmm<T>::Run {
      auto e = std::make_shared<Ell<T, std::int32_t>>(Ell<T, std::int32_t>::from_csr(a));
      auto kernel = ops::ell_spmm<T, std::int32_t>();
      return [e, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*e, x, y); };
    };
    out.push_back(std::move(ell));
    out.push_back(hyb_candidate<T>(a, m));
  }
  return out;
}

}  // namespace detail

// Tunes Y = A X for A and `feature` columns of X (see the top of this file). With a record
// file, a matching record (same structure, K, threads, machine) is reused without measuring,
// and a new decision is appended. ShapeError for a negative feature; CacheError for a broken
// record file; InternalError when a candidate's result disagrees with CSR's.
template <class T, class Index>
TunedSpmm<T, Index> tune_spmm(const Csr<T, Index>& a, std::int64_t feature, const TuneOptions& opt) {
  static_assert(std::is_same_v<Index, std::int32_t>, "tune_spmm: the tuned kernels use 32-bit indices");
  SPINDLE_CHECK(feature >= 0, ShapeError, "tune_spmm: feature size ", feature, " is negative");
  detail::check_options(opt, "tune_spmm");
  TunedSpmm<T, Index> plan;
  plan.rows_ = a.rows();
  plan.cols_ = a.cols();
  TuningRecord& rec = plan.record_;
  rec = detail::record_key("spmm", a, feature);

  // CSR's result is the reference.
  using Run = typename TunedSpmm<T, Index>::Run;
  auto sel = detail::select<T, Run>(detail::spmm_candidates(a, feature), opt, rec, "tune_spmm",
                                    "spmm " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) +
                                        " K=" + std::to_string(feature),
                                    {a.cols(), feature}, {a.rows(), feature});
  plan.run_ = std::move(sel.run);
  plan.candidates_ = std::move(sel.results);
  plan.from_record_ = sel.from_record;
  return plan;
}

template <class T, class Index>
TunedSpmm<T, Index> tune_spmm(const Csr<T, Index>& a, std::int64_t feature) {
  return tune_spmm(a, feature, TuneOptions{});
}

}  // namespace spindle::tune
