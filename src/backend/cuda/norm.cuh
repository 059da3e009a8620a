// Normalization ops: rms_norm (plain and per-head), layer_norm.
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

Status run_rms_norm(const OpContext& ctx, const RmsNorm& op);
Status run_layer_norm(const OpContext& ctx, const LayerNorm& op);

}  // namespace ferry::cuda
