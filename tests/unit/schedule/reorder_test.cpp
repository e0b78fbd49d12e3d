// reorder: permuting perfectly nested bands (printed IR), moving a reduction's init into
// the new outer loops, preconditions, and SpMM / column sums run against the original.
#include <catch2/catch.hpp>

#include <spindle/schedule/apply_user_schedule.hpp>

#include "unit/schedule/schedule_exec_util.hpp"

using namespace sched_test;

namespace {

// split as a user's schedule applies it: to the init's loop and the reduction's alike.
ir::Function split_all(const ir::Function& f, const std::string& loop, std::int64_t factor) {
  return sch::apply_user_schedule(f, sp::Schedule().split(loop, factor), sch::ScheduleTarget::cpu);
}

struct ReorderBox {
  ir::Var n{"N", DType::i64}, m{"M", DType::i64};
  ir::Var i{"i", DType::i64}, j{"j", DType::i64}, k{"k", DType::i64};
  ir::Buffer A = buffer("A", {n, m, c64(4)}, DType::f32, ir::BufferRole::output);
  ir::Stmt body() const {
    return loop(i, c64(0), n, loop(j, c64(0), m, loop(k, c64(0), c64(4), ir::store(A, {i, j, k}, ir::float_imm(1.0)))));
  }
};

}  // namespace

TEST_CASE("reorder: permutes a perfectly nested band", "[schedule][reorder]") {
  ReorderBox b;
  CHECK(str(sch::reorder(b.body(), {"k", "i", "j"})) == R"(for k in [0, 4):  # axis k
  for i in [0, N):  # axis i
    for j in [0, M):  # axis j
      A[i, j, k] = 1.0f
)");
  // A band inside the nest; the loops outside stay.
  CHECK(str(sch::reorder(b.body(), {"k", "j"})) == R"(for i in [0, N):  # axis i
  for k in [0, 4):  # axis k
    for j in [0, M):  # axis j
      A[i, j, k] = 1.0f
)");
  // The identity order rebuilds the same nest.
  CHECK(str(sch::reorder(b.body(), {"i", "j", "k"})) == str(b.body()));
}

TEST_CASE("reorder: SpMM's feature loop moves outside the nonzeros and takes the init along",
          "[schedule][reorder]") {
  auto f = spmm();
  CHECK(str(sch::reorder(f.body, {"k", "j"})) == R"(block spmm:
  for i in [0, I_len):  # axis I
    for k in [0, K_len):  # axis K
      c[i, k] = 0.0f
      for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
        c[i, k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k]
)");
  // Without an init (inout output) the band is just swapped.
  CHECK(str(sch::reorder(spmm_acc().body, {"k", "j"})) == R"(block spmm_acc:
  for i in [0, I_len):  # axis I
    for k in [0, K_len):  # axis K
      for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
        c[i, k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k]
)");
  // Column sums: the reduction over rows goes inside the columns.
  CHECK(str(sch::reorder(colsum().body, {"k", "i"})) == R"(block colsum:
  for k in [0, K_len):  # axis K
    b[k] = 0.0f
    for i in [0, I_len) reduction:  # axis I
      b[k] += a[i, k]
)");
}

TEST_CASE("reorder: an init over other bounds stays where it is", "[schedule][reorder]") {
  ir::Var n("N", DType::i64), i("i", DType::i64), k("k", DType::i64), k0("k", DType::i64);
  auto y = buffer("y", {c64(8)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n, c64(8)});
  // The init covers [0, 4) only, the reduction [0, 8): moving it would change the result.
  ir::Stmt s = ir::seq({loop(k0, c64(0), c64(4), ir::store(y, {k0}, ir::float_imm(0.0))),
                        loop(i, c64(0), n, loop(k, c64(0), c64(8), ir::reduce(y, {k}, ir::ReduceOp::add, ir::load(x, {i, k}))),
                             ir::IterKind::reduction)});
  CHECK(str(sch::reorder(s, {"k", "i"})) == R"(for k in [0, 4):  # axis k
  y[k] = 0.0f
for k in [0, 8):  # axis k
  for i in [0, N) reduction:  # axis i
    y[k] += x[i, k]
)");
}

