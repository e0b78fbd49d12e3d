// spindle::einsum against its definition (numpy's einsum; docs/einsum.md): every operand is
// expanded to a dense array by a walk over its storage levels written here, and the result
// is computed by enumerating every assignment of the subscripts. The named kernels of the
// Scorch suite, a real graph, random subscript strings and formats on every engine with
// several threads, concurrent callers, and every error einsum raises.
#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "correctness/correctness_support.hpp"
#include "spindle/einsum.hpp"
#include "support/engines.hpp"
#include "support/reference_interpreter.hpp"

namespace sp = spindle;
using namespace spindle_test;

inline std::string testing_join(const std::vector<std::string>& v) {
  std::string s;
  for (auto& x : v) s += (s.empty() ? "" : " ; ") + x;
  return s;
}

namespace {

// A dense copy of any storage (values in double): the first chain of levels is walked by
// positions (dense_fixed root, then dense_variable / sparse_fixed / sparse_variable children),
// trailing dense_fixed levels are row-major inside each of its positions.
struct Dense {
  std::vector<std::int64_t> shape;
  std::vector<double> v;
  std::int64_t offset(const std::vector<std::int64_t>& idx) const {
    std::int64_t o = 0;
    for (std::size_t a = 0; a < shape.size(); ++a) o = o * shape[a] + idx[a];
    return o;
  }
};

std::int64_t index_at(const sp::LevelView& l, const void* p, std::int64_t k) {
  return l.index_dtype == sp::DType::i64 ? static_cast<const std::int64_t*>(p)[k]
                                         : static_cast<const std::int32_t*>(p)[k];
}

template <class T>
Dense dense_of(const sp::StorageView& s) {
  Dense d;
  for (const auto& l : s.levels) d.shape.push_back(l.length);
  std::int64_t volume = 1;
  for (auto e : d.shape) volume *= e;
  d.v.assign(static_cast<std::size_t>(volume), 0.0);
  std::size_t chain = 1;
  while (chain < s.levels.size() && s.levels[chain].kind != sp::LevelKind::dense_fixed) ++chain;
  std::int64_t trailing = 1;
  for (std::size_t l = chain; l < s.levels.size(); ++l) trailing *= s.levels[l].length;
  const T* values = static_cast<const T*>(s.data);
  std::vector<std::int64_t> idx(s.levels.size(), 0);
  auto emit = [&](std::int64_t pos) {
    for (std::int64_t t = 0; t < trailing; ++t) {
      std::int64_t r = t;
      for (std::size_t l = s.levels.size(); l-- > chain;) {
        idx[l] = r % s.levels[l].length;
        r /= s.levels[l].length;
      }
      d.v[static_cast<std::size_t>(d.offset(idx))] += static_cast<double>(values[pos * trailing + t]);
    }
  };
  auto walk = [&](auto&& self, std::size_t l, std::int64_t parent) -> void {
    if (l == chain) return emit(parent);
    const auto& lv = s.levels[l];
    std::int64_t begin = 0, end = 0;
    switch (lv.kind) {
      case sp::LevelKind::dense_fixed: begin = 0, end = lv.length; break;
      case sp::LevelKind::sparse_fixed: begin = parent * lv.nnz_per_row, end = begin + lv.nnz_per_row; break;
      default: begin = index_at(lv, lv.indptr, parent), end = index_at(lv, lv.indptr, parent + 1); break;
    }
    for (std::int64_t p = begin; p < end; ++p) {
      idx[l] = lv.kind == sp::LevelKind::dense_fixed    ? p
               : lv.kind == sp::LevelKind::dense_variable ? p - begin
                                                          : index_at(lv, lv.indices, p);
      self(self, l + 1, p);
    }
  };
  if (volume > 0) walk(walk, 0, 0);
  return d;
}

// The definition: out[output] = sum over all other subscripts of the product.
std::vector<Ref> reference(const sp::EinsumSpec& s, const std::vector<Dense>& ops) {
  std::map<char, std::int64_t> extent;
  for (std::size_t o = 0; o < ops.size(); ++o)
    for (std::size_t l = 0; l < s.inputs[o].size(); ++l) extent[s.inputs[o][l]] = ops[o].shape[l];
  std::vector<char> letters;
  for (auto& [c, e] : extent) letters.push_back(c);
  std::int64_t out_size = 1;
  for (char c : s.output) out_size *= extent[c];
  std::vector<Ref> out(static_cast<std::size_t>(out_size));
  std::map<char, std::int64_t> at;
  auto loop = [&](auto&& self, std::size_t k) -> void {
    if (k == letters.size()) {
      double p = 1, ap = 1;
      for (std::size_t o = 0; o < ops.size(); ++o) {
        std::vector<std::int64_t> idx;
        for (char c : s.inputs[o]) idx.push_back(at[c]);
        double v = ops[o].v[static_cast<std::size_t>(ops[o].offset(idx))];
        p *= v;
        ap *= std::abs(v);
      }
      std::int64_t oo = 0;
      for (char c : s.output) oo = oo * extent[c] + at[c];
      auto& r = out[static_cast<std::size_t>(oo)];
      r.value += p;
      r.abs_sum += ap;
      r.terms += 1;
      return;
    }
    for (std::int64_t v = 0; v < extent[letters[k]]; ++v) {
      at[letters[k]] = v;
      self(self, k + 1);
    }
  };
  loop(loop, 0);
  return out;
}

template <class T>
void check_result(const sp::EinsumResult<T>& r, const std::vector<Ref>& ref, std::size_t operands,
                  const std::string& what) {
  sp::Tensor<T> d = r.to_dense();
  check_close<T>(ref, std::span<const T>(d.values().data(), d.values().size()), what,
                 static_cast<int>(operands));
}

template <class T, class... Ops>
void check_einsum(const std::string& spec, const Ops&... ops) {
  auto s = sp::parse_einsum(spec, sizeof...(Ops));
  std::vector<Dense> dense{dense_of<T>(sp::storage_of(ops))...};
  auto ref = reference(s, dense);
  INFO("einsum '" << spec << "'");
  auto r = sp::einsum(spec, ops...);
  check_result<T>(r, ref, sizeof...(Ops), spec);
}

// The definition evaluated on the operands `refs` (tuples of references, std::tie) and einsum
// run on `actual` (the same matrices, maybe in other containers); checks einsum's values
// against the definition and returns its result with the definition's.
template <class T, class Refs, class Actual>
auto check_einsum_against(const std::string& spec, const Refs& refs, const Actual& actual, const std::string& what) {
  auto s = sp::parse_einsum(spec, std::tuple_size_v<Refs>);
  std::vector<Dense> dense =
      std::apply([](const auto&... o) { return std::vector<Dense>{dense_of<T>(sp::storage_of(o))...}; }, refs);
  auto ref = reference(s, dense);
  auto r = std::apply([&](const auto&... o) { return sp::einsum(spec, o...); }, actual);
  check_result<T>(r, ref, dense.size(), what);
  return std::pair{std::move(r), std::move(ref)};
}

template <class T>
sp::Csr<T> random_csr(std::int64_t rows, std::int64_t cols, double per_row, std::uint64_t seed,
                      double empty = 0.0) {
  sp::RandomCsrOptions o;
  o.empty_row_fraction = empty;
  o.lo = -1;
  o.hi = 1;
  return sp::Csr<T>::random(rows, cols, std::min<double>(per_row, static_cast<double>(cols)), seed, o);
}

}  // namespace

