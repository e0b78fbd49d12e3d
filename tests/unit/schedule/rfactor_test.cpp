// rfactor: SDDMM's per-nonzero dot product as per-lane partial sums combined by warp_sum
// (printed IR), the shapes with and without an init, bodies with inner loops, and
// preconditions. GPU only: checked on the IR and run in the CPU emulator of CUDA against
// the unscheduled kernel.
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_emulate_util.hpp"

using namespace sched_test;

TEST_CASE("rfactor: SDDMM's dot product over K runs on 32 lanes", "[schedule][rfactor]") {
  auto f = sch::rfactor(sddmm(), "k", 32);
  CHECK(body(f) == R"(  block sddmm:
    for i in [0, I_len):  # axis I
      for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
        for k_lane in [0, 32) threadIdx.x:  # axis K
          block d_rfactor:
            alloc d_partial: local f32[]
            d_partial = 0.0f
            for k_o in [0, (K_len + 31) / 32) reduction:  # axis K
              if k_o * 32 + k_lane < K_len:
                d_partial += a[J_indptr[i] + j] * b[i, k_o * 32 + k_lane] * c[i64(J_indices[J_indptr[i] + j]), k_o * 32 + k_lane]
            d_partial = warp_sum(d_partial, 32)
            if k_lane == 0:
              d[J_indptr[i] + j] = d_partial
)");
  // The full GPU shape: rows on blocks, 4 nonzeros per block on threadIdx.y, lanes on x.
  auto g = sch::bind(sch::bind(sch::split(f, "j", 4), "j_i", ir::ForKind::gpu_thread_y), "i", ir::ForKind::gpu_block_x);
  CHECK(body(g) == R"(  block sddmm:
    for i in [0, I_len) blockIdx.x:  # axis I
      for j_o in [0, (J_indptr[i + 1] - J_indptr[i] + 3) / 4):  # axis J
        for j_i in [0, 4) threadIdx.y:  # axis J
          if j_o * 4 + j_i < J_indptr[i + 1] - J_indptr[i]:
            for k_lane in [0, 32) threadIdx.x:  # axis K
              block d_rfactor:
                alloc d_partial: local f32[]
                d_partial = 0.0f
                for k_o in [0, (K_len + 31) / 32) reduction:  # axis K
                  if k_o * 32 + k_lane < K_len:
                    d_partial += a[J_indptr[i] + (j_o * 4 + j_i)] * b[i, k_o * 32 + k_lane] * c[i64(J_indices[J_indptr[i] + (j_o * 4 + j_i)]), k_o * 32 + k_lane]
                d_partial = warp_sum(d_partial, 32)
                if k_lane == 0:
                  d[J_indptr[i] + (j_o * 4 + j_i)] = d_partial
)");
}

