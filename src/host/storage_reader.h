// Reads of checkpoint bytes from storage with system calls instead of page faults: the way weight
// bytes reach the bounce ring when the checkpoint is not in the page cache (a cold start, or a
// model larger than the host's memory), where faulting the mapping in page by page (or pinning
// it, which faults every page) would read at a fraction of the storage's rate and, past the
// host's memory, thrash.
//
// Each mapped file is reopened through /proc/self/fd (so it is the inode the mapping holds, even
// after another file was renamed over its path) with O_DIRECT: reads go from storage into the
// caller's buffer without a page-cache copy and leave the page cache alone. Where the file system
// refuses O_DIRECT (tmpfs, some network file systems), at the open or at the first read, or /proc
// is missing, the mapping's own descriptor is read with plain pread: still large reads, through
// the page cache.
//
// O_DIRECT wants the buffer, the file offset and the length aligned to the storage's logical
// block: read_aligned() takes 4 KiB-aligned ranges (the largest logical block in common use), and
// aligned_range() widens a byte range to one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/mapped_file.h"

namespace ferry {

inline constexpr uint64_t kStorageAlignment = 4096;

struct AlignedRange {
  uint64_t offset = 0;  // file offset of the first byte read (aligned)
  uint64_t bytes = 0;   // bytes read (aligned)
  uint64_t head = 0;    // where the wanted range starts inside the read
};
// The aligned range that covers [offset, offset + bytes).
AlignedRange aligned_range(uint64_t offset, uint64_t bytes);

class StorageReader {
 public:
  // `direct`: ask for O_DIRECT (false: plain preads, for comparisons and tests).
  explicit StorageReader(bool direct = true) : want_direct_(direct) {}
  ~StorageReader();
  StorageReader(const StorageReader&) = delete;
  StorageReader& operator=(const StorageReader&) = delete;

  // Reads `bytes` at `offset` of `file` into `dst`. On the direct path all three must be
  // multiples of kStorageAlignment (dst as an address). Bytes past the file's end are not read:
  // `need` (≤ bytes) is how many must be, else an io error naming the file ("changed or
  // truncated while in use": the range was checked against the file's size when it was mapped).
  // Thread-safe.
  Status read_aligned(const MappedFile& file, uint64_t offset, uint64_t bytes, uint64_t need,
                      std::byte* dst);

  // Opens `file` for reads now (else at its first read), so that direct() speaks for it.
  Status prepare(const MappedFile& file);
  // Whether every file opened so far was opened with O_DIRECT (true before the first read when
  // asked for).
  bool direct() const;
  // Why a file was read without O_DIRECT (empty when none was).
  std::string why_not_direct() const;

  // Tests: every O_DIRECT read fails as a file system that opens but refuses them would.
  bool refuse_direct_reads_for_tests = false;

 private:
  struct Handle {
    int fd = -1;
    bool owned = false;  // reopened here (closed with the reader)
    bool direct = false;
  };
  Result<Handle> handle(const MappedFile& file);
  // Switches `file` to plain preads on the mapping's descriptor (a refused O_DIRECT read).
  Handle buffered(const MappedFile& file, const char* why);

  bool want_direct_;
  mutable std::mutex mutex_;
  std::map<const MappedFile*, Handle> handles_;
  std::vector<int> retired_;  // O_DIRECT descriptors given up (closed with the reader)
  bool all_direct_ = true;
  std::string why_not_;
};

}  // namespace ferry
