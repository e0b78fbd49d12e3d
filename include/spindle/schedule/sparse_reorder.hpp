// sparse_reorder (stage I -> stage I): SparseTIR's stage-I schedule. The user's schedule gives
// one sparse iteration its loop order by axis names, outermost first:
//
//   sp_iter spmm([I, J, K], "SRS")    sparse_reorder("spmm", {"I", "K", "J"})    sp_iter spmm([I, K, J], "SSR")
//
// It runs after order_iterations and overrides its choice for that iteration. The order
// must be one the language allows (docs/language.md §3, the rules order_iterations obeys,
// autosched/order_iterations.hpp): a child axis after its parent, an innermost iteration
// that writes no local declared outside it, no co-iterated axis, reduction axes in their
// written order when the body reads what it writes, and no spatial axis under a reduction
// axis when the iteration has an init. Anything else is a UserError that says which rule.
// Pre/post: stage I; semantics preserved up to the association of reductions (§4.3).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "spindle/autosched/order_iterations.hpp"
#include "spindle/schedule/named_iteration.hpp"

namespace spindle::schedule {

namespace detail {

class SparseReorder : public ir::IRMutator {
 public:
  SparseReorder(std::string iteration, std::vector<std::string> axes)
      : iteration_(std::move(iteration)), axes_(std::move(axes)) {}

  int found = 0;
  std::vector<std::string> names;  // every iteration seen, for the error message

  ir::Stmt mutate_SparseIteration(const ir::SparseIterationNode* n, const ir::Stmt& self) override {
    names.push_back(n->name);
    for (auto& a : n->axes) bound_.push_back(a.get());
    ir::Stmt body = mutate(n->body);
    bound_.resize(bound_.size() - n->axes.size());
    ir::Stmt out = body.same_as(n->body) ? self : n->with_body(n->init, body);
    if (n->name != iteration_) return out;
    ++found;
    return reorder(out);
  }

 private:
  std::string written(const ir::SparseIterationNode* n) const {
    std::string s = "[";
    for (std::size_t k = 0; k < n->axes.size(); ++k) s += (k ? ", " : "") + n->axes[k]->name;
    return s + "]";
  }

  ir::Stmt reorder(const ir::Stmt& self) {
    const auto* n = self.as<ir::SparseIterationNode>();
    const std::string what = "sparse_reorder(\"" + iteration_ + "\"): ";
    std::vector<std::size_t> perm;
    std::set<std::string> seen;
    for (auto& name : axes_) {
      SPINDLE_CHECK(seen.insert(name).second, UserError, what, "axis ", name, " is named twice; hint: list each axis of ",
                    written(n), " once");
      std::size_t k = 0;
      while (k < n->axes.size() && n->axes[k]->name != name) ++k;
      SPINDLE_CHECK(k < n->axes.size(), UserError, what, "the iteration has no axis ", name, " (its axes: ",
                    written(n), ")");
      perm.push_back(k);
    }
    SPINDLE_CHECK(perm.size() == n->axes.size(), UserError, what, "name every axis of the iteration ", written(n),
                  ", outermost first (got ", perm.size(), " of ", n->axes.size(), ")");
    if (autosched::order_detail::is_identity(perm)) return self;  // the order it has

    autosched::order_detail::BodyFacts facts;
    facts.visit(n->body);
    facts.finish();
    std::string why = autosched::order_detail::fixed_order_reason(n, facts, bound_);
    SPINDLE_CHECK(why.empty(), UserError, what, "the iteration ", written(n), " keeps its written order: ", why);
    std::set<const ir::AxisNode*> bound(bound_.begin(), bound_.end());
    why = autosched::order_detail::order_problem(n, perm, bound, autosched::order_detail::reads_what_it_writes(facts));
    SPINDLE_CHECK(why.empty(), UserError, what, "the order [", join(axes_), "] is not allowed: ", why);
    return autosched::order_detail::permuted(self, perm);
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  std::string iteration_;
  std::vector<std::string> axes_;
  std::vector<const ir::AxisNode*> bound_;
};

}  // namespace detail

inline ir::Function sparse_reorder(const ir::Function& f, const std::string& iteration,
                                   const std::vector<std::string>& axes) {
  detail::SparseReorder r(iteration, axes);
  return detail::on_named_iteration(f, r, "sparse_reorder", iteration);
}

}  // namespace spindle::schedule