TEMPLATE_TEST_CASE("einsum: sparse vectors and DCSR operands (sparse roots) match the definition",
                   "[correctness][einsum][sparse_vector][dcsr]", float, double) {
  using T = TestType;
  for (const auto& sh : matrix_shapes()) {
    INFO(sh);
    const auto a = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row, 21, sh.empty_row_fraction);
    const auto d = sp::Dcsr<T>::from_csr(random_csr<T>(sh.rows, sh.cols, 2, 22, 0.6));
    std::vector<std::pair<std::int32_t, T>> e;
    for (std::int64_t c = 0; c < sh.cols; c += 3) e.push_back({static_cast<std::int32_t>(c), T(1) + T(c % 5)});
    const auto xs = sp::SparseVector<T>::from_entries(sh.cols, e, "xs");
    const auto ys = sp::SparseVector<T>::from_entries(sh.cols, {}, "empty");
    const auto x = sp::Tensor<T>::random({sh.cols}, 24, -1, 1);
    const auto X = sp::Tensor<T>::random({sh.cols, 4}, 25, -1, 1);
    check_einsum<T>("ij,j->i", a, xs);     // SpMV with a sparse x (A drives, x looked up)
    check_einsum<T>("j,ij->i", xs, a);     // the same, operands swapped
    check_einsum<T>("i,i->", xs, x);       // dot
    check_einsum<T>("i,i->i", xs, x);      // x .* y into a dense vector
    check_einsum<T>("i,i->", ys, x);       // an empty sparse vector
    check_einsum<T>("j,jk->k", xs, X);     // x^T X
    check_einsum<T>("i,j->ij", xs, x);     // outer product
    check_einsum<T>("ij,jk->ik", d, X);    // DCSR SpMM
    check_einsum<T>("ij,j->i", d, x);      // DCSR SpMV
    check_einsum<T>("ij,j->i", d, xs);     // DCSR times a sparse vector
    check_einsum<T>("ij->j", d);           // column sums of a DCSR
  }
}

TEMPLATE_TEST_CASE("einsum: the Scorch suite's kernels match the definition on every test shape",
                   "[correctness][einsum]", float, double) {
  using T = TestType;
  for (const auto& sh : matrix_shapes()) {
    INFO(sh);
    const auto a = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row, 11, sh.empty_row_fraction);
    const auto b = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row / 2 + 1, 12);
    const auto bt = random_csr<T>(sh.cols, sh.rows + 1, 3, 13, 0.3);
    const auto x = sp::Tensor<T>::random({sh.cols}, 14, -1, 1);
    const auto xr = sp::Tensor<T>::random({sh.rows}, 15, -1, 1);
    const auto X = sp::Tensor<T>::random({sh.cols, 5}, 16, -1, 1);
    const auto Z = sp::Tensor<T>::random({sh.rows, 5}, 17, -1, 1);
    check_einsum<T>("ij,j->i", a, x);                      // SpMV
    check_einsum<T>("ij,jk->ik", a, X);                    // SpMM
    check_einsum<T>("ij,jk", a, X);                        // implicit output: ik
    check_einsum<T>("ij,ik->jk", a, Z);                    // A^T Z
    check_einsum<T>("ij,jk->ik", a, bt);                   // SpGEMM (an assembled Csr)
    check_einsum<T>("jk,ij->ik", bt, a);                   // the same, operands the other way round
    check_einsum<T>("ij,ij->ij", a, b);                    // element-wise product
    check_einsum<T>("ij,ij->", a, b);                      // Frobenius inner product
    check_einsum<T>("ij->ji", a);                          // transpose
    check_einsum<T>("ij->i", a);                           // row sums
    check_einsum<T>("ij->j", a);                           // column sums
    check_einsum<T>("ij,j->ij", a, x);                     // A(i,j) = B(i,j) * c(j)
    check_einsum<T>("i,ij,j->ij", xr, a, x);               // D1 A D2
    check_einsum<T>("i,j->ij", xr, x);                     // outer product (dense)
    check_einsum<T>("ij,ik,jk->ij", a, Z, X);              // SDDMM
    check_einsum<T>("ik,kj->ij", Z, sp::Tensor<T>::random({5, 3}, 18, -1, 1));  // GEMM, all dense
    if (sh.rows == sh.cols) {
      check_einsum<T>("ii->", a);  // trace
      check_einsum<T>("ii->i", a);
    }

    // Output formats: SDDMM and A .* B give a Csr with the driving operand's pattern.
    auto sddmm = sp::einsum("ij,ik,jk->ij", a, Z, X);
    REQUIRE(sddmm.is_sparse());
    CHECK(std::vector<std::int32_t>(sddmm.csr().indices().begin(), sddmm.csr().indices().end()) ==
          std::vector<std::int32_t>(a.indices().begin(), a.indices().end()));
    // A .* B of two Csr: the intersection of their patterns (one merge per row), exactly.
    auto hadamard = sp::einsum("ij,ij->ij", a, b);
    REQUIRE(hadamard.is_sparse());
    {
      const auto& h = hadamard.csr();
      CHECK(h.sorted());
      std::vector<std::int32_t> want_ptr{0}, want_idx;
      for (std::int64_t r = 0; r < a.rows(); ++r) {
        for (auto j : a.row_indices(r)) {
          const auto row_b = b.row_indices(r);
          if (std::find(row_b.begin(), row_b.end(), j) != row_b.end()) want_idx.push_back(j);
        }
        want_ptr.push_back(static_cast<std::int32_t>(want_idx.size()));
      }
      CHECK(std::vector<std::int32_t>(h.indptr().begin(), h.indptr().end()) == want_ptr);
      CHECK(std::vector<std::int32_t>(h.indices().begin(), h.indices().end()) == want_idx);
    }
    // Three operands, and operands of mixed index types (the result takes the wider one).
    const auto c3 = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row + 2, 19, 0.2);
    check_einsum<T>("ij,ij,ij->ij", a, b, c3);
    REQUIRE(sp::einsum("ij,ij,ij->ij", a, b, c3).is_sparse());
    const auto b64 = sp::Csr<T, std::int64_t>(b.rows(), b.cols(), std::vector<std::int64_t>(b.indptr().begin(), b.indptr().end()),
                                              std::vector<std::int64_t>(b.indices().begin(), b.indices().end()),
                                              std::vector<T>(b.values().begin(), b.values().end()));
    check_einsum<T>("ij,ij->ij", a, b64);
    CHECK(sp::einsum("ij,ij->ij", a, b64).template csr<std::int64_t>().nnz() == hadamard.csr().nnz());
    CHECK_FALSE(sp::einsum("ij,jk->ik", a, X).is_sparse());
    // A product of two CSR operands: a Csr whose pattern is the structural product (every
    // (i, k) some a(i, j) b(j, k) reaches, a cancelled sum kept as a stored 0), rows sorted.
    auto spgemm = sp::einsum("ij,jk->ik", a, bt);
    REQUIRE(spgemm.is_sparse());
    const auto& c = spgemm.csr();
    CHECK(c.sorted());
    std::int64_t structural = 0;
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      std::vector<char> hit(static_cast<std::size_t>(bt.cols()), 0);
      for (auto j : a.row_indices(r))
        for (auto k : bt.row_indices(j)) structural += !hit[static_cast<std::size_t>(k)]++;
    }
    CHECK(c.nnz() == structural);
    CHECK(c.rows() == a.rows());
    CHECK(c.cols() == bt.cols());
    // einsum_into writes the caller's dense output instead.
    auto dense_out = sp::Tensor<T>::full({a.rows(), bt.cols()}, nan_v<T>);
    sp::einsum_into("ij,jk->ik", dense_out, a, bt);
    CHECK(dense_out == c.to_dense());
    CHECK(sp::einsum("ij,ij->", a, b).tensor().rank() == 0);

    // Products and element-wise products that need an operand by columns: einsum transposes
    // the CSR operand (a counting sort) and assembles the result like any product.
    const auto ct = random_csr<T>(4, sh.rows, 2, 20, 0.25);
    const auto bc_rows = random_csr<T>(sh.cols, sh.rows, 3, 21, 0.3);  // the shape of Aᵀ
    check_einsum<T>("ij,kj->ik", a, b);   // A Bᵀ
    check_einsum<T>("ij,kj->ki", a, b);   // B Aᵀ
    check_einsum<T>("ji,jk->ik", a, b);   // Aᵀ B
    check_einsum<T>("ji,kj->ik", a, ct);  // Aᵀ Cᵀ: both transposed
    check_einsum<T>("ij,ji->ij", a, bc_rows);  // A .* Bᵀ: an intersection
    check_einsum<T>("ij->ji", a);         // the transpose itself
    auto entries_of_product = [](const sp::Csr<T>& l, const sp::Csr<T>& r) {  // entries of l r
      std::int64_t n = 0;
      for (std::int64_t i = 0; i < l.rows(); ++i) {
        std::vector<char> hit(static_cast<std::size_t>(r.cols()), 0);
        for (auto j : l.row_indices(i))
          for (auto k : r.row_indices(j)) n += !hit[static_cast<std::size_t>(k)]++;
      }
      return n;
    };
    const auto at = sp::transpose(a).matrix, btt = sp::transpose(b).matrix;
    auto abt = sp::einsum("ij,kj->ik", a, b);
    REQUIRE(abt.is_sparse());
    CHECK(abt.csr().sorted());
    CHECK(abt.csr().nnz() == entries_of_product(a, btt));
    auto atb = sp::einsum("ji,jk->ik", a, b);
    REQUIRE(atb.is_sparse());
    CHECK(atb.csr().nnz() == entries_of_product(at, b));
    CHECK(atb.csr().rows() == a.cols());
    auto tr = sp::einsum("ij->ji", a);
    REQUIRE(tr.is_sparse());
    CHECK(std::equal(tr.csr().indptr().begin(), tr.csr().indptr().end(), at.indptr().begin(), at.indptr().end()));
    CHECK(std::equal(tr.csr().indices().begin(), tr.csr().indices().end(), at.indices().begin(), at.indices().end()));
    CHECK(std::equal(tr.csr().values().begin(), tr.csr().values().end(), at.values().begin(), at.values().end()));
    REQUIRE(sp::einsum("ij,ji->ij", a, bc_rows).is_sparse());
    // Into a dense output: the same Gustavson loops over the transposed copy; a wrong output
    // is reported against the caller's subscripts, before anything is written.
    auto abt_dense = sp::Tensor<T>::full({a.rows(), b.rows()}, nan_v<T>);
    sp::einsum_into("ij,kj->ik", abt_dense, a, b);
    CHECK(abt_dense == abt.csr().to_dense());
    auto wrong = sp::Tensor<T>::full({a.rows(), b.rows() + 1}, nan_v<T>);
    CHECK_THROWS_AS(sp::einsum_into("ij,kj->ik", wrong, a, b), sp::ShapeError);
    CHECK(std::all_of(wrong.values().begin(), wrong.values().end(), [](T v) { return std::isnan(v); }));
    CHECK_THAT(sp::einsum_explain("ij,kj->ik", a, b),
               Catch::Contains("operand 1 ('kj' -> 'jk') transposed first") && Catch::Contains("whose pattern is assembled"));
  }
}

