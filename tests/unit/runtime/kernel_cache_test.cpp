// Kernel cache: memory and disk hits, damaged entries (read_entry errors, rebuild), an
// unwritable directory, concurrent builds of one kernel from threads and processes, and
// the cache as an attack surface: forged and tampered entries, entries that are not
// regular files (symbolic links, FIFOs, directories), oversized files, entries and
// directories of other users, directories writable by group or others, compiler commands
// in the key, and the SPINDLE_DEBUG log lines.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
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

// Everything written to stderr (fd 2) while it lives, for checking warnings and logs.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = ::dup(2);
    ::dup2(::fileno(file_), 2);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  ~StderrCapture() {
    restore();
    std::fclose(file_);
  }
  // Restores stderr and returns what was written.
  std::string text() {
    restore();
    std::string s;
    std::rewind(file_);
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, file_)) s.append(buf, n);
    return s;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_ = -1;
};

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

// A valid entry for `req` built by the system engine in `dir`; returns its key and path.
struct BuiltEntry {
  Digest key;
  std::string path;
  std::vector<char> bytes;
};
BuiltEntry build_entry(Engine& engine, const std::string& dir, const CompileRequest& req) {
  KernelCache cache(engine, dir, true);
  cache.get(req);
  BuiltEntry e{cache.key(req), cache.entry_path(cache.key(req)), {}};
  e.bytes = slurp(e.path);
  return e;
}

// A fresh cache over `dir` asked for `req`: the entry at its path must not have been
// loaded (counted as corrupt, compiled again) and the rebuilt kernel must run.
void expect_rebuilt(Engine& engine, const std::string& dir, const CompileRequest& req) {
  KernelCache cache(engine, dir, true);
  CacheResult r = cache.lookup(req);
  CHECK(r.event == CacheEvent::compiled);
  CacheStats s = cache.stats();
  CHECK(s.disk_corrupt == 1);
  CHECK(s.disk_hits == 0);
  CHECK(s.compiles == 1);
  CHECK(run_scale(r.module->entry(), 100, 3, nullptr));
}

// Rewrites the 8-byte field at `offset` of an entry.
void poke64(std::vector<char>& bytes, std::size_t offset, std::uint64_t v) { std::memcpy(bytes.data() + offset, &v, 8); }

}  // namespace

TEST_CASE("Hasher: an empty view with a null pointer hashes like any empty string, boundaries count",
          "[runtime]") {
  // A null empty view (an empty std::vector's data()) must not reach memcpy (UBSan: null
  // pointer argument), and must hash like "".
  const std::string_view null_view;
  REQUIRE(null_view.data() == nullptr);
  CHECK(spindle::Hasher().add(null_view).digest().hex() == spindle::Hasher().add(std::string_view("")).digest().hex());
  CHECK(spindle::Hasher().add(null_view).digest().hex() != spindle::Hasher().digest().hex());
  CHECK(spindle::Hasher().add("ab").add("c").digest().hex() != spindle::Hasher().add("a").add("bc").digest().hex());
}

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

// --- the cache as an attack surface ---------------------------------------------------------

TEST_CASE("cache security: a tampered payload is never loaded", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_tamper");
  BuiltEntry e = build_entry(*engine, dir.path(), req);
  std::vector<char> bad = e.bytes;
  SECTION("one byte of the code changed") { bad[bad.size() - 1] ^= 0x01; }
  SECTION("the code replaced by other bytes of the same size") {
    std::fill(bad.begin() + sizeof(CacheEntryHeader), bad.end(), '\xc3');  // x86 'ret'
  }
  spit(e.path, bad);
  CHECK_THROWS_WITH(read_entry(e.path, e.key), Catch::Contains("checksum mismatch"));
  expect_rebuilt(*engine, dir.path(), req);
  CHECK(read_entry(e.path, e.key).size() == e.bytes.size() - sizeof(CacheEntryHeader));  // replaced
}

