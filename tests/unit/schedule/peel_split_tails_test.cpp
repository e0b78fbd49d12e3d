// peel_split_tails: printed IR (full tiles without the guard, the partial tile after them),
// what it leaves alone (constant multiples, guards it cannot prove, vectorised outer
// loops), and SpMM through emit_c against the unscheduled kernel.
#include <catch2/catch.hpp>

#include "spindle/schedule/peel_split_tails.hpp"
#include "unit/schedule/schedule_exec_util.hpp"

using namespace sched_test;

namespace {

struct Row {
  ir::Var n{"N", DType::i64};
  ir::Var k{"k", DType::i64};
  ir::Buffer A = buffer("A", {n}, DType::f32, ir::BufferRole::output);
  ir::Buffer B = buffer("B", {n});
  ir::Stmt body(ir::ForKind kind = ir::ForKind::serial) const {
    return loop(k, c64(0), n, ir::store(A, {k}, ir::load(B, {k}) * ir::float_imm(2.0)), ir::IterKind::spatial, "K",
                kind);
  }
};

}  // namespace

TEST_CASE("peel_split_tails: full tiles run without the guard, the partial tile after them",
          "[schedule][peel_split_tails]") {
  Row t;
  auto split = sch::split(t.body(), "k", 4);
  auto vec = sch::vectorize(split, "k_i");
  CHECK(str(sch::peel_split_tails(vec)) == R"(for k_o in [0, N / 4):  # axis K
  for k_i in [0, 4) vectorized:  # axis K
    A[k_o * 4 + k_i] = B[k_o * 4 + k_i] * 2.0f
for k_o in [N / 4, N / 4 + (N + 3) / 4 - N / 4):  # axis K
  for k_i in [0, 4) vectorized:  # axis K
    if k_o * 4 + k_i < N:
      A[k_o * 4 + k_i] = B[k_o * 4 + k_i] * 2.0f
)");
  // A parallel outer loop stays parallel over the full tiles; the partial tile is serial.
  auto par = str(sch::peel_split_tails(sch::split(t.body(ir::ForKind::parallel), "k", 8)));
  CHECK(par.find("for k_o in [0, N / 8) parallel:") != std::string::npos);
  CHECK(par.find("for k_o in [N / 8, N / 8 + (N + 7) / 8 - N / 8):") != std::string::npos);
}

TEST_CASE("peel_split_tails: what it leaves alone", "[schedule][peel_split_tails]") {
  Row t;
  // No guard (a constant multiple): nothing to peel.
  ir::Var k("k", DType::i64);
  auto A = buffer("A", {c64(12)}, DType::f32, ir::BufferRole::output);
  ir::Stmt fixed = loop(k, c64(0), c64(12), ir::store(A, {k}, ir::float_imm(1.0)));
  auto s = sch::split(fixed, "k", 4);
  CHECK(str(sch::peel_split_tails(s)) == str(s));
  // A guard it cannot prove in a full tile (the inner loop is not the tile: 0..7 for a tile of 4).
  ir::Var n("N", DType::i64), o("k_o", DType::i64), w("w", DType::i64);
  auto B = buffer("B", {n}, DType::f32, ir::BufferRole::output);
  ir::Stmt wide = loop(o, c64(0), sch::detail::ceil_div(n, 4),
                       loop(w, c64(0), c64(8),
                            ir::if_then_else(ir::Expr(o) * c64(4) + w < n, ir::store(B, {ir::Expr(o) * c64(4) + w},
                                                                                      ir::float_imm(1.0)))));
  CHECK(str(sch::peel_split_tails(wide)) == str(wide));
  // An outer loop that is itself vectorised keeps its guards.
  auto vo = sch::vectorize(sch::split(t.body(), "k", 4), "k_o");
  CHECK(str(sch::peel_split_tails(vo)) == str(vo));
}

TEST_CASE("peel_split_tails: SpMM computes the same result for every tiling", "[schedule][peel_split_tails][exec]") {
  auto f = spmm();
  auto peeled = [](ir::Function g) { return sch::peel_split_tails(g); };
  CHECK(compare(f, peeled(sch::split(f, "i", 3)), standard_sizes()) < 1e-5);
  CHECK(compare(f, peeled(sch::split(f, "j", 4)), standard_sizes()) < 1e-5);
  CHECK(compare(f, peeled(sch::split(sch::split(f, "j", 2), "i", 4)), standard_sizes()) < 1e-5);
  auto r = sch::reorder(f, {"k", "j"});
  CHECK(compare(f, peeled(sch::split(r, "k", 4)), standard_sizes()) < 1e-5);
  CHECK(compare(f, peeled(sch::split(sch::split(r, "k", 4), "k_o", 2)), standard_sizes()) < 1e-5);
  // The guard is gone from the full tiles of the reduction loop.
  auto g = peeled(sch::split(f, "j", 4));
  CHECK(str(g.body).find("for j_o in [0, (J_indptr[i + 1] - J_indptr[i]) / 4) reduction:") != std::string::npos);
}
