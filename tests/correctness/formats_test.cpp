// Block and padded formats as kernel arguments: BSR, DBSR and SR-BCRS SpMM, ELL3D RGCN aggregation with compile-time block extents
// (dense_fixed_n<N>), ELL SpMM, hyb(c, k) SpMM and CSC SpMV/SpMM (ops.hpp), against the plain CSR loop of the matrix they
// were built from, on every test shape, several block shapes and feature sizes, the real
// matrices, with 1 and 3 threads; the kernels' IR against the reference interpreter; the
// CUDA builds through NVRTC and the emulator; and the call-time errors of compile-time
// extents.
#include <catch2/catch.hpp>

#include <bit>
#include <limits>
#include <numeric>
#include <set>

#include "correctness/correctness_support.hpp"
#include "support/emulated_cuda_call.hpp"
#include "support/engines.hpp"
#include "support/reference_interpreter.hpp"

using namespace spindle_test;
namespace sp = spindle;

namespace {

template <class T>
sp::Tensor<T> poisoned(std::vector<std::int64_t> shape) {
  return sp::Tensor<T>::full(std::move(shape), std::numeric_limits<T>::quiet_NaN());
}

sp::runtime::Runtime& runtime_with_threads(int threads) {
  static std::map<int, std::unique_ptr<sp::runtime::Runtime>> rts;
  auto& rt = rts[threads];
  if (!rt) {
    sp::Options o = sp::Options::from_env();
    o.num_threads = threads;
    rt = std::make_unique<sp::runtime::Runtime>(o);
  }
  return *rt;
}

// Y = A X through BsrSpmm<T, BR, BC> against the CSR loop, 1 and 3 threads.
template <class T, std::int64_t BR, std::int64_t BC>
void check_bsr_spmm(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  const auto bsr = sp::Bsr<T>::from_csr(a, BR, BC);
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 5, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  const sp::ops::BsrSpmm<T, BR, BC> spmm;
  for (int threads : {1, 3}) {
    INFO(what << " blocks " << BR << "x" << BC << " k=" << k << " threads " << threads);
    auto y = poisoned<T>({a.rows(), k});
    auto kernel = spmm.kernel().with_runtime(runtime_with_threads(threads));
    // the same math as BsrSpmm, through the runtime under test: padded views of X and Y
    const std::int64_t mb = bsr.block_row_count(), nb = bsr.block_col_count();
    std::vector<T> xp(static_cast<std::size_t>(nb * BC * k), T(0)), yp(static_cast<std::size_t>(mb * BR * k), T(7));
    std::copy(x.values().begin(), x.values().end(), xp.begin());
    kernel(bsr, sp::TensorView<const T>(xp.data(), {nb, BC, k}), sp::TensorView<T>(yp.data(), {mb, BR, k}));
    std::copy(yp.begin(), yp.begin() + static_cast<std::ptrdiff_t>(y.size()), y.values().begin());
    check_close<T>(ref, y.values(), what + " bsr_spmm kernel");
    for (std::int64_t q = y.size(); q < static_cast<std::int64_t>(yp.size()); ++q)
      REQUIRE(yp[static_cast<std::size_t>(q)] == T(0));  // padding rows: out is zero-filled
  }
  auto y = poisoned<T>({a.rows(), k});
  spmm(bsr, x, y);
  check_close<T>(ref, y.values(), what + " BsrSpmm");
}

// Dbsr<T>::from_csr against the Bsr it keeps the non-empty block rows of, and Y = A X through
// DbsrSpmm<T, BR, BC> and its kernel (1 and 3 threads) against the CSR loop.
template <class T, std::int64_t BR, std::int64_t BC>
void check_dbsr_spmm(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  INFO(what << " dbsr blocks " << BR << "x" << BC << " k=" << k);
  const auto bsr = sp::Bsr<T>::from_csr(a, BR, BC);
  const auto d = sp::Dbsr<T>::from_csr(a, BR, BC);
  std::int64_t nonempty = 0;
  for (std::int64_t r = 0; r < bsr.block_row_count(); ++r) nonempty += bsr.indptr()[r + 1] > bsr.indptr()[r];
  REQUIRE(d.stored_block_rows() == nonempty);
  REQUIRE(d.nnz_blocks() == bsr.nnz_blocks());
  REQUIRE(d.block_row_count() == bsr.block_row_count());
  REQUIRE(d.block_col_count() == bsr.block_col_count());
  for (std::size_t q = 0; q + 1 < d.row_ids().size(); ++q) REQUIRE(d.row_ids()[q] < d.row_ids()[q + 1]);
  const auto back = d.to_bsr();
  REQUIRE(std::vector<std::int32_t>(back.indptr().begin(), back.indptr().end()) ==
          std::vector<std::int32_t>(bsr.indptr().begin(), bsr.indptr().end()));
  REQUIRE(std::vector<T>(back.values().begin(), back.values().end()) == std::vector<T>(bsr.values().begin(), bsr.values().end()));
  const auto c1 = d.to_csr(), c2 = bsr.to_csr();
  REQUIRE(std::vector<std::int32_t>(c1.indices().begin(), c1.indices().end()) ==
          std::vector<std::int32_t>(c2.indices().begin(), c2.indices().end()));
  CHECK(d.padding_ratio() == bsr.padding_ratio());
  CHECK(d.bytes() == static_cast<std::int64_t>((2 * nonempty + 1 + d.nnz_blocks()) * 4 + d.values().size() * sizeof(T)));
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 8, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  const sp::ops::DbsrSpmm<T, BR, BC> spmm;
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    auto kernel = spmm.kernel().with_runtime(runtime_with_threads(threads));
    const std::int64_t mb = d.block_row_count(), nb = d.block_col_count();
    std::vector<T> xp(static_cast<std::size_t>(nb * BC * k), T(0)), yp(static_cast<std::size_t>(mb * BR * k), T(7));
    std::copy(x.values().begin(), x.values().end(), xp.begin());
    kernel(d, sp::TensorView<const T>(xp.data(), {nb, BC, k}), sp::TensorView<T>(yp.data(), {mb, BR, k}));
    std::vector<T> y(yp.begin(), yp.begin() + static_cast<std::ptrdiff_t>(a.rows() * k));
    check_close<T>(ref, y, what + " dbsr_spmm kernel");  // rows of unstored block rows: 0
    for (std::size_t q = y.size(); q < yp.size(); ++q) REQUIRE(yp[q] == T(0));  // padding rows: out is zero-filled
  }
  auto y = poisoned<T>({a.rows(), k});
  spmm(d, x, y);
  check_close<T>(ref, y.values(), what + " DbsrSpmm");
}

// SrBcrs<T>::from_csr against the source: from_csr refuses (ShapeError) exactly when a
// panel's columns, padded to a multiple of GS, need more distinct columns than the matrix
// has; otherwise the slot count is the panels' padded column counts, the arrays pass the
// validating constructor, the entries are the source's, and Y = A X through the kernel on
// the panel-shaped view (1 and 3 threads; the padding rows of Y are zero-filled) and through
// SrBcrsSpmm<T, TT, GS> matches the CSR loop.
template <class T, std::int64_t TT, std::int64_t GS>
void check_sr_bcrs_spmm(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  INFO(what << " sr-bcrs t=" << TT << " g=" << GS << " k=" << k);
  const std::int64_t mp = (a.rows() + TT - 1) / TT;
  std::int64_t slots = 0;
  bool fits = true;
  std::vector<std::int64_t> mark(static_cast<std::size_t>(a.cols()), -1);
  for (std::int64_t p = 0; p < mp; ++p) {
    std::int64_t held = 0;
    for (std::int64_t r = p * TT; r < std::min(a.rows(), (p + 1) * TT); ++r)
      for (auto q = a.indptr()[r]; q < a.indptr()[r + 1]; ++q)
        if (mark[a.indices()[q]] != p) mark[a.indices()[q]] = p, ++held;
    const std::int64_t padded = (held + GS - 1) / GS * GS;
    fits = fits && padded <= a.cols();
    slots += padded;
  }
  if (!fits) {
    REQUIRE_THROWS_AS(sp::SrBcrs<T>::from_csr(a, TT, GS), sp::ShapeError);
    return;
  }
  const auto s = sp::SrBcrs<T>::from_csr(a, TT, GS);
  REQUIRE(s.panel_count() == mp);
  REQUIRE(s.padded_rows() == mp * TT);
  REQUIRE(s.slot_count() == slots);
  REQUIRE(s.group_count() * GS == slots);
  REQUIRE(s.stored_nonzeros() == a.nnz());
  CHECK(s.padding_ratio() == static_cast<double>(slots * TT) / static_cast<double>(std::max<std::int64_t>(1, a.nnz())));
  CHECK(s.bytes() == static_cast<std::int64_t>((mp + 1 + slots) * 4 + slots * TT * static_cast<std::int64_t>(sizeof(T))));
  const sp::SrBcrs<T> rebuilt(a.rows(), a.cols(), TT, GS, to_vector(s.group_ptr()), to_vector(s.indices()),
                              to_vector(s.values()));
  const auto want_entries = nonzero_entries(a);
  REQUIRE(nonzero_entries(rebuilt.to_csr()) == want_entries);
  const auto back = s.to_csr();
  REQUIRE(back.nnz() == a.nnz());
  REQUIRE(nonzero_entries(back) == want_entries);
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 9, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  const sp::ops::SrBcrsSpmm<T, TT, GS> spmm;
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    auto kernel = spmm.kernel().with_runtime(runtime_with_threads(threads));
    std::vector<T> yp(static_cast<std::size_t>(mp * TT * k), T(7));
    kernel(s, x, sp::TensorView<T>(yp.data(), {mp, TT, k}));
    std::vector<T> y(yp.begin(), yp.begin() + static_cast<std::ptrdiff_t>(a.rows() * k));
    check_close<T>(ref, y, what + " sr_bcrs_spmm kernel");
    for (std::size_t q = y.size(); q < yp.size(); ++q) REQUIRE(yp[q] == T(0));
  }
  auto y = poisoned<T>({a.rows(), k});
  spmm(s, x, y);
  check_close<T>(ref, y.values(), what + " SrBcrsSpmm");
}

