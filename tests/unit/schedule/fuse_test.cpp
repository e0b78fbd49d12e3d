// fuse: flattening a perfectly nested pair (printed IR), preconditions, and SpMM run
// against the unscheduled kernel.
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_exec_util.hpp"

using namespace sched_test;

namespace {

struct FuseBox {
  ir::Var n{"N", DType::i64}, m{"M", DType::i64};
  ir::Var i{"i", DType::i64}, j{"j", DType::i64}, k{"k", DType::i64};
  ir::Buffer A = buffer("A", {n, m, c64(4)}, DType::f32, ir::BufferRole::output);
  ir::Stmt body(ir::ForKind ki = ir::ForKind::serial, ir::ForKind kj = ir::ForKind::serial) const {
    return loop(i, c64(0), n,
                loop(j, c64(0), m, loop(k, c64(0), c64(4), ir::store(A, {i, j, k}, ir::float_imm(1.0)), ir::IterKind::spatial, "K"),
                     ir::IterKind::spatial, "J", kj),
                ir::IterKind::spatial, "I", ki);
  }
};

}  // namespace

TEST_CASE("fuse: one loop over the product, indices by division and remainder", "[schedule][fuse]") {
  FuseBox b;
  CHECK(str(sch::fuse(b.body(), "i", "j")) == R"(for i_j_f in [0, N * M):  # axis I*J
  for k in [0, 4):  # axis K
    A[i_j_f / M, i_j_f % M, k] = 1.0f
)");
  CHECK(str(sch::fuse(b.body(), "j", "k")) == R"(for i in [0, N):  # axis I
  for j_k_f in [0, M * 4):  # axis J*K
    A[i, j_k_f / 4, j_k_f % 4] = 1.0f
)");
  // The kind of the bound loop carries over.
  CHECK(str(sch::fuse(b.body(ir::ForKind::gpu_block_x), "i", "j")).find("for i_j_f in [0, N * M) blockIdx.x:") !=
        std::string::npos);
  // A non-zero start of either loop is added back.
  ir::Var o("o", DType::i64), in("in", DType::i64);
  auto C = buffer("C", {c64(8), c64(8)}, DType::f32, ir::BufferRole::output);
  ir::Stmt s = loop(o, c64(2), c64(3), loop(in, o, c64(4), ir::store(C, {o, in}, ir::float_imm(0.0)), ir::IterKind::spatial, "X"),
                    ir::IterKind::spatial, "X");
  CHECK(str(sch::fuse(s, "o", "in")) == R"(for o_in_f in [0, 12):  # axis X
  C[o_in_f / 4 + 2, o_in_f / 4 + 2 + o_in_f % 4] = 0.0f
)");
}

TEST_CASE("fuse: preconditions", "[schedule][fuse]") {
  FuseBox b;
  CHECK_THROWS_WITH(sch::fuse(b.body(), "i", "k"),
                    Catch::Contains("fuse: loops i, k are not a perfectly nested band: the body of loop 'i' is a loop, "
                                    "not loop 'k'"));
  CHECK_THROWS_WITH(sch::fuse(b.body(), "j", "i"), Catch::Contains("fuse: loop 'j' is inside loop 'i', not around it") &&
                                                       Catch::Contains("fuse(body, \"i\", \"j\")"));
  CHECK_THROWS_WITH(sch::fuse(b.body(), "i", "i"), Catch::Contains("fuse: the outer and inner loop are both 'i'"));
  CHECK_THROWS_WITH(sch::fuse(b.body(ir::ForKind::gpu_block_x, ir::ForKind::gpu_thread_x), "i", "j"),
                    Catch::Contains("both have a loop kind; hint: fuse first, then bind"));
  // SpMM: a row's nonzeros depend on the row; j is a reduction, k is not.
  CHECK_THROWS_WITH(sch::fuse(spmm_acc().body, "i", "j"),
                    Catch::Contains("fuse: the extent of loop 'j' (J_indptr[i + 1] - J_indptr[i]) depends on loop 'i'"));
  CHECK_THROWS_WITH(sch::fuse(spmm_acc().body, "j", "k"),
                    Catch::Contains("fuse: loop 'j' is a reduction and loop 'k' is spatial"));
}

TEST_CASE("fuse: SpMM computes the same result", "[schedule][fuse][exec]") {
  auto f = spmm();
  auto r = sch::reorder(f, {"k", "j"});
  CHECK(compare(f, sch::fuse(r, "i", "k"), standard_sizes()) < 1e-5);
  // A split loop fused back (the guard of the last tile stays).
  CHECK(compare(f, sch::fuse(sch::split(r, "k", 4), "k_o", "k_i"), standard_sizes()) < 1e-5);
  auto c = colsum();
  CHECK(compare(c, sch::fuse(sch::split(sch::reorder(c, {"k", "i"}), "k", 3), "k_o", "k_i"), standard_sizes()) < 1e-5);
}
