#include "backend/backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

namespace ferry {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->free(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::exchange(o.owner_, nullptr);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void HostBuffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->free_host(data_, bytes_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
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
