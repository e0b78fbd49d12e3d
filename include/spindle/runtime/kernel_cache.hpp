// Two-level kernel cache between the code generator and an Engine.
//
//   get(request): memory (loaded modules by key) -> disk (engine artifacts) -> compile
//
// The key is a 128-bit Digest of source + symbol + engine.identity(), so a different
// compiler, compiler command, CPU or flag set never reuses an artifact. On disk there is
// one file per key, `<dir>/<32 hex digits>.<engine name>.bin`:
//
//   offset  size  field
//        0     8  magic "SPNDLKC\0"
//        8     4  format version (kCacheFormatVersion = 2)
//       12     4  header size (56)
//       16    16  key digest (lanes a, b)
//       32     8  payload size in bytes
//       40    16  checksum: Digest of a format tag, the key, the payload size and the payload
//       56     -  payload (the engine artifact)
//
// Fields are in host byte order (the key already names the host). The checksum binds the
// payload to its key: an entry copied or renamed to another key's file name, a changed
// payload or key field, a truncated file, trailing bytes, a foreign magic or version are
// all detected. The disk cache holds machine code that is loaded and run, so it is an
// attack surface:
//   * the directory is created with mode 0700 and used only when it belongs to the
//     current user and is not writable by group or others; otherwise the disk cache is
//     off for this cache object, a warning says why (once, on stderr, like ssh does for
//     ~/.ssh) and kernels are compiled and kept in memory only;
//   * an entry is read only when it is a regular file owned by the current user, opened
//     without following symbolic links and without blocking (FIFOs, sockets, devices,
//     directories and links are never read), of at most kMaxCacheEntryBytes (256 MiB);
//   * an entry that fails any check, or that the engine cannot load, is never executed:
//     it is counted in disk_corrupt, reported with SPINDLE_DEBUG, rebuilt and replaced.
// The checksum is not a signature: whoever can write the directory can forge entries;
// the ownership and mode checks are what keep others from writing it.
//
// An entry is written to a unique temporary file (mode 0600) in the same directory and
// renamed into place, so readers see an old entry or a complete new one, and two
// processes building the same kernel both succeed (the last rename wins; both files are
// valid). A directory that cannot be created or written never fails a compile: the
// failure is counted in disk_write_failures.
//
// With `debug` (Options::debug, SPINDLE_DEBUG) every lookup logs one line to stderr,
// prefixed "spindle:": memory hits and misses, disk hits and misses, rejected entries and
// JIT compile times.
//
// Thread-safe. Concurrent get()s of one key compile it once; the others wait for it (and
// try again themselves if it failed).
#pragma once

#include <cstdint>
#include <cstdio>
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
inline constexpr std::uint32_t kCacheFormatVersion = 2;
// Largest entry file (header + payload) that is read or written: 256 MiB.
inline constexpr std::uint64_t kMaxCacheEntryBytes = std::uint64_t{256} << 20;

struct CacheEntryHeader {
  char magic[8];
  std::uint32_t version;
  std::uint32_t header_size;
  std::uint64_t key_a, key_b;
  std::uint64_t payload_size;
  std::uint64_t checksum_a, checksum_b;
};
static_assert(sizeof(CacheEntryHeader) == 56, "the on-disk cache header must be 56 bytes");

// The checksum of an entry: binds the payload to its key and size.
inline Digest entry_checksum(const Digest& key, std::span<const std::uint8_t> payload) {
  return Hasher()
      .add("spindle kernel cache v2")
      .add(key.a)
      .add(key.b)
      .add(static_cast<std::uint64_t>(payload.size()))
      .add(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()))
      .digest();
}

inline Digest cache_key(const CompileRequest& request, const std::string& engine_identity) {
  return Hasher().add(request.source).add(request.symbol).add(engine_identity).digest();
}

