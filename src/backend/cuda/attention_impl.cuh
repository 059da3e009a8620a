// Internal to the attention op: the kernel parameters shared by the CUDA-core kernel
// (attention.cu) and the tensor-core kernel (attention_mma.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.cuh"

namespace ferry::cuda {

struct AttnParams {
  const bf16_t* q;
  int64_t q_stride;
  const bf16_t* k[2];
  const bf16_t* v[2];
  int64_t k_stride[2];
  int64_t v_stride[2];
  int64_t span0;  // rows of span 0; key index >= span0 lives in span 1
  int64_t seq;    // S
  int64_t keys;   // total keys
  bf16_t* out;
  int64_t out_stride;
  int heads;
  int group;  // heads / kv_heads
  int head_dim;
  float scale_log2;  // scale · log2(e): scores are kept in base 2, p = 2^(s − m)
  bool causal;
  int64_t q_pos0;
  const int32_t* q_pos0_dev;  // when set, q_pos0 is read from here as the kernel runs
  int64_t keys_per_split;
  float* part_acc;  // [splits][seq*heads][head_dim], null when one split
  float* part_ml;   // [splits][seq*heads][2]: running max m (base 2) and sum l
};

// Query 0's causal position: the device value when the op has one (read when the kernel runs, so
// one captured graph serves every decode step; negative values clamp to 0, the CPU backend
// reports them as an error), else the host value.
__device__ __forceinline__ int64_t attn_q_pos0(const AttnParams& p) {
  if (p.q_pos0_dev == nullptr) return p.q_pos0;
  const int32_t v = *p.q_pos0_dev;
  return v < 0 ? 0 : int64_t{v};
}

// Rows (query, head-of-group pairs) per block of the tensor-core kernel.
inline constexpr int kMmaRows = 64;

// Tensor-core kernel for head_dim padded to `padded_dim` (64, 80 or 128); grid as the CUDA-core
// kernel's (x: row blocks of kMmaRows, y: kv heads, z: key splits).
void launch_attention_mma(const AttnParams& p, int padded_dim, dim3 grid, cudaStream_t stream);

// The padded head_dim the tensor-core kernel handles head_dim with, or 0 when it does not.
inline int mma_padded_dim(int head_dim) {
  if (head_dim % 8 != 0) return 0;
  if (head_dim == 64) return 64;
  if (head_dim == 72 || head_dim == 80) return 80;
  if (head_dim == 128) return 128;
  return 0;
}

}  // namespace ferry::cuda
