// argmax over each row (greedy sampling on the device).
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

Status run_argmax(const OpContext& ctx, const Argmax& op);

}  // namespace ferry::cuda
