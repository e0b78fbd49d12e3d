// The SpMM format tuner (SparseTIR's tuner, seed 002 §5, for the format axis): Y = A X with A
// given as a CSR, run in whichever stored format is fastest for this matrix, feature size,
// thread count and machine.
//
//   spindle::tune::TuneOptions opt;
//   opt.record_file = "tuning.jsonl";          // optional: reuse earlier decisions
//   auto plan = spindle::tune::tune_spmm(A, /*feature=*/128, opt);
//   plan(X, Y);                                // Y = A X in the chosen format
//   std::cout << plan.report();                // candidates, model, measured times, choice
//
// Candidates: CSR (ops::spmm, always measured: it is the default the choice must beat), BSR
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
#include "spindle/support/error.hpp"
#include "spindle/support/hash.hpp"
#include "spindle/support/timer.hpp"
#include "spindle/tune/fingerprint.hpp"
#include "spindle/tune/record.hpp"

namespace spindle::tune {

struct TuneOptions {
  std::string record_file;   // JSON Lines of earlier decisions (tune/record.hpp); "" = none
  bool progress = ::isatty(2) == 1;  // a progress bar with ETA on stderr
  double min_seconds = 0.05;  // time each measured candidate at least this long ...
  int min_reps = 3;           // ... and at least this many calls ...
  int max_reps = 200;         // ... but at most this many
  int max_measured = 4;       // candidates built and timed (CSR included)
  double prune_above = 1.25;  // prune candidates predicted this much slower than CSR
  double max_padding = 64;    // never build a format that stores more than this many slots per
                              // nonzero, named or not (ELL of a skewed graph: longest row x rows
                              // can be thousands; a lone nonzero in an 8x8 block is 64)
  std::vector<std::string> only;  // if not empty: measure exactly these candidates (names as in
                                  // report()), unpruned by the model (max_measured still applies)
};

struct CandidateResult {
  std::string name;         // "csr", "bsr 4x4", "ell"
  double predicted = 0;     // model cost relative to CSR (1 = CSR's)
  double padding = 1;       // stored values per stored entry of A
  bool measured = false;
  std::string why_not;      // why it was not measured ("pruned: ...", "not allowed", "")
  double convert_ms = 0;    // building the format from the CSR
  double first_call_ms = 0; // first call: compilation (or cache load) + one run
  double ms = 0;            // median per call
  double max_error = 0;     // max |Y - Y_csr| / max(1, max |Y_csr|)
};

namespace detail {

template <class T>
void fill_pseudo_random(std::vector<T>& v, std::uint64_t seed) {
  std::uint64_t s = seed;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<T>(static_cast<double>(s >> 11) * (2.0 / 9007199254740992.0) - 1.0);
  }
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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
  // b x b blocks: one index and b*b values per block, 0.9 of a CSR nonzero's K-cost per slot.
  double bsr(double rows, double cols, double blocks, double b, bool padded) const {
    return blocks * (index_bytes + b * b * value_bytes) + 0.9 * blocks * b * b * k * value_bytes +
           rows * k * value_bytes + (padded ? 2 * (rows + cols) * k * value_bytes : 0);
  }
  double ell(double rows, double width) const { return csr(rows, rows * width); }
  // hyb(c, k) (ops::HybSpmm): its slots like a block format's, a row map entry per piece, Y
  // zeroed once and read and written back by every piece (the parts add into it).
  double hyb(double rows, double slots, double pieces) const {
    return slots * (index_bytes + value_bytes) + 0.9 * slots * k * value_bytes + pieces * index_bytes +
           rows * k * value_bytes + 2 * pieces * k * value_bytes;
  }
};

class ProgressBar {
 public:
  ProgressBar(bool on, std::string title, int total) : on_(on), title_(std::move(title)), total_(total) {}
  void step(int done, const std::string& what) const {
    if (!on_) return;
    const int width = 24, filled = total_ ? width * done / total_ : width;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    const double t = timer_.seconds();
    char eta[32] = "";
    if (done > 0 && done < total_) std::snprintf(eta, sizeof eta, " ETA %.1f s", t / done * (total_ - done));
    std::fprintf(stderr, "\r[tune] %s [%s] %d/%d %-10s %.1f s%s   ", title_.c_str(), bar.c_str(), done, total_,
                 what.c_str(), t, eta);
    if (done == total_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool on_;
  std::string title_;
  int total_;
  Timer timer_;
};

}  // namespace detail

template <class T, class Index = std::int32_t>
class TunedSpmm {
  static_assert(std::is_same_v<Index, std::int32_t>, "tune_spmm: the tuned kernels use 32-bit indices");

