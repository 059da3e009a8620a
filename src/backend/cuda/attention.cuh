// attention: flash-style scaled-dot-product attention with GQA, optional causal mask (q_pos0),
// up to two KV spans, head_dim <= 128, and a split-KV (flash-decoding) path when the
// query x head grid alone would leave most of the GPU idle.
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

inline constexpr int kAttentionMaxHeadDim = 128;

// How many key splits the attention op uses for a shape: a pure function of the shape (never of
// timing or device state), so one shape always reduces in one order.
int attention_splits(int64_t q_rows, int num_heads, int num_kv_heads, int64_t keys,
                     int rows_per_block);

Status run_attention(const OpContext& ctx, const Attention& op);

}  // namespace ferry::cuda
