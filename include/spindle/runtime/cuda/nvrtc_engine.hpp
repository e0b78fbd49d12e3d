// The NVRTC engine: CUDA C++ -> cubin (or PTX) with NVRTC, loaded into the CUDA context as a
// module. It implements runtime::Engine, so the engine-agnostic KernelCache caches its
// artifacts unchanged (disk entries `<hex>.nvrtc.bin`).
//
//   compile(request) -> cubin for the target architecture; PTX text (NUL-terminated) for
//                       the newest architecture NVRTC supports when the target is newer
//                       than that (the driver JIT-compiles it)
//   load(artifact)   -> CudaModule (cuModuleLoadData); entry() is the CUmodule and
//                       function(symbol) a CUfunction
//
// Target architecture: the device's compute capability (asked from the driver when first
// needed), or fixed at construction (NvrtcEngine(options, 80)) so that compile() needs no
// GPU. resolve_cuda_target() maps it onto what the loaded NVRTC supports:
//   supported exactly                     -> cubin sm_XX
//   same major, a lower supported minor   -> cubin of that minor (binary compatible)
//   newer than every supported arch       -> PTX compute_<newest supported>
//   other arch between supported ones     -> PTX compute_<newest supported below it>
//   older than the oldest supported       -> UnavailableError naming the supported list
//
// NVRTC options: --gpu-architecture=sm_XX (compute_XX for PTX) -std=c++17 -default-device;
// no fast math. identity() = NVRTC version + the library file + target + options.
// CompileRequest::symbol names the module (NVRTC program "<symbol>.cu", messages); a failed
// compile raises CompileError with the log, the options, and the offending source lines
// quoted in what().
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "spindle/runtime/cuda/cuda_api.hpp"
#include "spindle/runtime/cuda/device.hpp"
#include "spindle/runtime/engine.hpp"
#include "spindle/support/error.hpp"

namespace spindle::cuda {

struct CudaTarget {
  int requested = 0;  // the architecture asked for (device or constructor), e.g. 90
  int arch = 0;       // what NVRTC compiles for
  bool ptx = false;   // true: PTX for compute_<arch>; false: cubin for sm_<arch>

  std::string name() const { return message(ptx ? "compute_" : "sm_", arch); }
  std::string option() const { return "--gpu-architecture=" + name(); }
};

inline std::string arch_list(const std::vector<int>& archs) {
  std::string s;
  for (int a : archs) s += (s.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return s;
}

// See the top of the file. `supported` is NVRTC's list (any order).
inline CudaTarget resolve_cuda_target(int requested, std::vector<int> supported, const std::string& nvrtc_desc = "NVRTC") {
  std::sort(supported.begin(), supported.end());
  SPINDLE_CHECK(!supported.empty(), UnavailableError, nvrtc_desc, " reports no supported GPU architecture");
  SPINDLE_CHECK(requested >= supported.front(), UnavailableError, "CUDA architecture sm_", requested,
                " is older than every architecture ", nvrtc_desc, " supports (", arch_list(supported), ")",
                "\n  hint: use an NVRTC that still supports it (NVRTC 12 compiles for sm_50 and newer; see "
                "scripts/install-nvrtc12.sh and SPINDLE_NVRTC_LIBRARY)");
  CudaTarget t;
  t.requested = requested;
  if (std::find(supported.begin(), supported.end(), requested) != supported.end()) {
    t.arch = requested;
    return t;
  }
  int best_same_major = -1, best_below = -1;
  for (int a : supported) {
    if (a > requested) continue;
    best_below = a;
    if (a / 10 == requested / 10) best_same_major = a;
  }
  if (best_same_major >= 0) {
    t.arch = best_same_major;
  } else {
    t.arch = best_below;
    t.ptx = true;
  }
  return t;
}

// A module loaded into a CUDA context; unloaded when the last reference goes.
class CudaModule final : public runtime::LoadedModule {
 public:
  CudaModule(CudaContext& context, CUmodule module, std::string name)
      : context_(&context), module_(module), name_(std::move(name)) {}
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;
  ~CudaModule() override {
    context_->api().cuCtxSetCurrent(context_->handle());
    context_->api().cuModuleUnload(module_);
  }

  // The CUmodule.
  void* entry() const override { return module_; }
  CUmodule handle() const { return module_; }
  const std::string& name() const { return name_; }
  CudaContext& context() const { return *context_; }

  // The CUfunction of an extern "C" __global__ function; RuntimeError naming the symbol
  // and the module when there is none.
  void* function(const std::string& symbol) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = functions_.find(symbol); it != functions_.end()) return it->second;
    context_->make_current();
    CUfunction f = nullptr;
    CUresult r = context_->api().cuModuleGetFunction(&f, module_, symbol.c_str());
    SPINDLE_CHECK(r == CUDA_SUCCESS, RuntimeError, "CUDA module '", name_, "' has no kernel '", symbol,
                  "': cuModuleGetFunction failed: ", context_->api().error_text(r),
                  "\n  hint: kernels must be extern \"C\" __global__ functions");
    functions_.emplace(symbol, f);
    return f;
  }

