// Thread pool: every index exactly once for many (n, grain, threads) combinations, chunk
// sizes, serial cases, nesting, exceptions, and parallel_for called from generated C code
// through the ABI trampoline; the row sorter the pool's row-sorting steps use.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime_test_support.hpp"
#include "spindle/runtime/sort_rows.hpp"
#include "spindle/runtime/thread_pool.hpp"

using namespace spindle;
using namespace spindle::runtime;
using namespace spindle::runtime::test;

namespace {

// Runs parallel_for and checks that [0, n) is covered exactly once by chunks of at
// least `grain` iterations (the last one may be shorter).
void check_cover(ThreadPool& pool, std::int64_t n, std::int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
  // Catch assertions are not thread-safe: bodies only count, the caller checks.
  std::atomic<std::int64_t> short_chunks{0}, empty_chunks{0}, sum{0};
  pool.parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) {
    if (b >= e) empty_chunks.fetch_add(1);
    if (e - b < grain && e != n) short_chunks.fetch_add(1);
    std::int64_t local = 0;
    for (std::int64_t i = b; i < e; ++i) {
      hits[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      local += i;
    }
    sum.fetch_add(local);
  });
  INFO("n=" << n << " grain=" << grain << " threads=" << pool.num_threads());
  CHECK(short_chunks.load() == 0);
  CHECK(empty_chunks.load() == 0);
  CHECK(sum.load() == (n > 0 ? n * (n - 1) / 2 : 0));
  bool all_once = true;
  for (auto& h : hits) all_once = all_once && h.load() == 1;
  CHECK(all_once);
}

}  // namespace

TEST_CASE("thread pool covers every index once", "[runtime]") {
  ThreadPool pool(4);
  for (int threads : {1, 2, 3, 4}) {
    pool.set_num_threads(threads);
    CHECK(pool.num_threads() == threads);
    for (std::int64_t n : {0, 1, 2, 7, 64, 1000, 100003})
      for (std::int64_t grain : {-3, 0, 1, 3, 16, 999, 5000}) check_cover(pool, n, grain);
  }
}