// The sum over relations of A_r (X W_r), accumulated in place (no n x k vector per relation).
template <class T>
std::vector<Ref> rgcn_reference(const std::vector<sp::Csr<T>>& rels, const sp::Tensor<T>& xw, std::int64_t k) {
  const std::int64_t n = rels.empty() ? 0 : rels[0].rows(), m = rels.empty() ? 0 : rels[0].cols();
  std::vector<Ref> ref(static_cast<std::size_t>(n * k));
  for (std::size_t r = 0; r < rels.size(); ++r) {
    const auto& a = rels[r];
    for (std::int64_t i = 0; i < n; ++i)
      for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
        for (std::int64_t f = 0; f < k; ++f) {
          const double t = static_cast<double>(a.values()[q]) *
                           static_cast<double>(xw.values()[static_cast<std::size_t>(
                               ((static_cast<std::int64_t>(r) * m + a.indices()[q]) * k + f))]);
          Ref& o = ref[static_cast<std::size_t>(i * k + f)];
          o.value += t;
          o.abs_sum += std::abs(t);
          ++o.terms;
        }
  }
  return ref;
}

// Ell3d<T>::from_relations against its relations (the stored rows, each relation back as a
// Csr, the padding), and C = sum_r A_r XW_r through ops::rgcn_ell3d_spmm (1 and 3 threads,
// C poisoned first: every row is written, rows without edges with 0) against the CSR loops.
template <class T>
void check_ell3d_spmm(const std::vector<sp::Csr<T>>& rels, std::int64_t width, std::int64_t k, const std::string& what) {
  INFO(what << " ell3d width " << width << " k=" << k);
  const auto e = sp::Ell3d<T>::from_relations(rels, width);
  const std::int64_t n = rels.empty() ? 0 : rels[0].rows(), m = rels.empty() ? 0 : rels[0].cols();
  const auto nrel = static_cast<std::int64_t>(rels.size());
  std::int64_t stored = 0, longest = 0, nnz = 0;
  for (const auto& a : rels) {
    nnz += a.nnz();
    for (std::int64_t i = 0; i < a.rows(); ++i) {
      stored += a.indptr()[i + 1] > a.indptr()[i];
      longest = std::max<std::int64_t>(longest, a.indptr()[i + 1] - a.indptr()[i]);
    }
  }
  REQUIRE(e.relations() == nrel);
  REQUIRE(e.stored_rows() == stored);
  REQUIRE(e.width() == (width < 0 ? longest : width));
  REQUIRE(e.stored_nonzeros() == nnz);
  CHECK(e.bytes() == static_cast<std::int64_t>((nrel + 1 + stored + stored * e.width()) * 4 +
                                               stored * e.width() * static_cast<std::int64_t>(sizeof(T))));
  for (std::int64_t r = 0; r < nrel; ++r) REQUIRE(nonzero_entries(e.relation(r)) == nonzero_entries(rels[r]));
  const sp::Ell3d<T> rebuilt(nrel, n, m, e.width(), to_vector(e.rel_ptr()), to_vector(e.row_ids()), to_vector(e.indices()),
                             to_vector(e.values()));
  REQUIRE(rebuilt.stored_nonzeros() == nnz);
  const auto xw = sp::Tensor<T>::random({nrel, m, k}, 13, -1, 1);
  const auto ref = rgcn_reference(rels, xw, k);
  const auto op = sp::ops::rgcn_ell3d_spmm<T>();
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    auto c = poisoned<T>({n, k});
    op.with_runtime(runtime_with_threads(threads))(e, xw, c);
    check_close<T>(ref, c.values(), what + " rgcn_ell3d_spmm");
  }
}

// Ell3dBuckets<T>::from_relations against its relations (every stored row in the one part
// whose width is below twice its length, each relation back, the padding), and
// C = sum_r A_r XW_r through ops::rgcn_buckets_spmm (1 and 3 threads, C poisoned first:
// rows without edges are 0) against the CSR loops; bad operands leave C as it was.
template <class T>
void check_ell3d_buckets(const std::vector<sp::Csr<T>>& rels, std::int64_t k, const std::string& what) {
  INFO(what << " ell3d buckets k=" << k);
  const auto b = sp::Ell3dBuckets<T>::from_relations(rels);
  const std::int64_t n = rels.empty() ? 0 : rels[0].rows(), m = rels.empty() ? 0 : rels[0].cols();
  const auto nrel = static_cast<std::int64_t>(rels.size());
  REQUIRE(b.relations() == nrel);
  REQUIRE(b.rows() == n);
  REQUIRE(b.cols() == m);
  std::int64_t stored = 0, nnz = 0;
  std::set<std::int64_t> buckets;
  for (const auto& a : rels) {
    nnz += a.nnz();
    for (std::int64_t i = 0; i < a.rows(); ++i) {
      const std::int64_t len = a.indptr()[i + 1] - a.indptr()[i];
      if (len == 0) continue;
      ++stored;
      buckets.insert(std::bit_width(static_cast<std::uint64_t>(len - 1)));
    }
  }
  REQUIRE(b.parts().size() == buckets.size());  // one part per non-empty bucket
  REQUIRE(b.stored_rows() == stored);
  REQUIRE(b.stored_nonzeros() == nnz);
  std::int64_t slots = 0, bytes = 0, previous_width = 0;
  for (const auto& part : b.parts()) {
    REQUIRE(part.relations() == nrel);
    REQUIRE(part.width() > previous_width);
    previous_width = part.width();
    slots += part.stored_rows() * part.width();
    bytes += part.bytes();
    // Every stored row of the part is longer than half the part's width (at most 2x padding).
    for (std::int64_t r = 0; r < nrel; ++r) {
      const auto a = part.relation(r);
      for (std::int64_t i = 0; i < a.rows(); ++i) {
        const std::int64_t len = a.indptr()[i + 1] - a.indptr()[i];
        if (len > 0) REQUIRE(2 * len > part.width());
      }
    }
  }
  CHECK(b.slots() == slots);
  CHECK(b.bytes() == bytes);
  CHECK(b.padding_ratio() < 2.0);
  if (nnz > 0) CHECK(b.padding_ratio() >= 1.0);
  for (std::int64_t r = 0; r < nrel; ++r) REQUIRE(nonzero_entries(b.relation(r)) == nonzero_entries(rels[r]));
  const auto xw = sp::Tensor<T>::random({nrel, m, k}, 17, -1, 1);
  const auto ref = rgcn_reference(rels, xw, k);
  const auto op = sp::ops::rgcn_buckets_spmm<T>();
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    auto c = poisoned<T>({n, k});
    op.with_runtime(runtime_with_threads(threads))(b, xw, c);
    check_close<T>(ref, c.values(), what + " rgcn_buckets_spmm");
  }
  // The same sum as one SpMM of the relations side by side ([A_1 ... A_R], N x R M) with XW
  // seen as [R M, K]; the side-by-side matrix holds relation r's row i at columns r M + j.
  const auto wide = sp::side_by_side(rels, "wide");
  REQUIRE(wide.rows() == (rels.empty() ? 0 : n));
  REQUIRE(wide.cols() == nrel * m);
  REQUIRE(wide.nnz() == nnz);
  bool all_sorted = true;
  for (const auto& a : rels) all_sorted = all_sorted && a.sorted();
  CHECK(wide.sorted() == all_sorted);
  for (std::int64_t i = 0; i < wide.rows(); ++i) {
    auto q = wide.indptr()[i];
    for (std::int64_t r = 0; r < nrel; ++r)
      for (auto p = rels[r].indptr()[i]; p < rels[r].indptr()[i + 1]; ++p, ++q) {
        REQUIRE(static_cast<std::int64_t>(wide.indices()[q]) == r * m + rels[r].indices()[p]);
        REQUIRE(wide.values()[q] == rels[r].values()[p]);
      }
    REQUIRE(q == wide.indptr()[i + 1]);
  }
  if (!rels.empty()) {
    for (int threads : {1, 3}) {
      INFO("side by side, threads " << threads);
      auto c = poisoned<T>({n, k});
      sp::ops::spmm<T>().with_runtime(runtime_with_threads(threads))(
          wide, sp::TensorView<const T>(xw.data(), {nrel * m, k}), c.view());
      check_close<T>(ref, c.values(), what + " side_by_side spmm");
    }
  }
  // Operands of the wrong shape: a ShapeError naming them, C untouched.
  auto c = sp::Tensor<T>::full({n, k}, T(7));
  const auto xw_short = sp::Tensor<T>::zeros({nrel + 1, m, k});
  CHECK_THROWS_AS(op(b, xw_short, c), sp::ShapeError);
  auto c_wide = sp::Tensor<T>::full({n, k + 1}, T(7));
  CHECK_THROWS_WITH(op(b, xw, c_wide), Catch::Contains("rgcn_buckets_spmm: C is [") && Catch::Contains("] but A ("));
  CHECK(std::all_of(c.values().begin(), c.values().end(), [](T v) { return v == T(7); }));
  CHECK(std::all_of(c_wide.values().begin(), c_wide.values().end(), [](T v) { return v == T(7); }));
}

template <class T>
void check_ell_spmm(const sp::Csr<T>& a, std::int64_t width, std::int64_t k, const std::string& what) {
  const auto ell = sp::Ell<T>::from_csr(a, width);
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 6, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  for (int threads : {1, 3}) {
    INFO(what << " ell width " << ell.width() << " k=" << k << " threads " << threads);
    auto y = poisoned<T>({a.rows(), k});
    sp::ops::ell_spmm<T>().with_runtime(runtime_with_threads(threads))(ell, x, y);
    check_close<T>(ref, y.values(), what + " ell_spmm");
  }
}

