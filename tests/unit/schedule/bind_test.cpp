// bind / unroll / vectorize by loop name: printed kinds, the reduction check (and its way
// out through atomic_writeback), nesting checks, and C runs of unrolled, vectorized and
// parallel loops against the unscheduled kernel.
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_exec_util.hpp"

using namespace sched_test;

namespace {
// SpMM with one loop over k, split into tiles of 4.
ir::Function spmm_tiled() { return sch::split(sch::reorder(spmm(), {"k", "j"}), "k", 4); }
}  // namespace

TEST_CASE("bind: GPU indices and the CPU pool by loop name", "[schedule][bind]") {
  auto f = spmm_tiled();
  auto g = sch::bind(sch::bind(sch::bind(f, "i", ir::ForKind::gpu_block_x), "k_i", ir::ForKind::gpu_thread_x), "k_o",
                     ir::ForKind::gpu_block_y);
  CHECK(body(g) == R"(  block spmm:
    for i in [0, I_len) blockIdx.x:  # axis I
      for k_o in [0, (K_len + 3) / 4) blockIdx.y:  # axis K
        for k_i in [0, 4) threadIdx.x:  # axis K
          if k_o * 4 + k_i < K_len:
            c[i, k_o * 4 + k_i] = 0.0f
            for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
              c[i, k_o * 4 + k_i] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_o * 4 + k_i]
)");
  // serial undoes a binding.
  CHECK(body(sch::bind(g, "k_o", ir::ForKind::serial)).find("for k_o in [0, (K_len + 3) / 4):  # axis K") !=
        std::string::npos);
  CHECK(body(sch::bind(f, "i", ir::ForKind::parallel)).find("for i in [0, I_len) parallel:") != std::string::npos);
}

TEST_CASE("bind: reduction loops run concurrently only with atomic updates", "[schedule][bind]") {
  auto f = spmm_tiled();
  CHECK_THROWS_WITH(sch::bind(f, "j", ir::ForKind::gpu_thread_y),
                    Catch::Contains("bind: loop 'j' (axis J) is a reduction loop and cannot run as threadIdx.y") &&
                        Catch::Contains("hint: apply atomic_writeback(body, \"j\")"));
  CHECK_THROWS_WITH(sch::bind(f, "j", ir::ForKind::parallel), Catch::Contains("cannot run as parallel"));
  // Unrolling a reduction is fine, and so is running it serially.
  CHECK_NOTHROW(sch::bind(f, "j", ir::ForKind::serial));
  auto a = sch::bind(sch::atomic_writeback(f, "j"), "j", ir::ForKind::gpu_thread_y);
  CHECK(body(a).find("for j in [0, J_indptr[i + 1] - J_indptr[i]) threadIdx.y:  # axis J") != std::string::npos);
  CHECK(body(a).find("atomic c[i, k_o * 4 + k_i] += ") != std::string::npos);
}

TEST_CASE("bind: preconditions", "[schedule][bind]") {
  auto f = spmm_tiled();
  CHECK_THROWS_WITH(sch::bind(f, "k_i", ir::ForKind::vectorized),
                    Catch::Contains("bind: loop 'k_i' cannot be bound to vectorized; hint: use vectorize"));
  CHECK_THROWS_WITH(sch::bind(f, "k_i", ir::ForKind::unrolled), Catch::Contains("hint: use vectorize"));
  CHECK_THROWS_WITH(sch::bind(f, "x", ir::ForKind::gpu_block_x), Catch::Contains("bind: no loop named 'x' (loops: i, k_o, k_i, j)"));
  auto g = sch::bind(f, "k_o", ir::ForKind::gpu_thread_x);
  CHECK_THROWS_WITH(sch::bind(g, "k_i", ir::ForKind::gpu_thread_x),
                    Catch::Contains("bind: loop 'k_i' is inside loop 'k_o', which is already bound to threadIdx.x"));
  CHECK_THROWS_WITH(sch::bind(g, "i", ir::ForKind::gpu_thread_x),
                    Catch::Contains("bind: loop 'i' encloses loop 'k_o', which is already bound to threadIdx.x"));
  // Different GPU indices nest.
  CHECK_NOTHROW(sch::bind(g, "i", ir::ForKind::gpu_block_x));
}

TEST_CASE("unroll and vectorize mark one loop", "[schedule][bind]") {
  auto f = spmm_tiled();
  CHECK(body(sch::unroll(f, "k_i")).find("for k_i in [0, 4) unrolled:  # axis K") != std::string::npos);
  CHECK(body(sch::vectorize(f, "k_i")).find("for k_i in [0, 4) vectorized:  # axis K") != std::string::npos);
  // vectorize only marks: any extent.
  CHECK(body(sch::vectorize(f, "k_o")).find("for k_o in [0, (K_len + 3) / 4) vectorized:") != std::string::npos);
  CHECK_THROWS_WITH(sch::unroll(f, "k_o"), Catch::Contains("unroll: loop 'k_o' has extent (K_len + 3) / 4, not a "
                                                           "constant; hint: split(body, \"k_o\", factor) first"));
  auto g = sch::bind(f, "k_i", ir::ForKind::gpu_thread_x);
  CHECK_THROWS_WITH(sch::unroll(g, "k_i"), Catch::Contains("unroll: loop 'k_i' is bound to threadIdx.x"));
  CHECK_THROWS_WITH(sch::vectorize(g, "k_i"), Catch::Contains("vectorize: loop 'k_i' is bound to threadIdx.x"));
  CHECK_THROWS_WITH(sch::unroll(spmm(), "k"), Catch::Contains("unroll: 2 loops are named 'k'"));
}

TEST_CASE("unroll, vectorize and parallel loops compute the same result in C", "[schedule][bind][exec]") {
  auto f = spmm();
  auto t = spmm_tiled();
  CHECK(compare(f, sch::unroll(t, "k_i"), standard_sizes()) < 1e-5);
  CHECK(compare(f, sch::vectorize(t, "k_i"), standard_sizes()) < 1e-5);
  CHECK(compare(f, sch::bind(sch::vectorize(t, "k_i"), "i", ir::ForKind::parallel), standard_sizes()) < 1e-5);
  auto v = sch::vectorize(sch::split(spmm_acc(), "k", 4), "k_i");
  CHECK(compare(spmm_acc(), v, standard_sizes()) < 1e-5);
}
