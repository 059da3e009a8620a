// Device helpers shared by the op kernels: element loads/stores by storage type, launch sizing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/bf16.h"
#include "core/tensor.h"

namespace ferry::cuda {

using bf16_t = uint16_t;  // bf16 storage; arithmetic always goes through float

__device__ __forceinline__ float to_float(bf16_t v) {
  return bf16_to_f32(v);
}
__device__ __forceinline__ float to_float(float v) {
  return v;
}

template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ bf16_t from_float<bf16_t>(float v) {
  return f32_to_bf16(v);
}
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}

// Grid size for a grid-stride loop over n items with `threads` per block.
inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = 65535LL * 8) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > max_blocks) blocks = max_blocks;
  return static_cast<unsigned>(blocks);
}

// Eight bf16 values of one 16-byte vector as floats, element 0 from the low half of word 0.
__device__ __forceinline__ void unpack_bf16x8(const uint4& q, float (&f)[8]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[2 * e] = bf16_to_f32(static_cast<uint16_t>(w[e] & 0xffffu));
    f[2 * e + 1] = bf16_to_f32(static_cast<uint16_t>(w[e] >> 16));
  }
}

// The reverse: eight floats rounded to bf16 (nearest even) into one 16-byte vector.
__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = static_cast<uint32_t>(f32_to_bf16(f[2 * e])) |
           (static_cast<uint32_t>(f32_to_bf16(f[2 * e + 1])) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <class T>
inline T* ptr(const TensorView& v) {
  return static_cast<T*>(v.data);
}

}  // namespace ferry::cuda
