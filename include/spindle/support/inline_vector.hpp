// A vector with inline storage for up to N elements and no heap allocation, for the small
// per-call descriptions on the kernel-call path. Growing past N throws a UserError.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>

#include "spindle/support/error.hpp"

namespace spindle {

template <class T, std::size_t N>
class InlineVector {
 public:
  InlineVector() = default;
  InlineVector(std::initializer_list<T> init) { assign(init); }
  InlineVector(std::size_t n, const T& v = T()) {
    for (std::size_t i = 0; i < n; ++i) push_back(v);
  }
  InlineVector& operator=(std::initializer_list<T> init) {
    assign(init);
    return *this;
  }

  void push_back(const T& v) {
    SPINDLE_CHECK(size_ < N, UserError, "more than ", N, " levels in one tensor argument are not supported");
    data_[size_++] = v;
  }
  void clear() { size_ = 0; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }
  T* begin() { return data_.data(); }
  T* end() { return data_.data() + size_; }
  const T* begin() const { return data_.data(); }
  const T* end() const { return data_.data() + size_; }

 private:
  void assign(std::initializer_list<T> init) {
    clear();
    for (const T& v : init) push_back(v);
  }
  std::array<T, N> data_{};
  std::size_t size_ = 0;
};

}  // namespace spindle