TEST_CASE("cache security: an entry renamed to another key's file name is rejected", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_rename");
  CompileRequest other = scale_kernel("spindle_sec_rename", "another kernel");
  BuiltEntry e = build_entry(*engine, dir.path(), req);
  KernelCache probe(*engine, dir.path(), true);
  Digest other_key = probe.key(other);
  std::string other_path = probe.entry_path(other_key);
  REQUIRE(other_key != e.key);
  std::vector<char> forged = e.bytes;
  std::string expect = "wrong key";
  SECTION("copied as is") {}
  SECTION("with the key field rewritten to the new name") {
    poke64(forged, 16, other_key.a);
    poke64(forged, 24, other_key.b);
    expect = "checksum mismatch";  // the checksum binds the payload to the original key
  }
  spit(other_path, forged);
  CHECK_THROWS_AS(read_entry(other_path, other_key), CacheError);
  CHECK_THROWS_WITH(read_entry(other_path, other_key), Catch::Contains(expect));
  expect_rebuilt(*engine, dir.path(), other);
}

TEST_CASE("cache security: damaged headers are rejected", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_header");
  BuiltEntry e = build_entry(*engine, dir.path(), req);
  std::vector<char> bad = e.bytes;
  std::string expect;
  SECTION("truncated to half") {
    bad.resize(bad.size() / 2);
    expect = "truncated";
  }
  SECTION("empty file") {
    bad.clear();
    expect = "truncated (0 bytes";
  }
  SECTION("wrong magic") {
    std::memcpy(bad.data(), "\x7f" "ELF\2\1\1\0", 8);
    expect = "bad magic";
  }
  SECTION("the previous format version") {
    std::uint32_t v = 1;
    std::memcpy(bad.data() + 8, &v, 4);
    expect = "format version 1";
  }
  SECTION("wrong header size") {
    std::uint32_t hs = 48;
    std::memcpy(bad.data() + 12, &hs, 4);
    expect = "header size 48";
  }
  SECTION("a payload size far beyond the file") {
    poke64(bad, 32, std::uint64_t{1} << 62);  // must not allocate or read that much
    expect = "truncated";
  }
  SECTION("a payload size smaller than the payload") {
    poke64(bad, 32, 16);
    expect = "size mismatch";
  }
  spit(e.path, bad);
  CHECK_THROWS_AS(read_entry(e.path, e.key), CacheError);
  CHECK_THROWS_WITH(read_entry(e.path, e.key), Catch::Contains(e.path) && Catch::Contains(expect));
  expect_rebuilt(*engine, dir.path(), req);
}

TEST_CASE("cache security: a symbolic link entry is not followed", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_symlink");
  BuiltEntry e = build_entry(*engine, dir.path(), req);
  // A valid entry, elsewhere, linked into place: still refused (the target is not ours to vouch for).
  std::string elsewhere = dir / "elsewhere.bin";
  REQUIRE(::rename(e.path.c_str(), elsewhere.c_str()) == 0);
  REQUIRE(::symlink(elsewhere.c_str(), e.path.c_str()) == 0);
  CHECK_THROWS_WITH(read_entry(e.path, e.key), Catch::Contains("symbolic link, not a regular file"));
  expect_rebuilt(*engine, dir.path(), req);
  struct stat st {};
  REQUIRE(::lstat(e.path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));  // the link was replaced, its target left alone
  CHECK(slurp(elsewhere) == e.bytes);
}

TEST_CASE("cache security: a FIFO entry is skipped without blocking", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_fifo");
  KernelCache probe(*engine, dir.path(), true);
  Digest key = probe.key(req);
  std::string path = probe.entry_path(key);
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  ::alarm(60);  // a blocking open or read would hang: fail loudly instead
  CHECK_THROWS_WITH(read_entry(path, key), Catch::Contains("FIFO, not a regular file"));
  expect_rebuilt(*engine, dir.path(), req);
  ::alarm(0);
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
}

TEST_CASE("cache security: a directory at an entry's path is skipped", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_dir");
  KernelCache cache(*engine, dir.path(), true);
  Digest key = cache.key(req);
  std::string path = cache.entry_path(key);
  REQUIRE(::mkdir(path.c_str(), 0700) == 0);
  CHECK_THROWS_WITH(read_entry(path, key), Catch::Contains("directory, not a regular file"));
  auto module = cache.get(req);
  CHECK(run_scale(module->entry(), 100, 3, nullptr));
  CHECK(cache.stats().disk_corrupt == 1);
  CHECK(cache.stats().disk_write_failures == 1);  // rename() cannot replace a directory
}

TEST_CASE("cache security: an oversized entry is not read", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_huge");
  BuiltEntry e = build_entry(*engine, dir.path(), req);
  // A sparse file just over the limit: the size check comes before any read.
  int fd = ::open(e.path.c_str(), O_WRONLY | O_TRUNC);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(kMaxCacheEntryBytes + 1)) == 0);
  ::close(fd);
  CHECK_THROWS_WITH(read_entry(e.path, e.key), Catch::Contains("more than the limit of 268435456 bytes"));
  expect_rebuilt(*engine, dir.path(), req);
  CHECK(slurp(e.path).size() == e.bytes.size());
}

