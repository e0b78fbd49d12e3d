// The matrix-level IR of GNN layers (GRANII, seed 004 §IV-B): leaves are matrices with a
// symbolic shape and an attribute (diagonal, sparse weighted/unweighted, dense data/weight);
// inner nodes are products (n-ary: adjacent products are associative and live on one level)
// and sums (n-ary, commutative). Row broadcasts are products with a diagonal matrix (the
// seed's Appendix C rewrite), so they re-associate like any other product. Non-linearities
// and softmax are barriers: they end an expression (the layer's other values enter the next
// expression as leaves).
//
//   auto D = gnn::diagonal("D", "N");             // D^-1/2 as a diagonal matrix
//   auto A = gnn::sparse("A", "N", "N");          // unweighted adjacency, nnz "E"
//   auto H = gnn::dense("H", "N", "K_in");
//   auto W = gnn::weight("W", "K_in", "K_out");
//   gnn::Expr gcn = D * A * D * H * W;            // one product of five factors
//
// Sizes are polynomials over symbols (N, E, K_in, ...): the cost of a primitive is one, and
// pruning (prune.hpp) compares them without knowing the input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "spindle/support/error.hpp"

namespace spindle::gnn {

// ---- sizes: polynomials with integer coefficients over named symbols ------------------
struct Monomial {
  std::int64_t coeff = 1;
  std::map<std::string, int> powers;  // symbol -> exponent (> 0)
  bool same_powers(const Monomial& o) const { return powers == o.powers; }
};

class Size {
 public:
  Size() = default;
  static Size symbol(const std::string& s) {
    Size r;
    Monomial m;
    m.powers[s] = 1;
    r.terms_.push_back(m);
    return r;
  }
  static Size constant(std::int64_t c) {
    Size r;
    if (c != 0) r.terms_.push_back(Monomial{c, {}});
    return r;
  }
  bool is_zero() const { return terms_.empty(); }
  const std::vector<Monomial>& terms() const { return terms_; }

  friend Size operator+(const Size& a, const Size& b) {
    Size r = a;
    for (const Monomial& m : b.terms_) r.add(m);
    return r;
  }
  friend Size operator*(const Size& a, const Size& b) {
    Size r;
    for (const Monomial& x : a.terms_)
      for (const Monomial& y : b.terms_) {
        Monomial m{x.coeff * y.coeff, x.powers};
        for (const auto& [s, p] : y.powers) m.powers[s] += p;
        r.add(m);
      }
    return r;
  }
  friend Size operator*(std::int64_t c, const Size& a) { return Size::constant(c) * a; }
  friend bool operator==(const Size& a, const Size& b) { return a.str() == b.str(); }

  // Value with every symbol bound; ShapeError names a symbol that is not.
  double eval(const std::map<std::string, double>& at) const {
    double total = 0;
    for (const Monomial& m : terms_) {
      double v = static_cast<double>(m.coeff);
      for (const auto& [s, p] : m.powers) {
        auto it = at.find(s);
        SPINDLE_CHECK(it != at.end(), ShapeError, "gnn: size symbol '", s, "' is not bound");
        for (int k = 0; k < p; ++k) v *= it->second;
      }
      total += v;
    }
    return total;
  }

  // Canonical text: monomials in a fixed order, symbols joined by '*'.
  std::string str() const {
    if (terms_.empty()) return "0";
    std::vector<std::string> parts;
    for (const Monomial& m : terms_) {
      std::string t;
      for (const auto& [s, p] : m.powers)
        for (int k = 0; k < p; ++k) t += (t.empty() ? "" : "*") + s;
      if (m.coeff != 1 || t.empty()) t = std::to_string(m.coeff) + (t.empty() ? "" : "*" + t);
      parts.push_back(t);
    }
    std::sort(parts.begin(), parts.end());
    std::string r;
    for (const std::string& p : parts) r += (r.empty() ? "" : " + ") + p;
    return r;
  }

