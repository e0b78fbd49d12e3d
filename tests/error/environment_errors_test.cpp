// Environment errors (support/options.hpp): one case per malformed variable, each setting
// it with setenv (restored afterwards), then checking the exception type and a stable
// message substring from Options::from_env(), a default-constructed Runtime, or a kernel
// call on the default runtime in a fresh process (the error reaches the call, it does not
// terminate the program).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "error/error_support.hpp"
#include "spindle/runtime/cuda/cuda_options.hpp"
#include "spindle/runtime/posix.hpp"

namespace {

using namespace spindle_error_test;
namespace sp = spindle;

// Sets (value) or unsets (nullptr) variables for one scope, then restores them.
class EnvGuard {
 public:
  EnvGuard(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      if (value)
        ::setenv(name, value, 1);
      else
        ::unsetenv(name);
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;
  ~EnvGuard() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A private directory under /tmp with one regular file "file" in it.
struct TempTree {
  sp::runtime::posix::TempDir dir{"spindle-env-test-"};
  std::string file = dir.path() + "/file";
  TempTree() { std::ofstream(file) << "not a directory"; }
};

}  // namespace

// --- SPINDLE_NUM_THREADS ------------------------------------------------------------------

TEST_CASE("SPINDLE_NUM_THREADS that is not a number is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "abc"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_NUM_THREADS='abc' is not a thread count");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "not a decimal number");
}

TEST_CASE("SPINDLE_NUM_THREADS=0 is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "0"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_NUM_THREADS='0' is not a thread count");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "from 1 to 4096");
}

TEST_CASE("a negative SPINDLE_NUM_THREADS is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "-2"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_NUM_THREADS='-2'");
}

TEST_CASE("SPINDLE_NUM_THREADS above 4096 is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "4097"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_NUM_THREADS='4097'");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "from 1 to 4096");
}

TEST_CASE("a SPINDLE_NUM_THREADS that overflows an int is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "99999999999999999999"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError,
                       "SPINDLE_NUM_THREADS='99999999999999999999' is not a thread count: expected an integer from 1 to 4096");
}

TEST_CASE("SPINDLE_NUM_THREADS with trailing characters is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "8x"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_NUM_THREADS='8x'");
}

TEST_CASE("SPINDLE_NUM_THREADS with blanks is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", " 4"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_NUM_THREADS=' 4'");
}

// --- SPINDLE_DUMP_DIR ---------------------------------------------------------------------

