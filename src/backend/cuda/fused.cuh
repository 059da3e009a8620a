// The fused ops (ops.h AddRmsNorm, QkNormRope) on CUDA: one kernel each where the shapes allow
// it, the op's sequence of plain ops otherwise.
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

Status run_add_rms_norm(const OpContext& ctx, const AddRmsNorm& op);
Status run_qk_norm_rope(const OpContext& ctx, const QkNormRope& op);

}  // namespace ferry::cuda
