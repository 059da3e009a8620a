// Fused decoder-layer kernels: the residual add with the norm after it, and the per-head q/k
// norms with the rotary that follows them. In a decode step every one of these ops works on a
// single row, so what they cost is launches, not bytes: fusing takes three kernels off each
// layer. Numerics are the sequences' (ops.h), with explicit _rn intrinsics so that nvcc cannot
// contract products into FMAs; reductions run in a fixed order (each thread in index order, then
// an xor butterfly, then the warps' partials in warp order), so the bits depend only on the
// inputs. The CPU runs the sequences themselves.
#include <cstdint>
#include <tuple>

#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.cuh"
#include "backend/cuda/fused.cuh"
#include "backend/cuda/norm.cuh"
#include "backend/cuda/rope.cuh"
#include "backend/cuda/rows.cuh"

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

// bf16 x and src with 16-byte rows (cols a multiple of 8, at most 8·kVec·kThreads): each thread
// loads its vectors v = tid, tid + kThreads, ... of x and src first (all loads in flight at once),
// then adds, stores and sums them in index order; the normalized row is written from registers.
template <int kVec>
__global__ void __launch_bounds__(kThreads)
    add_rms_norm_bf16_vec_kernel(bf16_t* x, int64_t xs, const bf16_t* __restrict__ src, int64_t ss,
                                 const bf16_t* __restrict__ w, bf16_t* y, int64_t ys, int64_t cols,
                                 float eps) {
  __shared__ float partial[kWarps];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t vecs = cols / 8;
  uint4* xr = reinterpret_cast<uint4*>(x + int64_t{blockIdx.x} * xs);
  const uint4* sr = reinterpret_cast<const uint4*>(src + int64_t{blockIdx.x} * ss);
  uint4* yr = reinterpret_cast<uint4*>(y + int64_t{blockIdx.x} * ys);
  const uint4* wr = reinterpret_cast<const uint4*>(w);
  uint4 xa[kVec], sa[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int64_t v = tid + int64_t{k} * kThreads;
    xa[k] = v < vecs ? xr[v] : make_uint4(0, 0, 0, 0);
    sa[k] = v < vecs ? sr[v] : make_uint4(0, 0, 0, 0);
  }
  float u[kVec][8];
  float sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const uint32_t xw[4] = {xa[k].x, xa[k].y, xa[k].z, xa[k].w};
    const uint32_t sw[4] = {sa[k].x, sa[k].y, sa[k].z, sa[k].w};
    uint32_t out[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float a0 = round_bf16(__fadd_rn(bf16_to_f32(static_cast<bf16_t>(xw[e] & 0xffffu)),
                                            bf16_to_f32(static_cast<bf16_t>(sw[e] & 0xffffu))));
      const float a1 = round_bf16(__fadd_rn(bf16_to_f32(static_cast<bf16_t>(xw[e] >> 16)),
                                            bf16_to_f32(static_cast<bf16_t>(sw[e] >> 16))));
      u[k][2 * e] = a0;
      u[k][2 * e + 1] = a1;
      out[e] =
          static_cast<uint32_t>(f32_to_bf16(a0)) | (static_cast<uint32_t>(f32_to_bf16(a1)) << 16);
    }
    const int64_t v = tid + int64_t{k} * kThreads;
    if (v < vecs) {
      xr[v] = make_uint4(out[0], out[1], out[2], out[3]);
#pragma unroll
      for (int e = 0; e < 8; ++e) sq = __fmaf_rn(u[k][e], u[k][e], sq);
    }
  }
  sq = warp_sum(sq);
  if (tid % 32 == 0) partial[tid / 32] = sq;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) total = __fadd_rn(total, partial[i]);
  const float r =
      __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(total, static_cast<float>(cols)), eps)));
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const int64_t v = tid + int64_t{k} * kThreads;
    if (v >= vecs) continue;
    const uint4 wv = wr[v];
    const uint32_t ww[4] = {wv.x, wv.y, wv.z, wv.w};
    uint32_t out[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float y0 = __fmul_rn(round_bf16(__fmul_rn(u[k][2 * e], r)),
                                 bf16_to_f32(static_cast<bf16_t>(ww[e] & 0xffffu)));
      const float y1 = __fmul_rn(round_bf16(__fmul_rn(u[k][2 * e + 1], r)),
                                 bf16_to_f32(static_cast<bf16_t>(ww[e] >> 16)));
      out[e] =
          static_cast<uint32_t>(f32_to_bf16(y0)) | (static_cast<uint32_t>(f32_to_bf16(y1)) << 16);
    }
    yr[v] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

// A warp per (row, head): block (row, y) takes heads y·kWarps + warp; lane l holds elements
// l, l + 32, ... of the head; RmsNorm (q heads with wq, k heads with wk), the normalized bf16
// values through shared memory, then the rotary pairs (j, j + half) from there.
// With `dst`: the k heads' results also go to cache row rows[row] of dst, and warps past the
// q|k heads copy the value heads there (kv: the k|v columns of the row, v after k).
struct KvStore {
  const bf16_t* kv = nullptr;
  int64_t kvs = 0;
  const int32_t* rows = nullptr;
  int64_t rs = 0;
  bf16_t* dst = nullptr;
  int64_t ds = 0;
  int64_t dst_rows = 0;
};

