// Dense row-major N-d tensors: Tensor<T> owns its elements, TensorView<T> borrows them
// (T may be const for a read-only view). Both describe themselves as a StorageView with
// one dense_fixed level per axis. Element access t(i, j, ...) and t.at({i, j, ...}) is
// bounds-checked and throws ShapeError.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <new>
#include <stdexcept>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/random.hpp"
#include "spindle/format/storage.hpp"
#include "spindle/ir/dtype.hpp"
#include "spindle/support/error.hpp"

namespace spindle {

namespace detail {

// "Csr" or "Csr 'A'": how messages name a structure.
inline std::string structure_name(const char* kind, const std::string& name) {
  return name.empty() ? std::string(kind) : message(kind, " '", name, "'");
}

inline std::string shape_string(std::span<const std::int64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Number of elements of a shape; ShapeError for negative extents or overflow.
inline std::int64_t checked_volume(std::span<const std::int64_t> shape, std::string_view what) {
  std::int64_t n = 1;
  for (std::size_t a = 0; a < shape.size(); ++a) {
    SPINDLE_CHECK(shape[a] >= 0, ShapeError, what, ": extent ", shape[a], " of axis ", a,
                  " in shape ", shape_string(shape), " is negative");
    SPINDLE_CHECK(shape[a] == 0 || n <= std::numeric_limits<std::int64_t>::max() / shape[a],
                  ShapeError, what, ": shape ", shape_string(shape), " has too many elements");
    n *= shape[a];
  }
  return n;
}

// Row-major offset of a multi-index, bounds-checked.
inline std::int64_t dense_offset(std::span<const std::int64_t> shape, const std::int64_t* idx,
                                 std::size_t n, std::string_view what) {
  SPINDLE_CHECK(n == shape.size(), ShapeError, what, " ", shape_string(shape), ": expects ",
                shape.size(), " indices, got ", n);
  std::int64_t off = 0;
  for (std::size_t a = 0; a < n; ++a) {
    if (idx[a] < 0 || idx[a] >= shape[a]) [[unlikely]]
      throw ShapeError(message(what, " ", shape_string(shape), ": index ", idx[a],
                               " out of range [0, ", shape[a], ") on axis ", a));
    off = off * shape[a] + idx[a];
  }
  return off;
}

inline InlineVector<LevelView, kMaxLevels> dense_levels(std::span<const std::int64_t> shape) {
  InlineVector<LevelView, kMaxLevels> levels;
  for (std::size_t a = 0; a < shape.size(); ++a) {
    LevelView l;
    l.kind = LevelKind::dense_fixed;
    l.length = shape[a];
    levels.push_back(l);
  }
  return levels;
}

template <class T>
StorageView dense_storage(T* data, std::span<const std::int64_t> shape, std::int64_t count,
                          const char* kind) {
  StorageView s;
  s.dtype = dtype_v<T>;
  s.data = const_cast<std::remove_const_t<T>*>(data);
  s.value_count = count;
  s.writable = !std::is_const_v<T>;
  s.levels = dense_levels(shape);
  s.kind = kind;
  return s;
}

template <class T>
constexpr void static_check_value() {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, bool>,
                "spindle: bool elements are not supported by the host containers "
                "(std::vector<bool> has no contiguous storage)");
  (void)dtype_v<T>;  // readable static_assert for unsupported element types
}

}  // namespace detail

template <class T>
class TensorView {
 public:
  using value_type = T;

  TensorView() = default;
  // Borrows `data` with the given row-major shape; ShapeError for a bad shape or a null
  // pointer with a non-empty shape.
  TensorView(T* data, std::vector<std::int64_t> shape) : data_(data), shape_(std::move(shape)) {
    detail::static_check_value<T>();
    size_ = detail::checked_volume(shape_, "TensorView");
    SPINDLE_CHECK(data_ != nullptr || size_ == 0, ShapeError, "TensorView ",
                  detail::shape_string(shape_), ": data is null");
  }
  // A mutable view converts to a read-only one.
  template <class U>
  requires(std::is_const_v<T>&& std::is_same_v<std::remove_const_t<T>, U>)
      TensorView(const TensorView<U>& other)
      : data_(other.data()), shape_(other.shape()), size_(other.size()) {}

  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(int axis) const { return shape_.at(static_cast<std::size_t>(axis)); }
  std::int64_t size() const { return size_; }
  T* data() const { return data_; }
  std::span<T> values() const { return {data_, static_cast<std::size_t>(size_)}; }

  template <class... I>
  requires(std::is_integral_v<I>&&...) T& operator()(I... idx) const {
    const std::int64_t ix[] = {static_cast<std::int64_t>(idx)..., 0};
    return data_[detail::dense_offset(shape_, ix, sizeof...(I), "TensorView")];
  }
  T& at(std::initializer_list<std::int64_t> idx) const {
    return data_[detail::dense_offset(shape_, idx.begin(), idx.size(), "TensorView")];
  }
  T& at(std::span<const std::int64_t> idx) const {
    return data_[detail::dense_offset(shape_, idx.data(), idx.size(), "TensorView")];
  }

