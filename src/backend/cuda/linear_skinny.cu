// Linear for M <= 8 rows of x: stream w once from HBM, multiply on the tensor cores.
//
// Why not cuBLASLt: at M = 1 its kernels read w at 1.7 TB/s (N = 4096) to 2.8 TB/s (K = 12288) on
// the H200, whose HBM delivers ~4 TB/s. A GEMV is nothing but the read of w, so the kernel below is
// shaped around keeping enough 16-byte loads of w in flight on every SM.
//
// Work split. y[m, n] = Σ_k x[m, k]·w[n, k]. One mma.m16n8k16 multiplies 16 rows of w (operand A,
// "row": w's own [N, K] layout) by 8 rows of x (operand B, "col": x's own [M, K] layout) over 16
// values of k, so all M <= 8 rows share one mma (rows of x past M are zeros). A block owns 16 rows
// of w and all of K; its warps split K into 64-wide steps taken in turn (warp v takes steps v,
// v + warps, ...), so at any moment the block reads contiguous runs of every row. N = 4096 gives
// 256 blocks of 8 warps: two per SM, 16 warps each with 2 steps (2 KB per step) of loads in flight,
// ~64 KB per SM, twice what Little's law asks for at ~4 TB/s and ~1 µs of loaded latency.
//
// Fragments straight from global memory, no shared memory in the loop. Lane (g = lane / 4,
// t = lane % 4) loads, per step at k0, 16 bytes of w rows g and g + 8 at k0 + 8t (chunk 0) and at
// k0 + 32 + 8t (chunk 1), and the same 16 bytes of x row g. The mma's k is only a summation index,
// so any permutation of k applied to A and B alike gives the same products: each chunk feeds two
// mmas, the first taking the mma's k pairs (2t, 2t+1) and (2t+8, 2t+9) from the lane's own
// k0 + 8t + {0,1} and {2,3}, the second from {4,5} and {6,7}. Every load is then a 16-byte load of
// the row-major tensors, and the 4 lanes of a row read 64 contiguous bytes per chunk (two whole
// 32-byte sectors). w is read with ld.global.nc.L1::no_allocate (each byte is used once); x through
// the read-only cache (every block reads all of it; it stays in L1/L2).
//
// Numerics (ops.h). The products of bf16 values are exact and the mma accumulates in fp32; an f32 x
// is rounded to bf16 as it is loaded (cvt.rn.bf16x2: round to nearest even, as f32_to_bf16; a NaN
// stays a NaN). Each warp sums its steps in increasing k; the block adds the warps' partials in
// warp order through shared memory; then y = bf16(act(bf16(acc + bias))) or, for f32 y, act(acc +
// bias). No atomics: the same shape gives the same bits on every run. The summation order differs
// from cuBLASLt's, so the two agree to rounding, not bit for bit.
#include <cstdint>
#include <string>

#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/linear_skinny.cuh"
#include "backend/cuda/linear_skinny_impl.cuh"

namespace ferry::cuda {
namespace {

using skinny::kStepK;
using skinny::load16;
using skinny::load_x8;
using skinny::mma_chunk;
using skinny::store_y;

constexpr int kRowsPerBlock = 16;  // w rows: one mma m-tile

// One block: rows [16·blockIdx.x, +16) of y for all M rows of x. kVec: x rows allow 16-byte loads.
// At least 2 blocks per SM: a budget of up to 128 registers, which lets ptxas keep a whole round
// of loads in registers (it takes ~80 at the default shape; see load16).
template <class XT, class YT, int kWarps, int kUnroll, bool kVec>
__global__ void __launch_bounds__(kWarps * 32, 2)
    linear_skinny_kernel(const XT* __restrict__ x, int64_t ldx, const bf16_t* __restrict__ w,
                         int64_t ldw, const bf16_t* __restrict__ bias, YT* __restrict__ y,
                         int64_t ldy, int m_rows, int64_t n_rows, int k_dim, Activation act) {
  static_assert(kWarps >= 4, "the epilogue uses 128 threads");
  __shared__ float4 partial[kWarps][32];
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = int64_t{blockIdx.x} * kRowsPerBlock;

  // Rows past N, x rows past M and chunks past K load nothing (the predicate is false) and
  // multiply as zeros; the row pointers of absent rows are clamped to row 0.
  const bool lo_ok = n0 + g < n_rows;
  const bool hi_ok = n0 + g + 8 < n_rows;
  const bool x_ok = g < m_rows;
  const bf16_t* w_lo = w + (lo_ok ? n0 + g : 0) * ldw + 8 * t;
  const bf16_t* w_hi = w + (hi_ok ? n0 + g + 8 : 0) * ldw + 8 * t;
  const XT* x_row = x + (x_ok ? g : 0) * ldx + 8 * t;

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int steps = (k_dim + kStepK - 1) / kStepK;
  for (int s0 = warp; s0 < steps; s0 += kWarps * kUnroll) {
    // All of this round's loads first (kUnroll steps × 3 rows × 2 chunks of 16 bytes per lane),
    // then the mmas: the loads of the round are in flight together.
    uint4 wl[kUnroll][2], wh[kUnroll][2], xv[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        // k of this lane's chunk, minus the 8t already in the row pointers. K is a multiple of 8,
        // so a chunk is either wholly inside K or wholly past it (the last step may be partial).
        const int k = (s0 + u * kWarps) * kStepK + 32 * c;
        const bool k_ok = k + 8 * t < k_dim;
        wl[u][c] = load16<false>(w_lo + k, k_ok && lo_ok);
        wh[u][c] = load16<false>(w_hi + k, k_ok && hi_ok);
        xv[u][c] = load_x8<kVec>(x_row + k, k_ok && x_ok);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int c = 0; c < 2; ++c) mma_chunk(acc, wl[u][c], wh[u][c], xv[u][c]);
    }
  }

