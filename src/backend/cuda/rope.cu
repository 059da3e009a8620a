// Elementwise rotary kernels. Every product and sum is written with an explicit _rn intrinsic so
// that nvcc cannot contract a*b - c*d into an FMA: the rounding points are exactly those that
// ops.h documents, and the CPU reference computes the same values.
#include <algorithm>

#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/rope.cuh"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kBf16Math>
__global__ void rope_kernel(bf16_t* x, int64_t xs, const float* cos_t, int64_t cs,
                            const float* sin_t, int64_t ss, int64_t rows, int heads, int half) {
  const int64_t per_row = int64_t{heads} * half;
  const int64_t total = rows * per_row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / per_row;
    const int64_t rem = i - r * per_row;
    const int64_t h = rem / half;
    const int64_t j = rem - h * half;
    bf16_t* p = x + r * xs + h * 2 * half + j;
    const float x1 = to_float(p[0]);
    const float x2 = to_float(p[half]);
    float c = cos_t[r * cs + j];
    float s = sin_t[r * ss + j];
    float y1 = 0.0f;
    float y2 = 0.0f;
    if constexpr (kBf16Math) {
      c = round_bf16(c);
      s = round_bf16(s);
      y1 = __fsub_rn(round_bf16(__fmul_rn(x1, c)), round_bf16(__fmul_rn(x2, s)));
      y2 = __fadd_rn(round_bf16(__fmul_rn(x2, c)), round_bf16(__fmul_rn(x1, s)));
    } else {
      y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
      y2 = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
    p[0] = f32_to_bf16(y1);
    p[half] = f32_to_bf16(y2);
  }
}

// The same arithmetic, kVec (4 or 8) consecutive j per thread: 8- or 16-byte loads of x[j..] and
// x[j + half..], 16-byte loads of cos/sin. A block per row (grid-stride), its threads over the
// (head, group of kVec) items of the row, so the heads of a row share the cos/sin lines in L1.
template <int kVec>
__device__ __forceinline__ void load_bf16_vec(const bf16_t* p, float (&f)[kVec]) {
  uint32_t w[kVec / 2];
  if constexpr (kVec == 8) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    w[0] = q.x;
    w[1] = q.y;
    w[2] = q.z;
    w[3] = q.w;
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    w[0] = q.x;
    w[1] = q.y;
  }
#pragma unroll
  for (int e = 0; e < kVec / 2; ++e) {
    f[2 * e] = bf16_to_f32(static_cast<bf16_t>(w[e] & 0xffffu));
    f[2 * e + 1] = bf16_to_f32(static_cast<bf16_t>(w[e] >> 16));
  }
}

template <int kVec>
__device__ __forceinline__ void store_bf16_vec(bf16_t* p, const float (&f)[kVec]) {
  uint32_t w[kVec / 2];
#pragma unroll
  for (int e = 0; e < kVec / 2; ++e) {
    w[e] = static_cast<uint32_t>(f32_to_bf16(f[2 * e])) |
           (static_cast<uint32_t>(f32_to_bf16(f[2 * e + 1])) << 16);
  }
  if constexpr (kVec == 8) {
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  }
}

template <int kVec>
__device__ __forceinline__ void load_f32_vec(const float* p, float (&f)[kVec]) {
#pragma unroll
  for (int k = 0; k < kVec; k += 4) {
    const float4 q = *reinterpret_cast<const float4*>(p + k);
    f[k] = q.x;
    f[k + 1] = q.y;
    f[k + 2] = q.z;
    f[k + 3] = q.w;
  }
}

