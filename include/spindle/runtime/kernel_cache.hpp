// Two-level kernel cache between the code generator and an Engine.
//
//   get(request): memory (loaded modules by key) -> disk (engine artifacts) -> compile
//
// The key is a 128-bit Digest of source + symbol + engine.identity(), so a different
// compiler, CPU or flag set never reuses an artifact. On disk there is one file per key,
// `<dir>/<32 hex digits>.<engine name>.bin`:
//
//   offset  size  field
//        0     8  magic "SPNDLKC\0"
//        8     4  format version (kCacheFormatVersion)
//       12     4  header size (48)
//       16    16  key digest (lanes a, b)
//       32     8  payload size in bytes
//       40     8  payload checksum (lane a of the payload's Digest)
//       48     -  payload (the engine artifact)
//
// Fields are in host byte order (the key already names the host). An entry is written to
// a unique temporary file in the same directory and renamed into place, so readers see
// an old entry or a complete new one, and two processes building the same kernel both
// succeed (the last rename wins; both files are valid). A truncated, corrupted,
// foreign-version or wrong-key entry (or one the engine cannot load) is counted in
// disk_corrupt and rebuilt. A directory that cannot be created or written never fails a
// compile: the failure is counted in disk_write_failures.
//
// Thread-safe. Concurrent get()s of one key compile it once; the others wait for it (and
// try again themselves if it failed).
#pragma once

#include <cstdint>
#include <cstring>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "spindle/runtime/engine.hpp"
#include "spindle/runtime/posix.hpp"
#include "spindle/support/error.hpp"
#include "spindle/support/hash.hpp"
#include "spindle/support/timer.hpp"

namespace spindle::runtime {

inline constexpr char kCacheMagic[8] = {'S', 'P', 'N', 'D', 'L', 'K', 'C', '\0'};
inline constexpr std::uint32_t kCacheFormatVersion = 1;

struct CacheEntryHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint64_t key_a, key_b;
  std::uint64_t payload_size;
  std::uint64_t payload_checksum;
};
static_assert(sizeof(CacheEntryHeader) == 48, "the on-disk cache header must be 48 bytes");

inline std::uint64_t payload_checksum(std::span<const std::uint8_t> payload) {
  return Hasher().add(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size())).digest().a;
}

inline Digest cache_key(const CompileRequest& request, const std::string& engine_identity) {
  return Hasher().add(request.source).add(request.symbol).add(engine_identity).digest();
}

namespace detail {

// nullopt when the file does not exist; CacheError for every other problem.
inline std::optional<std::vector<std::uint8_t>> read_entry_if_present(const std::string& path,
                                                                      const Digest& key) {
  int err = 0;
  auto bytes = posix::read_file(path, &err);
  if (!bytes) {
    if (err == ENOENT) return std::nullopt;
    throw CacheError(message("kernel cache: cannot read entry '", path, "': ", posix::errno_text(err)));
  }
  auto bad = [&](const auto&... why) {
    return CacheError(message("kernel cache: entry '", path, "' is unusable: ", why...,
                              "\n  hint: it is rebuilt on the next compile; deleting it is safe"));
  };
  CacheEntryHeader h;
  if (bytes->size() < sizeof h)
    throw bad("truncated (", bytes->size(), " bytes, the header alone needs ", sizeof h, ")");
  std::memcpy(&h, bytes->data(), sizeof h);
  if (std::memcmp(h.magic, kCacheMagic, sizeof h.magic) != 0) throw bad("bad magic (not a Spindle kernel-cache entry)");
  if (h.version != kCacheFormatVersion)
    throw bad("format version ", h.version, ", this build reads version ", kCacheFormatVersion);
  if (h.header_size != sizeof h) throw bad("header size ", h.header_size, ", expected ", sizeof h);
  if (h.key_a != key.a || h.key_b != key.b)
    throw bad("wrong key ", Digest{h.key_a, h.key_b}.hex(), ", expected ", key.hex());
  std::uint64_t have = bytes->size() - sizeof h;
  if (have < h.payload_size) throw bad("truncated (payload has ", have, " of ", h.payload_size, " bytes)");
  if (have > h.payload_size) throw bad("size mismatch (", have - h.payload_size, " bytes after the payload)");
  std::span<const std::uint8_t> payload(bytes->data() + sizeof h, h.payload_size);
  if (payload_checksum(payload) != h.payload_checksum) throw bad("payload checksum mismatch (corrupted)");
  bytes->erase(bytes->begin(), bytes->begin() + sizeof h);
  return bytes;
}

}  // namespace detail