// DCSR SpMV and SpMM over the stored rows only: the CSR loop on every CPU engine with 1 and
// 3 threads; the rows A does not store come out 0 (the output starts poisoned).
template <class T>
void check_dcsr(const sp::Csr<T>& a, std::int64_t k, const std::string& what) {
  const auto d = sp::Dcsr<T>::from_csr(a);
  REQUIRE(d.nnz() == a.nnz());
  const auto back = d.to_csr();
  REQUIRE(std::equal(back.indptr().begin(), back.indptr().end(), a.indptr().begin(), a.indptr().end()));
  const auto x = sp::Tensor<T>::random({a.cols(), k}, 6, -1, 1);
  const auto x1 = sp::Tensor<T>::random({a.cols()}, 7, -1, 1);
  const auto ref = ref_spmm(a, x.values(), k);
  const auto ref1 = ref_spmv(a, x1.values());
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO(what << " dcsr (" << d.stored_rows() << " of " << a.rows() << " rows stored) k=" << k << " engine "
                << engine << " threads " << threads);
      auto& rt = spindle::test::engine_runtime(engine, threads);
      auto y = poisoned<T>({a.rows(), k});
      sp::ops::dcsr_spmm<T>().with_runtime(rt)(d, x, y);
      check_close<T>(ref, y.values(), what + " dcsr_spmm");
      auto y1 = poisoned<T>({a.rows()});
      sp::ops::dcsr_spmv<T>().with_runtime(rt)(d, x1, y1);
      check_close<T>(ref1, y1.values(), what + " dcsr_spmv");
    }
}

// hyb(c, k): the parts sum to the matrix (exactly: every entry lands in one slot), each
// part's structure follows the definition (format/hyb.hpp), and HybSpmm matches the CSR loop
// on every CPU engine with 1 and 3 threads (Y starts poisoned: rows no part touches are 0).
template <class T>
void check_hyb(const sp::Csr<T>& a, std::int64_t c, std::int64_t k, std::int64_t feat, const std::string& what) {
  c = std::min<std::int64_t>(c, std::max<std::int64_t>(1, a.cols()));
  INFO(what << " hyb(" << c << ", " << k << ") K=" << feat);
  const auto h = sp::Hyb<T>::from_csr(a, c, k);
  REQUIRE(h.rows() == a.rows());
  REQUIRE(h.cols() == a.cols());
  REQUIRE(h.stored_nonzeros() == a.canonical().nnz());
  {  // the parts' entries, summed where two parts hold one coordinate, are the matrix's
    std::vector<sp::Triplet<T>> held;
    for (const auto& part : h.parts())
      for (std::int64_t r = 0; r < part.ell.rows(); ++r)
        for (std::int64_t q = 0; q < part.ell.width(); ++q)
          held.push_back({static_cast<std::int64_t>(part.rows[static_cast<std::size_t>(r)]),
                          static_cast<std::int64_t>(part.ell.indices()[r * part.ell.width() + q]),
                          part.ell.values()[r * part.ell.width() + q]});
    REQUIRE(nonzero_entries(sp::Csr<T>::from_triplets(a.rows(), a.cols(), held)) == nonzero_entries(a));
  }
  std::int64_t slots = 0, entries = 0;
  std::int64_t last_partition = -1, last_width = 0;
  for (const auto& part : h.parts()) {
    INFO("part: partition " << part.partition << " bucket " << part.bucket_width);
    REQUIRE(part.ell.rows() > 0);
    REQUIRE(static_cast<std::int64_t>(part.rows.size()) == part.ell.rows());
    REQUIRE(std::is_sorted(part.rows.begin(), part.rows.end()));
    REQUIRE(part.bucket_width <= k);
    REQUIRE(std::has_single_bit(static_cast<std::uint64_t>(part.bucket_width)));
    REQUIRE(part.ell.width() == std::min(part.bucket_width, a.cols()));
    REQUIRE(part.column_begin == part.partition * a.cols() / c);
    REQUIRE(part.column_end == (part.partition + 1) * a.cols() / c);
    REQUIRE((part.partition > last_partition || part.bucket_width > last_width));  // by partition, then width
    last_partition = part.partition, last_width = part.bucket_width;
    for (std::int64_t r = 0; r < part.ell.rows(); ++r) {
      std::int64_t held = 0;  // the piece's entries: nonzero slots, inside the partition
      for (std::int64_t s = 0; s < part.ell.width(); ++s) {
        const std::int64_t col = part.ell.row_indices(r)[static_cast<std::size_t>(s)];
        if (part.ell.row_values(r)[static_cast<std::size_t>(s)] != T(0)) {
          REQUIRE(col >= part.column_begin);
          REQUIRE(col < part.column_end);
          ++held;
        }
      }
      REQUIRE(held <= part.bucket_width);
      REQUIRE((part.bucket_width == 1 || held > part.bucket_width / 2));  // the smallest bucket that fits
      entries += held;
    }
    slots += part.ell.rows() * part.ell.width();
  }
  if (a.nnz() > 0)
    REQUIRE(h.padding_ratio() == Approx(static_cast<double>(slots) / static_cast<double>(h.stored_nonzeros())));
  REQUIRE(entries == h.stored_nonzeros());  // random values are nonzero
  const auto x = sp::Tensor<T>::random({a.cols(), feat}, 8, -1, 1);
  const auto ref = ref_spmm(a, x.values(), feat);
  const sp::ops::HybSpmm<T> spmm;
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO("engine " << engine << " threads " << threads);
      auto y = poisoned<T>({a.rows(), feat});
      spmm.with_runtime(spindle::test::engine_runtime(engine, threads))(h, x, y);
      check_close<T>(ref, y.values(), what + " hyb_spmm");
    }
  // SpMV on the same parts (the slot loops of constant width vectorised by the default schedule).
  const auto xv = sp::Tensor<T>::random({a.cols()}, 9, -1, 1);
  const auto refv = ref_spmv(a, xv.values());
  const sp::ops::HybSpmv<T> spmv;
  for (const auto& engine : spindle::test::cpu_engines())
    for (int threads : {1, 3}) {
      INFO("engine " << engine << " threads " << threads);
      auto yv = poisoned<T>({a.rows()});
      spmv.with_runtime(spindle::test::engine_runtime(engine, threads))(h, xv, yv);
      check_close<T>(refv, yv.values(), what + " hyb_spmv");
    }
}

}  // namespace

TEMPLATE_TEST_CASE("DCSR SpMV and SpMM match the CSR loop, on hypersparse, empty and real matrices",
                   "[correctness][formats][dcsr]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  for (std::int64_t k : {1, 7, 33}) check_dcsr<T>(random_csr<T>(s, 61), k, s.name);
  // Hypersparse: 97 % of 20011 rows empty.
  check_dcsr<T>(random_csr<T>(Shape{"hypersparse", 20011, 3001, 5, 0.97}, 62), 16, "hypersparse");
}

TEST_CASE("DCSR on real graphs, against the interpreter and the CUDA build, structure errors",
          "[correctness][formats][dcsr][interpreter][cuda]") {
  for (const char* file : {"gnn/cora.mtx.gz", "matrices/bcsstk25.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_dcsr<float>(*a, 32, file);
  }
  // A small matrix with empty rows at both ends and in the middle, through the interpreter
  // and the CUDA build (emulated here, on the GPU where there is one).
  const auto a = random_csr<float>(Shape{"gaps", 41, 23, 3, 0.5}, 63);
  const auto d = sp::Dcsr<float>::from_csr(a);
  const std::int64_t k = 5;
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 64, -1, 1);
  const auto kernel = sp::ops::dcsr_spmm<float>();
  spindle::test::NvrtcCheck nvrtc;
  auto run = [&](auto&& how) {
    auto y = sp::Tensor<float>::full({a.rows(), k}, 99.0f);
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(d);
    args[1].view = sp::storage_of(x);
    args[2].view = sp::storage_of(y);
    how(args);
    return y;
  };
  const auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
  check_close<float>(ref_spmm(a, x.values(), k), want.values(), "dcsr interpreter vs CSR loop");
  const auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
  check_close<float>(ref_spmm(a, x.values(), k), emulated.values(), "dcsr CUDA build vs CSR loop");
  // Structure errors name the place.
  using D = sp::Dcsr<float>;
  CHECK_THROWS_WITH(D(5, 4, {1, 1}, {0, 1, 2}, {0, 1}, {1, 1}), Catch::Contains("row ids are not strictly ascending at stored row 1"));
  CHECK_THROWS_WITH(D(5, 4, {5}, {0, 1}, {0}, {1}), Catch::Contains("row id 5 out of range [0, 5)"));
  CHECK_THROWS_WITH(D(5, 4, {0, 2}, {0, 1}, {0}, {1}), Catch::Contains("indptr has 2 entries, expected stored rows + 1 = 3"));
  CHECK_THROWS_WITH(D(5, 4, {0}, {0, 1}, {4}, {1}), Catch::Contains("index 4 out of range [0, 4)"));
  CHECK_THROWS_AS(D(5, 4, {0}, {0, 1}, {0}, {}), sp::FormatError);
  // A DCSR where a CSR is expected: the row level is sparse, the binder says so.
  auto y = sp::Tensor<float>::zeros({a.rows(), k});
  CHECK_THROWS_AS(sp::ops::spmm<float>()(d, x, y), sp::ShapeError);
}

TEST_CASE("kron_blocks: (A + I) with each entry a dense d x d block, rows sorted, diagonal added once",
          "[correctness][formats]") {
  // A = [[0, 5], [7, 0], [0, 0]] (3 x 2; row 1 stored unsorted is not possible here: one entry),
  // rows 0 and 1 gain their diagonal, row 2 has none (2 >= cols).
  const sp::Csr<float> a(3, 2, {0, 1, 2, 2}, {1, 0}, {5.f, 7.f});
  const auto k = sp::kron_blocks(a, 2, [](int i, int j, std::int64_t c) { return 100 * c + 10 * i + j; });
  REQUIRE(k.rows() == 6);
  REQUIRE(k.cols() == 4);
  const std::vector<std::int32_t> ptr{0, 4, 8, 12, 16, 16, 16}, idx{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
  CHECK(std::vector<std::int32_t>(k.indptr().begin(), k.indptr().end()) == ptr);
  CHECK(std::vector<std::int32_t>(k.indices().begin(), k.indices().end()) == idx);
  // Row 1 of the result (block row 0, i = 1): blocks of columns 0 and 1, entries 100 c + 10 + j.
  const std::vector<float> row1{10, 11, 110, 111};
  CHECK(std::vector<float>(k.values().begin() + 4, k.values().begin() + 8) == row1);
  // The default block 1 / (1 + i + j), and d = 1 is A + I.
  const auto d1 = sp::kron_blocks(a, 1);
  CHECK(d1.nnz() == 4);
  CHECK(d1.values()[0] == 1.f);
  CHECK_THROWS_AS(sp::kron_blocks(a, 0), sp::ShapeError);
}

TEMPLATE_TEST_CASE("BSR SpMM with compile-time block extents matches the CSR loop", "[correctness][formats][bsr]",
                   float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 21);
  for (std::int64_t k : {1, 7, 33}) {
    check_bsr_spmm<T, 1, 1>(a, k, s.name);
    check_bsr_spmm<T, 4, 4>(a, k, s.name);
    check_bsr_spmm<T, 3, 5>(a, k, s.name);
  }
  check_bsr_spmm<T, 2, 2>(a, 16, s.name);
  check_bsr_spmm<T, 8, 8>(a, 16, s.name);
}