template <bool kBf16Math, int kVec>
__global__ void rope_vec_kernel(bf16_t* x, int64_t xs, const float* cos_t, int64_t cs,
                                const float* sin_t, int64_t ss, int64_t rows, int heads, int half) {
  const int groups = half / kVec;
  const int items = heads * groups;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    for (int i = static_cast<int>(threadIdx.x); i < items; i += static_cast<int>(blockDim.x)) {
      const int h = i / groups;
      const int j = (i - h * groups) * kVec;
      bf16_t* p = x + r * xs + int64_t{h} * 2 * half + j;
      float x1[kVec];
      float x2[kVec];
      float c[kVec];
      float s[kVec];
      load_bf16_vec<kVec>(p, x1);
      load_bf16_vec<kVec>(p + half, x2);
      load_f32_vec<kVec>(cos_t + r * cs + j, c);
      load_f32_vec<kVec>(sin_t + r * ss + j, s);
      float y1[kVec];
      float y2[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        if constexpr (kBf16Math) {
          const float ce = round_bf16(c[e]);
          const float se = round_bf16(s[e]);
          y1[e] = __fsub_rn(round_bf16(__fmul_rn(x1[e], ce)), round_bf16(__fmul_rn(x2[e], se)));
          y2[e] = __fadd_rn(round_bf16(__fmul_rn(x2[e], ce)), round_bf16(__fmul_rn(x1[e], se)));
        } else {
          y1[e] = __fsub_rn(__fmul_rn(x1[e], c[e]), __fmul_rn(x2[e], s[e]));
          y2[e] = __fadd_rn(__fmul_rn(x2[e], c[e]), __fmul_rn(x1[e], s[e]));
        }
      }
      store_bf16_vec<kVec>(p, y1);
      store_bf16_vec<kVec>(p + half, y2);
    }
  }
}

// The position column (0 time, 1 height, 2 width) that frequency j reads under interleaved
// multimodal RoPE with sec_h height and sec_w width sections (0, 0: plain RoPE, column 0).
__device__ __forceinline__ int mrope_column(int j, int sec_h, int sec_w) {
  if (j < 3 * sec_h && j % 3 == 1) return 1;
  if (j < 3 * sec_w && j % 3 == 2) return 2;
  return 0;
}

