// User schedules (spindle::Schedule, Kernel::with_schedule; docs/schedules.md): every
// schedule gives the kernel's result (against plain loops, on every test shape, with 1 and 3
// threads), is printed by explain() and in the generated source, and a step that does not
// fit is a UserError naming the step and the loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <tuple>
#include <vector>

#include "correctness/correctness_support.hpp"
#include "spindle/driver/pipeline.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/engines.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

using sp::ops::I;
using sp::ops::J;
using sp::ops::K;
using sp::ops::N;
struct M : sp::dense_fixed {};

float nan_f() { return std::numeric_limits<float>::quiet_NaN(); }

auto make_spmm() {
  return sp::kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                               sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
}

auto make_spmv() {
  return sp::kernel("spmv", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                               sp::iter<I> i, sp::iter<J> j) { y(i) += a(i, j) * x(j); });
}

// A dense kernel over [I, K] (two rectangular loops: fuse applies).
auto make_scale() {
  return sp::kernel("scale", [](sp::in<float, I, K> b, sp::out<float, I, K> c, sp::iter<I> i, sp::iter<K> k) {
    c(i, k) = 2.0f * b(i, k) + 1.0f;
  });
}

std::vector<sp::Schedule> spmm_schedules() {
  std::vector<sp::Schedule> out;
  out.emplace_back().parallel("i");
  out.emplace_back().split("k", 8).vectorize("k_i").parallel("i");
  out.emplace_back().split("k", 4).unroll("k_i").split("i", 5).parallel("i_o");
  out.emplace_back().sparse_reorder("spmm", {"I", "K", "J"}).parallel("i").vectorize("j");
  out.emplace_back().reorder({"k", "j"}).parallel("i");
  out.emplace_back().reorder({"k", "j"}).split("k", 16).vectorize("k_i").cache_write("k_i", "c").parallel("i");
  out.emplace_back().split("k", 3);  // serial, with a guard (3 does not divide K)
  // The default's register tile as steps: the init moves into k_o with its own k_i loop.
  out.emplace_back().split("k", 8).reorder({"k_o", "j", "k_i"}).cache_write("k_o", "c").vectorize("k_i").parallel("i");
  out.emplace_back().sparse_reorder("spmm", {"I", "J", "K"});  // the written order, default loop schedule
  return out;
}

}  // namespace

TEST_CASE("SpMM under user schedules matches a CSR loop on every shape, 1 and 3 threads", "[correctness][schedule]") {
  const auto spmm = make_spmm();
  const auto schedules = spmm_schedules();
  for (int threads : {1, 3}) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    for (const auto& s : schedules) {
      const auto k = spmm.with_runtime(rt).with_schedule(s);
      for (const Shape& shape : matrix_shapes()) {
        for (std::int64_t feat : {1, 7, 33}) {
          INFO(shape << " K=" << feat << " threads " << threads << " schedule " << s.to_string());
          const auto a = random_csr<float>(shape, 7);
          const auto b = sp::Tensor<float>::random({shape.cols, feat}, 8, -1, 1);
          auto c = sp::Tensor<float>::full({shape.rows, feat}, nan_f());
          k(a, b, c);
          check_close<float>(ref_spmm(a, b.values(), feat), c.values(), "scheduled spmm");
        }
      }
    }
  }
}

TEST_CASE("SpMV and a dense kernel under user schedules", "[correctness][schedule]") {
  const auto spmv = make_spmv();
  std::vector<sp::Schedule> ss;
  ss.emplace_back().parallel("i").vectorize("j");  // a vectorised reduction: re-associated sums
  ss.emplace_back().split("j", 4).unroll("j_i");    // ragged rows: j_i guarded
  ss.emplace_back().split("i", 16).parallel("i_o").split("j", 2);
  // Partial sums in registers (rfactor on the CPU): plain, unrolled and vectorised lanes, a
  // lane count that no row length divides, and rfactor of a split's inner loop.
  ss.emplace_back().rfactor("j", 2).parallel("i");
  ss.emplace_back().rfactor("j", 4).unroll("j_lane").parallel("i");
  ss.emplace_back().rfactor("j", 8).vectorize("j_lane").parallel("i");
  ss.emplace_back().rfactor("j", 3);
  ss.emplace_back().split("j", 8).rfactor("j_i", 4).vectorize("j_i_lane");
  for (const auto& s : ss) {
    const auto k = spmv.with_schedule(s);
    for (const Shape& shape : matrix_shapes()) {
      INFO(shape << " schedule " << s.to_string());
      const auto a = random_csr<float>(shape, 17);
      const auto x = sp::Tensor<float>::random({shape.cols}, 18, -1, 1);
      auto y = sp::Tensor<float>::full({shape.rows}, nan_f());
      k(a, x, y);
      check_close<float>(ref_spmv(a, x.values()), y.values(), "scheduled spmv");
    }
  }

  const auto scale = make_scale();
  std::vector<sp::Schedule> ds;
  ds.emplace_back().fuse("i", "k").parallel("i_k_f");
  ds.emplace_back().reorder({"k", "i"}).parallel("k").vectorize("i");
  ds.emplace_back().fuse("i", "k").split("i_k_f", 8).parallel("i_k_f_o").vectorize("i_k_f_i");
  for (const auto& s : ds) {
    for (auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{0, 5}, {5, 0}, {1, 1}, {37, 13}}) {
      INFO(rows << "x" << cols << " schedule " << s.to_string());
      const auto b = sp::Tensor<float>::random({rows, cols}, 19, -1, 1);
      auto c = sp::Tensor<float>::full({rows, cols}, nan_f());
      scale.with_schedule(s)(b, c);
      for (std::int64_t e = 0; e < rows * cols; ++e) REQUIRE(c.values()[e] == 2.0f * b.values()[e] + 1.0f);
    }
  }

  // Two reduction loops, each under rfactor: rfactor of the outer one copies the inner one's
  // lane loop into its lanes and its combine, so later steps on that lane loop meet one loop
  // node in two places (this was an internal error, "lost loop 'm_lane'").
  const auto sum3 = sp::kernel("sum3", [](sp::in<float, I, K, M> b, sp::out<float, I> y, sp::iter<I> i,
                                          sp::iter<K> k, sp::iter<M> m) { y(i) += b(i, k, m); });
  std::vector<sp::Schedule> rs;
  rs.emplace_back().rfactor("m", 2).rfactor("k", 3).unroll("k_lane").unroll("m_lane");
  rs.emplace_back().rfactor("m", 2).vectorize("m_lane").rfactor("k", 3).unroll("m_lane").parallel("i");
  for (int threads : {1, 3}) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    for (const auto& s : rs)
      for (auto [rows, ks, ms] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{0, 3, 2}, {5, 7, 3}, {37, 13, 5}}) {
        INFO(rows << "x" << ks << "x" << ms << " schedule " << s.to_string() << " threads " << threads);
        const auto b = sp::Tensor<float>::random({rows, ks, ms}, 21, -1, 1);
        auto y = sp::Tensor<float>::full({rows}, nan_f());
        sum3.with_runtime(rt).with_schedule(s)(b, y);
        std::vector<Ref> want(static_cast<std::size_t>(rows));
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t q = 0; q < ks * ms; ++q) {
            const double v = b.values()[r * ks * ms + q];
            want[r].value += v;
            want[r].abs_sum += std::abs(v);
            ++want[r].terms;
          }
        check_close<float>(want, y.values(), "sum3 under two rfactors");
      }
  }
}

