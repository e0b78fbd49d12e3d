// Runtime: engine selection, lazily created parts, running a kernel through load() and
// abi(), the default instance; the binder's index check.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime_test_support.hpp"
#include "spindle/runtime/bind_args.hpp"
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

// The device check of a sparse root the GPU build writes at (IndexCheck::distinct): unsorted
// but distinct coordinates pass; a repeated one is a FormatError naming both positions.
TEST_CASE("ArgBinder::check_index_values with distinct values refuses a repeated coordinate", "[runtime]") {
  std::vector<std::int32_t> a{7, 2, 9, 0, 5};
  std::vector<std::int64_t> b{7, 2, 9, 0, 5};
  ArgBinder::IndexCheck c{a.data(), DType::i32, 5, 10, "root R", true};
  CHECK_NOTHROW(ArgBinder::check_index_values(c, a.data()));
  c.dtype = DType::i64;
  CHECK_NOTHROW(ArgBinder::check_index_values(c, b.data()));
  b[4] = 2;
  try {
    ArgBinder::check_index_values(c, b.data());
    FAIL("a repeated coordinate passed");
  } catch (const FormatError& e) {
    CHECK(std::string(e.what()).find("coordinate 2 is stored at positions 1 and 4") != std::string::npos);
  }
  c.distinct = false;  // an indirect write's index buffer may repeat values (scatter-add)
  CHECK_NOTHROW(ArgBinder::check_index_values(c, b.data()));
}

// The index check of indirect writes (ArgBinder::check_index_values): the first value
// outside [0, extent) over blocks of 4096, in both index widths, negatives included, and an
// extent past the 32-bit range.
TEST_CASE("ArgBinder::first_outside finds the first index outside the extent", "[runtime]") {
  std::vector<std::int32_t> a(10000, 3);
  std::vector<std::int64_t> b(10000, 3);
  CHECK(ArgBinder::first_outside(a.data(), 10000, 4) == -1);
  CHECK(ArgBinder::first_outside(b.data(), 10000, 4) == -1);
  CHECK(ArgBinder::first_outside(a.data(), 10000, 3) == 0);
  CHECK(ArgBinder::first_outside(a.data(), 0, 0) == -1);
  for (std::int64_t at : {0, 4095, 4096, 8191, 9999}) {
    INFO("bad value at " << at);
    a[static_cast<std::size_t>(at)] = -1, b[static_cast<std::size_t>(at)] = -1;
    CHECK(ArgBinder::first_outside(a.data(), 10000, 4) == at);
    CHECK(ArgBinder::first_outside(b.data(), 10000, 4) == at);
    CHECK(ArgBinder::first_outside(a.data(), 10000, std::int64_t{1} << 40) == at);  // only negatives are outside
    a[static_cast<std::size_t>(at)] = 4, b[static_cast<std::size_t>(at)] = 4;
    CHECK(ArgBinder::first_outside(a.data(), 10000, 4) == at);
    CHECK(ArgBinder::first_outside(b.data(), 10000, 4) == at);
    CHECK(ArgBinder::first_outside(a.data(), 10000, 5) == -1);
    a[static_cast<std::size_t>(at)] = std::numeric_limits<std::int32_t>::min();
    CHECK(ArgBinder::first_outside(a.data(), 10000, std::int64_t{1} << 40) == at);
    a[static_cast<std::size_t>(at)] = 3, b[static_cast<std::size_t>(at)] = 3;
  }
  a[9000] = std::numeric_limits<std::int32_t>::max();
  CHECK(ArgBinder::first_outside(a.data(), 10000, std::int64_t{1} << 40) == -1);
  CHECK(ArgBinder::first_outside(a.data(), 10000, std::numeric_limits<std::int32_t>::max()) == 9000);
}