TEMPLATE_TEST_CASE("einsum: 3-tensors (CSF and dense) — TTV, TTM, MTTKRP, batched matmul",
                   "[correctness][einsum]", float, double) {
  using T = TestType;
  for (auto shape : std::vector<std::vector<std::int64_t>>{{6, 5, 4}, {1, 1, 1}, {9, 0, 3}, {12, 7, 9}}) {
    INFO("shape " << shape[0] << "x" << shape[1] << "x" << shape[2]);
    const auto t = sp::Csf<T>::random(shape, 0.2, 21, -1, 1);
    const auto v = sp::Tensor<T>::random({shape[2]}, 22, -1, 1);
    const auto m = sp::Tensor<T>::random({shape[2], 3}, 23, -1, 1);
    const auto b = sp::Tensor<T>::random({shape[1], 4}, 24, -1, 1);
    const auto c = sp::Tensor<T>::random({shape[2], 4}, 25, -1, 1);
    check_einsum<T>("ijk,k->ij", t, v);         // TTV
    check_einsum<T>("ijk,kl->ijl", t, m);       // TTM
    check_einsum<T>("ijk,jr,kr->ir", t, b, c);  // MTTKRP
    check_einsum<T>("ijk->", t);
    const auto d = sp::Tensor<T>::random(shape, 26, -1, 1);
    const auto e = sp::Tensor<T>::random({shape[0], shape[2], 2}, 27, -1, 1);
    check_einsum<T>("bij,bjk->bik", d, e);
    check_einsum<T>("ijk,ijk->ijk", d, t);  // the CSF drives; dense output (3 levels, not a Csr)
  }
}

TEST_CASE("einsum: SpMM and SDDMM on a real graph equal the library's kernels", "[correctness][einsum][graphs]") {
  auto g = load_graph<float>("gnn/cora.mtx.gz");
  if (!g) {
    WARN("cora not found under " << data_dir() << "; skipped");
    return;
  }
  const auto X = sp::Tensor<float>::random({g->cols(), 32}, 31, -1, 1);
  const auto Z = sp::Tensor<float>::random({g->rows(), 32}, 32, -1, 1);
  sp::Tensor<float> y = sp::Tensor<float>::zeros({g->rows(), 32});
  sp::ops::spmm<float>()(*g, X, y);
  auto e = sp::einsum("ij,jk->ik", *g, X).tensor();
  REQUIRE(e.values().size() == y.values().size());
  for (std::size_t q = 0; q < y.values().size(); ++q) REQUIRE(e.values()[q] == y.values()[q]);
  auto s = sp::einsum("ij,ik,jk->ij", *g, Z, X);
  sp::Csr<float> c = *g;
  sp::ops::sddmm<float>()(*g, Z, X, c);
  for (std::int64_t q = 0; q < c.nnz(); ++q) REQUIRE(s.csr().values()[q] == c.values()[q]);
  // einsum_into reuses the caller's output; the same subscripts under other letters agree.
  sp::Tensor<float> into = sp::Tensor<float>::full({g->rows(), 32}, nan_v<float>);
  sp::einsum_into("ab,bc->ac", into, *g, X);
  CHECK(into == e);
  const std::string explain = sp::einsum_explain("ij,jk->ik", *g, X);
  CHECK_THAT(explain, Catch::Contains("operand 0 (Csr) drives the iteration"));
  CHECK_THAT(explain, Catch::Contains("dense Tensor [ik]"));
  // SpGEMM: einsum's assembled product equals ops::spgemm's (same pattern, same sums).
  sp::Csr<float> product(g->rows(), g->cols());
  sp::ops::spgemm<float>()(*g, *g, product);
  auto ep = sp::einsum("ij,jk->ik", *g, *g);
  REQUIRE(ep.is_sparse());
  const auto& pc = ep.csr();
  REQUIRE(pc.nnz() == product.nnz());
  CHECK(std::equal(pc.indptr().begin(), pc.indptr().end(), product.indptr().begin()));
  CHECK(std::equal(pc.indices().begin(), pc.indices().end(), product.indices().begin()));
  for (std::int64_t q = 0; q < pc.nnz(); ++q)
    REQUIRE(std::fabs(pc.values()[q] - product.values()[q]) <= 1e-5f * (1 + std::fabs(product.values()[q])));
  // Into a dense output: the same product, Gustavson into the caller's Tensor.
  auto dense = sp::Tensor<float>::full({g->rows(), g->cols()}, nan_v<float>);
  sp::einsum_into("ij,jk->ik", dense, *g, *g);
  CHECK(dense == product.to_dense());
  CHECK_THAT(sp::einsum_explain("ij,jk->ik", *g, *g), Catch::Contains("whose pattern is assembled"));
}