TEST_CASE("rfactor on the CPU: every tail length, the last row's included, on every CPU engine", "[correctness][schedule]") {
  // Row r has r % (2 L + 3) nonzeros, so every tail length 0 .. L - 1 occurs, rows shorter
  // than one group too, and the last row (L + 1 nonzeros) ends in a tail of one term that
  // ends exactly at the end of the arrays (an overrun of the guarded tail reads past them:
  // ASan's stage sees it). Small integer values: every order of the sum gives the same
  // float, so results must be exact.
  const auto spmv = make_spmv();
  for (int lanes : {2, 3, 4, 8, 16}) {
    const std::int64_t rows = 4 * (2 * lanes + 3) + lanes + 2, cols = 3 * lanes + 5;
    std::vector<std::int32_t> indptr{0}, indices;
    std::vector<float> values;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t n = r % (2 * lanes + 3);
      for (std::int64_t q = 0; q < n; ++q) {
        indices.push_back(static_cast<std::int32_t>((r * 7 + q) % cols));
        values.push_back(static_cast<float>((r + q) % 5) - 2.0f);
      }
      std::sort(indices.end() - n, indices.end());  // n < cols: the n columns are distinct
      indptr.push_back(static_cast<std::int32_t>(indices.size()));
    }
    REQUIRE((rows - 1) % (2 * lanes + 3) % lanes != 0);
    REQUIRE(indptr[rows] - indptr[rows - 1] == (rows - 1) % (2 * lanes + 3));
    const sp::Csr<float> a(rows, cols, indptr, indices, values);
    auto x = sp::Tensor<float>::zeros({cols});
    for (std::int64_t c = 0; c < cols; ++c) x.values()[c] = static_cast<float>(c % 7) - 3.0f;
    const auto want = ref_spmv(a, x.values());
    std::vector<sp::Schedule> ss(3);
    ss[0].rfactor("j", lanes).parallel("i");
    ss[1].rfactor("j", lanes).vectorize("j_lane").parallel("i");
    ss[2].rfactor("j", lanes).unroll("j_lane");
    for (int threads : {1, 2})
      for (const std::string& engine : sp::test::cpu_engines())
        for (const auto& s : ss) {
          INFO(lanes << " lanes, " << engine << ", " << threads << " threads, " << s.to_string());
          auto y = sp::Tensor<float>::full({rows}, nan_f());
          spmv.with_runtime(sp::test::engine_runtime(engine, threads)).with_schedule(s)(a, x, y);
          for (std::int64_t r = 0; r < rows; ++r) {
            INFO("row " << r << " of " << indptr[r + 1] - indptr[r] << " nonzeros");
            REQUIRE(y.values()[r] == static_cast<float>(want[static_cast<std::size_t>(r)].value));
          }
        }
  }
}

// --- sparse_fuse: a chain of axes as one loop (SparseTIR's fused axes) ------------------

namespace {

using sp::ops::L;  // sparse_variable<J>: the third level of a CSF tensor [I, J, L]

// SparseTIR's fused_sddmm: the rows and their nonzeros as one loop.
auto make_sddmm() {
  return sp::kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x, sp::in<float, sp::dense<J>, K> y,
                                sp::out<float, I, J> c, sp::iter<I> i, sp::iter<J> j,
                                sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
}

// Over a 3-level CSF tensor: an element-wise map (every axis spatial) and SparseTIR's fused
// reductions 3-D -> 2-D (y[i, j] = sum_l) and 3-D -> 1-D (csf_reduce, two reduction axes).
auto make_csf_map() {
  return sp::kernel("csf_map", [](sp::in<double, I, J, L> a, sp::in<double, sp::dense<L>> x,
                                  sp::out<double, I, J, L> b, sp::iter<I> i, sp::iter<J> j,
                                  sp::iter<L> l) { b(i, j, l) = 2.0 * a(i, j, l) + x(l); });
}
auto make_csf_rows() {
  return sp::kernel("csf_rows", [](sp::in<double, I, J, L> a, sp::in<double, sp::dense<L>> x, sp::out<double, I, J> y,
                                   sp::iter<I> i, sp::iter<J> j, sp::iter<L> l) { y(i, j) += a(i, j, l) * x(l); });
}

// The CSF tensors of the fused tests: empty fibers on both levels, random ones (with empty
// rows, an empty tensor, a single element).
std::vector<sp::Csf<double>> csf_inputs() {
  std::vector<sp::Csf<double>> out;
  std::vector<sp::CsfLevel<std::int32_t>> levels(2);
  levels[0].indptr = {0, 2, 2, 5, 6, 6};
  levels[0].indices = {0, 3, 1, 2, 4, 0};
  levels[1].indptr = {0, 2, 2, 3, 3, 5, 6};
  levels[1].indices = {1, 5, 0, 2, 3, 5};
  out.emplace_back(std::vector<std::int64_t>{5, 5, 6}, std::move(levels),
                   std::vector<double>{1.5, -2, 0.25, 3, -1, 0.5}, "empty-fibers");
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{0, 4, 5}, {1, 1, 1}, {7, 33, 130}, {130, 7, 33}})
    for (double density : {0.0, 0.3})
      out.push_back(sp::Csf<double>::random(shape, density, 501, -1, 1));
  return out;
}

}  // namespace

