// Kernel cache: memory and disk hits, damaged entries (read_entry errors, rebuild), an
// unwritable directory, and concurrent builds of one kernel from threads and processes.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "runtime_test_support.hpp"
#include "spindle/runtime/kernel_cache.hpp"

using namespace spindle;
using namespace spindle::runtime;
using namespace spindle::runtime::test;

namespace {

std::vector<char> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("kernel cache: memory hit, then disk hit in a fresh cache", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  ScratchDir dir;
  auto engine = make_test_engine(name);
  CompileRequest req = scale_kernel("spindle_cache_hit");

  KernelCache first(*engine, dir.path(), true);
  auto a = first.get(req);
  CHECK(first.last_event() == CacheEvent::compiled);
  auto b = first.get(req);
  CHECK(a == b);
  CHECK(first.last_event() == CacheEvent::memory_hit);
  CacheStats s = first.stats();
  CHECK(s.memory_misses == 1);
  CHECK(s.memory_hits == 1);
  CHECK(s.disk_misses == 1);
  CHECK(s.compiles == 1);
  CHECK(s.disk_write_failures == 0);
  CHECK(s.compile_seconds > 0);
  CHECK(run_scale(a->entry(), 1000, 16, nullptr));

  std::string entry = first.entry_path(first.key(req));
  CHECK_THAT(entry, Catch::EndsWith("." + name + ".bin"));
  CHECK(files_in(dir.path()) == std::vector<std::string>{entry.substr(entry.rfind('/') + 1)});

  auto fresh_engine = make_test_engine(name);
  KernelCache second(*fresh_engine, dir.path(), true);
  CacheResult r = second.lookup(req);
  CHECK(r.event == CacheEvent::disk_hit);
  CHECK(second.stats().disk_hits == 1);
  CHECK(second.stats().compiles == 0);
  CHECK(run_scale(r.module->entry(), 1000, 16, nullptr));

  SECTION("a different source is a different key") {
    CompileRequest other = scale_kernel("spindle_cache_hit", "variant");
    CHECK(second.key(other) != second.key(req));
    second.get(other);
    CHECK(second.stats().compiles == 1);
  }
}

TEST_CASE("kernel cache: creates a missing directory with mode 0700", "[runtime]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  std::string nested = dir / "a/b/cache";
  KernelCache cache(*engine, nested, true);
  cache.get(scale_kernel("spindle_cache_mkdir"));
  struct stat st {};
  REQUIRE(::stat(nested.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(files_in(nested).size() == 1);
}

TEST_CASE("kernel cache: disabled disk cache writes nothing", "[runtime]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  KernelCache cache(*engine, dir.path(), false);
  cache.get(scale_kernel("spindle_cache_nodisk"));
  CHECK(files_in(dir.path()).empty());
  CHECK(cache.stats().disk_misses == 0);
  CHECK(cache.stats().compiles == 1);
}

TEST_CASE("read_entry detects damaged entries and get() rebuilds them", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  ScratchDir dir;
  auto engine = make_test_engine(name);
  CompileRequest req = scale_kernel("spindle_cache_damage");
  Digest key;
  std::string path;
  {
    KernelCache cache(*engine, dir.path(), true);
    cache.get(req);
    key = cache.key(req);
    path = cache.entry_path(key);
  }
  std::vector<char> good = slurp(path);
  REQUIRE(good.size() > sizeof(CacheEntryHeader));
  CHECK(read_entry(path, key).size() == good.size() - sizeof(CacheEntryHeader));

  std::vector<char> bad = good;
  std::string expect;
  SECTION("payload byte flipped") {
    bad[sizeof(CacheEntryHeader) + (bad.size() - sizeof(CacheEntryHeader)) / 2] ^= 0x40;
    expect = "checksum";
  }
  SECTION("truncated inside the header") {
    bad.resize(30);
    expect = "truncated";
  }
  SECTION("truncated inside the payload") {
    REQUIRE(bad.size() > sizeof(CacheEntryHeader) + 10);
    bad.resize(std::max<std::size_t>(bad.size(), 10) - 10);
    expect = "truncated";
  }
  SECTION("trailing bytes") {
    bad.insert(bad.end(), 5, 'x');
    expect = "size mismatch";
  }
  SECTION("bad magic") {
    bad[0] = 'X';
    expect = "bad magic";
  }
  SECTION("other format version") {
    std::uint32_t v = 99;
    std::memcpy(bad.data() + 8, &v, 4);
    expect = "format version 99";
  }
  SECTION("entry of another key") {
    bad[16] ^= 1;
    expect = "wrong key";
  }
  spit(path, bad);
  CHECK_THROWS_AS(read_entry(path, key), CacheError);
  CHECK_THROWS_WITH(read_entry(path, key), Catch::Contains(path) && Catch::Contains(expect));

  KernelCache cache(*engine, dir.path(), true);
  auto module = cache.get(req);
  CacheStats s = cache.stats();
  CHECK(s.disk_corrupt == 1);
  CHECK(s.disk_hits == 0);
  CHECK(s.compiles == 1);
  CHECK(run_scale(module->entry(), 100, 3, nullptr));
  CHECK(read_entry(path, key).size() == good.size() - sizeof(CacheEntryHeader));  // rebuilt
}

TEST_CASE("read_entry: missing file and a valid entry the engine rejects", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  ScratchDir dir;
  auto engine = make_test_engine(name);
  KernelCache cache(*engine, dir.path(), true);
  CompileRequest req = scale_kernel("spindle_cache_reject");
  Digest key = cache.key(req);
  std::string path = cache.entry_path(key);
  CHECK_THROWS_WITH(read_entry(path, key), Catch::Contains("does not exist"));

  std::vector<std::uint8_t> garbage(300, 0x33);
  write_entry(path, key, garbage);
  CHECK(read_entry(path, key) == garbage);
  auto module = cache.get(req);
  CHECK(cache.stats().disk_corrupt == 1);
  CHECK(cache.stats().compiles == 1);
  CHECK(run_scale(module->entry(), 100, 3, nullptr));
}

TEST_CASE("kernel cache: an unwritable directory does not fail the compile", "[runtime]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  std::string cache_dir;
  SECTION("directory below a regular file") {
    std::ofstream(dir / "file") << "not a directory";
    cache_dir = dir / "file/cache";
  }
  SECTION("read-only directory") {
    if (::geteuid() == 0) return;  // root writes anyway; the section above covers it
    cache_dir = dir / "ro";
    REQUIRE(::mkdir(cache_dir.c_str(), 0500) == 0);
  }
  KernelCache cache(*engine, cache_dir, true);
  auto module = cache.get(scale_kernel("spindle_cache_ro"));
  CHECK(run_scale(module->entry(), 100, 3, nullptr));
  CHECK(cache.stats().disk_write_failures == 1);
  CHECK(cache.stats().compiles == 1);
}

TEST_CASE("kernel cache: threads asking for one kernel compile it once", "[runtime]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  KernelCache cache(*engine, dir.path(), true);
  CompileRequest req = scale_kernel("spindle_cache_threads");
  std::vector<std::shared_ptr<LoadedModule>> got(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { got[i] = cache.get(req); });
  for (auto& t : threads) t.join();
  for (auto& m : got) CHECK(m == got[0]);
  CHECK(cache.stats().compiles == 1);
  CHECK(cache.stats().memory_hits + cache.stats().memory_misses == 4);
}

TEST_CASE("kernel cache: two processes build one kernel at once", "[runtime]") {
  std::string name = GENERATE(from_range(engine_names()));
  INFO("engine " << name);
  ScratchDir dir;
  CompileRequest req = scale_kernel("spindle_cache_fork");
  int gate[2];
  REQUIRE(::pipe(gate) == 0);
  pid_t pids[2];
  for (pid_t& pid : pids) {
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(gate[1]);
      char c;
      while (::read(gate[0], &c, 1) < 0) {
      }
      int rc = 1;
      try {
        auto engine = make_test_engine(name);
        KernelCache cache(*engine, dir.path(), true);
        auto module = cache.get(req);
        rc = run_scale(module->entry(), 1000, 10, nullptr) && cache.stats().disk_write_failures == 0 ? 0 : 2;
      } catch (...) {
        rc = 3;
      }
      ::_exit(rc);
    }
  }
  ::close(gate[0]);
  ::close(gate[1]);  // both children start now
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::vector<std::string> files = files_in(dir.path());
  REQUIRE(files.size() == 1);  // no temporary files left behind
  auto engine = make_test_engine(name);
  KernelCache cache(*engine, dir.path(), true);
  CHECK(cache.lookup(req).event == CacheEvent::disk_hit);
}

TEST_CASE("kernel cache: a compile error reaches every caller and is not cached", "[runtime]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  KernelCache cache(*engine, dir.path(), true);
  CompileRequest req = scale_kernel("spindle_cache_error");
  req.source += "this is not C;\n";
  CHECK_THROWS_AS(cache.get(req), CompileError);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      try {
        cache.get(req);
      } catch (const CompileError& e) {
        errors[i] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("spindle_cache_error") || Catch::Contains("scale"));
  CHECK(cache.stats().compiles == 0);
  CHECK(files_in(dir.path()).empty());
}
