// Reverse-mode gradients of a composition (backward of execute.hpp), so that any composition
// of any layer can be trained:
//
//   gnn::Workspace<float> ws;
//   auto out = gnn::execute(c, b, ws);                            // forward; ws keeps every step's value
//   auto g = gnn::backward(c, ws, d_out, {"W", "H"});             // dLoss/dW, dLoss/dH given dLoss/dout
//   g.at("W")                                                     // [K_in, K_out], a view into ws
//
// Each step's rule, with dC the gradient of its result (summed over the steps that use it):
//   gemm            C = X W        dX = dC W^T (matmul_transposed) dW = X^T dC (gemm_tn_blocks + sum_blocks)
//                                   (dX is formed when X's gradient is summed: two such products
//                                   of one X, e.g. SAGE's H W_self and H W_neigh, in one pass:
//                                   execute.hpp's matmul_pair)
//   spmm            C = A X        dX = A^T dC (SpMM on the cached transpose)
//                                   dA = dC X^T on A's pattern (sddmm_pattern), weighted A only
//   row_broadcast   C = diag(d) X  dX = diag(d) dC                 dd = rowwise dot(dC, X) (row_dot)
//                                   (folded into an SpMM's pass on the transpose where
//                                   associate.hpp's gradient_broadcast_folds says so: an SpMM X = A Z
//                                   whose only reader is the broadcast forms dZ = A^T diag(d) dC,
//                                   spmm_column_scaled; an SpMM C = A X with X = diag(d2) Z read by it
//                                   alone, d2 not differentiated, forms dZ = diag(d2) A^T dC,
//                                   spmm_row_scaled / spmm_both_scaled: GCN's D (A (D X)) goes back
//                                   in one SpMM, like the forward; ws.gradient_folds counts them)
//   column_broadcast C = X diag(d) dX = dC diag(d)                 dd = columnwise dot(dC, X) (column_dot)
//   dense_add       C = X + Y      dX = dY = dC
//   sparse_scale    S = diag(r) A diag(s)   dA = diag(r) dS diag(s) (scale), weighted A only
//                                   dr(i) = sum_j dS(i,j) A(i,j) s(j), ds likewise (host loops, O(nnz))
//   sparse_add      S = A + B (union)       dA = dS on A's entries (host gather, O(nnz log))
//   diag_product    z = x * y      dx = dz * y, dy = dz * x (host loops, O(N))
// Unweighted sparse operands have no values and so no gradient; a gradient of a sparse
// weighted operand (e.g. GAT's attention scores) is its values' gradient, in its stored
// order (rank 1, nnz entries). Only the steps on a path from a requested leaf to the result
// get gradients.
//
// The returned views point into the workspace (and, for a gradient passed straight
// through, into d_out) and stay valid until the next forward or backward with it. The
// operands bound for the forward run must still be alive and unchanged.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "spindle/gnn/execute.hpp"

namespace spindle::gnn {

namespace detail {

// A step's gradient: contributions from the steps that use it, summed when read.
template <class T>
struct Adjoint {
  // dC W^T from a GEMM C = X W that this step is X of, computed when the sum is read: two of
  // them (an operand that feeds two GEMMs) in one pass, further ones accumulated into it.
  struct Product {
    TensorView<const T> dc, w;
  };
  std::vector<Product> products;
  std::vector<TensorView<const T>> dense;           // dense / diagonal contributions
  // diag(d) g from the row broadcast C = diag(d) X, X this SpMM step, whose gradient is folded
  // into this step's pass (GradientFold::into_producer): then its only contribution.
  struct Scaled {
    TensorView<const T> d, g;
  };
  std::optional<Scaled> scaled;
  std::vector<std::shared_ptr<const void>> keep;    // owners of contributions outside the workspace
  std::vector<std::shared_ptr<Csr<T>>> sparse;      // sparse contributions (the step's pattern)
};

template <class T>
class BackwardRun {
 public:
  BackwardRun(const Composition& c, Workspace<T>& ws)
      : c_(c), ws_(ws), v_(ws.tape), adj_(c.steps.size()) {}

