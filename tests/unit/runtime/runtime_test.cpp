// Runtime: engine selection, lazily created parts, running a kernel through load() and
// abi(), the default instance.
#include <catch2/catch.hpp>

#include "runtime_test_support.hpp"
#include "spindle/runtime/runtime.hpp"

using namespace spindle;
using namespace spindle::runtime;
using namespace spindle::runtime::test;

namespace {

Options test_options(const std::string& cache_dir, const std::string& engine) {
  Options o;
  o.cache_dir = cache_dir;
  o.engine = engine;
  o.num_threads = 2;
  return o;
}

}  // namespace

TEST_CASE("runtime runs a kernel through its cache and pool", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  ScratchDir dir;
  Runtime rt(test_options(dir.path(), name));
  CHECK(rt.engine().name() == name);
  CHECK(rt.cache().directory() == dir.path());
  CHECK(rt.cache().disk_enabled());
  CompileRequest req = scale_kernel("spindle_runtime_scale");
  auto module = rt.load(req);
  const codegen::KernelRuntimeAbi* abi = rt.abi();
  REQUIRE(abi != nullptr);
  CHECK(abi->pool == &rt.pool());
  CHECK(abi->parallel_for == &ThreadPool::abi_parallel_for);
  CHECK(rt.pool().num_threads() == 2);
  CHECK(run_scale(module->entry(), 20000, 100, abi));
  CHECK(rt.load(req) == module);
  CHECK(rt.cache().stats().compiles == 1);
  CHECK(rt.cache().stats().memory_hits == 1);
  CHECK(files_in(dir.path()).size() == 1);
}

TEST_CASE("runtime engine selection", "[runtime]") {
  ScratchDir dir;
  SECTION("default engine") {
    Runtime rt(test_options(dir.path(), ""));
#ifdef SPINDLE_WITH_ORC
    CHECK(rt.engine().name() == "orc");
#else
    CHECK(rt.engine().name() == "system");
#endif
    CHECK(default_engine_name() == rt.engine().name());
  }
  SECTION("unknown engine") {
    Runtime rt(test_options(dir.path(), "quantum"));
    CHECK_THROWS_AS(rt.engine(), UserError);
    CHECK_THROWS_WITH(rt.engine(), Catch::Contains("quantum") && Catch::Contains("system"));
  }
#ifndef SPINDLE_WITH_ORC
  SECTION("orc without LLVM") {
    Runtime rt(test_options(dir.path(), "orc"));
    CHECK_THROWS_AS(rt.engine(), UnavailableError);
    CHECK_THROWS_WITH(rt.engine(), Catch::Contains("SPINDLE_WITH_ORC"));
  }
#endif
  SECTION("disk cache off") {
    Options o = test_options(dir.path(), "system");
    o.disk_cache = false;
    Runtime rt(o);
    rt.load(scale_kernel("spindle_runtime_nodisk"));
    CHECK(!rt.cache().disk_enabled());
    CHECK(files_in(dir.path()).empty());
  }
}

TEST_CASE("runtime default instance is one object", "[runtime]") {
  Runtime& a = Runtime::default_instance();
  Runtime& b = Runtime::default_instance();
  CHECK(&a == &b);
  CHECK(a.options().num_threads >= 1);
}