TEST_CASE("sparse_fuse: fused SDDMM (one loop over the nonzeros) matches a loop on every shape, 1 and 3 threads",
          "[correctness][schedule][fuse]") {
  const auto sddmm = make_sddmm();
  std::vector<sp::Schedule> ss;
  ss.emplace_back().sparse_fuse("sddmm", {"I", "J"});                            // the default loop schedule
  ss.emplace_back().sparse_fuse("sddmm", {"I", "J"}).parallel("i_j").vectorize("k");
  ss.emplace_back().sparse_fuse("sddmm", {"I", "J"}).split("i_j", 16).parallel("i_j_o");
  for (int threads : {1, 3}) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    for (const auto& s : ss) {
      const auto k = sddmm.with_runtime(rt).with_schedule(s);
      for (const Shape& shape : matrix_shapes()) {
        for (std::int64_t feat : {1, 7, 33}) {
          INFO(shape << " K=" << feat << " threads " << threads << " schedule " << s.to_string());
          const auto a = random_csr<float>(shape, 37);
          const auto x = sp::Tensor<float>::random({shape.rows, feat}, 38, -1, 1);
          const auto y = sp::Tensor<float>::random({shape.cols, feat}, 39, -1, 1);
          auto c = a;
          for (auto& v : c.values()) v = nan_f();
          k(a, x, y, c);
          check_close<float>(ref_sddmm(a, x.values(), y.values(), feat), c.values(), "fused sddmm");
        }
      }
    }
  }
  // The fused loop is what the stages print: stage I names the chain, stage II has one loop.
  const std::string e = sddmm.with_schedule(ss[0]).explain();
  CHECK(e.find("sp_iter sddmm([fuse(I, J), K], \"SSR\")") != std::string::npos);
  CHECK(e.find("for i_j in [0, ") != std::string::npos);
  CHECK(e.find("segment(J_indptr, 0, I_len, J_abs)") != std::string::npos);
  CHECK(e.find("# schedule: sparse_fuse(\"sddmm\", {\"I\", \"J\"})") != std::string::npos);
}

TEST_CASE("sparse_fuse over chains of a 3-level CSF tensor: 2 and 3 axes, spatial and reduction, with a prefix",
          "[correctness][schedule][fuse]") {
  const auto map = make_csf_map();
  const auto rows = make_csf_rows();
  const auto reduce = sp::ops::csf_reduce<double>();
  std::vector<sp::Schedule> maps;
  maps.emplace_back().sparse_fuse("csf_map", {"I", "J", "L"});
  maps.emplace_back().sparse_fuse("csf_map", {"I", "J"}).sparse_fuse("csf_map", {"J", "L"});  // chains that meet
  maps.emplace_back().sparse_fuse("csf_map", {"J", "L"});  // under row i: the fiber's range from J_indptr[i]
  maps.emplace_back().sparse_fuse("csf_map", {"I", "J"});
  for (int threads : {1, 3}) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    for (const auto& a : csf_inputs()) {
      INFO(a.name() << " " << sp::detail::shape_string(a.shape()) << " nnz " << a.nnz() << " threads " << threads);
      const auto x = sp::Tensor<double>::random({a.dim(2)}, 502, -1, 1);
      auto l_of = a.indices(2);
      for (const auto& s : maps) {
        INFO(s.to_string());
        auto b = a;
        for (auto& v : b.values()) v = std::numeric_limits<double>::quiet_NaN();
        map.with_runtime(rt).with_schedule(s)(a, x, b);
        for (std::int64_t e = 0; e < a.nnz(); ++e)
          REQUIRE(b.values()[e] == 2.0 * a.values()[e] + x.values()[l_of[e]]);
      }
      // 3-D -> 2-D: y over the first two levels (a CSR with the CSF's J level), I and J fused.
      sp::Csr<double> y(a.dim(0), a.dim(1), std::vector<std::int32_t>(a.indptr(1).begin(), a.indptr(1).end()),
                        std::vector<std::int32_t>(a.indices(1).begin(), a.indices(1).end()),
                        std::vector<double>(a.indices(1).size(), std::numeric_limits<double>::quiet_NaN()));
      rows.with_runtime(rt).with_schedule(sp::Schedule().sparse_fuse("csf_rows", {"I", "J"}))(a, x, y);
      auto p2 = a.indptr(2);
      for (std::size_t q = 0; q + 1 < p2.size(); ++q) {
        double want = 0;
        for (auto e = p2[q]; e < p2[q + 1]; ++e) want += a.values()[e] * x.values()[l_of[e]];
        REQUIRE(y.values()[q] == Approx(want).margin(1e-12));
      }
      // 3-D -> 1-D: the two reduction axes J and L fused under row i.
      auto r = sp::Tensor<double>::full({a.dim(0)}, std::numeric_limits<double>::quiet_NaN());
      reduce.with_runtime(rt).with_schedule(sp::Schedule().sparse_fuse("csf_reduce", {"J", "L"}))(a, x, r);
      auto p1 = a.indptr(1);
      for (std::int64_t i = 0; i < a.dim(0); ++i) {
        double want = 0;
        for (auto q = p1[i]; q < p1[i + 1]; ++q)
          for (auto e = p2[q]; e < p2[q + 1]; ++e) want += a.values()[e] * x.values()[l_of[e]];
        REQUIRE(r.values()[i] == Approx(want).margin(1e-12));
      }
    }
  }
}

