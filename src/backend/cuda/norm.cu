// Reductions run in a fixed order: each thread sums its elements in index order, then a butterfly
// over the warp (or the team's lanes), then the warps' partials in warp order. Launch shapes
// depend only on the chunk width and the alignment, so the bits depend only on the inputs.
// bf16 chunks of up to 16384 elements take the register-resident team kernels below; others
// (f32, unaligned, wider) one block per chunk.
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

// ---- bf16 rows in registers ------------------------------------------------------------------
//
// For bf16 chunks of up to 16384 elements (dim a multiple of 8, 16-byte aligned rows): a team
// of kTeam threads (16..256, a power of two, consecutive threads of one 256-thread block) per
// chunk, each thread loading the 16-byte vectors t, t + kTeam, ... (up to kVecs of them) once
// into registers; the sums run over them in index order, then team_sum; the output is written
// from the registers. One read and one write of the row: near bandwidth for 1152..4608 wide
// rows, where a block per row with three passes over global memory was not.

constexpr int kTeamBlock = 256;

// Sum of v over the team, the same bits in every thread of it. Teams of <= 32 threads: an xor
// butterfly within the warp. Larger teams: a butterfly per warp, then the team's warp partials
// added in warp order. Every thread of the block must call it (larger teams synchronize).
template <int kTeam>
__device__ __forceinline__ float team_sum(float v, float* shared) {
  constexpr int kSpan = kTeam < 32 ? kTeam : 32;
#pragma unroll
  for (int off = kSpan / 2; off > 0; off >>= 1) {
    v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  if constexpr (kTeam > 32) {
    constexpr int kWarps = kTeam / 32;
    const int warp = static_cast<int>(threadIdx.x) / 32;
    __syncthreads();  // `shared` may still be read from the previous sum
    if (threadIdx.x % 32 == 0) shared[warp] = v;
    __syncthreads();
    const int first = warp / kWarps * kWarps;
    v = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) v = __fadd_rn(v, shared[first + i]);
  }
  return v;
}

__device__ __forceinline__ void unpack_bf16x8(const uint4& q, float (&f)[8]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[2 * e] = bf16_to_f32(static_cast<bf16_t>(w[e] & 0xffffu));
    f[2 * e + 1] = bf16_to_f32(static_cast<bf16_t>(w[e] >> 16));
  }
}

__device__ __forceinline__ uint4 pack_bf16x8(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = static_cast<uint32_t>(f32_to_bf16(f[2 * e])) |
           (static_cast<uint32_t>(f32_to_bf16(f[2 * e + 1])) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Loads the team's vectors of one chunk (zeros past `vecs` or for an inactive team).
template <int kTeam, int kVecs>
__device__ __forceinline__ void load_chunk(const uint4* xr, int t, int vecs, bool active,
                                           uint4 (&q)[kVecs]) {
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = t + i * kTeam;
    q[i] = active && v < vecs ? xr[v] : make_uint4(0, 0, 0, 0);
  }
}

template <int kTeam, int kVecs>
__global__ void __launch_bounds__(kTeamBlock)
    rms_norm_bf16_team_kernel(const bf16_t* x, int64_t xs, const bf16_t* w, bf16_t* y, int64_t ys,
                              int vecs, int64_t chunks, int64_t chunks_per_row, float eps) {
  __shared__ float shared[kTeamBlock / 32];
  const int t = static_cast<int>(threadIdx.x) % kTeam;
  const int64_t chunk = int64_t{blockIdx.x} * (kTeamBlock / kTeam) + threadIdx.x / kTeam;
  const bool active = chunk < chunks;
  const int64_t row = active ? chunk / chunks_per_row : 0;
  const int64_t col0 = (active ? chunk - row * chunks_per_row : 0) * vecs * 8;
  uint4 q[kVecs];
  load_chunk<kTeam, kVecs>(reinterpret_cast<const uint4*>(x + row * xs + col0), t, vecs, active, q);
  float ss = 0.0f;  // zeros past the chunk add nothing
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float u[8];
    unpack_bf16x8(q[i], u);
#pragma unroll
    for (int e = 0; e < 8; ++e) ss = __fmaf_rn(u[e], u[e], ss);
  }
  ss = team_sum<kTeam>(ss, shared);
  const float dim = static_cast<float>(vecs * 8);
  const float r = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, dim), eps)));
  if (!active) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w);
  uint4* yr = reinterpret_cast<uint4*>(y + row * ys + col0);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = t + i * kTeam;
    if (v >= vecs) break;
    float u[8];
    float wf[8];
    unpack_bf16x8(q[i], u);
    unpack_bf16x8(wr[v], wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) u[e] = __fmul_rn(round_bf16(__fmul_rn(u[e], r)), wf[e]);
    yr[v] = pack_bf16x8(u);
  }
}

