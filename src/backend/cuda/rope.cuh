// Rotary ops: rope (in place, half-split) and rope_table (M-RoPE cos/sin from positions).
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

Status run_rope(const OpContext& ctx, const Rope& op);
Status run_rope_table(const OpContext& ctx, const RopeTable& op);

}  // namespace ferry::cuda
