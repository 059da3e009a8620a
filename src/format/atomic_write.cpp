#include "format/atomic_write.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <utility>

#include "core/interrupt.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

Error io_error(const std::string& what, int err) {
  return make_error(ErrorCode::io, what + ": " + std::strerror(err));
}

struct PathParts {
  std::string dir;
  std::string name;
};

PathParts split(const std::string& path) {
  const fs::path p(path);
  const std::string dir = p.parent_path().string();
  return {dir.empty() ? "." : dir, p.filename().string()};
}

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool pid_alive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

// The PID that follows `prefix` in a temporary's name (digits up to '.' or the end), or -1.
pid_t pid_after(std::string_view name, std::string_view prefix) {
  if (!starts_with(name, prefix)) return -1;
  long long pid = 0;
  size_t i = prefix.size();
  for (; i < name.size() && name[i] != '.'; ++i) {
    if (name[i] < '0' || name[i] > '9' || pid > 1'000'000'000) return -1;
    pid = pid * 10 + (name[i] - '0');
  }
  return i == prefix.size() ? -1 : static_cast<pid_t>(pid);
}

// A temporary named with `prefix` whose writer is no longer running.
bool dead_temporary(std::string_view name, std::string_view prefix) {
  const pid_t pid = pid_after(name, prefix);
  return pid > 0 && pid != ::getpid() && !pid_alive(pid);
}

// Removes dir's entries named with `prefix` whose writers are gone (best effort).
void remove_dead(const std::string& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (dead_temporary(e.path().filename().string(), prefix)) fs::remove_all(e.path(), ec);
  }
}

// A temporary of an AtomicFile for any target in a folder: ".NAME.ferry-tmp.PID.N".
bool dead_file_temporary(const std::string& name) {
  const size_t at = name.find(".ferry-tmp.");
  return name.size() > 1 && name[0] == '.' && at != std::string::npos &&
         dead_temporary(name, std::string_view(name).substr(0, at + 11));
}

std::atomic<unsigned> g_temp_counter{0};

std::string unique_suffix() {
  return std::to_string(::getpid()) + "." + std::to_string(g_temp_counter++);
}

void sleep_ms(long ms) {
  timespec ts{0, ms * 1'000'000L};
  ::nanosleep(&ts, nullptr);
}

}  // namespace

Status fsync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error(dir + ": cannot open to flush", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL && err != EROFS) return io_error(dir + ": cannot flush", err);
  return {};
}

// --- AtomicFile ---

