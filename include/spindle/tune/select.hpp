// What every tuner shares (tune_spmm, tune_spmv): the options, a candidate and its measured
// result, and select(), the search itself: reuse a matching tuning record, else prune the
// candidates by their model cost, build and time the cheapest few (the first candidate, the
// default, always), check each one's output against the default's, time them in interleaved
// rounds, and keep the fastest — another candidate than the default only when it measured at
// least `min_gain` times faster than the default (within the timing noise the default stays).
// A candidate whose output disagrees with the default's is an InternalError, never a choice.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "spindle/format/tensor.hpp"
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
  int max_measured = 5;       // candidates built and timed (the default included)
  double prune_above = 1.25;  // prune candidates predicted this much slower than the default
  double min_gain = 1.03;     // choose another candidate than the default only when its median
                              // is at least this many times faster than the default's (the
                              // tuner's short timings vary by a few percent: a near tie keeps
                              // the default, which needs no conversion)
  double max_padding = 64;    // never build a format that stores more than this many slots per
                              // nonzero, named or not (ELL of a skewed graph: longest row x rows
                              // can be thousands; a lone nonzero in an 8x8 block is 64)
  std::vector<std::string> only;  // if not empty: measure exactly these candidates (names as in
                                  // report()), unpruned by the model (max_measured still applies)
};

struct CandidateResult {
  std::string name;         // "csr", "bsr 4x4", "ell", "csr rfactor(\"j\", 4).parallel(\"i\")"
  double predicted = 0;     // model cost relative to the default (CSR, default schedule: 1)
  double padding = 1;       // stored values per stored entry of A
  bool measured = false;
  std::string why_not;      // why it was not measured ("pruned: ...", "not allowed", "")
  double convert_ms = 0;    // building the format from the CSR (and the kernel object)
  double first_call_ms = 0; // first call: compilation (or cache load) + one run
  double ms = 0;            // median per call
  double max_error = 0;     // max |Y - Y_default| / max(1, max |Y_default|)
};

// What a tuned plan tells about its choice (TunedSpmm, TunedSpmv).
class TunedPlan {
 public:
  const std::string& choice() const { return record_.choice; }
  bool from_record() const { return from_record_; }
  double tuning_seconds() const { return record_.tuning_s; }
  const TuningRecord& record() const { return record_; }
  const std::vector<CandidateResult>& candidates() const { return candidates_; }