TEST_CASE("sparse_fuse that does not fit is a UserError naming the step", "[correctness][schedule][fuse][error]") {
  const auto sddmm = make_sddmm();
  const auto a = random_csr<float>({"small", 6, 5, 2}, 3);
  const auto x = sp::Tensor<float>::random({6, 4}, 4, -1, 1);
  const auto y = sp::Tensor<float>::random({5, 4}, 5, -1, 1);
  auto c = a;
  const std::vector<float> before(c.values().begin(), c.values().end());
  auto fails = [&](sp::Schedule s, std::vector<std::string> parts) {
    INFO(s.to_string());
    try {
      sddmm.with_schedule(s)(a, x, y, c);
      FAIL("no error");
    } catch (const sp::UserError& e) {
      const std::string m = e.what();
      INFO(m);
      for (auto& p : parts) CHECK(m.find(p) != std::string::npos);
    }
    CHECK(std::vector<float>(c.values().begin(), c.values().end()) == before);  // nothing written
  };
  fails(sp::Schedule().sparse_fuse("sddmm", {"J", "K"}), {"sparse_fuse(\"sddmm\", {\"J\", \"K\"})",
                                                          "K is not a child of J", "root axis"});
  fails(sp::Schedule().sparse_fuse("sddmm", {"I", "K"}), {"not adjacent", "[I, J, K]"});
  fails(sp::Schedule().sparse_fuse("sddmm", {"J", "I"}), {"not adjacent"});
  fails(sp::Schedule().sparse_fuse("sddmm", {"I", "Q"}), {"no axis Q"});
  fails(sp::Schedule().sparse_fuse("sddmm", {"I", "I"}), {"named twice"});
  fails(sp::Schedule().sparse_fuse("nope", {"I", "J"}), {"no iteration named 'nope'", "sddmm"});
  fails(sp::Schedule().sparse_fuse("sddmm", {"I", "J"}).parallel("i"), {"no loop named 'i'", "i_j"});
  // SpMV: i spatial, j a reduction: a fused loop is one or the other.
  const auto spmv = make_spmv();
  const auto v = sp::Tensor<float>::random({5}, 6, -1, 1);
  auto out = sp::Tensor<float>::full({6}, 0.0f);
  try {
    spmv.with_schedule(sp::Schedule().sparse_fuse("spmv", {"I", "J"}))(a, v, out);
    FAIL("no error");
  } catch (const sp::UserError& e) {
    CHECK(std::string(e.what()).find("axis I is spatial and axis J is a reduction axis") != std::string::npos);
  }
  CHECK_THROWS_AS(sp::Schedule().sparse_fuse("sddmm", {"I"}), sp::UserError);
  const auto parsed = sp::Schedule::parse("sparse_fuse(sddmm, {I, J}).parallel(i_j)");
  CHECK(parsed.to_string() == "sparse_fuse(\"sddmm\", {\"I\", \"J\"}).parallel(\"i_j\")");
}

// Runs an SDDMM kernel (a, x, y -> c on a's pattern, K = feat) under schedule s (nullptr:
// the default) through NVRTC and the CUDA emulator on every test shape, against the loop.
template <class Kernel>
void check_sddmm_emulated(const Kernel& sddmm, const sp::Schedule* s, std::int64_t feat, std::uint64_t seed,
                          sp::test::NvrtcCheck& nvrtc, const char* what) {
  for (const Shape& shape : matrix_shapes()) {
    INFO(shape << " K=" << feat << " schedule " << (s ? s->to_string() : "default"));
    const auto a = random_csr<float>(shape, seed);
    auto x = sp::Tensor<float>::random({shape.rows, feat}, seed + 1, -1, 1);
    auto y = sp::Tensor<float>::random({shape.cols, feat}, seed + 2, -1, 1);
    auto c = a;
    for (auto& v : c.values()) v = nan_f();
    auto acopy = a;
    std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(acopy), sp::detail::make_call_arg(x),
                                           sp::detail::make_call_arg(y), sp::detail::make_call_arg(c)};
    sp::test::run_cuda_emulated(sddmm.ir(), args, &nvrtc, nullptr, nullptr, s);
    check_close<float>(ref_sddmm(a, x.values(), y.values(), feat), c.values(), what);
  }
}

TEST_CASE("fused SDDMM on the GPU: NVRTC compiles it and the emulator matches a loop",
          "[correctness][schedule][fuse][cuda]") {
  const auto sddmm = make_sddmm();
  std::vector<sp::Schedule> ss;
  ss.emplace_back().sparse_fuse("sddmm", {"I", "J"});  // the default GPU schedule of the fused loop
  ss.emplace_back().sparse_fuse("sddmm", {"I", "J"}).split("i_j", 64).bind("i_j_i", "threadIdx.x").bind("i_j_o",
                                                                                                      "blockIdx.x");
  sp::test::NvrtcCheck nvrtc;
  for (const auto& s : ss)
    for (std::int64_t feat : {1, 33}) check_sddmm_emulated(sddmm, &s, feat, 47, nvrtc, "gpu fused sddmm");
  if (nvrtc.available) CHECK(nvrtc.compiled >= 2);
}

// --- fuse<...> in the kernel itself (docs/language.md §3.2): the same loops as sparse_fuse --