namespace {

// One random einsum: up to 4 operands over the subscripts "abXY" with random extents
// (0 included), each a dense Tensor or — for two subscripts — a Csr with empty rows; a random
// explicit output or the implicit one; repeated subscripts allowed.
struct RandomEinsum {
  std::string spec;
  std::vector<sp::Tensor<double>> dense;
  std::vector<sp::Csr<double>> sparse;
  std::vector<int> kind;  // per operand: index into dense (>= 0) or sparse (-1 - k)
};

RandomEinsum random_einsum(std::mt19937_64& rng) {
  const std::string pool = "abXY";
  std::map<char, std::int64_t> extent;
  const std::int64_t sizes[] = {0, 1, 2, 3, 4, 6, 9};
  for (char c : pool) extent[c] = sizes[rng() % 7 == 0 ? 0 : 1 + rng() % 6];
  RandomEinsum r;
  const int n = 1 + static_cast<int>(rng() % 4);
  std::string used;
  for (int o = 0; o < n; ++o) {
    const int rank = 1 + static_cast<int>(rng() % 3);
    std::string sub;
    for (int l = 0; l < rank; ++l) sub += pool[rng() % pool.size()];
    used += sub;
    r.spec += (o ? "," : "") + sub;
    std::vector<std::int64_t> shape;
    for (char c : sub) shape.push_back(extent[c]);
    if (rank == 2 && rng() % 2) {
      sp::RandomCsrOptions opt;
      opt.empty_row_fraction = 0.3;
      opt.lo = -1;
      opt.hi = 1;
      double per_row = static_cast<double>(shape[1]) * (0.2 + 0.6 * static_cast<double>(rng() % 100) / 100);
      r.sparse.push_back(sp::Csr<double>::random(shape[0], shape[1], per_row, rng(), opt));
      r.kind.push_back(-1 - static_cast<int>(r.sparse.size() - 1));
    } else {
      r.dense.push_back(sp::Tensor<double>::random(shape, rng(), -1, 1));
      r.kind.push_back(static_cast<int>(r.dense.size() - 1));
    }
  }
  if (rng() % 4) {  // an explicit output: distinct used subscripts in random order
    std::string out;
    for (char c : used)
      if (out.find(c) == std::string::npos && rng() % 2) out += c;
    std::shuffle(out.begin(), out.end(), rng);
    r.spec += "->" + out;
  }
  return r;
}

// A random statement over CSR operands in random orientations whose sparse result einsum
// assembles after transposing some of them (or directly): a product of two ("ab,bc", any
// operand stored either way round, either output order), an element-wise product of two, or
// one matrix into either order.
RandomEinsum random_csr_orientation_einsum(std::mt19937_64& rng) {
  std::string pool = "abXY";
  std::shuffle(pool.begin(), pool.end(), rng);
  const char a = pool[0], b = pool[1], c = pool[2], d = pool[3];
  const std::int64_t sizes[] = {0, 1, 2, 3, 5, 8};
  std::map<char, std::int64_t> extent{
      {a, sizes[rng() % 6]}, {b, sizes[rng() % 6]}, {c, sizes[rng() % 6]}, {d, sizes[rng() % 6]}};
  auto maybe_swap = [&](std::string x) {
    if (rng() % 2) std::swap(x[0], x[1]);
    return x;
  };
  std::vector<std::string> ins;
  std::string out;
  switch (rng() % 5) {
    case 0: ins = {maybe_swap({a, b}), maybe_swap({b, c})}, out = maybe_swap({a, c}); break;
    case 1: ins = {maybe_swap({a, b}), maybe_swap({a, b})}, out = maybe_swap({a, b}); break;
    // products of three CSR operands: assembled pairwise (EinsumPath::assembled_result)
    case 2: ins = {maybe_swap({a, b}), maybe_swap({b, c}), maybe_swap({c, d})}, out = maybe_swap({a, d}); break;
    case 3: ins = {maybe_swap({a, b}), maybe_swap({a, b}), maybe_swap({b, c})}, out = maybe_swap({a, c}); break;
    default: ins = {maybe_swap({a, b})}, out = maybe_swap({a, b}); break;
  }
  std::shuffle(ins.begin(), ins.end(), rng);
  RandomEinsum r;
  for (std::size_t o = 0; o < ins.size(); ++o) {
    r.spec += (o ? "," : "") + ins[o];
    sp::RandomCsrOptions opt;
    opt.empty_row_fraction = 0.3;
    opt.lo = -1;
    opt.hi = 1;
    const std::int64_t rows = extent[ins[o][0]], cols = extent[ins[o][1]];
    const double per_row = static_cast<double>(cols) * (0.2 + 0.6 * static_cast<double>(rng() % 100) / 100);
    r.sparse.push_back(sp::Csr<double>::random(rows, cols, per_row, rng(), opt));
    r.kind.push_back(-1 - static_cast<int>(o));
  }
  r.spec += "->" + out;
  return r;
}

sp::StorageView view_of(const RandomEinsum& r, int o) {
  int k = r.kind[static_cast<std::size_t>(o)];
  return k >= 0 ? r.dense[static_cast<std::size_t>(k)].storage() : r.sparse[static_cast<std::size_t>(-1 - k)].storage();
}

template <class... Ops>
sp::EinsumResult<double> run_random(sp::runtime::Runtime& rt, const RandomEinsum& r, const Ops&... ops) {
  return sp::einsum(rt, r.spec, ops...);
}

sp::EinsumResult<double> run_random(sp::runtime::Runtime& rt, const RandomEinsum& r) {
  auto get = [&](int o, auto&& f) {
    int k = r.kind[static_cast<std::size_t>(o)];
    if (k >= 0) return f(r.dense[static_cast<std::size_t>(k)]);
    return f(r.sparse[static_cast<std::size_t>(-1 - k)]);
  };
  switch (r.kind.size()) {
    case 1: return get(0, [&](const auto& a) { return run_random(rt, r, a); });
    case 2:
      return get(0, [&](const auto& a) { return get(1, [&](const auto& b) { return run_random(rt, r, a, b); }); });
    case 3:
      return get(0, [&](const auto& a) {
        return get(1, [&](const auto& b) {
          return get(2, [&](const auto& c) { return run_random(rt, r, a, b, c); });
        });
      });
    default:
      return get(0, [&](const auto& a) {
        return get(1, [&](const auto& b) {
          return get(2, [&](const auto& c) {
            return get(3, [&](const auto& d) { return run_random(rt, r, a, b, c, d); });
          });
        });
      });
  }
}

int env_count(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

}  // namespace

TEST_CASE("einsum: random subscripts and formats match the definition on every engine with several threads",
          "[correctness][einsum][random]") {
  const int count = env_count("SPINDLE_EINSUM_CASES", 60);
  const std::uint64_t seed = static_cast<std::uint64_t>(env_count("SPINDLE_EINSUM_SEED", 5));
  std::mt19937_64 rng(seed);
  int sparse_results = 0, with_sparse_operands = 0, factored = 0, products = 0, transposes = 0, chains = 0;
  for (int k = 0; k < count; ++k) {
    RandomEinsum r = k % 5 == 4 ? random_csr_orientation_einsum(rng) : random_einsum(rng);
    std::vector<Dense> dense;
    for (int o = 0; o < static_cast<int>(r.kind.size()); ++o) dense.push_back(dense_of<double>(view_of(r, o)));
    auto s = sp::parse_einsum(r.spec, r.kind.size());
    auto ref = reference(s, dense);
    with_sparse_operands += !r.sparse.empty();
    const auto engines = spindle::test::cpu_engines();
    const std::string engine = engines[static_cast<std::size_t>(k) % engines.size()];
    const int threads = 1 + k % 3;
    INFO("case " << k << " (seed " << seed << "): einsum '" << r.spec << "' on " << engine << " with " << threads
                 << " threads");
    auto& rt = spindle::test::engine_runtime(engine, threads);
    std::vector<sp::StorageView> views;
    for (int o = 0; o < static_cast<int>(r.kind.size()); ++o) views.push_back(view_of(r, o));
    const auto path = sp::detail::einsum_path(s, views, rt);
    factored += !path.steps.empty();
    auto got = run_random(rt, r);
    sparse_results += got.is_sparse();
    check_result<double>(got, ref, r.kind.size(), r.spec);
    if (path.assembled_result) {  // a product of CSR operands assembled pairwise: a Csr
      REQUIRE(got.is_sparse());
      ++chains;
    }

    // The reference interpreter runs the same stage-I function (docs/language.md's semantics
    // of what the front end built) and must agree with the definition too.
    // A statement einsum runs over transposed copies of CSR operands (A Bᵀ, Aᵀ B, the
    // transpose of a CSR) is checked as the statement it runs: the interpreter gets the copies.
    const auto tf = sp::einsum_transposed_form(
        s.inputs, s.output, [&](std::size_t o) { return sp::detail::einsum_view_is_csr(views[o]); }, true);
    std::vector<sp::Csr<double>> transposed;
    transposed.reserve(r.kind.size());
    if (tf.found()) {
      ++transposes;
      s = sp::parse_einsum(tf.spec(), r.kind.size());
    }
    std::vector<sp::EinsumOperandFormat> formats;
    std::vector<std::int64_t> stored;
    std::vector<sp::runtime::CallArg> args;
    for (int o = 0; o < static_cast<int>(r.kind.size()); ++o) {
      args.emplace_back();
      args.back().view = view_of(r, o);
      if (tf.found() && tf.transpose[static_cast<std::size_t>(o)]) {
        transposed.push_back(sp::transpose(r.sparse[static_cast<std::size_t>(-1 - r.kind[static_cast<std::size_t>(o)])]).matrix);
        args.back().view = transposed.back().storage();
      }
      formats.push_back(sp::einsum_format_of(args.back().view));
      stored.push_back(args.back().view.value_count);
    }
    const int driver = sp::choose_einsum_driver(s, formats, stored);
    const auto product = sp::einsum_product_form(s.inputs, s.output, formats);
    const bool intersection = sp::einsum_intersection_form(s.inputs, s.output, formats);
    if (product.found() || intersection) {
      // A product or an element-wise product of CSR operands: an assembled Csr, which the
      // interpreter builds as a map.
      REQUIRE(got.is_sparse());
      ++products;
      auto f = product.found() ? sp::build_einsum_product_function(s, formats, sp::DType::f64, product)
                               : sp::build_einsum_intersection_function(s, formats, sp::DType::f64);
      const auto& c = got.csr();
      sp::Csr<double> shell(c.rows(), c.cols());
      args.emplace_back();
      args.back().view = shell.storage();
      spindle::test::Interpreter interp(f, args);
      interp.run();
      auto want = interp.assembled(f.buffers.back().buffer->name);
      REQUIRE(static_cast<std::int64_t>(want.size()) == c.nnz());
      for (const auto& w : want) {
        auto idx = c.row_indices(w.row);
        auto at = std::lower_bound(idx.begin(), idx.end(), static_cast<std::int32_t>(w.col));
        REQUIRE(at != idx.end());
        REQUIRE(*at == w.col);
        const double g = c.row_values(w.row)[static_cast<std::size_t>(at - idx.begin())];
        CHECK(std::fabs(g - w.f) <= w.error_bound + 1e-9 * (1 + std::fabs(w.f)));
      }
      continue;
    }
    const bool sparse_out = sp::einsum_sparse_output(s, formats, driver);
    // The single statement's result (dense for an assembled chain, which it is compared as).
    if (!path.assembled_result) REQUIRE(sparse_out == got.is_sparse());
    auto f = sp::build_einsum_function(s, formats, sp::DType::f64, driver, sparse_out);
    sp::Tensor<double> interp_dense;
    sp::Csr<double> interp_sparse;
    if (sparse_out) {
      interp_sparse = got.csr();
      std::fill(interp_sparse.values().begin(), interp_sparse.values().end(), nan_v<double>);
      args.emplace_back();
      args.back().view = interp_sparse.storage();
    } else {
      interp_dense = got.to_dense();
      std::fill(interp_dense.values().begin(), interp_dense.values().end(), nan_v<double>);
      auto shape = interp_dense.shape();
      if (shape.empty()) shape.push_back(1);
      args.emplace_back();
      args.back().view = sp::TensorView<double>(interp_dense.data(), shape).storage();
    }
    spindle::test::Interpreter interp(f, args);
    interp.run();
    if (sparse_out)
      check_result<double>(sp::EinsumResult<double>(interp_sparse), ref, r.kind.size(), r.spec + " (interpreter)");
    else
      check_result<double>(sp::EinsumResult<double>(interp_dense), ref, r.kind.size(), r.spec + " (interpreter)");
  }
  INFO(with_sparse_operands << " cases with sparse operands, " << sparse_results << " sparse results (" << products
                            << " assembled products and intersections), " << factored << " factored into several statements, "
                            << transposes << " over transposed CSR operands, " << chains
                            << " products of three CSR operands assembled pairwise");
  CHECK(with_sparse_operands > count / 4);
  CHECK(sparse_results > 0);
  CHECK(factored > 0);
  CHECK(transposes > 0);
  CHECK(chains > 0);
}

TEST_CASE("einsum: concurrent callers share plans and get their own results", "[correctness][einsum][threads]") {
  const auto a = random_csr<float>(200, 150, 8, 41, 0.2);
  const auto X = sp::Tensor<float>::random({150, 16}, 42, -1, 1);
  const auto Z = sp::Tensor<float>::random({200, 16}, 43, -1, 1);
  const std::vector<std::string> specs{"ij,jk->ik", "ij,ik,jk->ij", "ij,ik->jk", "ij->i"};
  std::vector<sp::Tensor<float>> expected;
  for (const auto& s : specs)
    expected.push_back(s == "ij,jk->ik"      ? sp::einsum(s, a, X).to_dense()
                       : s == "ij,ik,jk->ij" ? sp::einsum(s, a, Z, X).to_dense()
                       : s == "ij,ik->jk"    ? sp::einsum(s, a, Z).to_dense()
                                             : sp::einsum(s, a).to_dense());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t)
    pool.emplace_back([&, t] {
      for (int rep = 0; rep < 25; ++rep) {
        std::size_t q = static_cast<std::size_t>(t + rep) % specs.size();
        const auto& s = specs[q];
        sp::Tensor<float> got = s == "ij,jk->ik"      ? sp::einsum(s, a, X).to_dense()
                                : s == "ij,ik,jk->ij" ? sp::einsum(s, a, Z, X).to_dense()
                                : s == "ij,ik->jk"    ? sp::einsum(s, a, Z).to_dense()
                                                      : sp::einsum(s, a).to_dense();
        if (!(got == expected[q])) ++mismatches;
      }
    });
  for (auto& th : pool) th.join();
  CHECK(mismatches == 0);
}

