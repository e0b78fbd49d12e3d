// Schedule primitives (accumulate_locally, set_loop_kind) and the default CPU schedule.
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

TEST_CASE("accumulate_locally: SpMV sums a row in a local, folding the init", "[schedule]") {
  auto f = sp::define_kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                        sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  auto s3 = stage3(f);
  s3.body = sp::schedule::accumulate_locally(s3.body);
  CHECK(body(s3) == R"(  block spmv:
    for i in [0, I_len):  # axis I
      block c_accumulate:
        alloc c_acc: local f32[]
        c_acc = 0.0f
        for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
          c_acc += a[J_indptr[i] + j] * b[J_indices[J_indptr[i] + j]]
        c[i] = c_acc
)");
}

TEST_CASE("accumulate_locally: inout starts from the stored value; targets varying in the loop stay", "[schedule]") {
  auto f = sp::define_kernel("acc", [](sp::in<float, I, J> a, sp::inout<float, I> y, sp::iter<I> i, sp::iter<J> j) {
    y(i) += a(i, j);
  });
  auto s3 = stage3(f);
  s3.body = sp::schedule::accumulate_locally(s3.body);
  CHECK(body(s3).find("b_acc = b[i]") != std::string::npos);
  CHECK(body(s3).find("b[i] = b_acc") != std::string::npos);

  auto g = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto g3 = stage3(g);
  auto before = sp::ir::to_string(g3.body);
  CHECK(sp::ir::to_string(sp::schedule::accumulate_locally(g3.body)) == before);
}

TEST_CASE("set_loop_kind: reduction loops cannot run concurrently", "[schedule]") {
  auto f = sp::define_kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                        sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  auto s3 = stage3(f);
  auto is_j = [](const sp::ir::ForNode& n) { return n.axis == "J"; };
  CHECK_THROWS_WITH(sp::schedule::set_loop_kind(s3.body, is_j, sp::ir::ForKind::parallel),
                    Catch::Contains("it is a reduction loop"));
  CHECK_NOTHROW(sp::schedule::set_loop_kind(s3.body, is_j, sp::ir::ForKind::unrolled));
  auto gpu = sp::schedule::set_loop_kind(s3.body, [](const sp::ir::ForNode& n) { return n.axis == "I"; },
                                         sp::ir::ForKind::gpu_block_x);
  CHECK(sp::ir::to_string(gpu).find("for i in [0, I_len) blockIdx.x:") != std::string::npos);
}

TEST_CASE("schedule_cpu_default: parallel rows, vectorised feature loops", "[schedule][autosched]") {
  auto f = sp::define_kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x, sp::in<float, sp::dense<J>, K> y,
                                         sp::out<float, I, J> c, sp::iter<I> i, sp::iter<J> j,
                                         sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  auto s = sp::autosched::schedule_cpu_default(stage3(f), ctx(f));
  CHECK(body(s) == R"(  block sddmm:
    for i in [0, I_len) parallel:  # axis I
      for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
        block d_accumulate:
          alloc d_acc: local f32[]
          d_acc = 0.0f
          for k in [0, K_len) vectorized reduction:  # axis K
            d_acc += a[J_indptr[i] + j] * b[i, k] * c[J_indices[J_indptr[i] + j], k]
          d[J_indptr[i] + j] = d_acc
)");
  // A reduction-first iteration: only its init nest runs in parallel.
  auto r = sp::define_kernel("colsum", [](sp::in<float, I, K> x, sp::out<float, K> y, sp::iter<I> i, sp::iter<K> k) {
    y(k) += x(i, k);
  });
  auto rs = sp::autosched::schedule_cpu_default(stage3(r), ctx(r));
  CHECK(body(rs) == R"(  block colsum:
    for k in [0, K_len) parallel:  # axis K
      b[k] = 0.0f
    for i in [0, I_len) reduction:  # axis I
      for k in [0, K_len) vectorized:  # axis K
        b[k] += a[i, k]
)");
}