namespace detail {

inline CacheError unusable_entry(const std::string& path, const std::string& why) {
  return CacheError(message("kernel cache: entry '", path, "' is unusable: ", why,
                            "\n  hint: it is rebuilt on the next compile; deleting it is safe"));
}

// The bytes of the entry file; nullopt when it does not exist; CacheError when it is not
// a regular file of ours, too large, or cannot be read.
inline std::optional<std::vector<std::uint8_t>> read_entry_file(const std::string& path) {
  posix::BoundedRead r = posix::read_regular_file(path, kMaxCacheEntryBytes);
  switch (r.status) {
    case posix::ReadStatus::ok: break;
    case posix::ReadStatus::missing: return std::nullopt;
    case posix::ReadStatus::not_regular:
      throw unusable_entry(path, message("it is a ", posix::file_type_name(r.mode), ", not a regular file (not read)"));
    case posix::ReadStatus::too_large:
      throw unusable_entry(path, message("it is ", r.size, " bytes, more than the limit of ", kMaxCacheEntryBytes,
                                         " bytes (256 MiB) of a cache entry (not read)"));
    case posix::ReadStatus::failed:
      if (r.err == ENOTDIR) return std::nullopt;  // the directory is a file: nothing cached
      throw CacheError(message("kernel cache: cannot read entry '", path, "': ", posix::errno_text(r.err)));
  }
  if (r.uid != ::geteuid())
    throw unusable_entry(path, message("it is owned by uid ", r.uid, ", not by the current user (uid ", ::geteuid(), ")"));
  return std::move(r.bytes);
}

// The header of `bytes` after checking magic, version, header size and key.
inline CacheEntryHeader check_header(const std::string& path, const std::vector<std::uint8_t>& bytes, const Digest& key) {
  CacheEntryHeader h;
  if (bytes.size() < sizeof h)
    throw unusable_entry(path, message("truncated (", bytes.size(), " bytes, the header alone needs ", sizeof h, ")"));
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kCacheMagic, sizeof h.magic) != 0)
    throw unusable_entry(path, "bad magic (not a Spindle kernel-cache entry)");
  if (h.version != kCacheFormatVersion)
    throw unusable_entry(path, message("format version ", h.version, ", this build reads version ", kCacheFormatVersion));
  if (h.header_size != sizeof h) throw unusable_entry(path, message("header size ", h.header_size, ", expected ", sizeof h));
  if (h.key_a != key.a || h.key_b != key.b)
    throw unusable_entry(path, message("wrong key ", Digest{h.key_a, h.key_b}.hex(), ", expected ", key.hex(),
                                       " (an entry copied or renamed from another kernel)"));
  return h;
}

// nullopt when the file does not exist; CacheError for every other problem.
inline std::optional<std::vector<std::uint8_t>> read_entry_if_present(const std::string& path, const Digest& key) {
  auto bytes = read_entry_file(path);
  if (!bytes) return std::nullopt;
  CacheEntryHeader h = check_header(path, *bytes, key);
  std::uint64_t have = bytes->size() - sizeof h;
  if (have < h.payload_size)
    throw unusable_entry(path, message("truncated (payload has ", have, " of ", h.payload_size, " bytes)"));
  if (have > h.payload_size)
    throw unusable_entry(path, message("size mismatch (", have - h.payload_size, " bytes after the payload)"));
  std::span<const std::uint8_t> payload(bytes->data() + sizeof h, h.payload_size);
  if (entry_checksum(key, payload) != Digest{h.checksum_a, h.checksum_b})
    throw unusable_entry(path, "payload checksum mismatch (corrupted, tampered with, or not for this key)");
  bytes->erase(bytes->begin(), bytes->begin() + sizeof h);
  return bytes;
}

}  // namespace detail

// The payload of the entry at `path` for `key`; throws CacheError naming the file and
// what is wrong (missing, not a regular file, too large, truncated, bad magic, version,
// key, size or checksum).
inline std::vector<std::uint8_t> read_entry(const std::string& path, const Digest& key) {
  auto payload = detail::read_entry_if_present(path, key);
  if (!payload) throw CacheError(message("kernel cache: entry '", path, "' does not exist"));
  return std::move(*payload);
}

