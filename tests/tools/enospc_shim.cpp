// LD_PRELOAD shim for the fault-injection tests where no small tmpfs can be mounted: a "disk"
// of FERRY_SHIM_DISK_BYTES bytes. Space reserved by posix_fallocate and bytes written by write()
// to regular files (not stdout or stderr) count against it; past it both fail with ENOSPC, as a
// full file system would.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace {

std::atomic<uint64_t> g_used{0};

uint64_t budget() {
  static const uint64_t b = [] {
    const char* v = std::getenv("FERRY_SHIM_DISK_BYTES");
    return v != nullptr ? std::strtoull(v, nullptr, 10) : UINT64_MAX;
  }();
  return b;
}

// Takes n bytes of the disk, or reports that they are not there.
bool take(uint64_t n) {
  uint64_t used = g_used.load();
  do {
    if (n > budget() || used > budget() - n) return false;
  } while (!g_used.compare_exchange_weak(used, used + n));
  return true;
}

bool regular_file(int fd) {
  struct stat st {};
  return fd > 2 && ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

template <class F>
F next(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

int posix_fallocate(int fd, off_t offset, off_t len) {
  static auto real = next<int (*)(int, off_t, off_t)>("posix_fallocate");
  if (len > 0 && !take(static_cast<uint64_t>(len))) return ENOSPC;
  return real(fd, offset, len);
}

int posix_fallocate64(int fd, off_t offset, off_t len) {
  return posix_fallocate(fd, offset, len);
}

ssize_t write(int fd, const void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, const void*, size_t)>("write");
  if (n > 0 && regular_file(fd) && !take(n)) {
    errno = ENOSPC;
    return -1;
  }
  return real(fd, buf, n);
}

}  // extern "C"
