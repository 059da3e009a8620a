// Normalization ops: rms_norm (plain and per-head), layer_norm.
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

// Which kernel family: `best` (the backend: register-resident rows where the layout allows) or
// `legacy` (one block per chunk, the earlier kernels; kept for the benchmarks).
enum class NormKernel : uint8_t { best, legacy };

Status run_rms_norm(const OpContext& ctx, const RmsNorm& op, NormKernel kernel = NormKernel::best);
Status run_layer_norm(const OpContext& ctx, const LayerNorm& op,
                      NormKernel kernel = NormKernel::best);

}  // namespace ferry::cuda
