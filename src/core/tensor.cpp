#include "core/tensor.h"

#include <string>

#include "core/status.h"

namespace ferry {

TensorView TensorView::slice_rows(int64_t first, int64_t count) const {
  FERRY_CHECK(first >= 0 && count >= 0 && first + count <= rows,
              "slice_rows out of range: " + std::to_string(first) + "+" + std::to_string(count) +
                  " of " + std::to_string(rows));
  TensorView v = *this;
  v.data = static_cast<char*>(data) + static_cast<size_t>(first * stride()) * dtype_size(dtype);
  v.rows = count;
  v.row_stride = stride();
  return v;
}

TensorView TensorView::slice_cols(int64_t first, int64_t count) const {
  FERRY_CHECK(first >= 0 && count >= 0 && first + count <= cols, "slice_cols out of range");
  TensorView v = *this;
  v.data = static_cast<char*>(data) + static_cast<size_t>(first) * dtype_size(dtype);
  v.cols = count;
  v.row_stride = stride();
  return v;
}

TensorView TensorView::reshaped(int64_t new_rows, int64_t new_cols) const {
  FERRY_CHECK(stride() == cols, "reshaped needs a contiguous view");
  FERRY_CHECK(new_rows * new_cols == rows * cols, "reshaped changes the element count");
  return TensorView{data, dtype, new_rows, new_cols, 0};
}

}  // namespace ferry
