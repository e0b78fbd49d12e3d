// Runs a composition (associate.hpp) on concrete operands with Spindle kernels.
//
//   gnn::Bindings<float> b;
//   b.sparse("A", adjacency).diagonal("D", d_inv_sqrt).dense("H", h).dense("W", w);
//   Tensor<float> out = gnn::execute(composition, b);
//
// Every leaf of the composition must be bound with its kind (sparse / diagonal / dense) and
// a shape that agrees with the symbols (N, K_in, ...) of every other leaf; values the layer
// already holds (`available`, e.g. GAT's "(H·W)") are bound with `value(key, tensor)`.
// A missing or mismatched operand is a ShapeError naming it, raised before any kernel runs.
// Sparse operands of an unweighted leaf are read through their pattern only.
#pragma once

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spindle/format/csr.hpp"
#include "spindle/format/tensor.hpp"
#include "spindle/format/transpose.hpp"
#include "spindle/gnn/associate.hpp"
#include "spindle/gnn/primitives.hpp"

namespace spindle::gnn {

template <class T>
class Bindings {
 public:
  Bindings& sparse(const std::string& name, const Csr<T>& a) {
    sparse_[name] = &a;
    return *this;
  }
  Bindings& diagonal(const std::string& name, TensorView<const T> d) {
    SPINDLE_CHECK(d.rank() == 1, ShapeError, "gnn: diagonal '", name, "' must be a vector, got rank ", d.rank());
    diagonal_[name] = d;
    return *this;
  }
  Bindings& dense(const std::string& name, TensorView<const T> x) {
    SPINDLE_CHECK(x.rank() == 2, ShapeError, "gnn: dense matrix '", name, "' must have rank 2, got ", x.rank());
    dense_[name] = x;
    return *this;
  }
  // A value the layer already holds, by expression key (e.g. "(H·W)").
  Bindings& value(const std::string& key, TensorView<const T> x) { return dense(key, x); }

  const Csr<T>* find_sparse(const std::string& n) const { return find(sparse_, n); }
  const TensorView<const T>* find_diagonal(const std::string& n) const { return find_view(diagonal_, n); }
  const TensorView<const T>* find_dense(const std::string& n) const { return find_view(dense_, n); }

 private:
  template <class M>
  static const Csr<T>* find(const M& m, const std::string& n) {
    auto it = m.find(n);
    return it == m.end() ? nullptr : it->second;
  }
  template <class M>
  static const TensorView<const T>* find_view(const M& m, const std::string& n) {
    auto it = m.find(n);
    return it == m.end() ? nullptr : &it->second;
  }
  std::map<std::string, const Csr<T>*> sparse_;
  std::map<std::string, TensorView<const T>> diagonal_, dense_;
};

namespace detail {

template <class T>
struct RtValue {
  MatrixKind kind = MatrixKind::dense_data;
  const Csr<T>* csr = nullptr;             // sparse (borrowed or owned below)
  std::shared_ptr<Csr<T>> owned_csr;
  TensorView<const T> view;                // diagonal (rank 1) or dense (rank 2)
  std::shared_ptr<Tensor<T>> owned;        // computed dense / diagonal values
  bool folded = false;                     // not kept: its only user computed it inside its own step
};

// Binds every symbol of every leaf to an extent; ShapeError on a missing operand or a
// disagreement, naming the operand and the symbol.
template <class T>
std::map<std::string, std::int64_t> bind_symbols(const Composition& c, const Bindings<T>& b) {
  std::map<std::string, std::int64_t> sym;
  auto bind = [&](const std::string& s, std::int64_t v, const std::string& who) {
    auto [it, fresh] = sym.emplace(s, v);
    SPINDLE_CHECK(fresh || it->second == v, ShapeError, "gnn: ", who, " gives ", s, " = ", v,
                  " but an earlier operand gave ", s, " = ", it->second);
  };
  for (const Step& st : c.steps) {
    if (st.prim != Primitive::input) continue;
    const MatrixInfo& info = st.value->info;
    const std::string name = st.reused ? st.value->key : st.value->name;
    if (st.reused || is_dense(info.kind)) {
      const auto* x = b.find_dense(name);
      SPINDLE_CHECK(x != nullptr, ShapeError, "gnn: no dense operand bound for '", name, "'");
      bind(info.rows, x->dim(0), "'" + name + "' (" + std::to_string(x->dim(0)) + " rows)");
      bind(info.cols, x->dim(1), "'" + name + "' (" + std::to_string(x->dim(1)) + " columns)");
    } else if (info.kind == MatrixKind::diagonal) {
      const auto* d = b.find_diagonal(name);
      SPINDLE_CHECK(d != nullptr, ShapeError, "gnn: no diagonal operand bound for '", name, "'");
      bind(info.rows, d->dim(0), "diagonal '" + name + "' (length " + std::to_string(d->dim(0)) + ")");
    } else {
      const auto* a = b.find_sparse(name);
      SPINDLE_CHECK(a != nullptr, ShapeError, "gnn: no sparse operand bound for '", name, "'");
      bind(info.rows, a->rows(), "sparse '" + name + "' (" + std::to_string(a->rows()) + " rows)");
      bind(info.cols, a->cols(), "sparse '" + name + "' (" + std::to_string(a->cols()) + " columns)");
    }
  }
  return sym;
}

template <class T>
std::shared_ptr<Tensor<T>> ones(std::int64_t n) {
  return std::make_shared<Tensor<T>>(Tensor<T>::full({n}, T(1)));
}

}  // namespace detail

// The intermediate and result buffers of a composition, kept between calls: a layer that
// runs again with the same shapes writes into the same memory (no allocation, no first-touch
// page faults; a fresh 20 MB intermediate costs more than the row broadcast that fills it).
// One workspace serves one composition on one thread at a time.
template <class T>
class Workspace {
 public:
  // Slot keys: the step, what the buffer is for (its role), and who uses it (space 0: the
  // step's forward result, 1: forward scratch, 2: backward), so that no two buffers that are
  // alive together share a slot.
  static std::size_t slot(std::size_t space, std::size_t role, std::size_t step) {
    return (space << 56) | (role << 40) | step;
  }