 private:
  void add(const Monomial& m) {
    for (auto it = terms_.begin(); it != terms_.end(); ++it)
      if (it->same_powers(m)) {
        it->coeff += m.coeff;
        if (it->coeff == 0) terms_.erase(it);
        return;
      }
    if (m.coeff != 0) terms_.push_back(m);
  }
  std::vector<Monomial> terms_;
};

// ---- matrices ----------------------------------------------------------------------------
// Table I of the seed: dense {data, weight}, sparse {weighted, unweighted, diagonal}.
enum class MatrixKind { diagonal, sparse_unweighted, sparse_weighted, dense_data, dense_weight };

inline const char* kind_name(MatrixKind k) {
  switch (k) {
    case MatrixKind::diagonal: return "diagonal";
    case MatrixKind::sparse_unweighted: return "sparse unweighted";
    case MatrixKind::sparse_weighted: return "sparse weighted";
    case MatrixKind::dense_data: return "dense data";
    case MatrixKind::dense_weight: return "dense weight";
  }
  return "?";
}
inline bool is_sparse(MatrixKind k) {
  return k == MatrixKind::sparse_unweighted || k == MatrixKind::sparse_weighted;
}
inline bool is_dense(MatrixKind k) { return k == MatrixKind::dense_data || k == MatrixKind::dense_weight; }

// What every matrix value carries: its kind, symbolic shape and (sparse) stored count.
struct MatrixInfo {
  MatrixKind kind = MatrixKind::dense_data;
  std::string rows, cols;  // symbols
  Size nnz;                // sparse: stored entries; diagonal: rows; dense: rows * cols
};

// ---- expressions -------------------------------------------------------------------------
struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  enum class Op { leaf, product, sum };
  Op op = Op::leaf;
  std::string name;            // leaf
  MatrixInfo info;             // leaf: given; product/sum: derived
  std::vector<Expr> children;  // product: in order; sum: terms
  std::string key;             // canonical text (sum terms sorted)
};

namespace detail {
inline std::string product_key(const std::vector<Expr>& f) {
  std::string k = "(";
  for (std::size_t i = 0; i < f.size(); ++i) k += (i ? "·" : "") + f[i]->key;
  return k + ")";
}
inline std::string sum_key(const std::vector<Expr>& t) {
  std::vector<std::string> keys;
  for (const Expr& e : t) keys.push_back(e->key);
  std::sort(keys.begin(), keys.end());
  std::string k = "(";
  for (std::size_t i = 0; i < keys.size(); ++i) k += (i ? " + " : "") + keys[i];
  return k + ")";
}
}  // namespace detail

inline Expr leaf(std::string name, MatrixKind kind, std::string rows, std::string cols, Size nnz = {}) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprNode::Op::leaf;
  n->name = name;
  n->info.kind = kind;
  n->info.rows = std::move(rows);
  n->info.cols = std::move(cols);
  if (kind == MatrixKind::diagonal) {
    SPINDLE_CHECK(n->info.rows == n->info.cols, ShapeError, "gnn: diagonal matrix '", name, "' is ",
                  n->info.rows, " x ", n->info.cols, "; a diagonal matrix is square");
    nnz = Size::symbol(n->info.rows);
  } else if (is_dense(kind)) {
    nnz = Size::symbol(n->info.rows) * Size::symbol(n->info.cols);
  } else if (nnz.is_zero()) {
    nnz = Size::symbol("E");
  }
  n->info.nnz = std::move(nnz);
  n->key = std::move(name);
  return n;
}
inline Expr diagonal(std::string name, std::string n) { return leaf(std::move(name), MatrixKind::diagonal, n, n); }
inline Expr sparse(std::string name, std::string rows, std::string cols, bool weighted = false,
                   Size nnz = {}) {
  return leaf(std::move(name), weighted ? MatrixKind::sparse_weighted : MatrixKind::sparse_unweighted,
              std::move(rows), std::move(cols), std::move(nnz));
}
inline Expr dense(std::string name, std::string rows, std::string cols) {
  return leaf(std::move(name), MatrixKind::dense_data, std::move(rows), std::move(cols));
}
inline Expr weight(std::string name, std::string rows, std::string cols) {
  return leaf(std::move(name), MatrixKind::dense_weight, std::move(rows), std::move(cols));
}