TEST_CASE("rfactor: vector loads per lane, inits of other values, no init", "[schedule][rfactor]") {
  // Split by 4 first: each lane sums 4 consecutive features per step (float4 loads).
  auto v = sch::vectorize(sch::rfactor(sch::split(sddmm(), "k", 4), "k_o", 8), "k_i");
  CHECK(body(v).find(R"(        for k_o_lane in [0, 8) threadIdx.x:  # axis K
          block d_rfactor:
            alloc d_partial: local f32[]
            d_partial = 0.0f
            for k_o_o in [0, ((K_len + 3) / 4 + 7) / 8) reduction:  # axis K
              if k_o_o * 8 + k_o_lane < (K_len + 3) / 4:
                for k_i in [0, 4) vectorized reduction:  # axis K
                  if (k_o_o * 8 + k_o_lane) * 4 + k_i < K_len:
                    d_partial += a[J_indptr[i] + j] * b[i, (k_o_o * 8 + k_o_lane) * 4 + k_i] * c[i64(J_indices[J_indptr[i] + j]), (k_o_o * 8 + k_o_lane) * 4 + k_i]
            d_partial = warp_sum(d_partial, 8)
            if k_o_lane == 0:
              d[J_indptr[i] + j] = d_partial
)") != std::string::npos);
  // No init in front: the lane-0 write adds to the target (a reduction node, which
  // atomic_writeback could make atomic).
  auto r = sch::rfactor(sch::reorder(spmm_acc(), {"k", "j"}), "j", 16);
  CHECK(body(r).find(R"(            c_partial = warp_sum(c_partial, 16)
            if j_lane == 0:
              c[i, k] += c_partial
)") != std::string::npos);
  // A constant extent that the lanes divide needs no guard; an init of another value is added.
  ir::Var k("k", DType::i64);
  auto y = buffer("y", {c64(1)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {c64(64)});
  ir::Stmt s = ir::seq({ir::store(y, {c64(0)}, ir::float_imm(1.5)),
                        loop(k, c64(0), c64(64), ir::reduce(y, {c64(0)}, ir::ReduceOp::add, ir::load(x, {k})),
                             ir::IterKind::reduction, "K")});
  CHECK(str(sch::rfactor(s, "k", 32)) == R"(for k_lane in [0, 32) threadIdx.x:  # axis K
  block y_rfactor:
    alloc y_partial: local f32[]
    y_partial = 0.0f
    for k_o in [0, 2) reduction:  # axis K
      y_partial += x[k_o * 32 + k_lane]
    y_partial = warp_sum(y_partial, 32)
    if k_lane == 0:
      y[0] = 1.5f + y_partial
)");
}

TEST_CASE("rfactor: preconditions", "[schedule][rfactor]") {
  auto s = sddmm();
  for (int bad : {0, 1, 3, 48, 64})
    CHECK_THROWS_WITH(sch::rfactor(s, "k", bad), Catch::Contains("rfactor: loop 'k': lanes must be a power of two in [2, 32]"));
  CHECK_THROWS_WITH(sch::rfactor(s, "j", 32), Catch::Contains("rfactor: loop 'j' is spatial, not a reduction"));
  CHECK_THROWS_WITH(sch::rfactor(sch::bind(s, "j", ir::ForKind::gpu_thread_x), "k", 32),
                    Catch::Contains("rfactor: loop 'k' is inside loop 'j', which is bound to threadIdx.x"));
  CHECK_THROWS_WITH(sch::rfactor(sch::unroll(sch::split(s, "k", 4), "k_i"), "k_i", 4),
                    Catch::Contains("rfactor: loop 'k_i' is unrolled"));
  CHECK_THROWS_WITH(sch::rfactor(sch::cache_write(s, "j", "d"), "k", 32),
                    Catch::Contains("rfactor: loop 'k' reduces into the local 'd_local'") &&
                        Catch::Contains("rfactor before cache_write"));
  CHECK_THROWS_WITH(sch::rfactor(sch::atomic_writeback(s, "k"), "k", 32),
                    Catch::Contains("rfactor: loop 'k' is spatial"));

  ir::Var n("N", DType::i64), k("k", DType::i64), kl("k_lane", DType::i64);
  auto y = buffer("y", {n}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n});
  auto red = [&](ir::Stmt b) { return loop(k, c64(0), n, std::move(b), ir::IterKind::reduction, "K"); };
  CHECK_THROWS_WITH(sch::rfactor(red(ir::reduce(y, {c64(0)}, ir::ReduceOp::max, ir::load(x, {k}))), "k", 32),
                    Catch::Contains("rfactor: the reduction 'y max= ...' in loop 'k' is not a sum"));
  CHECK_THROWS_WITH(sch::rfactor(red(ir::reduce(y, {k}, ir::ReduceOp::add, ir::load(x, {k}))), "k", 32),
                    Catch::Contains("rfactor: the element of 'y' that loop 'k' updates depends on the loop"));
  CHECK_THROWS_WITH(sch::rfactor(red(ir::seq({ir::reduce(y, {c64(0)}, ir::ReduceOp::add, ir::load(x, {k})),
                                              ir::reduce(y, {c64(1)}, ir::ReduceOp::add, ir::load(x, {k}))})),
                                 "k", 32),
                    Catch::Contains("rfactor: loop 'k' reduces into more than one element"));
  CHECK_THROWS_WITH(sch::rfactor(red(ir::store(y, {c64(0)}, ir::load(x, {k}))), "k", 32),
                    Catch::Contains("rfactor: loop 'k' stores to 'y'"));
  CHECK_THROWS_WITH(sch::rfactor(red(ir::reduce(y, {c64(0)}, ir::ReduceOp::add, ir::load(y, {k}))), "k", 32),
                    Catch::Contains("rfactor: loop 'k' reads 'y' while summing into it"));
  CHECK_THROWS_WITH(sch::rfactor(loop(kl, c64(0), c64(2), red(ir::reduce(y, {c64(0)}, ir::ReduceOp::add, ir::load(x, {k})))), "k", 32),
                    Catch::Contains("rfactor: a loop named 'k_lane' exists already"));
}

TEST_CASE("rfactor: emit_c refuses the warp reduction (GPU only)", "[schedule][rfactor]") {
  CHECK_THROWS_AS(spindle::codegen::emit_c(sch::rfactor(sddmm(), "k", 32)), spindle::InternalError);
}

TEST_CASE("rfactor: SDDMM on warp lanes computes SDDMM in the CUDA emulator", "[schedule][rfactor][emulated]") {
  auto ref = sddmm();
  // A warp per nonzero, 4 nonzeros per block (threadIdx.y), rows on blocks.
  auto g = sch::bind(sch::bind(sch::split(sch::rfactor(ref, "k", 32), "j", 4), "j_i", ir::ForKind::gpu_thread_y), "i",
                     ir::ForKind::gpu_block_x);
  CHECK(compare_emulated(ref, g, gpu_sizes()) < 1e-5);
  // 8 lanes per nonzero (a block of 8 threads), 4 features per lane and step.
  auto v = sch::bind(sch::rfactor(sch::split(ref, "k", 4), "k_o", 8), "i", ir::ForKind::gpu_block_x);
  CHECK(compare_emulated(ref, v, gpu_sizes()) < 1e-5);
  // No init: the lane-0 write accumulates into an inout output.
  auto acc = spmm_acc();
  auto r = sch::bind(sch::bind(sch::rfactor(sch::reorder(acc, {"k", "j"}), "j", 16), "i", ir::ForKind::gpu_block_x), "k",
                     ir::ForKind::gpu_block_y);
  CHECK(compare_emulated(acc, r, gpu_sizes()) < 1e-5);
}
