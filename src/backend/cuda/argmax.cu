// One block per row. Each thread keeps the best (value, index) of its strided elements; the pairs
// are then combined by a rule that is order-independent (larger value wins, ties go to the lower
// index, NaN never wins), so the result is exact whatever the reduction shape.
#include <cmath>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;

struct Best {
  float v;
  int64_t i;  // -1: nothing seen yet (or only NaN)
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  if (a.v > b.v || (a.v == b.v && a.i < b.i)) return a;
  return b;
}

template <class T>
__global__ void argmax_kernel(const T* x, int64_t xs, int32_t* out, int64_t os, int64_t cols) {
  __shared__ float sv[kThreads / 32];
  __shared__ int64_t si[kThreads / 32];
  const T* xr = x + blockIdx.x * xs;
  Best b{0.0f, -1};
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = to_float(xr[c]);
    if (!isnan(v) && (b.i < 0 || v > b.v)) b = Best{v, c};
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const Best o{__shfl_xor_sync(0xffffffffu, b.v, off),
                 static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, b.i, off))};
    b = better(b, o);
  }
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) {
    sv[warp] = b.v;
    si[warp] = b.i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    Best r{sv[0], si[0]};
    for (int w = 1; w < kThreads / 32; ++w) r = better(r, Best{sv[w], si[w]});
    out[blockIdx.x * os] = static_cast<int32_t>(r.i < 0 ? 0 : r.i);
  }
}

}  // namespace

Status run_argmax(const OpContext& ctx, const Argmax& op) {
  if (op.x.rows == 0) return Status();
  if (op.x.rows > 0x7fffffff) return make_error(ErrorCode::unsupported, "argmax: too many rows");
  const auto grid = static_cast<unsigned>(op.x.rows);
  if (op.x.dtype == DType::bf16) {
    argmax_kernel<bf16_t><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<const bf16_t>(op.x), op.x.stride(), ptr<int32_t>(op.out), op.out.stride(), op.x.cols);
  } else {
    argmax_kernel<float><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<const float>(op.x), op.x.stride(), ptr<int32_t>(op.out), op.out.stride(), op.x.cols);
  }
  return launch_status("argmax_kernel");
}

}  // namespace ferry::cuda