TEST_CASE("BSR SpMM on real matrices (FEM blocks and a graph)", "[correctness][formats][bsr][graphs]") {
  for (const char* file : {"matrices/bcsstk25.mtx.gz", "gnn/cora.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_bsr_spmm<float, 4, 4>(*a, 32, file);
    check_bsr_spmm<float, 2, 3>(*a, 5, file);
  }
}

TEMPLATE_TEST_CASE("DBSR (doubly compressed BSR): the non-empty block rows of the BSR, SpMM matches the CSR loop",
                   "[correctness][formats][dbsr]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 23);
  for (std::int64_t k : {1, 7, 33}) {
    check_dbsr_spmm<T, 1, 1>(a, k, s.name);
    check_dbsr_spmm<T, 4, 4>(a, k, s.name);
    check_dbsr_spmm<T, 3, 5>(a, k, s.name);
  }
  // Block-sparse with most block rows empty (97 % of the rows empty: 88 % of 4-row blocks).
  const auto h = random_csr<T>(Shape{"hypersparse", 20011, 3001, 5, 0.97}, 24);
  check_dbsr_spmm<T, 4, 4>(h, 16, "hypersparse");
  CHECK(sp::Dbsr<T>::from_csr(h, 4, 4).bytes() < sp::Bsr<T>::from_csr(h, 4, 4).bytes());
}

TEST_CASE("DBSR on real matrices, against the interpreter and the CUDA build, structure errors",
          "[correctness][formats][dbsr][graphs][interpreter][cuda]") {
  for (const char* file : {"matrices/bcsstk25.mtx.gz", "gnn/cora.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_dbsr_spmm<float, 4, 4>(*a, 32, file);
    check_dbsr_spmm<float, 2, 3>(*a, 5, file);
  }
  // Empty block rows at both ends and in the middle, through the interpreter and the CUDA
  // build (emulated here, on the GPU where there is one).
  const auto a = random_csr<float>(Shape{"gaps", 41, 23, 3, 0.6}, 65);
  const auto d = sp::Dbsr<float>::from_csr(a, 2, 3);
  const std::int64_t k = 5, mb = d.block_row_count(), nb = d.block_col_count();
  REQUIRE(d.stored_block_rows() < mb);
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 66, -1, 1);
  std::vector<float> xp(static_cast<std::size_t>(nb * 3 * k), 0.0f);
  std::copy(x.values().begin(), x.values().end(), xp.begin());
  const auto kernel = sp::ops::dbsr_spmm_kernel<float, 2, 3>();
  spindle::test::NvrtcCheck nvrtc;
  auto run = [&](auto&& how) {
    auto y = sp::Tensor<float>::full({mb, 2, k}, 99.0f);
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(d);
    args[1].view = sp::storage_of(sp::TensorView<const float>(xp.data(), {nb, 3, k}));
    args[2].view = sp::storage_of(y);
    how(args);
    return std::vector<float>(y.values().begin(), y.values().begin() + a.rows() * k);
  };
  const auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
  check_close<float>(ref_spmm(a, x.values(), k), want, "dbsr interpreter vs CSR loop");
  const auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
  check_close<float>(ref_spmm(a, x.values(), k), emulated, "dbsr CUDA build vs CSR loop");
  if (nvrtc.available) CHECK(nvrtc.compiled >= 1);
  // Structure errors name the place (5 x 4 with 2 x 2 blocks: 3 block rows, 2 block columns).
  using D = sp::Dbsr<float>;
  const std::vector<float> one(4, 1.0f), two(8, 1.0f);
  CHECK_THROWS_WITH(D(5, 4, 2, 2, {1, 1}, {0, 1, 2}, {0, 1}, two),
                    Catch::Contains("block row ids are not strictly ascending at stored block row 1"));
  CHECK_THROWS_WITH(D(5, 4, 2, 2, {3}, {0, 1}, {0}, one), Catch::Contains("block row id 3 out of range [0, 3)"));
  CHECK_THROWS_WITH(D(5, 4, 2, 2, {0, 2}, {0, 1}, {0}, one), Catch::Contains("indptr has 2 entries"));
  CHECK_THROWS_WITH(D(5, 4, 2, 2, {0}, {0, 1}, {2}, one), Catch::Contains("index 2 out of range [0, 2)"));
  CHECK_THROWS_WITH(D(5, 4, 2, 2, {0}, {0, 2}, {1, 0}, two), Catch::Contains("not strictly ascending"));
  CHECK_THROWS_WITH(D(5, 4, 2, 2, {0}, {0, 1}, {0}, std::vector<float>(3, 1.0f)),
                    Catch::Contains("values has 3 entries, expected nnz_blocks * 2 * 2 = 4"));
  CHECK_THROWS_AS(D(5, 4, 0, 2, {}, {0}, {}, {}), sp::ShapeError);
  const D ok(5, 4, 2, 2, {0}, {0, 1}, {0}, one);
  CHECK(ok.to_bsr().nnz_blocks() == 1);
  CHECK(ok.stored_nonzeros() == 4);
  // The wrong block shape for the operator, and a DBSR where a BSR is expected.
  auto y = sp::Tensor<float>::zeros({a.rows(), k});
  const auto dbsr44 = sp::ops::dbsr_spmm<float, 4, 4>();
  CHECK_THROWS_AS(dbsr44(d, x, y), sp::ShapeError);
  auto yb = sp::Tensor<float>::zeros({mb, 2, k});
  const auto bsr23 = sp::ops::bsr_spmm_kernel<float, 2, 3>();
  const sp::TensorView<const float> xb(xp.data(), {nb, 3, k});
  CHECK_THROWS_AS(bsr23(d, xb, yb), sp::ShapeError);
  CHECK_NOTHROW(sp::Dbsr<float>());
}

TEMPLATE_TEST_CASE("SR-BCRS (t x 1 vectors grouped by g): the entries of the CSR, padding rule, SpMM matches the CSR loop",
                   "[correctness][formats][sr_bcrs]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 29);
  for (std::int64_t k : {1, 7, 33}) {
    check_sr_bcrs_spmm<T, 1, 1>(a, k, s.name);
    check_sr_bcrs_spmm<T, 4, 2>(a, k, s.name);
    check_sr_bcrs_spmm<T, 3, 4>(a, k, s.name);
  }
  check_sr_bcrs_spmm<T, 8, 8>(a, 16, s.name);
  // An unsorted CSR with a column stored twice in a row: one vector slot holding the sum.
  const auto su = sp::SrBcrs<T>::from_csr(sp::Csr<T>(3, 5, {0, 3, 3, 4}, {4, 1, 4, 0}, {T(1), T(2), T(3), T(5)}), 2, 2);
  REQUIRE(su.panel_count() == 2);
  CHECK(to_vector(su.indices()) == std::vector<std::int32_t>{1, 4, 0, 1});  // panel 1 padded with column 1
  const auto d = su.to_dense();
  CHECK(d.data()[4] == T(4));  // row 0, column 4: 1 + 3
  CHECK(d.data()[1] == T(2));
  CHECK(d.data()[2 * 5 + 0] == T(5));
  CHECK(su.stored_nonzeros() == 4);
}

TEST_CASE("SR-BCRS on real matrices, against the interpreter and the CUDA build, structure errors",
          "[correctness][formats][sr_bcrs][graphs][interpreter][cuda]") {
  for (const char* file : {"matrices/bcsstk25.mtx.gz", "gnn/cora.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_sr_bcrs_spmm<float, 4, 4>(*a, 32, file);
    check_sr_bcrs_spmm<float, 8, 1>(*a, 5, file);
  }
  // Empty panels at both ends and in the middle, a last panel cut short (41 rows, t = 4),
  // through the interpreter and the CUDA build (emulated here, on the GPU where there is one).
  const auto a = random_csr<float>(Shape{"gaps", 41, 23, 3, 0.6}, 67);
  const auto s = sp::SrBcrs<float>::from_csr(a, 4, 2);
  const std::int64_t k = 5, mp = s.panel_count();
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 68, -1, 1);
  const auto kernel = sp::ops::sr_bcrs_spmm_kernel<float, 4, 2>();
  spindle::test::NvrtcCheck nvrtc;
  auto run = [&](auto&& how) {
    auto y = sp::Tensor<float>::full({mp, 4, k}, 99.0f);
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(s);
    args[1].view = sp::storage_of(x);
    args[2].view = sp::storage_of(y);
    how(args);
    return std::vector<float>(y.values().begin(), y.values().begin() + a.rows() * k);
  };
  const auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
  check_close<float>(ref_spmm(a, x.values(), k), want, "sr-bcrs interpreter vs CSR loop");
  const auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
  check_close<float>(ref_spmm(a, x.values(), k), emulated, "sr-bcrs CUDA build vs CSR loop");
  if (nvrtc.available) CHECK(nvrtc.compiled >= 1);
  // Structure errors name the place (5 x 4 with t = 2, g = 2: 3 panels).
  using S = sp::SrBcrs<float>;
  const std::vector<float> four(4, 1.0f), eight(8, 1.0f);
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 1, 1}, {0, 1}, four), Catch::Contains("indptr has 3 entries"));
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 1, 0, 1}, {0, 1}, four), Catch::Contains("indptr is not monotone at panel 1"));
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 1, 1, 2}, {0, 1}, four), Catch::Contains("nnz mismatch"));
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 1, 1, 1}, {0, 1, 2}, four), Catch::Contains("not a multiple of the group size g=2"));
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 0, 1, 1}, {1, 4}, four),
                    Catch::Contains("column 4 out of range [0, 4) at slot 1 (panel 1, group 0)"));
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 2, 2, 2}, {0, 2, 2, 3}, eight),
                    Catch::Contains("the columns of panel 0 are not strictly ascending at slot 2"));
  CHECK_THROWS_WITH(S(5, 4, 2, 2, {0, 1, 1, 1}, {0, 1}, std::vector<float>(3, 1.0f)),
                    Catch::Contains("values has 3 entries, expected slots * t = 2 * 2 = 4"));
  CHECK_THROWS_AS(S(5, 4, 0, 2, {0}, {}, {}), sp::ShapeError);
  CHECK_THROWS_AS(S(5, 4, 2, 0, {0}, {}, {}), sp::ShapeError);
  const S ok(5, 4, 2, 2, {0, 1, 1, 1}, {0, 3}, {1.0f, 0.0f, 0.0f, 2.0f});
  CHECK(ok.stored_nonzeros() == 2);
  CHECK(ok.to_csr().nnz() == 2);
  CHECK(ok.to_csr(false).nnz() == 4);
  // A panel whose columns, padded to g, need more columns than the matrix has.
  const sp::Csr<float> narrow(2, 3, {0, 3, 3}, {0, 1, 2}, {1.0f, 1.0f, 1.0f});
  CHECK_THROWS_WITH(sp::SrBcrs<float>::from_csr(narrow, 2, 2),
                    Catch::Contains("panel 0 (rows 0..1) holds 3 columns; padded to groups of g=2 it needs 4"));
  // The wrong t or g for the operator, and shape mismatches.
  auto y = sp::Tensor<float>::zeros({a.rows(), k});
  const auto spmm44 = sp::ops::sr_bcrs_spmm<float, 4, 4>();
  const auto spmm22 = sp::ops::sr_bcrs_spmm<float, 2, 2>();
  const auto spmm42 = sp::ops::sr_bcrs_spmm<float, 4, 2>();
  CHECK_THROWS_AS(spmm44(s, x, y), sp::ShapeError);
  CHECK_THROWS_AS(spmm22(s, x, y), sp::ShapeError);
  auto y_short = sp::Tensor<float>::zeros({a.rows() - 1, k});
  CHECK_THROWS_AS(spmm42(s, x, y_short), sp::ShapeError);
  auto yp_wrong = sp::Tensor<float>::zeros({mp, 3, k});
  CHECK_THROWS_AS(kernel(s, x, yp_wrong), sp::ShapeError);
  CHECK_NOTHROW(S());
}

