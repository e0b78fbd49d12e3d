// A vector with inline storage for up to N elements and no heap allocation, for the small
// per-call descriptions on the kernel-call path. Growing past N throws a UserError.
// Only the elements in use are constructed, copied and destroyed: a StorageView holds room
// for 8 levels of ~64 bytes and usually uses 1 or 2, and every kernel call builds, copies and
// destroys several of them (zeroing and copying all 8 was half the dispatch time of a
// cached 1x1 SpMM: docs/benchmarks.md, einsum).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "spindle/support/error.hpp"

namespace spindle {

template <class T, std::size_t N>
class InlineVector {
 public:
  // User-provided, so that value-initialising an enclosing object does not zero the storage.
  InlineVector() noexcept {}
  InlineVector(std::initializer_list<T> init) { append(init.begin(), init.end()); }
  InlineVector(std::size_t n, const T& v = T()) {
    for (std::size_t i = 0; i < n; ++i) push_back(v);
  }
  InlineVector(const InlineVector& o) { append(o.begin(), o.end()); }
  InlineVector(InlineVector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    for (T& v : o) new (slot(size_++)) T(std::move(v));
  }
  InlineVector& operator=(const InlineVector& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  InlineVector& operator=(InlineVector&& o) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &o) {
      clear();
      for (T& v : o) new (slot(size_++)) T(std::move(v));
    }
    return *this;
  }
  InlineVector& operator=(std::initializer_list<T> init) {
    clear();
    append(init.begin(), init.end());
    return *this;
  }
  ~InlineVector() { clear(); }

  void push_back(const T& v) {
    SPINDLE_CHECK(size_ < N, UserError, "more than ", N, " levels in one tensor argument are not supported");
    new (slot(size_)) T(v);
    ++size_;
  }
  void clear() {
    if constexpr (!std::is_trivially_destructible_v<T>) std::destroy(begin(), end());
    size_ = 0;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return begin()[i]; }
  const T& operator[](std::size_t i) const { return begin()[i]; }
  T& back() { return begin()[size_ - 1]; }
  const T& back() const { return begin()[size_ - 1]; }
  T* begin() { return std::launder(reinterpret_cast<T*>(storage_)); }
  T* end() { return begin() + size_; }
  const T* begin() const { return std::launder(reinterpret_cast<const T*>(storage_)); }
  const T* end() const { return begin() + size_; }

 private:
  void* slot(std::size_t i) { return storage_ + i * sizeof(T); }
  void append(const T* b, const T* e) {
    for (; b != e; ++b) push_back(*b);
  }
  alignas(T) unsigned char storage_[N * sizeof(T)];
  std::size_t size_ = 0;
};

}  // namespace spindle
