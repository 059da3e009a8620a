// Elementwise ops: swiglu, add, add_rows, cast. Launchers take pointers, strides and a stream;
// op entries take the validated op.
#pragma once

#include "backend/cuda/activation.cuh"
#include "backend/cuda/op_context.h"

namespace ferry::cuda {

// `impl`: the fast silu (always in the backend) or the double reference (tests, benchmarks); both
// give the same bits.
Status run_swiglu(const OpContext& ctx, const SwiGlu& op, ActImpl impl = ActImpl::fast);
Status run_add(const OpContext& ctx, const Add& op);
Status run_add_rows(const OpContext& ctx, const AddRows& op);
Status run_cast(const OpContext& ctx, const Cast& op);

}  // namespace ferry::cuda
