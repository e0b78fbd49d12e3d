// cache_read: staging SpMM's row of nonzeros (J_indices and a) in shared memory, copied by
// the threads of the feature loop (the GE-SpMM schedule), slots per threadIdx.y row, warp
// and block barriers, tiles other than the thread count, guards pushed below the
// barriers, and preconditions. GPU only: checked on the IR (printed form and verify) and
// run in the CPU emulator of CUDA against the unscheduled kernel.
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_emulate_util.hpp"

using namespace sched_test;

namespace {

// SpMM: 4 rows per block on threadIdx.y, 32 features on threadIdx.x, register accumulation.
ir::Function ge_spmm_base() {
  auto r = sch::reorder(spmm(), {"k", "j"});
  r = sch::split(sch::split(r, "i", 4), "k", 32);
  r = sch::bind(r, "i_o", ir::ForKind::gpu_block_x);
  r = sch::bind(r, "i_i", ir::ForKind::gpu_thread_y);
  r = sch::bind(r, "k_i", ir::ForKind::gpu_thread_x);
  return sch::cache_write(r, "k_i", "c");
}

// One row per block (no threadIdx.y loop), no register accumulation.
ir::Function row_per_block() {
  auto r = sch::split(sch::reorder(spmm(), {"k", "j"}), "k", 32);
  return sch::bind(sch::bind(r, "i", ir::ForKind::gpu_block_x), "k_i", ir::ForKind::gpu_thread_x);
}

}  // namespace

TEST_CASE("cache_read: GE-SpMM stages a row's indices and values per warp", "[schedule][cache_read]") {
  auto g = sch::cache_read(ge_spmm_base(), "j", {"J_indices", "a"}, 32, "k_i");
  CHECK_NOTHROW(ir::verify(g, "cache_read"));
  CHECK(body(g) == R"(  block spmm:
    for i_o in [0, (I_len + 3) / 4) blockIdx.x:  # axis I
      for i_i in [0, 4) threadIdx.y:  # axis I
        if i_o * 4 + i_i < I_len:
          for k_o in [0, (K_len + 31) / 32):  # axis K
            for k_i in [0, 32) threadIdx.x:  # axis K
              block c_cache:
                alloc c_local: local f32[]
                if k_o * 32 + k_i < K_len:
                  c_local = 0.0f
                block j_shared:
                  alloc J_indices_shared: shared i32[4, 32]
                  alloc a_shared: shared f32[4, 32]
                  for j_o in [0, (J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i] + 31) / 32) reduction:  # axis J
                    if j_o * 32 + k_i < J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i]:
                      J_indices_shared[i_i, k_i] = J_indices[J_indptr[i_o * 4 + i_i] + j_o * 32 + k_i]
                      a_shared[i_i, k_i] = a[J_indptr[i_o * 4 + i_i] + j_o * 32 + k_i]
                    sync_warp
                    if k_o * 32 + k_i < K_len:
                      for j_i in [0, min(32, J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i] - j_o * 32)) reduction:  # axis J
                        c_local += a_shared[i_i, j_i] * b[i64(J_indices_shared[i_i, j_i]), k_o * 32 + k_i]
                    sync_warp
                if k_o * 32 + k_i < K_len:
                  c[i_o * 4 + i_i, k_o * 32 + k_i] = c_local
)");
  // Staging one buffer at a time gives the same copies as the list (here for `a` alone).
  auto one = body(sch::cache_read(ge_spmm_base(), "j", "a", 32, "k_i"));
  CHECK(one.find("alloc a_shared: shared f32[4, 32]") != std::string::npos);
  CHECK(one.find("J_indices_shared") == std::string::npos);
  CHECK(one.find("c_local += a_shared[i_i, j_i] * b[i64(J_indices[J_indptr[i_o * 4 + i_i] + (j_o * 32 + j_i)]), k_o * 32 + k_i]") !=
        std::string::npos);
}