// LayerNorm, bf16 x and y, one team per row: mean, then Σ(u − mean)² over the registers, then
// y = bf16((u − mean)·inv·w + b) with inv = 1/sqrt(var + eps) (the CPU reference's form).
template <int kTeam, int kVecs>
__global__ void __launch_bounds__(kTeamBlock)
    layer_norm_bf16_team_kernel(const bf16_t* x, int64_t xs, const bf16_t* w, const bf16_t* b,
                                bf16_t* y, int64_t ys, int vecs, int64_t rows, float eps) {
  __shared__ float shared[kTeamBlock / 32];
  const int t = static_cast<int>(threadIdx.x) % kTeam;
  const int64_t row = int64_t{blockIdx.x} * (kTeamBlock / kTeam) + threadIdx.x / kTeam;
  const bool active = row < rows;
  uint4 q[kVecs];
  load_chunk<kTeam, kVecs>(reinterpret_cast<const uint4*>(x + (active ? row : 0) * xs), t, vecs,
                           active, q);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float u[8];
    unpack_bf16x8(q[i], u);
#pragma unroll
    for (int e = 0; e < 8; ++e) s = __fadd_rn(s, u[e]);
  }
  const float cols = static_cast<float>(vecs * 8);
  const float mean = __fdiv_rn(team_sum<kTeam>(s, shared), cols);
  float v = 0.0f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (t + i * kTeam >= vecs) break;
    float u[8];
    unpack_bf16x8(q[i], u);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float d = __fsub_rn(u[e], mean);
      v = __fmaf_rn(d, d, v);
    }
  }
  const float var = __fdiv_rn(team_sum<kTeam>(v, shared), cols);
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(var, eps)));
  if (!active) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w);
  const uint4* br = reinterpret_cast<const uint4*>(b);
  uint4* yr = reinterpret_cast<uint4*>(y + row * ys);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int vi = t + i * kTeam;
    if (vi >= vecs) break;
    float u[8];
    float wf[8];
    float bf[8];
    unpack_bf16x8(q[i], u);
    unpack_bf16x8(wr[vi], wf);
    unpack_bf16x8(br[vi], bf);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float n = __fmul_rn(__fsub_rn(u[e], mean), inv);
      u[e] = __fadd_rn(__fmul_rn(n, wf[e]), bf[e]);
    }
    yr[vi] = pack_bf16x8(u);
  }
}

// The team size for a chunk of `vecs` 16-byte vectors: 16 threads with one vector each up to
// 128 elements (per-head norms), else 32, 128 or 256 threads with up to 8 vectors each; 0 when
// the chunk is too wide for registers.
int team_for(int64_t vecs) {
  if (vecs <= 16) return 16;
  if (vecs <= 32 * 8) return 32;
  if (vecs <= 128 * 8) return 128;
  if (vecs <= 256 * 8) return 256;
  return 0;
}

bool rows_vec_ok(const TensorView& v) {
  return v.dtype == DType::bf16 && reinterpret_cast<uintptr_t>(v.data) % 16 == 0 &&
         v.stride() % 8 == 0;
}

