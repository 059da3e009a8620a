// The linear op for a few rows of x (decode: M = 1; small batches): a weight-streaming kernel that
// reads w once from HBM with 16-byte loads and many loads in flight, where cuBLASLt reaches only
// 1.7-2.8 TB/s of the H200's ~4 TB/s at N <= 12288. linear_skinny.cu explains the design.
#pragma once

#include <cstdint>

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

inline constexpr int64_t kSkinnyMaxM = 8;  // rows of x: one mma n-tile

// Launch shape of the skinny kernel: warps per block (they split K) and 64-wide K steps per warp
// loaded before the first is multiplied. run_linear uses the default; the benchmark sweeps the
// others. Supported: {8, 2} (default), {8, 1}, {8, 4}, {4, 2}, {4, 4}.
struct SkinnyConfig {
  int warps = 8;
  int unroll = 2;
};

// Whether run_linear takes the skinny kernel: M <= kSkinnyMaxM, K a multiple of 8, and w rows that
// allow 16-byte loads (16-byte aligned pointer, row stride a multiple of 8). A function of the
// shape and of w's placement only (x and y may have any alignment and row stride).
bool linear_skinny_fits(const Linear& op);

// Enqueues the op, which must fit (see above).
Status run_linear_skinny(const OpContext& ctx, const Linear& op, SkinnyConfig config = {});

}  // namespace ferry::cuda
