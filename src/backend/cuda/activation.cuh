// The bf16 activation pass (activation.cu): y = bf16(act(y)) in place, bit for bit the double
// reference's result (activation_math.cuh says how). Host-includable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/op_context.h"

namespace ferry::cuda {

// Which implementation of a bf16-output activation a launcher runs: the backend always runs
// `fast`; the tests and benchmarks run both (same bits, different speed).
enum class ActImpl : uint8_t { fast, reference };

// y = bf16(act(y)) in place over a [rows, cols] bf16 view with row stride ys (elements).
// 16-byte accesses when the pointer, stride and width allow; `impl` picks the implementation.
Status launch_act_bf16(cudaStream_t stream, uint16_t* y, int64_t ys, int64_t rows, int64_t cols,
                       Activation act, ActImpl impl = ActImpl::fast);

}  // namespace ferry::cuda
