// The compiler pipeline in one place: the passes in order, from a stage-I function to C
// source. Between passes it verifies the IR; with `debug` it logs each pass and its time
// to stderr; with `dump_dir` it writes the IR after each pass and the generated source.
//
//   order_iterations       I -> I    the loop order of each innermost iteration (cost model)
//   sparse_reorder         I -> I    the user schedule's iteration orders (when it has any)
//   sparse_fuse            I -> I    the user schedule's fused axes (when it has any)
//   lower_sparse_iter      I -> II   loops, aux buffers, coordinate translation
//   simplify
//   lower_sparse_buffer    II -> III flat buffers
//   simplify
//   hoist_loop_invariants            searches and guards out of inner loops
//   schedule_cpu_default             register tiles, local accumulation, parallel and vector loops
//     (or apply_user_schedule, the loop steps of the user's schedule, when it has any,
//      then peel_split_tails: split's guards out of the full tiles, and
//      accumulate_locally: sums into an element invariant in a loop kept in a register)
//     (or assemble_rows / assemble_scattered, for one phase of a kernel that assembles a
//     sparse output; after assemble_scattered, flatten_position_loops: a loop over fibers
//     whose body reads only the positions becomes one loop over the positions)
//   simplify
//   emit_c                           C source with the kernel ABI
// The CUDA path (lower_for_cuda + schedule_and_emit_cuda) shares every pass up to
// hoist_loop_invariants (and assemble_rows for a phase of an assembling kernel), then runs
// schedule_cuda_default for one variant and emit_cuda.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "spindle/autosched/cpu_default.hpp"
#include "spindle/autosched/cuda_default.hpp"
#include "spindle/autosched/order_iterations.hpp"
#include "spindle/codegen/c_emitter.hpp"
#include "spindle/codegen/cuda_emitter.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/ir/verify.hpp"
#include "spindle/lower/assemble_rows.hpp"
#include "spindle/lower/assemble_scattered.hpp"
#include "spindle/lower/flatten_position_loops.hpp"
#include "spindle/lower/hoist_loop_invariants.hpp"
#include "spindle/lower/lower_sparse_buffer.hpp"
#include "spindle/lower/lower_sparse_iter.hpp"
#include "spindle/lower/simplify.hpp"
#include "spindle/schedule/accumulate_locally.hpp"
#include "spindle/schedule/apply_user_schedule.hpp"
#include "spindle/schedule/peel_split_tails.hpp"
#include "spindle/schedule/sparse_reorder.hpp"
#include "spindle/schedule/sparse_fuse.hpp"
#include "spindle/support/timer.hpp"

namespace spindle::driver {

struct PipelineOptions {
  lower::LowerContext context;
  bool debug = false;
  std::string dump_dir;
};

struct PassRecord {
  std::string pass;
  double micros = 0;
};

struct Lowered {
  ir::Function written;                 // stage I as the kernel was defined
  ir::Function stage1, stage2, stage3;  // stage1 in the chosen loop order; stage3 is scheduled
  codegen::EmittedSource source;
  std::vector<PassRecord> passes;
  double total_micros = 0;
};

namespace detail {

inline void dump(const PipelineOptions& o, int step, const std::string& name, const std::string& text) {
  if (o.dump_dir.empty()) return;
  std::string path = o.dump_dir + "/" + o.context.kernel + "." + std::to_string(step) + "." + name + ".txt";
  std::ofstream(path) << text;
}

// The user's schedule, as a comment at the top of the generated source: the source is the
// kernel cache's key, so kernels under different schedules never share an entry.
inline void mark_schedule(std::string& source, const Schedule& s) {
  if (s.empty()) return;
  std::string text = s.to_string();
  for (std::size_t p = 0; (p = text.find("*/", p)) != std::string::npos;) text.replace(p, 2, "* /");
  source.insert(0, "/* schedule: " + text + " */\n");
}

}  // namespace detail

// Stage I -> unscheduled stage III (shared by the C and CUDA paths).
class PassRunner {
 public:
  PassRunner(const PipelineOptions& o, std::vector<PassRecord>& log) : o_(o), log_(log) {}
  template <class Pass>
  ir::Function run(const char* name, const ir::Function& in, Pass&& pass) {
    Timer t;
    ir::Function f = pass(in, o_.context);
    double us = t.micros();
    ir::verify(f, name);
    log_.push_back({name, us});
    if (o_.debug) std::fprintf(stderr, "spindle: %s: %-22s %8.1f us\n", o_.context.kernel.c_str(), name, us);
    detail::dump(o_, ++step_, name, ir::to_string(f));
    return f;
  }
  void record(const char* name, double us, const std::string& text) {
    log_.push_back({name, us});
    if (o_.debug) std::fprintf(stderr, "spindle: %s: %-22s %8.1f us\n", o_.context.kernel.c_str(), name, us);
    detail::dump(o_, ++step_, name, text);
  }