TEST_CASE("a SPINDLE_DUMP_DIR that does not exist is a UserError", "[error][env]") {
  TempTree t;
  std::string missing = t.dir.path() + "/no/such/dir";
  EnvGuard env{{"SPINDLE_DUMP_DIR", missing.c_str()}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_DUMP_DIR='" + missing + "' cannot be used");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "No such file or directory");
}

TEST_CASE("a SPINDLE_DUMP_DIR that is a file is a UserError", "[error][env]") {
  TempTree t;
  EnvGuard env{{"SPINDLE_DUMP_DIR", t.file.c_str()}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_DUMP_DIR='" + t.file + "' is not a directory");
}

TEST_CASE("a SPINDLE_DUMP_DIR this process cannot write is a UserError", "[error][env]") {
  if (::geteuid() == 0) return;  // root writes anywhere
  TempTree t;
  std::string ro = t.dir.path() + "/ro";
  REQUIRE(::mkdir(ro.c_str(), 0500) == 0);
  EnvGuard env{{"SPINDLE_DUMP_DIR", ro.c_str()}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "cannot write to");
  ::rmdir(ro.c_str());
}

// --- SPINDLE_ENGINE -----------------------------------------------------------------------

TEST_CASE("an unknown SPINDLE_ENGINE is a UserError naming the accepted values", "[error][env]") {
  EnvGuard env{{"SPINDLE_ENGINE", "quantum"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_ENGINE='quantum' is not an engine");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "'orc'");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "'system'");
}

TEST_CASE("SPINDLE_ENGINE is case-sensitive", "[error][env]") {
  EnvGuard env{{"SPINDLE_ENGINE", "System"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_ENGINE='System' is not an engine");
}

#ifndef SPINDLE_WITH_ORC
TEST_CASE("SPINDLE_ENGINE=orc in a build without LLVM is an UnavailableError naming the other engine",
          "[error][env]") {
  EnvGuard env{{"SPINDLE_ENGINE", "orc"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UnavailableError, "has no LLVM");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UnavailableError, "SPINDLE_ENGINE=system");
}
#endif

// --- booleans -----------------------------------------------------------------------------

TEST_CASE("SPINDLE_DISK_CACHE that is not a boolean is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_DISK_CACHE", "maybe"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_DISK_CACHE='maybe' is not a boolean");
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "0, 1, on, off, true, false");
}

TEST_CASE("SPINDLE_DISK_CACHE=2 is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_DISK_CACHE", "2"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_DISK_CACHE='2' is not a boolean");
}

TEST_CASE("SPINDLE_DEBUG=yes is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_DEBUG", "yes"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_DEBUG='yes' is not a boolean");
}

TEST_CASE("SPINDLE_DEBUG=verbose is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_DEBUG", "verbose"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_DEBUG='verbose' is not a boolean");
}

// --- SPINDLE_CC and SPINDLE_CACHE_DIR -----------------------------------------------------

TEST_CASE("a blank SPINDLE_CC is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_CC", "   "}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_CC='   ' names no compiler");
}

TEST_CASE("a SPINDLE_CC with a line break is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_CC", "cc\n-O0"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "contains a line break");
}

TEST_CASE("a relative SPINDLE_CACHE_DIR is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_CACHE_DIR", "cache/spindle"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_CACHE_DIR='cache/spindle' is not an absolute path");
}

TEST_CASE("a SPINDLE_CACHE_DIR that is a file is a UserError", "[error][env]") {
  TempTree t;
  EnvGuard env{{"SPINDLE_CACHE_DIR", t.file.c_str()}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "exists and is not a directory");
}

// --- the CUDA layer's variable ------------------------------------------------------------

TEST_CASE("SPINDLE_CUDA_DEVICE that is not an ordinal is a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_CUDA_DEVICE", "-1"}};
  SPINDLE_EXPECT_ERROR(sp::cuda::CudaOptions::from_env(), sp::UserError, "SPINDLE_CUDA_DEVICE='-1'");
}

TEST_CASE("SPINDLE_CUDA_SDDMM is 'nonzeros' or 'rows', anything else is a UserError", "[error][env]") {
  {
    EnvGuard env{{"SPINDLE_CUDA_SDDMM", "warps"}};
    SPINDLE_EXPECT_ERROR(sp::cuda::CudaOptions::from_env(), sp::UserError, "SPINDLE_CUDA_SDDMM='warps'");
  }
  {
    EnvGuard env{{"SPINDLE_CUDA_SDDMM", "rows"}};
    CHECK(sp::cuda::CudaOptions::from_env().sddmm_by_rows);
  }
  EnvGuard env{{"SPINDLE_CUDA_SDDMM", "nonzeros"}};
  CHECK_FALSE(sp::cuda::CudaOptions::from_env().sddmm_by_rows);
}

TEST_CASE("SPINDLE_CUDA_SPMM is 'rows' or 'nonzeros', anything else is a UserError", "[error][env]") {
  {
    EnvGuard env{{"SPINDLE_CUDA_SPMM", "merge"}};
    SPINDLE_EXPECT_ERROR(sp::cuda::CudaOptions::from_env(), sp::UserError, "SPINDLE_CUDA_SPMM='merge'");
  }
  {
    EnvGuard env{{"SPINDLE_CUDA_SPMM", "nonzeros"}};
    CHECK(sp::cuda::CudaOptions::from_env().spmm_by_nonzeros);
  }
  EnvGuard env{{"SPINDLE_CUDA_SPMM", "rows"}};
  CHECK_FALSE(sp::cuda::CudaOptions::from_env().spmm_by_nonzeros);
}

// --- where the error surfaces -------------------------------------------------------------

TEST_CASE("a bad variable reaches a default-constructed Runtime as a UserError", "[error][env]") {
  EnvGuard env{{"SPINDLE_DISK_CACHE", "perhaps"}};
  SPINDLE_EXPECT_ERROR(sp::runtime::Runtime(), sp::UserError, "SPINDLE_DISK_CACHE='perhaps'");
}

// Runs in a child process (see below) so that the default runtime is not yet created.
TEST_CASE("child: a kernel call on the default runtime raises the environment error", "[.env_child]") {
  if (!std::getenv("SPINDLE_TEST_ENV_CHILD")) return;
  auto a = sp::Csr<float>::random(20, 20, 3, 7);
  auto x = sp::Tensor<float>::random({20}, 8);
  auto y = sp::Tensor<float>::full({20}, sentinel<float>());
  const auto before = snapshot(y);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the next call reads the environment again
    SPINDLE_EXPECT_ERROR(sp::ops::spmv<float>()(a, x, y), sp::UserError, "SPINDLE_NUM_THREADS='many'");
  }
  CHECK(snapshot(y) == before);
}

