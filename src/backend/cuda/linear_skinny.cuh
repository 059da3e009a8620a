// The linear op for a few rows of x (decode: M = 1; small batches; the action expert's M = 64):
// weight-streaming kernels that read w once from HBM with 16-byte loads and many loads in flight,
// where cuBLASLt reaches only 1.5-2.8 TB/s of the H200's ~4 TB/s at these shapes.
// linear_skinny.cu and linear_skinny64.cu explain the designs.
#pragma once

#include <cstddef>
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

// ---- 9 <= M <= 64 (linear_skinny64.cu: the action expert's M = 64) ---------------------------

inline constexpr int64_t kSkinny64MaxM = 64;

// unroll: 64-wide K steps per round (2 or 4). splits: 0 = linear_skinny64_splits(N, K) (what
// run_linear uses), else that many K splits (the benchmark's sweep).
struct Skinny64Config {
  int unroll = 2;
  int splits = 0;
};

// The unroll the kernel runs for M rows when `unroll` is asked for and `allowed` bytes of dynamic
// shared memory are allowed per block: `unroll` when its x stages fit, else 2 (same bits: each
// warp adds its steps in k order whatever the unroll), 0 when neither fits (M > 32 needs 48 KB).
int linear_skinny64_unroll(int64_t m, int unroll, size_t allowed);

// kSkinnyMaxM < M <= kSkinny64MaxM, and the same conditions on K and w as linear_skinny_fits.
bool linear_skinny64_fits(const Linear& op);

// K splits for N and K: enough blocks of 64 w rows to give every SM two, each split at least 8
// steps of 64, at most 16. A function of the shape only.
int linear_skinny64_splits(int64_t n, int64_t k);

// Enqueues the op, which must fit. Uses stream-ordered scratch for an f32 or unaligned x (rounded
// to contiguous bf16) and for the splits' fp32 partial sums.
Status run_linear_skinny64(const OpContext& ctx, const Linear& op, Skinny64Config config = {});

}  // namespace ferry::cuda
