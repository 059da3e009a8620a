#include "format/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

namespace ferry {
namespace {

Error io_error(const std::string& path, const char* what, int err) {
  return make_error(ErrorCode::io, path + ": " + what + ": " + std::strerror(err));
}

// Closes a descriptor on every path out of open().
struct FdCloser {
  int fd = -1;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// Read leases. The kernel tells the holder that someone opens the file for writing (or
// truncates it) with a signal carrying the descriptor; the handler marks the descriptor and
// gives the lease up at once, so the writer is not held back. Descriptors past the table take
// no lease.
constexpr int kLeaseSlots = 4096;
std::atomic<uint8_t> g_lease_broken[kLeaseSlots];
int g_lease_signal = 0;  // 0 until the handler is installed; stays 0 if it cannot be

void on_lease_break(int, siginfo_t* info, void*) {
  const int saved_errno = errno;  // the interrupted code may be about to read it
  const int fd = info->si_fd;
  if (fd >= 0 && fd < kLeaseSlots) g_lease_broken[fd].store(1);
  ::fcntl(fd, F_SETLEASE, F_UNLCK);
  errno = saved_errno;
}

// One real-time signal for lease breaks, taken only if nothing else in the process handles it.
int lease_signal() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int sig = SIGRTMIN + 6;
    if (sig > SIGRTMAX) return;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) != 0 ||
        old.sa_handler != SIG_DFL)
      return;
    struct sigaction sa {};
    sa.sa_sigaction = on_lease_break;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    if (::sigaction(sig, &sa, nullptr) == 0) g_lease_signal = sig;
  });
  return g_lease_signal;
}

// Best effort: false where the platform refuses (not the owner, a network file system, a
// writer already has the file open, leases disabled).
bool take_read_lease(int fd) {
  const int sig = lease_signal();
  if (sig == 0 || fd >= kLeaseSlots) return false;
  g_lease_broken[fd].store(0);
  return ::fcntl(fd, F_SETSIG, sig) == 0 && ::fcntl(fd, F_SETLEASE, F_RDLCK) == 0;
}

bool same_time(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat below rejects it.
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) return io_error(path, "cannot open", errno);
  const bool leased = take_read_lease(fd.fd);
  // After the lease: a change from here on moves the timestamp or breaks the lease.
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return io_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return make_error(ErrorCode::io, path + ": not a regular file");
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  m.mtime_ = st.st_mtim;
  m.leased_ = leased;
  m.fd_ = std::exchange(fd.fd, -1);
  if (m.size_ == 0) return m;  // mmap refuses length 0; an empty file maps as empty
  void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_SHARED, m.fd_, 0);
  if (p == MAP_FAILED) return io_error(path, "cannot mmap", errno);
  m.data_ = p;
  return m;
}

Status MappedFile::check_unchanged() const {
  if (fd_ < 0) return {};
  // The most specific evidence first: a new size, a new timestamp, then the broken lease.
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return io_error(path_, "cannot stat", errno);
  if (static_cast<uint64_t>(st.st_size) != size_) {
    return make_error(ErrorCode::io, path_ + ": changed or truncated while in use (" +
                                         std::to_string(size_) + " bytes when opened, now " +
                                         std::to_string(st.st_size) + ")");
  }
  if (!same_time(st.st_mtim, mtime_)) {
    return make_error(ErrorCode::io,
                      path_ + ": changed or truncated while in use (modified since it was opened)");
  }
  if (leased_ && g_lease_broken[fd_].load()) {
    return make_error(ErrorCode::io, path_ +
                                         ": changed or truncated while in use (opened for "
                                         "writing by another program since it was opened)");
  }
  return {};
}

std::optional<uint64_t> MappedFile::size_now() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.st_size);
}

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) {
    if (leased_) g_lease_broken[fd_].store(0);  // closing gives the lease up
    ::close(fd_);
  }
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
  leased_ = false;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)),
      leased_(std::exchange(o.leased_, false)),
      mtime_(o.mtime_),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
    leased_ = std::exchange(o.leased_, false);
    mtime_ = o.mtime_;
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  reset();
}

}  // namespace ferry
