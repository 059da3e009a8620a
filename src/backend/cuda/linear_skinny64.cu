// Linear for 9 <= M <= 64 rows of x (the action expert runs M = 64 with N of 2048-16512, where
// cuBLASLt reaches 1.5-2.8 TB/s): w streamed from HBM straight into registers as in
// linear_skinny.cu (same fragments, same permutation of k), x shared by the block's warps through
// shared memory, K split across blocks when N alone gives too few blocks.
//
// Work split. A block of 4 warps owns 64 rows of w (warp v: rows 16v..16v+15, one mma m-tile) and
// one contiguous range of 64-wide K steps (a split); for each step a warp loads its 16 rows'
// fragments (4 × 16 bytes per lane) and multiplies them by all M rows of x in MT = ceil(M / 8)
// mma n-tiles (M rounded up to 16, 32 or 64), so every byte of w is loaded once and used for all
// of x. x is the reused operand: each block stages the x columns of kUnroll steps (a round) into
// shared memory with cp.async, kStages rounds deep, stored in the order the lanes read them (a
// warp's 16-byte reads are 512 contiguous bytes: no bank conflicts). x comes from L2 (at most
// 64 × K bf16, read by every block), w from HBM. Per byte of w the SM's shared memory moves
// M/64 bytes in (cp.async) and 4·M/64 out (each warp reads all of x): 5 bytes at M = 64, within
// the 128 B/clk of an SM at the ~15 B/clk of w each SM must stream for 4 TB/s.
//
// Splits. With N/64 blocks below kTargetBlocks (2 per SM), K is cut into `splits` ranges (each
// at least kMinSplitSteps steps), a function of N and K only. Each split writes its fp32 sums to
// stream-ordered scratch [split][M][N] and a second kernel adds the splits in index order, then
// bias, rounding and activation. Without splits the main kernel finishes y itself.
//
// Numerics as linear_skinny.cu: exact bf16 products, fp32 accumulation in the mma, each warp's
// steps in increasing k, splits added in order; y = bf16(act(bf16(acc + bias))) or act(acc + bias)
// for f32 y. An f32 x (or a bf16 x whose rows are not 16-byte aligned) is first rounded (copied)
// to a contiguous bf16 scratch, because cp.async moves bytes without converting them.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/device_limits.cuh"
#include "backend/cuda/linear_skinny.cuh"
#include "backend/cuda/linear_skinny_impl.cuh"

