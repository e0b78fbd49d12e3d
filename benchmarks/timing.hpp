// Interleaved timing of several systems running the same case.
//
// Method (the same for every system, so that none is favoured by cache state or by the
// background load of a shared machine):
//   1. warm-up: each system runs `warmup` untimed calls; one more timed call gives an
//      estimate of its call time;
//   2. rounds: in every round each system that still needs samples first waits
//      kQuiesceSeconds with the calling thread asleep, then runs one untimed lead-in call
//      and a batch of individually timed calls (a batch lasts about kBatchSeconds; at
//      least one call). The order of the systems rotates from round to round. The pause
//      lets the previous system's worker threads go to sleep: libgomp workers (Eigen,
//      GraphBLAS) spin about 4 ms after every parallel region and the Spindle pool's
//      50 us, and on a machine with as many cores as threads a spinning worker of one
//      system would take a core from the next one. The lead-in call puts the system's own
//      data back in the caches, so every timed call starts from the same state: "right
//      after a call of itself". Calls estimated above kLeadInBelow (50 ms) skip the lead-in:
//      their working set is far larger than the caches and the pause has already let the
//      other system's threads go idle;
//   3. a system is done after `reps` timed calls (fixed mode) or, adaptively, once it has
//      at least min_reps calls and min_time seconds of timed calls (max_reps caps it).
// The statistics are the median (reported as the time) and the minimum of the timed calls.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace bench {

// Operators whose result is a sparse matrix the call assembles (no K): C = A A, A + B, A .* B.
// (transpose: C = Aᵀ as a CSR, the conversion CSR -> CSC; prune: the entries of A with
// |a| > 0.5, A's values drawn in [-1, 1]; dense2csr: the nonzeros of A held as a dense matrix;
// coo2csr: A rebuilt from its entries as triplets in a random order.)
inline bool sparse_result_op(const std::string& op) {
  return op == "spgemm" || op == "spadd" || op == "spmul" || op == "transpose" || op == "prune" || op == "dense2csr" ||
         op == "coo2csr";
}

// y = A x, under the default schedule (spmv) or the one tune_spmv picks (tuned_spmv).
inline bool spmv_op(const std::string& op) { return op == "spmv" || op == "tuned_spmv"; }

struct TimingPolicy {
  int warmup = 2;
  int reps = 0;  // > 0: fixed number of timed calls
  int min_reps = 10;
  int max_reps = 100000;
  double min_time = 0.2;
};

struct Samples {
  std::vector<double> seconds;
  double total() const {
    double s = 0;
    for (double x : seconds) s += x;
    return s;
  }
  double median() const {
    if (seconds.empty()) return NAN;
    std::vector<double> v = seconds;
    const std::size_t h = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + h, v.end());
    if (v.size() % 2) return v[h];
    return 0.5 * (v[h] + *std::max_element(v.begin(), v.begin() + h));
  }
  double min() const { return seconds.empty() ? NAN : *std::min_element(seconds.begin(), seconds.end()); }
};

struct Contender {
  std::string name;
  std::function<void()> run;
  Samples samples;
};

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double time_call(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The pause before each system's batch (see the top of this file); also before a tuner times
// its candidates.
inline constexpr auto kQuiesceSeconds = std::chrono::milliseconds(8);

inline void measure_interleaved(std::vector<Contender*> cs, const TimingPolicy& p) {
  constexpr double kBatchSeconds = 0.02;
  constexpr double kLeadInBelow = 0.05;  // calls slower than this get no lead-in call
  const std::size_t n = cs.size();
  std::vector<int> batch(n, 1);
  std::vector<double> est(n);
  for (std::size_t s = 0; s < n; ++s) {
    for (int w = 0; w < p.warmup; ++w) cs[s]->run();
    est[s] = std::max(time_call(cs[s]->run), 1e-7);
    batch[s] = static_cast<int>(std::clamp(std::ceil(kBatchSeconds / est[s]), 1.0, 10000.0));
  }
  auto done = [&](std::size_t s) {
    const Samples& x = cs[s]->samples;
    const int count = static_cast<int>(x.seconds.size());
    if (p.reps > 0) return count >= p.reps;
    return count >= p.max_reps || (count >= p.min_reps && x.total() >= p.min_time);
  };
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t q = 0; q < n; ++q) {
      const std::size_t s = (round + q) % n;
      if (done(s)) continue;
      any = true;
      Contender& c = *cs[s];
      int count = batch[s];
      if (p.reps > 0) count = std::min(count, p.reps - static_cast<int>(c.samples.seconds.size()));
      if (n > 1) std::this_thread::sleep_for(kQuiesceSeconds);
      if (est[s] < kLeadInBelow) c.run();  // lead-in, untimed
      for (int b = 0; b < count; ++b) c.samples.seconds.push_back(time_call(c.run));
    }
    if (!any) break;
  }
}

}  // namespace bench
