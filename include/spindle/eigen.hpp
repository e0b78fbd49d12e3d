// Opt-in Eigen interoperability (spindle.hpp does not include Eigen):
//   view(sparse)  zero-copy CsrView of a compressed row-major Eigen::SparseMatrix (or a Map /
//                 Ref of one); validated once, here. Const argument -> CsrView<const T>.
//   view(dense)   zero-copy TensorView of a row-major Eigen::Matrix / Array / Map / Ref / Block
//                 with contiguous rows; compile-time vectors give a rank-1 view. A
//                 column-major matrix with both dimensions > 1 throws ShapeError.
//   to_eigen(csr), to_eigen(tensor), to_csr(sparse)  copying converters (mostly for tests)
//   Eigen::SparseVector   a sparse vector argument (a sparse_root<> level), zero-copy;
//                 to_eigen(sparse_vector), to_sparse_vector(v) copy
//   arg_traits specialisations, so storage_of(x) accepts these Eigen types.
// Views of temporaries that own their data are rejected at compile time.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/csr_view.hpp"
#include "spindle/format/sparse_vector.hpp"
#include "spindle/format/storage_of.hpp"
#include "spindle/format/tensor.hpp"

namespace spindle {

namespace detail {

template <class D>
struct is_sparse_vector : std::false_type {};
template <class S, int O, class I>
struct is_sparse_vector<Eigen::SparseVector<S, O, I>> : std::true_type {};

// Compressed sparse matrices (SparseMatrix, Map, Ref); an Eigen::SparseVector is a sparse
// vector argument instead (sparse_vector_storage below).
template <class D>
inline constexpr bool eigen_sparse_compressed =
    std::is_base_of_v<Eigen::SparseCompressedBase<D>, D> && !is_sparse_vector<D>::value;

template <class D>
inline constexpr bool eigen_dense_direct =
    std::is_base_of_v<Eigen::DenseBase<D>, D>&& requires(const D& d) {
  d.data();
  d.innerStride();
  d.outerStride();
};

template <class D>
struct is_sparse_matrix : std::false_type {};
template <class S, int O, class I>
struct is_sparse_matrix<Eigen::SparseMatrix<S, O, I>> : std::true_type {};

// Types that own their elements: a view of an rvalue of one would dangle.
template <class D>
inline constexpr bool eigen_owning =
    is_sparse_matrix<D>::value || std::is_base_of_v<Eigen::PlainObjectBase<D>, D>;

template <class D>
inline constexpr bool eigen_viewable = eigen_sparse_compressed<D> || eigen_dense_direct<D>;

}  // namespace detail

// Zero-copy CsrView of a compressed row-major sparse matrix. FormatError if it is not
// compressed or its arrays are inconsistent.
template <class M>
requires detail::eigen_sparse_compressed<std::remove_cvref_t<M>>
auto view(M&& m) {
  using D = std::remove_cvref_t<M>;
  static_assert(
      std::is_lvalue_reference_v<M> || !detail::eigen_owning<D>,
      "spindle::view: cannot view a temporary Eigen::SparseMatrix (the view would dangle)");
  static_assert(D::IsRowMajor,
                "spindle::view needs a row-major sparse matrix: use Eigen::SparseMatrix<T, "
                "Eigen::RowMajor> (convert with Eigen::SparseMatrix<T, Eigen::RowMajor>(m))");
  using V = std::remove_pointer_t<decltype(m.valuePtr())>;
  using I = typename D::StorageIndex;
  SPINDLE_CHECK(m.isCompressed(), FormatError, "Eigen::SparseMatrix ", m.rows(), "x", m.cols(),
                " is not in compressed mode; hint: call makeCompressed() before spindle::view()");
  return CsrView<V, I>(m.rows(), m.cols(), m.nonZeros(), m.outerIndexPtr(), m.innerIndexPtr(),
                       m.valuePtr(), "Eigen::SparseMatrix");
}

// Zero-copy TensorView of a dense matrix, array, Map, Ref or Block with contiguous rows.
template <class M>
requires detail::eigen_dense_direct<std::remove_cvref_t<M>>
auto view(M&& m) {
  using D = std::remove_cvref_t<M>;
  static_assert(std::is_lvalue_reference_v<M> || !detail::eigen_owning<D>,
                "spindle::view: cannot view a temporary Eigen matrix (the view would dangle)");
  using V = std::remove_pointer_t<decltype(m.data())>;
  const std::int64_t r = m.rows(), c = m.cols();
  if constexpr (D::IsVectorAtCompileTime) {
    SPINDLE_CHECK(m.size() <= 1 || m.innerStride() == 1, ShapeError, "Eigen vector of size ",
                  m.size(), " has inner stride ", m.innerStride(),
                  "; spindle::view needs contiguous elements");
    return TensorView<V>(m.data(), {static_cast<std::int64_t>(m.size())});
  } else {
    if (!D::IsRowMajor && r > 1 && c > 1)
      throw ShapeError(message("Eigen matrix ", r, "x", c,
                               " is column-major; spindle tensors are row-major. hint: use "
                               "Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> "
                               "(or copy into one)"));
    const std::int64_t inner = D::IsRowMajor ? c : r, outer = D::IsRowMajor ? r : c;
    SPINDLE_CHECK((inner <= 1 || m.innerStride() == 1) && (outer <= 1 || m.outerStride() == inner),
                  ShapeError, "Eigen matrix ", r, "x", c, " has strides (inner ", m.innerStride(),
                  ", outer ", m.outerStride(),
                  "); spindle::view needs contiguous rows. hint: copy "
                  "the block into a row-major matrix");
    return TensorView<V>(m.data(), {r, c});
  }
}

// Copy of a Csr as a row-major Eigen sparse matrix (sorted; duplicates summed).
template <class T, class Index>
Eigen::SparseMatrix<T, Eigen::RowMajor, Index> to_eigen(const Csr<T, Index>& csr) {
  using Sparse = Eigen::SparseMatrix<T, Eigen::RowMajor, Index>;
  const Csr<T, Index> canonical = csr.canonical();
  Sparse m(static_cast<Index>(canonical.rows()), static_cast<Index>(canonical.cols()));
  m.resizeNonZeros(static_cast<Index>(canonical.nnz()));
  std::copy(canonical.indptr().begin(), canonical.indptr().end(), m.outerIndexPtr());
  std::copy(canonical.indices().begin(), canonical.indices().end(), m.innerIndexPtr());
  std::copy(canonical.values().begin(), canonical.values().end(), m.valuePtr());
  return m;
}

// Copy of a 2-D tensor as a row-major Eigen matrix; ShapeError for other ranks.
template <class T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> to_eigen(const Tensor<T>& t) {
  SPINDLE_CHECK(t.rank() == 2, ShapeError, "to_eigen: tensor of shape ",
                detail::shape_string(t.shape()), " is not 2-D");
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> m(t.dim(0), t.dim(1));
  std::copy(t.values().begin(), t.values().end(), m.data());
  return m;
}

// Copy of any Eigen sparse matrix (either major order, compressed or not) as a Csr.
template <class Index = std::int32_t, class S, int O, class I>
Csr<S, Index> to_csr(const Eigen::SparseMatrix<S, O, I>& m) {
  Eigen::SparseMatrix<S, Eigen::RowMajor, I> rm(m);
  rm.makeCompressed();
  const auto rows = static_cast<std::size_t>(rm.rows());
  const auto nnz = static_cast<std::size_t>(rm.nonZeros());
  return Csr<S, Index>(rm.rows(), rm.cols(),
                       std::vector<Index>(rm.outerIndexPtr(), rm.outerIndexPtr() + rows + 1),
                       std::vector<Index>(rm.innerIndexPtr(), rm.innerIndexPtr() + nnz),
                       std::vector<S>(rm.valuePtr(), rm.valuePtr() + nnz), "Eigen::SparseMatrix");
}

// The StorageView of an Eigen::SparseVector (row or column): one sparse_root level over its
// stored entries, zero-copy, the argument of a buffer over a spindle::sparse_root<> axis.
// Validated on every call (indices in range and strictly ascending, as Eigen keeps them).
template <class S, int O, class I>
StorageView sparse_vector_storage(const Eigen::SparseVector<S, O, I>& v, bool writable) {
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "spindle: an Eigen::SparseVector argument needs a 32- or 64-bit StorageIndex");
  const std::int64_t n = v.size();
  const std::span<const I> idx(v.innerIndexPtr(), static_cast<std::size_t>(v.nonZeros()));
  detail::validate_sparse_vector<I>("Eigen::SparseVector of size " + std::to_string(n), n, idx, idx.size());
  StorageView s = detail::values_storage(v.valuePtr(), idx.size(), "Eigen::SparseVector", {}, writable);
  s.levels = {detail::sparse_root_level<I>(n, idx)};
  return s;
}