  std::map<std::string, TensorView<const T>> run(TensorView<const T> d_out, const std::set<std::string>& wrt) {
    const std::size_t n = c_.steps.size();
    // Which steps lie on a path from a requested leaf.
    std::vector<char> needs(n, 0);
    std::set<std::string> found;
    for (std::size_t s = 0; s < n; ++s) {
      const Step& st = c_.steps[s];
      if (st.prim == Primitive::input) {
        const std::string name = input_name(st);
        if (wrt.count(name)) {
          needs[s] = 1;
          found.insert(name);
        }
      } else {
        for (int a : st.args) needs[s] |= needs[static_cast<std::size_t>(a)];
      }
    }
    for (const std::string& w : wrt) {
      if (found.count(w)) continue;
      std::string names;
      for (const Step& st : c_.steps)
        if (st.prim == Primitive::input) names += (names.empty() ? "" : ", ") + input_name(st);
      SPINDLE_CHECK(false, UserError, "gnn::backward: '", w, "' is not an operand of ", c_.text, " (operands: ", names, ")");
    }
    for (std::size_t s = 0; s < n; ++s) {
      const Step& st = c_.steps[s];
      if (st.prim != Primitive::input || !needs[s] || st.value->info.kind != MatrixKind::sparse_unweighted) continue;
      SPINDLE_CHECK(false, UserError, "gnn::backward: '", input_name(st),
                   "' is an unweighted (pattern-only) sparse operand: it has no values to differentiate");
    }
    const auto& res = v_.at(static_cast<std::size_t>(c_.result));
    SPINDLE_CHECK(d_out.rank() == 2 && d_out.dim(0) == res.view.dim(0) && d_out.dim(1) == res.view.dim(1), ShapeError,
                  "gnn::backward: the result's gradient must be [", res.view.dim(0), ", ", res.view.dim(1), "]",
                  d_out.rank() == 2 ? ", got [" + std::to_string(d_out.dim(0)) + ", " + std::to_string(d_out.dim(1)) + "]"
                                    : ", got rank " + std::to_string(d_out.rank()));
    adj_[static_cast<std::size_t>(c_.result)].dense.push_back(d_out);
    needs_ = needs;
    folds_ = ws_.fold_gradient_broadcasts ? gradient_broadcast_folds(c_, needs)
                                          : std::vector<GradientFold>(n, GradientFold::none);

    std::map<std::string, TensorView<const T>> grads;
    for (std::size_t s = n; s-- > 0;) {
      const Step& st = c_.steps[s];
      // (a broadcast folded into its reader: that SpMM formed its input's gradient)
      if (!needs[s] || folds_[s] == GradientFold::into_reader) continue;
      if (st.prim == Primitive::input) {
        grads[input_name(st)] = gradient_view(s);
        continue;
      }
      step_back(s);
    }
    for (const std::string& w : wrt)
      if (!grads.count(w)) grads[w] = zero_gradient(w);  // an operand the result does not depend on
    return grads;
  }

 private:
  static std::string input_name(const Step& st) { return st.reused ? st.value->key : st.value->name; }

  // Roles: 0-15 this step's scratch, 16 + k a gradient for its k-th argument.
  static std::size_t slot(std::size_t s, std::size_t role) { return Workspace<T>::slot(2, role, s); }

  // Step s's forward value; one the forward folded into its user's step (execute.hpp:
  // RtValue::folded) is recomputed here, once per backward, when a rule reads it (a row
  // broadcast's diagonal gradient reads the SpMM result it scaled). Role 4 holds it, role 5
  // a GEMM's transposed weight.
  const RtValue<T>& value(std::size_t s) {
    const RtValue<T>& f = v_.at(s);
    if (!f.folded) return f;
    if (auto it = recomputed_.find(s); it != recomputed_.end()) return it->second;
    static const auto row_broadcast = kernels::row_broadcast<T>();
    const Step& st = c_.steps[s];
    RtValue<T> r;
    r.kind = f.kind;
    const RtValue<T>& a = value(arg_of(s, 0));
    const RtValue<T>& b = value(arg_of(s, 1));
    switch (st.prim) {
      case Primitive::gemm:
        r.owned = ws_.dense(slot(s, 4), {a.view.dim(0), b.view.dim(1)});
        matmul(a.view, b.view, *r.owned, ws_, slot(s, 5));
        break;
      case Primitive::spmm_weighted:
      case Primitive::spmm_unweighted:
        r.owned = ws_.dense(slot(s, 4), {a.csr->rows(), b.view.dim(1)});
        detail::spmm_scaled<T>(*a.csr, st.prim == Primitive::spmm_weighted, nullptr, nullptr, b.view, *r.owned);
        break;
      case Primitive::row_broadcast:
        r.owned = ws_.dense(slot(s, 4), b.view.shape());
        row_broadcast(a.view, b.view, *r.owned);
        break;
      default:
        SPINDLE_CHECK(false, InternalError, "gnn::backward: step ", s, " (", primitive_name(st.prim),
                      ") was folded by the forward and cannot be recomputed");
    }
    r.view = r.owned->view();
    return recomputed_.emplace(s, std::move(r)).first->second;
  }
  std::size_t arg_of(std::size_t s, std::size_t k) const { return static_cast<std::size_t>(c_.steps[s].args.at(k)); }
  bool needs_arg(std::size_t s, std::size_t k) const {
    // A step on a path from a requested leaf received an adjoint slot; the others are skipped.
    return needs_[arg_of(s, k)];
  }