TEMPLATE_TEST_CASE("ELL3D (relations x rows with edges x k slots): the relations back, RGCN aggregation matches the CSR loops",
                   "[correctness][formats][ell3d]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  // Three relations of one shape: one with the shape's density, one empty, one sparser.
  std::vector<sp::Csr<T>> rels{random_csr<T>(s, 31), sp::Csr<T>::random(s.rows, s.cols, 0.0, 32),
                               random_csr<T>(Shape{s.name, s.rows, s.cols, s.avg_nnz_per_row / 3, 0.5}, 33)};
  for (std::int64_t k : {1, 7, 33}) check_ell3d_spmm<T>(rels, -1, k, s.name);
  std::int64_t longest = 0;
  for (const auto& a : rels)
    for (std::int64_t i = 0; i < a.rows(); ++i) longest = std::max<std::int64_t>(longest, a.indptr()[i + 1] - a.indptr()[i]);
  if (longest + 2 <= s.cols) check_ell3d_spmm<T>(rels, longest + 2, 5, s.name);
  check_ell3d_spmm<T>({}, -1, 4, "no relations");
  // Row-length buckets: the same relations, and a relation whose rows span many buckets
  // (row i < 70 holds min(i, cols) entries).
  check_ell3d_buckets<T>(rels, 7, s.name);
  check_ell3d_buckets<T>({}, 3, "no relations");
  std::vector<sp::Triplet<T>> staircase;
  for (std::int64_t i = 0; i < std::min<std::int64_t>(s.rows, 70); ++i)
    for (std::int64_t j = 0; j < std::min(i, s.cols); ++j) staircase.push_back({i, j, T(1) + T(j % 3)});
  check_ell3d_buckets<T>({sp::Csr<T>::from_triplets(s.rows, s.cols, staircase), rels[0]}, 5, std::string(s.name) + " staircase");
}

TEST_CASE("side_by_side: parts of different row counts, or columns past the index type, are ShapeErrors naming the part",
          "[correctness][formats][ell3d][errors]") {
  const std::vector<sp::Csr<float>> rows_differ{sp::Csr<float>::random(5, 4, 0.5, 1), sp::Csr<float>::random(5, 3, 0.5, 2),
                                                sp::Csr<float>(6, 4, "third")};
  CHECK_THROWS_AS(sp::side_by_side(rows_differ), sp::ShapeError);
  CHECK_THROWS_WITH(sp::side_by_side(rows_differ),
                    Catch::Contains("part 2 (Csr 'third') has 6 rows but part 0 has 5"));
  const std::int64_t big = std::int64_t{1} << 30;  // the second part takes the columns to 2^31 > INT32_MAX
  const std::vector<sp::Csr<float>> too_wide{sp::Csr<float>(2, big), sp::Csr<float>(2, big), sp::Csr<float>(2, big)};
  CHECK_THROWS_WITH(sp::side_by_side(too_wide), Catch::Contains("with part 1 the matrix has 2147483648 columns") &&
                                                     Catch::Contains("hint: use a 64-bit index type"));
  const auto wide64 = sp::side_by_side(std::vector<sp::Csr<float, std::int64_t>>{
      sp::Csr<float, std::int64_t>(2, big), sp::Csr<float, std::int64_t>(2, big), sp::Csr<float, std::int64_t>(2, big)});
  CHECK(wide64.cols() == 3 * big);
  CHECK(wide64.nnz() == 0);
  const auto none = sp::side_by_side(std::vector<sp::Csr<float>>{});
  CHECK((none.rows() == 0 && none.cols() == 0 && none.nnz() == 0));
}

TEST_CASE("relations_of_typed_edges: one CSR per relation id, rows = receivers, repeated edges once, bad ids and "
          "endpoints are errors naming the edge", "[correctness][formats][ell3d][errors]") {
  // Edges (sender, receiver, relation): relation 2 has none, relation 3 a repeated edge.
  const std::vector<sp::Triplet<float>> edges{{0, 1, 1.0f}, {2, 1, 1.0f}, {1, 3, 3.0f}, {1, 3, 3.0f}, {3, 0, 3.0f}};
  const auto rels = sp::relations_of_typed_edges<float>(4, edges);
  REQUIRE(rels.size() == 3);
  for (const auto& a : rels) REQUIRE((a.rows() == 4 && a.cols() == 4));
  CHECK(nonzero_entries(rels[0]) == std::vector<sp::Triplet<float>>{{1, 0, 1.0f}, {1, 2, 1.0f}});
  CHECK(rels[1].nnz() == 0);
  CHECK(nonzero_entries(rels[2]) == std::vector<sp::Triplet<float>>{{0, 3, 1.0f}, {3, 1, 1.0f}});
  CHECK(sp::relations_of_typed_edges<float>(5, {}).empty());
  CHECK_THROWS_AS(sp::relations_of_typed_edges<float>(4, {{0, 1, 1.5f}}), sp::FormatError);
  CHECK_THROWS_WITH(sp::relations_of_typed_edges<float>(4, {{0, 1, 1.0f}, {2, 3, 0.0f}}),
                    Catch::Contains("edge 1 (2 -> 3) has relation id 0, not an integer in [1, 65536]"));
  CHECK_THROWS_AS(sp::relations_of_typed_edges<float>(4, {{0, 1, 70000.0f}}), sp::FormatError);
  CHECK_THROWS_WITH(sp::relations_of_typed_edges<float>(4, {{0, 4, 1.0f}}),
                    Catch::Contains("edge 0 (0 -> 4) is outside the 4 nodes"));
}

