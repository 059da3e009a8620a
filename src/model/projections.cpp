#include "model/projections.h"

#include "backend/ops.h"

namespace ferry {

TensorView adjacent_rows(std::initializer_list<TensorView> weights) {
  if (weights.size() == 0) return {};
  const TensorView& first = *weights.begin();
  int64_t rows = 0;
  const char* next = static_cast<const char*>(first.data);
  for (const TensorView& w : weights) {
    const bool contiguous = w.row_stride == 0 || w.row_stride == w.cols;
    if (w.data == nullptr || !contiguous || w.cols != first.cols || w.dtype != first.dtype ||
        static_cast<const char*>(w.data) != next) {
      return {};
    }
    next += static_cast<size_t>(w.rows * w.cols) * dtype_size(w.dtype);
    rows += w.rows;
  }
  return make_view(first.data, first.dtype, rows, first.cols);
}

Status run_projections(Backend& backend, Stream& stream, const TensorView& x,
                       std::initializer_list<TensorView> weights, const TensorView& y) {
  const TensorView fused = adjacent_rows(weights);
  if (!fused.empty()) return backend.run(stream, Linear{x, fused, {}, y});
  int64_t col = 0;
  for (const TensorView& w : weights) {
    if (col + w.rows > y.cols) {
      return make_error(ErrorCode::internal, "projections: output narrower than the weights");
    }
    FERRY_RETURN_IF_ERROR(backend.run(stream, Linear{x, w, {}, y.slice_cols(col, w.rows)}));
    col += w.rows;
  }
  return Status();
}

}  // namespace ferry
