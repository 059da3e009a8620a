#include "format/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat below rejects it.
  FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (fd.fd < 0) return io_error(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) return io_error(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) return make_error(ErrorCode::io, path + ": not a regular file");
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ == 0) return m;  // mmap refuses length 0; an empty file maps as empty
  void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_SHARED, fd.fd, 0);
  if (p == MAP_FAILED) return io_error(path, "cannot mmap", errno);
  m.data_ = p;
  return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    path_ = std::move(o.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace ferry