// Copies between SparseVector and Eigen::SparseVector (column vectors).
template <class T, class Index>
Eigen::SparseVector<T, Eigen::ColMajor, Index> to_eigen(const SparseVector<T, Index>& x) {
  Eigen::SparseVector<T, Eigen::ColMajor, Index> v(static_cast<Index>(x.length()));
  v.reserve(static_cast<Index>(x.nnz()));
  for (std::int64_t q = 0; q < x.nnz(); ++q) v.insertBack(x.indices()[q]) = x.values()[q];
  return v;
}
template <class S, int O, class I>
SparseVector<S, I> to_sparse_vector(const Eigen::SparseVector<S, O, I>& v) {
  const auto nnz = static_cast<std::size_t>(v.nonZeros());
  return SparseVector<S, I>(v.size(), std::vector<I>(v.innerIndexPtr(), v.innerIndexPtr() + nnz),
                            std::vector<S>(v.valuePtr(), v.valuePtr() + nnz), "Eigen::SparseVector");
}

template <class S, int O, class I>
struct arg_traits<Eigen::SparseVector<S, O, I>> {
  static StorageView storage(Eigen::SparseVector<S, O, I>& x) { return sparse_vector_storage(x, true); }
  static StorageView storage(const Eigen::SparseVector<S, O, I>& x) { return sparse_vector_storage(x, false); }
};

// storage_of() support for Eigen arguments (sparse: validated on every call; make a
// view once and pass it instead to validate only once).
template <class D>
struct arg_traits<D, std::enable_if_t<detail::eigen_viewable<D>>> {
  static StorageView storage(D& x) { return view(x).storage(); }
  static StorageView storage(const D& x) { return view(x).storage(); }
};

}  // namespace spindle