TEST_CASE("iter<fuse<I, J>>: a kernel that fuses its own axes is the sparse_fuse kernel, on every shape, 1 and 3 "
          "threads, on the CPU engines and through NVRTC and the CUDA emulator",
          "[correctness][schedule][fuse][frontend]") {
  // SparseTIR's fused_sddmm written as its users write it: T.iter([T.fuse(I, J), K], ...).
  const auto fused = sp::kernel("sddmm", [](sp::in<float, I, J> a, sp::in<float, I, K> x,
                                            sp::in<float, sp::dense<J>, K> y, sp::out<float, I, J> c,
                                            sp::iter<sp::fuse<I, J>> ij, sp::iter<K> k) {
    auto [i, j] = ij;
    c(i, j) += a(i, j) * x(i, k) * y(j, k);
  });
  // The stages are those of the unfused kernel under sparse_fuse("sddmm", {"I", "J"}).
  const auto scheduled = make_sddmm().with_schedule(sp::Schedule().sparse_fuse("sddmm", {"I", "J"}));
  const auto& lf = fused.compile().lowered();
  const auto& ls = scheduled.compile().lowered();
  CHECK(sp::ir::to_string(lf.stage1) == sp::ir::to_string(ls.stage1));
  CHECK(sp::ir::to_string(lf.stage3) == sp::ir::to_string(ls.stage3));
  const std::string e = fused.explain();
  CHECK(e.find("sp_iter sddmm([fuse(I, J), K], \"SSR\")") != std::string::npos);
  CHECK(e.find("for i_j in [0, ") != std::string::npos);
  // Loop schedules address the fused loop by its name; reordering a fused iteration is refused.
  std::vector<sp::Schedule> ss(1);
  ss.emplace_back().parallel("i_j").vectorize("k");
  ss.emplace_back().split("i_j", 16).parallel("i_j_o");
  for (int threads : {1, 3}) {
    for (const std::string& engine : sp::test::cpu_engines()) {
      auto& rt = sp::test::engine_runtime(engine, threads);
      for (const auto& s : ss)
        for (const Shape& shape : matrix_shapes())
          for (std::int64_t feat : {1, 7, 33}) {
            INFO(shape << " K=" << feat << " threads " << threads << " " << engine << " schedule " << s.to_string());
            const auto a = random_csr<float>(shape, 57);
            const auto x = sp::Tensor<float>::random({shape.rows, feat}, 58, -1, 1);
            const auto y = sp::Tensor<float>::random({shape.cols, feat}, 59, -1, 1);
            auto c = a;
            for (auto& v : c.values()) v = nan_f();
            fused.with_runtime(rt).with_schedule(s)(a, x, y, c);
            check_close<float>(ref_sddmm(a, x.values(), y.values(), feat), c.values(), "iter<fuse<I, J>> sddmm");
          }
    }
  }
  sp::test::NvrtcCheck nvrtc;
  check_sddmm_emulated(fused, nullptr, 9, 67, nvrtc, "gpu iter<fuse<I, J>> sddmm");
  if (nvrtc.available) CHECK(nvrtc.compiled >= 1);
  const auto a = random_csr<float>({"small", 6, 5, 2}, 3);
  const auto x = sp::Tensor<float>::random({6, 4}, 4, -1, 1);
  const auto y = sp::Tensor<float>::random({5, 4}, 5, -1, 1);
  auto c = a;
  const std::vector<float> before(c.values().begin(), c.values().end());
  try {
    fused.with_schedule(sp::Schedule().sparse_reorder("sddmm", {"K", "I", "J"}))(a, x, y, c);
    FAIL("no error");
  } catch (const sp::UserError& err) {
    INFO(err.what());
    CHECK(std::string(err.what()).find("axes I and J are fused (one loop)") != std::string::npos);
  }
  CHECK(std::vector<float>(c.values().begin(), c.values().end()) == before);
}

TEST_CASE("fused chains written in the kernel: three axes of a CSF tensor, a nested for_each<fuse<J, L>>, get<>",
          "[correctness][schedule][fuse][frontend]") {
  // Every level of a 3-level CSF tensor as one loop (an element-wise map, all spatial).
  const auto map = sp::kernel("csf_map3", [](sp::in<double, I, J, L> a, sp::in<double, sp::dense<L>> x,
                                             sp::out<double, I, J, L> b, sp::iter<sp::fuse<I, J, L>> ijl) {
    const auto& [i, j, l] = ijl;
    b(i, j, l) = 2.0 * a(i, j, l) + x(l);
  });
  // SparseTIR's fused reduction 3-D -> 1-D: under row i, the two reduction levels as one loop.
  const auto reduce = sp::kernel("csf_reduce_fused", [](sp::in<double, I, J, L> a, sp::in<double, sp::dense<L>> x,
                                                        sp::out<double, I> y, sp::iter<I> i) {
    sp::for_each<sp::fuse<J, L>>([&](sp::iter<sp::fuse<J, L>> jl) {
      y(i) += a(i, jl.get<J>(), jl.get<1>()) * x(jl.get<L>());
    });
  });
  CHECK(map.explain().find("([fuse(I, J, L)], \"SSS\")") != std::string::npos);
  CHECK(reduce.explain().find("([fuse(J, L)], \"RR\")") != std::string::npos);
  for (int threads : {1, 3}) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    sp::runtime::Runtime rt(o);
    for (const auto& a : csf_inputs()) {
      INFO(a.name() << " " << sp::detail::shape_string(a.shape()) << " nnz " << a.nnz() << " threads " << threads);
      const auto x = sp::Tensor<double>::random({a.dim(2)}, 512, -1, 1);
      auto l_of = a.indices(2);
      auto b = a;
      for (auto& v : b.values()) v = std::numeric_limits<double>::quiet_NaN();
      map.with_runtime(rt)(a, x, b);
      for (std::int64_t e = 0; e < a.nnz(); ++e) REQUIRE(b.values()[e] == 2.0 * a.values()[e] + x.values()[l_of[e]]);
      auto r = sp::Tensor<double>::full({a.dim(0)}, std::numeric_limits<double>::quiet_NaN());
      reduce.with_runtime(rt)(a, x, r);
      auto p1 = a.indptr(1), p2 = a.indptr(2);
      for (std::int64_t i = 0; i < a.dim(0); ++i) {
        double want = 0;
        for (auto q = p1[i]; q < p1[i + 1]; ++q)
          for (auto e = p2[q]; e < p2[q + 1]; ++e) want += a.values()[e] * x.values()[l_of[e]];
        REQUIRE(r.values()[i] == Approx(want).margin(1e-12));
      }
    }
  }
}

namespace {
struct Ca : sp::assembled<I, J> {};
}  // namespace

