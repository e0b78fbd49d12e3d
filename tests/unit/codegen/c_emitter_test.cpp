// emit_c: the generated unit is self-contained, follows the ABI, outlines parallel loops
// and compiles; symbols are deterministic.
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

namespace {
sp::driver::Lowered lower(const sp::ir::Function& f) {
  sp::driver::PipelineOptions o;
  o.context.kernel = f.name;
  return sp::driver::lower_to_c(f, o);
}
auto spmm_def() {
  return sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                      sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
}
}  // namespace

TEST_CASE("emit_c: self-contained unit with the documented entry point", "[codegen]") {
  auto r = lower(spmm_def());
  const std::string& src = r.source.source;
  CHECK(src.find("#include") == std::string::npos);
  CHECK(r.source.symbol.rfind("spindle_spmm_", 0) == 0);
  CHECK(r.source.symbol.size() == std::string("spindle_spmm_").size() + 16);
  CHECK(src.find("int " + r.source.symbol +
                 "(void* const* buffers, const long long* scalars, const spindle_rt* rt) {") != std::string::npos);
  // The body takes the buffers as restrict parameters (inputs const); the entry unpacks the
  // ABI arrays into a call.
  CHECK(src.find("static void spmm_body(const float* __restrict a, const float* __restrict b, float* __restrict c, "
                 "const int* __restrict J_indptr, const int* __restrict J_indices, const long long I_len, "
                 "const long long J_len, const long long J_nnz, const long long K_len, const spindle_rt* rt) {") !=
        std::string::npos);
  CHECK(src.find("spmm_body((const float*)buffers[0], (const float*)buffers[1], (float*)buffers[2], "
                 "(const int*)buffers[3], (const int*)buffers[4], scalars[0], scalars[1], scalars[2], scalars[3], rt);") !=
        std::string::npos);
  // The parallel row loop is outlined and handed to the runtime pool.
  CHECK(src.find("static void spmm_parallel(void* spindle_closure, long long spindle_begin, long long spindle_end)") !=
        std::string::npos);
  CHECK(src.find("static void spmm_parallel_range(") != std::string::npos);
  CHECK(src.find("rt->parallel_for(rt->pool, i_extent, 0, spmm_parallel, &spindle_args);") != std::string::npos);
  CHECK(src.find("SPINDLE_VECTORIZE\n") != std::string::npos);
  // The feature loop is register-tiled: a local tile accumulates over the row's nonzeros,
  // first in the version for K equal to a narrower width, then in the cascade's widest tiles.
  CHECK(src.find("if (K_len == 32) {") != std::string::npos);
  CHECK(src.find("float c_tile[32];") != std::string::npos);
  CHECK(src.find("c_tile[k_1] += a[J_indptr[i] + j] * b[((long long)J_indices[J_indptr[i] + j]) * K_len + (k_tile * 32 + k_1)];") !=
        std::string::npos);
  CHECK(src.find("float c_tile_3[64];") != std::string::npos);
  CHECK(src.find("for (long long i = spindle_begin; i < spindle_end; ++i) {") != std::string::npos);
}

TEST_CASE("emit_c: reductions get reassociation (vector) or a compact add chain (scalar)", "[codegen]") {
  auto sddmm = lower(sp::define_kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x,
                                                   sp::in<float, sp::dense<J>, K> y, sp::out<float, I, J> c,
                                                   sp::iter<I> i, sp::iter<J> j,
                                                   sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); }));
  // In both versions of the loop over the nonzeros (prefetch_gathers).
  CHECK(sddmm.source.source.find("SPINDLE_VECTORIZE\n          for (long long k = 0, k_end = K_len; k < k_end; ++k) {\n"
                                 "            SPINDLE_REASSOCIATE\n") != std::string::npos);
  CHECK(sddmm.source.source.find("SPINDLE_VECTORIZE\n          for (long long k = 0, k_end_1 = K_len; k < k_end_1; ++k) {\n"
                                 "            SPINDLE_REASSOCIATE\n") != std::string::npos);
  auto spmv = lower(sp::define_kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x,
                                                 sp::out<float, I> y, sp::iter<I> i,
                                                 sp::iter<J> j) { y(i) += a(i, j) * x(j); }));
  CHECK(spmv.source.source.find("SPINDLE_SCALAR_CHAIN\n") != std::string::npos);
  CHECK(spmv.source.source.find("SPINDLE_NO_CONTRACT\n") != std::string::npos);
}

