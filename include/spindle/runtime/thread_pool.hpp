// A persistent fork-join pool for the parallel loops of generated kernels.
//
// parallel_for(n, grain, body, closure) runs body over [0, n) on the calling thread plus
// num_threads() - 1 workers. The range is cut into chunks of at least `grain` iterations
// (and at least n / (threads * kChunksPerThread), which bounds the hand-out cost). Each
// participant owns a contiguous share of the chunks (the caller the first, worker w the
// (w+2)-th) and takes them from the front; one that runs out steals from the back of the
// others' shares, so a thread that drew cheap rows of a skewed graph simply takes more
// chunks. Owning the same rows call after call keeps a thread's share of the operands in
// its core's cache (an SpMV on a graph whose matrix fits in two L2 caches but not one runs
// from L2 on both cores instead of from L3).
//
//   * A call from inside a body (nested parallelism), with one thread, or with a single
//     chunk runs body(closure, 0, n) serially on the calling thread.
//   * Calls from different outside threads are serialised (one job at a time).
//   * Idle workers spin for kSpinTime, so back-to-back calls of small kernels stay cheap,
//     then sleep on a futex (std::atomic::wait); an idle pool burns no CPU. The caller
//     never waits for a worker that has not joined yet: once it has handed out the last
//     chunk it closes the job and waits only for the workers inside.
//   * An exception thrown by a body stops the hand-out and is rethrown by parallel_for.
//     abi_parallel_for, which generated C code calls, must not throw: it terminates.
//   * set_num_threads(k) applies to later calls; workers are started on demand. It must
//     not be called from inside a body. A pool must not be used in a child after fork().
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/support/error.hpp"

namespace spindle::runtime {

class ThreadPool {
 public:
  using ParallelBody = codegen::ParallelBody;
  static constexpr std::int64_t kChunksPerThread = 16;
  // How long an idle worker (or a caller waiting for workers) spins before sleeping.
  static constexpr std::chrono::microseconds kSpinTime{50};

  // num_threads <= 0: std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads = 0) { set_num_threads(num_threads); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  ~ThreadPool() {
    stop_.store(true, std::memory_order_relaxed);
    for (auto& w : workers_) {
      w->epoch.fetch_add(1, std::memory_order_release);
      w->epoch.notify_one();
    }
    for (auto& w : workers_) w->thread.join();
  }

  int num_threads() const { return threads_.load(std::memory_order_relaxed); }

  void set_num_threads(int k) {
    SPINDLE_CHECK(!in_parallel_region(), UserError,
                  "ThreadPool::set_num_threads called from inside a parallel_for body",
                  "\n  hint: set the thread count between kernel calls");
    if (k <= 0) k = static_cast<int>(std::thread::hardware_concurrency());
    k = std::max(k, 1);
    std::lock_guard<std::mutex> lock(call_mutex_);
    // No job runs (call_mutex_ is held), so no worker reads the shares now.
    while (static_cast<int>(shares_.size()) < k) shares_.push_back(std::make_unique<Share>());
    while (static_cast<int>(workers_.size()) < k - 1) {
      auto w = std::make_unique<Worker>();
      Worker* raw = w.get();
      int participant = static_cast<int>(workers_.size()) + 1;
      w->thread = std::thread([this, raw, participant] { worker_loop(*raw, participant); });
      workers_.push_back(std::move(w));
    }
    threads_.store(k, std::memory_order_relaxed);
  }

