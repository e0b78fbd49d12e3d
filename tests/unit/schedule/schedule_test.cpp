// Schedule primitives (accumulate_locally, set_loop_kind) and the default CPU schedule.
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"
#include "unit/schedule/schedule_exec_util.hpp"

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
          c_acc += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j])]
        c[i] = c_acc
)");
}

TEST_CASE("accumulate_locally: inout sums from the identity and adds into the stored value, targets varying in the "
          "loop stay",
          "[schedule]") {
  auto f = sp::define_kernel("acc", [](sp::in<float, I, J> a, sp::inout<float, I> y, sp::iter<I> i, sp::iter<J> j) {
    y(i) += a(i, j);
  });
  auto s3 = stage3(f);
  s3.body = sp::schedule::accumulate_locally(s3.body);
  INFO(body(s3));
  // The loop's chain does not wait for the load of y[i]: it starts from 0, y[i] += at the end.
  CHECK(body(s3).find("b_acc = 0.0f") != std::string::npos);
  CHECK(body(s3).find("b[i] += b_acc") != std::string::npos);
  CHECK(body(s3).find("b_acc = b[i]") == std::string::npos);

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
  // The loop over the nonzeros in two versions: with rows of c prefetched 8 nonzeros ahead
  // for rows of at least 256 bytes (prefetch_gathers), else as it was.
  CHECK(body(s) == R"(  block sddmm:
    for i in [0, I_len) parallel:  # axis I
      if 63 < K_len:
        for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
          if j + 8 < 0 + (J_indptr[i + 1] - J_indptr[i]):
            for k_line in [0, (K_len + 15) / 16):
              prefetch c[i64(J_indices[J_indptr[i] + (j + 8)]), 0 + k_line * 16]
          block d_accumulate:
            alloc d_acc: local f32[]
            d_acc = 0.0f
            for k in [0, K_len) vectorized reduction:  # axis K
              d_acc += a[J_indptr[i] + j] * b[i, k] * c[i64(J_indices[J_indptr[i] + j]), k]
            d[J_indptr[i] + j] = d_acc
      else:
        for j in [0, J_indptr[i + 1] - J_indptr[i]):  # axis J
          block d_accumulate:
            alloc d_acc: local f32[]
            d_acc = 0.0f
            for k in [0, K_len) vectorized reduction:  # axis K
              d_acc += a[J_indptr[i] + j] * b[i, k] * c[i64(J_indices[J_indptr[i] + j]), k]
            d[J_indptr[i] + j] = d_acc
)");
  // A reduction-first iteration (column sums): register tiling turns the feature loop into
  // tiles that are spatial, so the tiles run in parallel and sum over i in registers.
  auto r = sp::define_kernel("colsum", [](sp::in<float, I, K> x, sp::out<float, K> y, sp::iter<I> i, sp::iter<K> k) {
    y(k) += x(i, k);
  });
  auto rs = body(sp::autosched::schedule_cpu_default(stage3(r), ctx(r)));
  CHECK(rs.find("for k_tile in [0, (K_len - 0) / 64) parallel:") != std::string::npos);
  CHECK(rs.find("for i in [0, I_len) reduction:") != std::string::npos);
  CHECK(rs.find("b_tile[k] += a[i, 0 + k_tile * 64 + k]") != std::string::npos);
}

TEST_CASE("prefetch_gathers: only whole rows of a run-time length gathered by a column index", "[schedule][autosched]") {
  // SpMM: its rows are register tiles of constant widths (prefetching them was slower).
  auto spmm = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                           sp::out<float, I, K> c, sp::iter<I> i, sp::iter<J> j,
                                           sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  CHECK(body(sp::autosched::schedule_cpu_default(stage3(spmm), ctx(spmm))).find("prefetch") == std::string::npos);
  // SpMV: one element per nonzero, no row.
  auto spmv = sp::define_kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x,
                                           sp::out<float, I> y, sp::iter<I> i,
                                           sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  CHECK(body(sp::autosched::schedule_cpu_default(stage3(spmv), ctx(spmv))).find("prefetch") == std::string::npos);
  // A row read without an indirection (x's row i in SDDMM is not prefetched; y's row is).
  auto sddmm = sp::define_kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x,
                                             sp::in<float, sp::dense<J>, K> y, sp::out<float, I, J> c,
                                             sp::iter<I> i, sp::iter<J> j,
                                             sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
  const std::string s = body(sp::autosched::schedule_cpu_default(stage3(sddmm), ctx(sddmm)));
  CHECK(s.find("prefetch c[") != std::string::npos);
  CHECK(s.find("prefetch b[") == std::string::npos);
  // The pass itself on SDDMM's stage III: the row loop i is left as it is (the gather uses j,
  // bound inside it); the loop over the nonzeros is the one versioned.
  auto st = stage3(sddmm);
  auto direct = sp::ir::to_string(sp::schedule::prefetch_gathers(st.body, [](const sp::ir::ForNode& f) {
    return f.axis == "K";
  }));
  CHECK(direct.find("if 63 < K_len:") != std::string::npos);
  CHECK(direct.find("if j + 8 < 0 + (J_indptr[i + 1] - J_indptr[i]):") != std::string::npos);
}

