// The in-process JIT engine: Clang 19 compiles one C translation unit held in memory to a
// relocatable ELF object held in memory, and an LLVM ORC LLJIT links that object into the
// running process. This is the only file of Spindle that includes LLVM or Clang headers;
// the CMake target spindle_orc compiles it once (installed consumers compile it themselves).
//
//   compile(): CompilerInvocation from cc1 arguments (no driver, no files on disk; the input
//              is one file /spindle/<kernel>.c of an in-memory file system), EmitObjAction whose
//              output stream is a raw_svector_ostream. Host triple, CPU and features come
//              from llvm::sys, so the object is tuned like -march=native.
//   load():    one LLJIT per engine, created on first load; every module gets its own
//              JITDylib, removed from the session when the LoadedModule dies. Unresolved
//              symbols (expf, memset, ...) come from the process through a
//              DynamicLibrarySearchGenerator.
//   ThreadSanitizer: in a runtime library built with SPINDLE_TSAN (SPINDLE_TSAN_KERNELS),
//              kernels are compiled with -fsanitize=thread too, so a data race inside a
//              generated parallel loop is reported by happens-before analysis, whatever the
//              timing (the __tsan_* entry points come from the process's TSan runtime).
//
// Thread safety: compile() needs no lock (each call owns its CompilerInstance and LLVM
// context, and no global cl::opt is touched); JIT creation, loading and unloading hold
// the JIT mutex.
#include <algorithm>
#include <cctype>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "spindle/runtime/engine.hpp"
#include "spindle/support/error.hpp"
#include "spindle/support/hash.hpp"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/Basic/Version.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/FrontendOptions.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#if defined(SPINDLE_TSAN_KERNELS)
// Clang 19 instruments memset/memcpy/memmove in kernels as calls of these entry points, which
// the TSan runtime of GCC 12 lacks (Symbols not found: __tsan_memset). The plain calls here
// are intercepted by that runtime, which checks the ranges. Weak: a runtime that has them wins.
#include <cstring>
extern "C" {
__attribute__((weak, visibility("default"))) void* __tsan_memset(void* p, int c, std::size_t n) {
  return std::memset(p, c, n);
}
__attribute__((weak, visibility("default"))) void* __tsan_memcpy(void* d, const void* s, std::size_t n) {
  return std::memcpy(d, s, n);
}
__attribute__((weak, visibility("default"))) void* __tsan_memmove(void* d, const void* s, std::size_t n) {
  return std::memmove(d, s, n);
}
}
#endif

