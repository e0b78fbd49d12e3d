// storage_of(): one entry point from every supported argument to its StorageView.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spindle/format/csf.hpp"
#include "spindle/format/csr.hpp"
#include "spindle/format/ragged.hpp"
#include "spindle/format/storage_of.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/runtime/call_arg.hpp"
#include "spindle/support/inline_vector.hpp"

using namespace spindle;

static_assert(storage_argument<Csr<float>>);
static_assert(storage_argument<const Csr<double, std::int64_t>&>);
static_assert(storage_argument<CsrView<const float>>);
static_assert(storage_argument<Tensor<float>&>);
static_assert(storage_argument<TensorView<const std::int32_t>>);
static_assert(storage_argument<Ragged<float>>);
static_assert(storage_argument<Csf<double>>);
static_assert(!storage_argument<int>);
static_assert(!storage_argument<std::vector<float>>);

namespace {

struct Custom {
  float x = 0;
};

}  // namespace

// A user type made passable by specialising arg_traits.
template <>
struct spindle::arg_traits<Custom> {
  static StorageView storage(Custom& c) {
    StorageView s;
    s.data = &c.x;
    s.value_count = 1;
    s.writable = true;
    return s;
  }
  static StorageView storage(const Custom& c) {
    StorageView s = storage(const_cast<Custom&>(c));
    s.writable = false;
    return s;
  }
};
static_assert(storage_argument<Custom>);

TEST_CASE("storage_of covers every host container", "[format]") {
  auto csr = Csr<float>::random(10, 12, 3.0, 1);
  CHECK(storage_of(csr).levels.size() == 2);
  CHECK(storage_of(csr).writable);
  CHECK_FALSE(storage_of(std::as_const(csr)).writable);
  CHECK(storage_of(csr.view()).data == csr.values().data());
  CHECK_FALSE(storage_of(std::as_const(csr).view()).writable);

  auto t = Tensor<double>::zeros({2, 3});
  CHECK(storage_of(t).levels.size() == 2);
  CHECK(storage_of(t.view()).data == t.data());
  CHECK_FALSE(storage_of(std::as_const(t)).writable);

  auto r = Ragged<float>::zeros({1, 2}, {4});
  CHECK(storage_of(r).levels[1].kind == LevelKind::dense_variable);

  auto c = Csf<float>::random({3, 4, 5}, 0.3, 2);
  const StorageView cs = storage_of(c);
  CHECK(cs.levels.size() == 3);
  CHECK(cs.value_count == c.nnz());

  Custom u{2.0f};
  CHECK(storage_of(u).data == &u.x);
  CHECK_FALSE(storage_of(std::as_const(u)).writable);
}

TEST_CASE("StorageView of a compressed level validates through the type-erased entry", "[format]") {
  auto csr = Csr<float, std::int64_t>::random(50, 40, 4.0, 3);
  const StorageView s = storage_of(csr);
  const LevelView& l = s.levels[1];
  const std::string name = s.description();
  CompressedLevelRef ref{name, "row", s.levels[0].length, l.length, l.nnz, l.indptr, l.indices, l.index_dtype};
  CHECK(validate_compressed(ref).sorted == l.sorted);
}

// InlineVector (the levels of a StorageView) constructs, copies and destroys only the
// elements in use: checked with an element type that owns memory (ASan sees a leak or a
// double free) and counts its live objects.
namespace {
struct InlineVectorProbe {
  static inline int live = 0;
  std::string text;
  explicit InlineVectorProbe(std::string t = "") : text(std::move(t)) { ++live; }
  InlineVectorProbe(const InlineVectorProbe& o) : text(o.text) { ++live; }
  InlineVectorProbe(InlineVectorProbe&& o) noexcept : text(std::move(o.text)) { ++live; }
  InlineVectorProbe& operator=(const InlineVectorProbe&) = default;
  ~InlineVectorProbe() { --live; }
};
}  // namespace

TEST_CASE("InlineVector: only the elements in use live, through copies, moves and clears",
          "[format][storage]") {
  const std::string long_text(64, 'x');  // past the small-string buffer: heap memory per copy
  {
    InlineVector<InlineVectorProbe, 4> a;
    CHECK(a.empty());
    CHECK(InlineVectorProbe::live == 0);
    a.push_back(InlineVectorProbe(long_text + "0"));
    a.push_back(InlineVectorProbe(long_text + "1"));
    CHECK(InlineVectorProbe::live == 2);
    InlineVector<InlineVectorProbe, 4> b = a;  // copy
    CHECK(InlineVectorProbe::live == 4);
    REQUIRE(b.size() == 2);
    CHECK(b[1].text == long_text + "1");
    InlineVector<InlineVectorProbe, 4> c = std::move(b);  // move
    REQUIRE(c.size() == 2);
    CHECK(c.back().text == long_text + "1");
    c = a;  // copy assignment over live elements
    CHECK(c.size() == 2);
    c.push_back(InlineVectorProbe("2"));
    a = std::move(c);  // move assignment
    CHECK(a.size() == 3);
    CHECK(a[2].text == "2");
    a.clear();
    CHECK(a.empty());
    a = {InlineVectorProbe("p"), InlineVectorProbe("q")};  // initializer list
    CHECK(a.size() == 2);
    CHECK(a[0].text == "p");
    CHECK_THROWS_AS(([&] {
                      InlineVector<InlineVectorProbe, 4> full(4, InlineVectorProbe("f"));
                      full.push_back(InlineVectorProbe("g"));
                    }()),
                    UserError);
  }
  CHECK(InlineVectorProbe::live == 0);

  // A StorageView copied, value-initialised and assigned keeps its levels.
  Tensor<float> t = Tensor<float>::zeros({3, 5});
  StorageView v = t.storage();
  StorageView w{};
  CHECK(w.levels.empty());
  w = v;
  REQUIRE(w.levels.size() == 2);
  CHECK(w.levels[0].length == 3);
  CHECK(w.levels[1].length == 5);
  std::vector<runtime::CallArg> args(2);
  CHECK(args[0].view.levels.empty());
  CHECK(!args[1].is_scalar);
  args[1].view = std::move(w);
  CHECK(args[1].view.levels.size() == 2);
}
