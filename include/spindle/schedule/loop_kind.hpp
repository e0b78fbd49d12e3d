// set_loop_kind: the schedule primitive that changes how loops run (parallel, vectorized,
// unrolled, or bound to a GPU index), selecting loops by a predicate. Checks that a
// parallel or GPU-bound loop is spatial: running reduction iterations concurrently would
// race on the reduced element.
// Pre/post: stage II or III.
#pragma once

#include <functional>

#include "spindle/ir/functor.hpp"

namespace spindle::schedule {

namespace detail {

class LoopKindSetter : public ir::IRMutator {
 public:
  using Pred = std::function<bool(const ir::ForNode&)>;
  LoopKindSetter(Pred p, ir::ForKind k) : pred_(std::move(p)), kind_(k) {}

 protected:
  ir::Stmt mutate_For(const ir::ForNode* n, const ir::Stmt& self) override {
    ir::Stmt s = ir::IRMutator::mutate_For(n, self);
    if (!pred_(*n)) return s;
    bool concurrent = kind_ == ir::ForKind::parallel || kind_ >= ir::ForKind::gpu_block_x;
    SPINDLE_CHECK(!concurrent || n->iter_kind == ir::IterKind::spatial, UserError, "cannot make loop '",
                  n->var.name(), "' (axis ", n->axis, ") ", ir::for_kind_name(kind_),
                  ": it is a reduction loop; hint: bind a spatial loop, or rfactor the reduction first");
    auto* f = s.as<ir::ForNode>();
    return ir::for_loop(f->var, f->min, f->extent, kind_, f->iter_kind, f->axis, f->body, f->loc);
  }

 private:
  Pred pred_;
  ir::ForKind kind_;
};

}  // namespace detail

inline ir::Stmt set_loop_kind(const ir::Stmt& s, std::function<bool(const ir::ForNode&)> pred, ir::ForKind kind) {
  return detail::LoopKindSetter(std::move(pred), kind).mutate(s);
}

}  // namespace spindle::schedule
