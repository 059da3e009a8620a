// Device memory that components take turns in: the vision tower's working buffers during the
// vision stage, then the text decoder's activations during prefill and decode. Their lifetimes
// never overlap (one stream orders the last vision op before the first text op, in every run),
// so one region as large as the larger of the two serves both, and a budget holds one of them,
// not their sum. Each component carves its buffers from the start of the region; carved buffers
// are views, owned by the region.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/backend.h"
#include "core/status.h"

namespace ferry {

class SharedRegion {
 public:
  SharedRegion() = default;
  static Result<SharedRegion> allocate(Backend& backend, uint64_t bytes, std::string_view purpose);

  // Views of the region for one component, from offset 0, 256-byte aligned.
  class Carver {
   public:
    explicit Carver(const SharedRegion& region, uint64_t from = 0)
        : region_(region), offset_(from) {}
    // A view of `bytes` (at least one alignment unit), or an internal error when the region is
    // smaller than what its users said they need.
    Result<DeviceBuffer> take(uint64_t bytes);

   private:
    const SharedRegion& region_;
    uint64_t offset_;
  };
  // From offset `from` (a multiple of 256; 0: the start).
  Carver carver(uint64_t from = 0) const { return Carver(*this, from); }
  uint64_t bytes() const { return buffer_.bytes(); }
  void* data() const { return buffer_.data(); }

  // The bytes a carver takes for a buffer of `bytes` (what users add up to size the region).
  static uint64_t carved_bytes(uint64_t bytes);

 private:
  DeviceBuffer buffer_;
};

}  // namespace ferry