TEST_CASE("register_tile: SpMM keeps cascading output tiles in registers", "[schedule]") {
  auto f = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto s3 = stage3(f);
  CHECK(sp::schedule::tile_widths(512, sp::DType::f32) == std::vector<std::int64_t>{128, 64, 32, 16});
  CHECK(sp::schedule::tile_widths(256, sp::DType::f64) == std::vector<std::int64_t>{32, 16, 8, 4});
  auto t = sp::lower::simplify(sp::schedule::register_tile(s3.body, 128));
  CHECK(sp::ir::to_string(t) == R"(block spmm:
  for i in [0, I_len):  # axis I
    if K_len == 16:
      for k_tile in [0, K_len / 16):  # axis K
        block c_register_tile:
          alloc c_tile: local f32[16]
          for k in [0, 16):  # axis K
            c_tile[k] = 0.0f
          for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
            for k in [0, 16):  # axis K
              c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_tile * 16 + k]
          for k in [0, 16):  # axis K
            c[i, k_tile * 16 + k] = c_tile[k]
    else:
      if K_len == 8:
        for k_tile in [0, K_len / 8):  # axis K
          block c_register_tile:
            alloc c_tile: local f32[8]
            for k in [0, 8):  # axis K
              c_tile[k] = 0.0f
            for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
              for k in [0, 8):  # axis K
                c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_tile * 8 + k]
            for k in [0, 8):  # axis K
              c[i, k_tile * 8 + k] = c_tile[k]
      else:
        if K_len == 4:
          for k_tile in [0, K_len / 4):  # axis K
            block c_register_tile:
              alloc c_tile: local f32[4]
              for k in [0, 4):  # axis K
                c_tile[k] = 0.0f
              for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
                for k in [0, 4):  # axis K
                  c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_tile * 4 + k]
              for k in [0, 4):  # axis K
                c[i, k_tile * 4 + k] = c_tile[k]
        else:
          for k_tile in [0, K_len / 32):  # axis K
            block c_register_tile:
              alloc c_tile: local f32[32]
              for k in [0, 32):  # axis K
                c_tile[k] = 0.0f
              for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
                for k in [0, 32):  # axis K
                  c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_tile * 32 + k]
              for k in [0, 32):  # axis K
                c[i, k_tile * 32 + k] = c_tile[k]
          let k_done0: i64 = K_len / 32 * 32
          for k_tile in [0, (K_len - k_done0) / 16):  # axis K
            block c_register_tile:
              alloc c_tile: local f32[16]
              for k in [0, 16):  # axis K
                c_tile[k] = 0.0f
              for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
                for k in [0, 16):  # axis K
                  c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_done0 + k_tile * 16 + k]
              for k in [0, 16):  # axis K
                c[i, k_done0 + k_tile * 16 + k] = c_tile[k]
          let k_done1: i64 = k_done0 + (K_len - k_done0) / 16 * 16
          for k_tile in [0, (K_len - k_done1) / 8):  # axis K
            block c_register_tile:
              alloc c_tile: local f32[8]
              for k in [0, 8):  # axis K
                c_tile[k] = 0.0f
              for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
                for k in [0, 8):  # axis K
                  c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_done1 + k_tile * 8 + k]
              for k in [0, 8):  # axis K
                c[i, k_done1 + k_tile * 8 + k] = c_tile[k]
          let k_done2: i64 = k_done1 + (K_len - k_done1) / 8 * 8
          for k_tile in [0, (K_len - k_done2) / 4):  # axis K
            block c_register_tile:
              alloc c_tile: local f32[4]
              for k in [0, 4):  # axis K
                c_tile[k] = 0.0f
              for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
                for k in [0, 4):  # axis K
                  c_tile[k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k_done2 + k_tile * 4 + k]
              for k in [0, 4):  # axis K
                c[i, k_done2 + k_tile * 4 + k] = c_tile[k]
          let k_done3: i64 = k_done2 + (K_len - k_done2) / 4 * 4
          if k_done3 < K_len:
            for k in [k_done3, k_done3 + K_len - k_done3):  # axis K
              c[i, k] = 0.0f
            for j in [0, J_indptr[i + 1] - J_indptr[i]) reduction:  # axis J
              for k in [k_done3, k_done3 + K_len - k_done3):  # axis K
                c[i, k] += a[J_indptr[i] + j] * b[i64(J_indices[J_indptr[i] + j]), k]
)");
  // Ragged rows (a dense_variable inner loop reads indptr for its extent) are left alone.
  auto g = sp::define_kernel("rag", [](sp::in<float, Bt, R> a, sp::out<float, Bt> c, sp::iter<Bt> b, sp::iter<R> r) {
    c(b) += a(b, r);
  });
  auto g3 = stage3(g);
  CHECK(sp::ir::to_string(sp::schedule::register_tile(g3.body, 512)) == sp::ir::to_string(g3.body));
}