namespace spindle::runtime {
namespace {

namespace orc = llvm::orc;

void initialize_llvm_once() {
  static std::once_flag flag;
  std::call_once(flag, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

std::string to_string(llvm::Error err) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << err;
  return s;
}

// The host as LLVM sees it; fixed for the life of the process.
struct HostTarget {
  std::string triple;
  std::string cpu;
  std::vector<std::string> features;  // "+avx2", "-avx512f", ... sorted
  std::string features_digest;        // 16 hex digits over the sorted list
};

HostTarget detect_host() {
  HostTarget h;
  h.triple = llvm::sys::getProcessTriple();
  h.cpu = llvm::sys::getHostCPUName().str();
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    h.features.push_back((f.second ? "+" : "-") + f.first().str());
  std::sort(h.features.begin(), h.features.end());
  Hasher hasher;
  for (const auto& f : h.features) hasher.add(f);
  h.features_digest = hasher.digest().hex().substr(0, 16);
  return h;
}

// Whether the host is x86-64 with AVX-512F (the vector width flag means nothing elsewhere).
bool prefers_512_bit_vectors(const HostTarget& h) {
  const bool x86 = h.triple.rfind("x86_64", 0) == 0;
  return x86 && std::binary_search(h.features.begin(), h.features.end(), std::string("+avx512f"));
}

// cc1 flags shared by every compile (the target part is appended per engine). math-errno
// is off by default in cc1; the driver's -fno-math-errno has no cc1 spelling. -fwrapv:
// integer arithmetic wraps (docs/language.md), so no signed overflow is UB the optimiser
// may exploit (found by spindle-kernel-fuzz: INT_MAX + 1 > 0 folded to true).
constexpr const char* kFlags[] = {
    "-O3", "-vectorize-loops", "-vectorize-slp", "-ffp-contract=fast-honor-pragmas", "-std=c11", "-fwrapv",
    "-mrelocation-model", "pic", "-pic-level", "2", "-funwind-tables=2",
    "-mframe-pointer=none", "-nostdsysteminc", "-nobuiltininc", "-discard-value-names",
    "-clear-ast-before-backend", "-disable-llvm-verifier", "-fno-ident"};

std::string first_error_line(const std::string& log) {
  std::size_t pos = log.find("error:");
  if (pos == std::string::npos) return log.substr(0, log.find('\n'));
  std::size_t begin = log.rfind('\n', pos);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return log.substr(begin, log.find('\n', pos) - begin);
}

// The LLJIT of one engine. Modules keep it alive through a shared_ptr, so an engine may
// die before the modules it loaded.
struct JitState {
  std::mutex mutex;
  std::unique_ptr<orc::LLJIT> jit;
  std::uint64_t next_module = 0;
};

class OrcModule final : public LoadedModule {
 public:
  OrcModule(std::shared_ptr<JitState> state, orc::JITDylib* dylib, void* entry)
      : state_(std::move(state)), dylib_(dylib), entry_(entry) {}
  ~OrcModule() override {
    std::lock_guard<std::mutex> lock(state_->mutex);
    // Failure to unlink only leaks the code; a destructor must not throw.
    llvm::consumeError(state_->jit->getExecutionSession().removeJITDylib(*dylib_));
  }
  void* entry() const override { return entry_; }

 private:
  std::shared_ptr<JitState> state_;
  orc::JITDylib* dylib_;
  void* entry_;
};

class OrcEngine final : public Engine {
 public:
  explicit OrcEngine(const Options&) : host_(detect_host()), state_(std::make_shared<JitState>()) {
    initialize_llvm_once();
    args_.assign(std::begin(kFlags), std::end(kFlags));
#if defined(SPINDLE_TSAN_KERNELS)
    args_.push_back("-fsanitize=thread");
#endif
    // 512-bit vectors where the host has them. Clang's tuning for the AVX-512 server cores
    // (skylake-avx512 .. sapphirerapids) prefers 256-bit vectors, which halves the FMA width
    // of the dense loops: with 512, Spindle's GEMM on this project's Sapphire Rapids machine
    // went from 57 to 99 GMAC/s at 169343 x 128 x 128 (2 threads; docs/architecture.md).
    // The schedules already size their tiles for the widest register (runtime/host.hpp).
    if (prefers_512_bit_vectors(host_)) args_.push_back("-mprefer-vector-width=512");
    flags_text_ = join(args_);
    args_.insert(args_.end(), {"-triple", host_.triple, "-target-cpu", host_.cpu});
    for (const auto& f : host_.features) args_.insert(args_.end(), {"-target-feature", f});
  }

  std::string name() const override { return "orc"; }

  std::string identity() const override {
    return message("orc clang-", CLANG_VERSION_STRING, " ", host_.triple, " ", host_.cpu,
                   " features:", host_.features_digest, " ", flags_text_);
  }

  std::vector<std::uint8_t> compile(const CompileRequest& request) override {
    // Declared before the CompilerInstance, which refers to all of these until it dies.
    // (The file is named after the kernel, for the log's locations; any character that is
    // not a plain name character becomes '_', so a kernel named "a/../b" stays one file.)
    std::string file_name = (request.kernel_name.empty() ? request.symbol : request.kernel_name) + ".c";
    for (char& c : file_name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
    llvm::SmallVector<char, 0> object;
    std::string log;
    llvm::raw_string_ostream log_stream(log);
    llvm::IntrusiveRefCntPtr<clang::DiagnosticOptions> diag_options(new clang::DiagnosticOptions);
    diag_options->ShowColors = false;
    clang::CompilerInstance ci;
    ci.createDiagnostics(new clang::TextDiagnosticPrinter(log_stream, diag_options.get()),
                         /*ShouldOwnClient=*/true);
    ci.setVerboseOutputStream(log_stream);  // "N errors generated." goes to the log too

    std::vector<const char*> argv;
    for (const auto& a : args_) argv.push_back(a.c_str());
    bool ok = clang::CompilerInvocation::CreateFromArgs(ci.getInvocation(), argv, ci.getDiagnostics());

    if (ok) {
      auto& inputs = ci.getFrontendOpts().Inputs;
      inputs.clear();
      // The source is a file of an in-memory file system, not a bare buffer: with a sanitizer
      // on (SPINDLE_TSAN_KERNELS), CodeGen looks the main file up by name for its no-sanitize
      // list, and one input path for every build keeps the sanitized path the production one.
      auto vfs = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
      const std::string path = "/spindle/" + file_name;
      vfs->addFile(path, 0, llvm::MemoryBuffer::getMemBufferCopy(request.source, path));
      inputs.emplace_back(path, clang::InputKind(clang::Language::C));
      ci.createFileManager(vfs);
      ci.setOutputStream(std::make_unique<llvm::raw_svector_ostream>(object));
      clang::EmitObjAction action;
      ok = ci.ExecuteAction(action) && !ci.getDiagnostics().hasErrorOccurred();
    }
    log_stream.flush();
    if (!ok || object.empty()) {
      const std::string& what = request.kernel_name.empty() ? request.symbol : request.kernel_name;
      throw CompileError(message("orc engine: compiling kernel '", what, "' failed: ",
                                 first_error_line(log),
                                 "\n  hint: the full log is in CompileError::log()"),
                         request.source, log, identity());
    }
    return std::vector<std::uint8_t>(object.begin(), object.end());
  }

  std::shared_ptr<LoadedModule> load(std::span<const std::uint8_t> artifact,
                                     const CompileRequest& request) override {
    std::lock_guard<std::mutex> lock(state_->mutex);
    orc::LLJIT& jit = ensure_jit();
    std::string dylib_name = message("spindle.", request.symbol, ".", state_->next_module++);
    auto dylib = jit.createJITDylib(dylib_name);
    if (!dylib)
      throw RuntimeError(message("orc engine: cannot create JITDylib for kernel '",
                                 request.kernel_name, "': ", to_string(dylib.takeError())));
    llvm::StringRef bytes(reinterpret_cast<const char*>(artifact.data()), artifact.size());
    auto fail = [&](const std::string& why) -> RuntimeError {
      llvm::consumeError(jit.getExecutionSession().removeJITDylib(*dylib));
      return RuntimeError(message("orc engine: loading kernel '", request.kernel_name,
                                  "' (symbol '", request.symbol, "', ", artifact.size(),
                                  " byte object) failed: ", why,
                                  "\n  hint: a corrupted cache entry; delete the cache directory"));
    };
    if (auto err = jit.addObjectFile(*dylib, llvm::MemoryBuffer::getMemBufferCopy(bytes, dylib_name)))
      throw fail(to_string(std::move(err)));
    auto addr = jit.lookup(*dylib, request.symbol);
    if (!addr) throw fail(to_string(addr.takeError()));
    return std::make_shared<OrcModule>(state_, &*dylib, addr->toPtr<void*>());
  }

 private:
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) s += (s.empty() ? "" : " ") + a;
    return s;
  }

  // LLJIT with the cheapest set-up that still links C objects: no platform (C kernels
  // have no static initializers), no IR compiler (objects only), the host data layout
  // given directly so that construction creates no TargetMachine.
  orc::LLJIT& ensure_jit() {
    if (state_->jit) return *state_->jit;
    orc::JITTargetMachineBuilder jtmb{llvm::Triple(host_.triple)};
    jtmb.setCPU(host_.cpu);
    auto jit = orc::LLJITBuilder()
                   .setJITTargetMachineBuilder(std::move(jtmb))
                   .setPlatformSetUp(orc::setUpInactivePlatform)
                   .setProcessSymbolsJITDylibSetup([](orc::LLJIT& j) -> llvm::Expected<orc::JITDylibSP> {
                     auto& dylib = j.getExecutionSession().createBareJITDylib("<process>");
                     auto gen = orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
                         j.getDataLayout().getGlobalPrefix());
                     if (!gen) return gen.takeError();
                     dylib.addGenerator(std::move(*gen));
                     return &dylib;
                   })
                   .create();
    if (!jit)
      throw RuntimeError(message("orc engine: cannot create the LLJIT for ", host_.triple, ": ",
                                 to_string(jit.takeError())));
    state_->jit = std::move(*jit);
    return *state_->jit;
  }

  HostTarget host_;
  std::vector<std::string> args_;
  std::string flags_text_;
  std::shared_ptr<JitState> state_;
};

}  // namespace

std::unique_ptr<Engine> make_orc_engine(const Options& options) {
  return std::make_unique<OrcEngine>(options);
}

}  // namespace spindle::runtime