 protected:
  TuningRecord record_;
  bool from_record_ = false;
  std::vector<CandidateResult> candidates_;
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

// Which measured candidate select() keeps, given their medians `ms` (the default first when
// `first_is_default`): the fastest, unless it is not the default and its median is not at
// least `min_gain` times below the default's — then the default. Ties go to the earlier one.
inline std::size_t choose(const std::vector<double>& ms, bool first_is_default, double min_gain) {
  std::size_t best = 0;
  for (std::size_t n = 1; n < ms.size(); ++n)
    if (ms[n] < ms[best]) best = n;
  if (first_is_default && best != 0 && !(ms[best] * min_gain <= ms[0])) best = 0;
  return best;
}

// Timing rounds of a tuner's measurement (select below).
inline constexpr int kTimingRounds = 4;

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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


inline std::string machine_key() {
  runtime::Runtime& rt = runtime::default_runtime();
  return Hasher().add(rt.engine().identity()).digest().hex();
}


// The key of a tuning record for `kernel` on A (and K = feature), this thread count and machine.
template <class T, class Index>
TuningRecord record_key(const char* kernel, const Csr<T, Index>& a, std::int64_t feature) {
  TuningRecord rec;
  rec.kernel = kernel;
  rec.dtype = dtype_name(dtype_v<T>);
  rec.index = dtype_name(dtype_v<Index>);
  rec.rows = a.rows(), rec.cols = a.cols(), rec.nnz = a.nnz();
  rec.fingerprint = csr_fingerprint(a);
  rec.feature = feature;
  rec.threads = runtime::default_runtime().pool().num_threads();
  rec.machine = machine_key();
  return rec;
}

inline void check_options(const TuneOptions& opt, const char* what) {
  SPINDLE_CHECK(opt.min_reps >= 1 && opt.max_reps >= opt.min_reps && opt.max_measured >= 1 && opt.max_padding >= 1,
                UserError, what,
                ": TuneOptions need 1 <= min_reps <= max_reps, max_measured >= 1 and max_padding >= 1 (got ",
                opt.min_reps, ", ", opt.max_reps, ", ", opt.max_measured, ", ", opt.max_padding, ")");
}

// A candidate: its name, model cost and how to build it (a runner owning what it needs).
template <class Run>
struct Candidate {
  std::string name;
  double cost = 0, padding = 1;
  std::function<Run()> build;
};

template <class Run>
struct Selection {
  Run run;
  std::vector<CandidateResult> results;
  bool from_record = false;
};

// The search (see the top of the file). `what` names the tuner in messages ("tune_spmm");
// `title` heads the progress bar. `rec` is the record's key on entry, the decision on return
// (or the matching record found in opt.record_file, which is then not measured again).
// Candidates run as run(x, y) on a pseudo-random x in [-1, 1) of `x_shape` and a y of
// `y_shape` (NaN before each checked call).
template <class T, class Run>
Selection<Run> select(const std::vector<Candidate<Run>>& cands, const TuneOptions& opt, TuningRecord& rec,
                      const char* what, const std::string& title, const std::vector<std::int64_t>& x_shape,
                      const std::vector<std::int64_t>& y_shape) {
  Timer total;
  Selection<Run> out;
  const std::string shape = std::to_string(rec.rows) + "x" + std::to_string(rec.cols) + " matrix with " +
                            std::to_string(rec.nnz) + " nonzeros";
  const double base_cost = std::max(1e-300, cands.front().cost);
  auto allowed = [&](const std::string& n) {
    return opt.only.empty() || std::find(opt.only.begin(), opt.only.end(), n) != opt.only.end();
  };
  auto result_of = [&](const Candidate<Run>& c) {
    CandidateResult r;
    r.name = c.name;
    r.predicted = c.cost / base_cost;
    r.padding = c.padding;
    return r;
  };

  if (!opt.record_file.empty()) {
    if (auto found = find_record(opt.record_file, rec)) {
      auto it = std::find_if(cands.begin(), cands.end(), [&](const auto& c) { return c.name == found->choice; });
      SPINDLE_CHECK(it != cands.end(), CacheError, "tuning record file '", opt.record_file, "' chooses '",
                    found->choice, "' for this matrix, which is not a candidate of this Spindle's ", what,
                    "\n  hint: remove the line and tune again");
      if (allowed(it->name)) {
        Timer conv;
        out.run = it->build();
        auto r = result_of(*it);
        r.convert_ms = conv.seconds() * 1e3;
        for (const auto& [n, ms] : found->times_ms)
          if (n == it->name) r.ms = ms;
        out.results.push_back(r);
        rec = *found;
        out.from_record = true;
        return out;
      }
    }
  }

  // Prune by the model: the default always; then the cheapest predicted, within prune_above.
  std::vector<std::size_t> order;
  for (std::size_t i = 1; i < cands.size(); ++i) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return cands[x].cost < cands[y].cost; });
  std::vector<std::size_t> measure;
  if (allowed(cands[0].name)) measure.push_back(0);
  std::vector<CandidateResult> results(cands.size());
  for (std::size_t i = 0; i < cands.size(); ++i) results[i] = result_of(cands[i]);
  if (!allowed(cands[0].name)) results[0].why_not = "not allowed (TuneOptions::only)";
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
      std::snprintf(buf, sizeof buf, "pruned: model %.2fx the default's cost", r.predicted);
      r.why_not = buf;
    } else if (static_cast<int>(measure.size()) >= opt.max_measured)
      r.why_not = "pruned: max_measured candidates already chosen";
    else measure.push_back(i);
  }
  if (measure.empty()) {
    std::string names, wanted;
    if (!too_large.empty())
      throw UserError(message(what, ": every candidate named in TuneOptions::only is too large to build for this ",
                              shape, " (", too_large, "); raise TuneOptions::max_padding to build it anyway"));
    for (const auto& c : cands) names += (names.empty() ? "" : ", ") + c.name;
    for (const auto& n : opt.only) wanted += (wanted.empty() ? "'" : ", '") + n + "'";
    throw UserError(message(what, ": TuneOptions::only names ", wanted, ", none of which is a candidate for this ",
                            shape, " (candidates: ", names, ")"));
  }

  // Measure; the default's result (when measured) is the reference.
  auto elements = [](const std::vector<std::int64_t>& sh) {
    std::int64_t n = 1;
    for (auto d : sh) n *= d;
    return static_cast<std::size_t>(n);
  };
  std::vector<T> xs(elements(x_shape)), ys(elements(y_shape)), yref;
  detail::fill_pseudo_random(xs, 0x5eed);
  const TensorView<const T> x(xs.data(), x_shape);
  const TensorView<T> y(ys.data(), y_shape);
  // Build each candidate and check its result; then time them in interleaved rounds (below).
  const int rounds = std::min(detail::kTimingRounds, opt.max_reps);
  detail::ProgressBar bar(opt.progress, title, static_cast<int>(measure.size()) + rounds);
  bar.step(0, cands[measure.front()].name);
  std::vector<Run> runs;
  for (std::size_t n = 0; n < measure.size(); ++n) {
    const std::size_t i = measure[n];
    auto& r = results[i];
    Timer conv;
    runs.push_back(cands[i].build());
    const Run& run = runs.back();
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
      SPINDLE_CHECK(r.max_error <= tol, InternalError, what, ": candidate '", r.name, "' disagrees with '",
                    cands[0].name, "' (max relative difference ", r.max_error, " > ", tol,
                    "); this is a bug in Spindle, please report it");
    }
    bar.step(static_cast<int>(n + 1), r.name);
  }
  // Rounds: in each, every candidate (in an order that rotates) runs one untimed lead-in call
  // (its own data back in the caches; skipped for calls over 50 ms) and a batch of timed
  // calls, its share of min_seconds / min_reps / max_reps. Something else that loads the
  // machine for a while (another library's OpenMP workers spinning on the other core) then
  // slows every candidate a little instead of one candidate a lot: timed one after another,
  // pubmed's default SpMV measured 0.133 ms at 2 threads instead of 0.047 and lost.
  const auto ceil_share = [rounds](int total, int k) {
    return static_cast<int>((static_cast<std::int64_t>(total) * (k + 1) + rounds - 1) / rounds);
  };
  std::vector<std::vector<double>> times(measure.size());
  std::vector<double> last_ms(measure.size());
  for (std::size_t n = 0; n < measure.size(); ++n) last_ms[n] = results[measure[n]].first_call_ms;
  for (int k = 0; k < rounds; ++k) {
    const int min_calls = ceil_share(opt.min_reps, k), max_calls = ceil_share(opt.max_reps, k);
    for (std::size_t m = 0; m < measure.size(); ++m) {
      const std::size_t n = (m + static_cast<std::size_t>(k)) % measure.size();
      auto& ts = times[n];
      if (static_cast<int>(ts.size()) >= max_calls ||
          (static_cast<int>(ts.size()) >= min_calls && opt.min_seconds <= 0))
        continue;  // nothing to time in this round
      if (last_ms[n] < 50) runs[n](x, y);
      Timer span;
      while (static_cast<int>(ts.size()) < max_calls &&
             (static_cast<int>(ts.size()) < min_calls || span.seconds() < opt.min_seconds / rounds)) {
        Timer t;
        runs[n](x, y);
        ts.push_back(t.seconds() * 1e3);
        last_ms[n] = ts.back();
      }
    }
    bar.step(static_cast<int>(measure.size()) + k + 1, "round " + std::to_string(k + 1));
  }
  std::vector<double> ms(measure.size());
  for (std::size_t n = 0; n < measure.size(); ++n) {
    auto& r = results[measure[n]];
    r.ms = ms[n] = detail::median(times[n]);
    r.measured = true;
    rec.times_ms.emplace_back(r.name, r.ms);
  }
  const std::size_t chosen = detail::choose(ms, measure.front() == 0, opt.min_gain);
  const std::size_t best_i = measure[chosen];
  out.run = runs[chosen];
  rec.choice = cands[best_i].name;
  rec.tuning_s = total.seconds();
  out.results = std::move(results);
  if (!opt.record_file.empty()) append_record(opt.record_file, rec);
  return out;
}

