// sparse_fuse (stage I -> stage I): SparseTIR's fused axes (`T.fuse(I, J)`, seed 002 §3.2) as a
// stage-I schedule step. A chain of adjacent axes of one sparse iteration, each the parent of
// the next, becomes one loop over the positions of the chain's last axis:
//
//   sp_iter sddmm([I, J, K], "SSR")   sparse_fuse("sddmm", {"I", "J"})   sp_iter sddmm([fuse(I, J), K], "SSR")
//
// lowered (lower_sparse_iter) to one loop over J's positions under I's fiber, whose body
// recovers each outer position by a search of the inner axis's indptr (or a division for a
// sparse_fixed axis), so a skewed matrix's nonzeros split evenly across threads and GPU
// threads (nnz-parallel SDDMM, fused reductions 4-D -> 2-D). The points and their order do not
// change, so neither does the result.
//
// Checks (UserError naming the step): the iteration exists once; the axes are its axes, named
// once, adjacent, in its order; and the chain rule of ir/fused_chain.hpp (each after the
// first a child of the one before; none co-iterated; the first a root or variable axis; all
// spatial or all reduction axes). A kernel can also fuse axes itself: iter<fuse<I, J>>.
// Two steps whose chains meet (I-J and J-K) fuse the whole chain.
// Pre/post: stage I; the iteration's `fused` flags are set.
#pragma once

#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/ir/fused_chain.hpp"
#include "spindle/ir/functor.hpp"
#include "spindle/schedule/named_iteration.hpp"
#include "spindle/support/error.hpp"

namespace spindle::schedule {

namespace detail {

class SparseFuse : public ir::IRMutator {
 public:
  SparseFuse(std::string iteration, std::vector<std::string> axes)
      : iteration_(std::move(iteration)), axes_(std::move(axes)) {}

  int found = 0;
  std::vector<std::string> names;  // every iteration seen, for the error message

  ir::Stmt mutate_SparseIteration(const ir::SparseIterationNode* n, const ir::Stmt& self) override {
    names.push_back(n->name);
    ir::Stmt body = mutate(n->body);
    ir::Stmt out = body.same_as(n->body) ? self : n->with_body(n->init, body);
    if (n->name != iteration_) return out;
    ++found;
    return fuse(out.as<ir::SparseIterationNode>());
  }

 private:
  static std::string written(const ir::SparseIterationNode* n) {
    std::string s = "[";
    for (std::size_t k = 0; k < n->axes.size(); ++k) s += (k ? ", " : "") + n->axes[k]->name;
    return s + "]";
  }

  ir::Stmt fuse(const ir::SparseIterationNode* n) {
    const std::string what = "sparse_fuse(\"" + iteration_ + "\", {" + join(axes_) + "}): ";
    std::vector<std::size_t> at;
    for (auto& name : axes_) {
      std::size_t k = 0;
      while (k < n->axes.size() && n->axes[k]->name != name) ++k;
      SPINDLE_CHECK(k < n->axes.size(), UserError, what, "the iteration has no axis ", name, " (its axes: ",
                    written(n), ")");
      for (std::size_t q : at)
        SPINDLE_CHECK(q != k, UserError, what, "axis ", name, " is named twice; hint: name each axis of the chain once");
      at.push_back(k);
    }
    for (std::size_t q = 1; q < at.size(); ++q)
      SPINDLE_CHECK(at[q] == at[q - 1] + 1, UserError, what, "axes ", axes_[q - 1], " and ", axes_[q],
                    " are not adjacent in the iteration ", written(n),
                    "; hint: fuse adjacent axes, outermost first (sparse_reorder first to make them adjacent)");
    const std::string problem = ir::fused_chain_problem(*n, at.front(), at.back());
    SPINDLE_CHECK(problem.empty(), UserError, what, problem);
    std::vector<bool> fused = n->fused;
    fused.resize(n->axes.size(), false);
    for (std::size_t q = 0; q + 1 < at.size(); ++q) fused[at[q]] = true;
    return n->edited([&](ir::SparseIterationNode& c) { c.fused = std::move(fused); });
  }

  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v) s += (s.empty() ? "\"" : ", \"") + x + "\"";
    return s;
  }

  std::string iteration_;
  std::vector<std::string> axes_;
};

}  // namespace detail

inline ir::Function sparse_fuse(const ir::Function& f, const std::string& iteration,
                                const std::vector<std::string>& axes) {
  detail::SparseFuse r(iteration, axes);
  return detail::on_named_iteration(f, r, "sparse_fuse", iteration);
}

}  // namespace spindle::schedule
