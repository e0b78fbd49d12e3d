// Declaration of the stage-I completion pass of the front end (iteration_inference.hpp),
// so that user TUs need not compile it under SPINDLE_SEPARATE_COMPILATION.
#pragma once

#include <string>

#include "spindle/ir/stmt.hpp"
#include "spindle/support/linkage.hpp"

namespace spindle::detail {

// Infers spatial/reduction iterators and the init of reductions, in program order.
SPINDLE_DECL ir::Stmt infer_iteration_kinds(ir::Stmt body, const std::string& kernel);

}  // namespace spindle::detail
