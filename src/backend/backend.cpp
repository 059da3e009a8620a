#include "backend/backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

namespace ferry {

void DeviceMemoryKind::release(Backend* backend, void* data, size_t bytes) {
  backend->free(data, bytes);
}

void HostMemoryKind::release(Backend* backend, void* data, size_t bytes) {
  backend->free_host(data, bytes);
}

Result<HostBuffer> Backend::allocate_host(size_t bytes) {
  constexpr size_t kAlign = 256;
  if (bytes > SIZE_MAX - kAlign) {
    return make_error(ErrorCode::out_of_memory, "host: cannot allocate " + std::to_string(bytes));
  }
  const size_t rounded = std::max(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) {
    return make_error(ErrorCode::out_of_memory,
                      "host: cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return HostBuffer(this, p, bytes);
}

void Backend::free_host(void* data, size_t /*bytes*/) {
  std::free(data);
}

}  // namespace ferry
