// Fused decoder-layer kernels: the residual add with the norm after it, and the per-head q/k
// norms with the rotary that follows them. In a decode step every one of these ops works on a
// single row, so what they cost is launches, not bytes: fusing takes three kernels off each
// layer. Numerics are the sequences' (ops.h), with explicit _rn intrinsics so that nvcc cannot
// contract products into FMAs; reductions run in a fixed order (each thread in index order, then
// an xor butterfly, then the warps' partials in warp order), so the bits depend only on the
// inputs. The CPU runs the sequences themselves.
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/fused.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/rope.cuh"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxHeadDim = 128;  // QkNormRope: one warp holds a head in 4 values a lane

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// One block per row: x += src (rounded to x's dtype, as Add), the sum of squares of the new x,
// then y = RmsNorm(x) (as RmsNorm with dim = cols).
template <class X, class S>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm_kernel(X* x, int64_t xs, const S* src, int64_t ss, const bf16_t* w, X* y,
                        int64_t ys, int64_t cols, float eps) {
  __shared__ float partial[kWarps];
  const int tid = static_cast<int>(threadIdx.x);
  X* xr = x + int64_t{blockIdx.x} * xs;
  const S* sr = src + int64_t{blockIdx.x} * ss;
  X* yr = y + int64_t{blockIdx.x} * ys;
  float sq = 0.0f;
  for (int64_t i = tid; i < cols; i += kThreads) {
    const float u = to_float(from_float<X>(__fadd_rn(to_float(xr[i]), to_float(sr[i]))));
    xr[i] = from_float<X>(u);
    sq = __fmaf_rn(u, u, sq);
  }
  sq = warp_sum(sq);
  if (tid % 32 == 0) partial[tid / 32] = sq;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) total = __fadd_rn(total, partial[i]);
  const float r =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, static_cast<float>(cols)), eps)));
  for (int64_t i = tid; i < cols; i += kThreads) {
    const float n = __fmul_rn(to_float(xr[i]), r);  // this thread's own store above
    if constexpr (sizeof(X) == 2) {
      yr[i] = f32_to_bf16(__fmul_rn(round_bf16(n), to_float(w[i])));
    } else {
      yr[i] = __fmul_rn(n, to_float(w[i]));
    }
  }
}

// One block per row, a warp per head (heads h = warp, warp + kWarps, ...): lane l holds elements
// l, l + 32, ... of the head; RmsNorm (q heads with wq, k heads with wk), the normalized bf16
// values through shared memory, then the rotary pairs (j, j + half) from there.
template <bool kBf16Math>
__global__ void __launch_bounds__(kThreads)
    qk_norm_rope_kernel(bf16_t* x, int64_t xs, const bf16_t* wq, const bf16_t* wk,
                        const float* cos_t, int64_t cs, const float* sin_t, int64_t sns,
                        int q_heads, int heads, int head_dim, float eps) {
  __shared__ float normed[kWarps][kMaxHeadDim];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row = blockIdx.x;
  const int half = head_dim / 2;
  const float* cr = cos_t + row * cs;
  const float* sr = sin_t + row * sns;
  for (int h = warp; h < heads; h += kWarps) {
    bf16_t* xh = x + row * xs + int64_t{h} * head_dim;
    const bf16_t* w = h < q_heads ? wq : wk;
    float v[kMaxHeadDim / 32];
    float sq = 0.0f;
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 32; ++c) {
      const int d = lane + 32 * c;
      v[c] = d < head_dim ? to_float(xh[d]) : 0.0f;
      sq = __fmaf_rn(v[c], v[c], sq);
    }
    sq = warp_sum(sq);
    const float r =
        __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sq, static_cast<float>(head_dim)), eps)));
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 32; ++c) {
      const int d = lane + 32 * c;
      if (d < head_dim) {
        normed[warp][d] = round_bf16(__fmul_rn(round_bf16(__fmul_rn(v[c], r)), to_float(w[d])));
      }
    }
    __syncwarp();
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 32; ++c) {
      const int d = lane + 32 * c;
      if (d >= head_dim) continue;
      const int j = d < half ? d : d - half;
      const float x1 = normed[warp][j];
      const float x2 = normed[warp][j + half];
      float cj = cr[j];
      float sj = sr[j];
      float out = 0.0f;
      if constexpr (kBf16Math) {
        cj = round_bf16(cj);
        sj = round_bf16(sj);
        out = d < half ? __fsub_rn(round_bf16(__fmul_rn(x1, cj)), round_bf16(__fmul_rn(x2, sj)))
                       : __fadd_rn(round_bf16(__fmul_rn(x2, cj)), round_bf16(__fmul_rn(x1, sj)));
      } else {
        out = d < half ? __fsub_rn(__fmul_rn(x1, cj), __fmul_rn(x2, sj))
                       : __fadd_rn(__fmul_rn(x2, cj), __fmul_rn(x1, sj));
      }
      xh[d] = f32_to_bf16(out);
    }
    __syncwarp();  // the next head of this warp overwrites normed[warp]
  }
}

