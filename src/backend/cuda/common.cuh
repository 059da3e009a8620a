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

template <class T>
inline T* ptr(const TensorView& v) {
  return static_cast<T*>(v.data);
}

}  // namespace ferry::cuda