TEST_CASE("cache_read: tiles larger and smaller than the thread loop", "[schedule][cache_read]") {
  // 64 elements, 32 threads: two copy rounds.
  auto big = body(sch::cache_read(ge_spmm_base(), "j", "a", 64, "k_i"));
  CHECK(big.find(R"(                  alloc a_shared: shared f32[4, 64]
                  for j_o in [0, (J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i] + 63) / 64) reduction:  # axis J
                    for j_copy in [0, 2):  # axis J
                      if j_o * 64 + (j_copy * 32 + k_i) < J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i]:
                        a_shared[i_i, j_copy * 32 + k_i] = a[J_indptr[i_o * 4 + i_i] + j_o * 64 + (j_copy * 32 + k_i)]
                    sync_warp
)") != std::string::npos);
  CHECK(big.find("for j_i in [0, min(64, J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i] - j_o * 64)) reduction:") !=
        std::string::npos);
  // 16 elements: half of the threads copy.
  auto small = body(sch::cache_read(ge_spmm_base(), "j", "a", 16, "k_i"));
  CHECK(small.find("if k_i < 16 && j_o * 16 + k_i < J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o * 4 + i_i]:\n"
                   "                      a_shared[i_i, k_i] = a[J_indptr[i_o * 4 + i_i] + j_o * 16 + k_i]") !=
        std::string::npos);
}

TEST_CASE("cache_read: one row per block with block barriers", "[schedule][cache_read]") {
  auto g = sch::cache_read(row_per_block(), "j", {"a", "J_indices"}, 32, "k_i", ir::BarrierScope::block);
  CHECK_NOTHROW(ir::verify(g, "cache_read"));
  CHECK(body(g) == R"(  block spmm:
    for i in [0, I_len) blockIdx.x:  # axis I
      for k_o in [0, (K_len + 31) / 32):  # axis K
        for k_i in [0, 32) threadIdx.x:  # axis K
          if k_o * 32 + k_i < K_len:
            c[i, k_o * 32 + k_i] = 0.0f
          block j_shared:
            alloc a_shared: shared f32[32]
            alloc J_indices_shared: shared i32[32]
            for j_o in [0, (J_indptr[i + 1] - J_indptr[i] + 31) / 32) reduction:  # axis J
              if j_o * 32 + k_i < J_indptr[i + 1] - J_indptr[i]:
                a_shared[k_i] = a[J_indptr[i] + j_o * 32 + k_i]
                J_indices_shared[k_i] = J_indices[J_indptr[i] + j_o * 32 + k_i]
              sync_threads
              if k_o * 32 + k_i < K_len:
                for j_i in [0, min(32, J_indptr[i + 1] - J_indptr[i] - j_o * 32)) reduction:  # axis J
                  c[i, k_o * 32 + k_i] += a_shared[j_i] * b[i64(J_indices_shared[j_i]), k_o * 32 + k_i]
              sync_threads
)");
  // A warp barrier suits one warp of 32 or fewer threads too.
  auto w = body(sch::cache_read(row_per_block(), "j", "a", 32, "k_i"));
  CHECK(w.find("sync_warp") != std::string::npos);
}

