// The system engine: the host C compiler (Options::system_cc, default "cc") builds a
// shared object in a private temporary directory; load() maps the bytes back through an
// anonymous memfd (fallback: a private temporary file) and dlopen()s them.
//
//   cc -O3 -march=native -fPIC -shared -ffp-contract=fast -fno-math-errno -fwrapv -std=c11
//      [-mprefer-vector-width=512 on an x86-64 host with AVX-512F] -o kernel.so kernel.c
//
// system_cc may hold a launcher or options, e.g. "ccache cc" or "gcc -O0": it is split on
// blanks. The identity (part of every kernel-cache key) holds every word of that command,
// the first line and a digest of the whole `<command> --version` output, the host CPU and
// the flags, so "gcc -O0" and "gcc -O3", or two versions of one compiler, never share
// cache entries.
// A loaded module keeps its memfd (or file) open until dlclose(): glibc recognises an
// already loaded library by its path, and "/proc/self/fd/N" would otherwise be reused.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <sys/mman.h>

#include "spindle/runtime/engine.hpp"
#include "spindle/runtime/posix.hpp"
#include "spindle/support/error.hpp"
#include "spindle/support/hash.hpp"

namespace spindle::runtime {

namespace detail {

// -fwrapv: integer arithmetic wraps, as docs/language.md defines it.
inline constexpr const char* kSystemFlags[] = {"-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=fast",
                                               "-fno-math-errno", "-fwrapv", "-std=c11"};

inline std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> words;
  std::size_t pos = 0;
  while ((pos = command.find_first_not_of(" \t", pos)) != std::string::npos) {
    std::size_t end = command.find_first_of(" \t", pos);
    words.push_back(command.substr(pos, end - pos));
    pos = end;
  }
  return words;
}

// "model name" of the first processor and a digest of its feature flags, from
// /proc/cpuinfo (what -march=native resolves from). Cheap: reads the first block only.
inline std::string host_cpu_description() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "cpu:unknown";
  std::string model, flags;
  char line[8192];
  while (std::fgets(line, sizeof line, f)) {
    std::string s(line);
    if (s == "\n") break;
    auto value = [&] {
      std::size_t c = s.find(':');
      std::string v = c == std::string::npos ? "" : s.substr(c + 1);
      while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
      return v.empty() || v[0] != ' ' ? v : v.substr(1);
    };
    if (s.rfind("model name", 0) == 0) model = value();
    if (s.rfind("flags", 0) == 0 || s.rfind("Features", 0) == 0) flags = value();
  }
  std::fclose(f);
  return message("cpu:'", model, "' cpuflags:", Hasher().add(flags).digest().hex().substr(0, 16));
}

// Whether this is an x86-64 host whose first processor lists avx512f in /proc/cpuinfo.
inline bool host_has_avx512f() {
#if defined(__x86_64__)
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[8192];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) {
    std::string s(line);
    if (s == "\n") break;
    if (s.rfind("flags", 0) != 0) continue;
    std::replace(s.begin(), s.end(), '\n', ' ');
    found = (s + " ").find(" avx512f ") != std::string::npos;
  }
  std::fclose(f);
  return found;
#else
  return false;
#endif
}

class SystemModule final : public LoadedModule {
 public:
  SystemModule(void* handle, void* entry, int fd, std::string file)
      : handle_(handle), entry_(entry), fd_(fd), file_(std::move(file)) {}
  ~SystemModule() override {
    ::dlclose(handle_);
    if (fd_ >= 0) ::close(fd_);
    if (!file_.empty()) ::unlink(file_.c_str());
  }
  void* entry() const override { return entry_; }

 private:
  void* handle_;
  void* entry_;
  int fd_;
  std::string file_;
};

}  // namespace detail

class SystemEngine final : public Engine {
 public:
  explicit SystemEngine(const Options& options) : command_(detail::split_command(options.system_cc)) {
    if (command_.empty()) command_.push_back("cc");
    flag_list_.assign(std::begin(detail::kSystemFlags), std::end(detail::kSystemFlags));
    // 512-bit vectors on AVX-512 hosts, as the ORC engine (impl/orc_engine.cpp): GCC's and
    // Clang's tuning for those cores prefers 256-bit vectors.
    if (detail::host_has_avx512f()) flag_list_.push_back("-mprefer-vector-width=512");
    for (const auto& f : flag_list_) flags_ += (flags_.empty() ? "" : " ") + f;
  }

  std::string name() const override { return "system"; }

  // Runs `<command> --version` once; throws UnavailableError when the compiler is missing.
  std::string identity() const override {
    std::lock_guard<std::mutex> lock(identity_mutex_);
    if (identity_.empty()) {
      std::vector<std::string> argv = command_;
      argv.push_back("--version");
      posix::ProcessResult r = posix::run_process(argv);
      if (r.spawn_errno != 0 || r.exit_code != 0) throw unavailable(r);
      std::string version = r.output.substr(0, r.output.find('\n'));
      identity_ = message("system cc:'", join_command(), "' version:'", version, "' version-digest:",
                          Hasher().add(r.output).digest().hex(), " ", detail::host_cpu_description(), " ", flags_);
    }
    return identity_;
  }

