// A kernel ready to call: its lowered stages, the generated source, the loaded machine
// code (through the runtime's kernel cache) and the argument binder. Built once per kernel
// definition; a call only binds arguments and jumps to the entry point.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/driver/pipeline.hpp"
#include "spindle/runtime/bind_args.hpp"
#include "spindle/runtime/runtime.hpp"
#include "spindle/support/timer.hpp"

namespace spindle::runtime {

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
  CompiledKernel(const ir::Function& stage1, Runtime& rt) : rt_(&rt), binder_(init(stage1, rt)) {}

  void call(const std::vector<CallArg>& args) const {
    constexpr std::size_t kInline = 32;
    std::array<void*, kInline> buf_small{};
    std::array<std::int64_t, kInline> sc_small{};
    std::vector<void*> buf_big;
    std::vector<std::int64_t> sc_big;
    void** bufs = buf_small.data();
    std::int64_t* scalars = sc_small.data();
    if (nbuffers_ > kInline) {
      buf_big.resize(nbuffers_);
      bufs = buf_big.data();
    }
    if (nscalars_ > kInline) {
      sc_big.resize(nscalars_);
      scalars = sc_big.data();
    }
    binder_.bind(args, bufs, scalars);
    entry_(bufs, scalars, rt_->abi());
  }

  const driver::Lowered& lowered() const { return lowered_; }
  const std::string& source() const { return lowered_.source.source; }
  const std::string& symbol() const { return lowered_.source.symbol; }
  const CompileStats& stats() const { return stats_; }
  int num_args() const { return binder_.num_args(); }

  // The IR of every stage, the schedule and the generated source.
  std::string explain() const {
    std::string s = "== kernel " + lowered_.stage1.name + " ==\n";
    s += ir::to_string(lowered_.stage1) + ir::to_string(lowered_.stage2) + ir::to_string(lowered_.stage3);
    s += "# passes:";
    for (auto& p : lowered_.passes) s += " " + p.pass + "(" + std::to_string(static_cast<long>(p.micros)) + "us)";
    s += "\n# code: " + std::string(code_source_name(stats_.source)) + ", engine " + rt_->engine().name() + "\n";
    s += "# generated source (" + lowered_.source.symbol + "):\n" + lowered_.source.source;
    return s;
  }

 private:
  ArgBinder init(const ir::Function& stage1, Runtime& rt) {
    Timer t;
    driver::PipelineOptions o;
    o.context.kernel = stage1.name;
    o.context.num_threads = rt.options().num_threads;
    o.debug = rt.options().debug;
    o.dump_dir = rt.options().dump_dir;
    lowered_ = driver::lower_to_c(stage1, o);
    stats_.lower_micros = t.micros();
    t.reset();
    CacheStats before = rt.cache().stats();
    module_ = rt.load({lowered_.source.source, lowered_.source.symbol, stage1.name});
    CacheStats after = rt.cache().stats();
    stats_.load_micros = t.micros();
    stats_.source = after.memory_hits > before.memory_hits ? CodeSource::memory_cache
                    : after.disk_hits > before.disk_hits   ? CodeSource::disk_cache
                                                           : CodeSource::compiled;
    entry_ = reinterpret_cast<codegen::KernelEntry>(module_->entry());
    nbuffers_ = lowered_.stage3.buffers.size();
    nscalars_ = lowered_.stage3.scalars.size();
    return ArgBinder(lowered_.stage1, lowered_.stage3);
  }

  Runtime* rt_;
  driver::Lowered lowered_;
  std::shared_ptr<LoadedModule> module_;
  codegen::KernelEntry entry_ = nullptr;
  std::size_t nbuffers_ = 0, nscalars_ = 0;
  CompileStats stats_;
  ArgBinder binder_;
};

}  // namespace spindle::runtime