TEST_CASE("a bad variable reaches the first kernel call on the default runtime, not std::terminate",
          "[error][env]") {
  EnvGuard env{{"SPINDLE_NUM_THREADS", "many"}, {"SPINDLE_TEST_ENV_CHILD", "1"}};
  auto r = sp::runtime::posix::run_process({"/proc/self/exe", "[env_child]"});
  INFO(r.output);
  REQUIRE(r.spawn_errno == 0);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("All tests passed"));
}

// --- what is accepted ---------------------------------------------------------------------

TEST_CASE("valid environment values are accepted", "[error][env]") {
  TempTree t;
  EnvGuard env{{"SPINDLE_NUM_THREADS", "4096"}, {"SPINDLE_DISK_CACHE", "Off"}, {"SPINDLE_DEBUG", "false"},
               {"SPINDLE_ENGINE", "system"},    {"SPINDLE_CC", "ccache  cc"},  {"SPINDLE_DUMP_DIR", t.dir.path().c_str()},
               {"SPINDLE_CACHE_DIR", (t.dir.path() + "/not/yet/created").c_str()}};
  sp::Options o = sp::Options::from_env();
  CHECK(o.num_threads == 4096);
  CHECK(!o.disk_cache);
  CHECK(!o.debug);
  CHECK(o.engine == "system");
  CHECK(o.system_cc == "ccache  cc");
  CHECK(o.dump_dir == t.dir.path());
  CHECK(o.cache_dir == t.dir.path() + "/not/yet/created");
  EnvGuard more{{"SPINDLE_NUM_THREADS", "1"}, {"SPINDLE_DISK_CACHE", "TRUE"}, {"SPINDLE_DEBUG", ""}};
  o = sp::Options::from_env();
  CHECK(o.num_threads == 1);
  CHECK(o.disk_cache);
  CHECK(!o.debug);  // empty = unset
}

TEST_CASE("without SPINDLE_CACHE_DIR, XDG_CACHE_HOME and HOME there is no disk cache", "[error][env]") {
  EnvGuard env{{"SPINDLE_CACHE_DIR", nullptr}, {"XDG_CACHE_HOME", nullptr}, {"HOME", nullptr}};
  CHECK(sp::Options::from_env().cache_dir.empty());  // never a shared directory such as /tmp
  {
    EnvGuard xdg{{"XDG_CACHE_HOME", "relative/cache"}, {"HOME", "/home/someone"}};
    CHECK(sp::Options::from_env().cache_dir == "/home/someone/.cache/spindle");  // relative XDG is invalid
  }
  {
    EnvGuard xdg{{"XDG_CACHE_HOME", "/xdg"}};
    CHECK(sp::Options::from_env().cache_dir == "/xdg/spindle");
  }
  sp::runtime::Runtime rt(sp::Options::from_env());
  CHECK(!rt.cache().disk_enabled());
}

TEST_CASE("an unknown SPINDLE_LOOP_ORDER is a UserError naming the value", "[error][env]") {
  EnvGuard env{{"SPINDLE_LOOP_ORDER", "fastest"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_LOOP_ORDER='fastest' is not a loop-order mode");
}

TEST_CASE("an unknown SPINDLE_EINSUM_PATH is a UserError naming the value", "[error][env]") {
  EnvGuard env{{"SPINDLE_EINSUM_PATH", "greedy"}};
  SPINDLE_EXPECT_ERROR(sp::Options::from_env(), sp::UserError, "SPINDLE_EINSUM_PATH='greedy' is not an einsum path mode");
}

TEST_CASE("SPINDLE_EINSUM_PATH=single and SPINDLE_LOOP_ORDER=written are read", "[error][env]") {
  EnvGuard env{{"SPINDLE_EINSUM_PATH", "single"}, {"SPINDLE_LOOP_ORDER", "written"}};
  const auto o = sp::Options::from_env();
  CHECK(o.einsum_single);
  CHECK(o.keep_loop_order);
}
