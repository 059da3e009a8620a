#include "exec/mapped_upload.h"

#include <algorithm>

#include "format/fault_guard.h"

namespace ferry {

Result<MappedUpload> MappedUpload::create(Backend& backend, Stream& stream, size_t slot_bytes) {
  MappedUpload u;
  u.backend_ = &backend;
  u.stream_ = &stream;
  for (size_t i = 0; i < 2; ++i) {
    FERRY_ASSIGN_OR_RETURN(u.slots_[i], backend.allocate_host(std::max<size_t>(slot_bytes, 1)));
    u.done_[i] = backend.create_event();
  }
  return u;
}

MappedUpload::~MappedUpload() {
  (void)finish();
}

Status MappedUpload::copy(void* dst, std::span<const std::byte> src, const MappedFile& file) {
  auto* out = static_cast<std::byte*>(dst);
  for (size_t off = 0; off < src.size();) {
    const size_t slot = next_;
    next_ ^= 1;
    if (in_flight_[slot]) {
      in_flight_[slot] = false;
      FERRY_RETURN_IF_ERROR(backend_->synchronize(*done_[slot]));
    }
    const size_t n = std::min(slots_[slot].bytes(), src.size() - off);
    FERRY_RETURN_IF_ERROR(guarded_copy(slots_[slot].data(), src.data() + off, n, file));
    backend_->copy_to_device(*stream_, out + off, slots_[slot].data(), n);
    backend_->record(*done_[slot], *stream_);
    in_flight_[slot] = true;
    off += n;
  }
  return {};
}

Status MappedUpload::finish() {
  Status first;
  for (size_t i = 0; i < 2; ++i) {
    if (!in_flight_[i] || !done_[i]) continue;  // (none in a moved-from object)
    in_flight_[i] = false;
    Status s = backend_->synchronize(*done_[i]);
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace ferry
