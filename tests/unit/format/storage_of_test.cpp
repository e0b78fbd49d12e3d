// storage_of(): one entry point from every supported argument to its StorageView.
#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "spindle/format/csf.hpp"
#include "spindle/format/csr.hpp"
#include "spindle/format/ragged.hpp"
#include "spindle/format/storage_of.hpp"
#include "spindle/format/tensor.hpp"

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
