// Internal to the attention op: the kernel parameters shared by the CUDA-core kernel
// (attention.cu) and the tensor-core kernels (attention_mma.cu, attention_mma_async.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/attention.cuh"
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
  // Segments (Attention::segments): null, or [num_segments + 1] row offsets in device memory.
  // Block x = segment · seg_row_blocks + row block within the segment; one split.
  const int32_t* segments;
  int64_t segments_stride;  // elements between offsets
  int64_t seg_row_blocks;
  int64_t max_segment_rows;
};

// Query 0's causal position: the device value when the op has one (read when the kernel runs, so
// one captured graph serves every decode step; negative values clamp to 0, the CPU backend
// reports them as an error), else the host value.
__device__ __forceinline__ int64_t attn_q_pos0(const AttnParams& p) {
  if (p.q_pos0_dev == nullptr) return p.q_pos0;
  const int32_t v = *p.q_pos0_dev;
  return v < 0 ? 0 : int64_t{v};
}

// The rows (query · group + head-of-group) and keys of one block: rows [row0, row_end) of which
// it owns [row0, row0 + rows_per_block), keys [key_begin, key_end). Without segments: row block
// blockIdx.x of all S·group rows, key split blockIdx.z. With segments: row block
// blockIdx.x % seg_row_blocks of segment blockIdx.x / seg_row_blocks, keys of that segment only.
// The offsets are read from device memory when the kernel runs, so they are clamped (into
// [0, S], end >= start, at most max_segment_rows rows): bad offsets give unspecified rows but
// never an access out of bounds. A block with row0 >= row_end has nothing to do.
struct BlockRange {
  int64_t row0, row_end, key_begin, key_end;
};
#ifdef __CUDACC__  // the host-only tests include this header too
__device__ __forceinline__ BlockRange attention_block_range(const AttnParams& p,
                                                            int rows_per_block) {
  BlockRange r;
  if (p.segments == nullptr) {
    r.row0 = int64_t{blockIdx.x} * rows_per_block;
    r.row_end = p.seq * p.group;
    r.key_begin = int64_t{blockIdx.z} * p.keys_per_split;
    r.key_end = r.key_begin + p.keys_per_split < p.keys ? r.key_begin + p.keys_per_split : p.keys;
    return r;
  }
  const int64_t seg = int64_t{blockIdx.x} / p.seg_row_blocks;
  const int64_t rb = int64_t{blockIdx.x} - seg * p.seg_row_blocks;
  int64_t s0 = p.segments[seg * p.segments_stride];
  int64_t s1 = p.segments[(seg + 1) * p.segments_stride];
  s0 = s0 < 0 ? 0 : (s0 > p.seq ? p.seq : s0);
  s1 = s1 < s0 ? s0 : (s1 > p.seq ? p.seq : s1);
  if (s1 - s0 > p.max_segment_rows) s1 = s0 + p.max_segment_rows;
  r.row0 = s0 * p.group + rb * rows_per_block;
  r.row_end = s1 * p.group;
  r.key_begin = s0;
  r.key_end = s1;
  return r;
}
#endif

// Rows (query, head-of-group pairs) per block of the tensor-core kernel in attention_mma.cu; half
// of it is the fewest rows the tensor cores are used for.
inline constexpr int kMmaRows = 64;

// Rows per block of a tensor-core variant (MmaVariant, attention.cuh) for a padded head_dim.
inline int mma_rows_per_block(MmaVariant v, int padded_dim) {
  if (v == MmaVariant::async_w8) return 2 * kMmaRows;
  if (v == MmaVariant::async_w4m2 && padded_dim <= 80) return 2 * kMmaRows;
  return kMmaRows;
}

// Tensor-core kernels for head_dim padded to `padded_dim` (64, 80 or 128); grid as the CUDA-core
// kernel's (x: row blocks of mma_rows_per_block rows, y: kv heads, z: key splits).
// attention_mma.cu (MmaVariant::legacy):
void launch_attention_mma(const AttnParams& p, int padded_dim, dim3 grid, cudaStream_t stream);
// attention_mma_async.cu (every other variant):
void launch_attention_mma_async(const AttnParams& p, int padded_dim, MmaVariant variant, dim3 grid,
                                cudaStream_t stream);

// The padded head_dim the tensor-core kernel handles head_dim with, or 0 when it does not.
inline int mma_padded_dim(int head_dim) {
  if (head_dim % 8 != 0) return 0;
  if (head_dim == 64) return 64;
  if (head_dim == 72 || head_dim == 80) return 80;
  if (head_dim == 128) return 128;
  return 0;
}

}  // namespace ferry::cuda