 private:
  CudaContext* context_;
  CUmodule module_;
  std::string name_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, void*> functions_;
};

namespace detail {

// Each "(<line>): error" of an NVRTC log (at most 5) with the source line it names and the
// line before it (where a missing ";" or ")" usually is).
inline std::string quote_error_lines(const std::string& log, const std::string& source) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= source.size()) {
    std::size_t end = source.find('\n', start);
    if (end == std::string::npos) end = source.size();
    lines.push_back(source.substr(start, end - start));
    start = end + 1;
  }
  std::string out;
  std::vector<long> seen;
  std::size_t pos = 0;
  while ((pos = log.find("): error", pos)) != std::string::npos && seen.size() < 5) {
    std::size_t open = log.rfind('(', pos);
    std::size_t line_start = log.rfind('\n', pos);
    line_start = line_start == std::string::npos ? 0 : line_start + 1;
    pos += 8;
    if (open == std::string::npos || open < line_start) continue;
    long n = std::strtol(log.c_str() + open + 1, nullptr, 10);
    std::size_t line_end = log.find('\n', pos);
    std::string error_text = log.substr(line_start, (line_end == std::string::npos ? log.size() : line_end) - line_start);
    out += "\n  " + error_text;
    if (n >= 1 && static_cast<std::size_t>(n) <= lines.size() &&
        std::find(seen.begin(), seen.end(), n) == seen.end()) {
      seen.push_back(n);
      if (n >= 2) out += message("\n       line ", n - 1, " | ", lines[static_cast<std::size_t>(n - 2)]);
      out += message("\n    -> line ", n, " | ", lines[static_cast<std::size_t>(n - 1)]);
    }
  }
  return out;
}

}  // namespace detail

class NvrtcEngine final : public runtime::Engine {
 public:
  // arch: fixed target architecture (e.g. 80 for sm_80); nullopt = the device's.
  explicit NvrtcEngine(CudaOptions options = CudaOptions::from_env(), std::optional<int> arch = std::nullopt)
      : options_(std::move(options)), fixed_arch_(arch) {
    SPINDLE_CHECK(!arch || (*arch >= 10 && *arch < 10000), UserError, "NvrtcEngine: architecture ", *arch,
                  " is not a compute capability number", "\n  hint: write 80 for sm_80, 90 for sm_90");
  }

  std::string name() const override { return "nvrtc"; }

  std::string identity() const override {
    const NvrtcApi& api = nvrtc();
    auto [major, minor] = nvrtc_version();
    std::string opts;
    for (const auto& o : options()) opts += " " + o;
    return message("nvrtc ", major, ".", minor, " (", api.resolved, ") target ", target().name(), opts);
  }

