// What every lowering pass may know besides the IR itself. Passes are pure functions of
// (Function, LowerContext): no globals, no environment reads.
#pragma once

#include <string>

namespace spindle::lower {

struct LowerContext {
  std::string kernel;       // for messages
  int num_threads = 1;      // of the target (CPU schedules)
  int vector_bits = 256;    // SIMD width of the target in bits (CPU schedules)
  bool keep_loop_order = false;  // order_iterations leaves every iteration as written
};

}  // namespace spindle::lower