TEST_CASE("ELL3D on the RGCN graphs, against the interpreter and the CUDA build, structure errors",
          "[correctness][formats][ell3d][graphs][interpreter][cuda]") {
  for (const char* file : {"rgcn/aifb.mtx.gz", "rgcn/mutag.mtx.gz"}) {
    const auto path = data_file(file);
    if (!path) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    // One graph per relation id (1-based): row = the receiving node, column = the sender.
    const auto t = sp::read_matrix_market_triplets<float>(*path);
    std::vector<std::vector<sp::Triplet<float>>> by_rel;
    for (const auto& edge : t.entries) {
      const auto r = static_cast<std::size_t>(edge.value) - 1;
      if (by_rel.size() <= r) by_rel.resize(r + 1);
      by_rel[r].push_back({edge.col, edge.row, 1.0f + 0.25f * static_cast<float>(r % 4)});
    }
    // As SparseTIR's RGCN kernels do, one Ell3d per bucket of row lengths (w/2, w], w = 1, 2,
    // 4, ... (Ell3dBuckets): each pads a row to less than twice its length. One Ell3d of the
    // longest row would store 4.1 GB for mutag (a hub row of 6781 edges pads all 76204
    // stored rows).
    std::vector<sp::Csr<float>> rels;
    for (const auto& edges : by_rel) rels.push_back(sp::Csr<float>::from_triplets(t.header.rows, t.header.cols, edges));
    // The library's split of the typed edges has the same patterns (values 1).
    const auto split = sp::relations_of_typed_edges<float>(t.header.rows, t.entries);
    REQUIRE(split.size() == rels.size());
    for (std::size_t r = 0; r < rels.size(); ++r) {
      auto ones = rels[r];
      std::fill(ones.values().begin(), ones.values().end(), 1.0f);
      REQUIRE(nonzero_entries(split[r]) == nonzero_entries(ones));
    }
    check_ell3d_buckets<float>(rels, 8, file);
    const auto b = sp::Ell3dBuckets<float>::from_relations(rels);
    CHECK(b.stored_nonzeros() == static_cast<std::int64_t>(t.entries.size()));  // every edge in one part
    CHECK(b.bytes() < (std::int64_t{64} << 20));
  }
  // Relations with empty rows and one empty relation, through the interpreter and the CUDA
  // build (emulated here, on the GPU where there is one).
  const std::vector<sp::Csr<float>> rels{random_csr<float>(Shape{"r0", 37, 29, 3, 0.4}, 71),
                                         sp::Csr<float>::random(37, 29, 0.0, 72),
                                         random_csr<float>(Shape{"r2", 37, 29, 1, 0.7}, 73)};
  const auto e = sp::Ell3d<float>::from_relations(rels);
  const std::int64_t k = 5;
  const auto xw = sp::Tensor<float>::random({3, 29, k}, 74, -1, 1);
  std::vector<float> want(static_cast<std::size_t>(37 * k), 0.0f);
  for (std::int64_t r = 0; r < 3; ++r)
    for (std::int64_t i = 0; i < 37; ++i)
      for (auto q = rels[r].indptr()[i]; q < rels[r].indptr()[i + 1]; ++q)
        for (std::int64_t f = 0; f < k; ++f)
          want[i * k + f] += rels[r].values()[q] * xw.data()[(r * 29 + rels[r].indices()[q]) * k + f];
  const auto kernel = sp::ops::rgcn_ell3d_spmm<float>();
  spindle::test::NvrtcCheck nvrtc;
  auto run = [&](auto&& how) {
    auto c = sp::Tensor<float>::full({37, k}, 99.0f);
    std::vector<sp::runtime::CallArg> args(3);
    args[0].view = sp::storage_of(e);
    args[1].view = sp::storage_of(xw);
    args[2].view = sp::storage_of(c);
    how(args);
    return std::vector<float>(c.values().begin(), c.values().end());
  };
  const auto close = [&](const std::vector<float>& got, const char* what) {
    INFO(what);
    REQUIRE(got.size() == want.size());
    for (std::size_t q = 0; q < got.size(); ++q) REQUIRE(std::abs(got[q] - want[q]) <= 1e-5f * (1 + std::abs(want[q])));
  };
  close(run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); }), "ell3d interpreter");
  close(run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); }), "ell3d CUDA build");
  // The inout variant of one Ell3dBuckets part adds into C (here filled with 99).
  const auto add = sp::ops::rgcn_ell3d_spmm_add<float>();
  for (auto& v : want) v += 99.0f;
  close(run([&](auto& args) { spindle::test::Interpreter(add.ir(), args).run(); }), "ell3d add interpreter");
  close(run([&](auto& args) { spindle::test::run_cuda_build(add.ir(), args, &nvrtc); }), "ell3d add CUDA build");
  if (nvrtc.available) CHECK(nvrtc.compiled >= 1);
  // Structure errors name the place (2 relations of 4 x 3, width 2).
  using E = sp::Ell3d<float>;
  const std::vector<float> two(2, 1.0f), four(4, 1.0f);
  CHECK_THROWS_WITH(E(2, 4, 3, 2, {0, 1}, {0}, {0, 1}, two), Catch::Contains("indptr has 2 entries"));
  CHECK_THROWS_WITH(E(2, 4, 3, 2, {0, 2, 2}, {1, 1}, {0, 1, 0, 1}, four),
                    Catch::Contains("the rows of relation 0 are not strictly ascending at stored row 1"));
  CHECK_THROWS_WITH(E(2, 4, 3, 2, {0, 1, 1}, {4}, {0, 1}, two), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(E(2, 4, 3, 2, {0, 1, 1}, {0}, {0, 3}, two),
                    Catch::Contains("column 3 out of range [0, 3) at slot 1 (stored row 0, slot 1)"));
  CHECK_THROWS_WITH(E(2, 4, 3, 2, {0, 1, 1}, {0}, {1, 1}, two),
                    Catch::Contains("the columns of stored row 0 are not strictly ascending at slot 1"));
  CHECK_THROWS_WITH(E(2, 4, 3, 2, {0, 1, 1}, {0}, {0, 1}, four),
                    Catch::Contains("values has 4 entries, expected stored rows * k = 1 * 2 = 2"));
  CHECK_THROWS_WITH(E(2, 4, 3, 4, {0, 0, 0}, {}, {}, {}), Catch::Contains("width k=4 exceeds the 3 columns"));
  CHECK_THROWS_AS(E(-1, 4, 3, 2, {0}, {}, {}, {}), sp::ShapeError);
  const E ok(2, 4, 3, 2, {0, 0, 1}, {2}, {0, 2}, {0.0f, 5.0f});
  CHECK(ok.stored_nonzeros() == 1);
  CHECK(ok.relation(1).nnz() == 1);
  CHECK(ok.relation(1, false).nnz() == 2);
  CHECK(ok.relation(0).nnz() == 0);
  CHECK_THROWS_AS(ok.relation(2), sp::ShapeError);
  CHECK_THROWS_WITH(E::from_relations({sp::Csr<float>::random(4, 3, 1.0, 1), sp::Csr<float>::random(4, 4, 1.0, 2)}),
                    Catch::Contains("relation 1 is 4x4 but relation 0 is 4x3"));
  CHECK_THROWS_WITH(E::from_relations(rels, 1), Catch::Contains("is smaller than the longest row"));
  // Operands of the wrong shape.
  auto c_short = sp::Tensor<float>::zeros({36, k});
  CHECK_THROWS_AS(kernel(e, xw, c_short), sp::ShapeError);
  const auto xw2 = sp::Tensor<float>::random({2, 29, k}, 75, -1, 1);
  auto c = sp::Tensor<float>::zeros({37, k});
  CHECK_THROWS_AS(kernel(e, xw2, c), sp::ShapeError);
  CHECK_NOTHROW(E());
}

TEMPLATE_TEST_CASE("ELL SpMM matches the CSR loop (exact and wider than the longest row)",
                   "[correctness][formats][ell]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 31);
  for (std::int64_t k : {1, 7, 33}) check_ell_spmm<T>(a, -1, k, s.name);
  std::int64_t longest = 0;
  for (std::int64_t r = 0; r < a.rows(); ++r) longest = std::max<std::int64_t>(longest, a.indptr()[r + 1] - a.indptr()[r]);
  if (a.rows() > 0 && longest + 3 > a.cols())  // a row holds distinct columns: at most cols slots
    REQUIRE_THROWS_AS(sp::Ell<T>::from_csr(a, longest + 3), sp::ShapeError);
  check_ell_spmm<T>(a, std::min<std::int64_t>(longest + 3, a.rows() > 0 ? a.cols() : longest + 3), 16, s.name);
}

TEST_CASE("BSR and ELL SpMM agree with the reference interpreter, and their CUDA builds compile and run emulated",
          "[correctness][formats][interpreter][cuda]") {
  const Shape s{"irregular", 37, 29, 5, 0.2};
  const auto a = random_csr<float>(s, 41);
  const std::int64_t k = 6;
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 42, -1, 1);
  spindle::test::NvrtcCheck nvrtc;
  {  // BSR 4x3
    const auto bsr = sp::Bsr<float>::from_csr(a, 4, 3);
    const std::int64_t mb = bsr.block_row_count(), nb = bsr.block_col_count();
    std::vector<float> xp(static_cast<std::size_t>(nb * 3 * k), 0.0f);
    std::copy(x.values().begin(), x.values().end(), xp.begin());
    const auto kernel = sp::ops::bsr_spmm_kernel<float, 4, 3>();
    auto run = [&](auto&& how) {
      auto y = sp::Tensor<float>::full({mb, 4, k}, 99.0f);
      std::vector<sp::runtime::CallArg> args(3);
      args[0].view = sp::storage_of(bsr);
      args[1].view = sp::storage_of(sp::TensorView<const float>(xp.data(), {nb, 3, k}));
      args[2].view = sp::storage_of(y);
      how(args);
      return y;
    };
    auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
    auto got = run([&](auto& args) { kernel.compile().call(args); });
    auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
    for (std::int64_t q = 0; q < want.size(); ++q) {
      INFO("bsr element " << q);
      REQUIRE(got.values()[q] == Approx(want.values()[q]).margin(1e-5));
      REQUIRE(emulated.values()[q] == Approx(want.values()[q]).margin(1e-5));
    }
    CHECK_THAT(kernel.explain(), Catch::Contains("BI") && Catch::Contains("length=4"));
  }
  {  // ELL, width longest + 2
    std::int64_t longest = 0;
    for (std::int64_t r = 0; r < a.rows(); ++r)
      longest = std::max<std::int64_t>(longest, a.indptr()[r + 1] - a.indptr()[r]);
    const auto ell = sp::Ell<float>::from_csr(a, longest + 2);
    const auto kernel = sp::ops::ell_spmm<float>();
    auto run = [&](auto&& how) {
      auto y = sp::Tensor<float>::full({a.rows(), k}, 99.0f);
      std::vector<sp::runtime::CallArg> args(3);
      args[0].view = sp::storage_of(ell);
      args[1].view = sp::storage_of(x);
      args[2].view = sp::storage_of(y);
      how(args);
      return y;
    };
    auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
    auto got = run([&](auto& args) { kernel.compile().call(args); });
    auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
    check_close<float>(ref_spmm(a, x.values(), k), want.values(), "ell interpreter vs CSR loop");
    for (std::int64_t q = 0; q < want.size(); ++q) {
      INFO("ell element " << q);
      REQUIRE(got.values()[q] == Approx(want.values()[q]).margin(1e-5));
      REQUIRE(emulated.values()[q] == Approx(want.values()[q]).margin(1e-5));
    }
  }
}

TEMPLATE_TEST_CASE("hyb(c, k): parts sum to the matrix, each row piece in the smallest bucket, SpMM and SpMV match the CSR loop",
                   "[correctness][formats][hyb]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 51);
  check_hyb<T>(a, 1, 32, 7, s.name);
  check_hyb<T>(a, 1, 1, 1, s.name);    // every entry its own piece of width 1
  check_hyb<T>(a, 2, 4, 33, s.name);   // long rows cut into pieces of 4
  check_hyb<T>(a, 3, 8, 16, s.name);
  check_hyb<T>(a, 1, 512, 5, s.name);  // buckets wider than the columns: call-time-width parts
}

