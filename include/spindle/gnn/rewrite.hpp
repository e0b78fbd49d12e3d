// Equivalent forms of a matrix expression under distributivity (GRANII, seed 004 §IV-B: the
// IR rewrites that uncover re-associations a sum would otherwise block):
//   distribute  X·(Y + Z)·W  ->  X·Y·W + X·Z·W
//   factor      X·S + Y·S    ->  (X + Y)·S      (common suffix S; likewise a common prefix)
// `equivalent_forms` returns the closure of an expression under both rewrites applied
// anywhere, each form once (by canonical key), the given form first. The closure is finite
// for the layers here; `limit` bounds it for any other input (ShapeError beyond it, never a
// silently partial set).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "spindle/gnn/matrix_ir.hpp"

namespace spindle::gnn {

namespace detail {

inline std::vector<Expr> factors_of(const Expr& e) {
  if (e->op == ExprNode::Op::product) return e->children;
  return {e};
}

// One rewrite at the root of `e`.
inline std::vector<Expr> root_rewrites(const Expr& e) {
  std::vector<Expr> out;
  if (e->op == ExprNode::Op::product) {
    const auto& f = e->children;
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (f[i]->op != ExprNode::Op::sum) continue;
      std::vector<Expr> terms;
      for (const Expr& t : f[i]->children) {
        std::vector<Expr> g(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(i));
        g.push_back(t);
        g.insert(g.end(), f.begin() + static_cast<std::ptrdiff_t>(i) + 1, f.end());
        terms.push_back(product(g));
      }
      out.push_back(sum(terms));
    }
  }
  if (e->op == ExprNode::Op::sum) {
    const auto& t = e->children;
    // Common suffix (side 0) or prefix (side 1) of length len shared by a group of terms.
    for (int side = 0; side < 2; ++side) {
      std::size_t longest = 0;
      for (const Expr& x : t) longest = std::max(longest, factors_of(x).size());
      for (std::size_t len = 1; len < longest; ++len) {
        std::map<std::string, std::vector<std::size_t>> groups;
        for (std::size_t k = 0; k < t.size(); ++k) {
          auto f = factors_of(t[k]);
          if (f.size() <= len) continue;  // the remainder must not be empty
          std::vector<Expr> part = side == 0 ? std::vector<Expr>(f.end() - static_cast<std::ptrdiff_t>(len), f.end())
                                             : std::vector<Expr>(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(len));
          groups[product_key(part)].push_back(k);
        }
        for (const auto& [key, members] : groups) {
          if (members.size() < 2) continue;
          std::vector<Expr> rest, others;
          std::vector<Expr> common;
          for (std::size_t k = 0; k < t.size(); ++k) {
            if (std::find(members.begin(), members.end(), k) == members.end()) {
              others.push_back(t[k]);
              continue;
            }
            auto f = factors_of(t[k]);
            auto cut = side == 0 ? f.end() - static_cast<std::ptrdiff_t>(len) : f.begin() + static_cast<std::ptrdiff_t>(len);
            if (side == 0) {
              rest.push_back(product(std::vector<Expr>(f.begin(), cut)));
              common.assign(cut, f.end());
            } else {
              rest.push_back(product(std::vector<Expr>(cut, f.end())));
              common.assign(f.begin(), cut);
            }
          }
          std::vector<Expr> g;
          if (side == 0) {
            g.push_back(sum(rest));
            g.insert(g.end(), common.begin(), common.end());
          } else {
            g = common;
            g.push_back(sum(rest));
          }
          Expr factored = product(g);
          others.push_back(factored);
          out.push_back(others.size() == 1 ? factored : sum(others));
        }
      }
    }
  }
  return out;
}

// Every expression one rewrite away from `e` (at the root or inside one child).
inline std::vector<Expr> neighbours(const Expr& e) {
  std::vector<Expr> out = root_rewrites(e);
  if (e->op == ExprNode::Op::leaf) return out;
  for (std::size_t i = 0; i < e->children.size(); ++i)
    for (const Expr& c : neighbours(e->children[i])) {
      std::vector<Expr> kids = e->children;
      kids[i] = c;
      out.push_back(e->op == ExprNode::Op::product ? product(kids) : sum(kids));
    }
  return out;
}

}  // namespace detail

inline std::vector<Expr> equivalent_forms(const Expr& e, std::size_t limit = 256) {
  std::vector<Expr> forms{e};
  std::set<std::string> seen{e->key};
  for (std::size_t next = 0; next < forms.size(); ++next)
    for (const Expr& n : detail::neighbours(forms[next])) {
      if (!seen.insert(n->key).second) continue;
      SPINDLE_CHECK(forms.size() < limit, ShapeError, "gnn: ", e->key, " has more than ", limit,
                    " equivalent forms under distribution and factoring; raise the limit");
      forms.push_back(n);
    }
  return forms;
}

}  // namespace spindle::gnn
