// The engine-agnostic KernelCache with the NVRTC engine: keys and entry names, the disk
// entry round trip (write_entry / read_entry) of NVRTC artifacts across cache instances,
// corrupt entries, and - with a GPU - memory and disk hits of loaded modules.
#include <catch2/catch.hpp>

#include <fstream>

#include "cuda_test_support.hpp"

using namespace spindle;
using namespace spindle::cuda;
using namespace spindle::runtime;
using Catch::Contains;
namespace ct = spindle::cuda::test;
namespace rtt = spindle::runtime::test;

TEST_CASE("nvrtc cache: keys, entry names and the disk round trip of a cubin", "[cuda]") {
  if (!ct::nvrtc_ready()) return;
  rtt::ScratchDir dir;
  CompileRequest req{ct::axpy_source("spindle_axpy_cache"), "spindle_axpy_cache", "axpy"};

  NvrtcEngine engine(CudaOptions::from_env(), 80);
  KernelCache first(engine, dir.path(), true);
  Digest key = first.key(req);
  std::string path = first.entry_path(key);
  CHECK_THAT(path, Catch::EndsWith("/" + key.hex() + ".nvrtc.bin"));
  std::vector<std::uint8_t> cubin = engine.compile(req);
  REQUIRE(ct::has_elf_magic(cubin));
  write_entry(path, key, cubin);
  CHECK(rtt::files_in(dir.path()) == std::vector<std::string>{key.hex() + ".nvrtc.bin"});

  // A second cache (new engine, same options) computes the same key and finds the entry;
  // a fresh compile of the same input gives the same bytes.
  NvrtcEngine again(CudaOptions::from_env(), 80);
  KernelCache second(again, dir.path(), true);
  CHECK(second.key(req) == key);
  CHECK(second.entry_path(key) == path);
  CHECK(read_entry(path, key) == cubin);
  CHECK(again.compile(req) == cubin);

  // Another architecture or source is another key.
  NvrtcEngine sm90(CudaOptions::from_env(), 90);
  KernelCache third(sm90, dir.path(), true);
  CHECK(third.key(req) != key);
  CompileRequest other{ct::axpy_source("spindle_axpy_cache", "variant"), "spindle_axpy_cache", "axpy"};
  CHECK(second.key(other) != key);

  SECTION("a corrupted entry is a CacheError") {
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(sizeof(CacheEntryHeader) + cubin.size() / 2));
      char c = 0;
      f.read(&c, 1);
      f.seekp(static_cast<std::streamoff>(sizeof(CacheEntryHeader) + cubin.size() / 2));
      c = static_cast<char>(c ^ 0x5a);
      f.write(&c, 1);
    }
    CHECK_THROWS_AS(read_entry(path, key), CacheError);
    CHECK_THROWS_WITH(read_entry(path, key), Contains("payload checksum mismatch"));
  }
  SECTION("a truncated entry is a CacheError") {
    std::filesystem::resize_file(path, sizeof(CacheEntryHeader) + 10);
    CHECK_THROWS_WITH(read_entry(path, key), Contains("truncated"));
  }
  SECTION("an entry under another key is a CacheError") {
    CHECK_THROWS_WITH(read_entry(path, third.key(req)), Contains("wrong key"));
  }
}

TEST_CASE("nvrtc cache: without a GPU a lookup compiles and then reports the missing device", "[cuda]") {
  if (!ct::nvrtc_ready()) return;
  if (cuda_available()) return;  // covered by the GPU case below
  rtt::ScratchDir dir;
  NvrtcEngine engine(CudaOptions::from_env(), 80);
  KernelCache cache(engine, dir.path(), true);
  CompileRequest req{ct::axpy_source("spindle_axpy_nogpu"), "spindle_axpy_nogpu", "axpy"};
  CHECK_THROWS_AS(cache.get(req), UnavailableError);
  CacheStats s = cache.stats();
  CHECK(s.compiles == 1);
  CHECK(s.disk_misses == 1);
  CHECK(rtt::files_in(dir.path()).empty());  // nothing is stored that was not loaded
}

TEST_CASE("nvrtc cache: memory hit, then disk hit in a fresh cache (GPU)", "[cuda]") {
  if (!ct::nvrtc_ready() || !ct::gpu_ready()) return;
  rtt::ScratchDir dir;
  CompileRequest req{ct::axpy_source("spindle_axpy_gpu_cache"), "spindle_axpy_gpu_cache", "axpy"};
  NvrtcEngine engine;
  KernelCache first(engine, dir.path(), true);
  auto a = first.get(req);
  CHECK(first.last_event() == CacheEvent::compiled);
  CHECK(first.get(req) == a);
  CHECK(first.last_event() == CacheEvent::memory_hit);
  CHECK(std::static_pointer_cast<CudaModule>(a)->function("spindle_axpy_gpu_cache") != nullptr);

  NvrtcEngine fresh;
  KernelCache second(fresh, dir.path(), true);
  CacheResult r = second.lookup(req);
  CHECK(r.event == CacheEvent::disk_hit);
  CHECK(second.stats().compiles == 0);
  CHECK(std::static_pointer_cast<CudaModule>(r.module)->function("spindle_axpy_gpu_cache") != nullptr);

  CudaRuntime rt(Options::from_env(), CudaOptions::from_env());
  auto m = rt.load(req);
  CHECK(m->name() == "spindle_axpy_gpu_cache");
  CHECK(rt.cache().directory() == Options::from_env().cache_dir);
}
