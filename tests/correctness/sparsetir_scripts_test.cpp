// SparseTIR's own test kernels (its sparse_tir_scripts: csrmm over the dense column axis,
// segment_reduce, csr_reduce, csr_element_wise, square_sum, square_sum_two_K,
// fused_reduction_4d_2d / 4d_3d, rgcn_forward, rgcn_hetero, hyper_gnn) written as Spindle users write them, as C++
// lambdas, each checked against a plain loop of its intended math on every CPU engine (1 and
// 2 threads), the reference interpreter and the CUDA build (NVRTC + the emulator). The other
// kernels of those scripts are tested elsewhere (docs/schedules.md, "SparseTIR's test
// kernels"). hyper_gnn's `attach` is a child of a root dense axis (docs/language.md §3: the
// fiber at another iterator's coordinate), indexed by the hyperedge's coordinate.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "correctness/correctness_support.hpp"
#include "support/check_everywhere.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;
using spindle::test::check_everywhere;

namespace st {
struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct L : sp::sparse_variable<J> {};
struct L2 : sp::sparse_variable<J>, sp::coordinates_of<L> {};  // another pattern over L's coordinates
struct M : sp::sparse_variable<L> {};
struct K : sp::dense_fixed {};
struct Seg : sp::dense_fixed {};
struct Member : sp::dense_variable<Seg> {};
struct Rel : sp::dense_fixed {};                      // relations (edge types)
struct Dst : sp::sparse_variable<Rel> {};             // the rows of relation r that have edges
struct Src : sp::sparse_variable<Dst> {};             // their in-neighbours
struct Etype : sp::dense_fixed {};                    // weight types (rgcn_hetero: relations may share one)
struct Fi : sp::dense_fixed {};
struct Fo : sp::dense_fixed {};
struct Node : sp::dense_fixed {};
struct NodeEdge : sp::sparse_variable<Node> {};                                    // H: the hyperedges of node i
struct EdgeNode : sp::sparse_variable<sp::dense<NodeEdge>>, sp::coordinates_of<Node> {};  // H^T: the nodes of hyperedge e
}  // namespace st

std::vector<sp::runtime::CallArg> call_args(std::initializer_list<sp::StorageView> views) {
  std::vector<sp::runtime::CallArg> out;
  for (const auto& v : views) out.emplace_back().view = v;
  return out;
}

// Random CSF tensors of each shape, empty and at density 0.35 (empty fibers on every level;
// an empty tensor and a single element among the shapes).
std::vector<sp::Csf<double>> tensors(const std::vector<std::vector<std::int64_t>>& shapes, std::uint64_t seed) {
  std::vector<sp::Csf<double>> out;
  for (const auto& shape : shapes)
    for (double density : {0.0, 0.35}) out.push_back(sp::Csf<double>::random(shape, density, seed++, -1, 1));
  return out;
}

// The first `levels` levels of `a` (levels >= 2) with values v.
sp::Csf<double> prefix(const sp::Csf<double>& a, int levels, double v) {
  std::vector<std::int64_t> shape(a.shape().begin(), a.shape().begin() + levels);
  std::vector<sp::CsfLevel<std::int32_t>> ls;
  for (int k = 1; k < levels; ++k) {
    auto p = a.indptr(k), x = a.indices(k);
    ls.push_back({{p.begin(), p.end()}, {x.begin(), x.end()}});
  }
  const auto n = static_cast<std::size_t>(ls.back().indices.size());
  return sp::Csf<double>(shape, std::move(ls), std::vector<double>(n, v));
}

}  // namespace

