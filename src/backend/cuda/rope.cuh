// Rotary ops: rope (in place, half-split) and rope_table (M-RoPE cos/sin from positions).
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

// `best` (the backend: 8 or 4 elements per thread where the layout allows) or `legacy` (one
// element pair per thread, the earlier kernel; kept for the benchmarks). Same bits.
enum class RopeKernel : uint8_t { best, legacy };

Status run_rope(const OpContext& ctx, const Rope& op, RopeKernel kernel = RopeKernel::best);
Status run_rope_table(const OpContext& ctx, const RopeTable& op);

}  // namespace ferry::cuda
