// The text model's KV cache: per layer, rows [capacity, 2·kv_dim] bf16 in token order, each row a
// token's key then its value (kv_dim = kv_heads·head_dim), so that one row scatter stores both.
// Keys are stored after k_norm and RoPE (spec §1). One device buffer for all layers.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ferry {

class KvCache {
 public:
  static Result<KvCache> create(Backend& backend, int64_t layers, int64_t capacity, int64_t kv_dim);

  KvCache() = default;
  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;

  TensorView rows(int layer) const;  // [capacity, 2·kv_dim] bf16: key | value per token
  TensorView k(int layer) const;     // [capacity, kv_dim] bf16, row stride 2·kv_dim
  TensorView v(int layer) const;
  int64_t length() const { return length_; }
  void set_length(int64_t length);  // 0 <= length <= capacity
  int64_t capacity() const { return capacity_; }
  int64_t layers() const { return layers_; }
  int64_t kv_dim() const { return kv_dim_; }
  // The whole cache (every layer's k and v), for snapshots in tests.
  void* data() const { return buffer_.data(); }
  size_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
  int64_t layers_ = 0;
  int64_t capacity_ = 0;
  int64_t kv_dim_ = 0;
  int64_t length_ = 0;
};

}  // namespace ferry