TEST_CASE("einsum: bad subscripts and operands raise errors that name the subscript and operand",
          "[correctness][einsum][error]") {
  const auto a = random_csr<float>(6, 5, 2, 51);
  const auto x = sp::Tensor<float>::random({5, 3}, 52);
  const auto w = sp::Tensor<float>::random({4, 3}, 53);
  const auto xd = sp::Tensor<double>::random({5, 3}, 54);
  auto throws = [](auto&& f, const std::string& what, auto tag) {
    using E = decltype(tag);
    try {
      f();
      FAIL("no error; expected one containing: " << what);
    } catch (const E& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains(what));
    }
  };
  throws([&] { sp::einsum("ij,j1->i", a, x); }, "'1' at position 4 is not a subscript", sp::UserError{""});
  throws([&] { sp::einsum("...j,jk->ik", a, x); }, "'...' is not supported", sp::UserError{""});
  throws([&] { sp::einsum("ij->ik", a); }, "output subscript 'k' appears in no operand", sp::UserError{""});
  throws([&] { sp::einsum("ij,jk->ii", a, x); }, "output subscript 'i' appears twice", sp::UserError{""});
  throws([&] { sp::einsum("ij", a, x); }, "name 1 operand but 2 were given", sp::UserError{""});
  throws([&] { sp::einsum("ij,->i", a, x); }, "operand 1 has no subscripts", sp::UserError{""});
  throws([&] { sp::einsum("ij->i->j", a); }, "'->' appears more than once", sp::UserError{""});
  throws([&] { sp::einsum("ij,jkl->ik", a, x); }, "operand 1 ('jkl', Tensor<f32> [5, 3]) has 2 axes but 3 subscripts",
         sp::ShapeError{""});
  throws([&] { sp::einsum("ij,jk->ik", a, w); }, "subscript 'j' has extent 5 in operand 0", sp::ShapeError{""});
  throws([&] { sp::einsum("ij,jk->ik", a, w); }, "but 4 in operand 1 ('jk', Tensor<f32> [4, 3]) axis 0",
         sp::ShapeError{""});
  throws([&] { sp::einsum("ij,jk->ik", a, xd); }, "operand 1 ('jk', Tensor<f64> [5, 3]) holds f64 but operand 0 holds f32",
         sp::DTypeError{""});
  sp::Tensor<float> wrong = sp::Tensor<float>::zeros({6, 4});
  throws([&] { sp::einsum_into("ij,jk->ik", wrong, a, x); }, "subscript 'k' has extent 3", sp::ShapeError{""});
  sp::Tensor<float> flat = sp::Tensor<float>::zeros({6});
  throws([&] { sp::einsum_into("ij,jk->ik", flat, a, x); }, "has 1 axes but the result has 2", sp::ShapeError{""});
  sp::Tensor<float> dense_out = sp::Tensor<float>::zeros({6, 5});
  throws([&] { sp::einsum_into("ij,ij->ij", dense_out, a, a); }, "must be a Csr with that pattern", sp::ShapeError{""});
  auto other = random_csr<float>(6, 5, 3, 55);
  auto into = other;
  throws([&] { sp::einsum_into("ij,ij->ij", into, a, a); }, "different sparsity structure", sp::ShapeError{""});
  CHECK(into.values().size() == other.values().size());
  for (std::size_t q = 0; q < into.values().size(); ++q) CHECK(into.values()[q] == other.values()[q]);  // untouched
  auto result = sp::einsum("ij,jk->ik", a, x);
  throws([&] { (void)result.csr(); }, "a dense Tensor (use .tensor())", sp::UserError{""});
}