TEST_CASE("iter<fuse<...>> that breaks the chain rule is a UserError at definition naming the chain",
          "[correctness][schedule][fuse][frontend][error]") {
  auto fails = [](auto define, std::vector<std::string> parts) {
    try {
      define();
      FAIL("no error");
    } catch (const sp::UserError& e) {
      const std::string m = e.what();
      INFO(m);
      for (auto& p : parts) CHECK(m.find(p) != std::string::npos);
    }
  };
  // SpMV: i is spatial, j a reduction axis: one loop cannot be both.
  fails([] {
    return sp::kernel("spmv_fused", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y,
                                       sp::iter<sp::fuse<I, J>> ij) {
      auto [i, j] = ij;
      y(i) += a(i, j) * x(j);
    });
  }, {"kernel 'spmv_fused'", "fuses axes I, J (iter<fuse<I, J>>)", "axis I is spatial and axis J is a reduction axis"});
  // An assembled output is built row by row.
  fails([] {
    return sp::kernel("assemble_fused", [](sp::in<float, I, J> a, sp::out<float, I, Ca> c, sp::iter<sp::fuse<I, J>> ij) {
      auto [i, j] = ij;
      c(i, j) = 2.0f * a(i, j);
    });
  }, {"kernel 'assemble_fused'", "fuses axes I, J", "assembles output 'b'"});
}

TEST_CASE("a user schedule is printed by explain() and is part of the generated source", "[correctness][schedule]") {
  const auto spmm = make_spmm();
  sp::Schedule s;
  s.split("k", 8).vectorize("k_i").parallel("i");
  REQUIRE(s.to_string() == "split(\"k\", 8).vectorize(\"k_i\").parallel(\"i\")");
  const auto k = spmm.with_schedule(s);
  const std::string e = k.explain();
  CHECK(e.find("# schedule: split(\"k\", 8).vectorize(\"k_i\").parallel(\"i\")") != std::string::npos);
  CHECK(e.find("apply_user_schedule") != std::string::npos);
  CHECK(e.find("schedule_cpu_default") == std::string::npos);
  const std::string& src = k.compile().source();
  CHECK(src.rfind("/* schedule: split(\"k\", 8)", 0) == 0);
  // Both k loops (the init's and the reduction's) were split: no loop named k is left.
  const auto& stage3 = k.compile().lowered().stage3;
  CHECK(sp::schedule::detail::loops_named(stage3.body, "k").empty());
  // ... each into its full tiles and its partial tile (peel_split_tails).
  CHECK(sp::schedule::detail::loops_named(stage3.body, "k_i").size() == 4);
  // Different schedules: different sources (cache keys); the empty schedule is the default.
  sp::Schedule other;
  other.split("k", 4).vectorize("k_i").parallel("i");
  CHECK(spmm.with_schedule(other).compile().source() != src);
  CHECK(spmm.with_schedule(sp::Schedule{}).compile().source() == spmm.compile().source());
  CHECK(spmm.with_schedule(s).schedule() == s);
}

TEST_CASE("Schedule::parse reads what to_string prints, with or without quotes", "[correctness][schedule]") {
  std::vector<sp::Schedule> all = spmm_schedules();
  all.emplace_back().split("k", 32).bind("k_i", "threadIdx.x").bind("i", "blockIdx.x").rfactor("j", 4).atomic("j");
  all.emplace_back().cache_read("i", {"b", "a"}, "k_i", 32).fuse("i", "k").unroll("k_i");
  all.emplace_back();
  for (const auto& s : all) {
    INFO(s.to_string());
    CHECK(sp::Schedule::parse(s.to_string()) == s);
  }
  CHECK(sp::Schedule::parse(" split( k , 8 ) . vectorize(k_i).parallel(\"i\")") ==
        sp::Schedule().split("k", 8).vectorize("k_i").parallel("i"));
  CHECK(sp::Schedule::parse("sparse_reorder(spmm, {I, K, J}).reorder({k, j}).bind(k, threadIdx.y)") ==
        sp::Schedule().sparse_reorder("spmm", {"I", "K", "J"}).reorder({"k", "j"}).bind("k", "threadIdx.y"));
  auto fails = [](const std::string& text, const std::string& part) {
    INFO(text);
    CHECK_THROWS_WITH(sp::Schedule::parse(text), Catch::Contains(part));
  };
  fails("split(k)", "split takes 2 arguments, got 1");
  fails("split(k, eight)", "expected an integer, got 'eight'");
  fails("split(k, 8) vectorize(k_i)", "expected '.' at column 13");
  fails("tile(k, 8)", "unknown step 'tile'");
  fails("reorder(k, j)", "reorder takes 1 argument");
  fails("reorder(k)", "argument 1 is a list in braces");
  fails("parallel(\"i)", "unterminated string");
  fails("split(k, 0)", "the factor must be at least 1");
  fails("bind(i, warp.x)", "unknown GPU index");
  // The parsed schedule runs: the same result as the builder's.
  const auto a = random_csr<float>({"small", 9, 7, 3}, 31);
  const auto b = sp::Tensor<float>::random({7, 5}, 32, -1, 1);
  auto c = sp::Tensor<float>::full({9, 5}, nan_f());
  make_spmm().with_schedule(sp::Schedule::parse("split(k, 2).vectorize(k_i).parallel(i)"))(a, b, c);
  check_close<float>(ref_spmm(a, b.values(), 5), c.values(), "parsed schedule");
}

