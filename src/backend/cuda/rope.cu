// Elementwise rotary kernels. Every product and sum is written with an explicit _rn intrinsic so
// that nvcc cannot contract a*b - c*d into an FMA: the rounding points are exactly those that
// ops.h documents, and the CPU reference computes the same values.
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
    int col = 0;
    if (j < 3 * sec_h && j % 3 == 1) {
      col = 1;
    } else if (j < 3 * sec_w && j % 3 == 2) {
      col = 2;
    }
    const float expo = __fdiv_rn(static_cast<float>(2 * j), static_cast<float>(head_dim));
    const float p = static_cast<float>(pow(static_cast<double>(theta), static_cast<double>(expo)));
    const float inv_freq = __fdiv_rn(1.0f, p);
    const float angle = __fmul_rn(static_cast<float>(pos[r * ps + col]), inv_freq);
    cos_t[r * cs + j] = static_cast<float>(cos(static_cast<double>(angle)));
    sin_t[r * ss + j] = static_cast<float>(sin(static_cast<double>(angle)));
  }
}

}  // namespace

Status run_rope(const OpContext& ctx, const Rope& op) {
  const int half = op.head_dim / 2;
  const int64_t total = op.x.rows * op.num_heads * half;
  if (total == 0) return Status();
  const unsigned grid = grid_for(total, kThreads);
  if (op.math == RopeMath::bf16) {
    rope_kernel<true><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.x), op.x.stride(), ptr<const float>(op.cos), op.cos.stride(),
        ptr<const float>(op.sin), op.sin.stride(), op.x.rows, op.num_heads, half);
  } else {
    rope_kernel<false><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.x), op.x.stride(), ptr<const float>(op.cos), op.cos.stride(),
        ptr<const float>(op.sin), op.sin.stride(), op.x.rows, op.num_heads, half);
  }
  return launch_status("rope_kernel");
}

Status run_rope_table(const OpContext& ctx, const RopeTable& op) {
  const int half = op.head_dim / 2;
  const int64_t total = op.pos.rows * half;
  if (total == 0) return Status();
  rope_table_kernel<<<grid_for(total, kThreads), kThreads, 0, ctx.stream>>>(
      ptr<const int32_t>(op.pos), op.pos.stride(), ptr<float>(op.cos), op.cos.stride(),
      ptr<float>(op.sin), op.sin.stride(), op.pos.rows, half, op.head_dim, op.theta, op.sections[1],
      op.sections[2]);
  return launch_status("rope_table_kernel");
}

}  // namespace ferry::cuda
