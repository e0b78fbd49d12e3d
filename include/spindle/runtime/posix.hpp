// Small POSIX helpers shared by the system engine and the kernel cache: whole-file and
// whole-descriptor I/O that survives EINTR and short transfers, `mkdir -p`, a private
// temporary directory that removes itself, and running a program with its output
// captured. Failures are reported through return values and errno texts; callers turn
// them into spindle errors that name what was attempted.
#pragma once

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace spindle::runtime::posix {

inline std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

inline bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Appends everything readable from fd until end of file.
template <class Bytes>
bool read_all(int fd, Bytes& out) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    out.insert(out.end(), buf, buf + n);
  }
}

// The whole file, or nullopt with *err set to errno (ENOENT when it does not exist).
inline std::optional<std::vector<std::uint8_t>> read_file(const std::string& path, int* err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return std::nullopt;
  }
  std::vector<std::uint8_t> bytes;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) bytes.reserve(static_cast<std::size_t>(st.st_size));
  bool ok = read_all(fd, bytes);
  *err = ok ? 0 : errno;
  ::close(fd);
  if (!ok) return std::nullopt;
  return bytes;
}

// `mkdir -p` where the directories created get `mode`; existing ones are left alone.
// Returns 0 or the errno of the first failure.
inline int make_dirs(const std::string& path, mode_t mode) {
  if (path.empty()) return ENOENT;
  for (std::size_t pos = 1;; ++pos) {
    pos = path.find('/', pos);
    std::string prefix = path.substr(0, pos);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) return errno;
    if (pos == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

// A fresh private (0700) directory under /tmp, removed with its (flat) content on
// destruction. path() is empty when creation failed; error() then holds errno.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string pattern = "/tmp/" + prefix + "XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr)
      path_ = pattern;
    else
      error_ = errno;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    if (path_.empty()) return;
    if (DIR* d = ::opendir(path_.c_str())) {
      while (dirent* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name != "." && name != "..") ::unlink((path_ + "/" + name).c_str());
      }
      ::closedir(d);
    }
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  int error() const { return error_; }

 private:
  std::string path_;
  int error_ = 0;
};

struct ProcessResult {
  int spawn_errno = 0;  // non-zero: the program could not be started (ENOENT: not found)
  int exit_code = -1;   // exit status, or 128 + signal number
  std::string output;   // stdout and stderr interleaved
};

// Runs argv[0] (searched on PATH unless it contains '/') with stdin from /dev/null and
// stdout + stderr captured, and waits for it.
inline ProcessResult run_process(const std::vector<std::string>& argv) {
  ProcessResult result;
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.spawn_errno = errno;
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    result.spawn_errno = rc;
    return result;
  }
  read_all(fds[0], result.output);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return result;
  }
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

}  // namespace spindle::runtime::posix