TEST_CASE("a schedule step that does not fit is a UserError naming the step and the loop",
          "[correctness][schedule][error]") {
  const auto spmm = make_spmm();
  const auto a = random_csr<float>({"small", 6, 5, 2}, 3);
  const auto b = sp::Tensor<float>::random({5, 4}, 4, -1, 1);
  auto c = sp::Tensor<float>::full({6, 4}, 7.0f);
  const std::vector<float> before(c.values().begin(), c.values().end());
  auto fails = [&](sp::Schedule s, std::vector<std::string> parts) {
    INFO(s.to_string());
    try {
      spmm.with_schedule(s)(a, b, c);
      FAIL("no error");
    } catch (const sp::UserError& e) {
      const std::string m = e.what();
      INFO(m);
      for (auto& p : parts) CHECK(m.find(p) != std::string::npos);
    }
    CHECK(std::vector<float>(c.values().begin(), c.values().end()) == before);  // nothing written
  };
  fails(sp::Schedule().parallel("j"),
        {"kernel 'spmm': schedule step 1, parallel(\"j\")", "reduction loop", "atomic_writeback"});
  fails(sp::Schedule().split("k", 4).vectorize("k"), {"schedule step 2, vectorize(\"k\")", "no loop named 'k'",
                                                       "k_o", "k_i"});
  fails(sp::Schedule().parallel("i").parallel("k"), {"schedule step 2", "inside loop 'i', which is parallel"});
  fails(sp::Schedule().unroll("k"), {"unroll", "not a constant"});
  fails(sp::Schedule().bind("i", "blockIdx.x"), {"bind", "GPU schedule step", "with_cuda_schedule"});
  fails(sp::Schedule().atomic("j"), {"atomic", "GPU schedule step"});
  fails(sp::Schedule().fuse("i", "j"), {"fuse", "not a perfectly nested band"});
  fails(sp::Schedule().fuse("j", "k"), {"fuse", "a fused loop must be one or the other"});
  fails(sp::Schedule().sparse_reorder("spmm", {"J", "I", "K"}), {"sparse_reorder(\"spmm\")", "axis J comes before its "
                                                                 "parent I"});
  fails(sp::Schedule().sparse_reorder("spmm", {"I", "K"}), {"name every axis", "[I, J, K]"});
  fails(sp::Schedule().sparse_reorder("spmm", {"I", "K", "Q"}), {"no axis Q"});
  fails(sp::Schedule().sparse_reorder("nope", {"I", "J", "K"}), {"no iteration named 'nope'", "spmm"});
  CHECK_THROWS_AS(sp::Schedule().split("k", 0), sp::UserError);
  CHECK_THROWS_AS(sp::Schedule().bind("k", "warp.x"), sp::UserError);
  CHECK_THROWS_AS(sp::Schedule().reorder({"k"}), sp::UserError);
}

TEST_CASE("reorder and vectorize refuse what would change more than the association of a reduction",
          "[correctness][schedule][error]") {
  auto message_of = [](auto&& call) {
    try {
      call();
    } catch (const sp::UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // t = t * 0.5 + ...: a local declared outside the iteration, so the order of every point matters.
  const auto outer = sp::kernel("outer_local", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                                  sp::out<float, M> y) {
    sp::local<float> t(0.0f);
    sp::for_each<I, K, J>([&](sp::iter<I> i, sp::iter<K> k, sp::iter<J> j) { t = t * 0.5f + a(i, j) * b(j, k); });
    sp::for_each<M>([&](sp::iter<M> m) { y(m) = t; });
  });
  const auto a = random_csr<float>({"small", 6, 5, 2}, 3);
  const auto b = sp::Tensor<float>::random({5, 3}, 4, -1, 1);
  auto y = sp::Tensor<float>::full({2}, 0.0f);
  std::string m = message_of([&] { outer.with_schedule(sp::Schedule().reorder({"k", "i"}))(a, b, y); });
  CHECK(m.find("changes the order of the reduction loops") != std::string::npos);
  CHECK(m.find("it stores to 't'") != std::string::npos);
  m = message_of([&] { outer.with_schedule(sp::Schedule().vectorize("j"))(a, b, y); });
  CHECK(m.find("vectorize(\"j\")") != std::string::npos);
  CHECK(m.find("it stores to 't'") != std::string::npos);
  m = message_of([&] { outer.with_schedule(sp::Schedule().parallel("i"))(a, b, y); });
  CHECK(m.find("writes 't', a local allocated outside it") != std::string::npos);
  // A split keeps the order of the points: the same value as the default schedule.
  auto y0 = sp::Tensor<float>::full({2}, 0.0f);
  outer(a, b, y0);
  outer.with_schedule(sp::Schedule().split("j", 2).split("k", 2))(a, b, y);
  CHECK(std::vector<float>(y.values().begin(), y.values().end()) ==
        std::vector<float>(y0.values().begin(), y0.values().end()));

  // out(i) += out(i) * 0.5 + a(l) b(m): each element sees its updates in the order m, l.
  const auto own = sp::kernel("reads_own", [](sp::in<float, N> x, sp::in<float, M> w, sp::out<float, K> out,
                                              sp::iter<M> mm, sp::iter<N> l, sp::iter<K> i) {
    out(i) += out(i) * 0.5f + x(l) * w(mm);
  });
  const auto x = sp::Tensor<float>::random({3}, 5, -1, 1);
  const auto w = sp::Tensor<float>::random({4}, 6, -1, 1);
  auto out = sp::Tensor<float>::full({2}, 0.0f);
  m = message_of([&] { own.with_schedule(sp::Schedule().sparse_reorder("reads_own", {"N", "M", "K"}))(x, w, out); });
  CHECK(m.find("the reduction axes M and N change their relative order") != std::string::npos);
  // (loops are named after the axes: m, n; the buffers, without spindle::names, a, b, c)
  m = message_of([&] { own.with_schedule(sp::Schedule().reorder({"n", "m"}))(x, w, out); });
  CHECK(m.find("it reads 'c', which it reduces into") != std::string::npos);
}

TEST_CASE("kernels that assemble a sparse output take no schedule yet", "[correctness][schedule][error]") {
  auto add = sp::ops::sparse_add<float>();
  CHECK_THROWS_WITH(add.with_schedule(sp::Schedule().parallel("i")),
                    Catch::Contains("assembles a sparse output") && Catch::Contains("no user schedule"));
  CHECK_NOTHROW(add.with_schedule(sp::Schedule{}));
}

TEST_CASE("SpMM under user GPU schedules: NVRTC compiles them and the emulator matches a CSR loop",
          "[correctness][schedule][cuda]") {
  const auto spmm = make_spmm();
  std::vector<sp::Schedule> ss;
  // One thread per feature of a row: the init and the reduction loop over k both split and bound.
  ss.emplace_back().split("k", 32).bind("k_i", "threadIdx.x").bind("i", "blockIdx.x");
  // The init moved into the k loop first, 4 rows per block.
  ss.emplace_back().reorder({"k", "j"}).split("k", 8).bind("k_i", "threadIdx.x").split("i", 4).bind("i_i",
      "threadIdx.y").bind("i_o", "blockIdx.x");
  // A feature tile per block along y, the register tile cached.
  ss.emplace_back().reorder({"k", "j"}).split("k", 16).cache_write("k_i", "c").bind("k_i", "threadIdx.x")
      .bind("i", "blockIdx.x").bind("k_o", "blockIdx.y");
  // The init moved into the tile loop with its own k_i loop (split before reorder), the tile
  // cached: three sibling k_i loops bound to threadIdx.x in one block, each thread on its element.
  ss.emplace_back().split("k", 32).reorder({"k_o", "j", "k_i"}).cache_write("k_o", "c").bind("k_i", "threadIdx.x")
      .bind("i", "blockIdx.x");
  sp::test::NvrtcCheck nvrtc;
  for (const auto& s : ss) {
    for (const Shape& shape : matrix_shapes()) {
      for (std::int64_t feat : {1, 33}) {
        INFO(shape << " K=" << feat << " schedule " << s.to_string());
        const auto a = random_csr<float>(shape, 27);
        auto b = sp::Tensor<float>::random({shape.cols, feat}, 28, -1, 1);
        auto c = sp::Tensor<float>::full({shape.rows, feat}, nan_f());
        auto acopy = a;
        std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(acopy), sp::detail::make_call_arg(b),
                                               sp::detail::make_call_arg(c)};
        sp::test::run_cuda_emulated(spmm.ir(), args, &nvrtc, nullptr, nullptr, &s);
        check_close<float>(ref_spmm(a, b.values(), feat), c.values(), "gpu-scheduled spmm");
      }
    }
  }
  if (nvrtc.available) CHECK(nvrtc.compiled >= 4);

  // The kernel API: explain() of the CUDA build names the schedule (lowering needs no GPU).
  sp::Schedule g;
  g.split("k", 32).bind("k_i", "threadIdx.x").bind("i", "blockIdx.x");
  const auto k = spmm.with_cuda_schedule(g);
  const auto lowered = k.compile_cuda().lower_variant(32);
  CHECK(lowered.source.source.rfind("/* schedule: split(\"k\", 32)", 0) == 0);
  CHECK(k.compile_cuda().explain().find("# user GPU schedule: split(\"k\", 32)") != std::string::npos);

  // What the GPU cannot run is a UserError naming it.
  auto fails = [&](sp::Schedule s, std::vector<std::string> parts) {
    INFO(s.to_string());
    try {
      (void)spmm.with_cuda_schedule(s).compile_cuda().lower_variant(32);
      FAIL("no error");
    } catch (const sp::UserError& e) {
      const std::string m = e.what();
      INFO(m);
      for (auto& p : parts) CHECK(m.find(p) != std::string::npos);
    }
  };
  fails(sp::Schedule().split("k", 32).bind("k_i", "threadIdx.x"), {"outside a loop bound to blockIdx"});
  fails(sp::Schedule().bind("i", "blockIdx.x").bind("j", "blockIdx.y"), {"reduction loop"});
  fails(sp::Schedule().bind("i", "blockIdx.x").bind("k", "threadIdx.x"), {"not a constant in [1, 1024]"});
  fails(sp::Schedule().bind("i", "blockIdx.x").parallel("k"), {"parallel is a CPU schedule step"});
  fails(sp::Schedule().split("k", 2048).bind("k_i", "threadIdx.x").bind("i", "blockIdx.x"),
        {"not a constant in [1, 1024]"});
}