  // A dense buffer of this shape for step `s` (its previous contents are overwritten by the
  // kernel that writes it: Spindle kernels initialise their `out` buffers).
  std::shared_ptr<Tensor<T>> dense(std::size_t s, std::vector<std::int64_t> shape) {
    auto& slot = dense_[s];
    if (!slot || slot->shape() != shape) slot = std::make_shared<Tensor<T>>(Tensor<T>::zeros(std::move(shape)));
    return slot;
  }
  // A Csr with `a`'s pattern for step `s`, rebuilt when `a`'s pattern changes. The pattern
  // is compared by content (O(nnz)), not by address: a graph allocated where an earlier one
  // was (or a Csr assigned a new pattern in place) must not find the earlier one's copy.
  std::shared_ptr<Csr<T>> pattern_of(std::size_t s, const Csr<T>& a) {
    auto& slot = sparse_[s];
    if (!slot || !same_pattern(*slot, a)) {
      std::vector<std::int32_t> ptr(a.indptr().begin(), a.indptr().end()), idx(a.indices().begin(), a.indices().end());
      slot = std::make_shared<Csr<T>>(a.rows(), a.cols(), std::move(ptr), std::move(idx),
                                      std::vector<T>(static_cast<std::size_t>(a.nnz()), T(0)));
    }
    return slot;
  }

  // The transpose of `a` for slot `s` (rebuilt when `a`'s pattern changes, compared by
  // content as above; values refreshed on every call when `with_values`).
  const Csr<T>& transpose_of(std::size_t s, const Csr<T>& a, bool with_values) {
    auto& slot = transposed_[s];
    if (!slot.first || !same_pattern(*slot.first, a)) {
      std::vector<std::int32_t> ptr(a.indptr().begin(), a.indptr().end()), idx(a.indices().begin(), a.indices().end());
      slot = {std::make_shared<Csr<T>>(a.rows(), a.cols(), std::move(ptr), std::move(idx),
                                       std::vector<T>(static_cast<std::size_t>(a.nnz()), T(0))),
              std::make_shared<CsrTranspose<T>>(transpose(a))};
    } else if (with_values) {
      slot.second->refresh(a);
    }
    return slot.second->matrix;
  }