namespace {

sp::autosched::EinsumPath plan_for(const std::string& spec, const std::vector<std::vector<std::int64_t>>& shapes,
                                    const std::vector<std::int64_t>& nnz) {
  auto s = sp::parse_einsum(spec, shapes.size());
  std::vector<sp::autosched::EinsumOperandInfo> infos;
  for (std::size_t o = 0; o < shapes.size(); ++o) {
    sp::autosched::EinsumOperandInfo info;
    info.extents = shapes[o];
    info.format.kind = nnz[o] >= 0 ? "Csr" : "Tensor";
    info.stored = 1;
    for (std::size_t l = 0; l < shapes[o].size(); ++l) {
      info.format.levels.push_back(nnz[o] >= 0 && l == 1 ? sp::LevelKind::sparse_variable : sp::LevelKind::dense_fixed);
      info.format.index_dtypes.push_back(sp::DType::i32);
      info.stored *= shapes[o][l];
    }
    if (nnz[o] >= 0) info.stored = nnz[o];
    infos.push_back(info);
  }
  return sp::autosched::plan_einsum_path(s, infos);
}

std::vector<std::string> step_specs(const sp::autosched::EinsumPath& p) {
  std::vector<std::string> v;
  for (auto& st : p.steps) v.push_back(st.spec);
  return v;
}

}  // namespace

