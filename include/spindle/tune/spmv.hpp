// The SpMV tuner (SparseTIR's tuner, seed 002 §5, over schedules and formats): y = A x with
// A given as a CSR, run under whichever schedule of ops::spmv, or in whichever format, is
// fastest for this matrix, thread count and machine.
//
//   spindle::tune::TuneOptions opt;
//   opt.record_file = "tuning.jsonl";          // optional: reuse earlier decisions
//   auto plan = spindle::tune::tune_spmv(A, opt);
//   plan(x, y);                                // y = A x under the chosen schedule
//   std::cout << plan.report();                // candidates, model, measured times, choice
//
// Candidates: the default schedule (one running sum per row: a chain of dependent additions,
// the fastest on short rows and always measured), user schedules that split each row's
// sum into L partial sums (Schedule::rfactor on the CPU, docs/schedules.md): L = 2 and 4 as
// scalar chains, L = 8 and 16 with the lanes vectorised (a gather of x per group), all with
// parallel rows — a row of n nonzeros then waits for about n / L dependent additions instead
// of n, plus the combine and one guarded group for the n % L tail — and a format: hyb(1, k)
// (ops::HybSpmv), rows cut into pieces of a power-of-two width that is a compile-time constant of the piece's kernel,
// so each piece is summed as one vector, with no loop of a data-dependent length (k from the
// row lengths, hyb_spmv_candidate). The model (LatencyModel below) estimates each
// candidate's cycles from the row lengths in O(rows); candidates predicted slower than the
// default by more than `TuneOptions::prune_above` are pruned, the `max_measured` best of
// the rest are compiled and timed, and the fastest wins. Every measured candidate's result is
// compared with the default's first (the partial sums re-associate the row sums: within
// 1e-3 relative in f32); one that disagrees is an InternalError, never a choice.
//
// The plan owns a copy of A (or its hyb parts): later changes to A's values are not seen.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/hyb.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/ops.hpp"
#include "spindle/schedule/user_schedule.hpp"
#include "spindle/support/error.hpp"
#include "spindle/tune/select.hpp"

namespace spindle::tune {

template <class T, class Index = std::int32_t>
class TunedSpmv : public TunedPlan {
  static_assert(std::is_same_v<Index, std::int32_t>, "tune_spmv: the tuned kernels use 32-bit indices");

 public:
  using Run = std::function<void(TensorView<const T>, TensorView<T>)>;

  // y = A x; ShapeError when x is not [A.cols()] or y not [A.rows()].
  void operator()(TensorView<const T> x, TensorView<T> y) const {
    SPINDLE_CHECK(x.rank() == 1 && y.rank() == 1, ShapeError, "tuned spmv: x and y must be vectors, got ranks ",
                  x.rank(), " and ", y.rank());
    SPINDLE_CHECK(x.dim(0) == cols_, ShapeError, "tuned spmv: x has ", x.dim(0), " entries but A has ", cols_,
                  " columns");
    SPINDLE_CHECK(y.dim(0) == rows_, ShapeError, "tuned spmv: y has ", y.dim(0), " entries but A has ", rows_,
                  " rows");
    run_(x, y);
  }
  void operator()(const Tensor<T>& x, Tensor<T>& y) const { (*this)(x.view(), y.view()); }

  // A table of the candidates (model, first call, median) and the choice.
  std::string report() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "tuned spmv: %lld x %lld, nnz %lld, %lld threads: %s%s (%.2f s)\n",
                  static_cast<long long>(rows_), static_cast<long long>(cols_), static_cast<long long>(record_.nnz),
                  static_cast<long long>(record_.threads), record_.choice.c_str(),
                  from_record_ ? " (from the tuning record)" : "", record_.tuning_s);
    return buf + detail::report_candidates(candidates_, record_.choice, from_record_);
  }

 private:
  template <class U, class I2>
  friend TunedSpmv<U, I2> tune_spmv(const Csr<U, I2>&, const TuneOptions&);

  std::int64_t rows_ = 0, cols_ = 0;
  Run run_;
};

