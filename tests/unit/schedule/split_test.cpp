// split: printed IR of hand-built nests, loop kinds, preconditions, and SpMM run through
// emit_c against the unscheduled kernel (extents that are not multiples of the factor,
// zero extents).
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_exec_util.hpp"

using namespace sched_test;

namespace {

struct Nest {
  ir::Var n{"N", DType::i64};
  ir::Var i{"i", DType::i64}, k{"k", DType::i64};
  ir::Buffer A = buffer("A", {n, c64(10)}, DType::f32, ir::BufferRole::output);
  ir::Buffer B = buffer("B", {n, c64(10)});
  ir::Stmt store() const { return ir::store(A, {i, k}, ir::load(B, {i, k}) * ir::float_imm(2.0)); }
  ir::Stmt body(ir::ForKind outer = ir::ForKind::serial, ir::ForKind inner = ir::ForKind::serial) const {
    return loop(i, c64(0), n, loop(k, c64(0), c64(10), store(), ir::IterKind::spatial, "K", inner),
                ir::IterKind::spatial, "I", outer);
  }
};

}  // namespace

TEST_CASE("split: symbolic extent gets a guard, constant multiples do not", "[schedule][split]") {
  Nest t;
  CHECK(str(sch::split(t.body(), "i", 4)) == R"(for i_o in [0, (N + 3) / 4):  # axis I
  for i_i in [0, 4):  # axis I
    if i_o * 4 + i_i < N:
      for k in [0, 10):  # axis K
        A[i_o * 4 + i_i, k] = B[i_o * 4 + i_i, k] * 2.0f
)");
  CHECK(str(sch::split(t.body(), "k", 5)) == R"(for i in [0, N):  # axis I
  for k_o in [0, 2):  # axis K
    for k_i in [0, 5):  # axis K
      A[i, k_o * 5 + k_i] = B[i, k_o * 5 + k_i] * 2.0f
)");
  // 10 is not a multiple of 4: three tiles, the last one guarded.
  CHECK(str(sch::split(t.body(), "k", 4)) == R"(for i in [0, N):  # axis I
  for k_o in [0, 3):  # axis K
    for k_i in [0, 4):  # axis K
      if k_o * 4 + k_i < 10:
        A[i, k_o * 4 + k_i] = B[i, k_o * 4 + k_i] * 2.0f
)");
}

TEST_CASE("split: a loop that does not start at 0 keeps its start in the body", "[schedule][split]") {
  ir::Var n("N", DType::i64), v("v", DType::i64);
  auto A = buffer("A", {n}, DType::f32, ir::BufferRole::output);
  ir::Stmt s = loop(v, c64(3), n - c64(3), ir::store(A, {v}, ir::float_imm(1.0)), ir::IterKind::spatial, "V");
  CHECK(str(sch::split(s, "v", 8)) == R"(for v_o in [0, (N + 4) / 8):  # axis V
  for v_i in [0, 8):  # axis V
    if v_o * 8 + v_i < N - 3:
      A[v_o * 8 + v_i + 3] = 1.0f
)");
}

TEST_CASE("split: the outer loop keeps the loop kind, vectorized and unrolled move inside", "[schedule][split]") {
  Nest t;
  auto par = str(sch::split(t.body(ir::ForKind::parallel), "i", 2));
  CHECK(par.find("for i_o in [0, (N + 1) / 2) parallel:") != std::string::npos);
  CHECK(par.find("for i_i in [0, 2):") != std::string::npos);
  auto gpu = str(sch::split(t.body(ir::ForKind::gpu_block_x), "i", 2));
  CHECK(gpu.find("for i_o in [0, (N + 1) / 2) blockIdx.x:") != std::string::npos);
  auto vec = str(sch::split(t.body(ir::ForKind::serial, ir::ForKind::vectorized), "k", 4));
  CHECK(vec.find("for k_o in [0, 3):") != std::string::npos);
  CHECK(vec.find("for k_i in [0, 4) vectorized:") != std::string::npos);
  // Reduction loops stay reductions on both sides.
  auto red = str(sch::split(spmm().body, "j", 4));
  CHECK(red.find("for j_o in [0, (J_indptr[i + 1] - J_indptr[i] + 3) / 4) reduction:  # axis J") != std::string::npos);
  CHECK(red.find("for j_i in [0, 4) reduction:  # axis J") != std::string::npos);
  CHECK(red.find("if j_o * 4 + j_i < J_indptr[i + 1] - J_indptr[i]:") != std::string::npos);
  CHECK(red.find("c[i, k] += a[J_indptr[i] + (j_o * 4 + j_i)] * b[i64(J_indices[J_indptr[i] + (j_o * 4 + j_i)]), k]") !=
        std::string::npos);
}

