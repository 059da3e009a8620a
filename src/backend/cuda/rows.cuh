// Row movement ops: gather_rows, scatter_rows, copy (2-D strided), pos_embed_interp.
#pragma once

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

Status run_gather_rows(const OpContext& ctx, const GatherRows& op);
Status run_scatter_rows(const OpContext& ctx, const ScatterRows& op);
Status run_copy(const OpContext& ctx, const Copy& op);
Status run_pos_embed_interp(const OpContext& ctx, const PosEmbedInterp& op);

}  // namespace ferry::cuda
