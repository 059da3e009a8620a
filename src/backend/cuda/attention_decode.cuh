// Decode attention: the attention op when each kv head has at most 16 query rows (S·group <= 16:
// a decode step, a few draft tokens) and head_dim is 64 or 128. Flash-decoding on tensor cores:
// keys cut into fixed-size splits, one block per (split, kv head), a deterministic combine.
// attention_decode.cu explains the design.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

inline constexpr int kDecodeMaxRows = 16;     // query rows per kv head: one mma m-tile
inline constexpr int kDecodeSplitKeys = 128;  // keys per split that run_attention uses

// Whether the decode kernel runs this op: S·group <= 16, head_dim 64 or 128, no segments, and K/V
// rows that allow 16-byte loads (16-byte aligned pointers, row strides a multiple of 8).
bool attention_decode_fits(const Attention& op);

struct DeviceLimits;  // device_limits.cuh

// Whether a variant of the decode kernel with `split_keys` keys per split fits the dynamic shared
// memory `dev` allows (shared_bytes_allowed: the device's opt-in limit, FERRY_MAX_SHARED_BYTES).
// With 128 keys (what run_attention uses) every card from sm_80 does.
bool attention_decode_fits_device(const Attention& op, const DeviceLimits& dev,
                                  int split_keys = kDecodeSplitKeys);

// Dynamic shared memory of the variant the decode kernel runs for head_dim (64 or 128) and
// split_keys (64, 128, 256) within `allowed` bytes: the full layout when it fits, else the one
// with V copied over K after the scores (same bits), else 0 (none fits).
size_t attention_decode_smem_bytes(int head_dim, int split_keys, size_t allowed);

// Key splits for `keys` keys (all the spans' rows: the cache capacity, not the visible keys), at
// least 1. A pure function of the shape, so one graph serves every q_pos0_dev value.
int64_t attention_decode_splits(int64_t keys, int split_keys);

// Enqueues the op (which must fit, see above) with `split_keys` keys per split: 64, 128 or 256.
// run_attention uses kDecodeSplitKeys; the benchmark compares the others.
Status run_attention_decode(const OpContext& ctx, const Attention& op,
                            int split_keys = kDecodeSplitKeys);

}  // namespace ferry::cuda
