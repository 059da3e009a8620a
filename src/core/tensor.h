// A non-owning 2-D view: the one tensor shape every op takes.
//
// Rows are `row_stride` elements apart (row_stride >= cols), so a view can pick columns out of a
// wider matrix, e.g. q, k and v out of one fused [S, 3*H*D] projection. Heads live inside a row
// (cols = heads * head_dim); ops that care about heads take head counts as parameters.
// `data` is a device pointer of whichever backend the op runs on (host memory for the CPU backend).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ferry {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::bf16;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements; 0 means cols (contiguous)

  int64_t stride() const { return row_stride != 0 ? row_stride : cols; }
  bool empty() const { return data == nullptr; }
  int64_t numel() const { return rows * cols; }

  // Rows [first, first + count) of this view.
  TensorView slice_rows(int64_t first, int64_t count) const;
  // Columns [first, first + count) of this view (same rows, same stride).
  TensorView slice_cols(int64_t first, int64_t count) const;
  // Reinterpret a contiguous view as rows x cols (rows * cols must equal numel()).
  TensorView reshaped(int64_t rows, int64_t cols) const;
};

inline TensorView make_view(void* data, DType dtype, int64_t rows, int64_t cols,
                            int64_t row_stride = 0) {
  return TensorView{data, dtype, rows, cols, row_stride};
}

}  // namespace ferry