TEST_CASE("hyb(c, k) on real graphs (long rows cut into pieces), an unsorted CSR with duplicates, errors",
          "[correctness][formats][hyb][graphs]") {
  for (const char* file : {"gnn/cora.mtx.gz", "matrices/wiki-Vote.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    check_hyb<float>(*a, 1, 32, 32, file);
    check_hyb<float>(*a, 4, 16, 8, file);
    const auto h = sp::Hyb<float>::from_csr(*a, 1, 32);
    std::int64_t longest = 0, longest_row = 0;
    for (std::int64_t r = 0; r < a->rows(); ++r)
      if (a->indptr()[r + 1] - a->indptr()[r] > longest) longest = a->indptr()[r + 1] - a->indptr()[r], longest_row = r;
    std::int64_t pieces = 0;  // the longest row is ceil(longest / 32) pieces
    for (const auto& part : h.parts())
      pieces += std::count(part.rows.begin(), part.rows.end(), static_cast<std::int32_t>(longest_row));
    CHECK(pieces == (longest + 31) / 32);
    CHECK_THAT(h.description(), Catch::Contains("hyb(1, 32)") && Catch::Contains("parts"));
  }
  // unsorted, column 2 of row 0 stored twice: one entry holding the sum
  const sp::Csr<double> u(2, 4, {0, 3, 4}, {2, 0, 2, 3}, {1.0, 2.0, 4.0, 8.0});
  const auto h = sp::Hyb<double>::from_csr(u, 2, 2);
  REQUIRE(h.stored_nonzeros() == 3);
  const auto d = h.to_dense();
  CHECK(d.values()[0] == 2.0);
  CHECK(d.values()[2] == 5.0);
  CHECK(d.values()[7] == 8.0);
  REQUIRE(h.parts().size() == 2);  // partition 0: (0, 0); partition 1: (0, 2) and (1, 3); all width 1
  CHECK(h.parts()[1].rows == std::vector<std::int32_t>{0, 1});
  const auto a = random_csr<float>({"small", 5, 6, 2}, 4);
  CHECK_THROWS_WITH(sp::Hyb<float>::from_csr(a, 1, 12), Catch::Contains("power of two") && Catch::Contains("12"));
  CHECK_THROWS_AS(sp::Hyb<float>::from_csr(a, 1, 0), sp::ShapeError);
  CHECK_THROWS_WITH(sp::Hyb<float>::from_csr(a, 0, 4), Catch::Contains("column partition count"));
  CHECK_THROWS_AS(sp::Hyb<float>::from_csr(a, 7, 4), sp::ShapeError);  // more partitions than columns
  const auto h2 = sp::Hyb<float>::from_csr(a, 2, 4);
  const sp::ops::HybSpmm<float> spmm;
  auto x = sp::Tensor<float>::zeros({6, 3});
  auto y = sp::Tensor<float>::zeros({5, 4});
  CHECK_THROWS_WITH(spmm(h2, x, y), Catch::Contains("X has 3 columns but Y has 4"));
  auto x5 = sp::Tensor<float>::zeros({5, 3});
  auto y3 = sp::Tensor<float>::zeros({5, 3});
  CHECK_THROWS_WITH(spmm(h2, x5, y3), Catch::Contains("X has 5 rows but A") && Catch::Contains("6 columns"));
  const sp::ops::HybSpmv<float> spmv;
  auto xv = sp::Tensor<float>::zeros({6}), yv = sp::Tensor<float>::zeros({5});
  auto xv5 = sp::Tensor<float>::zeros({5}), yv6 = sp::Tensor<float>::zeros({6});
  CHECK_NOTHROW(spmv(h2, xv, yv));
  CHECK_THROWS_WITH(spmv(h2, xv5, yv), Catch::Contains("hyb_spmv: x has 5 entries but A") && Catch::Contains("6 columns"));
  CHECK_THROWS_WITH(spmv(h2, xv, yv6), Catch::Contains("y has 6 entries but A") && Catch::Contains("5 rows"));
  CHECK_THROWS_WITH(spmv(h2, x, y), Catch::Contains("x and y must be vectors"));
  // Y sharing storage with X or with A: an error before anything is written
  std::vector<float> shared(6 * 3, 7.0f);
  const sp::TensorView<const float> xs(shared.data(), {6, 3});
  const sp::TensorView<float> ys(shared.data() + 3, {5, 3});
  CHECK_THROWS_WITH(spmm(h2, xs, ys), Catch::Contains("hyb_spmm: Y overlaps X or A's arrays"));
  CHECK(std::ranges::all_of(shared, [](float v) { return v == 7.0f; }));
  auto hv = h2;  // y starting at the last value of a part (nothing is written: the check comes first)
  auto vals = hv.parts().back().ell.values();
  CHECK_THROWS_AS(spmv(hv, xv.view(), sp::TensorView<float>(vals.data() + vals.size() - 1, {5})), sp::UserError);
}

TEST_CASE("hyb parts fused into one parallel region: row shares balanced by slots, every row zeroed and summed by "
          "one share, with column partitions, and EllRows views",
          "[correctness][formats][hyb]") {
  const Shape s{"large", 10000, 2000, 8, 0.3};  // large enough for several shares, even for SpMV
  const auto a = random_csr<float>(s, 61);
  for (const auto& [c, k] : {std::pair<std::int64_t, std::int64_t>{1, 32}, {3, 4}}) {
    INFO("hyb(" << c << ", " << k << ")");
    const auto h = sp::Hyb<float>::from_csr(a, c, k);
    std::vector<std::int64_t> row_slots(static_cast<std::size_t>(a.rows()), 0);  // every part's pieces of a row
    for (const auto& part : h.parts())
      for (auto r : part.rows) row_slots[static_cast<std::size_t>(r)] += part.ell.width();
    const std::int64_t total = std::accumulate(row_slots.begin(), row_slots.end(), std::int64_t{0});
    const std::int64_t widest = *std::max_element(row_slots.begin(), row_slots.end());
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{2}, std::int64_t{5}, std::int64_t{12}, a.rows(), a.rows() + 9}) {
      INFO(n << " shares");
      const auto b = h.row_shares(n);
      REQUIRE(static_cast<std::int64_t>(b.size()) == std::min(n, a.rows()) + 1);
      REQUIRE(b.front() == 0);
      REQUIRE(b.back() == a.rows());
      REQUIRE(std::is_sorted(b.begin(), b.end()));
      for (std::size_t i = 0; i + 1 < b.size(); ++i) {  // about total / n slots each
        const std::int64_t got = std::accumulate(row_slots.begin() + b[i], row_slots.begin() + b[i + 1], std::int64_t{0});
        REQUIRE(got <= total / static_cast<std::int64_t>(b.size() - 1) + widest);
        for (const auto& part : h.parts()) {  // a share's pieces: a contiguous run of each part
          const auto p0 = sp::Hyb<float>::piece_of(part, b[i]), p1 = sp::Hyb<float>::piece_of(part, b[i + 1]);
          for (auto p = p0; p < p1; ++p) REQUIRE((part.rows[p] >= b[i] && part.rows[p] < b[i + 1]));
        }
      }
    }
    // With 3 threads both products take the fused path; with 1 they run the parts in turn.
    const std::string engine = spindle::test::cpu_engines().front();
    CHECK(sp::ops::HybSpmm<float>().with_runtime(spindle::test::engine_runtime(engine, 3)).row_shares(h, 7) > 2);
    CHECK(sp::ops::HybSpmv<float>().with_runtime(spindle::test::engine_runtime(engine, 3)).row_shares(h, 1) > 1);
    CHECK(sp::ops::HybSpmm<float>().with_runtime(spindle::test::engine_runtime(engine, 1)).row_shares(h, 7) == 1);
    check_hyb<float>(a, c, k, 7, s.name);  // every engine, 1 and 3 threads, poisoned outputs
  }
  // EllRows: rows [1, 4) of an Ell, read-only, the same levels
  const auto e = sp::Ell<float>::from_csr(random_csr<float>({"small", 5, 6, 2}, 4));
  const sp::EllRows<float> v(e, 1, 4);
  const auto st = sp::storage_of(v);
  CHECK(v.rows() == 3);
  CHECK_FALSE(st.writable);
  CHECK(st.levels[0].length == 3);
  CHECK(st.value_count == 3 * e.width());
  CHECK(st.data == static_cast<const void*>(e.values().data() + e.width()));
  CHECK(st.levels[1].indices == static_cast<const void*>(e.indices().data() + e.width()));
  CHECK_THROWS_WITH(sp::EllRows<float>(e, 3, 6), Catch::Contains("rows [3, 6)") && Catch::Contains("5 rows"));
  CHECK_THROWS_AS(sp::EllRows<float>(e, -1, 2), sp::ShapeError);
  CHECK_THROWS_AS(sp::EllRows<float>(e, 3, 2), sp::ShapeError);
}