Result<AtomicFile> AtomicFile::create(const std::string& path, mode_t mode) {
  FERRY_RETURN_IF_ERROR(check_interrupt(": nothing was written to " + path));
  const PathParts parts = split(path);
  if (parts.name.empty() || parts.name == "." || parts.name == "..") {
    return make_error(ErrorCode::invalid_argument, path + ": not a file name");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return make_error(ErrorCode::invalid_argument, path + " is a folder; give a file name");
  }
  const std::string prefix = "." + parts.name + ".ferry-tmp.";
  remove_dead(parts.dir, prefix);
  AtomicFile f;
  f.path_ = path;
  f.temp_ = join(parts.dir, prefix + unique_suffix());
  f.fd_ = ::open(f.temp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (f.fd_ < 0) {
    const int err = errno;
    f.temp_.clear();  // nothing of ours to remove
    return io_error(parts.dir + ": cannot create a file there (for " + parts.name + ")", err);
  }
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      committed_(std::exchange(o.committed_, true)),
      path_(std::move(o.path_)),
      temp_(std::exchange(o.temp_, {})) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& o) noexcept {
  if (this != &o) {
    discard();
    fd_ = std::exchange(o.fd_, -1);
    committed_ = std::exchange(o.committed_, true);
    path_ = std::move(o.path_);
    temp_ = std::exchange(o.temp_, {});
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  discard();
}

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

Status AtomicFile::write(const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error(path_ + ": cannot write", errno);
    if (n == 0) return io_error(path_ + ": cannot write", EIO);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return {};
}

Status AtomicFile::commit() {
  if (fd_ < 0 || committed_) {
    return make_error(ErrorCode::internal, path_ + ": commit without an open temporary");
  }
  FERRY_RETURN_IF_ERROR(check_interrupt(": " + path_ + " was left as it was"));
  if (::fsync(fd_) != 0) return io_error(path_ + ": cannot flush to the disk", errno);
  if (::close(std::exchange(fd_, -1)) != 0) return io_error(path_ + ": cannot close", errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    return io_error(path_ + ": cannot rename into place", errno);
  }
  committed_ = true;
  temp_.clear();
  return fsync_folder(split(path_).dir);
}

Status write_file_atomic(const std::string& path, std::string_view bytes, mode_t mode) {
  FERRY_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::create(path, mode));
  FERRY_RETURN_IF_ERROR(f.write(bytes.data(), bytes.size()));
  return f.commit();
}

// --- FileLock ---

Result<FileLock> FileLock::acquire(const std::string& path, const std::function<void()>& on_wait) {
  FileLock l;
  l.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (l.fd_ < 0) return io_error(path + ": cannot open to lock", errno);
  bool waited = false;
  while (::flock(l.fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    // File systems without flock: go on unlocked (temporaries are still unique per writer).
    if (errno == ENOLCK || errno == EOPNOTSUPP || errno == EINVAL) break;
    if (errno != EWOULDBLOCK) return io_error(path + ": cannot lock", errno);
    if (!waited && on_wait) on_wait();
    waited = true;
    FERRY_RETURN_IF_ERROR(
        check_interrupt(" while waiting for another writer of " + path + "; nothing was changed"));
    sleep_ms(20);
  }
  return l;
}

FileLock::FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the lock
}

// --- StagedFolder ---

namespace {

// The folder a target names, with symlinks in it resolved (a link to a folder stays a link; the
// folder it names is the one replaced). Its parent is created if missing.
Result<std::string> resolve_target(const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return make_error(ErrorCode::invalid_argument, target + " exists and is not a folder");
    }
    char* real = ::realpath(target.c_str(), nullptr);
    if (real == nullptr) return io_error(target, errno);
    std::string r(real);
    std::free(real);
    return r;
  }
  if (errno != ENOENT) return io_error(target, errno);
  struct stat lst {};
  if (::lstat(target.c_str(), &lst) == 0) {  // a dangling symlink: do not write through it
    return make_error(ErrorCode::invalid_argument,
                      target +
                          " is a symbolic link to a missing folder; remove it or create the "
                          "folder it names");
  }
  const PathParts parts = split(target);
  if (parts.name.empty() || parts.name == "." || parts.name == "..") {
    return make_error(ErrorCode::invalid_argument, target + ": not a folder name");
  }
  std::error_code ec;
  fs::create_directories(parts.dir, ec);
  if (ec) return make_error(ErrorCode::io, parts.dir + ": cannot create: " + ec.message());
  char* real = ::realpath(parts.dir.c_str(), nullptr);
  if (real == nullptr) return io_error(parts.dir, errno);
  std::string r = join(real, parts.name);
  std::free(real);
  return r;
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// A crash between the two renames of the fallback swap leaves no folder at the target and the
// old one beside it: put it back.
void restore_interrupted_swap(const std::string& target, const PathParts& parts) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) == 0 || errno != ENOENT) return;
  const std::string prefix = "." + parts.name + ".ferry-old.";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parts.dir, ec)) {
    if (!dead_temporary(e.path().filename().string(), prefix)) continue;
    if (::rename(e.path().c_str(), target.c_str()) == 0) return;
  }
}

}  // namespace