// A table of the candidates (model, padding, conversion, first call, median) and the choice.
inline std::string report_candidates(const std::vector<CandidateResult>& cands, const std::string& choice,
                                     bool from_record) {
  std::string s;
  char buf[320];
  std::size_t width = 8;
  for (const auto& c : cands) width = std::max(width, c.name.size());
  const int w = static_cast<int>(width);
  for (const auto& c : cands) {
    if (c.measured)
      std::snprintf(buf, sizeof buf,
                    "  %-*s model %5.2f  padding %5.2f  convert %7.2f ms  first call %8.2f ms  median %8.3f ms%s\n", w,
                    c.name.c_str(), c.predicted, c.padding, c.convert_ms, c.first_call_ms, c.ms,
                    c.name == choice ? "  <- chosen" : "");
    else if (from_record)
      std::snprintf(buf, sizeof buf, "  %-*s model %5.2f  padding %5.2f  convert %7.2f ms  recorded median %8.3f ms\n",
                    w, c.name.c_str(), c.predicted, c.padding, c.convert_ms, c.ms);
    else
      std::snprintf(buf, sizeof buf, "  %-*s model %5.2f  padding %5.2f  %s\n", w, c.name.c_str(), c.predicted,
                    c.padding, c.why_not.c_str());
    s += buf;
  }
  return s;
}

}  // namespace detail

}  // namespace spindle::tune
