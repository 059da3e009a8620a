// Internal to the tensor-core attention kernels (attention_mma*.cu): the bf16 packing and the
// PTX wrappers (from mma_ptx.cuh) they share. Fragment layouts are described in
// attention_mma.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace ferry::cuda::mma {

// mma.sync, ldmatrix and cvt come from mma_ptx.cuh (shared with the decode kernel).
using ptx::cvt_bf16x2;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_bf16;

__device__ __forceinline__ uint32_t pack(bf16_t lo, bf16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Two consecutive bf16 of a query row as one A register (zeros past head_dim or past the rows).
__device__ __forceinline__ uint32_t q_pair(const bf16_t* row, int d, int head_dim) {
  if (row == nullptr || d >= head_dim) return 0u;
  return pack(row[d], row[d + 1]);
}

// 2^x in one MUFU op. exp2f is the same op wrapped in a rescale (two FMUL and a test) that only
// matters when 2^x is subnormal (x < −126); here such a result is flushed to 0 instead, which
// changes no bf16 output: it is a softmax weight under 2^−126 next to a largest weight of 1.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global -> shared (cp.async.cg, L2 only); with `valid` false the 16 bytes are
// zero-filled and nothing is read.
__device__ __forceinline__ void cp_async16(bf16_t* smem, const bf16_t* gmem, bool valid) {
  ptx::cp_async_16(smem, gmem, valid);
}
using ptx::cp_async_commit;
__device__ __forceinline__ void cp_async_wait_all() {
  ptx::cp_async_wait<0>();
}

}  // namespace ferry::cuda::mma