  // The values of every step of the last run (execute with this workspace), which backward
  // reads; `tape_text` names the composition that made them.
  std::vector<detail::RtValue<T>> tape;
  std::string tape_text;
  // How many dense sums the last execute, and how many gradient sums the last backward, with
  // this workspace computed as two GEMM products in one pass (matmul_pair; for tests and
  // diagnostics); and how many row broadcasts the last backward folded into an SpMM's pass
  // (backward.hpp).
  std::size_t gemm_pairs = 0, gradient_pairs = 0, gradient_folds = 0;
  // false: backward runs every row broadcast's gradient as a kernel of its own (to measure
  // the fold, and to test that both give the same gradients).
  bool fold_gradient_broadcasts = true;

 private:
  std::map<std::size_t, std::shared_ptr<Tensor<T>>> dense_;
  static bool same_pattern(const Csr<T>& x, const Csr<T>& a) {
    return x.rows() == a.rows() && x.cols() == a.cols() && x.nnz() == a.nnz() &&
           std::equal(x.indptr().begin(), x.indptr().end(), a.indptr().begin()) &&
           std::equal(x.indices().begin(), x.indices().end(), a.indices().begin());
  }
  std::map<std::size_t, std::shared_ptr<Csr<T>>> sparse_;
  // The source's pattern (to recognise it) and its transpose.
  std::map<std::size_t, std::pair<std::shared_ptr<Csr<T>>, std::shared_ptr<CsrTranspose<T>>>> transposed_;
};

namespace detail {

// One SpMM pass out = diag(r) · A · diag(c) · X (r, c null: no scaling on that side), A's
// values read when `weighted`: the forward's folded broadcasts and backward's passes on the
// transpose pick their kernel here (primitives.hpp's spmm_row/column/both_scaled).
template <class T>
void spmm_scaled(const Csr<T>& a, bool weighted, const TensorView<const T>* r, const TensorView<const T>* c,
                 TensorView<const T> x, Tensor<T>& out) {
  static const auto plain_u = kernels::spmm_unweighted<T>();
  static const auto plain_w = ops::spmm<T>();
  static const auto row_u = kernels::spmm_row_scaled<T, false>();
  static const auto row_w = kernels::spmm_row_scaled<T, true>();
  static const auto column_u = kernels::spmm_column_scaled<T, false>();
  static const auto column_w = kernels::spmm_column_scaled<T, true>();
  static const auto both_u = kernels::spmm_both_scaled<T, false>();
  static const auto both_w = kernels::spmm_both_scaled<T, true>();
  if (r && c) weighted ? both_w(a, *r, *c, x, out) : both_u(a, *r, *c, x, out);
  else if (r) weighted ? row_w(a, *r, x, out) : row_u(a, *r, x, out);
  else if (c) weighted ? column_w(a, *c, x, out) : column_u(a, *c, x, out);
  else weighted ? plain_w(a, x, out) : plain_u(a, x, out);
}

// Output widths below one SIMD vector (64 bytes) take the dot-product GEMM form.
template <class T>
constexpr std::int64_t kNarrowOutput = static_cast<std::int64_t>(64 / sizeof(T));

// The two GEMM forms: the row form (`gemm`, weights [K, N]) for outputs of a SIMD vector or
// wider, else the dot-product form (`gemm_nt`, weights [N, K]). A weight given in the other
// layout (`given_kn`: w is [K, N]; else [N, K], a product with w^T) is transposed into its
// workspace slot first. One weight (`Gemm(x, w, out)`) or two (`Gemm(x, w, y, v, out)`: the
// pair kernels, out = x w + y v).
template <class T, class Gemm, class GemmNt>
void gemm_in_form(const Gemm& gemm, const GemmNt& gemm_nt, bool given_kn, Tensor<T>& out, Workspace<T>& ws,
                  std::size_t slot, TensorView<const T> x, TensorView<const T> w) {
  static const auto transpose = kernels::transpose<T>();
  const bool row = (given_kn ? w.dim(1) : w.dim(0)) >= kNarrowOutput<T>;
  if (row == given_kn) return row ? gemm(x, w, out) : gemm_nt(x, w, out);
  auto wt = ws.dense(slot, {w.dim(1), w.dim(0)});
  transpose(w, *wt);
  row ? gemm(x, wt->view(), out) : gemm_nt(x, wt->view(), out);
}
template <class T, class Gemm, class GemmNt>
void gemm_pair_in_form(const Gemm& gemm, const GemmNt& gemm_nt, bool given_kn, Tensor<T>& out, Workspace<T>& ws,
                       std::size_t slot_w, std::size_t slot_v, TensorView<const T> x, TensorView<const T> w,
                       TensorView<const T> y, TensorView<const T> v) {
  static const auto transpose = kernels::transpose<T>();
  const bool row = (given_kn ? w.dim(1) : w.dim(0)) >= kNarrowOutput<T>;
  if (row == given_kn) return row ? gemm(x, w, y, v, out) : gemm_nt(x, w, y, v, out);
  auto wt = ws.dense(slot_w, {w.dim(1), w.dim(0)});
  auto vt = ws.dense(slot_v, {v.dim(1), v.dim(0)});
  transpose(w, *wt);
  transpose(v, *vt);
  row ? gemm(x, wt->view(), y, vt->view(), out) : gemm_nt(x, wt->view(), y, vt->view(), out);
}

// out = x w (dense), in the faster of the two GEMM forms for the output width; `slot` is a
// workspace slot for the transposed weight.
template <class T>
void matmul(TensorView<const T> x, TensorView<const T> w, Tensor<T>& out, Workspace<T>& ws, std::size_t slot) {
  static const auto gemm = kernels::gemm<T>();
  static const auto gemm_nt = kernels::gemm_nt<T>();
  gemm_in_form<T>(gemm, gemm_nt, true, out, ws, slot, x, w);
}

// out += x w (dense), the same two forms.
template <class T>
void matmul_accumulate(TensorView<const T> x, TensorView<const T> w, Tensor<T>& out, Workspace<T>& ws,
                       std::size_t slot) {
  static const auto gemm = kernels::gemm_accumulate<T>();
  static const auto gemm_nt = kernels::gemm_nt_accumulate<T>();
  gemm_in_form<T>(gemm, gemm_nt, true, out, ws, slot, x, w);
}

// out = x w + y v (dense, x and y of one width), in one pass; the same two forms as matmul.
// Two GEMM products summed always run as this pair: its row form updates the register tile
// with two multiply-adds per k (kernels::gemm_pair), so it runs as fast as one GEMM over the
// concatenated inner axis and writes the output once. Measured (2 threads, pubmed and
// ogbn-arxiv rows), pair / (GEMM + accumulating GEMM): 0.52-1.00 over 11 shapes from 16:16
// to 512:64 (geomean 0.86; 512:64 and 64:128 within noise of 1); the dot-product form
// (narrow outputs) 0.69-0.97.
template <class T>
void matmul_pair(TensorView<const T> x, TensorView<const T> w, TensorView<const T> y, TensorView<const T> v,
                 Tensor<T>& out, Workspace<T>& ws, std::size_t slot_w, std::size_t slot_v) {
  static const auto gemm = kernels::gemm_pair<T>();
  static const auto gemm_nt = kernels::gemm_nt_pair<T>();
  gemm_pair_in_form<T>(gemm, gemm_nt, true, out, ws, slot_w, slot_v, x, w, y, v);
}

// out = x w^T (dense), likewise.
template <class T>
void matmul_transposed(TensorView<const T> x, TensorView<const T> w, Tensor<T>& out, Workspace<T>& ws,
                       std::size_t slot) {
  static const auto gemm = kernels::gemm<T>();
  static const auto gemm_nt = kernels::gemm_nt<T>();
  gemm_in_form<T>(gemm, gemm_nt, false, out, ws, slot, x, w);
}

// out += x w^T (dense).
template <class T>
void matmul_transposed_accumulate(TensorView<const T> x, TensorView<const T> w, Tensor<T>& out, Workspace<T>& ws,
                                  std::size_t slot) {
  static const auto gemm = kernels::gemm_accumulate<T>();
  static const auto gemm_nt = kernels::gemm_nt_accumulate<T>();
  gemm_in_form<T>(gemm, gemm_nt, false, out, ws, slot, x, w);
}

// out = x w^T + y v^T (dense, x and y of one width) in one pass: backward's sum of two GEMM
// input gradients (an operand that feeds two GEMMs, SAGE's H).
template <class T>
void matmul_transposed_pair(TensorView<const T> x, TensorView<const T> w, TensorView<const T> y,
                            TensorView<const T> v, Tensor<T>& out, Workspace<T>& ws, std::size_t slot_w,
                            std::size_t slot_v) {
  static const auto gemm = kernels::gemm_pair<T>();
  static const auto gemm_nt = kernels::gemm_nt_pair<T>();
  gemm_pair_in_form<T>(gemm, gemm_nt, false, out, ws, slot_w, slot_v, x, w, y, v);
}

// out = x^T g (dense), a reduction over the long row axis that the CPU schedule keeps
// serial: P = (threads) blocks of rows, one partial product per block in parallel, each
// block in sub-blocks of R rows whose rows of g (~16 KB) stay in L1 while a register tile of
// the partial accumulates them (gemm_tn_blocks), then the partials' sum. The rows that do
// not fill P x Q x R go in two more calls (P blocks of one sub-block, then the last < P rows
// as one). The tile's vector loop is g's row: for a narrow g and a wide x, g^T x is formed
// and transposed back. `slot_t` and `slot_p`: workspace slots for the transposed product and
// the partials.
template <class T>
void matmul_tn(TensorView<const T> x, TensorView<const T> g, Tensor<T>& out, Workspace<T>& ws, std::size_t slot_t,
               std::size_t slot_p) {
  static const auto blocks = kernels::gemm_tn_blocks<T>();
  static const auto sum = kernels::sum_blocks<T>();
  static const auto transpose = kernels::transpose<T>();
  std::shared_ptr<Tensor<T>> t;
  if (g.dim(1) < kNarrowOutput<T> && x.dim(1) >= kNarrowOutput<T>) {
    t = ws.dense(slot_t, {g.dim(1), x.dim(1)});
    std::swap(x, g);
  }
  Tensor<T>& dst = t ? *t : out;
  const std::int64_t rows = x.dim(0), k = x.dim(1), n = g.dim(1);
  const std::int64_t threads =
      runtime::ThreadPool::in_parallel_region() ? 1 : runtime::Runtime::default_instance().pool().num_threads();
  const std::int64_t p = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, rows));
  // R: a power of two, R rows of g about 16 KB, 16 to 128 rows (measured best at N = 16..512).
  std::int64_t r = 16;
  while (r < 128 && 2 * r * n * static_cast<std::int64_t>(sizeof(T)) <= 16384) r *= 2;
  auto part = ws.dense(slot_p, {2 * p + 1, k, n});
  T* pd = part->values().data();
  std::int64_t done = 0, used = 0;
  auto run = [&](std::int64_t np, std::int64_t nq, std::int64_t nr) {
    if (np * nq * nr == 0) return;
    blocks(TensorView<const T>(x.values().data() + done * k, {np, nq, nr, k}),
           TensorView<const T>(g.values().data() + done * n, {np, nq, nr, n}),
           TensorView<T>(pd + used * k * n, {np, k, n}));
    done += np * nq * nr;
    used += np;
  };
  run(p, rows / (p * r), r);
  run(p, 1, (rows - done) / p);
  run(1, 1, rows - done);
  if (used == 0) {  // no rows: the product is 0
    std::fill(dst.values().begin(), dst.values().end(), T(0));
  } else {
    sum(TensorView<const T>(pd, {used, k, n}), dst);
  }
  if (t) transpose(t->view(), out);
}