  // Accumulator of lane (g, t): acc[0..1] = y rows 2t, 2t+1 at w row g; acc[2..3] the same at w
  // row g + 8. The warps' partials are added in warp order.
  partial[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  const int i = static_cast<int>(threadIdx.x);
  if (i >= 4 * 32) return;
  const float* p = &partial[0][0].x;
  float sum = p[i];
#pragma unroll
  for (int v = 1; v < kWarps; ++v) sum = __fadd_rn(sum, p[v * 4 * 32 + i]);
  const int src_lane = i / 4;
  const int j = i % 4;
  const int64_t n = n0 + src_lane / 4 + (j / 2) * 8;
  const int m = 2 * (src_lane % 4) + j % 2;
  if (n >= n_rows || m >= m_rows) return;
  if (bias != nullptr) sum = __fadd_rn(sum, to_float(bias[n]));
  store_y(y + m * ldy + n, sum, act);
}

uintptr_t address(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

template <class XT, class YT, int kWarps, int kUnroll, bool kVec>
Status launch(const OpContext& ctx, const Linear& op) {
  const int64_t n = op.y.cols;
  const auto blocks = static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock);
  linear_skinny_kernel<XT, YT, kWarps, kUnroll, kVec><<<blocks, kWarps * 32, 0, ctx.stream>>>(
      ptr<const XT>(op.x), op.x.stride(), ptr<const bf16_t>(op.w), op.w.stride(),
      op.bias.empty() ? nullptr : ptr<const bf16_t>(op.bias), ptr<YT>(op.y), op.y.stride(),
      static_cast<int>(op.y.rows), n, static_cast<int>(op.w.cols), op.act);
  return launch_status("linear_skinny_kernel");
}

template <int kWarps, int kUnroll, bool kVec>
Status launch_types(const OpContext& ctx, const Linear& op) {
  const bool x_bf16 = op.x.dtype == DType::bf16;
  if (op.y.dtype == DType::bf16) {
    return x_bf16 ? launch<bf16_t, bf16_t, kWarps, kUnroll, kVec>(ctx, op)
                  : launch<float, bf16_t, kWarps, kUnroll, kVec>(ctx, op);
  }
  return x_bf16 ? launch<bf16_t, float, kWarps, kUnroll, kVec>(ctx, op)
                : launch<float, float, kWarps, kUnroll, kVec>(ctx, op);
}

// Whether every 8-value chunk of x that the kernel loads is 16-byte aligned.
bool x_vector_loads(const TensorView& x) {
  const int64_t per16 = x.dtype == DType::bf16 ? 8 : 4;  // elements per 16 bytes
  return address(x.data) % 16 == 0 && x.stride() % per16 == 0;
}

}  // namespace

bool linear_skinny_fits(const Linear& op) {
  const int64_t m = op.y.rows;
  const int64_t k = op.w.cols;
  return m >= 1 && m <= kSkinnyMaxM && k > 0 && k % 8 == 0 && k <= (int64_t{1} << 30) &&
         op.w.stride() % 8 == 0 && address(op.w.data) % 16 == 0;
}

Status run_linear_skinny(const OpContext& ctx, const Linear& op, SkinnyConfig config) {
  if (!linear_skinny_fits(op)) {
    return make_error(ErrorCode::invalid_argument, "linear_skinny: the op does not fit");
  }
  if (op.y.cols == 0) return Status();
  // Element loads of x only in the default shape (x views that are not 16-byte aligned are rare;
  // the benchmark's sweep uses aligned ones).
  if (!x_vector_loads(op.x)) {
    if (config.warps != 8 || config.unroll != 2) {
      return make_error(ErrorCode::invalid_argument,
                        "linear_skinny: unaligned x only with the default config");
    }
    return launch_types<8, 2, false>(ctx, op);
  }
  switch (config.warps * 10 + config.unroll) {
    case 82:
      return launch_types<8, 2, true>(ctx, op);
    case 81:
      return launch_types<8, 1, true>(ctx, op);
    case 84:
      return launch_types<8, 4, true>(ctx, op);
    case 42:
      return launch_types<4, 2, true>(ctx, op);
    case 44:
      return launch_types<4, 4, true>(ctx, op);
    default:
      return make_error(ErrorCode::invalid_argument,
                        "linear_skinny: unsupported config " + std::to_string(config.warps) +
                            " warps, unroll " + std::to_string(config.unroll));
  }
}

}  // namespace ferry::cuda
