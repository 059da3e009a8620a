#include "model/kv_cache.h"

#include <string>

namespace ferry {

Result<KvCache> KvCache::create(Backend& backend, int64_t layers, int64_t capacity,
                                int64_t kv_dim) {
  if (layers <= 0 || capacity <= 0 || kv_dim <= 0) {
    return make_error(ErrorCode::invalid_argument,
                      "kv cache: layers, capacity and kv_dim must be positive (got " +
                          std::to_string(layers) + ", " + std::to_string(capacity) + ", " +
                          std::to_string(kv_dim) + ")");
  }
  const size_t bytes = 2u * static_cast<size_t>(layers) * static_cast<size_t>(capacity) *
                       static_cast<size_t>(kv_dim) * dtype_size(DType::bf16);
  FERRY_ASSIGN_OR_RETURN(DeviceBuffer buf, backend.allocate(bytes, "kv cache"));
  KvCache c;
  c.buffer_ = std::move(buf);
  c.layers_ = layers;
  c.capacity_ = capacity;
  c.kv_dim_ = kv_dim;
  return c;
}

TensorView KvCache::rows(int layer) const {
  FERRY_CHECK(layer >= 0 && layer < layers_, "kv cache: layer out of range");
  const size_t per = static_cast<size_t>(capacity_ * 2 * kv_dim_) * dtype_size(DType::bf16);
  return make_view(static_cast<char*>(buffer_.data()) + static_cast<size_t>(layer) * per,
                   DType::bf16, capacity_, 2 * kv_dim_);
}

TensorView KvCache::k(int layer) const {
  return rows(layer).slice_cols(0, kv_dim_);
}

TensorView KvCache::v(int layer) const {
  return rows(layer).slice_cols(kv_dim_, kv_dim_);
}

void KvCache::set_length(int64_t length) {
  FERRY_CHECK(length >= 0 && length <= capacity_, "kv cache: length out of range");
  length_ = length;
}

}  // namespace ferry