TEST_CASE("thread pool spreads work over threads and grows on demand", "[runtime]") {
  ThreadPool pool(1);
  pool.set_num_threads(3);
  std::mutex m;
  std::set<std::thread::id> ids;
  pool.parallel_for(60, 1, [&](std::int64_t, std::int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  CHECK(ids.size() >= 2);

  pool.set_num_threads(1);
  ids.clear();
  pool.parallel_for(60, 1, [&](std::int64_t, std::int64_t) { ids.insert(std::this_thread::get_id()); });
  CHECK(ids == std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_CASE("each thread starts on its own share of the chunks, call after call", "[runtime]") {
  // 16 chunks of one index over 2 threads: the caller owns chunks 0-7, the worker 8-15.
  // Each takes its own share from the front (so the same rows land on the same core every
  // call); a thread that runs out steals from the back of the other share.
  ThreadPool pool(2);
  for (int call = 0; call < 3; ++call) {
    std::mutex m;
    std::vector<std::pair<std::thread::id, std::int64_t>> order;
    pool.parallel_for(16, 1, [&](std::int64_t b, std::int64_t e) {
      {
        std::lock_guard<std::mutex> lock(m);
        order.emplace_back(std::this_thread::get_id(), e == b + 1 ? b : -1);  // Catch is not thread-safe
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    });
    INFO("call " << call);
    REQUIRE(order.size() == 16);
    const auto caller = std::this_thread::get_id();
    std::vector<std::int64_t> by_caller, by_worker;
    for (auto& [id, b] : order) (id == caller ? by_caller : by_worker).push_back(b);
    // The caller runs 0, 1, 2, ... in order; stolen chunks come from the back of the
    // worker's share (15, 14, ...).
    REQUIRE(!by_caller.empty());
    std::size_t own = 0;
    while (own < by_caller.size() && by_caller[own] == static_cast<std::int64_t>(own)) ++own;
    CHECK(own >= 1);
    for (std::size_t k = own; k < by_caller.size(); ++k) CHECK(by_caller[k] == 15 - static_cast<std::int64_t>(k - own));
    // The worker (once awake: 24 ms of the caller's own share is ample) starts at chunk 8.
    if (!by_worker.empty()) {
      CHECK(by_worker.front() == 8);
    }
    std::set<std::int64_t> all;
    for (auto& entry : order) all.insert(entry.second);
    CHECK(all.size() == 16);
  }
}

TEST_CASE("nested parallel_for runs serially inside a body", "[runtime]") {
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(64 * 50);
  std::atomic<int> inner_calls{0}, outside_region{0}, split_inner{0};
  pool.parallel_for(64, 1, [&](std::int64_t b, std::int64_t e) {
    if (!ThreadPool::in_parallel_region()) outside_region.fetch_add(1);
    for (std::int64_t i = b; i < e; ++i) {
      pool.parallel_for(50, 1, [&](std::int64_t ib, std::int64_t ie) {
        inner_calls.fetch_add(1);
        if (ib != 0 || ie != 50) split_inner.fetch_add(1);
        for (std::int64_t j = ib; j < ie; ++j) hits[static_cast<std::size_t>(i * 50 + j)].fetch_add(1);
      });
    }
  });
  CHECK(inner_calls.load() == 64);
  CHECK(outside_region.load() == 0);
  CHECK(split_inner.load() == 0);
  CHECK(!ThreadPool::in_parallel_region());
  bool all_once = true;
  for (auto& h : hits) all_once = all_once && h.load() == 1;
  CHECK(all_once);
  CHECK_THROWS_AS(pool.parallel_for(4, 1, [&](std::int64_t, std::int64_t) { pool.set_num_threads(1); }), UserError);
}

TEST_CASE("an exception in a body reaches the caller and the pool stays usable", "[runtime]") {
  ThreadPool pool(2);
  CHECK_THROWS_WITH(pool.parallel_for(1000, 1,
                                      [&](std::int64_t b, std::int64_t e) {
                                        if (b <= 500 && 500 < e) throw std::runtime_error("body failed at 500");
                                      }),
                    Catch::Contains("body failed"));
  check_cover(pool, 10000, 7);
}

TEST_CASE("the ABI trampoline runs serially without a pool", "[runtime]") {
  std::vector<int> v(10, 0);
  auto body = [](void* c, std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) (*static_cast<std::vector<int>*>(c))[static_cast<std::size_t>(i)] = 1;
  };
  ThreadPool::abi_parallel_for(nullptr, 10, 3, body, &v);
  CHECK(v == std::vector<int>(10, 1));
}

TEST_CASE("generated C code calls parallel_for through the ABI", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  // Writes out[i] = i * i, counts chunks, checks chunk sizes, and nests a second
  // parallel_for inside the body (which must run serially).
  std::string src = std::string(codegen::kernel_abi_c_text) +
                    "typedef struct { long long* out; long long grain; long long n;\n"
                    "  long long chunks, bad, nested; const spindle_rt* rt; } sq_closure;\n"
                    "static void sq_inner(void* c, long long b, long long e) {\n"
                    "  __atomic_fetch_add(&((sq_closure*)c)->nested, e - b, __ATOMIC_RELAXED);\n"
                    "}\n"
                    "static void sq_body(void* c, long long b, long long e) {\n"
                    "  sq_closure* cl = (sq_closure*)c;\n"
                    "  __atomic_fetch_add(&cl->chunks, 1, __ATOMIC_RELAXED);\n"
                    "  if (e - b < cl->grain && e != cl->n) __atomic_fetch_add(&cl->bad, 1, __ATOMIC_RELAXED);\n"
                    "  for (long long i = b; i < e; ++i) cl->out[i] = i * i;\n"
                    "  cl->rt->parallel_for(cl->rt->pool, 3, 1, sq_inner, c);\n"
                    "}\n"
                    "int spindle_test_squares(void* const* buffers, const long long* scalars, const spindle_rt* rt) {\n"
                    "  sq_closure cl = { (long long*)buffers[0], scalars[1], scalars[0], 0, 0, 0, rt };\n"
                    "  rt->parallel_for(rt->pool, scalars[0], scalars[1], sq_body, &cl);\n"
                    "  ((long long*)buffers[1])[0] = cl.chunks;\n"
                    "  ((long long*)buffers[1])[1] = cl.bad;\n"
                    "  ((long long*)buffers[1])[2] = cl.nested;\n"
                    "  return 0;\n"
                    "}\n";
  CompileRequest req{src, "spindle_test_squares", "squares"};
  auto engine = make_test_engine(name);
  auto module = engine->load(engine->compile(req), req);
  auto entry = reinterpret_cast<codegen::KernelEntry>(module->entry());

  ThreadPool pool(2);
  codegen::KernelRuntimeAbi abi = pool.abi();
  for (int threads : {1, 2}) {
    pool.set_num_threads(threads);
    for (std::int64_t grain : {1, 13, 4096}) {
      const std::int64_t n = 50001;
      std::vector<long long> out(n, -1), counters(3, -1);
      void* buffers[2] = {out.data(), counters.data()};
      std::int64_t scalars[2] = {n, grain};
      REQUIRE(entry(buffers, scalars, &abi) == 0);
      INFO("threads " << threads << " grain " << grain);
      bool ok = true;
      for (std::int64_t i = 0; i < n; ++i) ok = ok && out[static_cast<std::size_t>(i)] == i * i;
      CHECK(ok);
      CHECK(counters[0] >= 1);
      CHECK(counters[1] == 0);
      CHECK(counters[2] == 3 * counters[0]);
    }
  }
}

// The row sorter of runtime/sort_rows.hpp (sort_rows; combine_segments of scattered rows,
// which folds the writes of one column in the order they were made, so the sorts must be
// stable): random rows of 0 .. 300 pairs with repeated columns, each value its position in
// the row; every row must come out ordered by column and, among equal columns, by value.
TEST_CASE("RowSorter: ranked and radix sorts order by column and keep equal columns in order", "[runtime]") {
  std::mt19937_64 rng(17);
  spindle::runtime::sort_rows_detail::RowSorter<std::int32_t, double> sorter;
  for (int trial = 0; trial < 400; ++trial) {
    const std::int64_t n = static_cast<std::int64_t>(rng() % 301);
    const std::int64_t span = 1 + static_cast<std::int64_t>(rng() % (trial % 2 ? 5000 : 40));  // few or many repeats
    const std::int32_t base = static_cast<std::int32_t>(rng() % 1000);
    std::vector<std::int32_t> x(static_cast<std::size_t>(n));
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t q = 0; q < n; ++q) {
      x[static_cast<std::size_t>(q)] = base + static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(span));
      v[static_cast<std::size_t>(q)] = static_cast<double>(q);
    }
    std::vector<std::pair<std::int32_t, double>> want;
    for (std::int64_t q = 0; q < n; ++q) want.emplace_back(x[static_cast<std::size_t>(q)], v[static_cast<std::size_t>(q)]);
    std::stable_sort(want.begin(), want.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const bool short_row = n <= 32 || trial % 3 == 0;  // ranked also past 32 now and then
    if (n > 0) {
      const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
      if (short_row) sorter.ranked(x.data(), v.data(), n);
      else if (*lo != *hi) sorter.radix(x.data(), v.data(), n, *lo, *hi);
    }
    INFO("trial " << trial << ", " << n << " pairs over " << span << " columns, " << (short_row ? "ranked" : "radix"));
    for (std::int64_t q = 0; q < n; ++q) {
      REQUIRE(x[static_cast<std::size_t>(q)] == want[static_cast<std::size_t>(q)].first);
      REQUIRE(v[static_cast<std::size_t>(q)] == want[static_cast<std::size_t>(q)].second);
    }
  }
}