TEST_CASE("emit_c: rfactor's partial sums loop stays compact, its vector lanes do not need to", "[codegen]") {
  auto spmv_def = [] {
    return sp::define_kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                        sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  };
  auto lower_with = [&](sp::Schedule s) {
    sp::driver::PipelineOptions o;
    o.context.kernel = "spmv";
    o.context.schedule = std::move(s);
    return sp::driver::lower_to_c(spmv_def(), o).source.source;
  };
  // The loop over groups of lanes adds into the partials with no unrolling (one exit branch
  // per row, not three); the tail is one guarded group, lane l taking term l (no chain).
  sp::Schedule four;
  four.rfactor("j", 4).parallel("i");
  const std::string src4 = lower_with(four);
  CHECK(src4.find("SPINDLE_SCALAR_CHAIN\n      for (long long j_o = 0") != std::string::npos);
  CHECK(src4.find("      for (long long j_lane_2 = 0; j_lane_2 < 4; ++j_lane_2) {\n"
                  "        if (j_lane_2 < J_indptr[i + 1] - J_indptr[i] - (J_indptr[i + 1] - J_indptr[i]) / 4 * 4) {\n"
                  "          c_partial[j_lane_2] += ") != std::string::npos);
  CHECK(src4.find("j_t") == std::string::npos);
  // The lanes themselves (constant extent) are left to the compiler to unroll.
  CHECK(src4.find("SPINDLE_SCALAR_CHAIN\n        for (long long j_lane") == std::string::npos);
  // Vectorised lanes: the group loop is not marked; the tail is one masked vector step.
  sp::Schedule eight;
  eight.rfactor("j", 8).vectorize("j_lane").parallel("i");
  const std::string src8 = lower_with(eight);
  CHECK(src8.find("SPINDLE_SCALAR_CHAIN\n      for (long long j_o = 0") == std::string::npos);
  CHECK(src8.find("SPINDLE_NO_VECTORIZE\n      for (long long j_o = 0") != std::string::npos);
  CHECK(src8.find("SPINDLE_VECTORIZE\n      for (long long j_lane_2 = 0; j_lane_2 < 8; ++j_lane_2) {\n"
                  "        if (j_lane_2 < ") != std::string::npos);
}

TEST_CASE("emit_c: equal kernels get equal symbols, different kernels different ones", "[codegen]") {
  auto a = lower(spmm_def()), b = lower(spmm_def());
  CHECK(a.source.symbol == b.source.symbol);
  CHECK(a.source.source == b.source.source);
  auto c = lower(sp::define_kernel("spmm", [](sp::in<double, I, J> a, sp::in<double, sp::dense<J>, K> b,
                                              sp::out<double, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                              sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); }));
  CHECK(c.source.symbol != a.source.symbol);
}

TEST_CASE("emit_c: searches, locals, math and min/max become C helpers", "[codegen]") {
  auto f = sp::define_kernel("mix", [](sp::in<double, I, J> a, sp::out<double, I, sp::dense<J>> d, sp::iter<I> i,
                                       sp::iter<sp::dense<J>> j) {
    sp::local<double> t(sp::exp(a(i, j)), "t");
    d(i, j) = sp::max(t, sp::sqrt(t + 1.0)) - sp::infinity<double>() * 0.0;
  });
  auto src = lower(f).source.source;
  CHECK(src.find("spindle_find_i32(J_indices, J_indptr[i], J_indptr[i + 1], j_dense)") != std::string::npos);
  CHECK(src.find("double t;") != std::string::npos);
  CHECK(src.find("__builtin_exp(") != std::string::npos);
  CHECK(src.find("spindle_max_f64(t, __builtin_sqrt(t + 1.0))") != std::string::npos);
  CHECK(src.find("__builtin_inf()") != std::string::npos);
}