namespace {
struct K8 : sp::dense_fixed_n<8> {};
struct K200 : sp::dense_fixed_n<200> {};
}  // namespace

TEST_CASE("register_tile: a compile-time extent up to the widest tile is one tile of exactly that width",
          "[schedule]") {
  // 8 floats (sliced-ELL lanes, block columns): one 8-wide tile, no cascade of tiles that run
  // zero times and no remainder nest accumulating in memory.
  auto f = sp::define_kernel("k8", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K8> b,
                                      sp::out<float, I, K8> c, sp::iter<I> i, sp::iter<J> j,
                                      sp::iter<K8> k) { c(i, k) += a(i, j) * b(j, k); });
  const std::string t = sp::ir::to_string(sp::lower::simplify(sp::schedule::register_tile(stage3(f).body, 512)));
  CHECK_THAT(t, Catch::Contains("alloc c_tile: local f32[8]"));
  CHECK_THAT(t, !Catch::Contains("k8_done") && !Catch::Contains("f32[128]") && !Catch::Contains("f32[16]"));
  CHECK_THAT(t, Catch::Contains("for k8_tile in [0, 1):"));
  // 200 > 128: the cascade as for a runtime extent (128, then 64 ... on the rest).
  auto g = sp::define_kernel("k200", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K200> b,
                                        sp::out<float, I, K200> c, sp::iter<I> i, sp::iter<J> j,
                                        sp::iter<K200> k) { c(i, k) += a(i, j) * b(j, k); });
  const std::string u = sp::ir::to_string(sp::lower::simplify(sp::schedule::register_tile(stage3(g).body, 512)));
  CHECK_THAT(u, Catch::Contains("alloc c_tile: local f32[128]") && Catch::Contains("k200_done0"));
}

TEST_CASE("register_tile: a nest that reads the buffer it reduces into is left alone (spindle-kernel-fuzz seed 7000097)",
          "[schedule]") {
  // b(k) max= (b(k) + a(i)) * 0.5 over i: each update reads the one before it (docs/language.md).
  // In a tile the read would see b as it was before the reduction, not the running maximum.
  auto f = sp::define_kernel("selfread", [](sp::in<float, I> a, sp::inout<float, K> b, sp::iter<I> i, sp::iter<K> k) {
    b(k).max_with((b(k) + a(i)) * 0.5f);
  });
  auto f3 = stage3(f);
  CHECK(sp::ir::to_string(sp::schedule::register_tile(f3.body, 512)) == sp::ir::to_string(f3.body));
  // The same nest without the read is tiled.
  auto g = sp::define_kernel("noread", [](sp::in<float, I> a, sp::inout<float, K> b, sp::iter<I> i, sp::iter<K> k) {
    b(k).max_with(a(i) * 0.5f);
  });
  CHECK_THAT(sp::ir::to_string(sp::schedule::register_tile(stage3(g).body, 512)), Catch::Contains("b_tile"));
}

