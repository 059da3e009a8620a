// Copies bytes of a mapped checkpoint to the device through page-locked bounce buffers, each
// filled from the mapping by guarded_copy (format/fault_guard.h): a checkpoint truncated under a
// load is an error naming the file, never a SIGBUS. Two buffers alternate, so the host fills one
// while the copy engine drains the other. On CUDA this is also faster than copying from the
// pageable mapping directly.
//
// The streaming executor's host threads filling their own bounce buffers should use
// guarded_copy the same way; check_unchanged() on the file after the copies catches a rewrite
// that kept the size (no fault happens then).
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>

#include "backend/backend.h"
#include "core/status.h"
#include "format/mapped_file.h"

namespace ferry {

class MappedUpload {
 public:
  // Two bounce buffers of `slot_bytes` each (a copy larger than that goes in pieces).
  static Result<MappedUpload> create(Backend& backend, Stream& stream, size_t slot_bytes);

  MappedUpload() = default;
  MappedUpload(MappedUpload&&) noexcept = default;
  MappedUpload& operator=(MappedUpload&&) noexcept = default;
  MappedUpload(const MappedUpload&) = delete;
  MappedUpload& operator=(const MappedUpload&) = delete;
  ~MappedUpload();  // waits for copies still reading the buffers

  // Enqueues device `dst` <- `src` (bytes of `file`'s mapping) on the stream.
  Status copy(void* dst, std::span<const std::byte> src, const MappedFile& file);
  // Waits until every copy has completed.
  Status finish();

 private:
  Backend* backend_ = nullptr;
  Stream* stream_ = nullptr;
  std::array<HostBuffer, 2> slots_;
  std::array<std::unique_ptr<Event>, 2> done_;
  std::array<bool, 2> in_flight_{};
  size_t next_ = 0;
};

}  // namespace ferry
