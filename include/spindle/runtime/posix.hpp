// Small POSIX helpers shared by the system engine and the kernel cache: whole-file and
// whole-descriptor I/O that survives EINTR and short transfers, a bounded read of a
// regular file that never follows a symbolic link, never blocks on a FIFO or device and
// never reads past a size limit (read_regular_file), `mkdir -p`, the ownership and mode
// check of a private directory (private_dir_problem, as ssh does for ~/.ssh), a private
// temporary directory that removes itself, and running a program with its output
// captured. Failures are reported through return values and errno texts; callers turn
// them into spindle errors that name what was attempted.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
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

// "regular file", "directory", "symbolic link", "FIFO", ... for messages.
inline const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISLNK(mode)) return "symbolic link";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  return "special file";
}

enum class ReadStatus { ok, missing, not_regular, too_large, failed };

struct BoundedRead {
  ReadStatus status = ReadStatus::failed;
  std::vector<std::uint8_t> bytes;  // the content when status == ok
  int err = 0;                      // errno when status == failed
  mode_t mode = 0;                  // file type when status == not_regular
  std::uint64_t size = 0;           // size seen when status == too_large
  uid_t uid = 0;                    // owner when status == ok
};

namespace detail {

// Sets r.status (and r.mode / r.size) and returns false unless `st` is a regular file of
// at most max_bytes.
inline bool acceptable(const struct stat& st, std::uint64_t max_bytes, BoundedRead& r) {
  if (!S_ISREG(st.st_mode)) {
    r.status = ReadStatus::not_regular;
    r.mode = st.st_mode;
    return false;
  }
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    r.status = ReadStatus::too_large;
    r.size = static_cast<std::uint64_t>(st.st_size);
    return false;
  }
  return true;
}

// Reads fd to its end into r.bytes, stopping with too_large past max_bytes.
inline bool read_bounded(int fd, std::uint64_t max_bytes, BoundedRead& r) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.err = errno;
      return false;
    }
    if (n == 0) return true;
    if (r.bytes.size() + static_cast<std::size_t>(n) > max_bytes) {
      r.status = ReadStatus::too_large;
      r.size = r.bytes.size() + static_cast<std::size_t>(n);
      return false;
    }
    r.bytes.insert(r.bytes.end(), buf, buf + n);
  }
}

}  // namespace detail

// The content of `path` when it is a regular file of at most max_bytes. The file is
// lstat()ed, then opened with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC and fstat()ed again
// (a file swapped in between is caught), so a symbolic link, FIFO, socket, device or
// directory is reported as not_regular without being read, and a file larger than the
// limit (or one that grows past it while being read) as too_large.
inline BoundedRead read_regular_file(const std::string& path, std::uint64_t max_bytes) {
  BoundedRead r;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    r.err = errno;
    if (r.err == ENOENT) r.status = ReadStatus::missing;
    return r;
  }
  if (!detail::acceptable(st, max_bytes, r)) return r;
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    r.err = errno;
    if (r.err == ENOENT) r.status = ReadStatus::missing;
    if (r.err == ELOOP) r.status = ReadStatus::not_regular, r.mode = S_IFLNK;  // swapped for a link
    return r;
  }
  bool ok = false;
  if (::fstat(fd, &st) != 0) r.err = errno;
  else if (detail::acceptable(st, max_bytes, r)) {
    r.bytes.reserve(static_cast<std::size_t>(st.st_size));
    ok = detail::read_bounded(fd, max_bytes, r);
  }
  ::close(fd);
  if (ok) r.status = ReadStatus::ok, r.uid = st.st_uid;
  else r.bytes = {};
  return r;
}

// "" when `dir` is a directory (symbolic links followed) owned by the effective user and
// not writable by group or others; otherwise why it is not, e.g. "it is writable by group
// (mode 0775)". ENOENT texts for a missing directory.
inline std::string private_dir_problem(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return errno_text(errno);
  if (!S_ISDIR(st.st_mode)) return std::string("it is a ") + file_type_name(st.st_mode) + ", not a directory";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (st.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(st.st_uid) + ", not by the current user (uid " +
           std::to_string(::geteuid()) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return std::string("it is writable by ") + ((st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "group and others"
                                                : (st.st_mode & S_IWGRP)                       ? "group"
                                                                                                : "others") +
           " (mode " + mode + ")";
  return "";
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