TEST_CASE("register_tile: two-dimensional tiles share each load of W between six output rows (GEMM)",
          "[schedule]") {
  // c(i, k) = sum_jd x(i, jd) w(jd, k): the reduction does not depend on i, and w's row is
  // read independently of i, so six rows accumulate together (6 x 16 floats for 256-bit
  // vectors), then 6 x 8; the last K % 8 columns and the last I % 6 rows as before.
  auto f = sp::define_kernel("gemm", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, sp::dense<J>, K> w,
                                        sp::out<float, I, K> c, sp::iter<I> i, sp::iter<sp::dense<J>> jd,
                                        sp::iter<K> k) { c(i, k) += x(i, jd) * w(jd, k); });
  auto f3 = stage3(f);
  const std::string t = sp::ir::to_string(sp::lower::simplify(sp::schedule::register_tile(f3.body, 256)));
  CHECK_THAT(t, Catch::Contains("for i_rows in [0, I_len / 6):"));
  CHECK_THAT(t, Catch::Contains("alloc c_tile: local f32[96]") && Catch::Contains("alloc c_tile: local f32[48]"));
  CHECK_THAT(t, Catch::Contains("c_tile[i_row * 16 + k] += a[i_rows * 6 + i_row, j_dense] * b[j_dense, k_tile * 16 + k]"));
  CHECK_THAT(t, Catch::Contains("for i in [I_len / 6 * 6, "));  // the last rows: one-row tiles
  auto scheduled = f3;
  scheduled.body = sp::schedule::register_tile(f3.body, 256);
  std::vector<sched_test::Sizes> sizes = sched_test::standard_sizes();
  for (sched_test::Sizes s : {sched_test::Sizes{6, 16, 16}, {12, 5, 24}, {19, 7, 40}, {25, 3, 23}, {5, 9, 33}})
    sizes.push_back(s);
  // The same sums in the same order; -ffp-contract=fast may fuse other multiply-adds into FMAs
  // in the two programs, hence rounding-level differences.
  CHECK(sched_test::compare(f3, scheduled, sizes) < 1e-6);

  // Accumulating into an inout C (no init): the tiles start from C's values.
  auto g = sp::define_kernel("gemm_acc", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, sp::dense<J>, K> w,
                                            sp::inout<float, I, K> c, sp::iter<I> i, sp::iter<sp::dense<J>> jd,
                                            sp::iter<K> k) { c(i, k) += x(i, jd) * w(jd, k); });
  auto g3 = stage3(g);
  auto gs = g3;
  gs.body = sp::schedule::register_tile(g3.body, 256);
  CHECK_THAT(sp::ir::to_string(gs.body), Catch::Contains("i_rows"));
  CHECK(sched_test::compare(g3, gs, sizes) < 1e-6);

  // Nothing shared between rows (every read depends on i) or a nest that depends on i (SpMM's
  // row): one-row tiles only.
  auto h = sp::define_kernel("rowwise", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, I, K> y,
                                           sp::out<float, I, K> c, sp::iter<I> i, sp::iter<sp::dense<J>> jd,
                                           sp::iter<K> k) { c(i, k) += x(i, jd) * y(i, k); });
  CHECK_THAT(sp::ir::to_string(sp::schedule::register_tile(stage3(h).body, 256)), !Catch::Contains("i_rows"));
  CHECK_THAT(sp::ir::to_string(sp::schedule::register_tile(sched_test::spmm().body, 256)), !Catch::Contains("i_rows"));
}

struct BI3 : sp::dense_fixed_n<3> {};
struct BJ3 : sp::dense_fixed_n<3> {};
struct R10 : sp::dense_fixed_n<10> {};

