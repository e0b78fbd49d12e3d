// The GNN matrix IR: sizes, equivalent forms, association trees (primitive rules, the
// D·A·D sparse_scale, CSE, available values), pruning (dominance, duplicates, scenario
// annotations) and the candidate counts of every layer (the seed reports 12 / 8 pruned for
// GCN, 2 / 0 for GAT, 8 / 4 for GIN).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>

#include "spindle/gnn.hpp"

namespace gnn = spindle::gnn;

namespace {

std::set<std::string> texts(const std::vector<gnn::RankedComposition>& v) {
  std::set<std::string> r;
  for (const auto& c : v) r.insert(c.composition.text);
  return r;
}

std::size_t count_prim(const gnn::Composition& c, gnn::Primitive p) {
  std::size_t n = 0;
  for (const auto& [q, size] : c.primitives()) n += q == p ? 1 : 0;
  return n;
}

const gnn::Composition& by_text(const std::vector<gnn::Composition>& all, const std::string& t) {
  for (const auto& c : all)
    if (c.text == t) return c;
  FAIL("no composition " << t);
  return all.front();
}

}  // namespace

TEST_CASE("gnn sizes: polynomial arithmetic, canonical text, evaluation", "[gnn]") {
  using gnn::Size;
  const Size n = Size::symbol("N"), k = Size::symbol("K"), e = Size::symbol("E");
  CHECK((n * k).str() == "K*N");
  CHECK((n * k + k * n).str() == "2*K*N");
  CHECK((e + n).str() == "E + N");
  CHECK((3 * (e + n)).str() == "3*E + 3*N");
  CHECK((n + Size::constant(-1) * n).is_zero());
  CHECK((e * k + n).eval({{"E", 10}, {"K", 4}, {"N", 7}}) == 47);
  CHECK_THROWS_AS((e * k).eval({{"E", 10}}), spindle::ShapeError);
  CHECK_THROWS_WITH((e * k).eval({{"E", 10}}), Catch::Contains("'K' is not bound"));
}

TEST_CASE("gnn matrix IR: shapes chain, products and sums flatten, errors name the operand", "[gnn]") {
  auto A = gnn::sparse("A", "N", "N");
  auto D = gnn::diagonal("D", "N");
  auto H = gnn::dense("H", "N", "K_in");
  auto W = gnn::weight("W", "K_in", "K_out");
  auto e = D * A * (D * H) * W;
  CHECK(e->op == gnn::ExprNode::Op::product);
  CHECK(e->children.size() == 5);
  CHECK(e->key == "(D·A·D·H·W)");
  CHECK(e->info.rows == "N");
  CHECK(e->info.cols == "K_out");
  // Sums are commutative: the key sorts the terms.
  CHECK((H * W + A * H * W)->key == (A * H * W + H * W)->key);
  CHECK_THROWS_WITH(H * A, Catch::Contains("factor H has K_in columns but A has N rows"));
  CHECK_THROWS_WITH(H + A * H * W, Catch::Contains("adds"));
  CHECK_THROWS_AS(gnn::leaf("X", gnn::MatrixKind::diagonal, "N", "M"), spindle::ShapeError);
}

TEST_CASE("gnn rewrites: distribution and factoring reach every equivalent form", "[gnn]") {
  const auto gin = gnn::layers::gin().expr;
  std::set<std::string> keys;
  for (const auto& f : gnn::equivalent_forms(gin)) keys.insert(f->key);
  CHECK(keys == std::set<std::string>{"(((A·H) + (S·H))·W)", "((A·H·W) + (S·H·W))", "((A + S)·H·W)"});
  // A product without sums has one form.
  CHECK(gnn::equivalent_forms(gnn::layers::gcn().expr).size() == 1);
  // TAGCN: common prefixes factor (Horner-like forms).
  CHECK(gnn::equivalent_forms(gnn::layers::tagcn().expr).size() == 4);
}

TEST_CASE("gnn association trees: primitive rules", "[gnn]") {
  auto A = gnn::sparse("A", "N", "N");
  auto B = gnn::sparse("B", "N", "N", true);
  auto D = gnn::diagonal("D", "N");
  auto H = gnn::dense("H", "N", "K");
  SECTION("sparse · sparse is not formed: A·B·H only as A·(B·H)") {
    auto all = gnn::enumerate_compositions(A * B * H);
    REQUIRE(all.size() == 1);
    CHECK(all[0].text == "(A·(B·H))");
    CHECK(count_prim(all[0], gnn::Primitive::spmm_weighted) == 1);
    CHECK(count_prim(all[0], gnn::Primitive::spmm_unweighted) == 1);
  }
  SECTION("an expression with no composition is an error") {
    CHECK_THROWS_WITH(gnn::enumerate_compositions(A * B), Catch::Contains("no composition"));
  }
  SECTION("D·A·D is one sparse_scale, D·A and A·D are sparse_scale too") {
    auto all = gnn::enumerate_compositions(D * A * D);
    REQUIRE(all.size() == 1);
    CHECK(all[0].text == "[D·A·D]");
    const auto& last = all[0].steps.at(static_cast<std::size_t>(all[0].result));
    CHECK(last.value->info.kind == gnn::MatrixKind::sparse_weighted);
    CHECK(last.cost.str() == "E");
    auto two = gnn::enumerate_compositions(D * A * H);
    CHECK(two.size() == 2);  // (D·A)·H and D·(A·H)
    CHECK(count_prim(by_text(two, "((D·A)·H)"), gnn::Primitive::sparse_scale) == 1);
    CHECK(count_prim(by_text(two, "(D·(A·H))"), gnn::Primitive::row_broadcast) == 1);
  }
  SECTION("costs: SpMM E*K, GEMM N*K*M, row broadcast N*K") {
    auto W = gnn::weight("W", "K", "M");
    auto all = gnn::enumerate_compositions(A * H * W);
    const auto& c = by_text(all, "((A·H)·W)");
    auto p = c.primitives();
    REQUIRE(p.size() == 2);
    CHECK(p[0].first == gnn::Primitive::spmm_unweighted);
    CHECK(p[0].second.str() == "E*K");
    CHECK(p[1].first == gnn::Primitive::gemm);
    CHECK(p[1].second.str() == "K*M*N");
  }
}

