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
  // Found when the kernel is defined (issue 8: no valid-looking kernel fails later).
  SPINDLE_EXPECT_ERROR(sp::kernel("orphan", [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x,
                                               sp::out<float, sp::dense<J>> y, sp::iter<J> j) { y(j) = x(j); }),
                       sp::UserError, "iterates axis J without its parent I");
  // The same in a nested for_each whose enclosing iteration is not over I
  SPINDLE_EXPECT_ERROR(sp::kernel("orphan_nested", [](sp::in<float, I, J> a, sp::out<float, K> y, sp::iter<K> kk) {
                         sp::for_each<J>([&](sp::iter<J> j) { y(kk) += sp::Value<float>(1.0f); });
                       }),
                       sp::UserError, "without its parent I");
}

TEST_CASE("an axis listed twice in one iteration is a UserError", "[error][definition][twice]") {
  SPINDLE_EXPECT_ERROR(sp::kernel("twice", [](sp::in<float, I> x, sp::out<float, I> y) {
                         sp::for_each<I, I>([&](sp::iter<I> i, sp::iter<I>) { y(i) = x(i); });
                       }),
                       sp::UserError, "lists axis I twice");
}

// Issue 8 §1: each of these programs used to compile and give a wrong result (or an
// InternalError); the language now rejects them when the kernel is defined.
TEST_CASE("§1.2 `=` into an output inside a loop its iterator does not index is rejected at definition",
          "[error][definition][rules]") {
  auto define = [] {
    return sp::kernel("last_write", [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i, sp::iter<J> j) {
      y(i) = a(i, j);
    });
  };
  SPINDLE_EXPECT_ERROR(define(), sp::UserError, "last write wins");
  SPINDLE_EXPECT_ERROR(define(), sp::UserError, "iterator 'j' does not index the write");
  // The same inside a nested for_each.
  SPINDLE_EXPECT_ERROR(sp::kernel("last_write_nested",
                                  [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i) {
                                    sp::for_each<J>([&](sp::iter<J> j) { y(i) = a(i, j); });
                                  }),
                       sp::UserError, "last write wins");
}

TEST_CASE("§1.4 a write outside a sparse output's pattern is rejected at definition", "[error][definition][rules]") {
  // A + B into A's pattern: the dense<J> iterator visits coordinates A does not store.
  SPINDLE_EXPECT_ERROR(sp::kernel("add_into_pattern",
                                  [](sp::in<float, I, sp::dense<J>> b, sp::out<float, I, J> c, sp::iter<I> i,
                                     sp::iter<sp::dense<J>> jd) { c(i, jd) = b(i, jd); }),
                       sp::UserError, "sparsity pattern");
}

TEST_CASE("§1.8 a computed index on a written buffer is accepted only where its bounds can be proved, other "
          "indices are a UserError, not an InternalError",
          "[error][definition][rules][computed]") {
  // Accepted (docs/language.md §4.1): the lower bound is proved here, the upper at call time.
  CHECK_NOTHROW(sp::kernel("affine_out", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i) { y(i + 0) += x(i); }));
  CHECK_NOTHROW(sp::kernel("constant_out", [](sp::in<float, I> x, sp::out<float, K> y, sp::iter<I> i) { y(0) += x(i); }));
  CHECK_NOTHROW(sp::kernel("pooled", [](sp::in<float, I> x, sp::out<float, K> y, sp::iter<I> i) {
    y(sp::max(i - 1, std::int64_t{0}) / 2 + i % 3) += x(i);
  }));
  SPINDLE_EXPECT_ERROR(sp::kernel("computed_from_index",
                                  [](sp::in<float, I> x, sp::in<std::int32_t, I> perm, sp::inout<float, I> y,
                                     sp::iter<I> i) { y(sp::cast<std::int64_t>(perm(i)) + 1) += x(i); }),
                       sp::UserError, "could fall outside");
  SPINDLE_EXPECT_ERROR(sp::kernel("negative", [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i) {
                         y(i - 1) += x(i);
                       }),
                       sp::UserError, "could not prove the index >= 0");
  SPINDLE_EXPECT_ERROR(sp::kernel("assigned", [](sp::in<float, I> x, sp::out<float, K> y, sp::iter<I> i) {
                         y(i * 2) = x(i);
                       }),
                       sp::UserError, "last write wins");
  SPINDLE_EXPECT_ERROR(sp::kernel("by_variable", [](sp::in<float, I> x, sp::in<float, K> z, sp::out<float, K> y,
                                                     sp::iter<I> i, sp::iter<K> k) { y(i / (k + 1)) += x(i) * z(k); }),
                       sp::UserError, "which is not an iterator");
  SPINDLE_EXPECT_ERROR(sp::kernel("reads_back", [](sp::in<float, I> x, sp::out<float, K> y, sp::iter<I> i) {
                         y(i / 2) += x(i) * y(i / 2);
                       }),
                       sp::UserError, "a computed index");
  // Compile-time extents: the whole proof happens at definition.
  struct I4 : sp::dense_fixed_n<4> {};
  struct T3 : sp::dense_fixed_n<3> {};
  CHECK_NOTHROW(sp::kernel("fits", [](sp::in<float, I4> x, sp::out<float, T3> y, sp::iter<I4> i) { y(i / 2) += x(i); }));
  // A runtime extent among the iterators leaves the upper bound to the call.
  CHECK_NOTHROW(sp::kernel("deferred", [](sp::in<float, I> x, sp::out<float, T3> y, sp::iter<I> i) { y(i / 2) += x(i); }));
  CHECK_NOTHROW(sp::kernel("clamped", [](sp::in<float, I> x, sp::out<float, T3> y, sp::iter<I> i) {
    y(sp::min(sp::Value<std::int64_t>(i), sp::Value<std::int64_t>(std::int64_t{2}))) += x(i);
  }));
  SPINDLE_EXPECT_ERROR(sp::kernel("too_far", [](sp::in<float, I4> x, sp::out<float, T3> y, sp::iter<I4> i) {
                         y(i - i / 2) += x(i);
                       }),
                       sp::UserError, "could not prove the index >= 0");
  SPINDLE_EXPECT_ERROR(sp::kernel("too_long", [](sp::in<float, I4> x, sp::out<float, T3> y, sp::iter<I4> i) {
                         y(i + 1) += x(i);
                       }),
                       sp::UserError, "could not prove the index < 3");
  // A dense_variable iterator has no extent to check against.
  struct V : sp::dense_variable<I> {};
  SPINDLE_EXPECT_ERROR(sp::kernel("ragged", [](sp::in<float, I, V> x, sp::out<float, K> y, sp::iter<I> i,
                                               sp::iter<V> v) { y(v + 0) += x(i, v); }),
                       sp::UserError, "dense_variable");
}