TEST_CASE("einsum path: multi-operand statements are factored where that costs less", "[correctness][einsum][path]") {
  const std::int64_t n = 19717, e = 88648;  // pubmed
  // GCN layer D A D X W: X W first when it shrinks the features, A X first when it grows them.
  auto shrink = plan_for("i,ij,j,jk,kl->il", {{n}, {n, n}, {n}, {n, 500}, {500, 16}}, {-1, e, -1, -1, -1});
  INFO("shrink: " << ::testing_join(step_specs(shrink)));
  REQUIRE(shrink.steps.size() >= 2);
  CHECK(shrink.cost < 0.2 * shrink.single_cost);
  const auto shrink_steps = step_specs(shrink);
  CHECK(std::count(shrink_steps.begin(), shrink_steps.end(), std::string("jk,kl->jl")) == 1);
  auto grow = plan_for("ij,jk,kl->il", {{n, n}, {n, 16}, {16, 500}}, {e, -1, -1});
  INFO("grow: " << ::testing_join(step_specs(grow)));
  REQUIRE(grow.steps.size() == 2);
  CHECK(grow.steps[0].spec == "ij,jk->ik");
  CHECK(grow.steps[1].spec == "ik,kl->il");
  // Attention: SDDMM into A's pattern (a Csr intermediate), then SpMM.
  auto att = plan_for("ij,ik,jk,jl->il", {{n, n}, {n, 64}, {n, 64}, {n, 64}}, {e, -1, -1, -1});
  INFO("attention: " << ::testing_join(step_specs(att)));
  REQUIRE(att.steps.size() == 2);
  CHECK(att.steps[0].spec == "ij,ik,jk->ij");
  CHECK(att.steps[0].sparse_result);
  CHECK(att.steps[1].spec == "ij,jl->il");
  // Three sparse operands: a product of two of them is assembled as a Csr intermediate (far
  // fewer multiply-adds than one loop nest over every subscript), then the dense product.
  auto chain = plan_for("ij,jk,kl->il", {{n, n}, {n, n}, {n, n}}, {e, e, e});
  INFO("chain: " << ::testing_join(step_specs(chain)));
  REQUIRE(chain.steps.size() == 2);
  CHECK(chain.steps[0].sparse_result);
  CHECK(chain.steps[1].sparse_result);  // every operand a CSR: the final product is assembled too
  CHECK(chain.assembled_result);
  CHECK(chain.cost < 1e-3 * chain.single_cost);
  // ... at any cost, when the single statement would be dense: even on tiny shapes.
  auto tiny = plan_for("ij,jk,kl->il", {{2, 2}, {2, 2}, {2, 2}}, {4, 4, 4});
  CHECK(tiny.assembled_result);
  CHECK(tiny.steps.size() == 2);
  // A dense operand in the chain: the final statement is dense as before.
  auto mixed = plan_for("ij,jk,kl->il", {{n, n}, {n, n}, {n, 16}}, {e, e, -1});
  CHECK_FALSE(mixed.assembled_result);
  // Two operands, sparse results and cheap single statements stay one statement.
  CHECK(plan_for("ij,jk->ik", {{n, n}, {n, 64}}, {e, -1}).steps.empty());
  CHECK(plan_for("ij,ik,jk->ij", {{n, n}, {n, 64}, {n, 64}}, {e, -1, -1}).steps.empty());
  CHECK(plan_for("i,ij,j->ij", {{n}, {n, n}, {n}}, {-1, e, -1}).steps.empty());
}

TEMPLATE_TEST_CASE("einsum path: factored statements match the definition, and SPINDLE_EINSUM_PATH=single agrees",
                   "[correctness][einsum][path]", float, double) {
  using T = TestType;
  const auto a = random_csr<T>(70, 60, 4, 61, 0.2);
  const auto d1 = sp::Tensor<T>::random({70}, 62, -1, 1);
  const auto d2 = sp::Tensor<T>::random({60}, 63, -1, 1);
  const auto x = sp::Tensor<T>::random({60, 24}, 64, -1, 1);
  const auto w = sp::Tensor<T>::random({24, 3}, 65, -1, 1);
  const auto q = sp::Tensor<T>::random({70, 8}, 66, -1, 1);
  const auto k = sp::Tensor<T>::random({60, 8}, 67, -1, 1);
  const auto v = sp::Tensor<T>::random({60, 5}, 68, -1, 1);
  check_einsum<T>("i,ij,j,jk,kl->il", d1, a, d2, x, w);  // GCN layer
  check_einsum<T>("ij,ik,jk,jl->il", a, q, k, v);        // attention-style
  check_einsum<T>("ij,jk,kl->il", a, x, w);
  const auto b = random_csr<T>(60, 50, 3, 69, 0.1);
  const auto c = random_csr<T>(50, 40, 3, 70, 0.1);
  check_einsum<T>("ij,jk,kl->il", a, b, c);  // three CSR: an assembled intermediate
  const std::string chain = sp::einsum_explain("ij,jk,kl->il", a, b, c);
  CHECK_THAT(chain, Catch::Contains("whose pattern is assembled"));   // the intermediate
  CHECK_THAT(chain, Catch::Contains("Gustavson)\n# einsum output: Csr<"));  // the final statement, assembled too
  CHECK(sp::einsum("ij,jk,kl->il", a, b, c).is_sparse());
  // A Bᵀ C with B stored the other way round: the intermediate A Bᵀ is assembled after one
  // transpose, as the planner costed it.
  const auto bt = sp::transpose(b).matrix;  // 50 x 60
  check_einsum<T>("ij,kj,kl->il", a, bt, c);
  const std::string transposed_chain = sp::einsum_explain("ij,kj,kl->il", a, bt, c);
  CHECK_THAT(transposed_chain, Catch::Contains("factored into"));
  CHECK_THAT(transposed_chain, Catch::Contains("('kj' -> 'jk') transposed first"));
  CHECK_THAT(transposed_chain, Catch::Contains("whose pattern is assembled"));
  CHECK_THAT(sp::einsum_explain("i,ij,j,jk,kl->il", d1, a, d2, x, w), Catch::Contains("factored into"));
  CHECK_THAT(sp::einsum_explain("ij,ik,jk,jl->il", a, q, k, v), Catch::Contains("'ij,ik,jk->ij'"));
  sp::Options o = sp::Options::from_env();
  o.einsum_single = true;
  o.disk_cache = false;
  sp::runtime::Runtime single(o);
  CHECK_THAT(sp::einsum_explain(single, "i,ij,j,jk,kl->il", d1, a, d2, x, w), Catch::Contains("one statement"));
  auto s = sp::einsum(single, "i,ij,j,jk,kl->il", d1, a, d2, x, w).tensor();
  auto f = sp::einsum("i,ij,j,jk,kl->il", d1, a, d2, x, w).tensor();
  REQUIRE(s.shape() == f.shape());
  for (std::size_t p = 0; p < s.values().size(); ++p)
    CHECK(std::abs(static_cast<double>(s.values()[p]) - f.values()[p]) <= 1e-4 * (1 + std::abs(static_cast<double>(s.values()[p]))));
  // einsum_into through a path writes the caller's output.
  sp::Tensor<T> out = sp::Tensor<T>::full({70, 3}, nan_v<T>);
  sp::einsum_into("i,ij,j,jk,kl->il", out, d1, a, d2, x, w);
  CHECK(out == f);
}

namespace {
// The structural pattern of a result: the entries where some term of the definition has all
// its factors stored (random values in [-1, 1] are never 0, so a stored factor is nonzero).
template <class T, class Index>
void check_pattern(const sp::Csr<T, Index>& c, const std::vector<Ref>& ref, const std::string& what) {
  INFO(what);
  std::int64_t expected = 0, stored_off = 0;
  for (const auto& r : ref) expected += r.abs_sum > 0;
  for (std::int64_t i = 0; i < c.rows(); ++i)
    for (auto j : c.row_indices(i))
      stored_off += ref[static_cast<std::size_t>(i * c.cols() + static_cast<std::int64_t>(j))].abs_sum == 0;
  CHECK(c.nnz() == expected);  // no structural entry lost ...
  CHECK(stored_off == 0);      // ... and none made up
  bool increasing = true;  // rows in strictly increasing column order, as a Csr promises
  for (std::int64_t i = 0; i < c.rows(); ++i) {
    auto idx = c.row_indices(i);
    for (std::size_t q = 1; q < idx.size(); ++q) increasing = increasing && idx[q - 1] < idx[q];
  }
  CHECK(increasing);
}
}  // namespace