TEST_CASE("register_tile: a block's rows of compile-time extent are one two-dimensional tile (BSR 3x3)",
          "[schedule]") {
  // c(i, bi, k) += a(i, j, bi, bj) b(j, bj, k): the block row's nest (j, bj, k) does not
  // depend on bi and b's row is read independently of bi, so the 3 rows of a block
  // accumulate together, 3 x 4 vectors (3 x 64 floats with 512-bit vectors), then 3 x 2, 3 x 1;
  // no row is left to a one-row tile.
  auto f = sp::define_kernel("bsr3", [](sp::in<float, I, J, BI3, BJ3> a, sp::in<float, sp::dense<J>, BJ3, K> b,
                                        sp::out<float, I, BI3, K> c, sp::iter<I> i, sp::iter<BI3> bi, sp::iter<J> j,
                                        sp::iter<BJ3> bj, sp::iter<K> k) { c(i, bi, k) += a(i, j, bi, bj) * b(j, bj, k); });
  auto f3 = stage3(f);
  const std::string t = sp::ir::to_string(sp::lower::simplify(sp::schedule::register_tile(f3.body, 512)));
  INFO(t);
  CHECK_THAT(t, Catch::Contains("alloc c_tile: local f32[192]") && Catch::Contains("alloc c_tile: local f32[96]") &&
                    Catch::Contains("alloc c_tile: local f32[48]"));
  CHECK_THAT(t, Catch::Contains("for bi3_row in [0, 3):") && !Catch::Contains("bi3_rows"));
  CHECK_THAT(t, !Catch::Contains("alloc c_tile: local f32[64]"));  // no one-row tiles
  auto scheduled = f3;
  scheduled.body = sp::schedule::register_tile(f3.body, 512);
  std::vector<sched_test::Sizes> sizes = sched_test::standard_sizes();
  for (sched_test::Sizes s : {sched_test::Sizes{6, 16, 64}, {12, 5, 112}, {9, 7, 129}, {4, 3, 17}}) sizes.push_back(s);
  CHECK(sched_test::compare(f3, scheduled, sizes) < 1e-6);

  // 10 rows (more than 8): blocks of 6 rows, the last 4 one row at a time, as for a runtime extent.
  auto g = sp::define_kernel("rows10", [](sp::in<float, R10, sp::dense<J>> x, sp::in<float, sp::dense<J>, K> w,
                                          sp::out<float, R10, K> c, sp::iter<R10> r, sp::iter<sp::dense<J>> jd,
                                          sp::iter<K> k) { c(r, k) += x(r, jd) * w(jd, k); });
  auto g3 = stage3(g);
  const std::string u = sp::ir::to_string(sp::lower::simplify(sp::schedule::register_tile(g3.body, 512)));
  INFO(u);
  CHECK_THAT(u, Catch::Contains("alloc c_tile: local f32[192]") && Catch::Contains("for r10_rows in [0, 1):") &&
                    Catch::Contains("for r10 in [6, "));
  auto gs = g3;
  gs.body = sp::schedule::register_tile(g3.body, 512);
  CHECK(sched_test::compare(g3, gs, sizes) < 1e-6);
}

TEST_CASE("register_tile: several updates of one element in the inner loop accumulate on one tile (two GEMM "
          "products summed)",
          "[schedule]") {
  // c(i, k) = sum_jd x(i, jd) w(jd, k) + y(i, jd) v(jd, k), written as two updates: each
  // becomes an update of the tile, in order (two multiply-adds per element and jd), with the
  // two-dimensional tiles of a GEMM.
  auto f = sp::define_kernel("pair", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, sp::dense<J>, K> w,
                                        sp::in<float, I, sp::dense<J>> y, sp::in<float, sp::dense<J>, K> v,
                                        sp::out<float, I, K> c, sp::iter<I> i, sp::iter<sp::dense<J>> jd,
                                        sp::iter<K> k) {
    c(i, k) += x(i, jd) * w(jd, k);
    c(i, k) += y(i, jd) * v(jd, k);
  });
  auto f3 = stage3(f);
  const std::string t = sp::ir::to_string(sp::lower::simplify(sp::schedule::register_tile(f3.body, 256)));
  CHECK_THAT(t, Catch::Contains("for i_rows in [0, I_len / 6):"));
  const std::string first = "e_tile[i_row * 16 + k] += a[i_rows * 6 + i_row, j_dense] * b[j_dense, k_tile * 16 + k]";
  const std::string second = "e_tile[i_row * 16 + k] += c[i_rows * 6 + i_row, j_dense] * d[j_dense, k_tile * 16 + k]";
  REQUIRE(t.find(first) != std::string::npos);
  CHECK(t.find(second, t.find(first)) == t.find('\n', t.find(first)) + 1 + 14);  // the next line
  auto scheduled = f3;
  scheduled.body = sp::schedule::register_tile(f3.body, 256);
  std::vector<sched_test::Sizes> sizes = sched_test::standard_sizes();
  for (sched_test::Sizes s : {sched_test::Sizes{6, 16, 16}, {12, 5, 24}, {19, 7, 40}, {25, 3, 23}, {1, 1, 1}})
    sizes.push_back(s);
  CHECK(sched_test::compare(f3, scheduled, sizes) < 1e-6);
  // One-row tiles (512-bit vectors, SpMM-like rows): the same updates, the same sums.
  auto one = f3;
  one.body = sp::schedule::register_tile(f3.body, 512);
  CHECK(sched_test::compare(f3, one, sizes) < 1e-6);

  // Updates of two outputs in one loop: no tile holds both, the nest is left alone.
  auto g = sp::define_kernel("two_outputs", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, sp::dense<J>, K> w,
                                               sp::out<float, I, K> c, sp::out<float, I, K> d, sp::iter<I> i,
                                               sp::iter<sp::dense<J>> jd, sp::iter<K> k) {
    c(i, k) += x(i, jd) * w(jd, k);
    d(i, k) += x(i, jd) * w(jd, k);
  });
  auto g3 = stage3(g);
  CHECK(sp::ir::to_string(sp::schedule::register_tile(g3.body, 256)) == sp::ir::to_string(g3.body));
  // A second update that reads the element (each update depends on the one before): left alone.
  auto h = sp::define_kernel("reads_back", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, sp::dense<J>, K> w,
                                              sp::inout<float, I, K> c, sp::iter<I> i, sp::iter<sp::dense<J>> jd,
                                              sp::iter<K> k) {
    c(i, k) += x(i, jd) * w(jd, k);
    c(i, k) += c(i, k) * 0.5f;
  });
  auto h3 = stage3(h);
  CHECK(sp::ir::to_string(sp::schedule::register_tile(h3.body, 256)) == sp::ir::to_string(h3.body));
}