template <class X, class S>
void launch_add_rms_norm(const OpContext& ctx, const AddRmsNorm& op) {
  add_rms_norm_kernel<X, S><<<static_cast<unsigned>(op.dst.rows), kThreads, 0, ctx.stream>>>(
      ptr<X>(op.dst), op.dst.stride(), ptr<const S>(op.src), op.src.stride(),
      ptr<const bf16_t>(op.w), ptr<X>(op.y), op.y.stride(), op.dst.cols, op.eps);
}

}  // namespace

Status run_add_rms_norm(const OpContext& ctx, const AddRmsNorm& op) {
  if (op.dst.rows == 0) return Status();
  if (op.dst.rows > 0x7fffffff) {
    FERRY_RETURN_IF_ERROR(run_add(ctx, add_part(op)));
    return run_rms_norm(ctx, norm_part(op));
  }
  const bool xb = op.dst.dtype == DType::bf16;
  const bool sb = op.src.dtype == DType::bf16;
  if (xb && sb) launch_add_rms_norm<bf16_t, bf16_t>(ctx, op);
  if (xb && !sb) launch_add_rms_norm<bf16_t, float>(ctx, op);
  if (!xb && sb) launch_add_rms_norm<float, bf16_t>(ctx, op);
  if (!xb && !sb) launch_add_rms_norm<float, float>(ctx, op);
  return launch_status("add_rms_norm_kernel");
}

Status run_qk_norm_rope(const OpContext& ctx, const QkNormRope& op) {
  if (op.x.rows == 0) return Status();
  if (op.head_dim > kMaxHeadDim || op.head_dim % 2 != 0 || op.x.rows > 0x7fffffff) {
    FERRY_RETURN_IF_ERROR(run_rms_norm(ctx, q_norm_part(op)));
    FERRY_RETURN_IF_ERROR(run_rms_norm(ctx, k_norm_part(op)));
    return run_rope(ctx, rope_part(op));
  }
  const auto grid = static_cast<unsigned>(op.x.rows);
  const int heads = op.q_heads + op.k_heads;
  if (op.math == RopeMath::bf16) {
    qk_norm_rope_kernel<true><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.wq), ptr<const bf16_t>(op.wk),
        ptr<const float>(op.cos), op.cos.stride(), ptr<const float>(op.sin), op.sin.stride(),
        op.q_heads, heads, op.head_dim, op.eps);
  } else {
    qk_norm_rope_kernel<false><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.wq), ptr<const bf16_t>(op.wk),
        ptr<const float>(op.cos), op.cos.stride(), ptr<const float>(op.sin), op.sin.stride(),
        op.q_heads, heads, op.head_dim, op.eps);
  }
  return launch_status("qk_norm_rope_kernel");
}

}  // namespace ferry::cuda