TEST_CASE("cache security: an entry owned by another user is not loaded", "[runtime][cache]") {
  if (::geteuid() != 0) return;  // only root can give a file away
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_owner");
  BuiltEntry e = build_entry(*engine, dir.path(), req);
  REQUIRE(::chown(e.path.c_str(), 65534, 65534) == 0);
  CHECK_THROWS_WITH(read_entry(e.path, e.key), Catch::Contains("owned by uid 65534"));
  expect_rebuilt(*engine, dir.path(), req);
}

TEST_CASE("cache security: a directory writable by group or others is refused with one warning",
          "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_sec_mode");
  std::string cache_dir = dir / "cache";
  BuiltEntry e = build_entry(*engine, cache_dir, req);  // a valid entry that must not be used
  mode_t mode = 0;
  std::string expect;
  SECTION("group-writable") {
    mode = 0770;
    expect = "it is writable by group (mode 0770)";
  }
  SECTION("world-writable") {
    mode = 0707;
    expect = "it is writable by others (mode 0707)";
  }
  SECTION("shared like /tmp") {
    mode = 01777;
    expect = "writable by group and others (mode 1777)";
  }
  REQUIRE(::chmod(cache_dir.c_str(), mode) == 0);
  StderrCapture err;
  KernelCache cache(*engine, cache_dir, true);
  CacheResult r = cache.lookup(req);
  cache.get(scale_kernel("spindle_sec_mode", "second kernel"));
  std::string text = err.text();
  INFO(text);
  CHECK(r.event == CacheEvent::compiled);  // compiled and kept in memory
  CHECK(run_scale(r.module->entry(), 100, 3, nullptr));
  CHECK(cache.stats().disk_hits == 0);
  CHECK(cache.stats().disk_misses == 0);
  CHECK(!cache.disk_enabled());
  CHECK_THAT(cache.disk_problem(), Catch::Contains(expect));
  CHECK(count_of(text, "spindle: warning: not using the kernel cache directory '" + cache_dir + "'") == 1);
  CHECK_THAT(text, Catch::Contains(expect) && Catch::Contains("chmod 700"));
  CHECK(files_in(cache_dir).size() == 1);  // nothing written
  CHECK(cache.lookup(req).event == CacheEvent::memory_hit);
}

TEST_CASE("cache security: a directory owned by someone else is refused", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  std::string cache_dir;
  if (::geteuid() == 0) {
    cache_dir = dir / "theirs";
    REQUIRE(::mkdir(cache_dir.c_str(), 0700) == 0);
    REQUIRE(::chown(cache_dir.c_str(), 65534, 65534) == 0);
  } else {
    cache_dir = "/";  // owned by root
  }
  StderrCapture err;
  KernelCache cache(*engine, cache_dir, true);
  auto module = cache.get(scale_kernel("spindle_sec_foreign_dir"));
  std::string text = err.text();
  CHECK(run_scale(module->entry(), 100, 3, nullptr));
  CHECK_THAT(cache.disk_problem(), Catch::Contains("owned by uid") && Catch::Contains("not by the current user"));
  CHECK_THAT(text, Catch::Contains("not using the kernel cache directory") && Catch::Contains("owned by uid"));
  CHECK(cache.stats().disk_write_failures == 0);
}

