// Checked access to a weight group's tensors and activation allocation, shared by the vision
// encoder and the action expert.
#pragma once

#include <cstdint>
#include <string_view>

#include "backend/backend.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/weights.h"

namespace ferry {

// The [rows, cols] view of `name` in `group` at `base`, or a format error naming the group, the
// tensor and both shapes.
Result<TensorView> group_tensor(const WeightGroup& group, void* base, std::string_view name,
                                int64_t rows, int64_t cols, DType dtype = DType::bf16);
// True when the group holds `name` (optional tensors such as biases).
bool group_has(const WeightGroup& group, std::string_view name);

// A device buffer for rows × cols elements of `dtype` (at least one alignment unit), with an
// overflow check on the size.
Result<DeviceBuffer> allocate_matrix(Backend& backend, int64_t rows, int64_t cols, DType dtype,
                                     std::string_view purpose);

// The whole buffer as a contiguous [rows, cols] view.
inline TensorView buffer_view(const DeviceBuffer& buffer, DType dtype, int64_t rows, int64_t cols) {
  return make_view(buffer.data(), dtype, rows, cols);
}

}  // namespace ferry