  StorageView storage() const { return detail::dense_storage(data_, shape_, size_, "TensorView"); }

 private:
  T* data_ = nullptr;
  std::vector<std::int64_t> shape_{0};
  std::int64_t size_ = 0;
};

template <class T>
class Tensor {
  static_assert(!std::is_const_v<T>,
                "spindle: Tensor<const T> is not allowed; use TensorView<const T>");

 public:
  using value_type = T;

  Tensor() = default;  // shape [0]

  static Tensor zeros(std::vector<std::int64_t> shape) { return full(std::move(shape), T{}); }
  // A shape too large for memory: ResourceError naming the shape and the bytes.
  static Tensor full(std::vector<std::int64_t> shape, T value) {
    const std::int64_t n = detail::checked_volume(shape, "Tensor");
    std::vector<T> data;
    try {
      data.assign(static_cast<std::size_t>(n), value);
    } catch (const std::bad_alloc&) {
      throw ResourceError(message("Tensor ", detail::shape_string(shape), ": cannot allocate ", n, " elements (",
                                  static_cast<double>(n) * sizeof(T) / 1e9, " GB)"));
    } catch (const std::length_error&) {
      throw ResourceError(message("Tensor ", detail::shape_string(shape), ": cannot allocate ", n, " elements (",
                                  static_cast<double>(n) * sizeof(T) / 1e9, " GB)"));
    }
    return Tensor(std::move(data), std::move(shape));
  }
  // Uniform values: [lo, hi) for floating types, the integers of [lo, hi] for integral ones.
  static Tensor random(std::vector<std::int64_t> shape, std::uint64_t seed, double lo = 0.0,
                       double hi = 1.0) {
    Tensor t = zeros(std::move(shape));
    Rng rng(seed);
    for (T& v : t.values_) v = rng.value<T>(lo, hi);
    return t;
  }
  // Takes `values` (row-major) by value; ShapeError when its size is not the shape's volume.
  static Tensor from(std::vector<T> values, std::vector<std::int64_t> shape) {
    const std::int64_t n = detail::checked_volume(shape, "Tensor");
    SPINDLE_CHECK(static_cast<std::int64_t>(values.size()) == n, ShapeError,
                  "Tensor::from: ", values.size(), " values do not fill shape ",
                  detail::shape_string(shape), " (", n, " elements)");
    return Tensor(std::move(values), std::move(shape));
  }

  int rank() const { return static_cast<int>(shape_.size()); }
  const std::vector<std::int64_t>& shape() const { return shape_; }
  std::int64_t dim(int axis) const { return shape_.at(static_cast<std::size_t>(axis)); }
  std::int64_t size() const { return static_cast<std::int64_t>(values_.size()); }
  T* data() { return values_.data(); }
  const T* data() const { return values_.data(); }
  std::span<T> values() { return values_; }
  std::span<const T> values() const { return values_; }

  template <class... I>
  requires(std::is_integral_v<I>&&...) T& operator()(I... idx) {
    const std::int64_t ix[] = {static_cast<std::int64_t>(idx)..., 0};
    return values_[static_cast<std::size_t>(
        detail::dense_offset(shape_, ix, sizeof...(I), "Tensor"))];
  }
  template <class... I>
  requires(std::is_integral_v<I>&&...) const T& operator()(I... idx) const {
    return const_cast<Tensor&>(*this)(idx...);
  }
  T& at(std::span<const std::int64_t> idx) {
    return values_[static_cast<std::size_t>(
        detail::dense_offset(shape_, idx.data(), idx.size(), "Tensor"))];
  }
  const T& at(std::span<const std::int64_t> idx) const {
    return const_cast<Tensor&>(*this).at(idx);
  }
  T& at(std::initializer_list<std::int64_t> idx) { return at(std::span(idx.begin(), idx.size())); }
  const T& at(std::initializer_list<std::int64_t> idx) const {
    return const_cast<Tensor&>(*this).at(std::span(idx.begin(), idx.size()));
  }

  TensorView<T> view() { return TensorView<T>(values_.data(), shape_); }
  TensorView<const T> view() const { return TensorView<const T>(values_.data(), shape_); }

  StorageView storage() { return detail::dense_storage(values_.data(), shape_, size(), "Tensor"); }
  StorageView storage() const {
    return detail::dense_storage(values_.data(), shape_, size(), "Tensor");
  }

  bool operator==(const Tensor&) const = default;

 private:
  Tensor(std::vector<T> values, std::vector<std::int64_t> shape)
      : shape_(std::move(shape)), values_(std::move(values)) {
    detail::static_check_value<T>();
  }

  std::vector<std::int64_t> shape_{0};
  std::vector<T> values_;
};

}  // namespace spindle