  // The summed dense (or diagonal) gradient of step s.
  TensorView<const T> dense_adjoint(std::size_t s) {
    auto& a = adj_[s];
    SPINDLE_CHECK(!a.scaled, InternalError, "gnn::backward: step ", s, "'s gradient was to be folded into its own pass");
    if (!a.products.empty()) return sum_with_products(s);
    SPINDLE_CHECK(!a.dense.empty(), InternalError, "gnn::backward: step ", s, " has no gradient");
    if (a.dense.size() == 1) return a.dense[0];
    static const auto add = kernels::dense_add<T>();
    TensorView<const T> acc = a.dense[0];
    for (std::size_t k = 1; k < a.dense.size(); ++k) {
      if (acc.rank() == 1) {
        auto buf = ws_.dense(slot(s, 10 + k % 2), acc.shape());
        for (std::int64_t i = 0; i < acc.dim(0); ++i) buf->values()[i] = acc.values()[i] + a.dense[k].values()[i];
        acc = buf->view();
      } else {
        auto buf = ws_.dense(slot(s, 10 + k % 2), acc.shape());
        add(acc, a.dense[k], *buf);
        acc = buf->view();
      }
    }
    a.dense = {acc};
    return acc;
  }

  // The sum of step s's contributions when some are GEMM products dC W^T: the first two of
  // one inner width in one pass (matmul_transposed_pair; else the first alone), further
  // products accumulated, then the other contributions added in place. Roles 1-3: transposed
  // weights (each consumed at once).
  TensorView<const T> sum_with_products(std::size_t s) {
    static const auto add_into = kernels::dense_accumulate<T>();
    auto& a = adj_[s];
    const auto& p = a.products;
    const std::size_t n = p.size();
    auto out = ws_.dense(slot(s, 10), {p[0].dc.dim(0), p[0].w.dim(0)});
    std::size_t second = 1;
    while (second < n && p[second].dc.dim(1) != p[0].dc.dim(1)) ++second;
    if (second < n) {
      detail::matmul_transposed_pair(p[0].dc, p[0].w, p[second].dc, p[second].w, *out, ws_, slot(s, 1), slot(s, 2));
      ++ws_.gradient_pairs;
    } else {
      detail::matmul_transposed(p[0].dc, p[0].w, *out, ws_, slot(s, 1));
    }
    for (std::size_t k = 1; k < n; ++k)
      if (k != second) detail::matmul_transposed_accumulate(p[k].dc, p[k].w, *out, ws_, slot(s, 3));
    for (const auto& d : a.dense) add_into(d, *out);
    a.products.clear();
    a.dense = {out->view()};
    return a.dense[0];
  }

  // The summed sparse gradient of step s (values on the step's pattern).
  std::shared_ptr<Csr<T>> sparse_adjoint(std::size_t s) {
    auto& a = adj_[s];
    SPINDLE_CHECK(!a.sparse.empty(), InternalError, "gnn::backward: step ", s, " has no sparse gradient");
    auto acc = a.sparse[0];
    for (std::size_t k = 1; k < a.sparse.size(); ++k) {
      auto buf = ws_.pattern_of(slot(s, 12 + k % 2), *acc);
      auto o = buf->values();
      const auto x = acc->values(), y = a.sparse[k]->values();
      for (std::size_t q = 0; q < o.size(); ++q) o[q] = x[q] + y[q];
      acc = buf;
    }
    a.sparse = {acc};
    return acc;
  }