TEST_CASE("gnn compositions: common sub-expressions are computed once, available values cost nothing", "[gnn]") {
  SECTION("SGC: the second D·A·D reuses the first") {
    auto all = gnn::enumerate_compositions(gnn::layers::sgc(2).expr);
    const auto& c = by_text(all, "([D·A·D]·([D·A·D]·(H·W)))");
    CHECK(count_prim(c, gnn::Primitive::sparse_scale) == 1);
    CHECK(count_prim(c, gnn::Primitive::spmm_weighted) == 2);
  }
  SECTION("GIN distributed: H·W is shared by both terms") {
    auto all = gnn::enumerate_compositions(gnn::layers::gin().expr);
    const auto& c = by_text(all, "((A·(H·W)) + (S·(H·W)))");
    CHECK(count_prim(c, gnn::Primitive::gemm) == 1);
  }
  SECTION("GAT: Θ = H·W is held from the attention stage") {
    const auto layer = gnn::layers::gat();
    auto all = gnn::enumerate_compositions(layer.expr, layer.available);
    const auto& reuse = by_text(all, "(alpha·(H·W))");
    CHECK(count_prim(reuse, gnn::Primitive::gemm) == 0);
    CHECK(std::any_of(reuse.steps.begin(), reuse.steps.end(), [](const gnn::Step& s) { return s.reused; }));
    CHECK(count_prim(by_text(all, "((alpha·H)·W)"), gnn::Primitive::gemm) == 1);
  }
}

TEST_CASE("gnn pruning: dominance per scenario, duplicates, annotations", "[gnn]") {
  auto A = gnn::sparse("A", "N", "N");
  auto H = gnn::dense("H", "N", "K_in");
  auto W = gnn::weight("W", "K_in", "K_out");
  auto ranked = gnn::prune(gnn::enumerate_compositions(A * H * W));
  REQUIRE(ranked.size() == 2);
  for (const auto& r : ranked) {
    CHECK(r.promoted);
    REQUIRE(r.profitable_in.size() == 1);
    // Aggregate first wins when the input is narrower, multiply first when it is wider.
    CHECK(r.profitable_in[0] == (r.composition.text == "((A·H)·W)" ? "K_in < K_out" : "K_in > K_out"));
  }
  // Two identical compositions: the later one is the duplicate.
  auto all = gnn::enumerate_compositions(A * H * W);
  auto twice = gnn::prune({all[0], all[0]});
  CHECK(twice[0].promoted);
  CHECK_FALSE(twice[1].promoted);
}

TEST_CASE("gnn layers: candidate counts, the GCN survivors, defaults among the candidates", "[gnn]") {
  struct Expect {
    std::string name;
    std::size_t total, pruned;
  };
  // GCN and GAT match the seed (12 / 8, 2 / 0). GIN: 7 / 3 here against the seed's 8 / 4
  // (its appendix with the GIN rules is not in the seed text; ours has the three forms of
  // rewrite.hpp). SGC, TAGCN (2 hops), SAGE-mean and RGCN (2 relations) have no seed count.
  const std::vector<Expect> expect = {{"GCN", 12, 8},        {"GIN", 7, 3},    {"GAT", 2, 0},
                                      {"SGC", 192, 182},     {"TAGCN", 2895, 2858},
                                      {"SAGE-mean", 5, 1},   {"RGCN", 25, 19}};
  const auto layers = gnn::layers::all();
  REQUIRE(layers.size() == expect.size());
  for (std::size_t i = 0; i < layers.size(); ++i) {
    INFO(layers[i].name);
    const auto c = gnn::candidates(layers[i]);
    CHECK(layers[i].name == expect[i].name);
    CHECK(c.total() == expect[i].total);
    CHECK(c.pruned() == expect[i].pruned);
    // The framework default is a candidate (the bar compares the selection with it).
    CHECK(c.find(layers[i].default_wide_in) >= 0);
    CHECK(c.find(layers[i].default_narrow_in) >= 0);
    CHECK(c.find(layers[i].default_fixed) >= 0);
    // Every promoted composition is profitable in at least one scenario.
    for (const auto& r : c.promoted()) CHECK(!r.profitable_in.empty());
  }
  const auto gcn = gnn::candidates(gnn::layers::gcn());
  CHECK(texts(gcn.promoted()) == std::set<std::string>{"(D·(A·(D·(H·W))))", "([D·A·D]·(H·W))",
                                                        "((D·(A·(D·H)))·W)", "(([D·A·D]·H)·W)"});
}
