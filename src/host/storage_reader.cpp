#include "host/storage_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ferry {

AlignedRange aligned_range(uint64_t offset, uint64_t bytes) {
  AlignedRange r;
  r.offset = offset / kStorageAlignment * kStorageAlignment;
  r.head = offset - r.offset;
  const uint64_t end = offset + bytes;
  r.bytes = (end + kStorageAlignment - 1) / kStorageAlignment * kStorageAlignment - r.offset;
  return r;
}

StorageReader::~StorageReader() {
  for (auto& [file, h] : handles_) {
    if (h.owned) ::close(h.fd);
  }
  for (int fd : retired_) ::close(fd);
}

Result<StorageReader::Handle> StorageReader::handle(const MappedFile& file) {
  std::lock_guard lock(mutex_);
  if (auto it = handles_.find(&file); it != handles_.end()) return it->second;
  if (file.fd() < 0) {
    return make_error(ErrorCode::internal, file.path() + ": not open for reads");
  }
  Handle h{file.fd(), false, false};
  if (want_direct_) {
    const std::string self = "/proc/self/fd/" + std::to_string(file.fd());
    const int fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd >= 0) {
      h = Handle{fd, true, true};
    } else {
      all_direct_ = false;
      if (why_not_.empty()) {
        why_not_ = file.path() + ": O_DIRECT refused (" + std::strerror(errno) + ")";
      }
    }
  } else {
    all_direct_ = false;
    if (why_not_.empty()) why_not_ = "direct reads not asked for";
  }
  handles_.emplace(&file, h);
  return h;
}

Status StorageReader::read_aligned(const MappedFile& file, uint64_t offset, uint64_t bytes,
                                   uint64_t need, std::byte* dst) {
  FERRY_ASSIGN_OR_RETURN(Handle h, handle(file));
  if (h.direct && (offset % kStorageAlignment != 0 || bytes % kStorageAlignment != 0 ||
                   reinterpret_cast<uintptr_t>(dst) % kStorageAlignment != 0)) {
    return make_error(ErrorCode::internal, file.path() + ": unaligned direct read");
  }
  uint64_t done = 0;
  while (done < bytes) {
    ssize_t n = 0;
    if (h.direct && refuse_direct_reads_for_tests) {
      n = -1;
      errno = EINVAL;
    } else {
      n = ::pread(h.fd, dst + done, bytes - done, static_cast<off_t>(offset + done));
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && h.direct) {
        // Opened with O_DIRECT but refused at the read (some file systems do): plain preads on
        // the mapping's descriptor from here on, for this file.
        h = buffered(file, std::strerror(errno));
        continue;
      }
      return make_error(ErrorCode::io, file.path() + ": read at " + std::to_string(offset + done) +
                                           ": " + std::strerror(errno));
    }
    if (n == 0) break;  // the file's end
    done += static_cast<uint64_t>(n);
  }
  if (done < need) {
    return make_error(ErrorCode::io, file.path() + ": changed or truncated while in use (" +
                                         std::to_string(done) + " of " + std::to_string(need) +
                                         " bytes at " + std::to_string(offset) + ")");
  }
  return {};
}

StorageReader::Handle StorageReader::buffered(const MappedFile& file, const char* why) {
  std::lock_guard lock(mutex_);
  Handle& h = handles_[&file];
  if (h.direct) {
    // The O_DIRECT descriptor stays open until the reader goes: other threads may be reading it.
    if (h.owned) retired_.push_back(h.fd);
    h = Handle{file.fd(), false, false};
    all_direct_ = false;
    if (why_not_.empty()) why_not_ = file.path() + ": O_DIRECT read refused (" + why + ")";
  }
  return h;
}

Status StorageReader::prepare(const MappedFile& file) {
  return handle(file).status();
}

bool StorageReader::direct() const {
  std::lock_guard lock(mutex_);
  return all_direct_;
}

std::string StorageReader::why_not_direct() const {
  std::lock_guard lock(mutex_);
  return why_not_;
}

}  // namespace ferry
