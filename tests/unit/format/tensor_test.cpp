// Tensor and TensorView: constructors, bounds-checked access, storage().
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "format_test_util.hpp"
#include "spindle/format/tensor.hpp"

using namespace spindle;
using Catch::Matchers::Contains;
using Shape = std::vector<std::int64_t>;

TEST_CASE("Tensor constructors", "[format]") {
  auto z = Tensor<float>::zeros({2, 3, 4});
  CHECK(z.rank() == 3);
  CHECK(z.size() == 24);
  CHECK(z.dim(2) == 4);
  CHECK(z(1, 2, 3) == 0.0f);

  auto f = Tensor<double>::full({2, 2}, 2.5);
  CHECK(f(1, 1) == 2.5);

  auto t = Tensor<std::int32_t>::from({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t(0, 2) == 3);
  CHECK(t(1, 0) == 4);
  CHECK(t.at({1, 2}) == 6);
  t(1, 1) = 50;
  CHECK(t.values()[4] == 50);

  SPINDLE_CHECK_THROWS(Tensor<float>::from({1, 2, 3}, {2, 2}), ShapeError,
                       Contains("3 values do not fill shape [2, 2] (4 elements)"));
  SPINDLE_CHECK_THROWS(Tensor<float>::zeros({2, -1}), ShapeError,
                       Contains("extent -1 of axis 1 in shape [2, -1] is negative"));
  SPINDLE_CHECK_THROWS(Tensor<float>::zeros({1LL << 40, 1LL << 40}), ShapeError,
                       Contains("too many elements"));
  // More elements than memory can hold (beyond std::vector's max_size, so nothing is
  // allocated, also under ASan): a ResourceError naming the shape and the size.
  SPINDLE_CHECK_THROWS(Tensor<float>::zeros({1LL << 31, 1LL << 31}), ResourceError,
                       Contains("Tensor [2147483648, 2147483648]: cannot allocate 4611686018427387904 elements"));

  auto scalar = Tensor<float>::full({}, 3.0f);
  CHECK(scalar.rank() == 0);
  CHECK(scalar.size() == 1);
  CHECK(scalar() == 3.0f);
  CHECK(scalar.storage().levels.empty());

  auto empty = Tensor<float>::zeros({0, 5});
  CHECK(empty.size() == 0);
  Tensor<float> def;
  CHECK(def.size() == 0);
}

TEST_CASE("Tensor::random is deterministic and in range", "[format]") {
  auto a = Tensor<float>::random({100, 10}, 1, -1.0, 1.0);
  auto b = Tensor<float>::random({100, 10}, 1, -1.0, 1.0);
  CHECK(a == b);
  CHECK_FALSE(a == Tensor<float>::random({100, 10}, 2, -1.0, 1.0));
  bool neg = false, pos = false;
  for (float v : a.values()) {
    CHECK(v >= -1.0f);
    CHECK(v < 1.0f);
    neg |= v < 0;
    pos |= v > 0;
  }
  CHECK((neg && pos));

  auto i = Tensor<std::int64_t>::random({1000}, 3, 0, 3);  // integers: hi included
  bool saw_hi = false;
  for (auto v : i.values()) {
    CHECK(v >= 0);
    CHECK(v <= 3);
    saw_hi |= v == 3;
  }
  CHECK(saw_hi);
}

TEST_CASE("Tensor access is bounds-checked", "[format]") {
  auto t = Tensor<float>::zeros({3, 4});
  SPINDLE_CHECK_THROWS(t(3, 0), ShapeError,
                       Contains("Tensor [3, 4]: index 3 out of range [0, 3) on axis 0"));
  SPINDLE_CHECK_THROWS(t(0, -1), ShapeError, Contains("index -1 out of range [0, 4) on axis 1"));
  SPINDLE_CHECK_THROWS(t(0, 1, 2), ShapeError, Contains("expects 2 indices, got 3"));
  SPINDLE_CHECK_THROWS(t.at({1}), ShapeError, Contains("expects 2 indices, got 1"));
  const auto& ct = t;
  CHECK_THROWS_AS(ct(5, 5), ShapeError);
  CHECK_THROWS_AS(ct.at({0, 4}), ShapeError);
}

TEST_CASE("Tensor storage() has one dense_fixed level per axis", "[format]") {
  auto t = Tensor<double>::zeros({2, 3, 5});
  const StorageView s = t.storage();
  CHECK(s.dtype == DType::f64);
  CHECK(s.data == t.data());
  CHECK(s.value_count == 30);
  CHECK(s.writable);
  REQUIRE(s.levels.size() == 3);
  for (int a = 0; a < 3; ++a) {
    CHECK(s.levels[a].kind == LevelKind::dense_fixed);
    CHECK(s.levels[a].length == t.dim(a));
  }
  CHECK_THAT(s.description(), Contains("Tensor<f64> [2, 3, 5]"));
  const auto& ct = t;
  CHECK_FALSE(ct.storage().writable);
}

TEST_CASE("TensorView borrows memory", "[format]") {
  std::vector<float> buf(12, 0.0f);
  TensorView<float> v(buf.data(), {3, 4});
  v(2, 3) = 5;
  CHECK(buf[11] == 5.0f);
  CHECK(v.at({2, 3}) == 5.0f);
  CHECK(v.storage().writable);
  CHECK(v.storage().data == buf.data());
  TensorView<const float> cv = v;
  CHECK_FALSE(cv.storage().writable);
  CHECK(cv(2, 3) == 5.0f);
  SPINDLE_CHECK_THROWS(v(3, 0), ShapeError, Contains("TensorView [3, 4]: index 3 out of range"));
  SPINDLE_CHECK_THROWS(TensorView<float>(nullptr, {2}), ShapeError, Contains("data is null"));
  CHECK(TensorView<float>(nullptr, {0, 3}).size() == 0);

  auto t = Tensor<float>::random({2, 2}, 4);
  CHECK(t.view().data() == t.data());
  const auto& ct = t;
  CHECK_FALSE(ct.view().storage().writable);
}