namespace ferry::cuda {
namespace {

using skinny::kStepK;
using skinny::load16;
using skinny::mma_chunk;
using skinny::store_y;

constexpr int kWarps = 4;
constexpr int kRowsPerBlock = 16 * kWarps;
constexpr int kStages = 3;              // rounds of x in flight (cp.async groups)
constexpr int64_t kTargetBlocks = 256;  // below this many row blocks, split K
constexpr int64_t kMinSplitSteps = 8;   // K steps per split at least (512 values of k)
constexpr int64_t kMaxSplits = 16;

// 16-byte chunks of x per round: kUnroll steps × 2 chunks × MT n-tiles × 32 lanes.
template <int MT, int kUnroll>
constexpr int kRoundChunks = kUnroll * 2 * MT * 32;

template <int MT, int kUnroll>
constexpr size_t smem_bytes() {
  return size_t{kStages} * kRoundChunks<MT, kUnroll> * 16;
}

// One block: w rows [64·blockIdx.x, +64), K steps of split blockIdx.y (split_steps each). With
// `partial` null the block writes y; otherwise its fp32 sums go to partial[blockIdx.y][m][n].
template <class YT, int MT, int kUnroll>
__global__ void __launch_bounds__(kWarps * 32, kUnroll == 2 ? 4 : 2)
    linear_skinny64_kernel(const bf16_t* __restrict__ x, int64_t ldx, const bf16_t* __restrict__ w,
                           int64_t ldw, const bf16_t* __restrict__ bias, YT* __restrict__ y,
                           int64_t ldy, float* __restrict__ partial, int m_rows, int64_t n_rows,
                           int k_dim, int split_steps, Activation act) {
  extern __shared__ uint4 xs[];
  constexpr int kRound = kRoundChunks<MT, kUnroll>;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int64_t n0 = int64_t{blockIdx.x} * kRowsPerBlock + 16 * warp;
  const int steps = (k_dim + kStepK - 1) / kStepK;
  const int s_begin = static_cast<int>(blockIdx.y) * split_steps;
  const int s_end = min(steps, s_begin + split_steps);
  const int rounds = s_end > s_begin ? (s_end - s_begin + kUnroll - 1) / kUnroll : 0;

  // Round r of x into stage r % kStages. Chunk q = ((u·2 + c)·MT + j)·32 + l holds
  // x[8j + l/4][k0 + 64u + 32c + 8(l%4), +8) with k0 the round's first k: what lane l of every
  // warp multiplies by its w chunk c of step u in n-tile j. Rows past M, steps past the split
  // and k past K are zero-filled (never read from memory).
  auto load_round = [&](int r) {
    uint4* dst = xs + (r % kStages) * kRound;
    static_assert(kRound % (kWarps * 32) == 0, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < kRound / (kWarps * 32); ++i) {
      const int q = tid + i * kWarps * 32;
      const int l = q % 32;
      const int j = (q / 32) % MT;
      const int c = (q / (32 * MT)) % 2;
      const int u = q / (64 * MT);
      const int row = 8 * j + l / 4;
      const int step = s_begin + r * kUnroll + u;
      const int k = step * kStepK + 32 * c + 8 * (l % 4);
      const bool ok = row < m_rows && step < s_end && k < k_dim;
      ptx::cp_async_16(dst + q, ok ? x + row * ldx + k : x, ok);
    }
  };

  const bool lo_ok = n0 + g < n_rows;
  const bool hi_ok = n0 + g + 8 < n_rows;
  const bf16_t* w_lo = w + (lo_ok ? n0 + g : 0) * ldw + 8 * t;
  const bf16_t* w_hi = w + (hi_ok ? n0 + g + 8 : 0) * ldw + 8 * t;

  float acc[MT][4];
#pragma unroll
  for (int j = 0; j < MT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;

    // One commit per round slot, empty or not, so that "round r has landed" is always
    // cp.async.wait_group(kStages - 2) at iteration r.
#pragma unroll
  for (int r = 0; r < kStages - 1; ++r) {
    if (r < rounds) load_round(r);
    ptx::cp_async_commit();
  }
  for (int r = 0; r < rounds; ++r) {
    // This round's w first: its loads fly while the block waits for x.
    uint4 wl[kUnroll][2], wh[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int step = s_begin + r * kUnroll + u;
        const int k = step * kStepK + 32 * c;
        const bool ok = step < s_end && k + 8 * t < k_dim;
        wl[u][c] = load16<false>(w_lo + k, ok && lo_ok);
        wh[u][c] = load16<false>(w_hi + k, ok && hi_ok);
      }
    }
    ptx::cp_async_wait<kStages - 2>();
    __syncthreads();  // round r visible to all; every warp is done with round r - 1's stage
    if (r + kStages - 1 < rounds) load_round(r + kStages - 1);
    ptx::cp_async_commit();
    const uint4* xr = xs + (r % kStages) * kRound + lane;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
#pragma unroll
        for (int j = 0; j < MT; ++j) {
          mma_chunk(acc[j], wl[u][c], wh[u][c], xr[((u * 2 + c) * MT + j) * 32]);
        }
      }
    }
  }
  ptx::cp_async_wait<0>();

  // Lane (g, t): acc[j][0..1] = x rows 8j + 2t, 8j + 2t + 1 at w row n0 + g; acc[j][2..3] the
  // same at w row n0 + g + 8.
#pragma unroll
  for (int j = 0; j < MT; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int m = 8 * j + 2 * t + (e & 1);
      const int64_t n = n0 + g + (e >> 1) * 8;
      if (m >= m_rows || n >= n_rows) continue;
      if (partial != nullptr) {
        partial[(int64_t{blockIdx.y} * m_rows + m) * n_rows + n] = acc[j][e];
      } else {
        float v = acc[j][e];
        if (bias != nullptr) v = __fadd_rn(v, to_float(bias[n]));
        store_y(y + m * ldy + n, v, act);
      }
    }
  }
}

// y = finish(Σ_s partial[s] (+ bias)), the splits added in index order.
template <class YT>
__global__ void skinny64_combine_kernel(const float* __restrict__ partial, int splits,
                                        const bf16_t* __restrict__ bias, YT* __restrict__ y,
                                        int64_t ldy, int64_t m_rows, int64_t n_rows,
                                        Activation act) {
  const int64_t total = m_rows * n_rows;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    float v = partial[i];
    for (int s = 1; s < splits; ++s) v = __fadd_rn(v, partial[s * total + i]);
    const int64_t m = i / n_rows;
    const int64_t n = i - m * n_rows;
    if (bias != nullptr) v = __fadd_rn(v, to_float(bias[n]));
    store_y(y + m * ldy + n, v, act);
  }
}