 private:
  const PipelineOptions& o_;
  std::vector<PassRecord>& log_;
  int step_ = 0;
};

inline ir::Function simplify_pass(const ir::Function& g, const lower::LowerContext& c) { return lower::simplify(g, c); }

// Runs the passes up to (not including) scheduling; fills stage1/stage2 of `out`.
template <class Out>
ir::Function lower_unscheduled(const ir::Function& stage1, const PipelineOptions& o, PassRunner& run, Out& out) {
  ir::verify(stage1, "frontend", /*user_input=*/true);
  for (auto& fb : stage1.buffers)
    SPINDLE_CHECK(!ir::is_assembled(*fb.buffer) || o.context.assembly.phase != lower::AssemblyContext::none,
                  UserError, "kernel '", stage1.name, "': buffer '", fb.buffer->name, "' is an assembled output, "
                  "which is built by a symbolic and a numeric phase (runtime::AssembledKernel on the CPU, "
                  "cuda::AssembledCudaKernel on the GPU: what a call of spindle::kernel runs); it has no "
                  "single-kernel build");
  detail::dump(o, 0, "stage1", ir::to_string(stage1));
  out.written = stage1;
  out.stage1 = run.run("order_iterations", stage1, autosched::order_iterations);
  for (auto& step : o.context.schedule.steps())
    if (step.op == Schedule::Op::sparse_reorder)
      out.stage1 = run.run("sparse_reorder", out.stage1, [&](const ir::Function& g, const lower::LowerContext&) {
        return schedule::sparse_reorder(g, step.target, step.names);
      });
  for (auto& step : o.context.schedule.steps())  // after the orders are final: it names adjacent axes
    if (step.op == Schedule::Op::sparse_fuse)
      out.stage1 = run.run("sparse_fuse", out.stage1, [&](const ir::Function& g, const lower::LowerContext&) {
        return schedule::sparse_fuse(g, step.target, step.names);
      });
  ir::Function f = run.run("lower_sparse_iter", out.stage1, lower::lower_sparse_iter);
  f = run.run("simplify", f, simplify_pass);
  out.stage2 = f;
  f = run.run("lower_sparse_buffer", f, lower::lower_sparse_buffer);
  f = run.run("simplify", f, simplify_pass);
  return run.run("hoist_loop_invariants", f, lower::hoist_loop_invariants);
}

inline Lowered lower_to_c(const ir::Function& stage1, const PipelineOptions& o) {
  Lowered out;
  Timer total;
  PassRunner run(o, out.passes);
  ir::Function f = lower_unscheduled(stage1, o, run, out);
  if (o.context.assembly.phase != lower::AssemblyContext::none)  // one phase of an assembling kernel
    f = o.context.assembly.scattered
            ? run.run("flatten_position_loops", run.run("assemble_scattered", f, lower::assemble_scattered),
                      lower::flatten_position_loops)
            : run.run("assemble_rows", f, lower::assemble_rows);
  else if (o.context.schedule.has_loop_steps()) {
    f = run.run("apply_user_schedule", f, [](const ir::Function& g, const lower::LowerContext& c) {
      return schedule::apply_user_schedule(g, c.schedule, schedule::ScheduleTarget::cpu);
    });
    f = run.run("peel_split_tails", f, [](const ir::Function& g, const lower::LowerContext&) {
      return schedule::peel_split_tails(g);
    });
    // Not a choice a schedule makes but what the default does as well: a sum into an element
    // that a loop does not move (SpMV's y[i] over j) stays in a register, not in memory.
    f = run.run("accumulate_locally", f, [](const ir::Function& g, const lower::LowerContext&) {
      ir::Function out = g;
      out.body = schedule::accumulate_locally(g.body);
      return out;
    });
  } else
    f = run.run("schedule_cpu_default", f, autosched::schedule_cpu_default);
  out.stage3 = run.run("simplify", f, simplify_pass);
  Timer t;
  out.source = codegen::emit_c(out.stage3);
  detail::mark_schedule(out.source.source, o.context.schedule);
  run.record("emit_c", t.micros(), out.source.source);
  out.total_micros = total.micros();
  return out;
}

// The CUDA path: the same stage-I/II/III lowering, then the default GPU schedule for one
// variant (see autosched/cuda_default.hpp) and the CUDA emitter.
struct CudaLowered {
  ir::Function written, stage1, stage2, unscheduled, stage3;
  autosched::CudaPlan plan;
  autosched::CudaVariant variant;
  codegen::CudaSource source;
  std::vector<PassRecord> passes;
  double total_micros = 0;
};

// Stage I -> unscheduled stage III and the CUDA plan (pattern + feature-size expression).
inline CudaLowered lower_for_cuda(const ir::Function& stage1, const PipelineOptions& o) {
  CudaLowered out;
  Timer total;
  PassRunner run(o, out.passes);
  out.unscheduled = lower_unscheduled(stage1, o, run, out);
  if (o.context.assembly.phase != lower::AssemblyContext::none) {
    SPINDLE_CHECK(!o.context.assembly.scattered, UserError, "kernel '", stage1.name, "': its assembled output is "
                  "written at scattered rows (docs/language.md §4.6: not at the first iterator of the top-level "
                  "iteration), which is assembled on the CPU only; hint: run it with host arguments, or iterate "
                  "the output's rows first");
    // One phase of an assembling kernel: its row blocks become the generic schedule's one
    // thread per block (no SpMM/SDDMM pattern applies).
    out.unscheduled = run.run("assemble_rows", out.unscheduled, lower::assemble_rows);
    out.plan = {};
  } else if (o.context.schedule.has_loop_steps()) {
    out.plan = {};  // the user's schedule: one variant, no pattern
  } else {
    out.plan = autosched::cuda_plan(out.unscheduled);
  }
  out.total_micros = total.micros();
  return out;
}

// Schedules and emits one variant of a function prepared by lower_for_cuda.
inline CudaLowered schedule_and_emit_cuda(const CudaLowered& prepared, const PipelineOptions& o,
                                          const autosched::CudaVariant& v) {
  CudaLowered out = prepared;
  Timer total;
  PassRunner run(o, out.passes);
  out.variant = v;
  ir::Function f =
      o.context.schedule.has_loop_steps() && o.context.assembly.phase == lower::AssemblyContext::none
          ? run.run("apply_user_schedule", out.unscheduled,
                    [&](const ir::Function& g, const lower::LowerContext& c) {
                      return schedule::apply_user_schedule(g, c.schedule, schedule::ScheduleTarget::gpu);
                    })
          : run.run("schedule_cuda_default", out.unscheduled, [&](const ir::Function& g, const lower::LowerContext& c) {
              return autosched::schedule_cuda_default(g, c, v);
            });
  out.stage3 = run.run("simplify", f, simplify_pass);
  Timer t;
  out.source = codegen::emit_cuda(out.stage3);
  detail::mark_schedule(out.source.source, o.context.schedule);
  run.record("emit_cuda", t.micros(), out.source.source);
  out.total_micros += total.micros();
  return out;
}

// Both steps, for a known feature size (tests, tools).
inline CudaLowered lower_to_cuda(const ir::Function& stage1, const PipelineOptions& o, std::int64_t feature = 32,
                                 bool aligned = true) {
  CudaLowered prepared = lower_for_cuda(stage1, o);
  return schedule_and_emit_cuda(prepared, o, autosched::cuda_variant(prepared.plan.pattern, feature, aligned));
}

}  // namespace spindle::driver
