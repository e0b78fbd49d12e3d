// JIT engines: turn one self-contained C translation unit into callable machine code.
//
// An engine has two halves so that the kernel cache can sit between them:
//   compile(request) -> artifact bytes (a relocatable object for ORC, a shared object for
//                       the system engine); slow, cached on disk
//   load(artifact)   -> a LoadedModule whose entry() is the address of request.symbol
// identity() names everything that changes the artifact for the same source (the whole
// compiler command and its version, target triple, CPU and features, flags); it is part of
// every cache key, so two configurations never share a disk-cache entry.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "spindle/support/options.hpp"

namespace spindle::runtime {

struct CompileRequest {
  std::string source;       // the complete translation unit (no #include needed)
  std::string symbol;       // exported entry symbol (extern "C" linkage)
  std::string kernel_name;  // user-facing name, for messages
};

// Machine code that stays loaded while a reference to it exists.
class LoadedModule {
 public:
  virtual ~LoadedModule() = default;
  virtual void* entry() const = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual std::string identity() const = 0;
  virtual std::vector<std::uint8_t> compile(const CompileRequest& request) = 0;
  virtual std::shared_ptr<LoadedModule> load(std::span<const std::uint8_t> artifact,
                                             const CompileRequest& request) = 0;
};

// System C compiler (Options::system_cc) + dlopen. Always available where a C compiler is.
inline std::unique_ptr<Engine> make_system_engine(const Options& options);

#ifdef SPINDLE_WITH_ORC
// In-process Clang 19 + LLVM ORC LLJIT. Defined in spindle/impl/orc_engine.cpp, which the
// CMake target spindle::spindle compiles into the consumer (the one TU that sees LLVM).
std::unique_ptr<Engine> make_orc_engine(const Options& options);
#endif

}  // namespace spindle::runtime