TEST_CASE("reorder: after a split the init's tile loop moves into the new outer loop, keeping its own inner loop",
          "[schedule][reorder]") {
  // split("k", 32) splits the init and the reduction; the init then matches only the new
  // order's first loop (k_o) and keeps its k_i loop, run before the nonzeros of the tile.
  auto f = spmm();
  auto r = sch::reorder(split_all(f, "k", 32).body, {"k_o", "j", "k_i"});
  CHECK(str(r) == R"(block spmm:
  for i in [0, I_len):  # axis I
    for k_o in [0, (K_len + 31) / 32):  # axis K
      for k_i in [0, 32):  # axis K
        if k_o * 32 + k_i < K_len:
          c[i, k_o * 32 + k_i] = 0.0f
      for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
        for k_i in [0, 32):  # axis K
          if k_o * 32 + k_i < K_len:
            c[i, k_o * 32 + k_i] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_o * 32 + k_i]
)");
  // The default schedule's register tile, as steps: one k_o loop, so cache_write addresses it.
  CHECK(str(sch::cache_write(r, "k_o", "c")) == R"(block spmm:
  for i in [0, I_len):  # axis I
    for k_o in [0, (K_len + 31) / 32):  # axis K
      block c_cache:
        alloc c_local: local f32[32]
        for k_i in [0, 32):  # axis K
          if k_o * 32 + k_i < K_len:
            c_local[k_i] = 0.0f
        for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
          for k_i in [0, 32):  # axis K
            if k_o * 32 + k_i < K_len:
              c_local[k_i] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_o * 32 + k_i]
        for k_i in [0, 32):  # axis K
          if k_o * 32 + k_i < K_len:
            c[i, k_o * 32 + k_i] = c_local[k_i]
)");
  // The same with the band {k_o, j} (k_i stays innermost).
  CHECK(str(sch::reorder(split_all(f, "k", 32).body, {"k_o", "j"})) == str(r));

  // An init whose tiles overlap (y[k_o * 4 + k_i] with k_i over [0, 8): element 5 is in tiles
  // 0 and 1) stays in front: moved, tile 1 would zero what tile 0 had summed.
  ir::Var n("N", DType::i64), i("i", DType::i64), ko("k_o", DType::i64), ki("k_i", DType::i64),
      ko0("k_o", DType::i64), ki0("k_i", DType::i64);
  auto y = buffer("y", {c64(12)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n, c64(12)});
  auto overlap = [&](std::int64_t init_width) {
    return ir::seq({loop(ko0, c64(0), c64(2), loop(ki0, c64(0), c64(init_width), ir::store(y, {ko0 * c64(4) + ki0}, ir::float_imm(0.0)))),
                    loop(i, c64(0), n,
                         loop(ko, c64(0), c64(2),
                              loop(ki, c64(0), c64(4), ir::reduce(y, {ko * c64(4) + ki}, ir::ReduceOp::add, ir::load(x, {i, ko * c64(4) + ki})))),
                         ir::IterKind::reduction)});
  };
  CHECK(str(sch::reorder(overlap(8), {"k_o", "i", "k_i"})) == R"(for k_o in [0, 2):  # axis k_o
  for k_i in [0, 8):  # axis k_i
    y[k_o * 4 + k_i] = 0.0f
for k_o in [0, 2):  # axis k_o
  for i in [0, N) reduction:  # axis i
    for k_i in [0, 4):  # axis k_i
      y[k_o * 4 + k_i] += x[i, k_o * 4 + k_i]
)");
  // Tiles of exactly 4 do not overlap: the init moves.
  CHECK(str(sch::reorder(overlap(4), {"k_o", "i", "k_i"})) == R"(for k_o in [0, 2):  # axis k_o
  for k_i in [0, 4):  # axis k_i
    y[k_o * 4 + k_i] = 0.0f
  for i in [0, N) reduction:  # axis i
    for k_i in [0, 4):  # axis k_i
      y[k_o * 4 + k_i] += x[i, k_o * 4 + k_i]
)");
}