TEST_CASE("SparseTIR csrmm_dense_iter, csr_reduce, csr_element_wise: a CSR read over the dense column axis, row sums "
          "and an element-wise map match plain loops everywhere",
          "[correctness][sparsetir]") {
  using st::I, st::J, st::K;
  // csrmm_dense_iter: the column loop runs over every column; A is read by coordinate (0 where absent).
  auto dense_iter = sp::kernel("csrmm_dense_iter", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b,
                                                      sp::out<float, I, K> c, sp::iter<I> i, sp::iter<sp::dense<J>> j,
                                                      sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  auto reduce = sp::kernel("csr_reduce", [](sp::in<float, I, J> a, sp::out<float, I> b, sp::iter<I> i,
                                            sp::iter<J> j) { b(i) += a(i, j); });
  auto element_wise = sp::kernel("csr_element_wise", [](sp::in<float, I, J> a, sp::out<float, I, J> b, sp::iter<I> i,
                                                        sp::iter<J> j) { b(i, j) = a(i, j) * 2.5f + 1.0f; });
  for (const Shape& s : matrix_shapes()) {
    if (s.rows * s.cols > 400000) continue;  // the dense column loop visits rows x cols points
    INFO(s);
    const auto a = random_csr<float>(s, 601);
    const std::int64_t feat = 5;
    const auto b = sp::Tensor<float>::random({s.cols, feat}, 602, -1, 1);
    auto c = sp::Tensor<float>::zeros({s.rows, feat});
    std::vector<Ref> want(static_cast<std::size_t>(s.rows * feat)), sums(static_cast<std::size_t>(s.rows));
    std::vector<double> mapped(a.values().size());
    for (std::int64_t r = 0; r < s.rows; ++r)
      for (auto p = a.indptr()[r]; p < a.indptr()[r + 1]; ++p) {
        const double v = a.values()[p];
        for (std::int64_t f = 0; f < feat; ++f) {
          Ref& o = want[static_cast<std::size_t>(r * feat + f)];
          const double t = v * b(a.indices()[p], f);
          o.value += t, o.abs_sum += std::abs(t), ++o.terms;
        }
        Ref& o = sums[static_cast<std::size_t>(r)];
        o.value += v, o.abs_sum += std::abs(v), ++o.terms;
        mapped[static_cast<std::size_t>(p)] = static_cast<double>(static_cast<float>(v * 2.5f) + 1.0f);
      }
    check_everywhere(
        dense_iter, [&] { return call_args({sp::storage_of(a), sp::storage_of(b), sp::storage_of(c)}); },
        [&] { c = sp::Tensor<float>::full({s.rows, feat}, nan_v<float>); },
        [&] { check_close<float>(want, c.values(), "csrmm_dense_iter"); });
    auto y = sp::Tensor<float>::zeros({s.rows});
    check_everywhere(
        reduce, [&] { return call_args({sp::storage_of(a), sp::storage_of(y)}); },
        [&] { y = sp::Tensor<float>::full({s.rows}, nan_v<float>); },
        [&] { check_close<float>(sums, y.values(), "csr_reduce"); });
    auto e = a;
    check_everywhere(
        element_wise, [&] { return call_args({sp::storage_of(a), sp::storage_of(e)}); },
        [&] {
          for (auto& v : e.values()) v = nan_v<float>;
        },
        [&] {
          std::int64_t bad = 0;
          for (std::size_t q = 0; q < mapped.size(); ++q)
            bad += std::abs(e.values()[q] - mapped[q]) > 2 * eps<float>() * (std::abs(mapped[q]) + 1);
          CHECK(bad == 0);
        });
  }
}

TEST_CASE("SparseTIR segment_reduce: sums of variable-length segments (dense_variable), empty segments 0",
          "[correctness][sparsetir]") {
  using st::Member, st::Seg;
  auto k = sp::kernel("segment_reduce", [](sp::in<double, Seg, Member> a, sp::out<double, Seg> b, sp::iter<Seg> s,
                                           sp::iter<Member> m) { b(s) += a(s, m); });
  for (const auto& lengths : std::vector<std::vector<std::int64_t>>{
           {}, {0}, {1}, {3, 0, 5, 0, 0, 17, 2}, std::vector<std::int64_t>(1000, 9)}) {
    INFO(lengths.size() << " segments");
    const auto a = sp::Ragged<double>::random(lengths, {}, 611, -1, 1);
    auto b = sp::Tensor<double>::zeros({static_cast<std::int64_t>(lengths.size())});
    std::vector<Ref> want(lengths.size());
    for (std::size_t q = 0; q < lengths.size(); ++q)
      for (std::int64_t m = 0; m < a.rows(static_cast<std::int64_t>(q)); ++m) {
        const double v = a(static_cast<std::int64_t>(q), m);
        want[q].value += v, want[q].abs_sum += std::abs(v), ++want[q].terms;
      }
    check_everywhere(
        k, [&] { return call_args({sp::storage_of(a), sp::storage_of(b)}); },
        [&] { b = sp::Tensor<double>::full({static_cast<std::int64_t>(lengths.size())}, nan_v<double>); },
        [&] { check_close<double>(want, b.values(), "segment_reduce"); });
  }
}

TEST_CASE("SparseTIR square_sum and square_sum_two_K: a 3-level tensor summed per row, and read along a second "
          "innermost pattern over the same coordinates (0 where absent)",
          "[correctness][sparsetir]") {
  using st::I, st::J, st::L, st::L2;
  auto square_sum = sp::kernel("square_sum", [](sp::in<double, I, J, L> a, sp::out<double, I> b, sp::iter<I> i,
                                                sp::iter<J> j, sp::iter<L> l) { b(i) += a(i, j, l); });
  // The iteration runs over m's innermost pattern (L2) and reads a at those coordinates.
  auto two_k = sp::kernel("square_sum_two_K", [](sp::in<double, I, J, L> a, sp::in<double, I, J, L2> m,
                                                 sp::out<double, I> b, sp::iter<I> i, sp::iter<J> j,
                                                 sp::iter<L2> l) { b(i) += a(i, j, l) * m(i, j, l); });
  for (const auto& a : tensors({{0, 4, 5}, {1, 1, 1}, {9, 7, 6}, {40, 13, 30}}, 621)) {
    INFO(sp::detail::shape_string(a.shape()) << " nnz " << a.nnz());
    const std::int64_t rows = a.dim(0);
    // m: the levels I and J of a, a different random innermost level.
    std::vector<sp::CsfLevel<std::int32_t>> ml(2);
    ml[0].indptr.assign(a.indptr(1).begin(), a.indptr(1).end());
    ml[0].indices.assign(a.indices(1).begin(), a.indices(1).end());
    ml[1].indptr.push_back(0);
    sp::Rng rng(622 + static_cast<std::uint64_t>(a.nnz()));
    for (std::size_t q = 0; q < ml[0].indices.size(); ++q) {
      for (std::int64_t l = 0; l < a.dim(2); ++l)
        if (rng.value<double>(0, 1) < 0.4) ml[1].indices.push_back(static_cast<std::int32_t>(l));
      ml[1].indptr.push_back(static_cast<std::int32_t>(ml[1].indices.size()));
    }
    std::vector<double> mv(ml[1].indices.size());
    for (auto& v : mv) v = rng.value<double>(-1, 1);
    const sp::Csf<double> m(a.shape(), std::move(ml), std::move(mv));
    std::vector<Ref> sums(static_cast<std::size_t>(rows)), dots(static_cast<std::size_t>(rows));
    const auto ap1 = a.indptr(1), ap2 = a.indptr(2), ax2 = a.indices(2), mp2 = m.indptr(2), mx2 = m.indices(2);
    for (std::int64_t i = 0; i < rows; ++i)
      for (auto q = ap1[i]; q < ap1[i + 1]; ++q) {
        for (auto e = ap2[q]; e < ap2[q + 1]; ++e) {
          Ref& o = sums[static_cast<std::size_t>(i)];
          o.value += a.values()[e], o.abs_sum += std::abs(a.values()[e]), ++o.terms;
        }
        for (auto e = mp2[q]; e < mp2[q + 1]; ++e) {
          double av = 0;  // a at (i, j, mx2[e]): absent reads 0
          for (auto f = ap2[q]; f < ap2[q + 1]; ++f)
            if (ax2[f] == mx2[e]) av = a.values()[f];
          const double t = av * m.values()[e];
          Ref& o = dots[static_cast<std::size_t>(i)];
          o.value += t, o.abs_sum += std::abs(t), ++o.terms;
        }
      }
    auto b = sp::Tensor<double>::zeros({rows});
    check_everywhere(
        square_sum, [&] { return call_args({sp::storage_of(a), sp::storage_of(b)}); },
        [&] { b = sp::Tensor<double>::full({rows}, nan_v<double>); },
        [&] { check_close<double>(sums, b.values(), "square_sum"); });
    check_everywhere(
        two_k, [&] { return call_args({sp::storage_of(a), sp::storage_of(m), sp::storage_of(b)}); },
        [&] { b = sp::Tensor<double>::full({rows}, nan_v<double>); },
        [&] { check_close<double>(dots, b.values(), "square_sum_two_K"); });
  }
}

TEST_CASE("SparseTIR fused_reduction_4d_2d and 4d_3d: a 4-level tensor reduced over its last two (one) levels "
          "with the kept levels fused into one loop",
          "[correctness][sparsetir][fuse]") {
  using st::I, st::J, st::L, st::M;
  auto to_2d = sp::kernel("fused_reduction_4d_2d",
                          [](sp::in<double, I, J, L, M> x, sp::out<double, I, J> y, sp::iter<sp::fuse<I, J>> ij,
                             sp::iter<L> l, sp::iter<M> m) {
                            auto [i, j] = ij;
                            y(i, j) += x(i, j, l, m);
                          });
  auto to_3d = sp::kernel("fused_reduction_4d_3d",
                          [](sp::in<double, I, J, L, M> x, sp::out<double, I, J, L> y,
                             sp::iter<sp::fuse<I, J, L>> ijl, sp::iter<M> m) {
                            auto [i, j, l] = ijl;
                            y(i, j, l) += x(i, j, l, m);
                          });
  CHECK(to_2d.explain().find("([fuse(I, J), L, M], \"SSRR\")") != std::string::npos);
  CHECK(to_3d.explain().find("([fuse(I, J, L), M], \"SSSR\")") != std::string::npos);
  for (const auto& x : tensors({{0, 3, 3, 3}, {1, 1, 1, 1}, {6, 5, 4, 7}, {25, 9, 8, 6}}, 631)) {
    INFO(sp::detail::shape_string(x.shape()) << " nnz " << x.nnz());
    const auto p1 = x.indptr(1), p2 = x.indptr(2), p3 = x.indptr(3);
    const auto n2 = static_cast<std::size_t>(x.indices(1).size()), n3 = static_cast<std::size_t>(x.indices(2).size());
    std::vector<Ref> w2(n2), w3(n3);
    for (std::int64_t i = 0; i < x.dim(0); ++i)
      for (auto q = p1[i]; q < p1[i + 1]; ++q)
        for (auto e = p2[q]; e < p2[q + 1]; ++e)
          for (auto f = p3[e]; f < p3[e + 1]; ++f) {
            const double v = x.values()[f];
            for (Ref* o : {&w2[static_cast<std::size_t>(q)], &w3[static_cast<std::size_t>(e)]})
              o->value += v, o->abs_sum += std::abs(v), ++o->terms;
          }
    auto y2 = prefix(x, 2, 0.0);
    auto y3 = prefix(x, 3, 0.0);
    check_everywhere(
        to_2d, [&] { return call_args({sp::storage_of(x), sp::storage_of(y2)}); },
        [&] {
          for (auto& v : y2.values()) v = nan_v<double>;
        },
        [&] { check_close<double>(w2, y2.values(), "fused_reduction_4d_2d"); });
    check_everywhere(
        to_3d, [&] { return call_args({sp::storage_of(x), sp::storage_of(y3)}); },
        [&] {
          for (auto& v : y3.values()) v = nan_v<double>;
        },
        [&] { check_close<double>(w3, y3.values(), "fused_reduction_4d_3d"); });
  }
}

TEST_CASE("SparseTIR rgcn_forward: Y = sum over relations r of A_r X W_r in one kernel (relations x rows with edges "
          "x neighbours, scattered into the node rows)",
          "[correctness][sparsetir][rgcn]") {
  using st::Dst, st::Fi, st::Fo, st::Rel, st::Src;
  auto k = sp::kernel("rgcn_forward", [](sp::in<float, Rel, Dst, Src> a, sp::in<float, sp::dense<Src>, Fi> x,
                                         sp::in<float, Rel, Fi, Fo> w, sp::out<float, sp::dense<Dst>, Fo> y,
                                         sp::iter<Rel> r, sp::iter<Dst> i, sp::iter<Src> j, sp::iter<Fi> fi,
                                         sp::iter<Fo> fo) { y(i, fo) += a(r, i, j) * x(j, fi) * w(r, fi, fo); });
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{3, 0, 0}, {1, 1, 1}, {3, 40, 40}, {5, 120, 120}}) {
    for (double density : {0.0, 0.06}) {
      INFO(sp::detail::shape_string(shape) << " density " << density);
      const auto a32 = sp::Csf<double>::random(shape, density, 641, 0, 1);
      std::vector<sp::CsfLevel<std::int32_t>> ls;
      for (int lv = 1; lv < 3; ++lv)
        ls.push_back({{a32.indptr(lv).begin(), a32.indptr(lv).end()}, {a32.indices(lv).begin(), a32.indices(lv).end()}});
      const sp::Csf<float> a(shape, std::move(ls), std::vector<float>(a32.values().begin(), a32.values().end()));
      const std::int64_t n = shape[1], fin = 6, fout = 5;
      const auto x = sp::Tensor<float>::random({n, fin}, 642, -1, 1);
      const auto w = sp::Tensor<float>::random({shape[0], fin, fout}, 643, -1, 1);
      std::vector<Ref> want(static_cast<std::size_t>(n * fout));
      const auto p1 = a.indptr(1), x1 = a.indices(1), p2 = a.indptr(2), x2 = a.indices(2);
      for (std::int64_t r = 0; r < shape[0]; ++r)
        for (auto q = p1[r]; q < p1[r + 1]; ++q)
          for (auto e = p2[q]; e < p2[q + 1]; ++e)
            for (std::int64_t f = 0; f < fin; ++f)
              for (std::int64_t o = 0; o < fout; ++o) {
                const double t = static_cast<double>(a.values()[e]) * x(x2[e], f) * w(r, f, o);
                Ref& out = want[static_cast<std::size_t>(x1[q] * fout + o)];
                out.value += t, out.abs_sum += std::abs(t), ++out.terms;
              }
      auto y = sp::Tensor<float>::zeros({n, fout});
      check_everywhere(
          k, [&] { return call_args({sp::storage_of(a), sp::storage_of(x), sp::storage_of(w), sp::storage_of(y)}); },
          [&] { y = sp::Tensor<float>::full({n, fout}, nan_v<float>); },
          [&] { check_close<float>(want, y.values(), "rgcn_forward", 2); });
    }
  }
}