// Runs every step of `c` (after checking the operands) and returns the values of all steps.
// With `step_ms`, the wall time of each step (milliseconds, 0 for inputs), indexed like c.steps.
template <class T>
std::vector<RtValue<T>> run_steps(const Composition& c, const Bindings<T>& b, std::vector<double>* step_ms,
                                  Workspace<T>* ws = nullptr) {
  Workspace<T> local;
  if (!ws) ws = &local;
  ws->gemm_pairs = 0;
  static_assert(std::is_floating_point_v<T>, "gnn::execute: T must be float or double");
  (void)bind_symbols(c, b);

  static const auto row_broadcast = kernels::row_broadcast<T>();
  static const auto column_broadcast = kernels::column_broadcast<T>();
  static const auto scale_w = ops::scale<T>();
  static const auto scale_u = kernels::scale_pattern<T>();
  static const auto add = kernels::dense_add<T>();
  static const auto add_ww = kernels::sparse_add_terms<T, false, false>();
  static const auto add_wu = kernels::sparse_add_terms<T, false, true>();
  static const auto add_uw = kernels::sparse_add_terms<T, true, false>();
  static const auto add_uu = kernels::sparse_add_terms<T, true, true>();

  std::vector<RtValue<T>> v(c.steps.size());
  // Timed runs (spindle-profile's per-primitive samples) keep every step separate.
  const std::vector<bool> into_sum = step_ms ? std::vector<bool>(c.steps.size(), false) : gemms_into_sums(c);
  const std::vector<int> computed_by = step_ms ? std::vector<int>(c.steps.size(), -1) : broadcasts_folded(c);
  auto folded_into = [&](std::size_t by, std::size_t k) -> int {  // the step s.args[k] if `by` computes it, else -1
    const int a = c.steps[by].args.at(k);
    return computed_by[static_cast<std::size_t>(a)] == static_cast<int>(by) ? a : -1;
  };
  static const auto add_into = kernels::dense_accumulate<T>();
  std::size_t current = 0;  // the step being run (its workspace slot)
  auto dense_result = [&](std::int64_t r, std::int64_t k) { return ws->dense(Workspace<T>::slot(0, 0, current), {r, k}); };
  if (step_ms) step_ms->assign(c.steps.size(), 0.0);
  for (std::size_t s = 0; s < c.steps.size(); ++s) {
    const Step& st = c.steps[s];
    current = s;
    const auto started = std::chrono::steady_clock::now();
    auto& out = v[s];
    out.kind = st.value->info.kind;
    out.folded = computed_by[s] >= 0 || (st.prim == Primitive::gemm && into_sum[s]);
    if (computed_by[s] >= 0) continue;  // computed by the step that reads it
    auto arg = [&](std::size_t k) -> RtValue<T>& { return v[static_cast<std::size_t>(st.args.at(k))]; };
    switch (st.prim) {
      case Primitive::input: {
        const std::string name = st.reused ? st.value->key : st.value->name;
        if (st.reused || is_dense(out.kind)) out.view = *b.find_dense(name);
        else if (out.kind == MatrixKind::diagonal) out.view = *b.find_diagonal(name);
        else out.csr = b.find_sparse(name);
        break;
      }
      case Primitive::diag_product: {
        const auto& x = arg(0).view;
        const auto& y = arg(1).view;
        out.owned = ws->dense(Workspace<T>::slot(0, 0, s), {x.dim(0)});
        for (std::int64_t i = 0; i < x.dim(0); ++i) out.owned->values()[i] = x.values()[i] * y.values()[i];
        out.view = out.owned->view();
        break;
      }
      case Primitive::sparse_scale: {
        // (D, A), (A, D) or (D, A, D)
        const std::size_t ai = arg(0).kind == MatrixKind::diagonal ? 1 : 0;
        const auto& a = arg(ai);
        std::shared_ptr<Tensor<T>> r1, s1;
        TensorView<const T> r, sc;
        if (ai == 1) r = arg(0).view; else { r1 = detail::ones<T>(a.csr->rows()); r = r1->view(); }
        if (st.args.size() > ai + 1) sc = arg(ai + 1).view; else { s1 = detail::ones<T>(a.csr->cols()); sc = s1->view(); }
        out.owned_csr = ws->pattern_of(Workspace<T>::slot(0, 0, s), *a.csr);
        if (a.kind == MatrixKind::sparse_unweighted) scale_u(*a.csr, r, sc, *out.owned_csr);
        else scale_w(*a.csr, r, sc, T(1), *out.owned_csr);
        out.csr = out.owned_csr.get();
        break;
      }
      case Primitive::row_broadcast:
      case Primitive::column_broadcast: {
        if (const int p = st.prim == Primitive::row_broadcast ? folded_into(s, 1) : -1; p >= 0) {
          // D·(A·X) or D·(A·(D2·X)) in one SpMM pass
          const Step& ps = c.steps[static_cast<std::size_t>(p)];
          const RtValue<T>& a = v[static_cast<std::size_t>(ps.args.at(0))];
          const int q = folded_into(static_cast<std::size_t>(p), 1);
          const auto& x = q >= 0 ? v[static_cast<std::size_t>(c.steps[static_cast<std::size_t>(q)].args.at(1))].view
                                 : v[static_cast<std::size_t>(ps.args.at(1))].view;
          out.owned = dense_result(a.csr->rows(), x.dim(1));
          const auto& r = arg(0).view;
          const auto* d2 = q >= 0 ? &v[static_cast<std::size_t>(c.steps[static_cast<std::size_t>(q)].args.at(0))].view
                                  : nullptr;
          detail::spmm_scaled<T>(*a.csr, ps.prim == Primitive::spmm_weighted, &r, d2, x, *out.owned);
          out.view = out.owned->view();
          break;
        }
        const bool row = st.prim == Primitive::row_broadcast;
        const auto& d = arg(row ? 0 : 1).view;
        const auto& x = arg(row ? 1 : 0).view;
        out.owned = dense_result(x.dim(0), x.dim(1));
        if (row) row_broadcast(d, x, *out.owned);
        else column_broadcast(d, x, *out.owned);
        out.view = out.owned->view();
        break;
      }
      case Primitive::spmm_weighted:
      case Primitive::spmm_unweighted: {
        const auto& a = arg(0);
        if (const int q = folded_into(s, 1); q >= 0) {  // A·(D·X) in one pass
          const Step& sq = c.steps[static_cast<std::size_t>(q)];
          const auto& d = v[static_cast<std::size_t>(sq.args.at(0))].view;
          const auto& x = v[static_cast<std::size_t>(sq.args.at(1))].view;
          out.owned = dense_result(a.csr->rows(), x.dim(1));
          detail::spmm_scaled<T>(*a.csr, st.prim == Primitive::spmm_weighted, nullptr, &d, x, *out.owned);
          out.view = out.owned->view();
          break;
        }
        const auto& x = arg(1).view;
        out.owned = dense_result(a.csr->rows(), x.dim(1));
        detail::spmm_scaled<T>(*a.csr, st.prim == Primitive::spmm_weighted, nullptr, nullptr, x, *out.owned);
        out.view = out.owned->view();
        break;
      }
      case Primitive::gemm: {
        if (into_sum[s]) break;  // computed by the sum that reads it
        const auto& x = arg(0).view;
        const auto& w = arg(1).view;
        out.owned = dense_result(x.dim(0), w.dim(1));
        matmul(x, w, *out.owned, *ws, Workspace<T>::slot(1, 0, s));
        out.view = out.owned->view();
        break;
      }
      case Primitive::dense_add: {
        // The first two terms in one pass — two GEMM products of one inner width (gemm_pair),
        // a GEMM product (matmul), else the first two terms added — then each further term
        // added in place, a GEMM product accumulating.
        const auto product = [&](std::size_t k) -> const Step* {
          const auto a = static_cast<std::size_t>(st.args[k]);
          return into_sum[a] ? &c.steps[a] : nullptr;
        };
        const auto operand = [&](const Step* g, std::size_t k) -> const TensorView<const T>& {
          return v[static_cast<std::size_t>(g->args.at(k))].view;
        };
        const std::size_t none = st.args.size();
        std::size_t first = 0, second = none;
        while (first < none && !product(first)) ++first;
        if (first < none) {
          const Step* g0 = product(first);
          out.owned = dense_result(operand(g0, 0).dim(0), operand(g0, 1).dim(1));
          second = first + 1;
          while (second < none && !(product(second) && operand(product(second), 0).dim(1) == operand(g0, 0).dim(1)))
            ++second;
          if (second < none) {
            ++ws->gemm_pairs;
            matmul_pair(operand(g0, 0), operand(g0, 1), operand(product(second), 0), operand(product(second), 1),
                        *out.owned, *ws, Workspace<T>::slot(1, 0, s), Workspace<T>::slot(1, 1, s));
          } else {
            matmul(operand(g0, 0), operand(g0, 1), *out.owned, *ws, Workspace<T>::slot(1, 0, s));
          }
        } else {
          first = 0;
          second = 1;
          const auto& x0 = arg(0).view;
          out.owned = dense_result(x0.dim(0), x0.dim(1));
          add(x0, arg(1).view, *out.owned);
        }
        for (std::size_t k = 0; k < none; ++k) {
          if (k == first || k == second) continue;
          if (const Step* g = product(k))
            matmul_accumulate(operand(g, 0), operand(g, 1), *out.owned, *ws, Workspace<T>::slot(1, k + 2, s));
          else
            add_into(arg(k).view, *out.owned);
        }
        out.view = out.owned->view();
        break;
      }
      case Primitive::sparse_add: {
        // Union of the terms' patterns, values summed (unweighted entries count 1), folded
        // pairwise by assembling kernels; a diagonal term is a CSR of its n diagonal entries.
        std::vector<std::shared_ptr<Csr<T>>> diagonals;
        auto term = [&](std::size_t k) -> std::pair<const Csr<T>*, bool> {
          const auto& x = arg(k);
          if (x.kind != MatrixKind::diagonal) return {x.csr, x.kind == MatrixKind::sparse_unweighted};
          const std::int64_t n = x.view.dim(0);
          std::vector<std::int32_t> indptr(static_cast<std::size_t>(n) + 1), indices(static_cast<std::size_t>(n));
          for (std::int64_t i = 0; i < n; ++i) indptr[static_cast<std::size_t>(i) + 1] = static_cast<std::int32_t>(i + 1);
          for (std::int64_t i = 0; i < n; ++i) indices[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
          diagonals.push_back(std::make_shared<Csr<T>>(
              n, n, std::move(indptr), std::move(indices), std::vector<T>(x.view.values().begin(), x.view.values().end())));
          return {diagonals.back().get(), false};
        };
        auto add_pair = [&](std::pair<const Csr<T>*, bool> a, std::pair<const Csr<T>*, bool> b) {
          auto c = std::make_shared<Csr<T>>(a.first->rows(), a.first->cols());
          if (a.second && b.second) add_uu(*a.first, *b.first, *c);
          else if (a.second) add_uw(*a.first, *b.first, *c);
          else if (b.second) add_wu(*a.first, *b.first, *c);
          else add_ww(*a.first, *b.first, *c);
          return c;
        };
        out.owned_csr = add_pair(term(0), term(1));
        for (std::size_t k = 2; k < st.args.size(); ++k) out.owned_csr = add_pair({out.owned_csr.get(), false}, term(k));
        out.csr = out.owned_csr.get();
        break;
      }
    }
    if (step_ms)
      (*step_ms)[s] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  }
  return v;
}

}  // namespace detail

