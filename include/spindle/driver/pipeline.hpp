// The compiler pipeline in one place: the passes in order, from a stage-I function to C
// source. Between passes it verifies the IR; with `debug` it logs each pass and its time
// to stderr; with `dump_dir` it writes the IR after each pass and the generated source.
//
//   lower_sparse_iter      I -> II   loops, aux buffers, coordinate translation
//   simplify
//   lower_sparse_buffer    II -> III flat buffers
//   simplify
//   hoist_loop_invariants            searches and guards out of inner loops
//   schedule_cpu_default             register tiles, local accumulation, parallel and vector loops
//   simplify
//   emit_c                           C source with the kernel ABI
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "spindle/autosched/cpu_default.hpp"
#include "spindle/codegen/c_emitter.hpp"
#include "spindle/ir/printer.hpp"
#include "spindle/ir/verify.hpp"
#include "spindle/lower/hoist_loop_invariants.hpp"
#include "spindle/lower/lower_sparse_buffer.hpp"
#include "spindle/lower/lower_sparse_iter.hpp"
#include "spindle/lower/simplify.hpp"
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
  ir::Function stage1, stage2, stage3;  // stage3 is scheduled
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

}  // namespace detail

inline Lowered lower_to_c(const ir::Function& stage1, const PipelineOptions& o) {
  Lowered out;
  Timer total;
  int step = 0;
  ir::Function f = stage1;
  auto run = [&](const char* name, auto&& pass) {
    Timer t;
    f = pass(f, o.context);
    double us = t.micros();
    ir::verify(f, name);
    out.passes.push_back({name, us});
    if (o.debug) std::fprintf(stderr, "[spindle] %s: %-22s %8.1f us\n", o.context.kernel.c_str(), name, us);
    detail::dump(o, ++step, name, ir::to_string(f));
  };
  ir::verify(f, "frontend", /*user_input=*/true);
  detail::dump(o, step, "stage1", ir::to_string(f));
  out.stage1 = f;
  run("lower_sparse_iter", lower::lower_sparse_iter);
  run("simplify", [](const ir::Function& g, const lower::LowerContext& c) { return lower::simplify(g, c); });
  out.stage2 = f;
  run("lower_sparse_buffer", lower::lower_sparse_buffer);
  run("simplify", [](const ir::Function& g, const lower::LowerContext& c) { return lower::simplify(g, c); });
  run("hoist_loop_invariants", lower::hoist_loop_invariants);
  run("schedule_cpu_default", autosched::schedule_cpu_default);
  run("simplify", [](const ir::Function& g, const lower::LowerContext& c) { return lower::simplify(g, c); });
  out.stage3 = f;
  Timer t;
  out.source = codegen::emit_c(f);
  out.passes.push_back({"emit_c", t.micros()});
  detail::dump(o, ++step, "emit_c", out.source.source);
  out.total_micros = total.micros();
  return out;
}

}  // namespace spindle::driver