 public:
  using Run = std::function<void(TensorView<const T>, TensorView<T>)>;

  // Y = A X; ShapeError when X is not [A.cols(), K] or Y not [A.rows(), K].
  void operator()(TensorView<const T> x, TensorView<T> y) const {
    SPINDLE_CHECK(x.rank() == 2 && y.rank() == 2, ShapeError, "tuned spmm: X and Y must be matrices, got ranks ",
                  x.rank(), " and ", y.rank());
    SPINDLE_CHECK(x.dim(0) == cols_, ShapeError, "tuned spmm: X has ", x.dim(0), " rows but A has ", cols_,
                  " columns");
    SPINDLE_CHECK(y.dim(0) == rows_, ShapeError, "tuned spmm: Y has ", y.dim(0), " rows but A has ", rows_, " rows");
    SPINDLE_CHECK(x.dim(1) == y.dim(1), ShapeError, "tuned spmm: X has ", x.dim(1), " columns but Y has ", y.dim(1));
    run_(x, y);
  }
  void operator()(const Tensor<T>& x, Tensor<T>& y) const { (*this)(x.view(), y.view()); }

  const std::string& choice() const { return record_.choice; }
  bool from_record() const { return from_record_; }
  double tuning_seconds() const { return record_.tuning_s; }
  const TuningRecord& record() const { return record_; }
  const std::vector<CandidateResult>& candidates() const { return candidates_; }
  // A table of the candidates (model, padding, conversion, first call, median) and the choice.
  std::string report() const {
    std::string s;
    char buf[256];
    std::snprintf(buf, sizeof buf, "tuned spmm: %lld x %lld, nnz %lld, K = %lld, %lld threads: %s%s (%.2f s)\n",
                  static_cast<long long>(rows_), static_cast<long long>(cols_), static_cast<long long>(record_.nnz),
                  static_cast<long long>(record_.feature), static_cast<long long>(record_.threads),
                  record_.choice.c_str(), from_record_ ? " (from the tuning record)" : "", record_.tuning_s);
    s += buf;
    for (const auto& c : candidates_) {
      if (c.measured)
        std::snprintf(buf, sizeof buf,
                      "  %-8s model %5.2f  padding %5.2f  convert %7.2f ms  first call %8.2f ms  median %8.3f ms%s\n",
                      c.name.c_str(), c.predicted, c.padding, c.convert_ms, c.first_call_ms, c.ms,
                      c.name == record_.choice ? "  <- chosen" : "");
      else if (from_record_)
        std::snprintf(buf, sizeof buf, "  %-8s model %5.2f  padding %5.2f  convert %7.2f ms  recorded median %8.3f ms\n",
                      c.name.c_str(), c.predicted, c.padding, c.convert_ms, c.ms);
      else
        std::snprintf(buf, sizeof buf, "  %-8s model %5.2f  padding %5.2f  %s\n", c.name.c_str(), c.predicted,
                      c.padding, c.why_not.c_str());
      s += buf;
    }
    return s;
  }

 private:
  template <class U, class I2>
  friend TunedSpmm<U, I2> tune_spmm(const Csr<U, I2>&, std::int64_t, const TuneOptions&);