// A product of factors (nested products flatten into one level). ShapeError when adjacent
// shapes do not chain.
inline Expr product(const std::vector<Expr>& factors) {
  SPINDLE_CHECK(!factors.empty(), ShapeError, "gnn: a product needs at least one factor");
  std::vector<Expr> flat;
  for (const Expr& f : factors) {
    if (f->op == ExprNode::Op::product)
      flat.insert(flat.end(), f->children.begin(), f->children.end());
    else
      flat.push_back(f);
  }
  if (flat.size() == 1) return flat[0];
  for (std::size_t i = 0; i + 1 < flat.size(); ++i)
    SPINDLE_CHECK(flat[i]->info.cols == flat[i + 1]->info.rows, ShapeError, "gnn: in the product ",
                  detail::product_key(flat), " factor ", flat[i]->key, " has ", flat[i]->info.cols,
                  " columns but ", flat[i + 1]->key, " has ", flat[i + 1]->info.rows, " rows");
  auto n = std::make_shared<ExprNode>();
  n->op = ExprNode::Op::product;
  n->children = flat;
  n->info.rows = flat.front()->info.rows;
  n->info.cols = flat.back()->info.cols;
  bool all_diag = std::all_of(flat.begin(), flat.end(),
                              [](const Expr& e) { return e->info.kind == MatrixKind::diagonal; });
  n->info.kind = all_diag ? MatrixKind::diagonal : MatrixKind::dense_data;
  n->info.nnz = Size::symbol(n->info.rows) * Size::symbol(n->info.cols);
  n->key = detail::product_key(flat);
  return n;
}

// A sum of terms of one shape (nested sums flatten).
inline Expr sum(const std::vector<Expr>& terms) {
  SPINDLE_CHECK(!terms.empty(), ShapeError, "gnn: a sum needs at least one term");
  std::vector<Expr> flat;
  for (const Expr& t : terms) {
    if (t->op == ExprNode::Op::sum)
      flat.insert(flat.end(), t->children.begin(), t->children.end());
    else
      flat.push_back(t);
  }
  if (flat.size() == 1) return flat[0];
  for (const Expr& t : flat)
    SPINDLE_CHECK(t->info.rows == flat[0]->info.rows && t->info.cols == flat[0]->info.cols, ShapeError,
                  "gnn: the sum ", detail::sum_key(flat), " adds ", t->key, " (", t->info.rows, " x ",
                  t->info.cols, ") to a ", flat[0]->info.rows, " x ", flat[0]->info.cols, " term");
  std::sort(flat.begin(), flat.end(), [](const Expr& a, const Expr& b) { return a->key < b->key; });
  auto n = std::make_shared<ExprNode>();
  n->op = ExprNode::Op::sum;
  n->children = flat;
  n->info.rows = flat[0]->info.rows;
  n->info.cols = flat[0]->info.cols;
  n->info.kind = MatrixKind::dense_data;
  n->info.nnz = Size::symbol(n->info.rows) * Size::symbol(n->info.cols);
  n->key = detail::sum_key(flat);
  return n;
}

inline Expr operator*(const Expr& a, const Expr& b) { return product({a, b}); }
inline Expr operator+(const Expr& a, const Expr& b) { return sum({a, b}); }

// The leaves of an expression, each once, in first-occurrence order.
inline void collect_leaves(const Expr& e, std::vector<Expr>& out) {
  if (e->op == ExprNode::Op::leaf) {
    for (const Expr& x : out)
      if (x->name == e->name) {
        SPINDLE_CHECK(x->info.kind == e->info.kind && x->info.rows == e->info.rows &&
                          x->info.cols == e->info.cols,
                      ShapeError, "gnn: two different matrices are named '", e->name, "'");
        return;
      }
    out.push_back(e);
    return;
  }
  for (const Expr& c : e->children) collect_leaves(c, out);
}

}  // namespace spindle::gnn
