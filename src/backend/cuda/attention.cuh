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

// The tensor-core kernels (attention_mma*.cu). They compute the same thing in the same rounding
// sequence (same bits when the launch cuts keys into the same splits); they differ in how work is
// laid out: legacy = 4 warps x 16 rows, the next K/V tile staged in registers; async_* = K/V tiles
// double-buffered in shared memory by cp.async, with w4 = 4 warps x 16 rows, w8 = 8 warps x 16
// rows, w4m2 = 4 warps x 32 rows (head_dim <= 80; w4 for head_dim 128).
enum class MmaVariant : int { legacy, async_w4, async_w8, async_w4m2 };
inline constexpr MmaVariant kMmaVariants[] = {MmaVariant::legacy, MmaVariant::async_w4,
                                              MmaVariant::async_w8, MmaVariant::async_w4m2};
const char* mma_variant_name(MmaVariant v);

// The variant run_attention uses: kDefaultMmaVariant unless set otherwise. Process-wide and meant
// for tests and benchmarks that check and time the variants against each other in one process;
// set it only while no attention op is being enqueued.
// legacy: the cp.async variants were 1.5-2x faster on the H200 but failed 25 harness cases there
// (wrong values, up to 2.5 absolute, on fused/strided q|k|v, segments and partial tiles), so they
// stay opt-in until they pass (docs/benchmarks.md).
inline constexpr MmaVariant kDefaultMmaVariant = MmaVariant::legacy;
void set_attention_mma_variant(MmaVariant v);
MmaVariant attention_mma_variant();

}  // namespace ferry::cuda