TEST_CASE("SparseTIR rgcn_hetero: a heterogeneous graph (node types with their own id ranges, relations between "
          "two types), each relation's weight W[etype(r)] gathered by its edge type, in one kernel",
          "[correctness][sparsetir][rgcn]") {
  using st::Dst, st::Etype, st::Fi, st::Fo, st::Rel, st::Src;
  // Y(i, fo) = sum over relations r, edges (i, j) of r, fi of A_r(i, j) X(j, fi) W(etype(r), fi, fo):
  // the weight read at a loaded index (language §2: an etype outside [0, types) reads 0).
  auto k = sp::kernel("rgcn_hetero", [](sp::in<float, Rel, Dst, Src> a, sp::in<std::int32_t, Rel> etype,
                                        sp::in<float, sp::dense<Src>, Fi> x, sp::in<float, Etype, Fi, Fo> w,
                                        sp::out<float, sp::dense<Dst>, Fo> y, sp::iter<Rel> r, sp::iter<Dst> i,
                                        sp::iter<Src> j, sp::iter<Fi> fi, sp::iter<Fo> fo) {
    y(i, fo) += a(r, i, j) * x(j, fi) * w(sp::cast<std::int64_t>(etype(r)), fi, fo);
  });
  struct Relation {
    int src_type, dst_type, etype;
  };
  struct Case {
    std::vector<std::int64_t> type_sizes;  // node types, numbered one after another
    std::vector<Relation> relations;
    std::int64_t types;                    // weight types
    double density;
  };
  const std::vector<Case> cases{
      {{}, {}, 1, 0.0},                                                   // no nodes, no relations
      {{1}, {{0, 0, 0}}, 1, 1.0},                                         // one self-loop
      {{4, 0, 6}, {{0, 2, 0}, {2, 0, 1}, {1, 2, 2}, {2, 2, 1}}, 3, 0.5},  // an empty type; etype 1 shared
      {{30, 45, 12}, {{0, 1, 0}, {1, 0, 1}, {0, 0, 2}, {2, 1, 3}, {1, 2, 3}, {2, 2, 0}}, 4, 0.08},
      {{7, 9}, {{0, 1, 1}, {1, 0, 0}}, 3, 0.0},                           // relations without edges, an unused etype
  };
  std::uint64_t seed = 661;
  for (const auto& cs : cases) {
    std::vector<std::int64_t> first{0};  // the first global id of each type
    for (auto size : cs.type_sizes) first.push_back(first.back() + size);
    const std::int64_t n = first.back(), nrel = static_cast<std::int64_t>(cs.relations.size()), fin = 5, fout = 3;
    INFO(n << " nodes, " << nrel << " relations, density " << cs.density);
    std::mt19937_64 rng(seed++);
    std::vector<std::int64_t> coords;
    std::vector<float> values;
    for (std::int64_t r = 0; r < nrel; ++r) {
      const auto& rel = cs.relations[static_cast<std::size_t>(r)];
      for (auto i = first[rel.dst_type]; i < first[rel.dst_type + 1]; ++i)
        for (auto j = first[rel.src_type]; j < first[rel.src_type + 1]; ++j)
          if (static_cast<double>(rng() % 1000) < cs.density * 1000) {
            coords.insert(coords.end(), {r, i, j});
            values.push_back(0.25f + static_cast<float>(rng() % 8) / 8.0f);
          }
    }
    const auto a = sp::Csf<float>::from_coords({nrel, n, n}, coords, values);
    auto etype = sp::Tensor<std::int32_t>::zeros({nrel});
    for (std::int64_t r = 0; r < nrel; ++r) etype.values()[r] = cs.relations[static_cast<std::size_t>(r)].etype;
    const auto x = sp::Tensor<float>::random({n, fin}, seed++, -1, 1);
    const auto w = sp::Tensor<float>::random({cs.types, fin, fout}, seed++, -1, 1);
    std::vector<Ref> want(static_cast<std::size_t>(n * fout));
    for (std::size_t e = 0; e < values.size(); ++e) {
      const auto r = coords[3 * e], i = coords[3 * e + 1], j = coords[3 * e + 2];
      const auto t = cs.relations[static_cast<std::size_t>(r)].etype;
      for (std::int64_t f = 0; f < fin; ++f)
        for (std::int64_t o = 0; o < fout; ++o) {
          const double v = static_cast<double>(values[e]) * x(j, f) * w(t, f, o);
          Ref& out = want[static_cast<std::size_t>(i * fout + o)];
          out.value += v, out.abs_sum += std::abs(v), ++out.terms;
        }
    }
    auto y = sp::Tensor<float>::zeros({n, fout});
    check_everywhere(
        k,
        [&] {
          return call_args({sp::storage_of(a), sp::storage_of(etype), sp::storage_of(x), sp::storage_of(w),
                            sp::storage_of(y)});
        },
        [&] { y = sp::Tensor<float>::full({n, fout}, nan_v<float>); },
        [&] { check_close<float>(want, y.values(), "rgcn_hetero", 2); });
  }
}