  // The loaded NVRTC (UnavailableError when it cannot be loaded).
  const NvrtcApi& nvrtc() const { return nvrtc_api(options_); }
  std::pair<int, int> nvrtc_version() const {
    const NvrtcApi& api = nvrtc();
    int major = 0, minor = 0;
    check_nvrtc(api, api.nvrtcVersion(&major, &minor), "nvrtcVersion");
    return {major, minor};
  }
  std::vector<int> supported_archs() const {
    const NvrtcApi& api = nvrtc();
    int n = 0;
    check_nvrtc(api, api.nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
    std::vector<int> archs(static_cast<std::size_t>(std::max(n, 0)));
    if (n > 0) check_nvrtc(api, api.nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
    return archs;
  }

  // The resolved target (asks the device when no architecture was fixed; UnavailableError
  // without one).
  CudaTarget target() const {
    std::lock_guard<std::mutex> lock(target_mutex_);
    if (!target_) {
      int requested = fixed_arch_ ? *fixed_arch_ : CudaContext::process(options_).device().arch();
      auto [major, minor] = nvrtc_version();
      target_ = resolve_cuda_target(requested, supported_archs(),
                                    message("NVRTC ", major, ".", minor, " ('", nvrtc().resolved, "')"));
    }
    return *target_;
  }

  // The NVRTC option list for target().
  std::vector<std::string> options() const { return {target().option(), "-std=c++17", "-default-device"}; }

  const CudaOptions& cuda_options() const { return options_; }
  std::optional<int> fixed_arch() const { return fixed_arch_; }

  std::vector<std::uint8_t> compile(const runtime::CompileRequest& request) override {
    const NvrtcApi& api = nvrtc();
    CudaTarget t = target();
    std::vector<std::string> opts = options();
    std::vector<const char*> argv;
    for (const auto& o : opts) argv.push_back(o.c_str());
    std::string program_name = request.symbol + ".cu";

    nvrtcProgram prog = nullptr;
    check_nvrtc(api, api.nvrtcCreateProgram(&prog, request.source.c_str(), program_name.c_str(), 0, nullptr, nullptr),
                "nvrtcCreateProgram", &request);
    struct Destroy {
      const NvrtcApi& api;
      nvrtcProgram& prog;
      ~Destroy() { api.nvrtcDestroyProgram(&prog); }
    } destroy{api, prog};

    nvrtcResult rc = api.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    std::string log;
    std::size_t log_size = 0;
    if (api.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
      log.resize(log_size);
      if (api.nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) log.clear();
      while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    }
    if (rc != NVRTC_SUCCESS) {
      std::string joined;
      for (const auto& o : opts) joined += (joined.empty() ? "" : " ") + o;
      std::string quoted = detail::quote_error_lines(log, request.source);
      if (quoted.empty()) {
        std::string first = log.substr(0, log.find('\n'));
        quoted = "\n  " + (first.empty() ? std::string("(NVRTC wrote no log)") : first);
      }
      throw CompileError(message("NVRTC: compiling CUDA module '", request.symbol, "'",
                                 request.kernel_name.empty() ? "" : " (kernel '" + request.kernel_name + "')", " for ",
                                 t.name(), " failed: ", api.error_text(rc), quoted, "\n  options: ", joined,
                                 "\n  hint: the full log is in CompileError::log(), the source in "
                                 "CompileError::source()"),
                         request.source, log, joined);
    }

    std::vector<std::uint8_t> artifact;
    std::size_t size = 0;
    if (t.ptx) {
      check_nvrtc(api, api.nvrtcGetPTXSize(prog, &size), "nvrtcGetPTXSize", &request);
      artifact.resize(size);
      check_nvrtc(api, api.nvrtcGetPTX(prog, reinterpret_cast<char*>(artifact.data())), "nvrtcGetPTX", &request);
      if (artifact.empty() || artifact.back() != 0) artifact.push_back(0);  // cuModuleLoadData needs the NUL
    } else {
      check_nvrtc(api, api.nvrtcGetCUBINSize(prog, &size), "nvrtcGetCUBINSize", &request);
      artifact.resize(size);
      check_nvrtc(api, api.nvrtcGetCUBIN(prog, reinterpret_cast<char*>(artifact.data())), "nvrtcGetCUBIN", &request);
    }
    SPINDLE_CHECK(!artifact.empty(), RuntimeError, "NVRTC: compiling CUDA module '", request.symbol,
                  "' produced an empty ", t.ptx ? "PTX" : "cubin");
    return artifact;
  }

  // UnavailableError without a usable GPU; RuntimeError when the artifact does not fit the
  // device or the driver rejects it.
  std::shared_ptr<runtime::LoadedModule> load(std::span<const std::uint8_t> artifact,
                                              const runtime::CompileRequest& request) override {
    CudaContext& context = CudaContext::process(options_);
    CudaTarget t = target();
    int device_arch = context.device().arch();
    bool fits = t.ptx ? t.arch <= device_arch : (t.arch / 10 == device_arch / 10 && t.arch <= device_arch);
    SPINDLE_CHECK(fits, RuntimeError, "CUDA module '", request.symbol, "' was compiled for ", t.name(),
                  ", which cannot run on ", context.device().description(),
                  "\n  hint: construct NvrtcEngine without a fixed architecture so that it targets the device");
    bool is_elf = artifact.size() >= 4 && artifact[0] == 0x7f && artifact[1] == 'E' && artifact[2] == 'L' &&
                  artifact[3] == 'F';
    SPINDLE_CHECK(t.ptx ? (!artifact.empty() && artifact.back() == 0) : is_elf, RuntimeError, "CUDA module '",
                  request.symbol, "': the ", artifact.size(), "-byte artifact is not ",
                  t.ptx ? "NUL-terminated PTX text" : "a cubin (no ELF header)",
                  "\n  hint: a damaged cache entry; it is rebuilt");
    context.make_current();
    CUmodule module = nullptr;
    CUresult r = context.api().cuModuleLoadData(&module, artifact.data());
    SPINDLE_CHECK(r == CUDA_SUCCESS, RuntimeError, "CUDA driver: loading module '", request.symbol, "' (",
                  artifact.size(), "-byte ", t.ptx ? "PTX" : "cubin", " for ", t.name(), ") on ",
                  context.device().description(), " failed: ", context.api().error_text(r),
                  "\n  hint: a driver older than NVRTC ", nvrtc_version().first,
                  " may reject its output; update the driver or use an older NVRTC (SPINDLE_NVRTC_LIBRARY)");
    return std::make_shared<CudaModule>(context, module, request.symbol);
  }

 private:
  static void check_nvrtc(const NvrtcApi& api, nvrtcResult r, const char* what,
                          const runtime::CompileRequest* request = nullptr) {
    if (r == NVRTC_SUCCESS) [[likely]]
      return;
    throw RuntimeError(message("NVRTC ('", api.resolved, "'): ", what,
                               request ? " for CUDA module '" + request->symbol + "'" : std::string(),
                               " failed: ", api.error_text(r)));
  }

  CudaOptions options_;
  std::optional<int> fixed_arch_;
  mutable std::mutex target_mutex_;
  mutable std::optional<CudaTarget> target_;
};

}  // namespace spindle::cuda