TEST_CASE("reorder: preconditions", "[schedule][reorder]") {
  ReorderBox b;
  CHECK_THROWS_WITH(sch::reorder(b.body(), {}), Catch::Contains("reorder: no loops given"));
  CHECK_THROWS_WITH(sch::reorder(b.body(), {"k", "k"}), Catch::Contains("reorder: a loop is named twice in (k, k)"));
  CHECK_THROWS_WITH(sch::reorder(b.body(), {"k", "q"}), Catch::Contains("reorder: no loop named 'q' (loops: i, j, k)"));
  // i and k are not directly nested.
  CHECK_THROWS_WITH(sch::reorder(b.body(), {"k", "i"}),
                    Catch::Contains("reorder: loops k, i are not a perfectly nested band: the body of loop 'i' is a "
                                    "loop, not loop 'k'") &&
                        Catch::Contains("hint:"));
  // SDDMM: the init store sits between j and k.
  CHECK_THROWS_WITH(sch::reorder(sddmm().body, {"k", "j"}),
                    Catch::Contains("the body of loop 'j' is a sequence of statements, not loop 'k'"));
  // SpMM: the nonzeros of a row depend on the row.
  CHECK_THROWS_WITH(sch::reorder(spmm().body, {"j", "i"}),
                    Catch::Contains("are not a perfectly nested band") && Catch::Contains("the body of loop 'i' is a sequence"));
  CHECK_THROWS_WITH(sch::reorder(spmm_acc().body, {"j", "i"}),
                    Catch::Contains("reorder: the bounds of loop 'j' ([0, +J_indptr[i + 1] - J_indptr[i])) depend on "
                                    "loop 'i', which the new order puts inside it"));
  // Loops side by side are no band.
  ir::Var p("p", DType::i64), q("q", DType::i64);
  auto A = buffer("A", {c64(4)}, DType::f32, ir::BufferRole::output);
  ir::Stmt side = ir::seq({loop(p, c64(0), c64(4), ir::store(A, {p}, ir::float_imm(0.0))),
                           loop(q, c64(0), c64(4), ir::store(A, {q}, ir::float_imm(1.0)))});
  CHECK_THROWS_WITH(sch::reorder(side, {"p", "q"}), Catch::Contains("loop 'q' is not inside loop 'p'"));
}

TEST_CASE("reorder: SpMM and column sums compute the same result", "[schedule][reorder][exec]") {
  auto f = spmm();
  CHECK(compare(f, sch::reorder(f, {"k", "j"}), standard_sizes()) < 1e-5);
  auto g = spmm_acc();
  CHECK(compare(g, sch::reorder(g, {"k", "j"}), standard_sizes()) < 1e-5);
  auto c = colsum();
  CHECK(compare(c, sch::reorder(c, {"k", "i"}), standard_sizes()) < 1e-5);
  // Split, then move the tile loop outside the nonzeros.
  CHECK(compare(g, sch::reorder(sch::split(g, "k", 4), {"k_o", "j"}), standard_sizes()) < 1e-5);
  // With an init, which moves into the tile loop keeping its own k_i loop; a split that
  // divides K or not (3: a guard), then the tile in registers (the default's register tile).
  for (std::int64_t w : {1, 3, 4, 32}) {
    INFO("split k by " << w);
    auto t = sch::reorder(split_all(f, "k", w), {"k_o", "j", "k_i"});
    CHECK(compare(f, t, standard_sizes()) < 1e-5);
    CHECK(compare(f, sch::cache_write(t, "k_o", "c"), standard_sizes()) < 1e-5);
  }
}

TEST_CASE("reorder, split and bind work on stage II (position space) too", "[schedule][reorder]") {
  using namespace pass_test;
  auto def = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                          sp::out<float, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                          sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto s2 = sp::lower::simplify(stage2(def), ctx(def));
  auto g = sch::bind(sch::split(sch::reorder(s2, {"k", "j"}), "k", 32), "k_i", ir::ForKind::gpu_thread_x);
  CHECK_NOTHROW(ir::verify(g, "schedule"));
  CHECK(body(g) == R"(  block spmm:
    for i in [0, I_len):  # axis I
      for k_o in [0, (K_len + 31) / 32):  # axis K
        for k_i in [0, 32) threadIdx.x:  # axis K
          if k_o * 32 + k_i < K_len:
            c[i, k_o * 32 + k_i] = 0.0f
            for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
              c[i, k_o * 32 + k_i] += a[i, j] * b[i64(J_indices[i, j]), k_o * 32 + k_i]
)");
  // Stage II keeps going: lowering the scheduled function to stage III.
  auto s3 = sp::lower::lower_sparse_buffer(g, ctx(def));
  CHECK_NOTHROW(ir::verify(s3, "lower_sparse_buffer"));
}
