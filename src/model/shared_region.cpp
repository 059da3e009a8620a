#include "model/shared_region.h"

#include <algorithm>
#include <string>

namespace ferry {

namespace {
constexpr uint64_t kAlign = 256;
}

uint64_t SharedRegion::carved_bytes(uint64_t bytes) {
  return std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
}

Result<SharedRegion> SharedRegion::allocate(Backend& backend, uint64_t bytes,
                                            std::string_view purpose) {
  SharedRegion r;
  FERRY_ASSIGN_OR_RETURN(r.buffer_, backend.allocate(carved_bytes(bytes), purpose));
  return r;
}

Result<DeviceBuffer> SharedRegion::Carver::take(uint64_t bytes) {
  const uint64_t need = carved_bytes(bytes);
  if (offset_ + need > region_.bytes()) {
    return make_error(ErrorCode::internal, "shared region: " + std::to_string(need) + " bytes at " +
                                               std::to_string(offset_) + " do not fit its " +
                                               std::to_string(region_.bytes()));
  }
  void* p = static_cast<char*>(region_.buffer_.data()) + offset_;
  offset_ += need;
  return DeviceBuffer(nullptr, p, static_cast<size_t>(bytes));  // a view: no owner frees it
}

}  // namespace ferry
