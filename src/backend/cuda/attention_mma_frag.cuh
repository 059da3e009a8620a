// Internal to the tensor-core attention kernels (attention_mma*.cu): mma.sync, ldmatrix and
// cp.async wrappers and the bf16 packing they share. Fragment layouts are described in
// attention_mma.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/common.cuh"

namespace ferry::cuda::mma {

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack(bf16_t lo, bf16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Four 8×8 bf16 matrices from shared memory (lane i gives the address of row i % 8 of matrix
// i / 8); .trans delivers each transposed.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* p) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16_t* p) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// {bf16(lo), bf16(hi)} packed with lo in the low half, round to nearest even (one cvt).
__device__ __forceinline__ uint32_t cvt_bf16x2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
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

// 16 bytes global -> shared without passing through registers (cp.async.cg: cached in L2 only).
// With `valid` false nothing is read and the 16 bytes are zero-filled (src-size 0).
__device__ __forceinline__ void cp_async16(bf16_t* smem, const bf16_t* gmem, bool valid) {
  const auto s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

}  // namespace ferry::cuda::mma
