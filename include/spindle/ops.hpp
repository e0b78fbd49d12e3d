// A library of standard sparse kernels written in the Spindle DSL. Each function returns a
// fresh Kernel (definition only; it compiles on first call). Element types are template
// parameters. Tests, benchmarks and the GNN layers use these; the examples show how to
// write such kernels yourself.
//
//   auto spmm = spindle::ops::spmm<float>();
//   spmm(A, X, Y);            // Y = A X
#pragma once

#include "spindle/kernel.hpp"

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

}  // namespace spindle::ops
