// One block per normalized chunk. Reductions run in a fixed order: each thread sums its strided
// elements in index order, then a butterfly over the warp, then the warps' partials in warp
// order. The block size depends only on the chunk width, so the bits depend only on the inputs.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/norm.cuh"

namespace ferry::cuda {
namespace {

constexpr int kMaxThreads = 256;

// Sum of v over the block, the same value returned to every thread. `shared` holds >= 32 floats.
__device__ __forceinline__ float block_sum(float v, float* shared) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();  // `shared` may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total = __fadd_rn(total, shared[w]);
  return total;
}

template <class T>
__global__ void rms_norm_kernel(const T* x, int64_t xs, const bf16_t* w, T* y, int64_t ys,
                                int64_t dim, int64_t chunks, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x / chunks;
  const int64_t col0 = (blockIdx.x - row * chunks) * dim;
  const T* xr = x + row * xs + col0;
  T* yr = y + row * ys + col0;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float u = to_float(xr[i]);
    ss = __fmaf_rn(u, u, ss);
  }
  ss = block_sum(ss, shared);
  const float r =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(dim)), eps)));
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float n = __fmul_rn(to_float(xr[i]), r);
    if constexpr (sizeof(T) == 2) {
      yr[i] = f32_to_bf16(__fmul_rn(round_bf16(n), to_float(w[i])));
    } else {
      yr[i] = __fmul_rn(n, to_float(w[i]));
    }
  }
}

// bf16 rms_norm with 16-byte accesses (dim, strides multiples of 8; pointers 16-byte aligned):
// thread i handles the 8-element vectors i, i + blockDim, ... of its chunk.
__global__ void rms_norm_bf16_vec8_kernel(const bf16_t* x, int64_t xs, const bf16_t* w, bf16_t* y,
                                          int64_t ys, int64_t dim, int64_t chunks, float eps) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x / chunks;
  const int64_t col0 = (blockIdx.x - row * chunks) * dim;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * xs + col0);
  const uint4* wr = reinterpret_cast<const uint4*>(w);
  uint4* yr = reinterpret_cast<uint4*>(y + row * ys + col0);
  const int64_t vecs = dim / 8;
  float ss = 0.0f;
  for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
    const uint4 q = xr[v];
    const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float a = bf16_to_f32(static_cast<bf16_t>(words[e] & 0xffffu));
      const float b = bf16_to_f32(static_cast<bf16_t>(words[e] >> 16));
      ss = __fmaf_rn(a, a, ss);
      ss = __fmaf_rn(b, b, ss);
    }
  }
  ss = block_sum(ss, shared);
  const float r =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, static_cast<float>(dim)), eps)));
  for (int64_t v = threadIdx.x; v < vecs; v += blockDim.x) {
    const uint4 q = xr[v];
    const uint4 wq = wr[v];
    const uint32_t xw[4] = {q.x, q.y, q.z, q.w};
    const uint32_t ww[4] = {wq.x, wq.y, wq.z, wq.w};
    uint32_t out[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float n0 = __fmul_rn(bf16_to_f32(static_cast<bf16_t>(xw[e] & 0xffffu)), r);
      const float n1 = __fmul_rn(bf16_to_f32(static_cast<bf16_t>(xw[e] >> 16)), r);
      const bf16_t y0 =
          f32_to_bf16(__fmul_rn(round_bf16(n0), bf16_to_f32(static_cast<bf16_t>(ww[e] & 0xffffu))));
      const bf16_t y1 =
          f32_to_bf16(__fmul_rn(round_bf16(n1), bf16_to_f32(static_cast<bf16_t>(ww[e] >> 16))));
      out[e] = static_cast<uint32_t>(y0) | (static_cast<uint32_t>(y1) << 16);
    }
    yr[v] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

template <class X, class Y>
__global__ void layer_norm_kernel(const X* x, int64_t xs, const bf16_t* w, const bf16_t* b, Y* y,
                                  int64_t ys, int64_t cols, float eps) {
  __shared__ float shared[32];
  const X* xr = x + blockIdx.x * xs;
  Y* yr = y + blockIdx.x * ys;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s = __fadd_rn(s, to_float(xr[i]));
  const float mean = __fdiv_rn(block_sum(s, shared), static_cast<float>(cols));
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float d = __fsub_rn(to_float(xr[i]), mean);
    v = __fmaf_rn(d, d, v);
  }
  const float var = __fdiv_rn(block_sum(v, shared), static_cast<float>(cols));
  const float sd = __fsqrt_rn(__fadd_rn(var, eps));
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float n = __fdiv_rn(__fsub_rn(to_float(xr[i]), mean), sd);
    yr[i] = from_float<Y>(__fadd_rn(__fmul_rn(n, to_float(w[i])), to_float(b[i])));
  }
}

