// A read-only memory mapping of a whole file. Move-only; unmaps and closes on destruction.
//
// The file can change under the mapping (another process truncates or rewrites it). Touching a
// page the file no longer has raises SIGBUS: read mapped bytes through format/fault_guard.h,
// which turns that into an error naming the file. check_unchanged() notices a change without
// touching the bytes: from the size and modification time taken at open(), and, where the
// kernel grants this process a read lease on the file (Linux, files it owns, local file
// systems), from the lease being broken by anyone opening the file for writing or truncating
// it. (The kernel holds such a writer until the lease is given up: ferry's handler does that at
// once; a process stopped in a debugger holds it for /proc/sys/fs/lease-break-time at most.)
// Replacing the file by renaming another over its name (what ferry's own writers do) is not a
// change: the mapping keeps the old file's bytes alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"

namespace ferry {

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  const std::string& path() const { return path_; }
  // The open descriptor behind the mapping (-1 for a default-constructed one): the same file
  // even after another is renamed over its path (host/storage_reader.h reopens it from here).
  int fd() const { return fd_; }

  // An io error "PATH: changed or truncated while in use (...)" when the file's size or
  // modification time differs from open()'s, or the read lease was broken; ok otherwise (and
  // for a default-constructed mapping). One fstat: cheap enough for every check point.
  Status check_unchanged() const;
  // Whether the kernel granted a read lease (check_unchanged then also sees writers that open
  // the file within the timestamp granularity of the file system).
  bool leased() const { return leased_; }
  // The file's size now, by fstat (nullopt if that fails).
  std::optional<uint64_t> size_now() const;

 private:
  void reset();

  void* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  bool leased_ = false;
  timespec mtime_{};
  std::string path_;
};

}  // namespace ferry
