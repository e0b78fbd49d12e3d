// The operators of ops.hpp on the real graphs of SPINDLE_TEST_DATA_DIR (random values on
// each graph's pattern), and one compiled kernel serving several graphs: shapes are
// symbolic, so cora and pubmed run through the same machine code.
//
// Without the data folder these tests warn and skip, or FAIL when the environment variable
// CI is set (see correctness_support.hpp).
#include <catch2/catch.hpp>

#include <limits>

#include "correctness/correctness_support.hpp"

namespace {

using namespace spindle_test;
namespace sp = spindle;

constexpr float nan_f = std::numeric_limits<float>::quiet_NaN();

}  // namespace

TEST_CASE("every CSR operator on the real graphs", "[correctness][graph]") {
  const std::string file = GENERATE(from_range(graph_files()));
  INFO(file);
  const auto g = load_graph<float>(file);
  if (!g) return;
  const sp::Csr<float>& a = *g;
  REQUIRE(a.rows() == a.cols());

  SECTION("spmv") {
    const auto x = sp::Tensor<float>::random({a.cols()}, 501, -1, 1);
    auto y = sp::Tensor<float>::full({a.rows()}, nan_f);
    sp::ops::spmv<float>()(a, x, y);
    check_close<float>(ref_spmv(a, x.values()), y.values(), "spmv " + file);
  }
  SECTION("spmv with int64 indices") {
    const auto a64 = with_index<std::int64_t>(a);
    const auto x = sp::Tensor<float>::random({a.cols()}, 502, -1, 1);
    auto y = sp::Tensor<float>::full({a.rows()}, nan_f);
    sp::ops::spmv<float, sp::ops::J64>()(a64, x, y);
    check_close<float>(ref_spmv(a, x.values()), y.values(), "spmv i64 " + file);
  }
  SECTION("spmm, K = 33") {
    const auto b = sp::Tensor<float>::random({a.cols(), 33}, 503, -1, 1);
    auto c = sp::Tensor<float>::full({a.rows(), 33}, nan_f);
    sp::ops::spmm<float>()(a, b, c);
    check_close<float>(ref_spmm(a, b.values(), 33), c.values(), "spmm " + file);
  }
  SECTION("sddmm, K = 16") {
    const auto x = sp::Tensor<float>::random({a.rows(), 16}, 504, -1, 1);
    const auto y = sp::Tensor<float>::random({a.cols(), 16}, 505, -1, 1);
    auto c = same_structure(a, nan_f);
    sp::ops::sddmm<float>()(a, x, y, c);
    check_close<float>(ref_sddmm(a, x.values(), y.values(), 16), c.values(), "sddmm " + file, 2);
  }
  SECTION("row_sum") {
    auto y = sp::Tensor<float>::full({a.rows()}, nan_f);
    sp::ops::row_sum<float>()(a, y);
    check_close<float>(ref_row_sum(a), y.values(), "row_sum " + file);
  }
  SECTION("scale") {
    const auto r = sp::Tensor<float>::random({a.rows()}, 506, 0.5, 2);
    const auto s = sp::Tensor<float>::random({a.cols()}, 507, 0.5, 2);
    auto b = same_structure(a, nan_f);
    sp::ops::scale<float>()(a, r, s, 0.75f, b);
    std::vector<double> ref(static_cast<std::size_t>(a.nnz()));
    for (std::int64_t i = 0; i < a.rows(); ++i)
      for (auto q = a.indptr()[i]; q < a.indptr()[i + 1]; ++q)
        ref[static_cast<std::size_t>(q)] = 0.75 * r.values()[i] * a.values()[q] * s.values()[a.indices()[q]];
    check_elementwise<float>(uniform_ops(ref, 3), b.values(), "scale " + file);
  }
  SECTION("softmax") {
    auto b = same_structure(a, nan_f);
    sp::ops::softmax<float>()(a, b);
    check_elementwise<float>(ref_softmax(a), b.values(), "softmax " + file);
  }
}