TEST_CASE("partition_indirect_writes: a scatter runs one block per thread with ownership tests, other writes keep "
          "the nest serial",
          "[schedule][autosched]") {
  auto f = sp::define_kernel("scatter", [](sp::in<float, I, K> x, sp::in<std::int32_t, I> dst, sp::out<float, Bt, K> y,
                                           sp::iter<I> i, sp::iter<K> k) { y(dst(i), k) += x(i, k); });
  auto s = sp::schedule::partition_indirect_writes(stage3(f));
  const std::string b = body(s);
  INFO(b);
  CHECK(b.find("for spindle_block in [0, spindle_threads) parallel:\n      for i in [0, I_len) reduction:") !=
        std::string::npos);
  // The ownership test sits above the feature loop (it does not depend on k).
  // (block * n / threads <= v < (block + 1) * n / threads, as min(v - lo, hi - 1 - v) >= 0: both
  // bounds computed on every test, so the C compiler hoists both divisions.)
  CHECK(b.find("if min(i64(b[i]) - spindle_block * Bt_len / spindle_threads, (spindle_block + 1) * Bt_len / "
               "spindle_threads - 1 - i64(b[i])) >= 0:\n          for k in [0, K_len):") != std::string::npos);
  REQUIRE(!s.scalars.empty());
  CHECK(s.scalars.back().var.name() == "spindle_threads");
  CHECK(s.scalars.back().origin.kind == sp::ir::ParamOrigin::threads);
  // The default schedule applies it and vectorises the feature loop inside.
  auto d = body(sp::autosched::schedule_cpu_default(stage3(f), ctx(f)));
  CHECK(d.find("for spindle_block in [0, spindle_threads) parallel:") != std::string::npos);
  CHECK(d.find("for k in [0, K_len) vectorized:") != std::string::npos);

  // A direct write in the same nest would run once per block: the nest stays as it was.
  auto g = sp::define_kernel("scatter_and_copy",
                             [](sp::in<float, I, K> x, sp::in<std::int32_t, I> dst, sp::out<float, Bt, K> y,
                                sp::out<float, I> z, sp::iter<I> i, sp::iter<K> k) {
                               y(dst(i), k) += x(i, k);
                               z(i) += x(i, k);
                             });
  auto gs = sp::schedule::partition_indirect_writes(stage3(g));
  CHECK(body(gs).find("spindle_block") == std::string::npos);
  CHECK(gs.scalars.size() == stage3(g).scalars.size());
  // No indirect write: nothing changes (SpMV's reduction loop is not outermost anyway).
  auto h = sp::define_kernel("colsum", [](sp::in<float, I, K> x, sp::out<float, K> y, sp::iter<I> i, sp::iter<K> k) {
    y(k) += x(i, k);
  });
  CHECK(body(sp::schedule::partition_indirect_writes(stage3(h))) == body(stage3(h)));

  // Two writes of one buffer scattered in different slots are owned through the same slot:
  // owned through slot 0 by one write and slot 1 by the other, two blocks would update one
  // element at once (spindle-kernel-fuzz seed 51, kernel 91: a lost `*=` in a third of the
  // 3-thread runs).
  auto t = sp::define_kernel("scatter_two_slots",
                             [](sp::in<float, I, Bt> x, sp::in<std::int32_t, I> dst, sp::out<float, Bt, Bt> y,
                                sp::iter<I> i, sp::iter<Bt> b) {
                               y(dst(i), b) *= x(i, b);
                               y(b, dst(i)) *= x(i, b);
                             });
  const std::string tb = body(sp::schedule::partition_indirect_writes(stage3(t)));
  INFO(tb);
  CHECK(tb.find("for spindle_block in [0, spindle_threads) parallel:") != std::string::npos);
  // Both guards test slot 0: the index buffer for the first write, the iterator for the second.
  CHECK(tb.find("if min(i64(b[i]) - spindle_block * Bt_len / spindle_threads,") != std::string::npos);
  CHECK(tb.find("if min(bt - spindle_block * Bt_len / spindle_threads,") != std::string::npos);
  std::size_t guards = 0;
  for (std::size_t at = 0; (at = tb.find("- spindle_block * Bt_len / spindle_threads,", at)) != std::string::npos; ++at)
    ++guards;
  CHECK(guards == 2);
}