namespace detail {

// Cycles of one row sum of n terms split into `lanes` partial sums, on one core: the longer
// of the dependent-add chain (n / lanes full groups, one guarded group for the n % lanes tail
// (its terms go to lanes 0, 1, ...: rfactor_cpu.hpp), a combine tree of log2(lanes) adds)
// and the issue of the loads and multiply-adds (about one cycle per nonzero), plus a loop overhead per row that the partial sums double (init, tail, combine).
// Fitted on the development machine (pubmed, ppi, bcsstk25; 1 thread): it ranks the measured
// candidates of those matrices in order, which is all pruning needs.
// hyb(1, k) (ops::HybSpmv): each row piece's slots are summed as one vector (the slot loop has
// a constant width), so a piece costs about a cycle per slot, padding included, and a fixed
// overhead (horizontal add, row map, read and write of y); y is zeroed first.
struct LatencyModel {
  double add_latency = 4, per_nonzero = 1, per_row = 4, per_split_row = 10, per_slot = 1, per_piece = 6;
  double hyb(double rows, double slots, double pieces) const { return slots * per_slot + pieces * per_piece + rows; }
  double row(std::int64_t n, int lanes) const {
    const double nn = static_cast<double>(n);
    if (lanes == 1) return std::max(nn * add_latency, nn * per_nonzero) + per_row;
    const double groups = static_cast<double>(n / lanes + (n % lanes ? 1 : 0));
    const double chain = groups * add_latency + std::log2(lanes) * add_latency;
    return std::max(chain, nn * per_nonzero) + per_row + per_split_row;
  }
};

template <class T>
using SpmvCandidate = Candidate<typename TunedSpmv<T>::Run>;

// hyb(1, k) with k the power of two in [4, 256] that the model prices lowest: a row of n
// entries is n / k pieces of k slots and a piece of the rest padded to a power of two.
template <class T>
SpmvCandidate<T> hyb_spmv_candidate(const Csr<T, std::int32_t>& a, const LatencyModel& m) {
  double best_cost = 0, best_slots = 0;
  std::int64_t best_k = 0;
  for (std::int64_t k = 4; k <= 256; k *= 2) {
    const auto [slots, pieces] = count_hyb_slots(a, k);
    const double cost = m.hyb(static_cast<double>(a.rows()), slots, pieces);
    if (best_k == 0 || cost < best_cost) best_cost = cost, best_k = k, best_slots = slots;
  }
  SpmvCandidate<T> c;
  c.name = "hyb(1," + std::to_string(best_k) + ")";
  c.cost = best_cost;
  c.padding = best_slots / std::max(1.0, static_cast<double>(a.nnz()));
  c.build = [&a, best_k]() -> typename TunedSpmv<T>::Run {
    auto h = std::make_shared<Hyb<T, std::int32_t>>(Hyb<T, std::int32_t>::from_csr(a, 1, best_k));
    ops::HybSpmv<T, std::int32_t> kernel;
    return [h, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*h, x, y); };
  };
  return c;
}

template <class T>
std::vector<SpmvCandidate<T>> spmv_candidates(const Csr<T, std::int32_t>& a) {
  const LatencyModel m;
  const auto ptr = a.indptr();
  auto cost = [&](int lanes) {
    double c = 0;
    for (std::int64_t r = 0; r < a.rows(); ++r) c += m.row(ptr[r + 1] - ptr[r], lanes);
    return c;
  };
  auto make = [&](std::string name, Schedule s, int lanes) {
    SpmvCandidate<T> c;
    c.name = std::move(name);
    c.cost = cost(lanes);
    c.build = [&a, s]() -> typename TunedSpmv<T>::Run {
      auto copy = std::make_shared<Csr<T, std::int32_t>>(a);
      auto kernel = s.empty() ? ops::spmv<T>() : ops::spmv<T>().with_schedule(s);
      return [copy, kernel](TensorView<const T> x, TensorView<T> y) { kernel(*copy, x, y); };
    };
    return c;
  };
  std::vector<SpmvCandidate<T>> out;
  out.push_back(make("csr", Schedule{}, 1));
  if (a.nnz() == 0 || a.rows() == 0 || a.cols() == 0) return out;
  for (int lanes : {2, 4, 8, 16}) {
    Schedule s;
    s.rfactor("j", lanes);
    if (lanes >= 8) s.vectorize("j_lane");
    s.parallel("i");
    out.push_back(make("csr " + s.to_string(), s, lanes));
  }
  out.push_back(hyb_spmv_candidate(a, m));
  return out;
}

}  // namespace detail

// Tunes y = A x for A (see the top of this file). With a record file, a matching record (same
// structure, threads, machine; feature 1) is reused without measuring, and a new decision is
// appended. CacheError for a broken record file; InternalError when a candidate's result
// disagrees with the default's.
template <class T, class Index>
TunedSpmv<T, Index> tune_spmv(const Csr<T, Index>& a, const TuneOptions& opt) {
  static_assert(std::is_same_v<Index, std::int32_t>, "tune_spmv: the tuned kernels use 32-bit indices");
  detail::check_options(opt, "tune_spmv");
  TunedSpmv<T, Index> plan;
  plan.rows_ = a.rows();
  plan.cols_ = a.cols();
  plan.record_ = detail::record_key("spmv", a, 1);

  // The default schedule's result is the reference.
  using Run = typename TunedSpmv<T, Index>::Run;
  auto sel = detail::select<T, Run>(detail::spmv_candidates(a), opt, plan.record_, "tune_spmv",
                                    "spmv " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()),
                                    {a.cols()}, {a.rows()});
  plan.run_ = std::move(sel.run);
  plan.candidates_ = std::move(sel.results);
  plan.from_record_ = sel.from_record;
  return plan;
}

template <class T, class Index>
TunedSpmv<T, Index> tune_spmv(const Csr<T, Index>& a) {
  return tune_spmv(a, TuneOptions{});
}

}  // namespace spindle::tune