template <bool kBf16Math>
__global__ void __launch_bounds__(kThreads)
    qk_norm_rope_kernel(bf16_t* x, int64_t xs, const bf16_t* wq, const bf16_t* wk,
                        const float* cos_t, int64_t cs, const float* sin_t, int64_t sns,
                        int q_heads, int heads, int head_dim, float eps, KvStore store) {
  __shared__ float normed[kWarps][kMaxHeadDim];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row = blockIdx.x;
  const int half = head_dim / 2;
  const float* cr = cos_t + row * cs;
  const float* sr = sin_t + row * sns;
  // One head per warp, the heads of a row spread over blockIdx.y: a decode step's single row is
  // 5 blocks working at once, not one block walking 40 heads in turn.
  const int h = static_cast<int>(blockIdx.y) * kWarps + warp;
  bf16_t* dst_row = nullptr;
  if (store.dst != nullptr) {
    // The row index comes from device memory: one outside the cache is not written (the CPU
    // backend reports it as an error).
    const int64_t r = store.rows[row * store.rs];
    if (r >= 0 && r < store.dst_rows) dst_row = store.dst + r * store.ds;
  }
  const int k_heads = heads - q_heads;
  if (h >= heads && h < heads + k_heads && dst_row != nullptr) {
    const int64_t col = int64_t{h - q_heads} * head_dim;  // value head h − heads, after the keys
    const bf16_t* src = store.kv + row * store.kvs + col;
    for (int d = lane; d < head_dim; d += 32) dst_row[col + d] = src[d];
  }
  if (h < heads) {
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
      if (h >= q_heads && dst_row != nullptr) {
        dst_row[int64_t{h - q_heads} * head_dim + d] = f32_to_bf16(out);
      }
    }
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
  const auto aligned = [](const TensorView& v) {
    return reinterpret_cast<uintptr_t>(v.data) % 16 == 0 && v.stride() % 8 == 0;
  };
  const int64_t vecs_per_thread = (op.dst.cols / 8 + kThreads - 1) / kThreads;
  if (xb && sb && op.dst.cols % 8 == 0 && vecs_per_thread <= 4 && aligned(op.dst) &&
      aligned(op.src) && aligned(op.w) && aligned(op.y)) {
    const auto grid = static_cast<unsigned>(op.dst.rows);
    const auto args = std::make_tuple(
        ptr<bf16_t>(op.dst), op.dst.stride(), ptr<const bf16_t>(op.src), op.src.stride(),
        ptr<const bf16_t>(op.w), ptr<bf16_t>(op.y), op.y.stride(), op.dst.cols, op.eps);
    std::apply(
        [&](auto... a) {
          if (vecs_per_thread <= 1) {
            add_rms_norm_bf16_vec_kernel<1><<<grid, kThreads, 0, ctx.stream>>>(a...);
          } else if (vecs_per_thread <= 2) {
            add_rms_norm_bf16_vec_kernel<2><<<grid, kThreads, 0, ctx.stream>>>(a...);
          } else {
            add_rms_norm_bf16_vec_kernel<4><<<grid, kThreads, 0, ctx.stream>>>(a...);
          }
        },
        args);
    return launch_status("add_rms_norm_bf16_vec_kernel");
  }
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
    FERRY_RETURN_IF_ERROR(run_rope(ctx, rope_part(op)));
    return op.kv_dst.empty() ? Status() : run_scatter_rows(ctx, store_part(op));
  }
  const int heads = op.q_heads + op.k_heads;
  KvStore store;
  if (!op.kv_dst.empty()) {
    store = KvStore{ptr<const bf16_t>(op.kv),
                    op.kv.stride(),
                    ptr<const int32_t>(op.rows),
                    op.rows.stride(),
                    ptr<bf16_t>(op.kv_dst),
                    op.kv_dst.stride(),
                    op.kv_dst.rows};
  }
  const int warps_needed = heads + (op.kv_dst.empty() ? 0 : op.k_heads);
  const dim3 grid(static_cast<unsigned>(op.x.rows),
                  static_cast<unsigned>((warps_needed + kWarps - 1) / kWarps));

  if (op.math == RopeMath::bf16) {
    qk_norm_rope_kernel<true><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.wq), ptr<const bf16_t>(op.wk),
        ptr<const float>(op.cos), op.cos.stride(), ptr<const float>(op.sin), op.sin.stride(),
        op.q_heads, heads, op.head_dim, op.eps, store);
  } else {
    qk_norm_rope_kernel<false><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.wq), ptr<const bf16_t>(op.wk),
        ptr<const float>(op.cos), op.cos.stride(), ptr<const float>(op.sin), op.sin.stride(),
        op.q_heads, heads, op.head_dim, op.eps, store);
  }
  return launch_status("qk_norm_rope_kernel");
}

}  // namespace ferry::cuda