  TensorView<const T> gradient_view(std::size_t s) {
    if (!adj_[s].sparse.empty()) {
      auto g = sparse_adjoint(s);
      return TensorView<const T>(g->values().data(), {g->nnz()});
    }
    return dense_adjoint(s);
  }

  TensorView<const T> zero_gradient(const std::string& w) {
    for (std::size_t s = 0; s < c_.steps.size(); ++s) {
      const Step& st = c_.steps[s];
      if (st.prim != Primitive::input || input_name(st) != w) continue;
      const auto& val = value(s);
      std::vector<std::int64_t> shape = val.csr ? std::vector<std::int64_t>{val.csr->nnz()} : val.view.shape();
      auto buf = ws_.dense(slot(s, 14), shape);
      std::fill(buf->values().begin(), buf->values().end(), T(0));
      return buf->view();
    }
    SPINDLE_CHECK(false, InternalError, "gnn::backward: no operand '", w, "'");
    return {};
  }

  void push_dense(std::size_t to, const std::shared_ptr<Tensor<T>>& g) { adj_[to].dense.push_back(g->view()); }

  // dense gradient buffer for a contribution of step s to its k-th argument
  std::shared_ptr<Tensor<T>> buffer(std::size_t s, std::size_t k, std::vector<std::int64_t> shape) {
    return ws_.dense(slot(s, 16 + k), std::move(shape));
  }

  void gemm_tn(TensorView<const T> x, TensorView<const T> g, Tensor<T>& out, std::size_t s) {
    detail::matmul_tn(x, g, out, ws_, slot(s, 8), slot(s, 15));
  }

