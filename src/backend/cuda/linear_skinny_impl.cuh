// Device helpers shared by the skinny linear kernels (linear_skinny.cu, linear_skinny64.cu):
// predicated 16-byte loads, the mma on fragments loaded straight from row-major w and x, and the
// output rounding. CUDA-only header; the k permutation is explained in linear_skinny.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/activation_math.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace ferry::cuda::skinny {

inline constexpr int kStepK = 64;  // k per warp step: two 16-byte chunks per lane and row

// 16 bytes at p when `pred`, zeros otherwise. The predicate lives inside the asm so that a round
// of loads is straight-line code; with that and a register budget that holds the whole round
// (the kernels' __launch_bounds__), ptxas issues the round's loads before its first mma. Without
// the budget it interleaved each load with the mma that uses it, ~3 loads per warp in flight.
// w goes through the read-only path without allocating in L1 (streamed, used once); x (kL1) is
// cached: every block reads it.
template <bool kL1>
__device__ __forceinline__ uint4 load16(const void* p, bool pred) {
  uint4 r;
  if constexpr (kL1) {
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
        " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
        " @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "r"(static_cast<int>(pred)));
  } else {
    asm("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n"
        " mov.b32 %0, 0;\n mov.b32 %1, 0;\n mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
        " @p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "r"(static_cast<int>(pred)));
  }
  return r;
}

// Eight consecutive x values from p as four bf16x2 registers (lower k in the low half), zeros when
// !pred. kVec: p is 16-byte aligned; otherwise element loads (x views with odd strides or
// offsets: rare, so their branches are not worth avoiding).
template <bool kVec>
__device__ __forceinline__ uint4 load_x8(const bf16_t* p, bool pred) {
  if constexpr (kVec) {
    return load16<true>(p, pred);
  } else {
    uint32_t r[4] = {0, 0, 0, 0};
    if (pred) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        r[e] = uint32_t{__ldg(p + 2 * e)} | (uint32_t{__ldg(p + 2 * e + 1)} << 16);
      }
    }
    return make_uint4(r[0], r[1], r[2], r[3]);
  }
}
template <bool kVec>
__device__ __forceinline__ uint4 load_x8(const float* p, bool pred) {
  float v[8];
  if constexpr (kVec) {
    const uint4 a = load16<true>(p, pred);
    const uint4 b = load16<true>(p + 4, pred);
    v[0] = __uint_as_float(a.x), v[1] = __uint_as_float(a.y);
    v[2] = __uint_as_float(a.z), v[3] = __uint_as_float(a.w);
    v[4] = __uint_as_float(b.x), v[5] = __uint_as_float(b.y);
    v[6] = __uint_as_float(b.z), v[7] = __uint_as_float(b.w);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = pred ? __ldg(p + e) : 0.0f;
  }
  return make_uint4(ptx::cvt_bf16x2(v[0], v[1]), ptx::cvt_bf16x2(v[2], v[3]),
                    ptx::cvt_bf16x2(v[4], v[5]), ptx::cvt_bf16x2(v[6], v[7]));
}

// acc += w-chunk (rows g, g + 8) · x-chunk (row g) over the chunk's 8 values of k per lane (two
// mmas; see the permutation of k above).
__device__ __forceinline__ void mma_chunk(float (&acc)[4], const uint4& lo, const uint4& hi,
                                          const uint4& xv) {
  ptx::mma_bf16(acc, {lo.x, hi.x, lo.y, hi.y}, xv.x, xv.y);
  ptx::mma_bf16(acc, {lo.z, hi.z, lo.w, hi.w}, xv.z, xv.w);
}

template <class YT>
__device__ __forceinline__ void store_y(YT* p, float v, Activation act);
template <>
__device__ __forceinline__ void store_y<bf16_t>(bf16_t* p, float v, Activation act) {
  *p = f32_to_bf16(act_ref(round_bf16(v), act));  // one element per output: the reference
}
template <>
__device__ __forceinline__ void store_y<float>(float* p, float v, Activation act) {
  *p = act_ref(v, act);
}

}  // namespace ferry::cuda::skinny