TEST_CASE("cache_read: preconditions", "[schedule][cache_read]") {
  auto base = ge_spmm_base();
  // Rows of threadIdx.y differ in their guard and their number of nonzeros: no block barrier.
  CHECK_THROWS_WITH(sch::cache_read(base, "j", "a", 32, "k_i", ir::BarrierScope::block),
                    Catch::Contains("cache_read: the range of loop 'j' ([0, +J_indptr[i_o * 4 + i_i + 1] - J_indptr[i_o "
                                    "* 4 + i_i])) differs between threads that meet at a block barrier") &&
                        Catch::Contains("or use BarrierScope::warp"));
  {
    // Rows with a uniform range but their own guard.
    ir::Var m("M", DType::i64), yv("y", DType::i64), t("t", DType::i64), j("j", DType::i64);
    auto x = buffer("x", {c64(8)});
    auto out = buffer("out", {c64(4), c64(32)}, DType::f32, ir::BufferRole::output);
    ir::Stmt rows = loop(yv, c64(0), c64(4),
                         ir::if_then_else(yv < m, loop(t, c64(0), c64(32),
                                                       loop(j, c64(0), c64(8), ir::reduce(out, {yv, t}, ir::ReduceOp::add, ir::load(x, {j})),
                                                            ir::IterKind::reduction),
                                                       ir::IterKind::spatial, "T", ir::ForKind::gpu_thread_x)),
                         ir::IterKind::spatial, "Y", ir::ForKind::gpu_thread_y);
    CHECK_THROWS_WITH(sch::cache_read(rows, "j", "x", 8, "t", ir::BarrierScope::block),
                      Catch::Contains("cache_read: the guard 'y < M' around loop 'j' differs between threads of the "
                                      "block") &&
                          Catch::Contains("hint: use BarrierScope::warp"));
    CHECK(str(sch::cache_read(rows, "j", "x", 8, "t")) == R"(for y in [0, 4) threadIdx.y:  # axis Y
  if y < M:
    for t in [0, 32) threadIdx.x:  # axis T
      block j_shared:
        alloc x_shared: shared f32[4, 8]
        for j_o in [0, 1) reduction:  # axis j
          if t < 8:
            x_shared[y, t] = x[j_o * 8 + t]
          sync_warp
          for j_i in [0, 8) reduction:  # axis j
            out[y, t] += x_shared[y, j_i]
          sync_warp
)");
  }
  {
    auto s2 = base;
    s2.stage = ir::Stage::position;
    CHECK_THROWS_WITH(sch::cache_read(s2, "j", "a", 32, "k_i"),
                      Catch::Contains("cache_read: kernel 'spmm' is at stage II (position space)"));
  }
  CHECK_THROWS_WITH(sch::cache_read(base, "j", "a", 0, "k_i"), Catch::Contains("cache_read: the tile of loop 'j' must be at least 1"));
  CHECK_THROWS_WITH(sch::cache_read(base, "j", std::vector<std::string>{}, 32, "k_i"),
                    Catch::Contains("cache_read: no buffer named for loop 'j'"));
  CHECK_THROWS_WITH(sch::cache_read(base, "j", "a", 32, "k_o"),
                    Catch::Contains("cache_read: thread loop 'k_o' is serial, not threadIdx.x") &&
                        Catch::Contains("bind(body, \"k_o\", ForKind::gpu_thread_x) first"));
  CHECK_THROWS_WITH(sch::cache_read(base, "j", "c", 32, "k_i"),
                    Catch::Contains("cache_read: loop 'j' does not read 'c' (reads there: J_indices, J_indptr, a, b)"));
  // b is read at [i64(J_indices[...]), k]: not a range walked by j.
  CHECK_THROWS_WITH(sch::cache_read(base, "j", "b", 32, "k_i"),
                    Catch::Contains("cache_read: loop 'j' reads 'b' at [i64(J_indices[J_indptr[i_o * 4 + i_i] + j]), k_o * 32 + "
                                    "k_i], not at [..., e + j]"));
  CHECK_THROWS_WITH(sch::cache_read(base, "j", {"a", "a"}, 32, "k_i"), Catch::Contains("cache_read: buffer 'a' is named twice"));
  CHECK_THROWS_WITH(sch::cache_read(base, "k_o", "c", 32, "k_i"),
                    Catch::Contains("cache_read: loop 'k_o' is not inside thread loop 'k_i'"));
  // A warp barrier with 64 threads in x.
  auto wide = sch::bind(sch::split(sch::reorder(spmm(), {"k", "j"}), "k", 64), "k_i", ir::ForKind::gpu_thread_x);
  CHECK_THROWS_WITH(sch::cache_read(wide, "j", "a", 64, "k_i"),
                    Catch::Contains("cache_read: a warp barrier needs the threads that share a tile to be one warp, but "
                                    "thread loop 'k_i' has 64 threads"));
  CHECK_NOTHROW(sch::cache_read(wide, "j", "a", 64, "k_i", ir::BarrierScope::block));
  // A thread loop of symbolic extent.
  auto sym = sch::bind(sch::reorder(spmm(), {"k", "j"}), "k", ir::ForKind::gpu_thread_x);
  CHECK_THROWS_WITH(sch::cache_read(sym, "j", "a", 32, "k"),
                    Catch::Contains("cache_read: thread loop 'k' has extent K_len, not a positive constant"));
  // The staged loop's range must not differ between the threads of the x loop.
  ir::Var n("N", DType::i64), t("t", DType::i64), j("j", DType::i64);
  auto x = buffer("x", {n});
  auto y = buffer("y", {c64(32)}, DType::f32, ir::BufferRole::output);
  ir::Stmt ragged = loop(t, c64(0), c64(32), loop(j, c64(0), t, ir::reduce(y, {t}, ir::ReduceOp::add, ir::load(x, {j})),
                                                  ir::IterKind::reduction),
                         ir::IterKind::spatial, "T", ir::ForKind::gpu_thread_x);
  CHECK_THROWS_WITH(sch::cache_read(ragged, "j", "x", 32, "t"),
                    Catch::Contains("cache_read: the range of loop 'j' ([0, +t)) differs between threads that share a tile"));
  {
    // A staged loop inside a co-iteration (a union of two fibers) under the thread loop: the
    // merge's trip count is data-dependent, so the threads would not meet at the barriers in
    // step. A UserError naming the co-iteration (was an InternalError from the rewrite).
    ir::Var u("u", DType::i64), p0("p0", DType::i64), p1("p1", DType::i64);
    ir::Var h0("h0", DType::boolean), h1("h1", DType::boolean);
    auto k0 = buffer("k0", {c64(4)}, DType::i64), k1 = buffer("k1", {c64(4)}, DType::i64);
    std::vector<ir::CoIterOperand> ops{{p0, h0, c64(4), ir::load(k0, {p0})}, {p1, h1, c64(4), ir::load(k1, {p1})}};
    ir::Stmt merged = loop(t, c64(0), c64(32),
                           ir::co_iterate(u, ir::MergeOp::union_, ops, ir::IterKind::reduction, "U",
                                          loop(j, c64(0), c64(8),
                                               ir::reduce(y, {t}, ir::ReduceOp::add, ir::load(x, {u * c64(8) + j})),
                                               ir::IterKind::reduction)),
                           ir::IterKind::spatial, "T", ir::ForKind::gpu_thread_x);
    CHECK_THROWS_AS(sch::cache_read(merged, "j", "x", 8, "t"), spindle::UserError);
    CHECK_THROWS_WITH(sch::cache_read(merged, "j", "x", 8, "t"),
                      Catch::Contains("cache_read: loop 'j' is inside the co-iteration 'u' (axis U)") &&
                          Catch::Contains("hint: stage reads of a loop outside the co-iteration"));
  }
  // Reads at an offset that depends on the thread.
  ir::Stmt own = loop(t, c64(0), c64(32), loop(j, c64(0), c64(8), ir::reduce(y, {t}, ir::ReduceOp::add, ir::load(x, {t * c64(8) + j})),
                                               ir::IterKind::reduction),
                      ir::IterKind::spatial, "T", ir::ForKind::gpu_thread_x);
  CHECK_THROWS_WITH(sch::cache_read(own, "j", "x", 8, "t"),
                    Catch::Contains("cache_read: the reads of 'x' in loop 'j' start at an offset that differs between the "
                                    "threads of thread loop 't'"));
}