Result<StagedFolder> StagedFolder::begin(const std::string& target, const FolderPolicy& policy,
                                         const std::function<void()>& on_wait) {
  FERRY_RETURN_IF_ERROR(check_interrupt(": nothing was written to " + target));
  FERRY_ASSIGN_OR_RETURN(const std::string real, resolve_target(target));
  const PathParts parts = split(real);
  restore_interrupted_swap(real, parts);

  StagedFolder s;
  s.target_ = real;
  bool waited = false;
  for (;;) {
    s.created_target_ = false;
    if (::mkdir(real.c_str(), 0755) == 0) {
      s.created_target_ = true;
    } else if (errno != EEXIST) {
      return io_error(target + ": cannot create", errno);
    }
    auto notify = [&] {
      if (!waited && on_wait) on_wait();
      waited = true;
    };
    FERRY_ASSIGN_OR_RETURN(FileLock lock, FileLock::acquire(real, notify));
    // Another writer may have swapped a new folder in while this one waited on the old: the
    // lock that counts is the one on the folder at the target name now.
    struct stat now {
    }, locked{};
    if (::stat(real.c_str(), &now) == 0 && ::fstat(lock.fd(), &locked) == 0 &&
        same_file(now, locked)) {
      if (!S_ISDIR(now.st_mode)) {
        return make_error(ErrorCode::invalid_argument, target + " exists and is not a folder");
      }
      s.target_lock_ = std::move(lock);
      break;
    }
  }

  // Leftovers beside the target: staging folders and old folders of writers that died.
  remove_dead(parts.dir, "." + parts.name + ".ferry-new.");
  remove_dead(parts.dir, "." + parts.name + ".ferry-old.");

  // What the old folder holds.
  bool holds = false;
  bool of_kind = false;
  std::string not_a_file;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(real, ec)) {
    const std::string name = e.path().filename().string();
    if (dead_file_temporary(name) || (policy.leftover && policy.leftover(name))) continue;
    holds = true;
    if (policy.marks_kind && policy.marks_kind(name)) of_kind = true;
    if (policy.supersedes && policy.supersedes(name)) continue;
    const fs::file_status st = e.symlink_status(ec);
    if (fs::is_regular_file(st) || fs::is_symlink(st)) {
      s.carry_.push_back(name);
    } else if (not_a_file.empty()) {
      not_a_file = name;
    }
  }
  if (ec) return make_error(ErrorCode::io, target + ": cannot list: " + ec.message());
  if (holds && !policy.force) {
    if (of_kind) {
      return make_error(ErrorCode::invalid_argument, target + " holds a " + policy.kind + " (use " +
                                                         policy.force_flag + " to replace it)");
    }
    return make_error(ErrorCode::invalid_argument, target + " is not empty and holds no " +
                                                       policy.kind + "; write to an " +
                                                       "empty or new folder");
  }
  if (holds && policy.marks_kind && !of_kind) {
    return make_error(ErrorCode::invalid_argument,
                      target + " holds no " + policy.kind + " (none of " + policy.marks + "); " +
                          policy.force_flag + " replaces only a " + policy.kind + " folder");
  }
  if (!not_a_file.empty()) {
    return make_error(ErrorCode::invalid_argument,
                      target + " holds " + not_a_file + ", which is not a file: ferry writes the " +
                          "new " + policy.kind + " beside the old one and swaps the folders, " +
                          "carrying files over but not folders; move it away first");
  }

  struct stat tst {
  }, pst{};
  if (::stat(real.c_str(), &tst) != 0) return io_error(target, errno);
  if (::stat(parts.dir.c_str(), &pst) != 0) return io_error(parts.dir, errno);
  if (tst.st_dev != pst.st_dev) {
    return make_error(ErrorCode::invalid_argument,
                      target + " is a mount point: ferry writes the new " + policy.kind +
                          " beside the folder and swaps the two, which cannot cross file " +
                          "systems; write into a folder inside it");
  }

  const std::string staging = join(parts.dir, "." + parts.name + ".ferry-new." + unique_suffix());
  if (::mkdir(staging.c_str(), tst.st_mode & 07777) != 0) {
    return io_error(parts.dir + ": cannot create the new " + policy.kind + " beside " + target +
                        " (ferry writes it there, then swaps it in)",
                    errno);
  }
  s.staging_ = staging;
  ::chmod(staging.c_str(), tst.st_mode & 07777);  // as the old folder, whatever the umask
  FERRY_ASSIGN_OR_RETURN(s.staging_lock_, FileLock::acquire(staging));
  return s;
}