  std::int64_t rows_ = 0, cols_ = 0;
  Run run_;
  TuningRecord record_;
  bool from_record_ = false;
  std::vector<CandidateResult> candidates_;
};

namespace detail {

// A candidate: its name, model cost and how to build it (a runner owning the converted A).
template <class T>
struct SpmmCandidate {
  std::string name;
  double cost = 0, padding = 1;
  std::function<typename TunedSpmm<T>::Run()> build;
};

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
  const auto ptr = a.indptr();
  double best_cost = 0, best_slots = 0;
  std::int64_t best_k = 0;
  for (std::int64_t k = 4; k <= 256; k *= 2) {
    double slots = 0, pieces = 0;
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      const std::int64_t n = ptr[r + 1] - ptr[r], rest = n % k;
      slots += static_cast<double>(n / k * k + (rest ? static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(rest))) : 0));
      pieces += static_cast<double>(n / k + (rest ? 1 : 0));
    }
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

inline std::string machine_key() {
  runtime::Runtime& rt = runtime::default_runtime();
  return Hasher().add(rt.engine().identity()).digest().hex();
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
  SPINDLE_CHECK(opt.min_reps >= 1 && opt.max_reps >= opt.min_reps && opt.max_measured >= 1 && opt.max_padding >= 1,
                UserError,
                "tune_spmm: TuneOptions need 1 <= min_reps <= max_reps, max_measured >= 1 and max_padding >= 1 (got ",
                opt.min_reps, ", ", opt.max_reps, ", ", opt.max_measured, ", ", opt.max_padding, ")");
  Timer total;
  TunedSpmm<T, Index> plan;
  plan.rows_ = a.rows();
  plan.cols_ = a.cols();
  TuningRecord& rec = plan.record_;
  rec.kernel = "spmm";
  rec.dtype = dtype_name(dtype_v<T>);
  rec.index = dtype_name(dtype_v<Index>);
  rec.rows = a.rows(), rec.cols = a.cols(), rec.nnz = a.nnz();
  rec.fingerprint = csr_fingerprint(a);
  rec.feature = feature;
  rec.threads = runtime::default_runtime().pool().num_threads();
  rec.machine = detail::machine_key();

  auto cands = detail::spmm_candidates(a, feature);
  const double csr_cost = std::max(1e-300, cands.front().cost);
  auto allowed = [&](const std::string& n) {
    return opt.only.empty() || std::find(opt.only.begin(), opt.only.end(), n) != opt.only.end();
  };
  auto result_of = [&](const detail::SpmmCandidate<T>& c) {
    CandidateResult r;
    r.name = c.name;
    r.predicted = c.cost / csr_cost;
    r.padding = c.padding;
    return r;
  };

  if (!opt.record_file.empty()) {
    if (auto found = find_record(opt.record_file, rec)) {
      auto it = std::find_if(cands.begin(), cands.end(), [&](const auto& c) { return c.name == found->choice; });
      SPINDLE_CHECK(it != cands.end(), CacheError, "tuning record file '", opt.record_file, "' chooses '",
                    found->choice, "' for this matrix, which is not a candidate of this Spindle's SpMM tuner",
                    "\n  hint: remove the line and tune again");
      if (allowed(it->name)) {
        Timer conv;
        plan.run_ = it->build();
        auto r = result_of(*it);
        r.convert_ms = conv.seconds() * 1e3;
        for (const auto& [n, ms] : found->times_ms)
          if (n == it->name) r.ms = ms;
        plan.candidates_.push_back(r);
        rec = *found;
        plan.from_record_ = true;
        return plan;
      }
    }
  }

  // Prune by the model: CSR always; then the cheapest predicted, within prune_above of CSR.
  std::vector<std::size_t> order;
  for (std::size_t i = 1; i < cands.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return cands[x].cost < cands[y].cost; });
  std::vector<std::size_t> measure;
  if (allowed("csr")) measure.push_back(0);
  std::vector<CandidateResult> results(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) results[i] = result_of(cands[i]);
  if (!allowed("csr")) results[0].why_not = "not allowed (TuneOptions::only)";
  std::string too_large;  // the allowed candidates not built for their size, for the error below
  for (std::size_t i : order) {
    auto& r = results[i];
    char buf[96];
    if (!allowed(cands[i].name)) r.why_not = "not allowed (TuneOptions::only)";
    else if (r.padding > opt.max_padding) {
      std::snprintf(buf, sizeof buf, "not built: %.1f stored slots per nonzero (max_padding %.1f)", r.padding,
                    opt.max_padding);
      r.why_not = buf;
      too_large += (too_large.empty() ? "" : "; ") + cands[i].name + ": " + r.why_not;
    } else if (opt.only.empty() && r.predicted > opt.prune_above) {  // named candidates are measured
      std::snprintf(buf, sizeof buf, "pruned: model %.2fx CSR's cost", r.predicted);
      r.why_not = buf;
    } else if (static_cast<int>(measure.size()) >= opt.max_measured)
      r.why_not = "pruned: max_measured candidates already chosen";
    else measure.push_back(i);
  }
  if (measure.empty()) {
    std::string names, wanted;
    if (!too_large.empty())
      throw UserError(message("tune_spmm: every candidate named in TuneOptions::only is too large to build for this ",
                              a.rows(), "x", a.cols(), " matrix with ", a.nnz(), " nonzeros (", too_large,
                              "); raise TuneOptions::max_padding to build it anyway"));
    for (const auto& c : cands) names += (names.empty() ? "" : ", ") + c.name;
    for (const auto& n : opt.only) wanted += (wanted.empty() ? "'" : ", '") + n + "'";
    throw UserError(message("tune_spmm: TuneOptions::only names ", wanted, ", none of which is a candidate for this ",
                            a.rows(), "x", a.cols(), " matrix with ", a.nnz(), " nonzeros (candidates: ", names, ")"));
  }

