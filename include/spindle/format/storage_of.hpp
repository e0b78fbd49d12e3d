// storage_of(x): the StorageView of any argument the kernel-call layer accepts.
//
// The mapping is a class template, arg_traits<T>, rather than an overload set, so that it
// does not depend on include order: a specialisation added by a later header (such as
// spindle/eigen.hpp for Eigen types) is still found when a template that calls
// storage_of() is instantiated. Every Spindle container with a storage() member (Csr,
// CsrView, Tensor, TensorView, Ragged, Csf, Bsr, Ell) is supported by the primary rule below.
//
// A const argument gives a read-only StorageView (writable == false). The view points into
// the argument, which must outlive it.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include "spindle/format/storage.hpp"

namespace spindle {

// Specialise arg_traits<T> (with the second parameter for SFINAE if needed) to make T a
// kernel argument. A specialisation provides
//   static StorageView storage(T& x);        // mutable argument
//   static StorageView storage(const T& x);  // read-only argument
template <class T, class Enable = void>
struct arg_traits {};

template <class T>
struct arg_traits<T, std::void_t<decltype(std::declval<const T&>().storage())>> {
  static StorageView storage(T& x) { return x.storage(); }
  static StorageView storage(const T& x) { return x.storage(); }
};

// True when storage_of() accepts an argument of type T (cv/ref-qualifiers ignored).
template <class T>
concept storage_argument = requires(std::remove_reference_t<T>& x) {
  { arg_traits<std::remove_cvref_t<T>>::storage(x) } -> std::same_as<StorageView>;
};

template <class T>
StorageView storage_of(T&& x) {
  static_assert(storage_argument<T>,
                "spindle: this type cannot be passed to a kernel. Supported: Csr, CsrView, Tensor, "
                "TensorView, Ragged, Csf, Bsr, Ell; with spindle/eigen.hpp also Eigen::SparseMatrix<T, "
                "RowMajor>, row-major Eigen::Matrix/Array and Eigen::Map. Specialise "
                "spindle::arg_traits<T> for other types.");
  return arg_traits<std::remove_cvref_t<T>>::storage(x);
}

}  // namespace spindle