StagedFolder::StagedFolder(StagedFolder&& o) noexcept
    : target_(std::move(o.target_)),
      staging_(std::exchange(o.staging_, {})),
      carry_(std::move(o.carry_)),
      target_lock_(std::move(o.target_lock_)),
      staging_lock_(std::move(o.staging_lock_)),
      created_target_(std::exchange(o.created_target_, false)),
      committed_(std::exchange(o.committed_, true)) {}

StagedFolder& StagedFolder::operator=(StagedFolder&& o) noexcept {
  if (this != &o) {
    discard();
    target_ = std::move(o.target_);
    staging_ = std::exchange(o.staging_, {});
    carry_ = std::move(o.carry_);
    target_lock_ = std::move(o.target_lock_);
    staging_lock_ = std::move(o.staging_lock_);
    created_target_ = std::exchange(o.created_target_, false);
    committed_ = std::exchange(o.committed_, true);
  }
  return *this;
}

StagedFolder::~StagedFolder() {
  discard();
}

void StagedFolder::discard() {
  std::error_code ec;
  if (!committed_ && !staging_.empty()) fs::remove_all(staging_, ec);
  if (!committed_ && created_target_) ::rmdir(target_.c_str());  // only if still empty
  staging_.clear();
  created_target_ = false;
  staging_lock_ = FileLock();
  target_lock_ = FileLock();
}

Error StagedFolder::explain(const Error& error) const {
  Error e = error;
  if (staging_.empty()) return e;
  const std::string shown = target_ + " (new)";
  for (size_t at = e.message.find(staging_); at != std::string::npos;
       at = e.message.find(staging_, at + shown.size())) {
    e.message.replace(at, staging_.size(), shown);
  }
  e.message += "; " + target_ + " was left as it was";
  return e;
}

Status StagedFolder::commit() {
  if (committed_ || staging_.empty()) {
    return make_error(ErrorCode::internal, target_ + ": commit without a staging folder");
  }
  const std::string unchanged = ": " + target_ + " was left as it was";
  FERRY_RETURN_IF_ERROR(check_interrupt(unchanged));
  for (const std::string& name : carry_) {
    const std::string from = join(target_, name);
    const std::string to = join(staging_, name);
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0) continue;  // gone since begin()
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const fs::path link = fs::read_symlink(from, ec);
      if (!ec) fs::create_symlink(link, to, ec);
      if (ec) return make_error(ErrorCode::io, from + ": cannot carry over: " + ec.message());
    } else if (::link(from.c_str(), to.c_str()) != 0) {
      std::error_code ec;  // no hard links here (a file system or a policy): copy it
      fs::copy_file(from, to, ec);
      if (ec) return make_error(ErrorCode::io, from + ": cannot carry over: " + ec.message());
    }
  }
  FERRY_RETURN_IF_ERROR(fsync_folder(staging_));
  FERRY_RETURN_IF_ERROR(check_interrupt(unchanged));

  const PathParts parts = split(target_);
  std::string old = staging_;  // where the old folder ends up
  if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
      return io_error(target_ + ": cannot swap the new folder in", errno);
    }
    // No atomic exchange here: two renames; a crash between them is undone by the next begin().
    old = join(parts.dir, "." + parts.name + ".ferry-old." + unique_suffix());
    if (::rename(target_.c_str(), old.c_str()) != 0) {
      return io_error(target_ + ": cannot move the old folder aside", errno);
    }
    if (::rename(staging_.c_str(), target_.c_str()) != 0) {
      const int err = errno;
      ::rename(old.c_str(), target_.c_str());
      return io_error(target_ + ": cannot move the new folder in", err);
    }
  }
  committed_ = true;
  Status flushed = fsync_folder(parts.dir);
  std::error_code ec;
  fs::remove_all(old, ec);  // what is left is removed by the next writer
  staging_.clear();
  staging_lock_ = FileLock();
  target_lock_ = FileLock();
  return flushed;
}

}  // namespace ferry