TEST_CASE("§4.1 indirect writes: only reductions by values of an integer `in` buffer read at stored elements, into "
          "root axes, not read back in the same iteration",
          "[error][definition][rules][indirect]") {
  // Accepted: a scatter-add (the correctness tests run it).
  CHECK_NOTHROW(sp::kernel("scatter_ok", [](sp::in<float, I> x, sp::in<std::int32_t, I> perm, sp::out<float, K> y,
                                            sp::iter<I> i) { y(perm(i)) += x(i); }));
  SPINDLE_EXPECT_ERROR(sp::kernel("scatter_assign", [](sp::in<float, I> x, sp::in<std::int32_t, I> perm,
                                                       sp::out<float, K> y, sp::iter<I> i) { y(perm(i)) = x(i); }),
                       sp::UserError, "last write wins");
  SPINDLE_EXPECT_ERROR(sp::kernel("narrowing_index",
                                  [](sp::in<float, I> x, sp::in<std::int64_t, I> perm, sp::out<float, K> y,
                                     sp::iter<I> i) { y(sp::cast<std::int32_t>(perm(i))) += x(i); }),
                       sp::UserError, "casts other than to int64_t");
  SPINDLE_EXPECT_ERROR(sp::kernel("index_from_output",
                                  [](sp::in<float, I> x, sp::out<std::int32_t, I> perm, sp::out<float, K> y,
                                     sp::iter<I> i) {
                                    perm(i) = 0;
                                    y(sp::cast<std::int64_t>(perm(i))) += x(i);
                                  }),
                       sp::UserError, "integer `in` buffer");
  SPINDLE_EXPECT_ERROR(sp::kernel("index_read_off_pattern",
                                  [](sp::in<float, I> x, sp::in<std::int32_t, I> perm, sp::out<float, K> y,
                                     sp::iter<I> i) { y(perm(i + 1)) += x(i); }),
                       sp::UserError, "must be read at its stored elements");
  // A value index into a sparse slot (c(i, col(i, j))) does not compile (buffer.hpp's static_assert):
  // only root axes take indirect indices.
  SPINDLE_EXPECT_ERROR(sp::kernel("scatter_reads_back",
                                  [](sp::in<float, I> x, sp::in<std::int32_t, I> perm, sp::out<float, K> y,
                                     sp::iter<I> i) { y(perm(i)) += x(i) * y(perm(i)); }),
                       sp::UserError, "indirect index");
  SPINDLE_EXPECT_ERROR(sp::kernel("scatter_two_ops",
                                  [](sp::in<float, I> x, sp::in<std::int32_t, I> perm, sp::inout<float, K> y,
                                     sp::iter<I> i) {
                                    y(perm(i)) += x(i);
                                    y(perm(i)).max_with(x(i));
                                  }),
                       sp::UserError, "depend on the order");
}

TEST_CASE("an out buffer reduced with two different operators is a UserError", "[error][definition][rules]") {
  SPINDLE_EXPECT_ERROR(sp::kernel("mixed_ops",
                                  [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i) {
                                    sp::for_each<J>([&](sp::iter<J> j) { y(i).max_with(a(i, j)); });
                                    sp::for_each<J>([&](sp::iter<J> j) { y(i) += a(i, j); });
                                  }),
                       sp::UserError, "ambiguous");
}

