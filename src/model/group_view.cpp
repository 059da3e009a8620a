#include "model/group_view.h"

#include <limits>
#include <string>

namespace ferry {

Result<TensorView> group_tensor(const WeightGroup& group, void* base, std::string_view name,
                                int64_t rows, int64_t cols, DType dtype) {
  if (group.find(name) == nullptr) {
    return make_error(ErrorCode::format,
                      "group " + group.name + ": missing tensor " + std::string(name));
  }
  const TensorView v = group.view(base, name);
  if (v.rows != rows || v.cols != cols || v.dtype != dtype) {
    return make_error(ErrorCode::format,
                      "group " + group.name + ": tensor " + std::string(name) + ": expected " +
                          std::string(dtype_name(dtype)) + " [" + std::to_string(rows) + ", " +
                          std::to_string(cols) + "], got " + std::string(dtype_name(v.dtype)) +
                          " [" + std::to_string(v.rows) + ", " + std::to_string(v.cols) + "]");
  }
  return v;
}

bool group_has(const WeightGroup& group, std::string_view name) {
  return group.find(name) != nullptr;
}

Result<DeviceBuffer> allocate_matrix(Backend& backend, int64_t rows, int64_t cols, DType dtype,
                                     std::string_view purpose) {
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  if (rows < 0 || cols < 0 || (cols > 0 && rows > std::numeric_limits<int64_t>::max() / cols) ||
      (rows * cols > 0 && rows * cols > std::numeric_limits<int64_t>::max() / elem)) {
    return make_error(ErrorCode::invalid_argument, "activation of " + std::to_string(rows) + " x " +
                                                       std::to_string(cols) +
                                                       " elements is too large");
  }
  const auto bytes = static_cast<size_t>(rows * cols * elem);
  return backend.allocate(bytes > 0 ? bytes : 256, purpose);
}

}  // namespace ferry