// The payload of the entry at `path` for `key`; throws CacheError naming the file and
// what is wrong (missing, truncated, bad magic, version, key, size or checksum).
inline std::vector<std::uint8_t> read_entry(const std::string& path, const Digest& key) {
  auto payload = detail::read_entry_if_present(path, key);
  if (!payload) throw CacheError(message("kernel cache: entry '", path, "' does not exist"));
  return std::move(*payload);
}

// Writes an entry atomically (temporary file in the same directory + rename); creates
// the directory (mode 0700) when needed. Throws IOError on failure.
inline void write_entry(const std::string& path, const Digest& key, std::span<const std::uint8_t> payload) {
  std::string dir = path.substr(0, path.rfind('/'));
  if (int err = posix::make_dirs(dir, 0700))
    throw IOError(message("kernel cache: cannot create directory '", dir, "': ", posix::errno_text(err)));
  CacheEntryHeader h{};
  std::memcpy(h.magic, kCacheMagic, sizeof h.magic);
  h.version = kCacheFormatVersion;
  h.header_size = sizeof h;
  h.key_a = key.a;
  h.key_b = key.b;
  h.payload_size = payload.size();
  h.payload_checksum = payload_checksum(payload);
  std::string temp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(temp.data());
  if (fd < 0) throw IOError(message("kernel cache: cannot create a file in '", dir, "': ", posix::errno_text(errno)));
  bool ok = posix::write_all(fd, &h, sizeof h) && posix::write_all(fd, payload.data(), payload.size());
  int err = errno;
  if (::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && ::rename(temp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (!ok) {
    ::unlink(temp.c_str());
    throw IOError(message("kernel cache: cannot write entry '", path, "': ", posix::errno_text(err)));
  }
}

struct CacheStats {
  std::uint64_t memory_hits = 0, memory_misses = 0;
  std::uint64_t disk_hits = 0, disk_misses = 0, disk_corrupt = 0, disk_write_failures = 0;
  std::uint64_t compiles = 0;
  double compile_seconds = 0;    // in Engine::compile
  double disk_load_seconds = 0;  // reading + loading entries that were hits
  double load_seconds = 0;       // loading freshly compiled artifacts
};

enum class CacheEvent { none, memory_hit, disk_hit, compiled };

inline const char* to_string(CacheEvent e) {
  switch (e) {
    case CacheEvent::memory_hit: return "memory hit";
    case CacheEvent::disk_hit: return "disk hit";
    case CacheEvent::compiled: return "compiled";
    default: return "none";
  }
}

struct CacheResult {
  std::shared_ptr<LoadedModule> module;
  CacheEvent event = CacheEvent::none;
  double seconds = 0;  // wall time of this lookup
};

class KernelCache {
 public:
  // `dir` empty or disk_enabled false: memory cache only.
  KernelCache(Engine& engine, std::string dir, bool disk_enabled)
      : engine_(engine), dir_(std::move(dir)), disk_(disk_enabled && !dir_.empty()) {
    while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  }
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  std::shared_ptr<LoadedModule> get(const CompileRequest& request) { return lookup(request).module; }

  // Like get(), and says where the module came from and how long it took.
  CacheResult lookup(const CompileRequest& request) {
    Timer timer;
    Digest k = key(request);
    std::shared_ptr<Pending> pending;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        if (auto it = memory_.find(k); it != memory_.end()) {
          ++stats_.memory_hits;
          last_ = CacheEvent::memory_hit;
          return {it->second, CacheEvent::memory_hit, timer.seconds()};
        }
        auto it = pending_.find(k);
        if (it == pending_.end()) break;
        // Another thread builds this key: wait for it. If it failed, try again here, so
        // that every caller gets its own exception (none is shared between threads).
        std::shared_ptr<Pending> other = it->second;
        other->done.wait(lock, [&] { return other->finished; });
      }
      ++stats_.memory_misses;
      pending = std::make_shared<Pending>();
      pending_.emplace(k, pending);
    }
    // Wakes the waiters whether fill() returns or throws.
    struct Finish {
      KernelCache& cache;
      const Digest& key;
      Pending& pending;
      ~Finish() {
        {
          std::lock_guard<std::mutex> lock(cache.mutex_);
          cache.pending_.erase(key);
          pending.finished = true;
        }
        pending.done.notify_all();
      }
    } finish{*this, k, *pending};
    CacheResult r = fill(request, k);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      memory_.emplace(k, r.module);
      last_ = r.event;
    }
    r.seconds = timer.seconds();
    return r;
  }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  CacheEvent last_event() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return last_;
  }
  // Forgets loaded modules (they stay alive while callers hold them); for benchmarks of
  // the disk path.
  void clear_memory() {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_.clear();
  }

  // Throws what engine.identity() throws (UnavailableError: no compiler).
  Digest key(const CompileRequest& request) { return cache_key(request, identity()); }

  // The engine identity, asked once (again after a failure).
  const std::string& identity() {
    std::lock_guard<std::mutex> lock(identity_mutex_);
    if (identity_.empty()) identity_ = engine_.identity();
    return identity_;
  }
  std::string entry_path(const Digest& key) const {
    return message(dir_, "/", key.hex(), ".", engine_.name(), ".bin");
  }
  const std::string& directory() const { return dir_; }
  bool disk_enabled() const { return disk_; }
  Engine& engine() const { return engine_; }

 private:
  // A key being built by one thread; others wait on `done` (with mutex_), then look in
  // the memory cache again.
  struct Pending {
    std::condition_variable done;
    bool finished = false;
  };
  struct DigestHash {
    std::size_t operator()(const Digest& d) const noexcept { return static_cast<std::size_t>(d.a ^ (d.b << 1)); }
  };

  void count(std::uint64_t CacheStats::*field, double CacheStats::*time = nullptr, double seconds = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(stats_.*field);
    if (time) stats_.*time += seconds;
  }

  // Disk, then compile + store. Runs without the lock.
  CacheResult fill(const CompileRequest& request, const Digest& k) {
    std::string path = disk_ ? entry_path(k) : std::string();
    if (disk_) {
      Timer t;
      std::optional<std::vector<std::uint8_t>> payload;
      bool corrupt = false;
      try {
        payload = detail::read_entry_if_present(path, k);
      } catch (const CacheError&) {
        corrupt = true;
        count(&CacheStats::disk_corrupt);
      }
      if (payload) {
        try {
          auto module = engine_.load(*payload, request);
          count(&CacheStats::disk_hits, &CacheStats::disk_load_seconds, t.seconds());
          return {std::move(module), CacheEvent::disk_hit, 0};
        } catch (const UnavailableError&) {
          throw;  // no device or engine: not the entry's fault
        } catch (const Error&) {
          count(&CacheStats::disk_corrupt);  // checksum fine but the engine rejects it
        }
      } else if (!corrupt) {
        count(&CacheStats::disk_misses);
      }
    }
    Timer tc;
    std::vector<std::uint8_t> artifact = engine_.compile(request);
    count(&CacheStats::compiles, &CacheStats::compile_seconds, tc.seconds());
    Timer tl;
    auto module = engine_.load(artifact, request);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.load_seconds += tl.seconds();
    }
    if (disk_) {
      try {
        write_entry(path, k, artifact);
      } catch (const std::exception&) {
        count(&CacheStats::disk_write_failures);
      }
    }
    return {std::move(module), CacheEvent::compiled, 0};
  }

  Engine& engine_;
  std::string dir_;
  bool disk_;
  std::mutex identity_mutex_;
  std::string identity_;  // written once under identity_mutex_, then only read
  mutable std::mutex mutex_;
  std::unordered_map<Digest, std::shared_ptr<LoadedModule>, DigestHash> memory_;
  std::unordered_map<Digest, std::shared_ptr<Pending>, DigestHash> pending_;
  CacheStats stats_;
  CacheEvent last_ = CacheEvent::none;
};

}  // namespace spindle::runtime