// x as contiguous bf16 [M, K] (f32 rounded to nearest even, as ops.h says; bf16 copied).
template <class XT>
__global__ void skinny64_x_kernel(const XT* __restrict__ x, int64_t ldx, bf16_t* __restrict__ out,
                                  int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    if constexpr (sizeof(XT) == 4) {
      out[i] = f32_to_bf16(x[r * ldx + c]);
    } else {
      out[i] = x[r * ldx + c];
    }
  }
}

constexpr int kElementwiseThreads = 256;

uintptr_t address(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

struct Launch {
  const bf16_t* x;
  int64_t ldx;
  float* partial;  // null: no splits
  int splits;
  int split_steps;
};

template <class YT, int MT, int kUnroll>
Status launch(const OpContext& ctx, const DeviceLimits& dev, const Linear& op, const Launch& l) {
  constexpr size_t kSmem = smem_bytes<MT, kUnroll>();
  // Over 48 KB of dynamic shared memory needs the opt-in, per kernel and device.
  FERRY_RETURN_IF_ERROR(
      opt_in_shared(dev, reinterpret_cast<const void*>(linear_skinny64_kernel<YT, MT, kUnroll>),
                    static_cast<int>(kSmem), "linear_skinny64_kernel"));
  const int64_t n = op.y.cols;
  const dim3 grid(static_cast<unsigned>((n + kRowsPerBlock - 1) / kRowsPerBlock),
                  static_cast<unsigned>(l.splits));
  linear_skinny64_kernel<YT, MT, kUnroll><<<grid, kWarps * 32, kSmem, ctx.stream>>>(
      l.x, l.ldx, ptr<const bf16_t>(op.w), op.w.stride(),
      op.bias.empty() ? nullptr : ptr<const bf16_t>(op.bias), ptr<YT>(op.y), op.y.stride(),
      l.partial, static_cast<int>(op.y.rows), n, static_cast<int>(op.w.cols), l.split_steps,
      op.act);
  FERRY_RETURN_IF_ERROR(launch_status("linear_skinny64_kernel"));
  if (l.partial == nullptr) return Status();
  skinny64_combine_kernel<YT>
      <<<grid_for(op.y.rows * n, kElementwiseThreads), kElementwiseThreads, 0, ctx.stream>>>(
          l.partial, l.splits, op.bias.empty() ? nullptr : ptr<const bf16_t>(op.bias),
          ptr<YT>(op.y), op.y.stride(), op.y.rows, n, op.act);
  return launch_status("skinny64_combine_kernel");
}

int mt_for(int64_t m) {
  return m <= 16 ? 2 : (m <= 32 ? 4 : 8);
}

template <class YT, int kUnroll>
Status launch_mt(const OpContext& ctx, const DeviceLimits& dev, const Linear& op, const Launch& l) {
  switch (mt_for(op.y.rows)) {
    case 2:
      return launch<YT, 2, kUnroll>(ctx, dev, op, l);
    case 4:
      return launch<YT, 4, kUnroll>(ctx, dev, op, l);
    default:
      return launch<YT, 8, kUnroll>(ctx, dev, op, l);
  }
}

template <int kUnroll>
Status launch_unroll(const OpContext& ctx, const DeviceLimits& dev, const Linear& op,
                     const Launch& l) {
  return op.y.dtype == DType::bf16 ? launch_mt<bf16_t, kUnroll>(ctx, dev, op, l)
                                   : launch_mt<float, kUnroll>(ctx, dev, op, l);
}

size_t smem_for(int mt, int unroll) {
  switch (mt) {
    case 2:
      return unroll == 2 ? smem_bytes<2, 2>() : smem_bytes<2, 4>();
    case 4:
      return unroll == 2 ? smem_bytes<4, 2>() : smem_bytes<4, 4>();
    default:
      return unroll == 2 ? smem_bytes<8, 2>() : smem_bytes<8, 4>();
  }
}

}  // namespace

int linear_skinny64_unroll(int64_t m, int unroll, size_t allowed) {
  if (unroll == 4 && smem_for(mt_for(m), 4) <= allowed) return 4;
  return smem_for(mt_for(m), 2) <= allowed ? 2 : 0;
}