TEST_CASE("cache security: a missing directory is created private, a private one is used", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  std::string cache_dir = dir / "new";
  KernelCache cache(*engine, cache_dir, true);
  CHECK(cache.disk_problem().empty());
  struct stat st {};
  REQUIRE(::stat(cache_dir.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
  REQUIRE(::chmod(cache_dir.c_str(), 0755) == 0);  // readable by others is fine, writable is not
  KernelCache again(*engine, cache_dir, true);
  CHECK(again.disk_problem().empty());
  again.get(scale_kernel("spindle_sec_private"));
  CHECK(again.stats().disk_misses == 1);
  CHECK(files_in(cache_dir).size() == 1);
}

TEST_CASE("cache security: every word of the compiler command is part of the key", "[runtime][cache]") {
  ScratchDir dir;
  Options o0, o2;
  o0.system_cc = "cc -O0";
  o2.system_cc = "cc  -O2";
  auto e0 = make_system_engine(o0), e2 = make_system_engine(o2), plain = make_system_engine(Options{});
  CHECK_THAT(e0->identity(), Catch::Contains("cc:'cc -O0'"));
  CHECK_THAT(e2->identity(), Catch::Contains("cc:'cc -O2'"));
  CHECK(e0->identity() != e2->identity());
  CHECK(e0->identity() != plain->identity());
  CompileRequest req = scale_kernel("spindle_sec_cc");
  KernelCache c0(*e0, dir.path(), true), c2(*e2, dir.path(), true);
  CHECK(c0.key(req) != c2.key(req));
  CHECK(c0.lookup(req).event == CacheEvent::compiled);
  CHECK(c2.lookup(req).event == CacheEvent::compiled);  // no entry of "cc -O0" reused
  CHECK(files_in(dir.path()).size() == 2);
  KernelCache again(*e2, dir.path(), true);
  CHECK(again.lookup(req).event == CacheEvent::disk_hit);
}

TEST_CASE("cache security: the compiler's version output is part of the key", "[runtime][cache]") {
  // A fake compiler at one path whose version output changes (an upgrade in place).
  ScratchDir dir;
  std::string fake = dir / "fake-cc";
  auto install = [&](const std::string& build) {
    std::ofstream(fake, std::ios::trunc) << "#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'fake cc'; echo '"
                                         << build << "'; exit 0; fi\nexec cc \"$@\"\n";
    REQUIRE(::chmod(fake.c_str(), 0700) == 0);
  };
  Options o;
  o.system_cc = fake;
  install("build 1");
  std::string before = make_system_engine(o)->identity();
  install("build 2");
  auto engine = make_system_engine(o);
  std::string after = engine->identity();
  CHECK_THAT(before, Catch::Contains("version:'fake cc'"));  // the first lines agree...
  CHECK_THAT(after, Catch::Contains("version:'fake cc'"));
  CHECK(before != after);  // ...the digest of the whole output does not
  CompileRequest req = scale_kernel("spindle_sec_version");
  KernelCache cache(*engine, dir / "cache", true);
  CHECK(cache_key(req, before) != cache.key(req));
  CHECK(run_scale(cache.get(req)->entry(), 100, 3, nullptr));
}

TEST_CASE("kernel cache: SPINDLE_DEBUG logs hits, misses, compiles and rejected entries", "[runtime][cache]") {
  ScratchDir dir;
  auto engine = make_system_engine(Options{});
  CompileRequest req = scale_kernel("spindle_debug_log");
  std::string text;
  {
    StderrCapture err;
    KernelCache cache(*engine, dir.path(), true, /*debug=*/true);
    cache.get(req);
    cache.get(req);
    text = err.text();
  }
  INFO(text);
  CHECK_THAT(text, Catch::Contains("spindle: kernel cache: memory miss for kernel 'scale' (spindle_debug_log)"));
  CHECK_THAT(text, Catch::Contains("spindle: kernel cache: disk miss for kernel 'scale'"));
  CHECK_THAT(text, Catch::Contains("spindle: JIT: compiled kernel 'scale' (spindle_debug_log) with the system engine in "));
  CHECK_THAT(text, Catch::Contains("spindle: kernel cache: memory hit for kernel 'scale'"));
  {
    StderrCapture err;
    KernelCache cache(*engine, dir.path(), true, true);
    cache.get(req);
    text = err.text();
  }
  CHECK_THAT(text, Catch::Contains("spindle: kernel cache: disk hit for kernel 'scale'"));
  std::string path;
  {
    KernelCache cache(*engine, dir.path(), true);
    path = cache.entry_path(cache.key(req));
  }
  std::vector<char> bad = slurp(path);
  bad.back() ^= 1;
  spit(path, bad);
  {
    StderrCapture err;
    KernelCache cache(*engine, dir.path(), true, true);
    cache.get(req);
    text = err.text();
  }
  CHECK_THAT(text, Catch::Contains("spindle: warning: kernel cache: entry '" + path + "' is unusable: payload checksum mismatch"));
  CHECK_THAT(text, Catch::Contains("rebuilding it"));
  {
    StderrCapture err;
    KernelCache quiet(*engine, dir.path(), true);  // debug off: silent
    quiet.get(req);
    text = err.text();
  }
  CHECK(text.empty());
}