  void step_back(std::size_t s) {
    static const auto row_broadcast = kernels::row_broadcast<T>();
    static const auto column_broadcast = kernels::column_broadcast<T>();
    static const auto row_dot = kernels::row_dot<T>();
    static const auto column_dot = kernels::column_dot<T>();
    static const auto sddmm = kernels::sddmm_pattern<T>();
    static const auto scale_w = ops::scale<T>();

    const Step& st = c_.steps[s];
    const std::size_t nargs = st.args.size();
    switch (st.prim) {
      case Primitive::input:
        break;
      case Primitive::gemm: {
        const auto dc = dense_adjoint(s);
        const auto& x = value(arg_of(s, 0)).view;
        const auto& w = value(arg_of(s, 1)).view;
        if (needs_arg(s, 0)) adj_[arg_of(s, 0)].products.push_back({dc, w});  // dX = dC W^T, when read
        if (needs_arg(s, 1)) {
          auto dw = buffer(s, 1, w.shape());
          gemm_tn(x, dc, *dw, s);
          push_dense(arg_of(s, 1), dw);
        }
        break;
      }
      case Primitive::spmm_weighted:
      case Primitive::spmm_unweighted: {
        const Csr<T>& a = *value(arg_of(s, 0)).csr;
        const bool weighted = st.prim == Primitive::spmm_weighted;
        const bool need_da = weighted && needs_arg(s, 0);
        auto& adj = adj_[s];
        // dC = diag(d1) G from this step's only reader (GradientFold::into_producer): the
        // scaling goes into the SpMM's pass (dA, which would read dC, is then not asked for).
        const bool in_scaled = adj.scaled.has_value();
        if (needs_arg(s, 1)) {
          const std::size_t x = arg_of(s, 1);
          // X = diag(d2) Z read by this step alone, d2 not differentiated (GradientFold::into_reader):
          // dZ = diag(d2) A^T dC in the same pass (X's own step then has nothing left to do).
          const bool out_scaled = folds_[x] == GradientFold::into_reader;
          const TensorView<const T> g = in_scaled ? adj.scaled->g : dense_adjoint(s);
          const Csr<T>& at = ws_.transpose_of(slot(s, 0), a, weighted);
          auto dx = out_scaled ? buffer(x, 1, {a.cols(), g.dim(1)}) : buffer(s, 1, {a.cols(), g.dim(1)});
          // dZ or dX = diag(d2)? A^T diag(d1)? G: X's scaling on the transpose's rows, dC's on its columns
          const TensorView<const T>* d2 = out_scaled ? &value(arg_of(x, 0)).view : nullptr;
          const TensorView<const T>* d1 = in_scaled ? &adj.scaled->d : nullptr;
          detail::spmm_scaled<T>(at, weighted, d2, d1, g, *dx);
          ws_.gradient_folds += std::size_t{in_scaled} + std::size_t{out_scaled};
          push_dense(out_scaled ? arg_of(x, 1) : x, dx);
        }
        if (need_da) {  // (never with in_scaled: gradient_broadcast_folds)
          const auto dc = dense_adjoint(s);
          auto da = ws_.pattern_of(slot(s, 16), a);
          sddmm(a, dc, value(arg_of(s, 1)).view, *da);
          adj_[arg_of(s, 0)].sparse.push_back(da);
        }
        break;
      }
      case Primitive::row_broadcast:
      case Primitive::column_broadcast: {
        const bool row = st.prim == Primitive::row_broadcast;
        const std::size_t di = row ? 0 : 1, xi = row ? 1 : 0;
        const auto dc = dense_adjoint(s);
        const auto& d = value(arg_of(s, di)).view;
        if (folds_[s] == GradientFold::into_producer) {
          adj_[arg_of(s, xi)].scaled = typename Adjoint<T>::Scaled{d, dc};  // diag(d) dC, in X's SpMM pass
        } else if (needs_arg(s, xi)) {
          auto dx = buffer(s, xi, dc.shape());
          if (row) row_broadcast(d, dc, *dx);
          else column_broadcast(d, dc, *dx);
          push_dense(arg_of(s, xi), dx);
        }
        if (needs_arg(s, di)) {
          auto dd = buffer(s, di, d.shape());
          const auto& x = value(arg_of(s, xi)).view;  // (recomputed if the forward folded it)
          if (row) row_dot(dc, x, *dd);
          else column_dot(dc, x, *dd);
          push_dense(arg_of(s, di), dd);
        }
        break;
      }
      case Primitive::dense_add: {
        const auto dc = dense_adjoint(s);
        for (std::size_t k = 0; k < nargs; ++k)
          if (needs_arg(s, k)) adj_[arg_of(s, k)].dense.push_back(dc);
        break;
      }
      case Primitive::diag_product: {
        const auto dz = dense_adjoint(s);
        for (std::size_t k = 0; k < 2; ++k) {
          if (!needs_arg(s, k)) continue;
          const auto& other = value(arg_of(s, 1 - k)).view;
          auto g = buffer(s, k, dz.shape());
          for (std::int64_t i = 0; i < dz.dim(0); ++i) g->values()[i] = dz.values()[i] * other.values()[i];
          push_dense(arg_of(s, k), g);
        }
        break;
      }
      case Primitive::sparse_scale: {
        const auto ds = sparse_adjoint(s);
        const std::size_t ai = value(arg_of(s, 0)).kind == MatrixKind::diagonal ? 1 : 0;
        const RtValue<T>& av = value(arg_of(s, ai));
        const Csr<T>& a = *av.csr;
        const bool has_r = ai == 1, has_s = nargs > ai + 1;
        auto ones_r = detail::ones<T>(a.rows()), ones_s = detail::ones<T>(a.cols());
        const TensorView<const T> r = has_r ? value(arg_of(s, 0)).view : ones_r->view();
        const TensorView<const T> sc = has_s ? value(arg_of(s, ai + 1)).view : ones_s->view();
        const bool weighted = av.kind != MatrixKind::sparse_unweighted;
        if (weighted && needs_arg(s, ai)) {
          auto da = ws_.pattern_of(slot(s, 16 + ai), a);
          scale_w(*ds, r, sc, T(1), *da);
          adj_[arg_of(s, ai)].sparse.push_back(da);
        }
        const auto ptr = a.indptr();
        const auto idx = a.indices();
        const auto av_vals = a.values();
        const auto g = ds->values();
        auto entry = [&](std::int64_t q) { return weighted ? av_vals[q] : T(1); };
        if (has_r && needs_arg(s, 0)) {
          auto dr = buffer(s, 0, {a.rows()});
          for (std::int64_t i = 0; i < a.rows(); ++i) {
            T acc = 0;
            for (auto q = ptr[i]; q < ptr[i + 1]; ++q) acc += g[q] * entry(q) * sc.values()[idx[q]];
            dr->values()[i] = acc;
          }
          push_dense(arg_of(s, 0), dr);
        }
        if (has_s && needs_arg(s, ai + 1)) {
          auto dsv = buffer(s, ai + 1, {a.cols()});
          std::fill(dsv->values().begin(), dsv->values().end(), T(0));
          for (std::int64_t i = 0; i < a.rows(); ++i)
            for (auto q = ptr[i]; q < ptr[i + 1]; ++q) dsv->values()[idx[q]] += g[q] * r.values()[i] * entry(q);
          push_dense(arg_of(s, ai + 1), dsv);
        }
        break;
      }
      case Primitive::sparse_add: {
        const auto ds = sparse_adjoint(s);
        const auto uptr = ds->indptr();
        const auto uidx = ds->indices();
        const auto g = ds->values();
        auto find = [&](std::int64_t i, std::int64_t j) -> T {
          const auto* b = uidx.data() + uptr[i];
          const auto* e = uidx.data() + uptr[i + 1];
          const auto* p = std::lower_bound(b, e, static_cast<std::int32_t>(j));
          SPINDLE_CHECK(p != e && *p == j, InternalError, "gnn::backward: (", i, ", ", j,
                        ") missing from a sparse sum's pattern");
          return g[p - uidx.data()];
        };
        for (std::size_t k = 0; k < nargs; ++k) {
          if (!needs_arg(s, k)) continue;
          const RtValue<T>& t = value(arg_of(s, k));
          if (t.kind == MatrixKind::diagonal) {
            auto dd = buffer(s, k, {t.view.dim(0)});
            for (std::int64_t i = 0; i < t.view.dim(0); ++i) dd->values()[i] = find(i, i);
            push_dense(arg_of(s, k), dd);
          } else if (t.kind != MatrixKind::sparse_unweighted) {
            auto dt = ws_.pattern_of(slot(s, 16 + k), *t.csr);
            const auto tptr = t.csr->indptr();
            const auto tidx = t.csr->indices();
            for (std::int64_t i = 0; i < t.csr->rows(); ++i)
              for (auto q = tptr[i]; q < tptr[i + 1]; ++q) dt->values()[q] = find(i, tidx[q]);
            adj_[arg_of(s, k)].sparse.push_back(dt);
          }
        }
        break;
      }
    }
  }

