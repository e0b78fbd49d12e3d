// A library of standard sparse kernels written in the Spindle DSL. Each function returns a
// fresh Kernel (definition only; it compiles on first call). Element types are template
// parameters. Tests, benchmarks and the GNN layers use these; the examples show how to
// write such kernels yourself.
//
//   auto spmm = spindle::ops::spmm<float>();
//   spmm(A, X, Y);            // Y = A X
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "spindle/format/bsr.hpp"
#include "spindle/format/dbsr.hpp"
#include "spindle/format/csc.hpp"
#include "spindle/format/ell.hpp"
#include "spindle/format/ell3d.hpp"
#include "spindle/format/hyb.hpp"
#include "spindle/format/sr_bcrs.hpp"
#include "spindle/kernel.hpp"
#include "spindle/runtime/runtime.hpp"

namespace spindle::ops {

namespace sp = spindle;

struct I : sp::dense_fixed {};
struct J : sp::sparse_variable<I> {};
struct K : sp::dense_fixed {};
struct J64 : sp::sparse_variable<I, std::int64_t> {
  static constexpr const char* axis_name = "J";
};

// Batched ragged matmul: batch B, a variable number of rows R per batch.
struct B : sp::dense_fixed {};
struct R : sp::dense_variable<B> {};
struct N : sp::dense_fixed {};

// 3-level compressed sparse fiber: I -> J -> L.
struct L : sp::sparse_variable<J> {};

// y = A x
template <class T, class JAxis = J>
auto spmv() {
  return sp::kernel("spmv", [](sp::in<T, I, JAxis> a, sp::in<T, sp::dense<JAxis>> x, sp::out<T, I> y, sp::iter<I> i,
                               sp::iter<JAxis> j) { y(i) += a(i, j) * x(j); });
}

// C = A B (CSR x dense)
template <class T>
auto spmm() {
  return sp::kernel("spmm", [](sp::in<T, I, J> a, sp::in<T, sp::dense<J>, K> b, sp::out<T, I, K> c, sp::iter<I> i,
                               sp::iter<J> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
}

// C = A B iterating every column of A: a(i, j) is found by binary search in row i.
template <class T>
auto spmm_dense_j() {
  return sp::kernel("spmm_dense_j",
                    [](sp::in<T, I, J> a, sp::in<T, sp::dense<J>, K> b, sp::out<T, I, K> c, sp::iter<I> i,
                       sp::iter<sp::dense<J>> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
}

// C(i, j) = A(i, j) * sum_k X(i, k) Y(j, k) on the nonzeros of A
template <class T>
auto sddmm() {
  return sp::kernel("sddmm", [](sp::in<T, I, J> a, sp::in<T, I, K> x, sp::in<T, sp::dense<J>, K> y,
                                sp::out<T, I, J> c, sp::iter<I> i, sp::iter<J> j,
                                sp::iter<K> k) { c(i, j) += a(i, j) * x(i, k) * y(j, k); });
}

// y(i) = sum_j A(i, j)
template <class T>
auto row_sum() {
  return sp::kernel("row_sum", [](sp::in<T, I, J> a, sp::out<T, I> y, sp::iter<I> i, sp::iter<J> j) {
    y(i) += a(i, j);
  });
}

// B(i, j) = alpha * r(i) * A(i, j) * s(j): element-wise scaling (e.g. D^-1/2 A D^-1/2)
template <class T>
auto scale() {
  return sp::kernel("scale", [](sp::in<T, I, J> a, sp::in<T, I> r, sp::in<T, sp::dense<J>> s, sp::param<T> alpha,
                                sp::out<T, I, J> b, sp::iter<I> i,
                                sp::iter<J> j) { b(i, j) = alpha * r(i) * a(i, j) * s(j); });
}

// B = row-wise softmax of the nonzeros of A (empty rows stay empty)
template <class T>
auto softmax() {
  return sp::kernel("softmax", [](sp::in<T, I, J> a, sp::out<T, I, J> b, sp::iter<I> i) {
    sp::local<T> m(-sp::infinity<T>(), "row_max");
    sp::for_each<J>([&](sp::iter<J> j) { m.max_with(a(i, j)); });
    sp::local<T> s(0, "row_sum");
    sp::for_each<J>([&](sp::iter<J> j) { s += sp::exp(a(i, j) - m); });
    sp::for_each<J>([&](sp::iter<J> j) { b(i, j) = sp::exp(a(i, j) - m) / s; });
  });
}

// C[b] = A[b] W[b] for a batch of matrices A[b] with a variable number of rows
template <class T>
auto ragged_matmul() {
  return sp::kernel("ragged_matmul",
                    [](sp::in<T, B, R, K> a, sp::in<T, B, K, N> w, sp::out<T, B, R, N> c, sp::iter<B> b,
                       sp::iter<R> r, sp::iter<K> k, sp::iter<N> n) { c(b, r, n) += a(b, r, k) * w(b, k, n); });
}

// y(i) = sum_{j, l} A(i, j, l) x(l) over a 3-level CSF tensor
template <class T>
auto csf_reduce() {
  return sp::kernel("csf_reduce", [](sp::in<T, I, J, L> a, sp::in<T, sp::dense<L>> x, sp::out<T, I> y, sp::iter<I> i,
                                     sp::iter<J> j, sp::iter<L> l) { y(i) += a(i, j, l) * x(l); });
}

// --- block and padded formats ------------------------------------------------------------

// BSR: block rows IB, stored block columns JB, and the rows BI / columns BJ inside a block,
// whose extents are compile-time constants (so the block loops unroll and vectorise).
struct IB : sp::dense_fixed {};
template <class Index>
struct JB : sp::sparse_variable<IB, Index> {
  static constexpr const char* axis_name = "JB";
};
template <std::int64_t N>
struct BI : sp::dense_fixed_n<N> {
  static constexpr const char* axis_name = "BI";
};
template <std::int64_t N>
struct BJ : sp::dense_fixed_n<N> {
  static constexpr const char* axis_name = "BJ";
};

// C = A B with A a Bsr<T, Index> of BR x BC blocks, on block-shaped views of the dense
// operands: B is [block_col_count, BC, K] and C is [block_row_count, BR, K] (the [cols, K]
// and [rows, K] matrices when the extents are multiples of the block; BsrSpmm below pads).
template <class T, std::int64_t BR, std::int64_t BC, class Index = std::int32_t>
auto bsr_spmm_kernel() {
  using Jb = JB<Index>;
  using Bi = BI<BR>;
  using Bj = BJ<BC>;
  // Loop order i, bi, j, bj, k: a row of C stays in registers across the blocks of its block row.
  return sp::kernel("bsr_spmm", [](sp::in<T, IB, Jb, Bi, Bj> a, sp::in<T, sp::dense<Jb>, Bj, K> b,
                                   sp::out<T, IB, Bi, K> c, sp::iter<IB> i, sp::iter<Bi> bi, sp::iter<Jb> j,
                                   sp::iter<Bj> bj, sp::iter<K> k) { c(i, bi, k) += a(i, j, bi, bj) * b(j, bj, k); });
}

// DBSR (Dbsr<T, Index>): the stored block rows are a root sparse axis, their block columns
// a compressed level under it; C = A B visits the stored block rows only (the others are 0).
template <class Index>
struct RowsB : sp::sparse_root<Index> {
  static constexpr const char* axis_name = "IB";
};
template <class Index>
struct JBd : sp::sparse_variable<RowsB<Index>, Index> {
  static constexpr const char* axis_name = "JB";
};

template <class T, std::int64_t BR, std::int64_t BC, class Index = std::int32_t>
auto dbsr_spmm_kernel() {
  using R_ = RowsB<Index>;
  using Jb = JBd<Index>;
  using Bi = BI<BR>;
  using Bj = BJ<BC>;
  return sp::kernel("dbsr_spmm", [](sp::in<T, R_, Jb, Bi, Bj> a, sp::in<T, sp::dense<Jb>, Bj, K> b,
                                    sp::out<T, sp::dense<R_>, Bi, K> c, sp::iter<R_> i, sp::iter<Bi> bi,
                                    sp::iter<Jb> j, sp::iter<Bj> bj,
                                    sp::iter<K> k) { c(i, bi, k) += a(i, j, bi, bj) * b(j, bj, k); });
}

namespace detail {

// X [cols, K] and Y [rows, K] for Y = A X with A rows x cols: a ShapeError naming `what`
// and the extent that does not fit.
template <class T>
void check_spmm_operands(const std::string& what, std::int64_t rows, std::int64_t cols, const TensorView<const T>& x,
                         const TensorView<T>& y) {
  SPINDLE_CHECK(x.rank() == 2 && y.rank() == 2, ShapeError, what, ": X and Y must be matrices, got ranks ",
                x.rank(), " and ", y.rank());
  SPINDLE_CHECK(x.dim(0) == cols, ShapeError, what, ": X has ", x.dim(0), " rows but A has ", cols, " columns");
  SPINDLE_CHECK(y.dim(0) == rows, ShapeError, what, ": Y has ", y.dim(0), " rows but A has ", rows, " rows");
  SPINDLE_CHECK(x.dim(1) == y.dim(1), ShapeError, what, ": X has ", x.dim(1), " columns but Y has ", y.dim(1));
}

// The zero-padded copies of X and Y that an operator object keeps for formats whose row or
// column count is rounded up to a tile (BSR, DBSR, SR-BCRS): reused from call to call; calls
// on one object from several threads take turns (`mutex`).
template <class T>
struct PaddedOperands {
  std::mutex mutex;
  std::vector<T> x, y;

  // X with its rows padded with zeros to `padded_rows` (the caller holds `mutex`).
  const T* padded_x(const TensorView<const T>& x_in, std::int64_t padded_rows) {
    x.resize(static_cast<std::size_t>(padded_rows * x_in.dim(1)));
    std::copy(x_in.values().begin(), x_in.values().end(), x.begin());
    std::fill(x.begin() + static_cast<std::ptrdiff_t>(x_in.size()), x.end(), T(0));
    return x.data();
  }
  // Runs `compute(yp)` into a buffer of `padded_rows` rows of Y and copies Y's rows back
  // (the caller holds `mutex`).
  template <class Compute>
  void into_padded_y(const TensorView<T>& y_out, std::int64_t padded_rows, Compute&& compute) {
    y.resize(static_cast<std::size_t>(padded_rows * y_out.dim(1)));
    compute(y.data());
    std::copy(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(y_out.size()), y_out.values().begin());
  }
};

// Y = A X for a blocked A (Bsr or Dbsr) with BR x BC blocks, X [A.cols(), K] and Y [A.rows(), K]
// row-major, through `Kernel` on the block-shaped views [nb, BC, K] and [mb, BR, K]. When the
// matrix extents are multiples of the block, the kernel runs on views of X and Y directly.
// Otherwise X is copied into a zero-padded buffer and Y computed into one and copied back
// (buffers kept by the object and reused; calls on one object from several threads take
// turns); to avoid the copies, allocate X and Y with A.padded_cols() / A.padded_rows() rows
// and call the kernel on views. Stored zeros inside blocks take part in the products like
// any stored value (0 * inf = NaN, as in every blocked format).
template <class Matrix, class Kernel, std::int64_t BR, std::int64_t BC>
class BlockSpmm {
 public:
  using T = typename Matrix::value_type;
  BlockSpmm(Kernel kernel, const char* name, const char* format)
      : kernel_(std::move(kernel)), name_(name), format_(format), scratch_(std::make_shared<PaddedOperands<T>>()) {}

  void operator()(const Matrix& a, TensorView<const T> x, TensorView<T> y) const {
    const std::string what = std::string(name_) + "<" + std::to_string(BR) + "x" + std::to_string(BC) + ">";
    SPINDLE_CHECK(a.block_rows() == BR && a.block_cols() == BC, ShapeError, what, ": the matrix (",
                  a.storage().description(), ") has ", a.block_rows(), "x", a.block_cols(),
                  " blocks; hint: build it with ", format_, "::from_csr(csr, ", BR, ", ", BC, ") or use ", name_,
                  "<T, ", a.block_rows(), ", ", a.block_cols(), ">()");
    check_spmm_operands(what, a.rows(), a.cols(), x, y);
    const std::int64_t k = x.dim(1), mb = a.block_row_count(), nb = a.block_col_count();
    const bool pad_x = a.padded_cols() != a.cols(), pad_y = a.padded_rows() != a.rows();
    if (!pad_x && !pad_y) {
      kernel_(a, TensorView<const T>(x.data(), {nb, BC, k}), TensorView<T>(y.data(), {mb, BR, k}));
      return;
    }
    std::lock_guard<std::mutex> lock(scratch_->mutex);
    const TensorView<const T> xb(pad_x ? scratch_->padded_x(x, a.padded_cols()) : x.data(), {nb, BC, k});
    if (!pad_y) {
      kernel_(a, xb, TensorView<T>(y.data(), {mb, BR, k}));
      return;
    }
    scratch_->into_padded_y(y, a.padded_rows(), [&](T* yp) { kernel_(a, xb, TensorView<T>(yp, {mb, BR, k})); });
  }
  void operator()(const Matrix& a, const Tensor<T>& x, Tensor<T>& y) const { (*this)(a, x.view(), y.view()); }

  const auto& kernel() const { return kernel_; }
  std::string explain() const { return kernel_.explain(); }

 private:
  Kernel kernel_;
  const char* name_;
  const char* format_;
  std::shared_ptr<PaddedOperands<T>> scratch_;
};

}  // namespace detail

// Y = A X for A in BSR with BR x BC blocks (detail::BlockSpmm: padding, checks).
template <class T, std::int64_t BR, std::int64_t BC, class Index = std::int32_t>
class BsrSpmm
    : public detail::BlockSpmm<Bsr<T, Index>, decltype(bsr_spmm_kernel<T, BR, BC, Index>()), BR, BC> {
 public:
  BsrSpmm()
      : detail::BlockSpmm<Bsr<T, Index>, decltype(bsr_spmm_kernel<T, BR, BC, Index>()), BR, BC>(
            bsr_spmm_kernel<T, BR, BC, Index>(), "bsr_spmm", "Bsr") {}
};

// Y = A X for A in DBSR with BR x BC blocks: only the stored block rows are visited, the
// rows of the other block rows of Y are 0.
template <class T, std::int64_t BR, std::int64_t BC, class Index = std::int32_t>
class DbsrSpmm
    : public detail::BlockSpmm<Dbsr<T, Index>, decltype(dbsr_spmm_kernel<T, BR, BC, Index>()), BR, BC> {
 public:
  DbsrSpmm()
      : detail::BlockSpmm<Dbsr<T, Index>, decltype(dbsr_spmm_kernel<T, BR, BC, Index>()), BR, BC>(
            dbsr_spmm_kernel<T, BR, BC, Index>(), "dbsr_spmm", "Dbsr") {}
};

template <class T, std::int64_t BR, std::int64_t BC, class Index = std::int32_t>
DbsrSpmm<T, BR, BC, Index> dbsr_spmm() {
  return {};
}

template <class T, std::int64_t BR, std::int64_t BC, class Index = std::int32_t>
BsrSpmm<T, BR, BC, Index> bsr_spmm() {
  return {};
}

// SR-BCRS (SrBcrs<T, Index>): panels P of TT rows, the groups G of a panel, the GS columns J
// of a group (compile-time, so the slot loop unrolls) and the rows TI of a panel (a
// compile-time extent: the TT rows of C that one stored vector updates stay in registers).
struct SrP : sp::dense_fixed {
  static constexpr const char* axis_name = "P";
};
template <class Index>
struct SrG : sp::dense_variable<SrP, Index> {
  static constexpr const char* axis_name = "G";
};
template <std::int64_t GS, class Index>
struct SrJ : sp::sparse_fixed<SrG<Index>, GS, Index> {
  static constexpr const char* axis_name = "J";
};
template <std::int64_t TT>
struct SrT : sp::dense_fixed_n<TT> {
  static constexpr const char* axis_name = "TI";
};

// C = A B with A an SrBcrs<T, Index> of TT-row panels and groups of GS, B [cols, K] and C
// the panel-shaped view [panel_count, TT, K] of the [rows, K] result (SrBcrsSpmm pads).
template <class T, std::int64_t TT, std::int64_t GS, class Index = std::int32_t>
auto sr_bcrs_spmm_kernel() {
  using Gi = SrG<Index>;
  using Jg = SrJ<GS, Index>;
  using Ti = SrT<TT>;
  return sp::kernel("sr_bcrs_spmm", [](sp::in<T, SrP, Gi, Jg, Ti> a, sp::in<T, sp::dense<Jg>, K> b,
                                       sp::out<T, SrP, Ti, K> c, sp::iter<SrP> p, sp::iter<Ti> ti, sp::iter<Gi> g,
                                       sp::iter<Jg> j, sp::iter<K> k) { c(p, ti, k) += a(p, g, j, ti) * b(j, k); });
}

// Y = A X for A in SR-BCRS with TT-row panels and groups of GS vectors, X [A.cols(), K] and
// Y [A.rows(), K] row-major. When the row count is a multiple of TT the kernel writes Y
// through its panel-shaped view; otherwise into a padded buffer (kept by the object and
// reused; calls on one object from several threads take turns) whose first rows are copied
// back. Stored zeros take part in the products like any stored value (0 * inf = NaN).
template <class T, std::int64_t TT, std::int64_t GS, class Index = std::int32_t>
class SrBcrsSpmm {
 public:
  SrBcrsSpmm() : kernel_(sr_bcrs_spmm_kernel<T, TT, GS, Index>()), scratch_(std::make_shared<detail::PaddedOperands<T>>()) {}

  void operator()(const SrBcrs<T, Index>& a, TensorView<const T> x, TensorView<T> y) const {
    const std::string what = "sr_bcrs_spmm<" + std::to_string(TT) + ", " + std::to_string(GS) + ">";
    SPINDLE_CHECK(a.tile_rows() == TT && a.group_size() == GS, ShapeError, what, ": the matrix (",
                  a.storage().description(), ") has t=", a.tile_rows(), ", g=", a.group_size(),
                  "; hint: build it with SrBcrs::from_csr(csr, ", TT, ", ", GS, ") or use sr_bcrs_spmm<T, ",
                  a.tile_rows(), ", ", a.group_size(), ">()");
    detail::check_spmm_operands(what, a.rows(), a.cols(), x, y);
    const std::int64_t k = x.dim(1), mp = a.panel_count();
    if (a.padded_rows() == a.rows()) {
      kernel_(a, x, TensorView<T>(y.data(), {mp, TT, k}));
      return;
    }
    std::lock_guard<std::mutex> lock(scratch_->mutex);
    scratch_->into_padded_y(y, a.padded_rows(), [&](T* yp) { kernel_(a, x, TensorView<T>(yp, {mp, TT, k})); });
  }
  void operator()(const SrBcrs<T, Index>& a, const Tensor<T>& x, Tensor<T>& y) const {
    (*this)(a, x.view(), y.view());
  }

  const auto& kernel() const { return kernel_; }
  std::string explain() const { return kernel_.explain(); }

 private:
  decltype(sr_bcrs_spmm_kernel<T, TT, GS, Index>()) kernel_;
  std::shared_ptr<detail::PaddedOperands<T>> scratch_;
};

template <class T, std::int64_t TT, std::int64_t GS, class Index = std::int32_t>
SrBcrsSpmm<T, TT, GS, Index> sr_bcrs_spmm() {
  return {};
}

// ELL3D (Ell3d<T, Index>): relations Rel, the rows of a relation that have edges (a
// compressed level under it) and their slots (sparse_fixed, width bound at call time).
struct Rel : sp::dense_fixed {};
template <class Index>
struct RelRows : sp::sparse_variable<Rel, Index> {
  static constexpr const char* axis_name = "I";
};
template <class Index>
struct RelSlots : sp::sparse_fixed<RelRows<Index>, sp::dynamic, Index> {
  static constexpr const char* axis_name = "J";
};

// The aggregation of an RGCN layer over ELL3D (SparseTIR's RGMS with X W_r precomputed):
// C(i, k) = sum over relations r and slots j of A_r(i, j) * XW(r, j, k), with A an
// Ell3d<T, Index>, XW [relations, cols, K] (X times each relation's weight) and C [rows, K].
// Every relation adds into the same rows of C (on the CPU the rows are owned by one thread).
namespace detail {
// C(i, k) (+)= A(r, i, j) * XW(r, j, k): C out (zeroed first) or, with Add, inout.
template <class T, class Index, bool Add>
auto rgcn_ell3d_kernel() {
  using Ir = RelRows<Index>;
  using Js = RelSlots<Index>;
  using C = std::conditional_t<Add, sp::inout<T, sp::dense<Ir>, K>, sp::out<T, sp::dense<Ir>, K>>;
  return sp::kernel(Add ? "rgcn_ell3d_spmm_add" : "rgcn_ell3d_spmm",
                    [](sp::in<T, Rel, Ir, Js> a, sp::in<T, Rel, sp::dense<Js>, K> xw, C c, sp::iter<Rel> r,
                       sp::iter<Ir> i, sp::iter<Js> j, sp::iter<K> k) { c(i, k) += a(r, i, j) * xw(r, j, k); });
}
}  // namespace detail

template <class T, class Index = std::int32_t>
auto rgcn_ell3d_spmm() {
  return detail::rgcn_ell3d_kernel<T, Index, false>();
}

// The same aggregation added into C (C inout): one part of an Ell3dBuckets.
template <class T, class Index = std::int32_t>
auto rgcn_ell3d_spmm_add() {
  return detail::rgcn_ell3d_kernel<T, Index, true>();
}

// ELL: every row stores the same number of entries (sparse_fixed, width bound at call time).
template <class Index>
struct JE : sp::sparse_fixed<I, sp::dynamic, Index> {
  static constexpr const char* axis_name = "JE";
};

// C = A B with A an Ell<T, Index> (padding slots hold zeros), B [cols, K], C [rows, K].
template <class T, class Index = std::int32_t>
auto ell_spmm() {
  using Je = JE<Index>;
  return sp::kernel("ell_spmm", [](sp::in<T, I, Je> a, sp::in<T, sp::dense<Je>, K> b, sp::out<T, I, K> c,
                                   sp::iter<I> i, sp::iter<Je> j, sp::iter<K> k) { c(i, k) += a(i, j) * b(j, k); });
}

// hyb(c, k) (Hyb<T, Index>, format/hyb.hpp): each part is an ELL block of pieces of rows
// (HR) with W slots each (HS; W a compile-time constant, or bound at call time for
// sp::dynamic) and a row map into the output.
struct HR : sp::dense_fixed {
  static constexpr const char* axis_name = "R";
};
template <std::int64_t W, class Index>
struct HS : sp::sparse_fixed<HR, W, Index> {
  static constexpr const char* axis_name = "S";
};

// The sub-kernel of hyb SpMM for one part: C(rows(r), k) += A(r, s) * B(s, k). C is inout:
// the parts add up into it. A row cut into several pieces appears several times in `rows`
// (an indirect write, docs/language.md §4.1: race-free on the CPU by row ownership).
template <class T, std::int64_t W, class Index = std::int32_t>
auto hyb_part_spmm() {
  using S = HS<W, Index>;
  return sp::kernel(W == sp::dynamic ? std::string("hyb_part_spmm") : "hyb_part_spmm_w" + std::to_string(W),
                    [](sp::in<T, HR, S> a, sp::in<Index, HR> rows, sp::in<T, sp::dense<S>, K> b,
                       sp::inout<T, I, K> c, sp::iter<HR> r, sp::iter<S> s,
                       sp::iter<K> k) { c(rows(r), k) += a(r, s) * b(s, k); });
}

// The sub-kernel of hyb SpMV for one part: y(rows(r)) += A(r, s) * x(s). The slot loop of a
// compile-time width is vectorised by the default schedule (a row piece's sum in one vector).
template <class T, std::int64_t W, class Index = std::int32_t>
auto hyb_part_spmv() {
  using S = HS<W, Index>;
  return sp::kernel(W == sp::dynamic ? std::string("hyb_part_spmv") : "hyb_part_spmv_w" + std::to_string(W),
                    [](sp::in<T, HR, S> a, sp::in<Index, HR> rows, sp::in<T, sp::dense<S>> x, sp::inout<T, I> y,
                       sp::iter<HR> r, sp::iter<S> s) { y(rows(r)) += a(r, s) * x(s); });
}

// C = 0 (the start of a sum of parts).
template <class T>
auto zero_matrix() {
  return sp::kernel("zero_matrix", [](sp::out<T, I, K> c, sp::iter<I> i, sp::iter<K> k) { c(i, k) = T(0); });
}

// y = 0.
template <class T>
auto zero_vector() {
  return sp::kernel("zero_vector", [](sp::out<T, I> y, sp::iter<I> i) { y(i) = T(0); });
}

// C = sum over relations r of A_r XW_r for A an Ell3dBuckets<T, Index> (the RGCN
// aggregation over row-length buckets), XW [relations, cols, K] and C [rows, K]: C is zeroed
// once (rows without edges stay 0), then every part adds its rows through
// rgcn_ell3d_spmm_add (one kernel for all parts: the width is bound at call time). Operands
// are checked before C is touched. On a CPU the same sum runs 1.3-4x faster as one spmm of
// the relations side by side (spindle::side_by_side, format/side_by_side.hpp): ELL3D is
// relation-major, so each row of C is re-read and re-written once per relation reaching it
// (spindle-bench --op rgcn_spmm, docs/benchmarks.md).
template <class T, class Index = std::int32_t>
class RgcnBucketsSpmm {
 public:
  void operator()(const Ell3dBuckets<T, Index>& a, TensorView<const T> xw, TensorView<T> c) const {
    const std::string what = "rgcn_buckets_spmm";
    SPINDLE_CHECK(xw.rank() == 3 && c.rank() == 2, ShapeError, what,
                  ": XW must be [relations, cols, K] and C [rows, K], got ranks ", xw.rank(), " and ", c.rank());
    SPINDLE_CHECK(xw.dim(0) == a.relations() && xw.dim(1) == a.cols(), ShapeError, what, ": XW is [", xw.dim(0), ", ",
                  xw.dim(1), ", ", xw.dim(2), "] but A (", a.description(), ") needs [", a.relations(), ", ",
                  a.cols(), ", K]");
    SPINDLE_CHECK(c.dim(0) == a.rows() && c.dim(1) == xw.dim(2), ShapeError, what, ": C is [", c.dim(0), ", ",
                  c.dim(1), "] but A (", a.description(), ") and XW need [", a.rows(), ", ", xw.dim(2), "]");
    const auto cb = reinterpret_cast<std::uintptr_t>(c.data()), xb = reinterpret_cast<std::uintptr_t>(xw.data());
    const auto c_bytes = static_cast<std::uintptr_t>(c.size()) * sizeof(T),
               x_bytes = static_cast<std::uintptr_t>(xw.size()) * sizeof(T);
    SPINDLE_CHECK(c_bytes == 0 || x_bytes == 0 || cb + c_bytes <= xb || xb + x_bytes <= cb, UserError, what,
                  ": C overlaps XW in memory; the parts add into C, which would change XW; hint: pass an output "
                  "with storage of its own");
    zero_(c);
    for (const auto& part : a.parts()) add_(part, xw, c);
  }
  void operator()(const Ell3dBuckets<T, Index>& a, const Tensor<T>& xw, Tensor<T>& c) const {
    (*this)(a, xw.view(), c.view());
  }

  RgcnBucketsSpmm with_runtime(runtime::Runtime& rt) const {
    RgcnBucketsSpmm r(*this);
    r.zero_ = r.zero_.with_runtime(rt);
    r.add_ = r.add_.with_runtime(rt);
    return r;
  }
  const auto& kernel() const { return add_; }
  std::string explain() const { return add_.explain(); }

 private:
  decltype(zero_matrix<T>()) zero_ = zero_matrix<T>();
  decltype(rgcn_ell3d_spmm_add<T, Index>()) add_ = rgcn_ell3d_spmm_add<T, Index>();
};

template <class T, class Index = std::int32_t>
RgcnBucketsSpmm<T, Index> rgcn_buckets_spmm() {
  return {};
}

// Y = A X for A in hyb(c, k) (SparseTIR's composed format), X [A.cols(), K], Y [A.rows(), K]
// row-major (HybSpmm), or y = A x for vectors (HybSpmv): every row of Y is zeroed once (rows
// that no part touches stay 0) and gets the sum of its pieces in every part, each part run by
// its sub-kernel, whose slot loop has the bucket width as a compile-time constant (widths up
// to max_fixed_width; wider ones, and parts narrower than their bucket because the matrix has
// fewer columns, use the call-time-width kernel). One kernel per width, compiled on first use
// and cached like every kernel. With several threads the parts are fused horizontally into
// one parallel region: the output rows are cut into shares of about equal slots
// (Hyb::row_shares), and a share zeroes its rows and runs each part's pieces of them
// (EllRows views), so one fork-join serves all parts and no row is written by two threads,
// with any number of column partitions. With one thread (or inside another parallel region):
// zero, then each part over all its rows.
template <class T, class Index, bool Vector>
class HybProduct {
 public:
  static constexpr std::int64_t max_fixed_width = 256;

  void operator()(const Hyb<T, Index>& a, TensorView<const T> x, TensorView<T> y) const {
    const std::string what = Vector ? "hyb_spmv" : "hyb_spmm";
    if constexpr (Vector) {
      SPINDLE_CHECK(x.rank() == 1 && y.rank() == 1, ShapeError, what, ": x and y must be vectors, got ranks ",
                    x.rank(), " and ", y.rank());
    } else {
      SPINDLE_CHECK(x.rank() == 2 && y.rank() == 2, ShapeError, what, ": X and Y must be matrices, got ranks ",
                    x.rank(), " and ", y.rank());
      SPINDLE_CHECK(x.dim(1) == y.dim(1), ShapeError, what, ": X has ", x.dim(1), " columns but Y has ", y.dim(1));
    }
    const char* unit = Vector ? " entries" : " rows";
    SPINDLE_CHECK(x.dim(0) == a.cols(), ShapeError, what, Vector ? ": x has " : ": X has ", x.dim(0), unit,
                  " but A (", a.description(), ") has ", a.cols(), " columns");
    SPINDLE_CHECK(y.dim(0) == a.rows(), ShapeError, what, Vector ? ": y has " : ": Y has ", y.dim(0), unit,
                  " but A (", a.description(), ") has ", a.rows(), " rows");
    // Y is written (zeroed) before any part kernel's binder would see an overlap: check first.
    auto overlap = [&](const void* p, std::size_t bytes) {
      const auto b = reinterpret_cast<std::uintptr_t>(p), yb = reinterpret_cast<std::uintptr_t>(y.data());
      return bytes > 0 && y.size() > 0 && b < yb + static_cast<std::uintptr_t>(y.size()) * sizeof(T) &&
             yb < b + bytes;
    };
    bool hit = overlap(x.data(), static_cast<std::size_t>(x.size()) * sizeof(T));
    for (const auto& part : a.parts())
      hit = hit || overlap(part.ell.values().data(), part.ell.values().size_bytes()) ||
            overlap(part.ell.indices().data(), part.ell.indices().size_bytes()) ||
            overlap(part.rows.data(), part.rows.size() * sizeof(Index));
    SPINDLE_CHECK(!hit, UserError, what, Vector ? ": y" : ": Y", " overlaps ", Vector ? "x" : "X",
                  " or A's arrays in memory; the parts add into it, which would change them; hint: pass an output "
                  "with storage of its own");
    const std::int64_t shares = row_shares(a, Vector ? 1 : x.dim(1));
    if (shares <= 1) {  // one thread: zero, then every part over all its rows
      zero_(y);
      for (const auto& part : a.parts()) {
        const TensorView<const Index> rows(part.rows.data(), {static_cast<std::int64_t>(part.rows.size())});
        with_kernel(part.ell.width(), [&](const auto& k) { k(part.ell, rows, x, y); });
      }
      return;
    }
    // Horizontal fusion on the CPU: one parallel region over shares of the output rows; a share
    // zeroes its rows, then runs every part's pieces of those rows (nested calls run serially on
    // the thread that took the share). No two shares write one row, whatever the column
    // partitions: race-free without atomics. The kernels compile here, before the region.
    for (const auto& part : a.parts()) with_kernel(part.ell.width(), [](const auto& k) { k.compile(); });
    struct Region {
      const HybProduct* self;
      const Hyb<T, Index>* a;
      TensorView<const T> x;
      TensorView<T> y;
      std::vector<std::int64_t> bounds;
    } region{this, &a, x, y, a.row_shares(shares)};
    zero_.compile().runtime().pool().parallel_for(
        static_cast<std::int64_t>(region.bounds.size()) - 1, 1,
        [](void* closure, std::int64_t begin, std::int64_t end) {
          const Region& r = *static_cast<const Region*>(closure);
          for (std::int64_t i = begin; i < end; ++i) r.self->run_rows(*r.a, r.x, r.y, r.bounds[i], r.bounds[i + 1]);
        },
        &region);
  }
  void operator()(const Hyb<T, Index>& a, const Tensor<T>& x, Tensor<T>& y) const { (*this)(a, x.view(), y.view()); }

  // How many shares of the output rows a call with `feat` columns runs in one parallel region
  // on this object's runtime (1: the parts one after another). Enough per thread for the
  // pool's hand-out to even out a slow thread, none smaller than kShareWork products: a share
  // costs a kernel call per part (about a microsecond each).
  std::int64_t row_shares(const Hyb<T, Index>& a, std::int64_t feat) const {
    if (runtime::ThreadPool::in_parallel_region()) return 1;
    const std::int64_t threads = zero_.compile().runtime().pool().num_threads();
    if (threads <= 1) return 1;
    std::int64_t slots = 0;
    for (const auto& part : a.parts()) slots += part.ell.rows() * part.ell.width();
    const std::int64_t work = (a.rows() + slots) * std::max<std::int64_t>(1, feat);
    return std::max<std::int64_t>(1, std::min({kSharesPerThread * threads, work / kShareWork, a.rows()}));
  }

  // The sub-kernel that runs parts of ELL width w: explain() and compile() it.
  std::string explain(std::int64_t w) const {
    return with_kernel(w, [](const auto& k) { return k.explain(); });
  }
  const runtime::CompiledKernel& compile(std::int64_t w) const {
    return with_kernel(w, [](const auto& k) -> const runtime::CompiledKernel& { return k.compile(); });
  }
  // Every kernel through `rt` (tests run the engines and thread counts).
  HybProduct with_runtime(runtime::Runtime& rt) const {
    HybProduct h(*this);
    h.zero_ = h.zero_.with_runtime(rt);
    h.any_ = h.any_.with_runtime(rt);
    std::apply([&](auto&... k) { ((k = k.with_runtime(rt)), ...); }, h.fixed_);
    return h;
  }

 private:
  static constexpr std::size_t fixed_kernels = std::countr_zero(static_cast<std::uint64_t>(max_fixed_width)) + 1;
  template <std::int64_t W>
  static auto part_kernel() {
    if constexpr (Vector) return hyb_part_spmv<T, W, Index>();
    else return hyb_part_spmm<T, W, Index>();
  }
  static auto zero_kernel() {
    if constexpr (Vector) return zero_vector<T>();
    else return zero_matrix<T>();
  }
  static constexpr std::int64_t kSharesPerThread = 2, kShareWork = 32768;

  // Output rows [b0, b1): zeroed, then every part's pieces of those rows.
  void run_rows(const Hyb<T, Index>& a, TensorView<const T> x, TensorView<T> y, std::int64_t b0,
                std::int64_t b1) const {
    if (b0 == b1) return;
    const std::int64_t feat = Vector ? 1 : y.dim(1);
    std::vector<std::int64_t> shape{b1 - b0};
    if constexpr (!Vector) shape.push_back(feat);
    zero_(TensorView<T>(y.data() + b0 * feat, std::move(shape)));
    for (const auto& part : a.parts()) {
      const std::int64_t r0 = Hyb<T, Index>::piece_of(part, b0), r1 = Hyb<T, Index>::piece_of(part, b1);
      if (r0 == r1) continue;
      const TensorView<const Index> rows(part.rows.data() + r0, {r1 - r0});
      with_kernel(part.ell.width(), [&](const auto& k) { k(EllRows<T, Index>(part.ell, r0, r1), rows, x, y); });
    }
  }
  template <std::size_t... B>
  static auto make_fixed(std::index_sequence<B...>) {
    return std::make_tuple(part_kernel<std::int64_t{1} << B>()...);
  }
  template <class F>
  decltype(auto) with_kernel(std::int64_t w, F&& f) const {
    if (std::has_single_bit(static_cast<std::uint64_t>(w)) && w <= max_fixed_width)
      return visit_fixed(static_cast<std::size_t>(std::countr_zero(static_cast<std::uint64_t>(w))), f,
                         std::make_index_sequence<fixed_kernels>{});
    return f(any_);
  }
  template <class F, std::size_t B0, std::size_t... B>
  decltype(auto) visit_fixed(std::size_t b, F& f, std::index_sequence<B0, B...>) const {
    if constexpr (sizeof...(B) == 0) return f(std::get<B0>(fixed_));
    else return b == B0 ? f(std::get<B0>(fixed_)) : visit_fixed(b, f, std::index_sequence<B...>{});
  }

  decltype(make_fixed(std::make_index_sequence<fixed_kernels>{})) fixed_ = make_fixed(std::make_index_sequence<fixed_kernels>{});
  decltype(part_kernel<sp::dynamic>()) any_ = part_kernel<sp::dynamic>();
  decltype(zero_kernel()) zero_ = zero_kernel();
};

template <class T, class Index = std::int32_t>
using HybSpmm = HybProduct<T, Index, false>;
template <class T, class Index = std::int32_t>
using HybSpmv = HybProduct<T, Index, true>;

// Indirect writes (docs/language.md §4.1): E entries (COO triplets, edges, segment members)
// scattered into rows of the output by an index array checked at call time.
struct E : sp::dense_fixed {};
struct Jc : sp::dense_fixed {  // the columns of a COO matrix (rows of B)
  static constexpr const char* axis_name = "J";
};

// C = A B with A in coordinate form: C(row(e), k) += val(e) * B(col(e), k). Entries may
// come in any order and repeat a coordinate (they add up); row values must lie in
// [0, rows of C) (FormatError otherwise, nothing written); col values outside [0, rows of
// B) read 0 (§2). On the CPU each thread applies the updates of its share of the rows
// (partition_indirect_writes); on the GPU one thread per entry with atomic updates.
template <class T, class Index = std::int32_t>
auto coo_spmm() {
  return sp::kernel("coo_spmm", [](sp::in<T, E> val, sp::in<Index, E> row, sp::in<Index, E> col,
                                   sp::in<T, Jc, K> b, sp::out<T, I, K> c, sp::iter<E> e, sp::iter<K> k) {
    c(row(e), k) += val(e) * b(sp::cast<std::int64_t>(col(e)), k);
  });
}

// Segment (scatter) sum of rows: Out(seg(e), k) += X(e, k) — PyTorch's index_add_, the
// message aggregation of a GNN over an edge list. Segments no entry names are 0.
template <class T, class Index = std::int32_t>
auto segment_sum() {
  return sp::kernel("segment_sum", [](sp::in<T, E, K> x, sp::in<Index, E> seg, sp::out<T, I, K> out, sp::iter<E> e,
                                      sp::iter<K> k) { out(seg(e), k) += x(e, k); });
}

// CSC (Csc<T, Index>): a dense column level over a compressed row level. y = A x and
// C = A B iterate A by columns and add each entry's product into its row: the column loop is
// a reduction (two columns meet in a row), which the CPU schedule runs one block per thread,
// each applying the updates of its share of the rows (partition_indirect_writes, owned by the
// row coordinate); on the GPU with atomic updates.
struct CC : sp::dense_fixed {
  static constexpr const char* axis_name = "C";
};
template <class Index>
struct RC : sp::sparse_variable<CC, Index> {
  static constexpr const char* axis_name = "R";
};

template <class T, class Index = std::int32_t>
auto csc_spmv() {
  using R_ = RC<Index>;
  return sp::kernel("csc_spmv", [](sp::in<T, CC, R_> a, sp::in<T, CC> x, sp::out<T, sp::dense<R_>> y, sp::iter<CC> c,
                                   sp::iter<R_> r) { y(r) += a(c, r) * x(c); });
}

template <class T, class Index = std::int32_t>
auto csc_spmm() {
  using R_ = RC<Index>;
  return sp::kernel("csc_spmm", [](sp::in<T, CC, R_> a, sp::in<T, CC, K> b, sp::out<T, sp::dense<R_>, K> y,
                                   sp::iter<CC> c, sp::iter<R_> r, sp::iter<K> k) { y(r, k) += a(c, r) * b(c, k); });
}

// DCSR (Dcsr<T, Index>): the stored rows are a root sparse axis, their columns a compressed
// level under it. y = A x and C = A B iterate the stored rows only; the rows A does not
// store are 0 in the output.
template <class Index>
struct RowsD : sp::sparse_root<Index> {
  static constexpr const char* axis_name = "R";
};
template <class Index>
struct ColsD : sp::sparse_variable<RowsD<Index>, Index> {
  static constexpr const char* axis_name = "C";
};

template <class T, class Index = std::int32_t>
auto dcsr_spmv() {
  using R_ = RowsD<Index>;
  using C_ = ColsD<Index>;
  return sp::kernel("dcsr_spmv", [](sp::in<T, R_, C_> a, sp::in<T, sp::dense<C_>> x, sp::out<T, sp::dense<R_>> y,
                                    sp::iter<R_> r, sp::iter<C_> c) { y(r) += a(r, c) * x(c); });
}

template <class T, class Index = std::int32_t>
auto dcsr_spmm() {
  using R_ = RowsD<Index>;
  using C_ = ColsD<Index>;
  return sp::kernel("dcsr_spmm", [](sp::in<T, R_, C_> a, sp::in<T, sp::dense<C_>, K> b, sp::out<T, sp::dense<R_>, K> c,
                                    sp::iter<R_> r, sp::iter<C_> j, sp::iter<K> k) { c(r, k) += a(r, j) * b(j, k); });
}

// Sparse outputs of unknown pattern (docs/language.md §4.6): the kernel assembles C's pattern
// (a symbolic then a numeric phase, runtime/assembled_kernel.hpp). Call with a Csr of C's shape:
//   Csr<float> C(A.rows(), B.cols());  ops::spgemm<float>()(A, B, C);
template <class Index>
using JI = std::conditional_t<std::is_same_v<Index, std::int64_t>, J64, J>;
// B's columns: B's rows are A's columns (dense<J>), so row j of B is the fiber at A's column j.
template <class Index>
struct KB : sp::sparse_variable<sp::dense<JI<Index>>, Index> {
  static constexpr const char* axis_name = "K";
};
template <class Index>
struct CK : sp::assembled<I, KB<Index>, Index> {
  static constexpr const char* axis_name = "Kc";
};
template <class Index>
struct J2I : sp::sparse_variable<I, Index>, sp::coordinates_of<JI<Index>> {
  static constexpr const char* axis_name = "J2";
};
template <class Index>
struct CJ : sp::assembled<I, JI<Index>, Index> {
  static constexpr const char* axis_name = "Jc";
};

// C = A B, both CSR (Gustavson: row i of C accumulates the rows of B at the columns of row i of A).
template <class T, class Index = std::int32_t>
auto spgemm() {
  using J_ = JI<Index>;
  using K_ = KB<Index>;
  return sp::kernel("spgemm", sp::names{"A", "B", "C"},
                    [](sp::in<T, I, J_> a, sp::in<T, sp::dense<J_>, K_> b, sp::out<T, I, CK<Index>> c, sp::iter<I> i) {
                      sp::for_each<J_>([&](sp::iter<J_> j) {
                        sp::for_each<K_>([&](sp::iter<K_> k) { c(i, k) += a(i, j) * b(j, k); });
                      });
                    });
}

// C = alpha A + beta B, both CSR of one shape; C's pattern is the union of theirs, walked by
// one merge per row (union_of, docs/language.md §3.1) and appended in column order. A
// coordinate only one operand stores reads 0 in the other (alpha * 0 + beta * b), so a
// non-finite alpha or beta gives NaN there, as IEEE 0 * inf does.
template <class T, class Index = std::int32_t>
auto sparse_add() {
  using J_ = JI<Index>;
  using J2_ = J2I<Index>;
  return sp::kernel("sparse_add", sp::names{"A", "B", "alpha", "beta", "C"},
                    [](sp::in<T, I, J_> a, sp::in<T, I, J2_> b, sp::param<T> alpha, sp::param<T> beta,
                       sp::out<T, I, CJ<Index>> c, sp::iter<I> i) {
                      sp::for_each<sp::union_of<J_, J2_>>(
                          [&](sp::iter<sp::union_of<J_, J2_>> j) { c(i, j) = alpha * a(i, j) + beta * b(i, j); });
                    });
}

// C = A .* B (element-wise product), both CSR of one shape; C's pattern is the intersection
// of theirs (intersection_of: one merge per row, appended in column order).
template <class T, class Index = std::int32_t>
auto sparse_multiply() {
  using J_ = JI<Index>;
  using J2_ = J2I<Index>;
  return sp::kernel("sparse_multiply", sp::names{"A", "B", "C"},
                    [](sp::in<T, I, J_> a, sp::in<T, I, J2_> b, sp::out<T, I, CJ<Index>> c, sp::iter<I> i) {
                      sp::for_each<sp::intersection_of<J_, J2_>>(
                          [&](sp::iter<sp::intersection_of<J_, J2_>> j) { c(i, j) = a(i, j) * b(i, j); });
                    });
}

// Conversions as kernels whose output rows are scattered (docs/language.md §4.6,
// lower/assemble_scattered.hpp; CPU only, blocks of the outer loop in parallel):
// Aᵀ as a CSR (A's CSC arrays): row j of C lists the rows i of A that store column j, in
// ascending order.  Csr<float> At(A.cols(), A.rows());  ops::csr_to_csc<float>()(A, At);
template <class Index>
struct CT : sp::assembled<sp::dense<JI<Index>>, I, Index> {
  static constexpr const char* axis_name = "Ic";
};
template <class T, class Index = std::int32_t>
auto csr_to_csc() {
  using J_ = JI<Index>;
  return sp::kernel("csr_to_csc", sp::names{"A", "C"},
                    [](sp::in<T, I, J_> a, sp::out<T, sp::dense<J_>, CT<Index>> c, sp::iter<I> i, sp::iter<J_> j) {
                      c(j, i) = a(i, j);
                    });
}

// COO -> CSR: the entries (row[e], col[e], val[e]) in any order, duplicates summed; every row
// and column index is checked against C's shape before anything is written (FormatError).
//   Csr<float> C(rows, cols);  ops::coo_to_csr<float>()(row, col, val, C);   (1-d Tensors over E)
template <class Index>
struct CJn : sp::assembled<I, Jc, Index> {
  static constexpr const char* axis_name = "Jc";
};
template <class T, class Index = std::int32_t>
auto coo_to_csr() {
  return sp::kernel("coo_to_csr", sp::names{"row", "col", "val", "C"},
                    [](sp::in<Index, E> r, sp::in<Index, E> cl, sp::in<T, E> v, sp::out<T, I, CJn<Index>> c,
                       sp::iter<E> e) { c(r(e), cl(e)) += v(e); });
}

// Conversions whose output keeps only some of the elements the kernel visits: the writes are
// conditional (spindle::when, docs/language.md §4.7), so the pattern is what passes the test.
//
// Dense -> CSR: the nonzero elements of a 2-d Tensor D (rows x cols), each row's columns
// ascending. An element that compares equal to 0 (0 and -0) is dropped; NaN is kept.
//   Csr<float> C(D.dim(0), D.dim(1));  ops::dense_to_csr<float>()(D, C);
template <class T, class Index = std::int32_t>
auto dense_to_csr() {
  return sp::kernel("dense_to_csr", sp::names{"D", "C"},
                    [](sp::in<T, I, Jc> d, sp::out<T, I, CJn<Index>> c, sp::iter<I> i, sp::iter<Jc> j) {
                      sp::when(d(i, j) != 0, [&] { c(i, j) = d(i, j); });
                    });
}

// Pruning: the entries of a CSR whose magnitude is above `threshold`, in a new CSR of A's shape
// (explicit zeros are dropped by threshold 0; NaN entries are dropped: NaN > t is false).
//   Csr<float> C(A.rows(), A.cols());  ops::prune<float>()(A, 1e-3f, C);
template <class T, class Index = std::int32_t>
auto prune() {
  using J_ = JI<Index>;
  return sp::kernel("prune", sp::names{"A", "threshold", "C"},
                    [](sp::in<T, I, J_> a, sp::param<T> threshold, sp::out<T, I, CJ<Index>> c, sp::iter<I> i,
                       sp::iter<J_> j) {
                      sp::when(sp::abs(sp::Value<T>(a(i, j))) > threshold, [&] { c(i, j) = a(i, j); });
                    });
}

}  // namespace spindle::ops