// Products of three or more CSR operands, whose single statement would give a dense result:
// einsum runs them as pairwise assembled steps and returns a Csr (EinsumPath::assembled_result).
TEMPLATE_TEST_CASE("einsum: a product of three or more CSR operands is assembled as a Csr",
                   "[correctness][einsum][path]", float, double) {
  using T = TestType;
  for (const auto& sh : matrix_shapes()) {
    INFO(sh);
    const auto a = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row, 91, sh.empty_row_fraction);
    const auto a2 = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row, 92, sh.empty_row_fraction);
    // The reference visits every combination of the subscripts: the extents after A's are
    // kept small (257 x 190 x 7 x 5 x 3 for four operands).
    const auto b = random_csr<T>(sh.cols, 7, 3, 93, 0.2);
    const auto c = random_csr<T>(7, 5, 2, 94, 0.3);
    const auto d = random_csr<T>(5, 3, 2, 95, 0.1);
    const auto bt = sp::transpose(b).matrix;  // 7 x sh.cols
    const auto bc = sp::Csc<T>::from_csr(b);
    auto check = [&](const std::string& spec, auto refs, auto actual) {
      INFO("einsum '" << spec << "'");
      const auto [r, ref] = check_einsum_against<T>(spec, refs, actual, spec);
      REQUIRE(r.is_sparse());
      check_pattern(r.csr(), ref, spec);
      // einsum_into a dense output: every element written, the same values.
      auto into = sp::Tensor<T>::full({r.csr().rows(), r.csr().cols()}, nan_v<T>);
      std::apply([&](const auto&... o) { sp::einsum_into(spec, into, o...); }, actual);
      CHECK(into == r.csr().to_dense());
      // A wrong output is reported before anything runs or is written.
      auto wrong = sp::Tensor<T>::full({r.csr().rows(), r.csr().cols() + 1}, nan_v<T>);
      CHECK_THROWS_AS(std::apply([&](const auto&... o) { sp::einsum_into(spec, wrong, o...); }, actual),
                      sp::ShapeError);
      CHECK(std::all_of(wrong.values().begin(), wrong.values().end(), [](T v) { return std::isnan(v); }));
      const std::string explained = std::apply([&](const auto&... o) { return sp::einsum_explain(spec, o...); }, actual);
      CHECK_THAT(explained, Catch::Contains("factored into") && Catch::Contains("# einsum output: Csr<"));
    };
    check("ij,jk,kl->il", std::tie(a, b, c), std::tie(a, b, c));          // A B C
    check("ij,kj,kl->il", std::tie(a, bt, c), std::tie(a, bt, c));        // A Bᵀ C, B stored transposed
    check("ij,jk,kl->il", std::tie(a, b, c), std::tie(a, bc, c));         // B by columns (a Csc)
    check("ij,ij,jk->ik", std::tie(a, a2, b), std::tie(a, a2, b));        // (A .* A2) B
    check("ij,jk,kl,lm->im", std::tie(a, b, c, d), std::tie(a, b, c, d)); // four operands
    check("ij,jk,kl->li", std::tie(a, b, c), std::tie(a, b, c));          // (A B C)ᵀ
  }
  // SPINDLE_EINSUM_PATH=single runs the one statement: a dense result with the same values.
  const auto a = random_csr<T>(40, 30, 4, 96, 0.2);
  const auto b = random_csr<T>(30, 35, 3, 97, 0.1);
  const auto c = random_csr<T>(35, 20, 3, 98, 0.1);
  sp::Options o = sp::Options::from_env();
  o.einsum_single = true;
  o.disk_cache = false;
  sp::runtime::Runtime single(o);
  auto s = sp::einsum(single, "ij,jk,kl->il", a, b, c);
  REQUIRE_FALSE(s.is_sparse());
  const auto f = sp::einsum("ij,jk,kl->il", a, b, c).to_dense();
  for (std::size_t p = 0; p < f.values().size(); ++p)
    CHECK(std::abs(static_cast<double>(s.tensor().values()[p]) - f.values()[p]) <=
          1e-4 * (1 + std::abs(static_cast<double>(f.values()[p]))));
}

// A Csc operand's subscripts are (row, column) as for any matrix, though it is stored by
// columns: einsum with it must equal the definition evaluated on the same matrix as a Csr.
TEMPLATE_TEST_CASE("einsum: CSC operands take their subscripts in (row, column) order and match the definition",
                   "[correctness][einsum][csc]", float, double) {
  using T = TestType;
  for (const auto& sh : matrix_shapes()) {
    INFO(sh);
    const auto a = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row, 81, sh.empty_row_fraction);
    const auto b = random_csr<T>(sh.rows, sh.cols, sh.avg_nnz_per_row, 82, sh.empty_row_fraction);
    const auto ac = sp::Csc<T>::from_csr(a), bc = sp::Csc<T>::from_csr(b);
    const auto x = sp::Tensor<T>::random({sh.cols, 5}, 83, -1, 1);
    const auto v = sp::Tensor<T>::random({sh.cols}, 84, -1, 1);
    const auto u = sp::Tensor<T>::random({sh.rows}, 85, -1, 1);
    // the reference runs the definition on the Csr forms; einsum gets the Csc ones
    auto check = [&](const std::string& spec, auto refs, auto actual) {
      INFO("einsum '" << spec << "'");
      check_einsum_against<T>(spec, refs, actual, spec + " with CSC");
    };
    check("ij,jk->ik", std::tie(a, x), std::tie(ac, x));  // CSC SpMM
    check("ij,j->i", std::tie(a, v), std::tie(ac, v));    // CSC SpMV
    check("ij,i->j", std::tie(a, u), std::tie(ac, u));    // Aᵀ u by columns
    check("ij->j", std::tie(a), std::tie(ac));            // column sums
    check("ij->i", std::tie(a), std::tie(ac));            // row sums
    check("ij->ji", std::tie(a), std::tie(ac));           // transpose
    check("ij,ij->ij", std::tie(a, b), std::tie(a, bc));  // CSR .* CSC (the CSC transposed back)
    check("ij,ij->", std::tie(a, b), std::tie(ac, bc));   // both CSC
    check("ij,kj->ik", std::tie(a, b), std::tie(ac, b));  // A Bᵀ with A by columns
    // Stored by columns, a CSC is a transposed CSR: a product or an element-wise product with
    // one transposes it back and assembles a Csr, like two Csr operands.
    const auto bt = random_csr<T>(sh.cols, 6, 2, 86, 0.3);
    check("ij,jk->ik", std::tie(a, bt), std::tie(ac, bt));  // CSC x CSR: SpGEMM
    REQUIRE(sp::einsum("ij,jk->ik", ac, bt).is_sparse());
    REQUIRE(sp::einsum("ij,ij->ij", a, bc).is_sparse());    // CSR .* CSC: an intersection
    REQUIRE(sp::einsum("ij->ij", ac).is_sparse());          // CSC -> CSR
  }
}