  const Composition& c_;
  Workspace<T>& ws_;
  const std::vector<RtValue<T>>& v_;
  std::vector<Adjoint<T>> adj_;
  std::vector<char> needs_;
  std::vector<GradientFold> folds_;  // associate.hpp's gradient_broadcast_folds (all none when switched off)
  std::map<std::size_t, RtValue<T>> recomputed_;  // folded forward values, recomputed when read
};

}  // namespace detail

// The gradients of the operands named in `wrt` (leaf names, or keys of held values such as
// "(H·W)"), given d_out = dLoss/d(result), for the forward run of `c` that `ws` holds
// (execute(c, b, ws) must have run last with this workspace). Dense operands get [rows,
// cols] gradients, diagonals [n], sparse weighted operands their values' gradient [nnz].
// UserError for a name that is not an operand or an unweighted sparse operand, ShapeError
// for a d_out of the wrong shape.
template <class T>
std::map<std::string, TensorView<const T>> backward(const Composition& c, Workspace<T>& ws, TensorView<const T> d_out,
                                                    const std::set<std::string>& wrt) {
  SPINDLE_CHECK(ws.tape_text == c.text && ws.tape.size() == c.steps.size(), UserError,
                "gnn::backward: the workspace holds no forward run of ", c.text,
                ws.tape_text.empty() ? std::string() : " (its last run was " + ws.tape_text + ")",
                "; call execute(c, bindings, ws) first");
  ws.gradient_pairs = 0;
  ws.gradient_folds = 0;
  detail::BackwardRun<T> run(c, ws);
  return run.run(d_out, wrt);
}

}  // namespace spindle::gnn
