// What an op launcher needs besides its arguments: the stream, cuBLASLt and its workspace.
// CUDA-only header.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/cuda_resources.h"
#include "backend/ops.h"
#include "core/status.h"

namespace ferry::cuda {

class LinearAlgoCache;  // linear.cuh
struct DeviceLimits;    // device_limits.cuh

struct OpContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace owned by the stream
  size_t workspace_bytes = 0;
  LinearAlgoCache* algo_cache = nullptr;
  ScratchStack* scratch = nullptr;  // the stream's op scratch (null: the default memory pool)
  // The device the stream runs on (null: the calling thread's current device, looked up).
  const DeviceLimits* limits = nullptr;
};

// `bytes` of scratch for the op being enqueued on ctx.stream, released in stream order.
inline Result<StreamScratch> take_scratch(const OpContext& ctx, size_t bytes) {
  if (ctx.scratch != nullptr) return StreamScratch::from_stack(*ctx.scratch, bytes);
  return StreamScratch::allocate(bytes, ctx.stream);
}

// CUDA-specific limits on top of ferry::validate (e.g. attention head_dim <= 128).
Status check_cuda_limits(const Op& op);

// Enqueues a validated op on ctx.stream.
Status run_cuda_op(const OpContext& ctx, const Op& op);

}  // namespace ferry::cuda
