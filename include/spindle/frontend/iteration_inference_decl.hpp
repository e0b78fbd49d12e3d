// Declaration of the stage-I completion pass of the front end (iteration_inference.hpp),
// so that user TUs need not compile it under SPINDLE_SEPARATE_COMPILATION.
#pragma once

#include <string>

#include "spindle/ir/function.hpp"
#include "spindle/support/linkage.hpp"

namespace spindle::detail {

// Checks the recorded body against the language rules (UserError), infers spatial/reduction
// iterators, and adds what makes every element of each `out` buffer written: per-element
// inits or whole-buffer fills (iteration_inference.hpp). Appends the call-time scalars it
// adds (ParamOrigin::sorted) to `scalars`.
SPINDLE_DECL ir::Stmt infer_iteration_kinds(ir::Stmt body, const std::string& kernel,
                                            const std::vector<ir::FuncBuffer>& buffers,
                                            std::vector<ir::FuncScalar>& scalars);

// The declaration rules of assembled outputs (docs/language.md §4.6): a buffer over an
// assembled<P, X> axis is an `out` buffer over exactly [P, C]; a kernel has at most one and
// writes no other buffer (its two phases run the body twice). UserError otherwise.
SPINDLE_DECL void check_assembled_outputs(const std::string& kernel, const std::vector<ir::FuncBuffer>& buffers);

}  // namespace spindle::detail