// powf, cosf and sinf are evaluated in double and rounded once to float: the correctly rounded
// float result in all but vanishingly rare cases, which is what a good libm returns on the CPU.
__global__ void rope_table_kernel(const int32_t* pos, int64_t ps, float* cos_t, int64_t cs,
                                  float* sin_t, int64_t ss, int64_t rows, int half, int head_dim,
                                  float theta, int sec_h, int sec_w) {
  const int64_t total = rows * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half;
    const int j = static_cast<int>(i - r * half);
    const int col = mrope_column(j, sec_h, sec_w);
    const float expo = __fdiv_rn(static_cast<float>(2 * j), static_cast<float>(head_dim));
    const float p = static_cast<float>(pow(static_cast<double>(theta), static_cast<double>(expo)));
    const float inv_freq = __fdiv_rn(1.0f, p);
    const float angle = __fmul_rn(static_cast<float>(pos[r * ps + col]), inv_freq);
    cos_t[r * cs + j] = static_cast<float>(cos(static_cast<double>(angle)));
    sin_t[r * ss + j] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

// The host's inv_freq table (rope_inv_freq: llama3 scaling), passed by value so that a recorded
// graph keeps it.
struct InvFreq {
  float v[kMaxScaledRopeHeadDim / 2];
};

__global__ void rope_table_freq_kernel(const int32_t* pos, int64_t ps, float* cos_t, int64_t cs,
                                       float* sin_t, int64_t ss, int64_t rows, int half,
                                       InvFreq inv, int sec_h, int sec_w) {
  const int64_t total = rows * half;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / half;
    const int j = static_cast<int>(i - r * half);
    const int col = mrope_column(j, sec_h, sec_w);
    const float angle = __fmul_rn(static_cast<float>(pos[r * ps + col]), inv.v[j]);
    cos_t[r * cs + j] = static_cast<float>(cos(static_cast<double>(angle)));
    sin_t[r * ss + j] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

}  // namespace

namespace {

// 8 or 4 elements per thread when every access is aligned for it (0: the scalar kernel).
int rope_vec_width(const Rope& op) {
  const int half = op.head_dim / 2;
  const auto aligned = [](const void* p, int bytes) {
    return reinterpret_cast<uintptr_t>(p) % bytes == 0;
  };
  const bool tables = aligned(op.cos.data, 16) && aligned(op.sin.data, 16) &&
                      op.cos.stride() % 4 == 0 && op.sin.stride() % 4 == 0;
  if (!tables) return 0;
  for (int v : {8, 4}) {
    if (half % v == 0 && op.x.stride() % v == 0 && aligned(op.x.data, 2 * v)) return v;
  }
  return 0;
}

template <bool kBf16Math>
Status launch_rope(const OpContext& ctx, const Rope& op, RopeKernel kernel) {
  const int half = op.head_dim / 2;
  const int vec = kernel == RopeKernel::best ? rope_vec_width(op) : 0;
  bf16_t* x = ptr<bf16_t>(op.x);
  const float* c = ptr<const float>(op.cos);
  const float* s = ptr<const float>(op.sin);
  if (vec != 0) {
    const int items = op.num_heads * (half / vec);
    const int threads = std::clamp((items + 31) / 32 * 32, 32, 512);
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(op.x.rows, 1 << 30));
    if (vec == 8) {
      rope_vec_kernel<kBf16Math, 8><<<blocks, threads, 0, ctx.stream>>>(
          x, op.x.stride(), c, op.cos.stride(), s, op.sin.stride(), op.x.rows, op.num_heads, half);
    } else {
      rope_vec_kernel<kBf16Math, 4><<<blocks, threads, 0, ctx.stream>>>(
          x, op.x.stride(), c, op.cos.stride(), s, op.sin.stride(), op.x.rows, op.num_heads, half);
    }
    return launch_status("rope_vec_kernel");
  }
  const int64_t total = op.x.rows * op.num_heads * half;
  rope_kernel<kBf16Math><<<grid_for(total, kThreads), kThreads, 0, ctx.stream>>>(
      x, op.x.stride(), c, op.cos.stride(), s, op.sin.stride(), op.x.rows, op.num_heads, half);
  return launch_status("rope_kernel");
}

}  // namespace

Status run_rope(const OpContext& ctx, const Rope& op, RopeKernel kernel) {
  const int half = op.head_dim / 2;
  const int64_t total = op.x.rows * op.num_heads * half;
  if (total == 0) return Status();
  if (op.math == RopeMath::bf16) return launch_rope<true>(ctx, op, kernel);
  return launch_rope<false>(ctx, op, kernel);
}

Status run_rope_table(const OpContext& ctx, const RopeTable& op) {
  const int half = op.head_dim / 2;
  const int64_t total = op.pos.rows * half;
  if (total == 0) return Status();
  if (op.llama3.factor != 0.0f) {
    InvFreq inv{};
    rope_inv_freq(op, inv.v);
    rope_table_freq_kernel<<<grid_for(total, kThreads), kThreads, 0, ctx.stream>>>(
        ptr<const int32_t>(op.pos), op.pos.stride(), ptr<float>(op.cos), op.cos.stride(),
        ptr<float>(op.sin), op.sin.stride(), op.pos.rows, half, inv, op.sections[1],
        op.sections[2]);
    return launch_status("rope_table_freq_kernel");
  }
  rope_table_kernel<<<grid_for(total, kThreads), kThreads, 0, ctx.stream>>>(
      ptr<const int32_t>(op.pos), op.pos.stride(), ptr<float>(op.cos), op.cos.stride(),
      ptr<float>(op.sin), op.sin.stride(), op.pos.rows, half, op.head_dim, op.theta, op.sections[1],
      op.sections[2]);
  return launch_status("rope_table_kernel");
}

}  // namespace ferry::cuda