TEST_CASE("hyb part kernels agree with the reference interpreter, and their CUDA builds compile and run emulated",
          "[correctness][formats][hyb][interpreter][cuda]") {
  const Shape s{"irregular", 61, 29, 6, 0.2};
  const auto a = random_csr<float>(s, 43);
  const std::int64_t k = 5;
  const auto x = sp::Tensor<float>::random({a.cols(), k}, 44, -1, 1);
  const auto h = sp::Hyb<float>::from_csr(a, 2, 4);
  spindle::test::NvrtcCheck nvrtc;
  // One part kernel on one part: y(rows(r), f) += A(r, s) * x(s, f) (SpMM: x is cols x feat;
  // SpMV: x is a vector, feat = 1) by the interpreter, the CPU build and the emulated CUDA
  // build, and the interpreter against the part's own math.
  auto check_part = [&](const auto& kernel, const sp::Hyb<float>::Part& part, const sp::Tensor<float>& xin,
                        std::int64_t feat, bool vector) {
    INFO((vector ? "spmv" : "spmm") << " part: partition " << part.partition << " width " << part.ell.width());
    const sp::TensorView<const std::int32_t> rows(part.rows.data(), {static_cast<std::int64_t>(part.rows.size())});
    auto run = [&](auto&& how) {
      // inout: the part adds to it
      auto y = vector ? sp::Tensor<float>::full({a.rows()}, 0.5f) : sp::Tensor<float>::full({a.rows(), feat}, 0.5f);
      std::vector<sp::runtime::CallArg> args(4);
      args[0].view = sp::storage_of(part.ell);
      args[1].view = sp::storage_of(rows);
      args[2].view = sp::storage_of(xin);
      args[3].view = sp::storage_of(y);
      how(args);
      return y;
    };
    auto want = run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); });
    auto got = run([&](auto& args) { kernel.compile().call(args); });
    auto emulated = run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); });
    std::vector<Ref> ref(static_cast<std::size_t>(a.rows() * feat), Ref{0.5, 0.5, 0});  // the part's own math
    for (std::int64_t r = 0; r < part.ell.rows(); ++r)
      for (std::int64_t q = 0; q < part.ell.width(); ++q)
        for (std::int64_t f = 0; f < feat; ++f) {
          Ref& e = ref[static_cast<std::size_t>(part.rows[static_cast<std::size_t>(r)] * feat + f)];
          const double t =
              static_cast<double>(part.ell.row_values(r)[static_cast<std::size_t>(q)]) *
              xin.values()[static_cast<std::size_t>(part.ell.row_indices(r)[static_cast<std::size_t>(q)] * feat + f)];
          e.value += t, e.abs_sum += std::abs(t), ++e.terms;
        }
    check_close<float>(ref, want.values(), "hyb part: interpreter vs its definition");
    for (std::int64_t q = 0; q < want.size(); ++q) {
      INFO("element " << q);
      REQUIRE(got.values()[q] == Approx(want.values()[q]).margin(1e-5));
      REQUIRE(emulated.values()[q] == Approx(want.values()[q]).margin(1e-5));
    }
  };
  int fixed = 0, any = 0;
  for (const auto& part : h.parts()) {
    if (part.ell.width() == 4) check_part(sp::ops::hyb_part_spmm<float, 4>(), part, x, k, false), ++fixed;
    if (part.ell.width() == 2) check_part(sp::ops::hyb_part_spmm<float, 2>(), part, x, k, false), ++fixed;
    check_part(sp::ops::hyb_part_spmm<float, sp::dynamic>(), part, x, k, false), ++any;
  }
  CHECK(fixed >= 2);
  CHECK(any == static_cast<int>(h.parts().size()));
  CHECK_THAT((sp::ops::hyb_part_spmm<float, 4>().explain()), Catch::Contains("s < 4"));  // the width is a constant

  // The SpMV parts (ops::HybSpmv): y(rows(r)) += A(r, s) * x(s), the same three ways.
  const auto xv = sp::Tensor<float>::random({a.cols()}, 45, -1, 1);
  for (const auto& part : h.parts()) {
    if (part.ell.width() == 4) check_part(sp::ops::hyb_part_spmv<float, 4>(), part, xv, 1, true);
    check_part(sp::ops::hyb_part_spmv<float, sp::dynamic>(), part, xv, 1, true);
  }
  // Width 4 is a compile-time constant, and the default CPU schedule marks that slot loop for
  // vectorisation (a sparse_fixed axis of constant width >= 4).
  CHECK_THAT((sp::ops::hyb_part_spmv<float, 4>().explain()), Catch::Contains("for s in [0, 4) vectorized"));
}

TEMPLATE_TEST_CASE("CSC: round trips through CSR, SpMV and SpMM by columns match the CSR loop on every engine",
                   "[correctness][formats][csc]", float, double) {
  using T = TestType;
  const Shape s = GENERATE(from_range(matrix_shapes()));
  INFO(s << " " << dtype_label<T>());
  const auto a = random_csr<T>(s, 61);
  const auto c = sp::Csc<T>::from_csr(a);
  REQUIRE(c.rows() == a.rows());
  REQUIRE(c.cols() == a.cols());
  REQUIRE(c.nnz() == a.nnz());
  REQUIRE(c.sorted());
  REQUIRE(std::ranges::equal(c.to_dense().values(), a.to_dense().values()));
  const auto back = c.to_csr();
  REQUIRE(std::ranges::equal(back.to_dense().values(), a.to_dense().values()));
  const sp::Csc<T> copy(c.rows(), c.cols(), {c.colptr().begin(), c.colptr().end()},
                        {c.row_indices().begin(), c.row_indices().end()}, {c.values().begin(), c.values().end()});
  REQUIRE(std::ranges::equal(copy.to_dense().values(), a.to_dense().values()));
  for (std::int64_t k : {1, 7, 33}) {
    const auto x = sp::Tensor<T>::random({a.cols(), k}, 62, -1, 1);
    const auto x1 = sp::Tensor<T>::random({a.cols()}, 63, -1, 1);
    const auto ref = ref_spmm(a, x.values(), k);
    const auto ref1 = ref_spmv(a, x1.values());
    for (const auto& engine : spindle::test::cpu_engines())
      for (int threads : {1, 3}) {
        INFO("engine " << engine << " threads " << threads << " k=" << k);
        auto& rt = spindle::test::engine_runtime(engine, threads);
        auto y = poisoned<T>({a.rows(), k});
        sp::ops::csc_spmm<T>().with_runtime(rt)(c, x, y);
        check_close<T>(ref, y.values(), "csc_spmm");
        auto y1 = poisoned<T>({a.rows()});
        sp::ops::csc_spmv<T>().with_runtime(rt)(c, x1, y1);
        check_close<T>(ref1, y1.values(), "csc_spmv");
      }
  }
}

TEST_CASE("CSC on real graphs against the interpreter and the CUDA build, structure errors",
          "[correctness][formats][csc][interpreter][cuda]") {
  spindle::test::NvrtcCheck nvrtc;
  for (const char* file : {"gnn/cora.mtx.gz", "matrices/wiki-Vote.mtx.gz"}) {
    auto a = load_graph<float>(file);
    if (!a) {
      WARN("skipping " << file << ": not found under " << data_dir());
      continue;
    }
    const auto c = sp::Csc<float>::from_csr(*a);
    const std::int64_t k = 16;
    const auto x = sp::Tensor<float>::random({a->cols(), k}, 64, -1, 1);
    const auto ref = ref_spmm(*a, x.values(), k);
    const auto kernel = sp::ops::csc_spmm<float>();
    CHECK_THAT(kernel.explain(), Catch::Contains("spindle_block"));  // parallel by row ownership
    auto run = [&](auto&& how) {
      auto y = sp::Tensor<float>::full({a->rows(), k}, 99.0f);
      std::vector<sp::runtime::CallArg> args(3);
      args[0].view = sp::storage_of(c);
      args[1].view = sp::storage_of(x);
      args[2].view = sp::storage_of(y);
      how(args);
      return y;
    };
    INFO(file);
    check_close<float>(ref, run([&](auto& args) { spindle::test::Interpreter(kernel.ir(), args).run(); }).values(),
                       "csc interpreter");
    for (int threads : {1, 2, 3})
      check_close<float>(ref, run([&](auto& args) { kernel.with_runtime(runtime_with_threads(threads)).compile().call(args); }).values(),
                         "csc compiled, " + std::to_string(threads) + " threads");
    check_close<float>(ref, run([&](auto& args) { spindle::test::run_cuda_build(kernel.ir(), args, &nvrtc); }).values(),
                       "csc CUDA build");
  }
  // structure errors name the column
  CHECK_THROWS_WITH((sp::Csc<float>(3, 2, {0, 2, 1}, {0, 1}, {1.0f, 2.0f})), Catch::Contains("Csc") && Catch::Contains("column"));
  CHECK_THROWS_WITH((sp::Csc<float>(3, 2, {0, 1, 2}, {0, 3}, {1.0f, 2.0f})),
                    Catch::Contains("Csc") && Catch::Contains("3") && Catch::Contains("out of range"));
  CHECK_THROWS_AS((sp::Csc<float>(3, 2, {0, 1, 2}, {0, 1}, {1.0f})), sp::FormatError);
  // a CSC where the kernel expects A by rows: X's extent is checked against the columns
  const auto a = random_csr<float>({"small", 5, 4, 2}, 4);
  auto x = sp::Tensor<float>::zeros({5, 3});
  auto y = sp::Tensor<float>::zeros({5, 3});
  CHECK_THROWS_AS(sp::ops::csc_spmm<float>()(sp::Csc<float>::from_csr(a), x, y), sp::ShapeError);
}

TEST_CASE("a compile-time extent is a constant in the generated code and checked at call time",
          "[correctness][formats][errors]") {
  const auto a = random_csr<float>(Shape{"sq", 16, 16, 4}, 51);
  const auto bsr2 = sp::Bsr<float>::from_csr(a, 2, 2);
  const auto kernel = sp::ops::bsr_spmm_kernel<float, 4, 4>();
  const std::string src = kernel.explain();
  CHECK_THAT(src, !Catch::Contains("BI_len") && !Catch::Contains("BJ_len"));
  auto x = sp::Tensor<float>::zeros({8, 4, 3});
  auto y = sp::Tensor<float>::zeros({8, 4, 3});
  // a 2x2-block matrix into the 4x4 kernel: the block-row level has extent 2, not 4
  REQUIRE_THROWS_MATCHES(kernel(bsr2, x, y), sp::ShapeError,
                         Catch::Matchers::Predicate<sp::ShapeError>([](const sp::ShapeError& e) {
                           std::string m = e.what();
                           return m.find("compile-time extent 4") != std::string::npos &&
                                  m.find("BI") != std::string::npos && m.find("extent 2") != std::string::npos;
                         }, "names the axis and both extents"));
  // the wrapper names the block shapes
  const sp::ops::BsrSpmm<float, 4, 4> spmm;
  auto x2 = sp::Tensor<float>::zeros({16, 3});
  auto y2 = sp::Tensor<float>::full({16, 3}, 5.0f);
  REQUIRE_THROWS_WITH(spmm(bsr2, x2, y2), Catch::Contains("2x2 blocks") && Catch::Contains("from_csr(csr, 4, 4)"));
  REQUIRE(y2.values()[0] == 5.0f);  // nothing written
  auto x3 = sp::Tensor<float>::zeros({15, 3});
  REQUIRE_THROWS_AS(spmm(sp::Bsr<float>::from_csr(a, 4, 4), x3, y2), sp::ShapeError);
}