int threads_for(int64_t width) {
  int64_t t = (width + 31) / 32 * 32;
  if (t > kMaxThreads) t = kMaxThreads;
  if (t < 32) t = 32;
  return static_cast<int>(t);
}

template <class X, class Y>
void launch_layer_norm(const LayerNorm& op, cudaStream_t stream) {
  layer_norm_kernel<X, Y><<<static_cast<unsigned>(op.x.rows), threads_for(op.x.cols), 0, stream>>>(
      ptr<const X>(op.x), op.x.stride(), ptr<const bf16_t>(op.w), ptr<const bf16_t>(op.b),
      ptr<Y>(op.y), op.y.stride(), op.x.cols, op.eps);
}

}  // namespace

Status run_rms_norm(const OpContext& ctx, const RmsNorm& op) {
  if (op.x.rows == 0 || op.dim == 0) return Status();
  const int64_t chunks = op.x.cols / op.dim;
  const int64_t blocks = op.x.rows * chunks;
  if (blocks > 0x7fffffff) return make_error(ErrorCode::unsupported, "rms_norm: too many rows");
  const int threads = threads_for(op.dim);
  const bool vec8 = op.x.dtype == DType::bf16 && op.dim % 8 == 0 && op.x.stride() % 8 == 0 &&
                    op.y.stride() % 8 == 0 && reinterpret_cast<uintptr_t>(op.x.data) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(op.y.data) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(op.w.data) % 16 == 0;
  if (vec8) {
    rms_norm_bf16_vec8_kernel<<<static_cast<unsigned>(blocks), threads_for(op.dim / 8), 0,
                                ctx.stream>>>(ptr<const bf16_t>(op.x), op.x.stride(),
                                              ptr<const bf16_t>(op.w), ptr<bf16_t>(op.y),
                                              op.y.stride(), op.dim, chunks, op.eps);
  } else if (op.x.dtype == DType::bf16) {
    rms_norm_kernel<bf16_t><<<static_cast<unsigned>(blocks), threads, 0, ctx.stream>>>(
        ptr<const bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.w), ptr<bf16_t>(op.y),
        op.y.stride(), op.dim, chunks, op.eps);
  } else {
    rms_norm_kernel<float><<<static_cast<unsigned>(blocks), threads, 0, ctx.stream>>>(
        ptr<const float>(op.x), op.x.stride(), ptr<const bf16_t>(op.w), ptr<float>(op.y),
        op.y.stride(), op.dim, chunks, op.eps);
  }
  return launch_status("rms_norm_kernel");
}

Status run_layer_norm(const OpContext& ctx, const LayerNorm& op) {
  if (op.x.rows == 0) return Status();
  if (op.x.rows > 0x7fffffff)
    return make_error(ErrorCode::unsupported, "layer_norm: too many rows");
  const bool xb = op.x.dtype == DType::bf16;
  const bool yb = op.y.dtype == DType::bf16;
  if (xb && yb) launch_layer_norm<bf16_t, bf16_t>(op, ctx.stream);
  if (xb && !yb) launch_layer_norm<bf16_t, float>(op, ctx.stream);
  if (!xb && yb) launch_layer_norm<float, bf16_t>(op, ctx.stream);
  if (!xb && !yb) launch_layer_norm<float, float>(op, ctx.stream);
  return launch_status("layer_norm_kernel");
}

}  // namespace ferry::cuda