TEST_CASE("schedule_cpu_default: a scatter with a reduction inside is partitioned and register-tiled inside the "
          "ownership tests, unless a tile would leave its test",
          "[schedule][autosched]") {
  // An ELL part scattered into output rows (hyb SpMM): the tile of row dst(i) is read and
  // stored back inside the owner's test, so the nest runs one block per thread.
  auto f = sp::define_kernel("ell_scatter",
                             [](sp::in<float, I, E> a, sp::in<std::int32_t, I> dst, sp::in<float, sp::dense<E>, K> x,
                                sp::inout<float, Bt, K> y, sp::iter<I> i, sp::iter<E> e,
                                sp::iter<K> k) { y(dst(i), k) += a(i, e) * x(e, k); });
  auto s = sp::autosched::schedule_cpu_default(sp::lower::hoist_loop_invariants(stage3(f), ctx(f)), ctx(f));
  const std::string b = body(s);
  INFO(b);
  CHECK(sp::schedule::ownership_kept(s));
  CHECK(b.find("for spindle_block in [0, spindle_threads) parallel:") != std::string::npos);
  CHECK(b.find("d_register_tile") != std::string::npos);
  const auto guard = b.find("if min(i64(b[i]) - spindle_block * Bt_len / spindle_threads,");
  REQUIRE(guard != std::string::npos);
  CHECK(b.find("d_tile[k] = d[b[i], ") > guard);  // the tile's read is inside the test

  // The same partition with the tile outside the test: ownership_kept says no. (A register
  // tile moved above the test, as accumulate_locally did for spindle-kernel-fuzz seed
  // 712002242, would let two blocks read and store back one element.)
  auto p = sp::schedule::partition_indirect_writes(stage3(f));
  CHECK(sp::schedule::ownership_kept(p));
  struct HoistGuard : sp::ir::IRMutator {  // drop the ownership test, keep the block loop
    sp::ir::Stmt mutate_IfThenElse(const sp::ir::IfThenElseNode* n, const sp::ir::Stmt& self) override {
      if (sp::ir::to_string(n->cond).find("spindle_block") != std::string::npos) return mutate(n->then_case);
      return sp::ir::IRMutator::mutate_IfThenElse(n, self);
    }
  } hoist;
  auto broken = p;
  broken.body = hoist.mutate(p.body);
  CHECK(body(broken).find("spindle_block * Bt_len") == std::string::npos);
  CHECK_FALSE(sp::schedule::ownership_kept(broken));
  // Without a partition there is nothing to keep.
  CHECK(sp::schedule::ownership_kept(stage3(f)));
}

