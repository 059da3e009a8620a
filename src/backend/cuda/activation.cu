// The bf16 activation pass that follows a bf16 GEMM: y = bf16(act(y)) in place.
//
// The pass is memory-bound (2 bytes read and written per element) once the activation itself is
// cheap: act_bf16_bits evaluates it in fp32 and falls back to the double reference only for
// elements whose bf16 rounding the fp32 result cannot decide (activation_guard.h), so the output
// bits are those of the reference. Contiguous views are one long row of 16-byte vectors; each
// thread handles two vectors per step so that two loads are in flight before the math.
#include <algorithm>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/activation_math.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;

template <Activation A, bool kRef>
__device__ __forceinline__ uint32_t act_bits(uint32_t x) {
  const float u = bf16_to_f32(static_cast<bf16_t>(x));
  if constexpr (kRef) {
    return f32_to_bf16(act_ref(u, A));
  } else {
    return act_bf16_bits<A>(u);
  }
}

template <Activation A, bool kRef>
__device__ __forceinline__ uint4 act8(const uint4& v) {
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = act_bits<A, kRef>(w[e] & 0xffffu) | (act_bits<A, kRef>(w[e] >> 16) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// `vecs` 8-element vectors per row; grid x over vectors (two per thread per step), y over rows.
template <Activation A, bool kRef>
__global__ void act_bf16_vec8_kernel(bf16_t* y, int64_t ys, int64_t rows, int64_t vecs) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    uint4* row = reinterpret_cast<uint4*>(y + r * ys);
    for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vecs; v += 2 * step) {
      const bool second = v + step < vecs;
      const uint4 a = row[v];
      const uint4 b = second ? row[v + step] : make_uint4(0, 0, 0, 0);
      row[v] = act8<A, kRef>(a);
      if (second) row[v + step] = act8<A, kRef>(b);
    }
  }
}

// Any alignment: one element per thread, grid x over columns, y over rows.
template <Activation A, bool kRef>
__global__ void act_bf16_kernel(bf16_t* y, int64_t ys, int64_t rows, int64_t cols) {
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < cols; c += step) {
      bf16_t* p = y + r * ys + c;
      *p = static_cast<bf16_t>(act_bits<A, kRef>(*p));
    }
  }
}

dim3 grid_2d(int64_t rows, int64_t per_row_threads) {
  const int64_t x = std::clamp<int64_t>((per_row_threads + kThreads - 1) / kThreads, 1, 1 << 20);
  const int64_t yb = std::clamp<int64_t>(rows, 1, 65535);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(yb));
}

template <Activation A, bool kRef>
Status launch(cudaStream_t stream, bf16_t* y, int64_t ys, int64_t rows, int64_t cols) {
  const bool vec8 =
      reinterpret_cast<uintptr_t>(y) % 16 == 0 && cols % 8 == 0 && (rows == 1 || ys % 8 == 0);
  if (vec8) {
    // A contiguous view is one row: no block idles at the end of each row.
    if (ys == cols) {
      cols *= rows;
      rows = 1;
    }
    const int64_t vecs = cols / 8;
    act_bf16_vec8_kernel<A, kRef>
        <<<grid_2d(rows, (vecs + 1) / 2), kThreads, 0, stream>>>(y, ys, rows, vecs);
    return launch_status("act_bf16_vec8_kernel");
  }
  act_bf16_kernel<A, kRef><<<grid_2d(rows, cols), kThreads, 0, stream>>>(y, ys, rows, cols);
  return launch_status("act_bf16_kernel");
}

template <bool kRef>
Status launch_for(cudaStream_t stream, bf16_t* y, int64_t ys, int64_t rows, int64_t cols,
                  Activation act) {
  switch (act) {
    case Activation::silu:
      return launch<Activation::silu, kRef>(stream, y, ys, rows, cols);
    case Activation::gelu_tanh:
      return launch<Activation::gelu_tanh, kRef>(stream, y, ys, rows, cols);
    case Activation::gelu_erf:
      return launch<Activation::gelu_erf, kRef>(stream, y, ys, rows, cols);
    case Activation::none:
      break;
  }
  return Status();
}

}  // namespace

Status launch_act_bf16(cudaStream_t stream, uint16_t* y, int64_t ys, int64_t rows, int64_t cols,
                       Activation act, ActImpl impl) {
  if (rows <= 0 || cols <= 0) return Status();
  if (impl == ActImpl::reference) return launch_for<true>(stream, y, ys, rows, cols, act);
  return launch_for<false>(stream, y, ys, rows, cols, act);
}

}  // namespace ferry::cuda