TEST_CASE("a GPU schedule whose block has threads refuses a write outside the thread loops, which every thread would run "
          "(spindle-kernel-fuzz seed 7000031)",
          "[correctness][schedule][cuda][error]") {
  // n(i) counts the rows once; the row sum's loop over j becomes warp lanes under rfactor.
  const auto k = sp::kernel("row_sum_and_count", [](sp::in<float, I, J> a, sp::out<float, I> y, sp::out<float, I> n,
                                                    sp::iter<I> i) {
    n(i) += 1.0f;
    sp::for_each<J>([&](sp::iter<J> j) { y(i) += a(i, j); });
  });
  const auto a = random_csr<float>({"rows", 70, 50, 6, 0.2}, 71);
  auto run = [&](const sp::Schedule& s) {
    auto y = sp::Tensor<float>::full({a.rows()}, nan_f());
    auto n = sp::Tensor<float>::full({a.rows()}, nan_f());
    auto acopy = a;
    std::vector<sp::runtime::CallArg> args{sp::detail::make_call_arg(acopy), sp::detail::make_call_arg(y),
                                           sp::detail::make_call_arg(n)};
    sp::test::run_cuda_emulated(k.ir(), args, nullptr, nullptr, nullptr, &s);
    std::vector<Ref> want(static_cast<std::size_t>(a.rows()));
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      CHECK(n(r) == 1.0f);
      for (auto p = a.indptr()[r]; p < a.indptr()[r + 1]; ++p)
        want[static_cast<std::size_t>(r)].value += a.values()[p],
            want[static_cast<std::size_t>(r)].abs_sum += std::abs(a.values()[p]), ++want[static_cast<std::size_t>(r)].terms;
    }
    check_close<float>(want, y.values(), "row sums");
  };
  run(sp::Schedule().bind("i", "blockIdx.x"));  // one thread per block: n(i) once
  try {
    run(sp::Schedule().bind("i", "blockIdx.x").rfactor("j", 32));
    FAIL("no error");
  } catch (const sp::UserError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.find("every thread would run the write") != std::string::npos);
    CHECK(m.find("c[i] = 0.0f") != std::string::npos);  // n is the third buffer, c
    CHECK(m.find("threadIdx.x") != std::string::npos);
  }
}