TEST_CASE("SparseTIR hyper_gnn: node -> hyperedge -> node in one iteration, the second hop's fiber taken at the "
          "hyperedge's coordinate (attach)",
          "[correctness][sparsetir][attach]") {
  using st::EdgeNode, st::Fi, st::Node, st::NodeEdge;
  // y(i) = sum over the hyperedges e of node i, over the nodes k of e, of h(i, e) ht(e, k) x(k).
  auto k = sp::kernel("hyper_gnn", [](sp::in<float, Node, NodeEdge> h, sp::in<float, sp::dense<NodeEdge>, EdgeNode> ht,
                                      sp::in<float, Node, Fi> x, sp::out<float, Node, Fi> y, sp::iter<Node> i,
                                      sp::iter<NodeEdge> e, sp::iter<EdgeNode> kk,
                                      sp::iter<Fi> f) { y(i, f) += h(i, e) * ht(e, kk) * x(kk, f); });
  for (const Shape& s : matrix_shapes()) {
    if (s.rows * s.avg_nnz_per_row > 50000) continue;
    INFO(s);
    const auto h = random_csr<float>(s, 651);                      // nodes x hyperedges
    const auto ht = sp::transpose(h).matrix;  // hyperedges x nodes
    const std::int64_t feat = 3;
    const auto x = sp::Tensor<float>::random({s.rows, feat}, 652, -1, 1);
    std::vector<Ref> want(static_cast<std::size_t>(s.rows * feat));
    for (std::int64_t i = 0; i < s.rows; ++i)
      for (auto p = h.indptr()[i]; p < h.indptr()[i + 1]; ++p) {
        const auto e = h.indices()[p];
        for (auto q = ht.indptr()[e]; q < ht.indptr()[e + 1]; ++q)
          for (std::int64_t f = 0; f < feat; ++f) {
            const double t = static_cast<double>(h.values()[p]) * ht.values()[q] * x(ht.indices()[q], f);
            Ref& o = want[static_cast<std::size_t>(i * feat + f)];
            o.value += t, o.abs_sum += std::abs(t), ++o.terms;
          }
      }
    auto y = sp::Tensor<float>::zeros({s.rows, feat});
    check_everywhere(
        k, [&] { return call_args({sp::storage_of(h), sp::storage_of(ht), sp::storage_of(x), sp::storage_of(y)}); },
        [&] { y = sp::Tensor<float>::full({s.rows, feat}, nan_v<float>); },
        [&] { check_close<float>(want, y.values(), "hyper_gnn", 2); });
  }
}
