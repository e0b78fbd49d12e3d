// The typed front end: axis types, names, buffers, iterator kinds and init inference.
#include <catch2/catch.hpp>

#include "unit/pass_test_util.hpp"

using namespace pass_test;

namespace {
struct Named : sp::dense_fixed {
  static constexpr const char* axis_name = "rows";
};
}  // namespace

TEST_CASE("frontend: axis types carry kind, parent and name", "[frontend]") {
  STATIC_REQUIRE(sp::is_axis_v<J>);
  STATIC_REQUIRE(std::is_same_v<sp::parent_axis_t<J>, I>);
  STATIC_REQUIRE(std::is_same_v<sp::coord_space_t<sp::dense<J>>, J>);
  STATIC_REQUIRE(sp::same_coord_space_v<sp::dense<J>, J>);
  STATIC_REQUIRE(!sp::same_coord_space_v<K, J>);
  STATIC_REQUIRE(sp::is_ancestor_or_self<L, I>());
  CHECK(sp::axis_name<J>() == "J");
  CHECK(sp::axis_name<sp::dense<J>>() == "J_dense");
  CHECK(sp::axis_name<Named>() == "rows");
}

TEST_CASE("frontend: stage-I SpMM as in the SparseTIR paper", "[frontend]") {
  auto f = sp::define_kernel("spmm", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>, K> b, sp::out<float, I, K> c,
                                        sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
  CHECK(sp::ir::to_string(f) == R"(# stage I (coordinate space)
func spmm(a: in f32[I, J], b: in f32[J_dense, K], c: out f32[I, K])
  scalars: I_len J_len J_nnz K_len
  axis I = dense_fixed(length=I_len)
  axis J = sparse_variable(parent=I, length=J_len, nnz=J_nnz, i32)
  axis J_dense = dense_fixed(length=J_len, dense view of J)
  axis K = dense_fixed(length=K_len)
  sp_iter spmm([I, J, K], "SRS") as [i, j, k]:
    init:
      c[i, k] = 0.0f
    c[i, k] += a[i, j] * b[j, k]
)");
  CHECK(f.loc.file != nullptr);
  CHECK(f.loc.line > 0);
}

TEST_CASE("frontend: iterator kinds follow the writes", "[frontend]") {
  // y(j) with j over J's coordinates: i does not index the write -> reduction.
  auto t = sp::define_kernel("spmv_t", [](sp::in<float, I, J> a, sp::in<float, I> x, sp::inout<float, sp::dense<J>> y,
                                          sp::iter<I> i, sp::iter<J> j) { y(j) += a(i, j) * x(i); });
  auto* it = t.body.as<sp::ir::SparseIterationNode>();
  REQUIRE(it);
  CHECK(it->kinds == std::vector<sp::ir::IterKind>{sp::ir::IterKind::reduction, sp::ir::IterKind::spatial});
  CHECK_FALSE(it->init.defined());  // inout: accumulate into the caller's values
}

TEST_CASE("frontend: init only for the first reduction into an out buffer", "[frontend]") {
  auto f = sp::define_kernel("twice", [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { y(i) += a(i, j); });
    sp::for_each<J>([&](sp::iter<J> j) { y(i) += a(i, j) * a(i, j); });
  });
  std::string text = sp::ir::to_string(f);
  std::size_t first = text.find("init:");
  REQUIRE(first != std::string::npos);
  CHECK(text.find("init:", first + 1) == std::string::npos);
  // A plain store first means the buffer is written: the reduction gets no init.
  auto g = sp::define_kernel("store_then_add", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i) {
    y(i) = x(i);
    y(i) += x(i);
  });
  INFO(sp::ir::to_string(g));
  CHECK(sp::ir::to_string(g).find("init:") == std::string::npos);
}

TEST_CASE("frontend: parameters are named a, b, c..., iterators avoid those names", "[frontend]") {
  auto f = sp::define_kernel("names", [](sp::in<float, Bt, K> a, sp::param<float> s, sp::out<float, Bt, K> o,
                                         sp::iter<Bt> b, sp::iter<K> k) { o(b, k) = a(b, k) * s; });
  auto text = sp::ir::to_string(f);
  CHECK(text.find("func names(a: in f32[Bt, K], c: out f32[Bt, K])") != std::string::npos);
  CHECK(text.find("scalars: Bt_len K_len b") != std::string::npos);
  CHECK(text.find("as [bt, k]") != std::string::npos);
}

TEST_CASE("frontend: using the DSL outside a kernel body is a UserError", "[frontend][error]") {
  CHECK_THROWS_AS(sp::for_each<I>([](sp::iter<I>) {}), sp::UserError);
  CHECK_THROWS_WITH(sp::local<float>(1.0f), Catch::Contains("outside a kernel body"));
}