TEST_CASE("partition_indirect_writes: writes at a sparse iterator's coordinate (Aᵀ X from a CSR) are owned by "
          "coordinate",
          "[schedule][autosched]") {
  auto f = sp::define_kernel("at_x", [](sp::in<float, I, J> a, sp::in<float, I, K> x, sp::out<float, sp::dense<J>, K> y,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { y(j, k) += a(i, j) * x(i, k); });
  auto s = sp::schedule::partition_indirect_writes(stage3(f));
  const std::string b = body(s);
  INFO(b);
  CHECK(b.find("for spindle_block in [0, spindle_threads) parallel:\n      for i in [0, I_len) reduction:") !=
        std::string::npos);
  CHECK(b.find("if min(i64(J_indices[J_indptr[i] + j]) - spindle_block * J_len /") != std::string::npos);
  // A row-parallel kernel is untouched (its outer loop is spatial).
  auto g = sp::define_kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                        sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  CHECK(body(sp::schedule::partition_indirect_writes(stage3(g))) == body(stage3(g)));
}

TEST_CASE("block_long_reductions: a spatial loop that re-reads a long reduction's rows reads them block by block",
          "[schedule][autosched]") {
  // w(jd, k) += x(i, jd) y(i, k) written jd, i, k: every jd re-reads all rows of y. The
  // default schedule splits off the init, runs blocks of rows outermost and the jd loop
  // inside each block in parallel; the unblocked loop when the rows fit in one block.
  auto f = sp::define_kernel("wgrad", [](sp::in<float, I, sp::dense<J>> x, sp::in<float, I, K> y,
                                         sp::out<float, sp::dense<J>, K> w, sp::iter<sp::dense<J>> jd,
                                         sp::iter<I> i, sp::iter<K> k) { w(jd, k) += x(i, jd) * y(i, k); });
  auto f3 = stage3(f);
  const std::string s = body(sp::autosched::schedule_cpu_default(f3, ctx(f)));
  CHECK_THAT(s, Catch::Contains("let i_block_rows: i64 = max(256, max(524288 / max(J_len * 4 + K_len * 4, 1), "));
  CHECK_THAT(s, Catch::Contains("if I_len <= i_block_rows:"));
  CHECK_THAT(s, Catch::Contains("for i_blk in [0, (I_len + i_block_rows - 1) / i_block_rows) reduction:"));
  CHECK_THAT(s, Catch::Contains("for i in [i_blk * i_block_rows, i_blk * i_block_rows + min(i_block_rows, I_len - "
                                "i_blk * i_block_rows)) reduction:"));
  // The loop inside each block runs in parallel, the block loop does not.
  const auto blk = s.find("for i_blk in");
  REQUIRE(blk != std::string::npos);
  CHECK(s.find(") parallel:", blk) != std::string::npos);
  CHECK(s.find("reduction) parallel") == std::string::npos);

  std::set<std::string> names;
  auto blocked = f3;
  blocked.body = sp::schedule::block_long_reductions(f3.body, names, f3);
  CHECK(names == std::set<std::string>{"i_blk"});
  std::vector<sched_test::Sizes> sizes = sched_test::standard_sizes();
  // 300 + 3 elements per row: 432 rows per block, so 3,000 rows take seven blocks.
  for (sched_test::Sizes z : {sched_test::Sizes{3000, 300, 3}, {433, 300, 3}, {432, 300, 3}, {431, 290, 7}})
    sizes.push_back(z);
  CHECK(sched_test::compare(f3, blocked, sizes) < 1e-6);
  auto tiled = f3;
  tiled.body = sp::schedule::register_tile(blocked.body, 256);
  CHECK(sched_test::compare(f3, tiled, sizes) < 1e-6);

  // Nothing re-read (every row read depends on the outer loop: column sums written k, i),
  // SpMM (the output row is the outer loop) and a reduction-first nest: left alone.
  auto r = sp::define_kernel("colsum_ki", [](sp::in<float, I, K> x, sp::out<float, K> y, sp::iter<K> k,
                                             sp::iter<I> i) { y(k) += x(i, k); });
  std::set<std::string> none;
  CHECK(sched_test::str(sp::schedule::block_long_reductions(stage3(r).body, none, stage3(r))) ==
        sched_test::str(stage3(r).body));
  CHECK(sched_test::str(sp::schedule::block_long_reductions(sched_test::spmm().body, none, sched_test::spmm())) ==
        sched_test::str(sched_test::spmm().body));
  CHECK(none.empty());
}
