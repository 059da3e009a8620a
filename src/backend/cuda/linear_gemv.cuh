// The batch-1 decode GEMV (Linear with M = 1) on CUDA cores, in the summation order of
// backend/gemv_order.h, so that its dot products are bit for bit those of the CPU backend and of
// the host engine. run_linear sends every M = 1 op here (linear_gemv.cu explains the design).
#pragma once

#include <cstdint>

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

// Launch shape: w rows per warp (they share each load of x) and 16-byte chunks per lane and row
// loaded before the first is multiplied. Both change only the speed, never the bits. Supported:
// {1, 4}, {1, 8}, {2, 2}, {2, 4}, {4, 2}; {0, 0} is run_linear's choice for the shape
// (linear_gemv_config).
struct GemvConfig {
  int rows = 0;
  int unroll = 0;
};

// The config run_linear uses for N rows of w (a function of the shape only).
GemvConfig linear_gemv_config(int64_t n);

// Whether the kernel runs the op: M = 1, K in [1, 2^31), any strides and alignments (16-byte
// loads where x and w allow them, element loads elsewhere).
bool linear_gemv_fits(const Linear& op);

// Enqueues the op, which must fit.
Status run_linear_gemv(const OpContext& ctx, const Linear& op, GemvConfig config = {});

}  // namespace ferry::cuda
