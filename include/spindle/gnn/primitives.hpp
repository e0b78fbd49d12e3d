// The dense and sparse primitives that GNN compositions are made of, as Spindle kernels
// (the sparse ones from ops.hpp where they exist). Unweighted sparse operands are read
// through their pattern only: their stored values are never loaded.
#pragma once

#include "spindle/kernel.hpp"
#include "spindle/ops.hpp"

namespace spindle::gnn::kernels {

namespace sp = spindle;
using ops::I;
using ops::J;
using ops::K;
using ops::N;

// C = D B: c(i, k) = d(i) b(i, k)
template <class T>
auto row_broadcast() {
  return sp::kernel("gnn_row_broadcast", [](sp::in<T, I> d, sp::in<T, I, K> b, sp::out<T, I, K> c, sp::iter<I> i,
                                            sp::iter<K> k) { c(i, k) = d(i) * b(i, k); });
}

// C = B D: c(i, k) = b(i, k) d(k)
template <class T>
auto column_broadcast() {
  return sp::kernel("gnn_column_broadcast", [](sp::in<T, K> d, sp::in<T, I, K> b, sp::out<T, I, K> c,
                                               sp::iter<I> i, sp::iter<K> k) { c(i, k) = b(i, k) * d(k); });
}

// C = A B for a pattern-only A: c(i, k) = sum over stored (i, j) of b(j, k).
template <class T>
auto spmm_unweighted() {
  return sp::kernel("gnn_spmm_unweighted",
                    [](sp::in<T, I, J> a, sp::in<T, sp::dense<J>, K> b, sp::out<T, I, K> c, sp::iter<I> i,
                       sp::iter<J> j, sp::iter<K> k) {
                      (void)a;
                      c(i, k) += b(j, k);
                    });
}

// B = diag(r) pattern(A) diag(s): b(i, j) = r(i) s(j) on A's stored positions.
template <class T>
auto scale_pattern() {
  return sp::kernel("gnn_scale_pattern", [](sp::in<T, I, J> a, sp::in<T, I> r, sp::in<T, sp::dense<J>> s,
                                            sp::out<T, I, J> b, sp::iter<I> i, sp::iter<J> j) {
    (void)a;
    b(i, j) = r(i) * s(j);
  });
}

// C = A W (dense · dense): c(i, n) = sum_k a(i, k) w(k, n)
template <class T>
auto gemm() {
  return sp::kernel("gnn_gemm", [](sp::in<T, I, K> a, sp::in<T, K, N> w, sp::out<T, I, N> c, sp::iter<I> i,
                                   sp::iter<K> k, sp::iter<N> n) { c(i, n) += a(i, k) * w(k, n); });
}

// C = A + B (dense)
template <class T>
auto dense_add() {
  return sp::kernel("gnn_dense_add", [](sp::in<T, I, K> a, sp::in<T, I, K> b, sp::out<T, I, K> c, sp::iter<I> i,
                                        sp::iter<K> k) { c(i, k) = a(i, k) + b(i, k); });
}

}  // namespace spindle::gnn::kernels
