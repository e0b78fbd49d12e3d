// Engines: compile + load + run a kernel that follows kernel_abi.hpp, compile errors that
// carry the log, a missing compiler, identities (the whole compiler command and its
// version output), module lifetime, and the engine choice logged with SPINDLE_DEBUG.
#include <catch2/catch.hpp>

#include <cstdio>
#include <thread>

#include "runtime_test_support.hpp"
#include "spindle/runtime/runtime.hpp"
#include "spindle/runtime/system_engine.hpp"
#include "spindle/runtime/thread_pool.hpp"
#include "spindle/support/error.hpp"

using namespace spindle;
using namespace spindle::runtime;
using namespace spindle::runtime::test;

namespace {

CompileRequest broken_kernel() {
  std::string src = std::string(codegen::kernel_abi_c_text) +
                    "int spindle_broken(void* const* b, const long long* s, const spindle_rt* rt) {\n"
                    "  return undeclared_variable_xyz;\n"
                    "}\n";
  return CompileRequest{src, "spindle_broken", "broken_kernel"};
}

}  // namespace

TEST_CASE("engines compile, load and run a kernel of the kernel ABI", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  auto engine = make_test_engine(name);
  CHECK(engine->name() == name);
  CompileRequest req = scale_kernel("spindle_test_scale_run");
  std::vector<std::uint8_t> artifact = engine->compile(req);
  REQUIRE(!artifact.empty());
  auto module = engine->load(artifact, req);
  REQUIRE(module->entry() != nullptr);

  SECTION("serially (null runtime)") { CHECK(run_scale(module->entry(), 1000, 64, nullptr)); }
  SECTION("on a thread pool through the ABI") {
    ThreadPool pool(2);
    auto abi = pool.abi();
    CHECK(run_scale(module->entry(), 100003, 97, &abi));
  }
  SECTION("two loads of one artifact are independent") {
    auto second = engine->load(artifact, req);
    CHECK(second->entry() != module->entry());
    module.reset();
    CHECK(run_scale(second->entry(), 333, 10, nullptr));
  }
  SECTION("a module outlives its engine") {
    engine.reset();
    CHECK(run_scale(module->entry(), 500, 7, nullptr));
  }
}

TEST_CASE("a compile failure raises CompileError with the log", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  auto engine = make_test_engine(name);
  CompileRequest req = broken_kernel();
  try {
    engine->compile(req);
    FAIL("compile of a broken kernel did not throw");
  } catch (const CompileError& e) {
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("broken_kernel"));
    CHECK_THAT(what, Catch::Contains("undeclared_variable_xyz"));
    CHECK_THAT(what, Catch::Contains("error"));
    CHECK_THAT(e.log(), Catch::Contains("undeclared_variable_xyz"));
    CHECK(e.source() == req.source);
    CHECK(!e.options().empty());
  }
}

TEST_CASE("loading a corrupt artifact raises RuntimeError", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  auto engine = make_test_engine(name);
  std::vector<std::uint8_t> garbage(256, 0x5a);
  CHECK_THROWS_AS(engine->load(garbage, scale_kernel("spindle_garbage")), RuntimeError);
  CHECK_THROWS_WITH(engine->load(garbage, scale_kernel("spindle_garbage")), Catch::Contains("spindle_garbage"));
}

TEST_CASE("a missing symbol raises RuntimeError", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  auto engine = make_test_engine(name);
  CompileRequest req = scale_kernel("spindle_test_scale_sym");
  auto artifact = engine->compile(req);
  CompileRequest wrong = req;
  wrong.symbol = "spindle_not_there";
  CHECK_THROWS_AS(engine->load(artifact, wrong), RuntimeError);
}

TEST_CASE("engine identities name compiler, target and flags", "[runtime]") {
  auto system = make_system_engine(Options{});
  std::string id = system->identity();
  CHECK_THAT(id, Catch::StartsWith("system "));
  CHECK_THAT(id, Catch::Contains("cc:'cc'"));
  CHECK_THAT(id, Catch::Contains("version-digest:"));
  CHECK_THAT(id, Catch::Contains("-march=native"));
  CHECK_THAT(id, Catch::Contains("-O3"));
  CHECK_THAT(id, Catch::Contains("cpu:"));
  CHECK(system->identity() == id);
#ifdef SPINDLE_WITH_ORC
  auto orc = make_orc_engine(Options{});
  std::string oid = orc->identity();
  CHECK_THAT(oid, Catch::StartsWith("orc clang-19"));
  CHECK_THAT(oid, Catch::Contains("-O3"));
  CHECK_THAT(oid, Catch::Contains("-vectorize-slp"));
  CHECK_THAT(oid, Catch::Contains("features:"));
  CHECK(orc->name() == "orc");
#endif
}

TEST_CASE("a missing system compiler raises UnavailableError", "[runtime]") {
  Options o;
  o.system_cc = "spindle-no-such-cc-42";
  auto engine = make_system_engine(o);
  CHECK_THROWS_AS(engine->identity(), UnavailableError);
  CHECK_THROWS_WITH(engine->identity(), Catch::Contains("spindle-no-such-cc-42") && Catch::Contains("PATH"));
  CHECK_THROWS_AS(engine->compile(scale_kernel("spindle_x")), UnavailableError);
}

TEST_CASE("the system engine accepts a launcher in system_cc", "[runtime]") {
  Options o;
  o.system_cc = "env cc";
  auto engine = make_system_engine(o);
  CHECK_THAT(engine->identity(), Catch::Contains("cc:'env cc'"));
  CHECK(engine->identity() != make_system_engine(Options{})->identity());
  CompileRequest req = scale_kernel("spindle_test_scale_env");
  auto module = engine->load(engine->compile(req), req);
  CHECK(run_scale(module->entry(), 100, 8, nullptr));
}

TEST_CASE("with debug the runtime logs its engine choice and cache directory", "[runtime]") {
  ScratchDir dir;
  Options o;
  o.engine = "system";
  o.cache_dir = dir.path();
  o.debug = true;
  o.num_threads = 1;
  Runtime rt(o);
  std::fflush(stderr);
  std::FILE* log = std::tmpfile();
  int saved = ::dup(2);
  ::dup2(::fileno(log), 2);
  rt.load(scale_kernel("spindle_test_engine_log"));
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  std::rewind(log);
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, log)) text.append(buf, n);
  std::fclose(log);
  INFO(text);
  CHECK_THAT(text, Catch::Contains("spindle: engine system (SPINDLE_ENGINE / Options::engine)"));
  CHECK_THAT(text, Catch::Contains("spindle: kernel cache: memory and disk '" + dir.path() + "'"));
  CHECK_THAT(text, Catch::Contains("spindle: JIT: compiled kernel 'scale' (spindle_test_engine_log)"));
}

TEST_CASE("one engine compiles and loads from several threads at once", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  auto engine = make_test_engine(name);
  std::vector<std::shared_ptr<LoadedModule>> modules(3);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      try {
        CompileRequest req = scale_kernel("spindle_test_mt_" + std::to_string(i));
        modules[i] = engine->load(engine->compile(req), req);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    CHECK(errors[i].empty());
    REQUIRE(modules[i]);
    CHECK(run_scale(modules[i]->entry(), 200, 9, nullptr));
  }
}
