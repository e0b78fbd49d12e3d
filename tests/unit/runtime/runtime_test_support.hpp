// Shared pieces of the runtime tests: small C kernels that follow codegen/kernel_abi.hpp,
// a scratch directory under /tmp that removes itself, and the list of engines this build
// can test.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "spindle/codegen/kernel_abi.hpp"
#include "spindle/runtime/engine.hpp"
#include "spindle/runtime/system_engine.hpp"
#include "spindle/support/options.hpp"

namespace spindle::runtime::test {

// x[i] = 2 * y[i] + expf(0 * y[i]) = 2 y[i] + 1 over [0, scalars[0]), as a parallel loop
// with grain scalars[1]. expf comes from the process (libm), which checks symbol
// resolution of both engines. `salt` makes distinct sources (distinct cache keys).
inline CompileRequest scale_kernel(const std::string& symbol, const std::string& salt = "") {
  std::string src = std::string(codegen::kernel_abi_c_text) +
                    "/* " + salt + " */\n"
                    "float expf(float);\n"
                    "typedef struct { float* x; const float* y; } scale_closure;\n"
                    "static void scale_body(void* c, long long begin, long long end) {\n"
                    "  scale_closure* cl = (scale_closure*)c;\n"
                    "  for (long long i = begin; i < end; ++i) cl->x[i] = 2.0f * cl->y[i] + expf(0.0f * cl->y[i]);\n"
                    "}\n"
                    "int " + symbol + "(void* const* buffers, const long long* scalars, const spindle_rt* rt) {\n"
                    "  scale_closure cl = { (float*)buffers[0], (const float*)buffers[1] };\n"
                    "  if (rt) rt->parallel_for(rt->pool, scalars[0], scalars[1], scale_body, &cl);\n"
                    "  else scale_body(&cl, 0, scalars[0]);\n"
                    "  return 0;\n"
                    "}\n";
  return CompileRequest{src, symbol, "scale"};
}

// Runs a scale kernel over n elements; true when every x[i] == 2 y[i] + 1.
inline bool run_scale(void* entry, std::int64_t n, std::int64_t grain, const codegen::KernelRuntimeAbi* rt) {
  std::vector<float> x(static_cast<std::size_t>(n), -1.0f), y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = static_cast<float>(i % 97);
  void* buffers[2] = {x.data(), y.data()};
  std::int64_t scalars[2] = {n, grain};
  int rc = reinterpret_cast<codegen::KernelEntry>(entry)(buffers, scalars, rt);
  if (rc != 0) return false;
  for (std::int64_t i = 0; i < n; ++i)
    if (x[static_cast<std::size_t>(i)] != 2.0f * y[static_cast<std::size_t>(i)] + 1.0f) return false;
  return true;
}

inline std::vector<std::string> engine_names() {
#ifdef SPINDLE_WITH_ORC
  return {"system", "orc"};
#else
  return {"system"};
#endif
}

inline std::unique_ptr<Engine> make_test_engine(const std::string& name) {
#ifdef SPINDLE_WITH_ORC
  if (name == "orc") return make_orc_engine(Options{});
#endif
  return make_system_engine(Options{});
}

// A private directory under /tmp, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = "/tmp/spindle-rt-test-XXXXXX";
    if (::mkdtemp(pattern.data())) path_ = pattern;
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) names.push_back(e.path().filename().string());
  return names;
}

}  // namespace spindle::runtime::test