  std::vector<std::uint8_t> compile(const CompileRequest& request) override {
    const std::string& what = request.kernel_name.empty() ? request.symbol : request.kernel_name;
    posix::TempDir dir("spindle-cc-");
    SPINDLE_CHECK(!dir.path().empty(), IOError, "system engine: cannot create a temporary directory under /tmp for kernel '",
                  what, "': ", posix::errno_text(dir.error()));
    std::string source_path = dir.path() + "/kernel.c", object_path = dir.path() + "/kernel.so";
    {
      int fd = ::open(source_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      bool ok = fd >= 0 && posix::write_all(fd, request.source.data(), request.source.size());
      int err = errno;
      if (fd >= 0) ::close(fd);
      SPINDLE_CHECK(ok, IOError, "system engine: cannot write '", source_path, "': ", posix::errno_text(err));
    }
    std::vector<std::string> argv = command_;
    argv.insert(argv.end(), flag_list_.begin(), flag_list_.end());
    argv.insert(argv.end(), {"-o", object_path, source_path});
    posix::ProcessResult r = posix::run_process(argv);
    if (r.spawn_errno != 0) throw unavailable(r);
    if (r.exit_code != 0) {
      std::size_t pos = r.output.find("error");
      std::string first = pos == std::string::npos ? r.output.substr(0, r.output.find('\n'))
                                                   : r.output.substr(pos, r.output.find('\n', pos) - pos);
      throw CompileError(message("system engine: compiling kernel '", what, "' with '", command_[0],
                                 "' failed (exit status ", r.exit_code, "): ", first,
                                 "\n  hint: the full log is in CompileError::log()"),
                         request.source, r.output, join_command() + " " + flags_);
    }
    int err = 0;
    auto bytes = posix::read_file(object_path, &err);
    SPINDLE_CHECK(bytes && !bytes->empty(), IOError, "system engine: cannot read the shared object '",
                  object_path, "' built for kernel '", what, "': ", posix::errno_text(err));
    return std::move(*bytes);
  }

  std::shared_ptr<LoadedModule> load(std::span<const std::uint8_t> artifact,
                                     const CompileRequest& request) override {
    std::string errors;
    // First choice: an anonymous memory file, nothing touches the disk.
    int fd = ::memfd_create("spindle-kernel", MFD_CLOEXEC);
    if (fd >= 0) {
      if (posix::write_all(fd, artifact.data(), artifact.size())) {
        if (auto m = open_module(message("/proc/self/fd/", fd), fd, "", request, errors)) return m;
      } else {
        errors += "memfd write: " + posix::errno_text(errno) + "; ";
      }
      ::close(fd);
    } else {
      errors += "memfd_create: " + posix::errno_text(errno) + "; ";
    }
    // Fallback: a private temporary file, unlinked when the module dies.
    char path[] = "/tmp/spindle-kernel-XXXXXX.so";
    fd = ::mkstemps(path, 3);
    if (fd >= 0) {
      bool ok = posix::write_all(fd, artifact.data(), artifact.size());
      ::close(fd);
      if (ok) {
        if (auto m = open_module(path, -1, path, request, errors)) return m;
      } else {
        errors += message("write ", path, ": ", posix::errno_text(errno), "; ");
      }
      ::unlink(path);
    } else {
      errors += "mkstemps: " + posix::errno_text(errno) + "; ";
    }
    throw RuntimeError(message("system engine: loading kernel '", request.kernel_name, "' (symbol '",
                               request.symbol, "', ", artifact.size(), " byte shared object) failed: ",
                               errors, "\n  hint: a corrupted cache entry; delete the cache directory"));
  }

 private:
  UnavailableError unavailable(const posix::ProcessResult& r) const {
    std::string why = r.spawn_errno != 0 ? posix::errno_text(r.spawn_errno)
                                         : message("exit status ", r.exit_code, ": ", r.output);
    return UnavailableError(message("system engine: the C compiler '", command_[0], "' (Options::system_cc / SPINDLE_CC = '",
                                    join_command(), "') could not be run: ", why,
                                    (command_[0].find('/') == std::string::npos ? " (looked for it on PATH)" : ""),
                                    "\n  hint: install a C compiler or set SPINDLE_CC"));
  }

  std::string join_command() const {
    std::string s;
    for (const auto& w : command_) s += (s.empty() ? "" : " ") + w;
    return s;
  }

  static std::shared_ptr<LoadedModule> open_module(const std::string& path, int fd, const std::string& file,
                                                   const CompileRequest& request, std::string& errors) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* e = ::dlerror();
      errors += message("dlopen ", path, ": ", e ? e : "unknown error", "; ");
      return nullptr;
    }
    void* entry = ::dlsym(handle, request.symbol.c_str());
    if (!entry) {
      const char* e = ::dlerror();
      errors += message("dlsym '", request.symbol, "': ", e ? e : "symbol is null", "; ");
      ::dlclose(handle);
      return nullptr;
    }
    return std::make_shared<detail::SystemModule>(handle, entry, fd, file);
  }

  std::vector<std::string> command_;
  std::vector<std::string> flag_list_;  // kSystemFlags and the host's vector width
  std::string flags_;
  mutable std::mutex identity_mutex_;
  mutable std::string identity_;
};

inline std::unique_ptr<Engine> make_system_engine(const Options& options) {
  return std::make_unique<SystemEngine>(options);
}

}  // namespace spindle::runtime
