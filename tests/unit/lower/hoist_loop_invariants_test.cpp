// hoist_loop_invariants: searches and guards leave the loops they do not depend on.
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

TEST_CASE("hoist_loop_invariants: the binary search leaves the feature loop", "[lower][hoist]") {
  auto f = sp::define_kernel("dj", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                      sp::iter<I> i, sp::iter<sp::dense<J>> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto s3 = stage3(f);
  auto h = sp::lower::hoist_loop_invariants(s3, ctx(f));
  CHECK(body(h) == R"(  block dj:
    for i in [0, I_len):  # axis I
      for k in [0, K_len):  # axis K
        c[i, k] = 0.0f
      for j_dense in [0, J_len) reduction:  # axis J_dense
        let J_pos: i64 = find(J_indices, J_indptr[i], J_indptr[i + 1], j_dense)
        for k in [0, K_len):  # axis K
          c[i, k] += select(J_pos >= 0, a[J_indptr[i] + J_pos], 0.0f) * b[j_dense, k]
)");
}

TEST_CASE("hoist_loop_invariants: invariant guards are unswitched, variant ones stay", "[lower][hoist]") {
  // Built by hand: since writes may no longer fall outside a pattern (docs/language.md §4),
  // no kernel produces a guarded write; schedules may still create such guards.
  namespace ir = sp::ir;
  ir::Var n("n", sp::DType::i64), m("m", sp::DType::i64), i("i", sp::DType::i64), k("k", sp::DType::i64);
  ir::BufferNode yb;
  yb.name = "y";
  yb.role = ir::BufferRole::output;
  yb.shape = {n, m};
  ir::Buffer y = ir::make_buffer(std::move(yb));
  auto store = ir::store(y, {i, k}, ir::float_imm(1.0));
  ir::Stmt inner = ir::for_loop(k, ir::int_imm(0), m, ir::ForKind::serial, ir::IterKind::spatial, "K",
                                ir::if_then_else(ir::Expr(k) < ir::Expr(i), store));
  ir::Function f;
  f.name = "guards";
  f.stage = ir::Stage::flat;
  f.buffers.push_back({y, {ir::ParamOrigin::values, 0, nullptr}});
  f.scalars = {{n, {ir::ParamOrigin::scalar, 1, nullptr}}, {m, {ir::ParamOrigin::scalar, 2, nullptr}}};
  f.body = ir::for_loop(i, ir::int_imm(0), n, ir::ForKind::serial, ir::IterKind::spatial, "I",
                        ir::if_then_else(ir::Expr(m) > ir::int_imm(2), inner));
  auto h = sp::lower::hoist_loop_invariants(f, ctx(f));
  CHECK(body(h) == R"(  if m > 2:
    for i in [0, n):  # axis I
      for k in [0, m):  # axis K
        if k < i:
          y[i, k] = 1.0f
)");
}
