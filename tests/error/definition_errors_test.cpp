// Errors in a kernel's definition that the types cannot catch: they are found when the
// kernel is lowered (on its first call or compile()). Each case checks the exception type,
// a stable message substring, that the output was not touched, and that a second call
// reports the same error (nothing half-compiled is cached).
#include <catch2/catch.hpp>

#include <optional>

#include "error/error_support.hpp"

namespace {

using namespace spindle_error_test;
namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};
struct Z : sp::dense_fixed {};

struct Inputs {
  sp::Csr<float> a = sp::Csr<float>::random(20, 30, 3, 931);
  sp::Tensor<float> x = sp::Tensor<float>::random({30}, 932);
  sp::Tensor<float> w = sp::Tensor<float>::random({5}, 933);
  sp::Tensor<float> y = sp::Tensor<float>::full({20}, sentinel<float>());
};

}  // namespace

TEST_CASE("an iterated axis that no argument binds is a UserError", "[error][definition][unbound]") {
  Inputs in;
  auto k = sp::kernel("unbound_z", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i, sp::iter<Z> z) {
    y(i) += x(i);
  });
  auto x = sp::Tensor<float>::random({20}, 934);
  const auto before = snapshot(in.y);
  for (int attempt = 0; attempt < 2; ++attempt)
    SPINDLE_EXPECT_ERROR(k(x, in.y), sp::UserError, "no argument gives the extent of axis Z");
  CHECK(snapshot(in.y) == before);
}

TEST_CASE("a sparse axis whose structure no argument carries is a UserError", "[error][definition][unbound]") {
  Inputs in;
  // J is iterated, but only its dense view appears in a buffer: nothing gives J's indptr.
  auto k = sp::kernel("no_structure", [](sp::in<float, sp::dense<J>> x, sp::out<float, I> y, sp::iter<I> i,
                                         sp::iter<J> j) { y(i) += x(j); });
  const auto before = snapshot(in.y);
  SPINDLE_EXPECT_ERROR(k(in.x, in.y), sp::UserError, "of axis J");
  SPINDLE_EXPECT_ERROR(k(in.x, in.y), sp::UserError, "no argument");
  CHECK(snapshot(in.y) == before);
}

TEST_CASE("an iterator of an unrelated axis used through a Value is a UserError", "[error][definition][unrelated]") {
  Inputs in;
  // The types allow it (a Value<int64> is an integer index); lowering finds that k ranges
  // over axis K, not over J's coordinate space.
  auto k = sp::kernel("unrelated", [](sp::in<float, I, J> a, sp::in<float, K> w, sp::out<float, I> y,
                                      sp::iter<I> i, sp::iter<K> kk) {
    sp::Value<std::int64_t> as_value = kk;
    y(i) += a(i, as_value) * w(kk);
  });
  const auto before = snapshot(in.y);
  for (int attempt = 0; attempt < 2; ++attempt)
    SPINDLE_EXPECT_ERROR(k(in.a, in.w, in.y), sp::UserError, "which ranges over a different coordinate space");
  CHECK(snapshot(in.y) == before);
}

TEST_CASE("a child axis iterated without its parent is a UserError", "[error][definition][parent]") {
  Inputs in;
  auto k = sp::kernel("orphan", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, sp::dense<J>> y,
                                   sp::iter<J> j) { y(j) = x(j); });
  auto y = sp::Tensor<float>::full({30}, sentinel<float>());
  const auto before = snapshot(y);
  SPINDLE_EXPECT_ERROR(k(in.a, in.x, y), sp::UserError, "iterates axis J without its parent I");
  CHECK(snapshot(y) == before);
  // The same in a nested for_each whose enclosing iteration is not over I
  auto k2 = sp::kernel("orphan_nested", [](sp::in<float, I, J> a, sp::out<float, K> y, sp::iter<K> kk) {
    sp::for_each<J>([&](sp::iter<J> j) { y(kk) += sp::Value<float>(1.0f); });
  });
  auto y2 = sp::Tensor<float>::full({5}, sentinel<float>());
  SPINDLE_EXPECT_ERROR(k2(in.a, y2), sp::UserError, "without its parent I");
  CHECK(snapshot(y2) == snapshot(sp::Tensor<float>::full({5}, sentinel<float>())));
}

TEST_CASE("an axis listed twice in one iteration is a UserError", "[error][definition][twice]") {
  Inputs in;
  auto k = sp::kernel("twice", [](sp::in<float, I> x, sp::out<float, I> y) {
    sp::for_each<I, I>([&](sp::iter<I> i, sp::iter<I>) { y(i) = x(i); });
  });
  auto x = sp::Tensor<float>::random({20}, 935);
  SPINDLE_EXPECT_ERROR(k(x, in.y), sp::UserError, "lists axis I twice");
  CHECK(snapshot(in.y) == snapshot(sp::Tensor<float>::full({20}, sentinel<float>())));
}

TEST_CASE("an `out` buffer that cannot be initialised (scatter) is a UserError with a hint", "[error][definition][init]") {
  Inputs in;
  // y(j) += ... over (i, j): j is spatial but its parent i is a reduction, so no init loop
  // over y exists; the hint says to use inout.
  auto k = sp::kernel("scatter_out", [](sp::in<float, I, J> a, sp::in<float, I> x, sp::out<float, sp::dense<J>> y,
                                        sp::iter<I> i, sp::iter<J> j) { y(j) += a(i, j) * x(i); });
  auto x = sp::Tensor<float>::random({20}, 936);
  auto y = sp::Tensor<float>::full({30}, sentinel<float>());
  const auto before = snapshot(y);
  SPINDLE_EXPECT_ERROR(k(in.a, x, y), sp::UserError, "cannot initialise the output");
  SPINDLE_EXPECT_ERROR(k(in.a, x, y), sp::UserError, "declare the output inout");
  CHECK(snapshot(y) == before);
}

TEST_CASE("a DSL object used outside a kernel body is a UserError", "[error][definition][outside]") {
  SPINDLE_EXPECT_ERROR(sp::local<float>(0.0f), sp::UserError, "outside a kernel body");
  SPINDLE_EXPECT_ERROR(sp::for_each<I>([](sp::iter<I>) {}), sp::UserError, "outside a kernel body");
}

TEST_CASE("an iterator kept past the end of its iteration is a UserError", "[error][definition][escaped]") {
  Inputs in;
  // `saved` outlives the for_each that defined it; using it afterwards names no loop.
  auto k = sp::kernel("escaped", [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i) {
    std::optional<sp::iter<J>> saved;
    sp::for_each<J>([&](sp::iter<J> j) {
      saved.emplace(j);
      y(i) += a(i, j);
    });
    y(i) += a(i, *saved);
  });
  const auto before = snapshot(in.y);
  SPINDLE_EXPECT_ERROR(k(in.a, in.y), sp::UserError, "'j' is used outside the iteration that defines it");
  CHECK(snapshot(in.y) == before);
}

TEST_CASE("a failed kernel definition leaves other kernels working", "[error][definition][recovery]") {
  Inputs in;
  auto bad = sp::kernel("unbound_again", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i,
                                            sp::iter<Z>) { y(i) += x(i); });
  auto x = sp::Tensor<float>::random({20}, 937);
  SPINDLE_EXPECT_ERROR(bad(x, in.y), sp::UserError, "axis Z");
  auto good = sp::kernel("copy", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i) { y(i) = x(i); });
  good(x, in.y);
  CHECK(snapshot(in.y) == snapshot(x));
}
