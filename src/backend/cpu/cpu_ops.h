// The CPU implementation of every op in backend/ops.h, callable directly on host memory: the CPU
// backend's streams call these, and so can a test harness that wants the reference result
// without a stream (e.g. the CUDA op harness).
//
// Each function runs synchronously on the calling thread, splitting its work over `pool` when
// one is given (nullptr = the calling thread only). The results are bit-identical for every
// pool size. The op must have passed validate() (ops.h); the functions check only what validate
// cannot see, i.e. index values (out-of-range row ids are returned as invalid_argument errors).
#pragma once

#include "backend/ops.h"
#include "core/status.h"

namespace ferry {
class ThreadPool;
}

namespace ferry::cpu {

Status linear(const Linear& op, ThreadPool* pool);
Status rms_norm(const RmsNorm& op, ThreadPool* pool);
Status layer_norm(const LayerNorm& op, ThreadPool* pool);
Status rope(const Rope& op, ThreadPool* pool);
Status rope_table(const RopeTable& op, ThreadPool* pool);
Status attention(const Attention& op, ThreadPool* pool);
Status swiglu(const SwiGlu& op, ThreadPool* pool);
Status add(const Add& op, ThreadPool* pool);
Status add_rows(const AddRows& op, ThreadPool* pool);
Status gather_rows(const GatherRows& op, ThreadPool* pool);
Status scatter_rows(const ScatterRows& op, ThreadPool* pool);
Status cast(const Cast& op, ThreadPool* pool);
Status copy(const Copy& op, ThreadPool* pool);
Status pos_embed_interp(const PosEmbedInterp& op, ThreadPool* pool);
Status argmax(const Argmax& op, ThreadPool* pool);

// Dispatches on the op's kind without validating it.
Status execute(const Op& op, ThreadPool* pool);
// validate(op), then execute(op, pool): the one-call reference for harnesses.
Status run_op(const Op& op, ThreadPool* pool = nullptr);

}  // namespace ferry::cpu