  // Measure. X is pseudo-random in [-1, 1); CSR's result (when measured) is the reference.
  const std::int64_t k = feature;
  std::vector<T> xs(static_cast<std::size_t>(a.cols() * k)), ys(static_cast<std::size_t>(a.rows() * k)),
      yref;
  detail::fill_pseudo_random(xs, 0x5eed);
  const TensorView<const T> x(xs.data(), {a.cols(), k});
  const TensorView<T> y(ys.data(), {a.rows(), k});
  detail::ProgressBar bar(opt.progress, "spmm " + std::to_string(a.rows()) + "x" + std::to_string(a.cols()) +
                                            " K=" + std::to_string(k),
                          static_cast<int>(measure.size()));
  bar.step(0, cands[measure.front()].name);
  double best = 0;
  std::size_t best_i = measure.front();
  typename TunedSpmm<T, Index>::Run best_run;
  for (std::size_t n = 0; n < measure.size(); ++n) {
    const std::size_t i = measure[n];
    auto& r = results[i];
    Timer conv;
    auto run = cands[i].build();
    r.convert_ms = conv.seconds() * 1e3;
    std::fill(ys.begin(), ys.end(), T(std::nan("")));
    Timer first;
    run(x, y);
    r.first_call_ms = first.seconds() * 1e3;
    if (i == 0) yref = ys;
    else if (!yref.empty()) {
      double scale = 1, err = 0;
      for (T v : yref) scale = std::max(scale, std::fabs(static_cast<double>(v)));
      for (std::size_t e = 0; e < ys.size(); ++e) {
        const double d = std::fabs(static_cast<double>(ys[e]) - static_cast<double>(yref[e]));
        err = std::max(err, std::isnan(d) ? INFINITY : d);
      }
      r.max_error = err / scale;
      const double tol = sizeof(T) == 4 ? 1e-3 : 1e-9;
      SPINDLE_CHECK(r.max_error <= tol, InternalError, "tune_spmm: candidate '", r.name,
                    "' disagrees with CSR (max relative difference ", r.max_error, " > ", tol,
                    "); this is a bug in Spindle, please report it");
    }
    std::vector<double> times;
    Timer span;
    while (static_cast<int>(times.size()) < opt.max_reps &&
           (static_cast<int>(times.size()) < opt.min_reps || span.seconds() < opt.min_seconds)) {
      Timer t;
      run(x, y);
      times.push_back(t.seconds() * 1e3);
    }
    r.ms = detail::median(times);
    r.measured = true;
    rec.times_ms.emplace_back(r.name, r.ms);
    if (n == 0 || r.ms < best) best = r.ms, best_i = i, best_run = run;
    bar.step(static_cast<int>(n + 1), r.name);
  }
  plan.run_ = std::move(best_run);
  rec.choice = cands[best_i].name;
  rec.tuning_s = total.seconds();
  plan.candidates_ = std::move(results);
  if (!opt.record_file.empty()) append_record(opt.record_file, rec);
  return plan;
}

template <class T, class Index>
TunedSpmm<T, Index> tune_spmm(const Csr<T, Index>& a, std::int64_t feature) {
  return tune_spmm(a, feature, TuneOptions{});
}

}  // namespace spindle::tune
