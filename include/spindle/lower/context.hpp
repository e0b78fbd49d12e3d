// What every lowering pass may know besides the IR itself. Passes are pure functions of
// (Function, LowerContext): no globals, no environment reads.
#pragma once

#include <string>

#include "spindle/schedule/user_schedule.hpp"

namespace spindle::lower {

// A kernel that assembles a sparse output (docs/language.md §4.6) is compiled twice from
// one stage-I function: lower/split_assembly.hpp makes the stage-I function of each phase and
// names its buffers here; lower/assemble_rows.hpp rewrites the row loop at stage III.
struct AssemblyContext {
  enum Phase : unsigned char { none, symbolic, numeric };
  Phase phase = none;
  std::string output;                      // the placeholder over [P, dense<X>] the body writes
  std::string bounds, mark, counts;        // both phases
  std::string workspace, list, row_ptr;    // numeric
  std::string out_indices, out_values;     // numeric
};

struct LowerContext {
  std::string kernel;       // for messages
  int num_threads = 1;      // of the target (CPU schedules)
  int vector_bits = 256;    // SIMD width of the target in bits (CPU schedules)
  std::int64_t l2_bytes = 512 * 1024;  // a core's L2 cache (CPU schedules: block_long_reductions)
  bool keep_loop_order = false;  // order_iterations leaves every iteration as written
  AssemblyContext assembly;      // phase none: an ordinary kernel
  // The user's schedule (schedule/user_schedule.hpp): its sparse_reorder steps run after
  // order_iterations; its loop steps replace the default schedule of the target.
  Schedule schedule;
};

}  // namespace spindle::lower
