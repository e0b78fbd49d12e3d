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

// C = diag(r) A B, C = A diag(s) B and C = diag(r) A diag(s) B (A weighted, or read as its
// pattern with Weighted = false): an SpMM with the row broadcasts around it folded into its
// accumulation (execute.hpp): one pass instead of two or three, r(i) and s(j) loaded once
// per row and per stored entry.
template <class T, bool Weighted>
auto spmm_row_scaled() {
  return sp::kernel(Weighted ? "gnn_spmm_row_scaled_w" : "gnn_spmm_row_scaled_u",
                    [](sp::in<T, I, J> a, sp::in<T, I> r, sp::in<T, sp::dense<J>, K> b, sp::out<T, I, K> c,
                       sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) {
                      if constexpr (Weighted) {
                        c(i, k) += r(i) * a(i, j) * b(j, k);
                      } else {
                        (void)a;
                        c(i, k) += r(i) * b(j, k);
                      }
                    });
}
template <class T, bool Weighted>
auto spmm_column_scaled() {
  return sp::kernel(Weighted ? "gnn_spmm_column_scaled_w" : "gnn_spmm_column_scaled_u",
                    [](sp::in<T, I, J> a, sp::in<T, sp::dense<J>> s, sp::in<T, sp::dense<J>, K> b,
                       sp::out<T, I, K> c, sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) {
                      if constexpr (Weighted) {
                        c(i, k) += a(i, j) * s(j) * b(j, k);
                      } else {
                        (void)a;
                        c(i, k) += s(j) * b(j, k);
                      }
                    });
}
template <class T, bool Weighted>
auto spmm_both_scaled() {
  return sp::kernel(Weighted ? "gnn_spmm_both_scaled_w" : "gnn_spmm_both_scaled_u",
                    [](sp::in<T, I, J> a, sp::in<T, I> r, sp::in<T, sp::dense<J>> s, sp::in<T, sp::dense<J>, K> b,
                       sp::out<T, I, K> c, sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) {
                      if constexpr (Weighted) {
                        c(i, k) += r(i) * a(i, j) * s(j) * b(j, k);
                      } else {
                        (void)a;
                        c(i, k) += r(i) * s(j) * b(j, k);
                      }
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

// C = A + B for CSR terms, C's pattern the union of theirs (an assembling kernel,
// docs/language.md §4.6); a term marked Unit is read through its pattern only (its entries
// count 1, its stored values are never loaded).
template <class T, bool UnitA, bool UnitB>
auto sparse_add_terms() {
  using J2 = ops::J2I<std::int32_t>;
  using C = ops::CJ<std::int32_t>;
  const char* name = UnitA ? (UnitB ? "gnn_sparse_add_uu" : "gnn_sparse_add_uw")
                           : (UnitB ? "gnn_sparse_add_wu" : "gnn_sparse_add_ww");
  return sp::kernel(name, [](sp::in<T, I, J> a, sp::in<T, I, J2> b, sp::out<T, I, C> c, sp::iter<I> i) {
    sp::for_each<J>([&](sp::iter<J> j) {
      if constexpr (UnitA) {
        (void)a;
        c(i, j) += T(1);
      } else {
        c(i, j) += a(i, j);
      }
    });
    sp::for_each<J2>([&](sp::iter<J2> j) {
      if constexpr (UnitB) {
        (void)b;
        c(i, j) += T(1);
      } else {
        c(i, j) += b(i, j);
      }
    });
  });
}

// C = A + B (dense)
template <class T>
auto dense_add() {
  return sp::kernel("gnn_dense_add", [](sp::in<T, I, K> a, sp::in<T, I, K> b, sp::out<T, I, K> c, sp::iter<I> i,
                                        sp::iter<K> k) { c(i, k) = a(i, k) + b(i, k); });
}

// C += A W and C += A B^T (dense, C read and updated in place: an inout output has no init,
// docs/language.md): a GEMM whose product is only a term of a dense sum accumulates into the
// sum's buffer instead of writing its own (execute.hpp).
template <class T>
auto gemm_accumulate() {
  return sp::kernel("gnn_gemm_acc", [](sp::in<T, I, K> a, sp::in<T, K, N> w, sp::inout<T, I, N> c, sp::iter<I> i,
                                       sp::iter<K> k, sp::iter<N> n) { c(i, n) += a(i, k) * w(k, n); });
}
template <class T>
auto gemm_nt_accumulate() {
  return sp::kernel("gnn_gemm_nt_acc", [](sp::in<T, I, K> a, sp::in<T, N, K> b, sp::inout<T, I, N> c, sp::iter<I> i,
                                          sp::iter<N> n, sp::iter<K> k) { c(i, n) += a(i, k) * b(n, k); });
}

// C = A W + B V and C = A W^T + B V^T (dense, one reduction over k with two products): two
// GEMM terms of a sum in one pass, the output tile written once. The row form updates C
// twice per k (register_tile keeps both updates on the accumulator: two fused multiply-adds,
// as fast as one GEMM over the concatenated inner axis); the dot-product form adds the two
// products first (measured no slower there: its narrow rows are bound by loads).
template <class T>
auto gemm_pair() {
  return sp::kernel("gnn_gemm_pair", [](sp::in<T, I, K> a, sp::in<T, K, N> w, sp::in<T, I, K> b, sp::in<T, K, N> v,
                                        sp::out<T, I, N> c, sp::iter<I> i, sp::iter<K> k, sp::iter<N> n) {
    c(i, n) += a(i, k) * w(k, n);
    c(i, n) += b(i, k) * v(k, n);
  });
}
template <class T>
auto gemm_nt_pair() {
  return sp::kernel("gnn_gemm_nt_pair", [](sp::in<T, I, K> a, sp::in<T, N, K> w, sp::in<T, I, K> b,
                                           sp::in<T, N, K> v, sp::out<T, I, N> c, sp::iter<I> i, sp::iter<N> n,
                                           sp::iter<K> k) { c(i, n) += a(i, k) * w(n, k) + b(i, k) * v(n, k); });
}

// C += B (dense, in place).
template <class T>
auto dense_accumulate() {
  return sp::kernel("gnn_dense_acc", [](sp::in<T, I, K> b, sp::inout<T, I, K> c, sp::iter<I> i, sp::iter<K> k) {
    c(i, k) += b(i, k);
  });
}

// C(e, k) = X(idx(e), k): the rows of X that an index picks (RGCNConv: the nodes a relation
// reads, the rows of the upstream gradient it writes). Indices are in [0, rows of X) by
// construction there (a row outside would read 0, docs/language.md §2).
template <class T>
auto gather_rows() {
  return sp::kernel("gnn_gather_rows", [](sp::in<T, ops::Jc, K> x, sp::in<std::int32_t, ops::E> idx,
                                          sp::out<T, ops::E, K> c, sp::iter<ops::E> e, sp::iter<K> k) {
    c(e, k) = x(sp::cast<std::int64_t>(idx(e)), k);
  });
}

// C(idx(e), k) += Y(e, k) (C read and updated in place): rows added into the rows an index
// names (RGCNConv: a relation's output into the rows it writes). An index outside C's rows is
// a FormatError before anything is written (docs/language.md §4.1).
template <class T>
auto scatter_add_rows() {
  return sp::kernel("gnn_scatter_add_rows", [](sp::in<T, ops::E, K> y, sp::in<std::int32_t, ops::E> idx,
                                               sp::inout<T, I, K> c, sp::iter<ops::E> e,
                                               sp::iter<K> k) { c(idx(e), k) += y(e, k); });
}

// --- backward (backward.hpp) -----------------------------------------------------------

// y(i) = sum_k a(i, k) b(i, k): the gradient of a row broadcast's diagonal.
template <class T>
auto row_dot() {
  return sp::kernel("gnn_row_dot", [](sp::in<T, I, K> a, sp::in<T, I, K> b, sp::out<T, I> y, sp::iter<I> i,
                                      sp::iter<K> k) { y(i) += a(i, k) * b(i, k); });
}

// y(k) = sum_i a(i, k) b(i, k): the gradient of a column broadcast's diagonal.
template <class T>
auto column_dot() {
  return sp::kernel("gnn_column_dot", [](sp::in<T, I, K> a, sp::in<T, I, K> b, sp::out<T, K> y, sp::iter<I> i,
                                         sp::iter<K> k) { y(k) += a(i, k) * b(i, k); });
}

// B(i, j) = sum_k X(i, k) Y(j, k) on A's stored positions, A read as a pattern: the gradient
// of a weighted SpMM C = A Y with respect to A's values, given X = dC.
template <class T>
auto sddmm_pattern() {
  return sp::kernel("gnn_sddmm_pattern",
                    [](sp::in<T, I, J> a, sp::in<T, I, K> x, sp::in<T, sp::dense<J>, K> y, sp::out<T, I, J> b,
                       sp::iter<I> i, sp::iter<J> j, sp::iter<K> k) {
                      (void)a;
                      b(i, j) += x(i, k) * y(j, k);
                    });
}

// C = A B^T: c(i, n) = sum_k a(i, k) b(n, k), a dot product per output element. For outputs
// narrower than one SIMD vector (K_out < 16 floats) it runs 4-10x faster than gemm above,
// whose vector loop is the output row; from one vector up gemm is 1.3-2.6x faster (ogbn-arxiv
// rows). matmul / matmul_transposed (execute.hpp) choose between them by the output width.
template <class T>
auto gemm_nt() {
  return sp::kernel("gnn_gemm_nt", [](sp::in<T, I, K> a, sp::in<T, N, K> b, sp::out<T, I, N> c, sp::iter<I> i,
                                      sp::iter<N> n, sp::iter<K> k) { c(i, n) += a(i, k) * b(n, k); });
}

// B = A^T (dense): b(n, k) = a(k, n) (a weight, for the other GEMM form).
template <class T>
auto transpose() {
  return sp::kernel("gnn_transpose", [](sp::in<T, K, N> a, sp::out<T, N, K> b, sp::iter<N> n, sp::iter<K> k) {
    b(n, k) = a(k, n);
  });
}

// The row blocks of A^T B (the weight gradient of a GEMM, a reduction over the long row
// axis): A and B viewed as [P, Q, R, K] and [P, Q, R, N] (P blocks of Q sub-blocks of R rows);
// block p's partial product goes to c(p, :, :), the blocks run in parallel (one per thread),
// and sum_blocks adds them. Loop order p, q, k, i, n: within a sub-block, a tile of six rows
// of c(p, k, :) stays in registers across the sub-block's R rows (register_tile), whose rows
// of B (R x N, ~16 KB) stay in L1 across k; c(p) (K x N) is read and written once per
// sub-block. Without the sub-blocks (order p, k, i, n over blocks of ~512 KB of B, L2) it ran
// 1.5-4x slower (2 threads: 24-110 GFLOP/s against 100-165, docs/gnn.md).
struct Block : sp::dense_fixed {};
struct SubBlock : sp::dense_fixed {};
template <class T>
auto gemm_tn_blocks() {
  return sp::kernel("gnn_gemm_tn_sub_blocks",
                    [](sp::in<T, Block, SubBlock, I, K> a, sp::in<T, Block, SubBlock, I, N> b,
                       sp::out<T, Block, K, N> c, sp::iter<Block> p, sp::iter<SubBlock> q, sp::iter<K> k,
                       sp::iter<I> i, sp::iter<N> n) { c(p, k, n) += a(p, q, i, k) * b(p, q, i, n); });
}

// C = sum_p A(p, :, :)
template <class T>
auto sum_blocks() {
  return sp::kernel("gnn_sum_blocks", [](sp::in<T, Block, K, N> a, sp::out<T, K, N> c, sp::iter<K> k,
                                         sp::iter<N> n, sp::iter<Block> p) { c(k, n) += a(p, k, n); });
}

// --- GAT attention (GATConv in layer.hpp) -----------------------------------------------

// s(i, j) = LeakyReLU(l(i) + r(j)), slope 0.2, on A's stored positions: GAT's edge scores.
template <class T>
auto gat_scores() {
  return sp::kernel("gnn_gat_scores", [](sp::in<T, I, J> a, sp::in<T, I> l, sp::in<T, sp::dense<J>> r,
                                         sp::out<T, I, J> s, sp::iter<I> i, sp::iter<J> j) {
    (void)a;
    auto e = l(i) + r(j);
    s(i, j) = sp::max(e, T(0.2) * e);
  });
}

// The backward of alpha = row softmax(s) and s = LeakyReLU(e) on one pattern:
// de(i, j) = alpha(i, j) (dalpha(i, j) - sum_j' alpha(i, j') dalpha(i, j')) LeakyReLU'(s(i, j)).
template <class T>
auto gat_scores_backward() {
  return sp::kernel("gnn_gat_scores_backward", [](sp::in<T, I, J> alpha, sp::in<T, I, J> dalpha, sp::in<T, I, J> s,
                                                  sp::out<T, I, J> de, sp::iter<I> i) {
    sp::local<T> dot(0, "row_dot");
    sp::for_each<J>([&](sp::iter<J> j) { dot += alpha(i, j) * dalpha(i, j); });
    sp::for_each<J>([&](sp::iter<J> j) {
      auto g = alpha(i, j) * (dalpha(i, j) - dot);
      de(i, j) = sp::select(s(i, j) > T(0), g, T(0.2) * g);
    });
  });
}

}  // namespace spindle::gnn::kernels
