// cache_write: register accumulation with a scalar or a constant tile, init folding, the
// guards of a split loop, partial mode (+ atomic_writeback), preconditions, and C runs
// against the unscheduled kernels.
#include <catch2/catch.hpp>

#include "unit/schedule/schedule_exec_util.hpp"

using namespace sched_test;

TEST_CASE("cache_write: SpMM sums an output element in a register, folding the init", "[schedule][cache_write]") {
  auto f = sch::cache_write(sch::reorder(spmm(), {"k", "j"}), "k", "c");
  CHECK(body(f) == R"(  block spmm:
    for i in [0, I_len):  # axis I
      for k in [0, K_len):  # axis K
        block c_cache:
          alloc c_local: local f32[]
          c_local = 0.0f
          for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
            c_local += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k]
          c[i, k] = c_local
)");
  // The GPU shape: the register lives inside the guard of the split feature loop.
  auto g = sch::cache_write(sch::bind(sch::split(sch::reorder(spmm(), {"k", "j"}), "k", 32), "k_i",
                                      ir::ForKind::gpu_thread_x),
                            "k_i", "c");
  CHECK(body(g) == R"(  block spmm:
    for i in [0, I_len):  # axis I
      for k_o in [0, (K_len + 31) / 32):  # axis K
        for k_i in [0, 32) threadIdx.x:  # axis K
          if k_o * 32 + k_i < K_len:
            block c_cache:
              alloc c_local: local f32[]
              c_local = 0.0f
              for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
                c_local += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_o * 32 + k_i]
              c[i, k_o * 32 + k_i] = c_local
)");
  // SDDMM: one register per nonzero.
  auto s = sch::cache_write(sddmm(), "j", "d");
  CHECK(body(s).find(R"(        block d_cache:
          alloc d_local: local f32[]
          d_local = 0.0f
          for k in [0, K_len) reduction:  # axis K
            d_local += )") != std::string::npos);
  CHECK(body(s).find("          d[J_indptr[i] + j] = d_local\n") != std::string::npos);
}

TEST_CASE("cache_write: a constant tile becomes a local array, guards cover its load and write-back",
          "[schedule][cache_write]") {
  // Inout output (no init): the local starts from the stored values.
  auto f = sch::cache_write(sch::reorder(sch::split(spmm_acc(), "k", 4), {"k_o", "j"}), "k_o", "c");
  CHECK(body(f) == R"(  block spmm_acc:
    for i in [0, I_len):  # axis I
      for k_o in [0, (K_len + 3) / 4):  # axis K
        block c_cache:
          alloc c_local: local f32[4]
          for k_i in [0, 4):  # axis K
            if k_o * 4 + k_i < K_len:
              c_local[k_i] = c[i, k_o * 4 + k_i]
          for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
            for k_i in [0, 4):  # axis K
              if k_o * 4 + k_i < K_len:
                c_local[k_i] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_o * 4 + k_i]
          for k_i in [0, 4):  # axis K
            if k_o * 4 + k_i < K_len:
              c[i, k_o * 4 + k_i] = c_local[k_i]
)");
  // A hand-built tile with an init nest over the same loop, starting at 2.
  ir::Var n("N", DType::i64), j("j", DType::i64), t("t", DType::i64), t0("t", DType::i64), r("r", DType::i64);
  auto y = buffer("y", {c64(8)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n, c64(8)});
  ir::Stmt s = loop(r, c64(0), c64(1),
                    ir::seq({loop(t0, c64(2), c64(4), ir::store(y, {t0}, ir::float_imm(1.0))),
                             loop(j, c64(0), n, loop(t, c64(2), c64(4), ir::reduce(y, {t}, ir::ReduceOp::max, ir::load(x, {j, t}))),
                                  ir::IterKind::reduction)}));
  CHECK(str(sch::cache_write(s, "r", "y")) == R"(for r in [0, 1):  # axis r
  block y_cache:
    alloc y_local: local f32[4]
    for t in [2, 2 + 4):  # axis t
      y_local[t - 2] = 1.0f
    for j in [0, N) reduction:  # axis j
      for t in [2, 2 + 4):  # axis t
        y_local[t - 2] max= x[j, t]
    for t in [2, 2 + 4):  # axis t
      y[t] = y_local[t - 2]
)");
}