TEST_CASE("spmm_dense_j (binary search over every column) on the small graphs", "[correctness][graph][spmm_dense_j]") {
  // Iterates rows x cols, so only the two small citation graphs.
  const std::string file = GENERATE(as<std::string>{}, "gnn/cora.mtx.gz", "gnn/citeseer.mtx.gz");
  INFO(file);
  const auto g = load_graph<double>(file);
  if (!g) return;
  const auto b = sp::Tensor<double>::random({g->cols(), 7}, 511, -1, 1);
  auto c = sp::Tensor<double>::full({g->rows(), 7}, std::numeric_limits<double>::quiet_NaN());
  sp::ops::spmm_dense_j<double>()(*g, b, c);
  check_close<double>(ref_spmm(*g, b.values(), 7), c.values(), "spmm_dense_j " + file);
}

TEST_CASE("spmm and spmv on ogbn-arxiv (1.2M edges, 17k empty rows)", "[correctness][graph][large]") {
  const auto g = load_graph<float>("gnn/ogbn-arxiv.mtx.gz");
  if (!g) return;
  REQUIRE(g->rows() == 169343);
  REQUIRE(g->nnz() == 1166243);
  const auto x = sp::Tensor<float>::random({g->cols()}, 521, -1, 1);
  auto y = sp::Tensor<float>::full({g->rows()}, nan_f);
  sp::ops::spmv<float>()(*g, x, y);
  check_close<float>(ref_spmv(*g, x.values()), y.values(), "spmv arxiv");
  const auto b = sp::Tensor<float>::random({g->cols(), 32}, 522, -1, 1);
  auto c = sp::Tensor<float>::full({g->rows(), 32}, nan_f);
  sp::ops::spmm<float>()(*g, b, c);
  check_close<float>(ref_spmm(*g, b.values(), 32), c.values(), "spmm arxiv");
}

TEST_CASE("one compiled kernel serves different graphs and feature sizes (symbolic shapes)",
          "[correctness][graph][symbolic]") {
  const auto cora = load_graph<float>("gnn/cora.mtx.gz", 531);
  const auto pubmed = load_graph<float>("gnn/pubmed.mtx.gz", 532);
  if (!cora || !pubmed) return;
  sp::Options options = sp::Options::from_env();
  options.disk_cache = false;  // a private runtime: every compile is counted
  sp::runtime::Runtime rt(options);
  const auto spmm = sp::ops::spmm<float>().with_runtime(rt);

  const auto b1 = sp::Tensor<float>::random({cora->cols(), 16}, 533, -1, 1);
  auto c1 = sp::Tensor<float>::full({cora->rows(), 16}, nan_f);
  spmm(*cora, b1, c1);
  check_close<float>(ref_spmm(*cora, b1.values(), 16), c1.values(), "cora");
  const auto* compiled = &spmm.compile();

  const auto b2 = sp::Tensor<float>::random({pubmed->cols(), 7}, 534, -1, 1);
  auto c2 = sp::Tensor<float>::full({pubmed->rows(), 7}, nan_f);
  spmm(*pubmed, b2, c2);
  check_close<float>(ref_spmm(*pubmed, b2.values(), 7), c2.values(), "pubmed");

  auto c3 = sp::Tensor<float>::full({cora->rows(), 16}, nan_f);
  spmm(*cora, b1, c3);  // back to cora: same answer
  CHECK(to_vector<float>(c3.values()) == to_vector<float>(c1.values()));

  CHECK(&spmm.compile() == compiled);
  CHECK(spmm.compile().stats().source == sp::runtime::CodeSource::compiled);
  CHECK(rt.cache().stats().compiles == 1);

  // A second kernel object with the same definition reuses the machine code.
  const auto again = sp::ops::spmm<float>().with_runtime(rt);
  auto c4 = sp::Tensor<float>::full({cora->rows(), 16}, nan_f);
  again(*cora, b1, c4);
  CHECK(to_vector<float>(c4.values()) == to_vector<float>(c1.values()));
  CHECK(again.compile().stats().source == sp::runtime::CodeSource::memory_cache);
  CHECK(rt.cache().stats().compiles == 1);
}
