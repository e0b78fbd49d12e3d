// What the stage-I schedule steps that act on one named sparse iteration share
// (sparse_reorder, sparse_fuse): run the step's mutator over the body and require that the
// name matched exactly one iteration, else a UserError listing the kernel's iterations.
#pragma once

#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/support/error.hpp"

namespace spindle::schedule::detail {

// `step` is an ir::IRMutator with `int found` (iterations it changed or checked by that name)
// and `std::vector<std::string> names` (every iteration it saw); `what` names the step
// ("sparse_fuse").
template <class Step>
ir::Function on_named_iteration(const ir::Function& f, Step& step, const char* what, const std::string& iteration) {
  SPINDLE_INTERNAL_CHECK(f.stage == ir::Stage::coordinate, what, "expects stage I");
  ir::Function out = f;
  out.body = step.mutate(f.body);
  std::string all;
  for (auto& n : step.names) all += (all.empty() ? "" : ", ") + n;
  SPINDLE_CHECK(step.found > 0, UserError, what, "(\"", iteration, "\"): kernel '", f.name,
                "' has no iteration named '", iteration, "' (its iterations: ", all.empty() ? "none" : all,
                "); hint: an iteration is named by for_each's name argument, the kernel's name for its body");
  SPINDLE_CHECK(step.found == 1, UserError, what, "(\"", iteration, "\"): kernel '", f.name, "' has ", step.found,
                " iterations named '", iteration, "'; hint: give the iterations distinct names");
  return out;
}

}  // namespace spindle::schedule::detail