TEST_CASE("cache_write: partial mode writes back with a reduction that atomic_writeback can make atomic",
          "[schedule][cache_write]") {
  auto f = sch::split(sch::reorder(spmm_acc(), {"k", "j"}), "j", 8);
  auto p = sch::cache_write(f, "j_o", "c", sch::CacheWriteMode::partial);
  CHECK(body(p) == R"(  block spmm_acc:
    for i in [0, I_len):  # axis I
      for k in [0, K_len):  # axis K
        for j_o in [0, (J_indptr[i + 1] - J_indptr[i] + 7) / 8) reduction:  # axis J
          block c_cache:
            alloc c_local: local f32[]
            c_local = 0.0f
            for j_i in [0, 8) reduction:  # axis J
              if j_o * 8 + j_i < J_indptr[i + 1] - J_indptr[i]:
                c_local += a[J_indptr[i] + (j_o * 8 + j_i)] * b[i64(J_indices[J_indptr[i] + (j_o * 8 + j_i)]), k]
            c[i, k] += c_local
)");
  auto a = sch::atomic_writeback(p, "j_o");
  CHECK(body(a).find("for j_o in [0, (J_indptr[i + 1] - J_indptr[i] + 7) / 8):  # axis J") != std::string::npos);
  CHECK(body(a).find("            atomic c[i, k] += c_local\n") != std::string::npos);
  CHECK(body(a).find("                c_local += ") != std::string::npos);  // per-iteration local stays plain
  // Exact mode writes back with a store, which cannot be combined across blocks.
  CHECK_THROWS_WITH(sch::atomic_writeback(sch::cache_write(f, "j_o", "c"), "j_o"),
                    Catch::Contains("atomic_writeback: loop 'j_o' stores to 'c'") && Catch::Contains("partial mode"));
}

TEST_CASE("cache_write: preconditions", "[schedule][cache_write]") {
  auto r = sch::reorder(spmm(), {"k", "j"});
  CHECK_THROWS_WITH(sch::cache_write(r, "k", "a"),
                    Catch::Contains("cache_write: no reduction into 'a' inside loop 'k' (reductions there: c)"));
  CHECK_THROWS_WITH(sch::cache_write(r, "q", "c"), Catch::Contains("cache_write: no loop named 'q'"));
  // Over i the element varies with k, whose extent is not constant.
  CHECK_THROWS_WITH(sch::cache_write(r, "i", "c"),
                    Catch::Contains("cache_write: the index of 'c' varies over loop 'k', whose extent K_len is not a "
                                    "positive constant") &&
                        Catch::Contains("hint: split that loop"));
  // Atomic reductions and locals.
  auto at = sch::atomic_writeback(r, "j");
  CHECK_THROWS_WITH(sch::cache_write(at, "k", "c"), Catch::Contains("cache_write: the reduction into 'c' is atomic"));
  auto cw = sch::cache_write(r, "k", "c");
  CHECK_THROWS_WITH(sch::cache_write(cw, "j", "c_local"), Catch::Contains("'c_local' is already a local buffer"));

  ir::Var n("N", DType::i64), j("j", DType::i64), q("q", DType::i64), t("t", DType::i64);
  auto y = buffer("y", {c64(8)}, DType::f32, ir::BufferRole::output);
  auto x = buffer("x", {n, c64(8)});
  auto red = [&](ir::Expr idx) { return ir::reduce(y, {idx}, ir::ReduceOp::add, ir::load(x, {j, idx})); };
  // A read of the target inside the loop.
  ir::Stmt reads = loop(q, c64(0), c64(8),
                        loop(j, c64(0), n, ir::seq({red(q), ir::store(y, {c64(0)}, ir::load(y, {q}))}), ir::IterKind::reduction));
  CHECK_THROWS_WITH(sch::cache_write(reads, "q", "y"), Catch::Contains("cache_write: loop 'q' reads 'y' while reducing into it"));
  // Two reductions into the target.
  ir::Stmt two = loop(q, c64(0), c64(8), loop(j, c64(0), n, ir::seq({red(q), red(q)}), ir::IterKind::reduction));
  CHECK_THROWS_WITH(sch::cache_write(two, "q", "y"), Catch::Contains("cache_write: 2 reductions into 'y' inside loop 'q'"));
  // A store that is not the init right before the reduction.
  ir::Stmt late = loop(q, c64(0), c64(8),
                       ir::seq({loop(j, c64(0), n, red(q), ir::IterKind::reduction), ir::store(y, {q}, ir::float_imm(0.0))}));
  CHECK_THROWS_WITH(sch::cache_write(late, "q", "y"), Catch::Contains("cache_write: loop 'q' stores to 'y' besides its reduction"));
  // Several tile iterations hitting one element.
  ir::Stmt folded = loop(q, c64(0), c64(1),
                         loop(j, c64(0), n, loop(t, c64(0), c64(4), red(t / c64(2))), ir::IterKind::reduction));
  CHECK_THROWS_WITH(sch::cache_write(folded, "q", "y"), Catch::Contains("cache_write: no index of 'y' is of the form e + t"));
  // An index computed by a let inside the loop.
  ir::Var l("l", DType::i64);
  ir::Stmt let = loop(q, c64(0), c64(8),
                      loop(j, c64(0), n, ir::let_stmt(l, q + c64(0), red(l)), ir::IterKind::reduction));
  CHECK_THROWS_WITH(sch::cache_write(let, "q", "y"), Catch::Contains("cache_write: the index of 'y' uses 'l', which is computed inside loop 'q'"));
}

