// A kernel ready to call: its lowered stages, the generated source, the loaded machine
// code (through the runtime's kernel cache) and the argument binder. Built once per kernel
// definition; a call only binds arguments and jumps to the entry point.
//
// This header is light (no pipeline, no runtime internals): the implementation is in
// compiled_kernel_impl.hpp, included below in header-only mode and compiled once in
// spindle/impl/spindle.cpp under SPINDLE_SEPARATE_COMPILATION (see support/linkage.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spindle/ir/function.hpp"
#include "spindle/lower/context.hpp"
#include "spindle/runtime/call_arg.hpp"
#include "spindle/support/linkage.hpp"

namespace spindle::driver {
struct Lowered;
}

namespace spindle::runtime {

class Runtime;

// Where the machine code of a compile came from.
enum class CodeSource : std::uint8_t { memory_cache, disk_cache, compiled };

inline const char* code_source_name(CodeSource s) {
  switch (s) {
    case CodeSource::memory_cache: return "memory cache";
    case CodeSource::disk_cache: return "disk cache";
    case CodeSource::compiled: return "compiled";
  }
  return "?";
}

struct CompileStats {
  double lower_micros = 0;  // IR passes + code generation
  double load_micros = 0;   // cache lookup and, on a miss, compilation + loading
  CodeSource source = CodeSource::compiled;
};

class CompiledKernel {
 public:
  SPINDLE_DECL CompiledKernel(const ir::Function& stage1, Runtime& rt);
  // One phase of a kernel that assembles a sparse output (runtime/assembled_kernel.hpp): the
  // loops run in the written order and the row loop is rewritten by lower/assemble_rows.hpp.
  SPINDLE_DECL CompiledKernel(const ir::Function& stage1, Runtime& rt, const lower::AssemblyContext& assembly);
  // Under a user's schedule (schedule/user_schedule.hpp) instead of the default one.
  SPINDLE_DECL CompiledKernel(const ir::Function& stage1, Runtime& rt, const Schedule& schedule);
  SPINDLE_DECL ~CompiledKernel();
  CompiledKernel(const CompiledKernel&) = delete;
  CompiledKernel& operator=(const CompiledKernel&) = delete;

  // Checks and binds the arguments, then runs the kernel.
  SPINDLE_DECL void call(const std::vector<CallArg>& args) const;
  // The same, skipping the index-value checks in `checked` and adding the ones it ran (one
  // assembled call's phases share it).
  SPINDLE_DECL void call(const std::vector<CallArg>& args, CheckedIndexValues& checked) const;

  SPINDLE_DECL const driver::Lowered& lowered() const;  // include driver/pipeline.hpp to use
  SPINDLE_DECL const std::string& source() const;
  SPINDLE_DECL const std::string& symbol() const;
  SPINDLE_DECL const CompileStats& stats() const;
  SPINDLE_DECL int num_args() const;
  SPINDLE_DECL Runtime& runtime() const;
  // The IR of every stage, the pass timings, where the code came from and the source.
  SPINDLE_DECL std::string explain() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide default runtime (Runtime::default_instance()).
SPINDLE_DECL Runtime& default_runtime();

}  // namespace spindle::runtime

#ifndef SPINDLE_SEPARATE_COMPILATION
#include "spindle/runtime/compiled_kernel_impl.hpp"
#endif
