// atomic_writeback: which updates become atomic, the loop becoming spatial (so bind
// accepts it), and the cases that cannot run concurrently. GPU only: checked on the IR and
// run in the CPU emulator of CUDA against the unscheduled kernel.
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_emulate_util.hpp"

using namespace sched_test;

TEST_CASE("atomic_writeback: SpMM's nonzero loop updates the output row atomically", "[schedule][atomic_writeback]") {
  auto f = sch::atomic_writeback(spmm_acc(), "j");
  CHECK(body(f) == R"(  block spmm_acc:
    for i in [0, I_len):  # axis I
      for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
        for k in [0, K_len):  # axis K
          atomic c[i, k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k]
)");
  auto b = sch::bind(sch::bind(f, "j", ir::ForKind::gpu_block_y), "i", ir::ForKind::gpu_block_x);
  CHECK(body(b).find("for j in [0, J_indptr[i + 1] - J_indptr[i]) blockIdx.y:  # axis J") != std::string::npos);
  // The IR node carries the flag.
  struct Find : ir::IRVisitor {
    int atomic = 0, plain = 0;
    void visit_Reduce(const ir::ReduceNode* n) override { (n->atomic ? atomic : plain) += 1; }
  } count;
  count.visit(b.body);
  CHECK(count.atomic == 1);
  CHECK(count.plain == 0);
}

TEST_CASE("atomic_writeback: only updates shared by the iterations become atomic", "[schedule][atomic_writeback]") {
  ir::Var n("N", DType::i64), j("j", DType::i64), p("p", DType::i64);
  auto A = buffer("A", {n}, DType::f32, ir::BufferRole::output);
  auto S = buffer("S", {c64(1)}, DType::f32, ir::BufferRole::output);
  auto M = buffer("M", {c64(1)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n});
  ir::Stmt s = loop(j, c64(0), n,
                    ir::let_stmt(p, j + c64(1),
                                 ir::seq({ir::reduce(A, {j}, ir::ReduceOp::add, ir::load(x, {j})),
                                          ir::reduce(S, {c64(0)}, ir::ReduceOp::add, ir::load(x, {j})),
                                          ir::reduce(M, {c64(0)}, ir::ReduceOp::max, ir::load(x, {j})),
                                          ir::reduce(M, {p / c64(2)}, ir::ReduceOp::min, ir::load(x, {j}))})),
                    ir::IterKind::reduction, "J");
  CHECK(str(sch::atomic_writeback(s, "j")) == R"(for j in [0, N):  # axis J
  let p: i64 = j + 1
  A[j] += x[j]
  atomic S[0] += x[j]
  atomic M[0] max= x[j]
  atomic M[p / 2] min= x[j]
)");
  // j + t repeats across (j, t) pairs: atomic, although the index moves with j.
  ir::Var t("t", DType::i64);
  ir::Stmt slide = loop(j, c64(0), n, loop(t, c64(0), c64(2), ir::reduce(A, {j + t}, ir::ReduceOp::add, ir::load(x, {j}))),
                        ir::IterKind::reduction, "J");
  CHECK(str(sch::atomic_writeback(slide, "j")) == R"(for j in [0, N):  # axis J
  for t in [0, 2):  # axis t
    atomic A[j + t] += x[j]
)");
}

TEST_CASE("atomic_writeback: preconditions", "[schedule][atomic_writeback]") {
  CHECK_THROWS_WITH(sch::atomic_writeback(spmm_acc(), "k"),
                    Catch::Contains("atomic_writeback: loop 'k' is spatial: its iterations write distinct elements"));
  CHECK_THROWS_WITH(sch::atomic_writeback(spmm_acc(), "x"), Catch::Contains("atomic_writeback: no loop named 'x'"));
  // A register accumulator outside the loop: each thread would have its own.
  auto cw = sch::cache_write(sch::reorder(spmm(), {"k", "j"}), "k", "c");
  CHECK_THROWS_WITH(sch::atomic_writeback(cw, "j"),
                    Catch::Contains("atomic_writeback: loop 'j' reduces into local buffer 'c_local', which is "
                                    "allocated outside it") &&
                        Catch::Contains("hint: apply atomic_writeback before cache_write"));

  ir::Var n("N", DType::i64), j("j", DType::i64);
  auto S = buffer("S", {c64(1)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n});
  auto in_loop = [&](ir::Stmt b) { return loop(j, c64(0), n, std::move(b), ir::IterKind::reduction); };
  CHECK_THROWS_WITH(sch::atomic_writeback(in_loop(ir::reduce(S, {c64(0)}, ir::ReduceOp::mul, ir::load(x, {j}))), "j"),
                    Catch::Contains("atomic_writeback: the reduction 'S *= ...' inside loop 'j' has no atomic form"));
  CHECK_THROWS_WITH(sch::atomic_writeback(in_loop(ir::store(S, {c64(0)}, ir::load(x, {j}))), "j"),
                    Catch::Contains("atomic_writeback: loop 'j' stores to 'S' at an element that every iteration writes"));
  ir::Stmt reads = in_loop(ir::seq({ir::reduce(S, {c64(0)}, ir::ReduceOp::add, ir::load(x, {j})),
                                    ir::reduce(S, {c64(0)}, ir::ReduceOp::add, ir::load(S, {c64(0)}))}));
  CHECK_THROWS_WITH(sch::atomic_writeback(reads, "j"),
                    Catch::Contains("atomic_writeback: loop 'j' reads 'S', which its iterations update atomically"));
}

TEST_CASE("atomic_writeback: emit_c refuses atomics (GPU only)", "[schedule][atomic_writeback]") {
  auto f = sch::atomic_writeback(spmm_acc(), "j");
  CHECK_THROWS_AS(spindle::codegen::emit_c(f), spindle::InternalError);
}

TEST_CASE("atomic_writeback: nonzeros of a row on threadIdx.y compute SpMM in the CUDA emulator",
          "[schedule][atomic_writeback][emulated]") {
  auto ref = spmm_acc();
  auto f = sch::split(sch::split(sch::atomic_writeback(ref, "j"), "j", 4), "k", 32);
  f = sch::bind(sch::bind(sch::bind(f, "i", ir::ForKind::gpu_block_x), "j_i", ir::ForKind::gpu_thread_y), "k_i",
                ir::ForKind::gpu_thread_x);
  CHECK(body(f).find("atomic c[i, k_o * 32 + k_i] += ") != std::string::npos);
  CHECK(compare_emulated(ref, f, gpu_sizes()) < 1e-5);
  // Partial sums per tile of 8 nonzeros in registers, added atomically.
  auto p = sch::cache_write(sch::split(sch::reorder(ref, {"k", "j"}), "j", 8), "j_o", "c", sch::CacheWriteMode::partial);
  p = sch::atomic_writeback(p, "j_o");
  p = sch::bind(sch::bind(sch::bind(sch::split(p, "j_o", 4), "j_o_i", ir::ForKind::gpu_thread_y), "i",
                          ir::ForKind::gpu_block_x),
                "k", ir::ForKind::gpu_block_y);
  CHECK(body(p).find("atomic c[i, k] += c_local") != std::string::npos);
  CHECK(compare_emulated(ref, p, gpu_sizes()) < 1e-5);
}