TEST_CASE("cache_write: SpMM, SDDMM and column sums compute the same result in C", "[schedule][cache_write][exec]") {
  auto f = spmm();
  auto r = sch::reorder(f, {"k", "j"});
  CHECK(compare(f, sch::cache_write(r, "k", "c"), standard_sizes()) < 1e-5);
  CHECK(compare(f, sch::cache_write(sch::split(r, "k", 4), "k_i", "c"), standard_sizes()) < 1e-5);
  auto g = spmm_acc();
  CHECK(compare(g, sch::cache_write(sch::reorder(sch::split(g, "k", 4), {"k_o", "j"}), "k_o", "c"), standard_sizes()) < 1e-5);
  CHECK(compare(g, sch::cache_write(sch::reorder(sch::split(g, "k", 3), {"k_o", "j"}), "k_o", "c", sch::CacheWriteMode::partial),
                standard_sizes()) < 1e-5);
  CHECK(compare(g, sch::cache_write(sch::split(sch::reorder(g, {"k", "j"}), "j", 8), "j_o", "c", sch::CacheWriteMode::partial),
                standard_sizes()) < 1e-5);
  auto s = sddmm();
  CHECK(compare(s, sch::cache_write(s, "j", "d"), standard_sizes()) < 1e-5);
  auto c = colsum();
  CHECK(compare(c, sch::cache_write(sch::reorder(c, {"k", "i"}), "k", "b"), standard_sizes()) < 1e-5);
}

TEST_CASE("cache_write: a folded init keeps its place after the locals it reads", "[schedule][cache_write][exec]") {
  // Found by the kernel fuzzer (seed 20261207, kernel 181): the init `c[k] = a[k] + t` was
  // hoisted to the front of the register block, above `t = ...`, and read t uninitialised.
  using namespace pass_test;
  auto f = stage3(sp::define_kernel("local_then_init", [](sp::in<float, K> a, sp::in<float, K> b, sp::out<float, K> c,
                                                          sp::iter<K> k) {
    sp::local<float> t(b(k) * 2.0f + 1.0f, "t");
    c(k) = a(k) + t;
    c(k) += b(k) * t;
  }));
  auto g = sch::cache_write(f, "k", "c");
  const std::string text = body(g);
  const auto t_at = text.find("t = "), init_at = text.find("c_local = ");
  REQUIRE(t_at != std::string::npos);
  REQUIRE(init_at != std::string::npos);
  CHECK(t_at < init_at);
  CHECK(compare(f, g, standard_sizes()) < 1e-5);
}

TEST_CASE("cache_write: a guard that reads a local of the loop body stays around the reduction",
          "[schedule][cache_write][exec]") {
  // Found by the kernel fuzzer (seed 20261269783781, a GPU schedule): the guard `t >= 0.5`
  // of `when(t >= 0.5, ...)`, t a local computed inside the cached loop, was taken for a
  // guard on the element and hoisted around the register's load and write-back, where t is
  // out of scope (or, for a buffer written inside the loop, holds another value).
  using namespace pass_test;
  auto f = stage3(sp::define_kernel("guarded_by_local", [](sp::in<float, I, K> x, sp::inout<float, K> c,
                                                           sp::iter<K> k, sp::iter<I> i) {
    sp::local<float> t(x(i, k) * 2.0f, "t");
    sp::when(t >= 0.5f, [&] { c(k) += t; });
  }, std::source_location::current(), {"x", "c"}));
  auto g = sch::cache_write(f, "k", "c");
  const std::string text = body(g);
  INFO(text);
  CHECK(text.find("if t >= 0.5f:\n") != std::string::npos);
  CHECK(text.find("c_local = c[k]") != std::string::npos);
  CHECK(text.find("if t >= 0.5f:\n            c_local = c[k]") == std::string::npos);
  CHECK(compare(f, g, standard_sizes()) < 1e-5);
}