TEST_CASE("iterating an axis inside an iteration that already iterates it is a UserError",
          "[error][definition][rules]") {
  SPINDLE_EXPECT_ERROR(sp::kernel("reiterate",
                                  [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i) {
                                    sp::for_each<I>([&](sp::iter<I> i2) { y(i2) += a(i, 0) ; });
                                  }),
                       sp::UserError, "already iterates it");
}

TEST_CASE("reading a buffer at another element than the iteration writes is a UserError",
          "[error][definition][rules]") {
  SPINDLE_EXPECT_ERROR(sp::kernel("order_dependent", [](sp::in<float, I> x, sp::inout<float, I> y,
                                                        sp::iter<I> i) { y(i) += y(i + 1) * x(i); }),
                       sp::UserError, "depend on the order");
}

TEST_CASE("reading, inside a row, a buffer that every row accumulates into is a UserError",
          "[error][definition][rules]") {
  // c(j) sums column j over all rows; reading it while row i runs sees only rows before i
  // (in whatever order they run).
  SPINDLE_EXPECT_ERROR(sp::kernel("partial_column_sums",
                                  [](sp::in<float, I, J> a, sp::out<float, sp::dense<J>> c, sp::out<float, I> z,
                                     sp::iter<I> i) {
                                    sp::for_each<J>([&](sp::iter<J> j) { c(j) += a(i, j); });
                                    sp::for_each<J>([&](sp::iter<J> j2) { z(i) += c(j2); });
                                  }),
                       sp::UserError, "which differ in how they use iterator 'i'");
  // reading row i after the row's own writes is fine; another row is not
  REQUIRE_NOTHROW(sp::kernel("same_row", [](sp::in<float, I, J> a, sp::out<float, I, J> e, sp::out<float, I> z,
                                            sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) { e(i, j) = a(i, j) * 2.0f; });
    sp::for_each<J>([&](sp::iter<J> j2) { z(i) += e(i, j2); });
  }));
  SPINDLE_EXPECT_ERROR(sp::kernel("next_row",
                                  [](sp::in<float, I> x, sp::out<float, I> e, sp::out<float, I> z, sp::iter<I> i) {
                                    e(i) = x(i);
                                    z(i) = e(i + 1);
                                  }),
                       sp::UserError, "depend on the order");
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

TEST_CASE("argument names: errors and explain() use the names given to kernel()", "[error][definition][names]") {
  auto k = sp::kernel("named_spmv", sp::names{"A", "x", "y"},
                      [](sp::in<float, I, J> a, sp::in<float, sp::dense<J>> x, sp::out<float, I> y, sp::iter<I> i,
                         sp::iter<J> j) { y(i) += a(i, j) * x(j); });
  Inputs in;
  auto short_x = sp::Tensor<float>::random({29}, 940);
  const auto before = snapshot(in.y);
  SPINDLE_EXPECT_ERROR(k(in.a, short_x, in.y), sp::ShapeError, "'x'");
  CHECK(snapshot(in.y) == before);
  k(in.a, in.x, in.y);
  const std::string e = k.explain();
  CHECK(e.find("A[") != std::string::npos);
  CHECK(e.find("const float* __restrict A") != std::string::npos);
  CHECK(e.find("float* __restrict y") != std::string::npos);
  // A rule broken in a named kernel names the buffer.
  SPINDLE_EXPECT_ERROR(sp::kernel("named_last_write", sp::names{"A", "out"},
                                  [](sp::in<float, I, J> a, sp::out<float, I> y, sp::iter<I> i, sp::iter<J> j) {
                                    y(i) = a(i, j);
                                  }),
                       sp::UserError, "buffer 'out'");
}

TEST_CASE("argument names that cannot name a C variable are a UserError", "[error][definition][names]") {
  auto define = [](sp::names n) {
    return sp::kernel("bad_names", std::move(n), [](sp::in<float, I> x, sp::out<float, I> y, sp::iter<I> i) {
      y(i) = x(i);
    });
  };
  SPINDLE_EXPECT_ERROR(define({"x"}), sp::UserError, "1 names given for 2 call arguments");
  SPINDLE_EXPECT_ERROR(define({"x", "y", "z"}), sp::UserError, "3 names given");
  SPINDLE_EXPECT_ERROR(define({"x", "1y"}), sp::UserError, "not an identifier");
  SPINDLE_EXPECT_ERROR(define({"x", "y-z"}), sp::UserError, "not an identifier");
  SPINDLE_EXPECT_ERROR(define({"x", ""}), sp::UserError, "not an identifier");
  SPINDLE_EXPECT_ERROR(define({"x", "x"}), sp::UserError, "given twice");
  CHECK_NOTHROW(define({"features", "out_1"}));
  // Names that C or CUDA reserve are renamed in the generated code (codegen/identifiers.hpp).
  CHECK_NOTHROW(define({"x", "float"}));
  CHECK_NOTHROW(define({"threadIdx", "spindle_rt"}));
}