  void parallel_for(std::int64_t n, std::int64_t grain, ParallelBody body, void* closure) {
    if (n <= 0) return;
    grain = std::max<std::int64_t>(grain, 1);
    int threads = num_threads();
    if (tls_in_region() || threads == 1 || n <= grain) {
      RegionScope scope;
      body(closure, 0, n);
      return;
    }
    std::unique_lock<std::mutex> lock(call_mutex_);
    threads = std::min<int>(threads, static_cast<int>(workers_.size()) + 1);
    std::int64_t min_chunk = (n + threads * kChunksPerThread - 1) / (threads * kChunksPerThread);
    chunk_ = std::max(grain, min_chunk);
    chunks_ = (n + chunk_ - 1) / chunk_;
    n_ = n;
    body_ = body;
    closure_ = closure;
    error_ = nullptr;
    participants_ = threads;
    for (int p = 0; p < threads; ++p) {
      std::int64_t begin = chunks_ * p / threads, end = chunks_ * (p + 1) / threads;
      shares_[static_cast<std::size_t>(p)]->range.store(pack(begin, end), std::memory_order_relaxed);
    }
    job_.store(kJobOpen, std::memory_order_release);  // publishes the fields above
    int helpers = static_cast<int>(std::min<std::int64_t>(threads - 1, chunks_ - 1));
    for (int i = 0; i < helpers; ++i) {
      workers_[i]->epoch.fetch_add(1, std::memory_order_release);
      workers_[i]->epoch.notify_one();
    }
    {
      RegionScope scope;
      run_chunks(0);
    }
    // Every chunk is taken. Close the job so that late workers stay out, then wait only
    // for the workers that joined (a worker still waking up costs the caller nothing).
    if (job_.fetch_and(~kJobOpen, std::memory_order_acq_rel) != kJobOpen) wait_for_helpers();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

  // For C++ callers: f(begin, end).
  template <class F>
  void parallel_for(std::int64_t n, std::int64_t grain, F&& f) {
    using Fn = std::remove_reference_t<F>;
    auto call = [](void* closure, std::int64_t b, std::int64_t e) { (*static_cast<Fn*>(closure))(b, e); };
    parallel_for(n, grain, +call, const_cast<void*>(static_cast<const void*>(&f)));
  }

  // KernelRuntimeAbi::parallel_for: `pool` is a ThreadPool*, null runs serially.
  static void abi_parallel_for(void* pool, std::int64_t n, std::int64_t grain, ParallelBody body,
                               void* closure) noexcept {
    if (pool == nullptr) {
      if (n > 0) body(closure, 0, n);
      return;
    }
    static_cast<ThreadPool*>(pool)->parallel_for(n, grain, body, closure);
  }

  codegen::KernelRuntimeAbi abi() { return codegen::KernelRuntimeAbi{&ThreadPool::abi_parallel_for, this}; }

  // True on a thread that is running a parallel_for body (of any pool).
  static bool in_parallel_region() { return tls_in_region(); }

 private:
  struct alignas(64) Worker {
    std::atomic<std::uint32_t> epoch{0};
    std::thread thread;
  };

  // A participant's remaining chunks [begin, end), packed in one word: the owner takes
  // `begin`, a thief takes `end - 1`, both by compare-and-swap.
  struct alignas(64) Share {
    std::atomic<std::uint64_t> range{0};
  };
  static std::uint64_t pack(std::int64_t begin, std::int64_t end) {
    return (static_cast<std::uint64_t>(begin) << 32) | static_cast<std::uint64_t>(end);
  }
  static std::int64_t range_begin(std::uint64_t r) { return static_cast<std::int64_t>(r >> 32); }
  static std::int64_t range_end(std::uint64_t r) { return static_cast<std::int64_t>(r & 0xffffffffu); }

  // Takes the next chunk of participant p's share: its front for the owner, its back for
  // a thief. -1 when the share is empty.
  std::int64_t take(int p, bool owner) {
    auto& range = shares_[static_cast<std::size_t>(p)]->range;
    std::uint64_t r = range.load(std::memory_order_relaxed);
    for (;;) {
      std::int64_t begin = range_begin(r), end = range_end(r);
      if (begin >= end) return -1;
      std::uint64_t next = owner ? pack(begin + 1, end) : pack(begin, end - 1);
      if (range.compare_exchange_weak(r, next, std::memory_order_relaxed, std::memory_order_relaxed))
        return owner ? begin : end - 1;
    }
  }

  struct RegionScope {
    bool saved = tls_in_region();
    RegionScope() { tls_in_region() = true; }
    ~RegionScope() { tls_in_region() = saved; }
  };

  static bool& tls_in_region() {
    static thread_local bool in_region = false;
    return in_region;
  }

  static void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  // Runs participant `self`'s own chunks, then steals from the back of the others' shares
  // (first the share before its own, whose back borders its front), until every share is
  // empty. A worker left over from a larger thread count (self >= participants_) only steals.
  void run_chunks(int self) {
    const int parts = participants_;
    for (int k = 0; k < parts; ++k) {
      int p = (self % parts + parts - k) % parts;
      bool owner = k == 0 && self < parts;
      for (std::int64_t c; (c = take(p, owner)) >= 0;) run_chunk(c);
    }
  }

  void run_chunk(std::int64_t c) {
    std::int64_t begin = c * chunk_;
    try {
      body_(closure_, begin, std::min(n_, begin + chunk_));
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_) error_ = std::current_exception();
      for (int p = 0; p < participants_; ++p)
        shares_[static_cast<std::size_t>(p)]->range.store(0, std::memory_order_relaxed);
    }
  }

  // Spins until done() or kSpinTime has passed; the clock is read every 64 pauses.
  template <class Done>
  static bool spin_until(Done done) {
    auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (;;) {
      for (int i = 0; i < 64; ++i) {
        if (done()) return true;
        cpu_relax();
      }
      if (std::chrono::steady_clock::now() >= deadline) return false;
    }
  }

  void wait_for_helpers() {
    if (spin_until([&] { return job_.load(std::memory_order_acquire) == 0; })) return;
    for (std::uint32_t j; (j = job_.load(std::memory_order_acquire)) != 0;) job_.wait(j, std::memory_order_acquire);
  }

  // Joins the current job if it is still open; false when it is closed (or none).
  bool try_join() {
    std::uint32_t j = job_.load(std::memory_order_acquire);
    while (j & kJobOpen)
      if (job_.compare_exchange_weak(j, j + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return true;
    return false;
  }

  void worker_loop(Worker& self, int participant) {
    tls_in_region() = true;  // anything a body starts from a worker runs serially
    std::uint32_t seen = 0;
    for (;;) {
      std::uint32_t e = seen;
      spin_until([&] { return self.epoch.load(std::memory_order_acquire) != seen; });
      while ((e = self.epoch.load(std::memory_order_acquire)) == seen) self.epoch.wait(seen, std::memory_order_acquire);
      seen = e;
      if (stop_.load(std::memory_order_relaxed)) return;
      if (!try_join()) continue;
      run_chunks(participant);
      if (job_.fetch_sub(1, std::memory_order_acq_rel) == 1) job_.notify_one();  // closed, last out
    }
  }

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<int> threads_{1};
  std::atomic<bool> stop_{false};
  std::mutex call_mutex_;  // one job at a time; guards workers_ growth

  // The current job; written under call_mutex_ before the workers' epochs are bumped.
  ParallelBody body_ = nullptr;
  void* closure_ = nullptr;
  std::int64_t n_ = 0, chunk_ = 1, chunks_ = 0;
  int participants_ = 1;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::vector<std::unique_ptr<Share>> shares_;  // one per participant, grown with the thread count
  // kJobOpen while the caller still hands out chunks, plus the number of workers inside
  // the job. The caller returns once it has closed the job and the count is zero.
  static constexpr std::uint32_t kJobOpen = 1u << 31;
  alignas(64) std::atomic<std::uint32_t> job_{0};
};

}  // namespace spindle::runtime
