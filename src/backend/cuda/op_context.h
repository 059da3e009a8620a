// What an op launcher needs besides its arguments: the stream, cuBLASLt and its workspace.
// CUDA-only header.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "backend/ops.h"
#include "core/status.h"

namespace ferry::cuda {

class LinearAlgoCache;  // linear.cuh

struct OpContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace owned by the stream
  size_t workspace_bytes = 0;
  LinearAlgoCache* algo_cache = nullptr;
};

// CUDA-specific limits on top of ferry::validate (e.g. attention head_dim <= 128).
Status check_cuda_limits(const Op& op);

// Enqueues a validated op on ctx.stream.
Status run_cuda_op(const OpContext& ctx, const Op& op);

}  // namespace ferry::cuda