TEST_CASE("split: preconditions", "[schedule][split]") {
  Nest t;
  CHECK_THROWS_WITH(sch::split(t.body(), "i", 0), Catch::Contains("split: the factor for loop 'i' must be at least 1"));
  CHECK_THROWS_WITH(sch::split(t.body(), "q", 4),
                    Catch::Contains("split: no loop named 'q' (loops: i, k)") && Catch::Contains("hint:"));
  // SpMM has an init loop and a reduction loop over k.
  CHECK_THROWS_WITH(sch::split(spmm().body, "k", 4),
                    Catch::Contains("split: 2 loops are named 'k' (loops: i, k, j)") && Catch::Contains("reorder"));
  // The new names must not be taken.
  ir::Var x("x", DType::i64), xo("x_o", DType::i64);
  auto A = buffer("A", {c64(4), c64(4)}, DType::f32, ir::BufferRole::output);
  ir::Stmt s = loop(xo, c64(0), c64(4), loop(x, c64(0), c64(4), ir::store(A, {xo, x}, ir::float_imm(0.0))));
  CHECK_THROWS_WITH(sch::split(s, "x", 2), Catch::Contains("split: a loop named 'x_o' exists already"));
  // A factor of 1 is allowed: one element per tile.
  CHECK(str(sch::split(t.body(), "k", 1)).find("for k_i in [0, 1):") != std::string::npos);
}

TEST_CASE("split: the function overload rewrites the body", "[schedule][split]") {
  auto f = spmm();
  auto g = sch::split(f, "i", 3);
  CHECK(g.name == f.name);
  CHECK(g.buffers.size() == f.buffers.size());
  CHECK(str(g.body).find("for i_o in [0, (I_len + 2) / 3):") != std::string::npos);
}

TEST_CASE("split: SpMM computes the same result for every tiling", "[schedule][split][exec]") {
  auto f = spmm();
  CHECK(compare(f, sch::split(f, "i", 3), standard_sizes()) < 1e-5);
  CHECK(compare(f, sch::split(f, "j", 4), standard_sizes()) < 1e-5);
  CHECK(compare(f, sch::split(sch::split(f, "j", 2), "i", 4), standard_sizes()) < 1e-5);
  // After the reorder there is one loop over k: split it by 4 (K = 5, 8, 13 and 0).
  auto r = sch::reorder(f, {"k", "j"});
  CHECK(compare(f, sch::split(r, "k", 4), standard_sizes()) < 1e-5);
  CHECK(compare(f, sch::split(sch::split(r, "k", 4), "k_o", 2), standard_sizes()) < 1e-5);
}

TEST_CASE("schedule tests: the C comparison detects a wrong result", "[schedule][split][exec]") {
  // A control for the comparisons above: SpMM with the init changed from 0 to 1.
  auto f = spmm();
  struct One : ir::IRMutator {
    ir::Stmt mutate_Store(const ir::StoreNode* n, const ir::Stmt&) override {
      return ir::store(n->buffer, n->indices, ir::float_imm(1.0), n->loc);
    }
  } one;
  auto wrong = f;
  wrong.body = one.mutate(f.body);
  CHECK(compare(f, wrong, {{3, 4, 2}}) > 0.3);
  CHECK(compare(f, f, standard_sizes()) == 0.0);
}