unsigned team_blocks(int64_t chunks, int team) {
  const int64_t per_block = kTeamBlock / team;
  return static_cast<unsigned>((chunks + per_block - 1) / per_block);
}

template <int kTeam, int kVecs>
void launch_rms_team(const RmsNorm& op, int64_t chunks, int64_t chunks_per_row,
                     cudaStream_t stream) {
  rms_norm_bf16_team_kernel<kTeam, kVecs><<<team_blocks(chunks, kTeam), kTeamBlock, 0, stream>>>(
      ptr<const bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.w), ptr<bf16_t>(op.y),
      op.y.stride(), static_cast<int>(op.dim / 8), chunks, chunks_per_row, op.eps);
}

template <int kTeam, int kVecs>
void launch_layer_norm_team(const LayerNorm& op, cudaStream_t stream) {
  layer_norm_bf16_team_kernel<kTeam, kVecs>
      <<<team_blocks(op.x.rows, kTeam), kTeamBlock, 0, stream>>>(
          ptr<const bf16_t>(op.x), op.x.stride(), ptr<const bf16_t>(op.w), ptr<const bf16_t>(op.b),
          ptr<bf16_t>(op.y), op.y.stride(), static_cast<int>(op.x.cols / 8), op.x.rows, op.eps);
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

Status run_rms_norm(const OpContext& ctx, const RmsNorm& op, NormKernel kernel) {
  if (op.x.rows == 0 || op.dim == 0) return Status();
  const int64_t chunks = op.x.cols / op.dim;
  const int64_t blocks = op.x.rows * chunks;
  if (blocks > 0x7fffffff) return make_error(ErrorCode::unsupported, "rms_norm: too many rows");
  const int team = op.dim % 8 == 0 ? team_for(op.dim / 8) : 0;
  if (kernel == NormKernel::best && team != 0 && rows_vec_ok(op.x) && rows_vec_ok(op.y) &&
      reinterpret_cast<uintptr_t>(op.w.data) % 16 == 0) {
    if (team == 16) launch_rms_team<16, 1>(op, blocks, chunks, ctx.stream);
    if (team == 32) launch_rms_team<32, 8>(op, blocks, chunks, ctx.stream);
    if (team == 128) launch_rms_team<128, 8>(op, blocks, chunks, ctx.stream);
    if (team == 256) launch_rms_team<256, 8>(op, blocks, chunks, ctx.stream);
    return launch_status("rms_norm_bf16_team_kernel");
  }
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

Status run_layer_norm(const OpContext& ctx, const LayerNorm& op, NormKernel kernel) {
  if (op.x.rows == 0) return Status();
  if (op.x.rows > 0x7fffffff)
    return make_error(ErrorCode::unsupported, "layer_norm: too many rows");
  const int team = op.x.cols % 8 == 0 ? team_for(op.x.cols / 8) : 0;
  if (kernel == NormKernel::best && team != 0 && rows_vec_ok(op.x) && rows_vec_ok(op.y) &&
      reinterpret_cast<uintptr_t>(op.w.data) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(op.b.data) % 16 == 0) {
    if (team == 16) launch_layer_norm_team<16, 1>(op, ctx.stream);
    if (team == 32) launch_layer_norm_team<32, 8>(op, ctx.stream);
    if (team == 128) launch_layer_norm_team<128, 8>(op, ctx.stream);
    if (team == 256) launch_layer_norm_team<256, 8>(op, ctx.stream);
    return launch_status("layer_norm_bf16_team_kernel");
  }
  const bool xb = op.x.dtype == DType::bf16;
  const bool yb = op.y.dtype == DType::bf16;
  if (xb && yb) launch_layer_norm<bf16_t, bf16_t>(op, ctx.stream);
  if (xb && !yb) launch_layer_norm<bf16_t, float>(op, ctx.stream);
  if (!xb && yb) launch_layer_norm<float, bf16_t>(op, ctx.stream);
  if (!xb && !yb) launch_layer_norm<float, float>(op, ctx.stream);
  return launch_status("layer_norm_kernel");
}

}  // namespace ferry::cuda