// Writes an entry atomically (temporary file in the same directory + rename); creates
// the directory (mode 0700) when needed. Throws IOError on failure and for a payload
// over kMaxCacheEntryBytes (it could never be read back).
inline void write_entry(const std::string& path, const Digest& key, std::span<const std::uint8_t> payload) {
  SPINDLE_CHECK(payload.size() + sizeof(CacheEntryHeader) <= kMaxCacheEntryBytes, IOError,
                "kernel cache: entry '", path, "' would be ", payload.size() + sizeof(CacheEntryHeader),
                " bytes, more than the limit of ", kMaxCacheEntryBytes, " bytes (256 MiB); not stored");
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
  Digest sum = entry_checksum(key, payload);
  h.checksum_a = sum.a;
  h.checksum_b = sum.b;
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
  // disk_corrupt: entries found unusable (damaged, foreign, not a regular file of ours,
  // too large, rejected by the engine) and rebuilt.
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

namespace detail {

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// Seconds as "12.3 ms", for log lines.
inline std::string millis(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", seconds * 1e3);
  return buf;
}

// "'name' (symbol)" or "'symbol'", for log lines.
inline std::string kernel_label(const CompileRequest& request) {
  if (request.kernel_name.empty()) return "'" + request.symbol + "'";
  return "'" + request.kernel_name + "' (" + request.symbol + ")";
}

}  // namespace detail

class KernelCache {
 public:
  // `dir` empty or disk_enabled false: memory cache only. `debug`: one line per lookup
  // on stderr (see the top of this file).
  KernelCache(Engine& engine, std::string dir, bool disk_enabled, bool debug = false)
      : engine_(engine), dir_(std::move(dir)), disk_(disk_enabled && !dir_.empty()), debug_(debug) {
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
    std::shared_ptr<LoadedModule> hit = find_or_claim(k, pending);
    if (debug_)
      log("kernel cache: memory ", hit ? "hit" : "miss", " for kernel ", detail::kernel_label(request), " (key ",
          k.hex(), ")");
    if (hit) return {std::move(hit), CacheEvent::memory_hit, timer.seconds()};
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
  // False when the disk cache was switched off, has no directory, or its directory was
  // refused (see disk_problem()).
  bool disk_enabled() const {
    std::lock_guard<std::mutex> lock(disk_mutex_);
    return disk_ && !(disk_checked_ && !disk_problem_.empty());
  }
  // Why the directory is not used ("" when it is, or when the disk cache is off). Checks
  // the directory (creating it) if no lookup did yet.
  std::string disk_problem() {
    disk_usable();
    std::lock_guard<std::mutex> lock(disk_mutex_);
    return disk_problem_;
  }
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

  template <class... Parts>
  void log(const Parts&... parts) const {
    if (debug_) std::fprintf(stderr, "spindle: %s\n", message(parts...).c_str());
  }

  // The loaded module of `k` (a memory hit), or null after registering `pending` as the
  // builder of `k` (a memory miss). Waits while another thread builds `k`.
  std::shared_ptr<LoadedModule> find_or_claim(const Digest& k, std::shared_ptr<Pending>& pending) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (auto it = memory_.find(k); it != memory_.end()) {
        ++stats_.memory_hits;
        last_ = CacheEvent::memory_hit;
        return it->second;
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
    return nullptr;
  }

  void count(std::uint64_t CacheStats::*field, double CacheStats::*time = nullptr, double seconds = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++(stats_.*field);
    if (time) stats_.*time += seconds;
  }

  // Creates the directory (0700) when missing, then checks once that it is private; a
  // refused directory switches the disk cache off with one warning on stderr. A
  // directory that cannot be created is not refused: reads miss and writes are counted
  // as failures.
  bool disk_usable() {
    std::lock_guard<std::mutex> lock(disk_mutex_);
    if (!disk_) return false;
    if (disk_checked_) return disk_problem_.empty();
    disk_checked_ = true;
    if (posix::make_dirs(dir_, 0700) != 0) return true;
    disk_problem_ = posix::private_dir_problem(dir_);
    if (!disk_problem_.empty())
      std::fprintf(stderr,
                   "spindle: warning: not using the kernel cache directory '%s': %s\n"
                   "  hint: chmod 700 it (and chown it to yourself), or set SPINDLE_CACHE_DIR to a private "
                   "directory; kernels are compiled and kept in memory only\n",
                   dir_.c_str(), disk_problem_.c_str());
    return disk_problem_.empty();
  }

  // The module loaded from the disk entry of `k`, or null (miss, or an unusable entry:
  // counted, logged, and replaced by the caller).
  std::shared_ptr<LoadedModule> from_disk(const CompileRequest& request, const Digest& k, const std::string& path) {
    Timer t;
    std::optional<std::vector<std::uint8_t>> payload;
    try {
      payload = detail::read_entry_if_present(path, k);
    } catch (const CacheError& e) {
      count(&CacheStats::disk_corrupt);
      log("warning: ", detail::first_line(e.what()), "; rebuilding it");
      return nullptr;
    }
    if (!payload) {
      count(&CacheStats::disk_misses);
      log("kernel cache: disk miss for kernel ", detail::kernel_label(request), " (no entry '", path, "')");
      return nullptr;
    }
    try {
      auto module = engine_.load(*payload, request);
      count(&CacheStats::disk_hits, &CacheStats::disk_load_seconds, t.seconds());
      log("kernel cache: disk hit for kernel ", detail::kernel_label(request), " ('", path, "', read and loaded in ",
          detail::millis(t.seconds()), ")");
      return module;
    } catch (const UnavailableError&) {
      throw;  // no device or engine: not the entry's fault
    } catch (const Error& e) {
      count(&CacheStats::disk_corrupt);  // checksum fine but the engine rejects it
      log("warning: kernel cache: entry '", path, "' was rejected by the ", engine_.name(),
          " engine: ", detail::first_line(e.what()), "; rebuilding it");
      return nullptr;
    }
  }

  // Compiles and loads `request`, then stores the artifact on disk when `path` is set.
  std::shared_ptr<LoadedModule> compile(const CompileRequest& request, const Digest& k, const std::string& path) {
    Timer tc;
    std::vector<std::uint8_t> artifact = engine_.compile(request);
    double compile_s = tc.seconds();
    count(&CacheStats::compiles, &CacheStats::compile_seconds, compile_s);
    Timer tl;
    auto module = engine_.load(artifact, request);
    double load_s = tl.seconds();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stats_.load_seconds += load_s;
    }
    log("JIT: compiled kernel ", detail::kernel_label(request), " with the ", engine_.name(), " engine in ",
        detail::millis(compile_s), " (", artifact.size(), " bytes), loaded in ", detail::millis(load_s));
    if (path.empty()) return module;
    try {
      write_entry(path, k, artifact);
    } catch (const std::exception& e) {
      count(&CacheStats::disk_write_failures);
      log("warning: ", detail::first_line(e.what()));
    }
    return module;
  }

  // Disk, then compile + store. Runs without the lock.
  CacheResult fill(const CompileRequest& request, const Digest& k) {
    std::string path = disk_usable() ? entry_path(k) : std::string();
    if (!path.empty())
      if (auto module = from_disk(request, k, path)) return {std::move(module), CacheEvent::disk_hit, 0};
    return {compile(request, k, path), CacheEvent::compiled, 0};
  }

  Engine& engine_;
  std::string dir_;
  bool disk_;
  bool debug_;
  mutable std::mutex disk_mutex_;
  bool disk_checked_ = false;  // disk_usable() ran (under disk_mutex_)
  std::string disk_problem_;   // why the directory is refused (under disk_mutex_)
  std::mutex identity_mutex_;
  std::string identity_;  // written once under identity_mutex_, then only read
  mutable std::mutex mutex_;
  std::unordered_map<Digest, std::shared_ptr<LoadedModule>, DigestHash> memory_;
  std::unordered_map<Digest, std::shared_ptr<Pending>, DigestHash> pending_;
  CacheStats stats_;
  CacheEvent last_ = CacheEvent::none;
};

}  // namespace spindle::runtime