TEST_CASE("emit_c: GCC's ivdep only on vectorised loops whose iterations touch distinct elements", "[codegen][ivdep]") {
  // Issue 8 §1.6: `#pragma GCC ivdep` on a loop that scatters through an index array let GCC
  // vectorise a loop-carried dependence (8 became 1 on one machine).
  namespace ir = sp::ir;
  auto buffer = [](const char* name, sp::DType t) {
    ir::BufferNode b;
    b.name = name;
    b.dtype = t;
    b.role = ir::BufferRole::inout;
    b.shape = {ir::int_imm(16)};
    return ir::make_buffer(std::move(b));
  };
  ir::Buffer y = buffer("y", sp::DType::f32), idx = buffer("idx", sp::DType::i32);
  ir::Var v("v", sp::DType::i64), base("base", sp::DType::i64);
  auto loop = [&](ir::Stmt body) {
    return ir::for_loop(v, ir::int_imm(0), ir::int_imm(8), ir::ForKind::vectorized, ir::IterKind::spatial, "K", body);
  };
  auto one = ir::float_imm(1.0);
  using sp::codegen::detail::independent_iterations;
  // y[v] += 1, y[base + v] += 1, y[2 * v] = y[2 * v] + 1: distinct elements per iteration.
  CHECK(independent_iterations(*loop(ir::reduce(y, {v}, ir::ReduceOp::add, one)).as<ir::ForNode>()));
  CHECK(independent_iterations(*loop(ir::reduce(y, {ir::Expr(base) + ir::Expr(v)}, ir::ReduceOp::add, one))
                                    .as<ir::ForNode>()));
  ir::Expr two_v = ir::int_imm(2) * ir::Expr(v);
  CHECK(independent_iterations(
      *loop(ir::store(y, {two_v}, ir::load(y, {two_v}) + one)).as<ir::ForNode>()));
  // y[idx[v]] += 1: a scatter, two iterations may hit one element.
  ir::Expr scatter = ir::cast(sp::DType::i64, ir::load(idx, {v}));
  CHECK_FALSE(independent_iterations(*loop(ir::reduce(y, {scatter}, ir::ReduceOp::add, one)).as<ir::ForNode>()));
  // y[base] += 1 (every iteration the same element) and y[v] = y[v + 1] (reads another
  // iteration's element).
  CHECK_FALSE(independent_iterations(*loop(ir::reduce(y, {base}, ir::ReduceOp::add, one)).as<ir::ForNode>()));
  CHECK_FALSE(independent_iterations(
      *loop(ir::store(y, {v}, ir::load(y, {ir::Expr(v) + 1}))).as<ir::ForNode>()));
  // y[v * base]: a stride that may be 0 is not a proof.
  CHECK_FALSE(independent_iterations(
      *loop(ir::reduce(y, {ir::Expr(v) * ir::Expr(base)}, ir::ReduceOp::add, one)).as<ir::ForNode>()));
}

TEST_CASE("emit_c: the SpMM feature loop keeps its independence hint", "[codegen][ivdep]") {
  auto r = lower(spmm_def());
  CHECK(r.source.source.find("SPINDLE_INDEPENDENT\n") != std::string::npos);
  CHECK(r.source.source.find("#define SPINDLE_INDEPENDENT _Pragma(\"GCC ivdep\")") != std::string::npos);
  CHECK(r.source.source.find("#define SPINDLE_VECTORIZE _Pragma(\"GCC ivdep\")") == std::string::npos);
}