TEST_CASE("cache_read: the staged schedules compute SpMM in the CUDA emulator", "[schedule][cache_read][emulated]") {
  auto ref = spmm();
  auto base = ge_spmm_base();
  CHECK(compare_emulated(ref, sch::cache_read(base, "j", {"J_indices", "a"}, 32, "k_i"), gpu_sizes()) < 1e-5);
  CHECK(compare_emulated(ref, sch::cache_read(base, "j", {"J_indices", "a"}, 64, "k_i"), gpu_sizes()) < 1e-5);
  CHECK(compare_emulated(ref, sch::cache_read(base, "j", "a", 16, "k_i"), gpu_sizes()) < 1e-5);
  CHECK(compare_emulated(ref, sch::cache_read(row_per_block(), "j", {"a", "J_indices"}, 32, "k_i", ir::BarrierScope::block),
                         gpu_sizes()) < 1e-5);
  // Control: without the barrier between the copy and its use, threads read tiles that
  // the others have not written yet, and the emulator shows it.
  struct DropFirstBarrier : ir::IRMutator {
    int seen = 0;
    ir::Stmt mutate_Barrier(const ir::BarrierNode*, const ir::Stmt& self) override {
      return seen++ % 2 == 0 ? ir::Stmt() : self;
    }
  } drop;
  auto racy = sch::cache_read(base, "j", {"J_indices", "a"}, 32, "k_i");
  racy.body = drop.mutate(racy.body);
  CHECK(compare_emulated(ref, racy, gpu_sizes()) > 1.0);
  // 64 threads in x with block barriers, tiles of 48 (two copy rounds, the second partial).
  auto wide = sch::bind(sch::bind(sch::split(sch::reorder(spmm(), {"k", "j"}), "k", 64), "k_i", ir::ForKind::gpu_thread_x),
                        "i", ir::ForKind::gpu_block_x);
  CHECK(compare_emulated(ref, sch::cache_read(wide, "j", {"J_indices", "a"}, 48, "k_i", ir::BarrierScope::block),
                         gpu_sizes()) < 1e-5);
}