bool linear_skinny64_fits(const Linear& op) {
  const int64_t m = op.y.rows;
  const int64_t k = op.w.cols;
  return m > kSkinnyMaxM && m <= kSkinny64MaxM && k > 0 && k % 8 == 0 && k <= (int64_t{1} << 30) &&
         op.w.stride() % 8 == 0 && address(op.w.data) % 16 == 0;
}

int linear_skinny64_splits(int64_t n, int64_t k) {
  const int64_t blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  const int64_t steps = (k + kStepK - 1) / kStepK;
  int64_t splits = (kTargetBlocks + blocks - 1) / blocks;
  splits = std::min({splits, std::max<int64_t>(1, steps / kMinSplitSteps), kMaxSplits});
  return static_cast<int>(std::max<int64_t>(1, splits));
}

Status run_linear_skinny64(const OpContext& ctx, const Linear& op, Skinny64Config config) {
  if (!linear_skinny64_fits(op)) {
    return make_error(ErrorCode::invalid_argument, "linear_skinny64: the op does not fit");
  }
  if (config.unroll != 2 && config.unroll != 4) {
    return make_error(ErrorCode::invalid_argument, "linear_skinny64: unroll must be 2 or 4, got " +
                                                       std::to_string(config.unroll));
  }
  const int64_t m = op.y.rows;
  const int64_t n = op.y.cols;
  const int64_t k = op.w.cols;
  if (n == 0) return Status();
  // The unroll asked for when its x stages fit the device's shared memory, else 2 (M = 64 with
  // unroll 4 stages 96 KB). Each warp adds its steps in k order whatever the unroll: same bits.
  FERRY_ASSIGN_OR_RETURN(const DeviceLimits* dev, limits_for(ctx.limits));
  const int unroll =
      linear_skinny64_unroll(m, config.unroll, static_cast<size_t>(shared_bytes_allowed(*dev)));
  if (unroll == 0) {
    return make_error(ErrorCode::unsupported,
                      "linear_skinny64: the x stages need more shared "
                      "memory than " +
                          dev->name + " allows");
  }

  Launch l{ptr<const bf16_t>(op.x), op.x.stride(), nullptr, 1, 0};
  StreamScratch x_bf16;
  const bool x_direct =
      op.x.dtype == DType::bf16 && address(op.x.data) % 16 == 0 && op.x.stride() % 8 == 0;
  if (!x_direct) {
    FERRY_ASSIGN_OR_RETURN(x_bf16, take_scratch(ctx, static_cast<size_t>(m * k) * 2));
    auto* out = static_cast<bf16_t*>(x_bf16.get());
    const unsigned blocks = grid_for(m * k, kElementwiseThreads);
    if (op.x.dtype == DType::f32) {
      skinny64_x_kernel<float><<<blocks, kElementwiseThreads, 0, ctx.stream>>>(
          ptr<const float>(op.x), op.x.stride(), out, m, k);
    } else {
      skinny64_x_kernel<bf16_t><<<blocks, kElementwiseThreads, 0, ctx.stream>>>(
          ptr<const bf16_t>(op.x), op.x.stride(), out, m, k);
    }
    FERRY_RETURN_IF_ERROR(launch_status("skinny64_x_kernel"));
    l.x = out;
    l.ldx = k;
  }

  // Splits of whole steps; the count is recomputed from the steps per split so that none is
  // empty.
  const int64_t steps = (k + kStepK - 1) / kStepK;
  const int64_t want = config.splits > 0 ? config.splits : linear_skinny64_splits(n, k);
  const int64_t split_steps =
      (steps + std::clamp<int64_t>(want, 1, steps) - 1) / std::clamp<int64_t>(want, 1, steps);
  l.split_steps = static_cast<int>(split_steps);
  l.splits = static_cast<int>((steps + split_steps - 1) / split_steps);
  StreamScratch partial;
  if (l.splits > 1) {
    FERRY_ASSIGN_OR_RETURN(partial, take_scratch(ctx, static_cast<size_t>(l.splits * m * n) * 4));
    l.partial = static_cast<float*>(partial.get());
  }
  return unroll == 2 ? launch_unroll<2>(ctx, *dev, op, l) : launch_unroll<4>(ctx, *dev, op, l);
}

}  // namespace ferry::cuda