// Runs `c` and returns its (dense) result. With `step_ms`, the wall time of each step
// (milliseconds, 0 for inputs) is stored there, indexed like c.steps.
template <class T>
Tensor<T> execute(const Composition& c, const Bindings<T>& b, std::vector<double>* step_ms = nullptr) {
  const MatrixInfo& out_info = c.steps.at(static_cast<std::size_t>(c.result)).value->info;
  SPINDLE_CHECK(is_dense(out_info.kind), ShapeError, "gnn: composition ", c.text, " yields a ",
                kind_name(out_info.kind), " matrix; execute returns dense results only");
  auto v = detail::run_steps(c, b, step_ms);
  auto& r = v[static_cast<std::size_t>(c.result)];
  if (r.owned) return std::move(*r.owned);  // the local workspace's buffer: moved out
  std::vector<T> copy(r.view.values().begin(), r.view.values().end());
  return Tensor<T>::from(std::move(copy), r.view.shape());
}

// Runs `c` with its buffers in `ws` (reused from the previous call with the same shapes) and
// returns a view of the result, valid until the next call with `ws`. A result that is an
// input (a composition of one leaf) is returned as that input's view.
template <class T>
TensorView<const T> execute(const Composition& c, const Bindings<T>& b, Workspace<T>& ws,
                            std::vector<double>* step_ms = nullptr) {
  const MatrixInfo& out_info = c.steps.at(static_cast<std::size_t>(c.result)).value->info;
  SPINDLE_CHECK(is_dense(out_info.kind), ShapeError, "gnn: composition ", c.text, " yields a ",
                kind_name(out_info.kind), " matrix; execute returns dense results only");
  ws.tape = detail::run_steps(c, b, step_ms, &ws);
  ws.tape_text = c.text;
  return ws.tape[static_cast<std::size_t>(c.result)].view;
}

}  // namespace spindle::gnn
