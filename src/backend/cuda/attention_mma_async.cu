// Attention on tensor cores, the pipelined variants: the arithmetic of attention_mma.cu (same
// fragments, same tile order, same rounding sequence, so the same bits when the key tiles and
// splits agree; exp2 differs only below 2^−126, see exp2_ftz), with three structural changes for
// many small blocks (the vision tower: 16 images x 720 rows x 16 heads in one segmented launch):
//
// - K/V tiles go global -> shared with cp.async into two stages: tile t+1 streams in while tile t
//   is computed, with no staging registers (attention_mma.cu holds the next tile in 40 registers
//   for head_dim 80) and one barrier per tile instead of two.
// - kWarps x kMTiles sets the rows of a block. 8 warps (128 rows) halve the K/V traffic per row
//   from L2 into shared memory. 2 m-tiles per warp (32 rows) make every K and V fragment that
//   ldmatrix brings out of shared memory feed two mma instead of one: at 16 rows per warp, 40
//   ldmatrix.x4 (20 KB) per 120 mma of a 64-key tile ask ~75% of the SM's 128 B/clock of shared
//   memory bandwidth at the mma.sync rate; at 32 rows, half that.
// - A cheaper softmax per element: no mask on tiles that the thread's rows see whole, no −∞ test
//   before exp2 (exp2(−∞ − m) is already 0; a row that has seen nothing uses 0 as reference),
//   exp2 as one MUFU op. Hot loop per warp and 64-key tile at head_dim 80 (SASS): ~630
//   instructions for 120 HMMA at 16 rows per warp, ~1070 for 240 at 32.
#include "backend/cuda/attention_impl.cuh"
#include "backend/cuda/attention_mma_frag.cuh"
#include "backend/cuda/cuda_check.h"

namespace ferry::cuda {
namespace {

using mma::cp_async16;
using mma::cp_async_commit;
using mma::cp_async_wait_all;
using mma::cvt_bf16x2;
using mma::ldmatrix_x4;
using mma::ldmatrix_x4_trans;
using mma::mma_bf16;
using mma::q_pair;

// Keys per tile: 64, or 32 for head_dim 128 (the accumulators of 64 keys x 128 dims would not
// fit next to O in registers), as in attention_mma.cu.
template <int DP>
constexpr int tile_keys() {
  return DP >= 128 ? 32 : 64;
}

// Blocks per SM the register allocation must allow (ptxas -v, head_dim 80). 16-row warps: 16 warps
// per SM, 128 registers (192 unbounded; the bound costs ~50 bytes of spills, ~10 spill loads per
// tile that hit L1). 32-row warps (O, Q and scores of two m-tiles): 8 warps per SM, 255 registers
// (4 spill loads per tile). head_dim 128 (~206 registers, no spills): 8 warps per SM.
template <int DP, int kWarps, int kMTiles>
constexpr int min_blocks() {
  return (kMTiles == 2 || DP >= 128 ? 8 : 16) / kWarps;
}

template <int DP, int kWarps, int kMTiles>
__global__ void __launch_bounds__(kWarps * 32, (min_blocks<DP, kWarps, kMTiles>()))
    attention_mma_async_kernel(const AttnParams p) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kBlockRows = kWarps * 16 * kMTiles;
  constexpr int kTile = tile_keys<DP>();
  constexpr int kKStride = DP + 8;   // bf16; +16 bytes: ldmatrix rows hit distinct banks
  constexpr int kChunks = DP / 16;   // k-chunks of Q·Kᵀ
  constexpr int kDimTiles = DP / 8;  // n-tiles of P·V
  constexpr int kTileElems = kTile * kKStride;
  // [stage][K, V]: 45 KB for head_dim 80, under the 48 KB of static shared memory.
  __shared__ __align__(128) bf16_t smem[2][2][kTileElems];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int d_head = p.head_dim;
  const int kvh = static_cast<int>(blockIdx.y);
  const BlockRange range = attention_block_range(p, kBlockRows);
  if (range.row0 >= range.row_end) return;  // a row block past its segment's end
  const int64_t row_end = range.row_end;
  const int64_t row0 = range.row0;

  // Row (query · group + head-of-group) h of m-tile mt of this thread.
  auto row_of = [&](int mt, int h) { return row0 + (warp * kMTiles + mt) * 16 + g + 8 * h; };
  uint32_t qf[kMTiles][kChunks][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const bf16_t* qrow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t gr = row_of(mt, h);
      const int64_t qi = gr / p.group;
      qrow[h] = gr < row_end
                    ? p.q + qi * p.q_stride + (int64_t{kvh} * p.group + gr - qi * p.group) * d_head
                    : nullptr;
    }
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      qf[mt][c][0] = q_pair(qrow[0], c * 16 + 2 * t, d_head);
      qf[mt][c][1] = q_pair(qrow[1], c * 16 + 2 * t, d_head);
      qf[mt][c][2] = q_pair(qrow[0], c * 16 + 2 * t + 8, d_head);
      qf[mt][c][3] = q_pair(qrow[1], c * 16 + 2 * t + 8, d_head);
    }
  }

  // Key range of this block, cut at the last key any of its rows may see. Inside the loop keys
  // are offsets from kb in 32 bits (run_attention refuses more than 2^31 − 1 keys).
  const int64_t q_pos0 = attn_q_pos0(p);
  const int64_t kb = range.key_begin;
  int64_t ke = range.key_end;
  if (p.causal) {
    int64_t last_row = row0 + kBlockRows - 1;
    if (last_row >= row_end) last_row = row_end - 1;
    const int64_t limit = q_pos0 + last_row / p.group + 1;
    if (ke > limit) ke = limit;
  }
  const int nkeys = ke > kb ? static_cast<int>(ke - kb) : 0;
  // Keys [kb, kb + visible) are visible to a row (none for a row past the end).
  int visible[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t gr = row_of(mt, h);
      int64_t lim = ke;
      if (p.causal && q_pos0 + gr / p.group + 1 < lim) lim = q_pos0 + gr / p.group + 1;
      visible[mt][h] = gr < row_end && lim > kb ? static_cast<int>(lim - kb) : 0;
    }
  }

  // cp.async writes dims [0, head_dim) of each row; the padding dims stay zero for the whole
  // kernel (0·x must not meet garbage NaNs). Keys past the range are zero-filled by cp.async.
  constexpr int kVecPerRow = DP / 8;  // 16-byte vectors per K/V row (an upper bound)
  const int vec_per_row = d_head / 8;
  for (int i = tid; i < 4 * kTile * kVecPerRow; i += kThreads) {
    const int kd = i % kVecPerRow;
    if (kd >= vec_per_row) {
      *reinterpret_cast<uint4*>(&smem[0][0][0] + (i / kVecPerRow) * kKStride + kd * 8) =
          make_uint4(0, 0, 0, 0);
    }
  }

  // Thread tid copies 16-byte vector kd of rows kj0, kj0 + kRowStep, ... of each tile, so that a
  // pass to the next row is one pointer increment (dims fastest across threads: coalesced reads,
  // conflict-free 16-byte shared stores). Threads past kRowStep·kVecPerRow, and the vectors past
  // head_dim, copy nothing.
  constexpr int kRowStep = kThreads / kVecPerRow;
  constexpr int kPasses = (kTile + kRowStep - 1) / kRowStep;
  const int kj0 = tid / kVecPerRow;
  const int kd = tid - kj0 * kVecPerRow;
  const bool loader = kj0 < kRowStep && kd < vec_per_row;
  const int64_t col = int64_t{kvh} * d_head + kd * 8;
  auto load_tile = [&](int j0, int stage) {
    bf16_t* sk = &smem[stage][0][kj0 * kKStride + kd * 8];
    bf16_t* sv = &smem[stage][1][kj0 * kKStride + kd * 8];
    const int64_t t0 = kb + j0;
    if (!loader) {
      // nothing to copy
    } else if (j0 + kTile <= nkeys && (t0 + kTile <= p.span0 || t0 >= p.span0)) {
      // Every key of the tile exists and lies in one span (all tiles but the last and the one
      // that straddles the spans): the pointers advance by a stride, nothing is tested.
      const bool s0 = t0 < p.span0;
      const int64_t row = (s0 ? t0 : t0 - p.span0) + kj0;
      const int64_t kst = s0 ? p.k_stride[0] : p.k_stride[1];
      const int64_t vst = s0 ? p.v_stride[0] : p.v_stride[1];
      const bf16_t* gk = (s0 ? p.k[0] : p.k[1]) + row * kst + col;
      const bf16_t* gv = (s0 ? p.v[0] : p.v[1]) + row * vst + col;
#pragma unroll
      for (int u = 0; u < kPasses; ++u) {
        if (kPasses * kRowStep <= kTile || kj0 + u * kRowStep < kTile) {
          cp_async16(sk + u * kRowStep * kKStride, gk, true);
          cp_async16(sv + u * kRowStep * kKStride, gv, true);
        }
        gk += kRowStep * kst;
        gv += kRowStep * vst;
      }
    } else {
      // Key by key. Keys past the range are zero-filled (cp.async reads nothing then; the address
      // it is given is key kb's anyway, so that no address out of the buffers is ever formed).
#pragma unroll
      for (int u = 0; u < kPasses; ++u) {
        if (kPasses * kRowStep <= kTile || kj0 + u * kRowStep < kTile) {
          const bool valid = j0 + kj0 + u * kRowStep < nkeys;
          const int64_t key = valid ? t0 + kj0 + u * kRowStep : kb;
          const bool s0 = key < p.span0;
          const int64_t row = s0 ? key : key - p.span0;
          cp_async16(sk + u * kRowStep * kKStride,
                     (s0 ? p.k[0] : p.k[1]) + row * (s0 ? p.k_stride[0] : p.k_stride[1]) + col,
                     valid);
          cp_async16(sv + u * kRowStep * kKStride,
                     (s0 ? p.v[0] : p.v[1]) + row * (s0 ? p.v_stride[0] : p.v_stride[1]) + col,
                     valid);
        }
      }
    }
    cp_async_commit();
  };

  float o[kMTiles][kDimTiles][4];
  float m[kMTiles][2];
  float l[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  if (nkeys > 0) load_tile(0, 0);
  int stage = 0;
  for (int j0 = 0; j0 < nkeys; j0 += kTile, stage ^= 1) {
    // Tile j0 has landed for every thread, and every warp is done with the other stage (tile
    // j0 − kTile), which the next load overwrites.
    cp_async_wait_all();
    __syncthreads();
    if (j0 + kTile < nkeys) load_tile(j0 + kTile, stage ^ 1);
    // ldmatrix and mma are .sync.aligned: every lane must execute them together. The loader's
    // per-lane branches above (and the masked/unmasked softmax below) may leave the warp
    // diverged under independent thread scheduling, so it is reconverged explicitly.
    __syncwarp();
    const bf16_t* ks = smem[stage][0];
    const bf16_t* vs = smem[stage][1];

    // S = Q·Kᵀ for the warp's m-tiles × kTile keys. ldmatrix.x4 gives the B fragments of key
    // tiles n and n+1 for one 16-dim chunk: lane i points at row (i % 8) of matrix i / 8 =
    // (tile n + (i/8)/2, dims +8·((i/8)%2)); each fragment serves every m-tile.
    float sc[kMTiles][kTile / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n)
        sc[mt][n][0] = sc[mt][n][1] = sc[mt][n][2] = sc[mt][n][3] = 0;
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; n += 2) {
      const bf16_t* kaddr =
          &ks[(n * 8 + (lane / 16) * 8 + lane % 8) * kKStride + ((lane / 8) % 2) * 8];
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        uint32_t b[4];
        ldmatrix_x4(b, kaddr + c * 16);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16(sc[mt][n], qf[mt][c], b[0], b[1]);
          mma_bf16(sc[mt][n + 1], qf[mt][c], b[2], b[3]);
        }
      }
    }

    // Scale, mask, and the online softmax update of rows g (h = 0) and g + 8 (h = 1) of each
    // m-tile: the rounding sequence of attention_mma.cu.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      int visible_in_tile[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int v = visible[mt][h] - j0;
        visible_in_tile[h] = v < 0 ? 0 : (v > kTile ? kTile : v);
      }
      float tile_max[2] = {-INFINITY, -INFINITY};
      if (visible_in_tile[0] == kTile && visible_in_tile[1] == kTile) {
#pragma unroll
        for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sc[mt][n][e] = __fmul_rn(sc[mt][n][e], p.scale_log2);
            tile_max[e / 2] = fmaxf(tile_max[e / 2], sc[mt][n][e]);
          }
        }
      } else {
#pragma unroll
        for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int h = e / 2;
            const bool visible = n * 8 + 2 * t + (e % 2) < visible_in_tile[h];
            sc[mt][n][e] = visible ? __fmul_rn(sc[mt][n][e], p.scale_log2) : -INFINITY;
            tile_max[h] = fmaxf(tile_max[h], sc[mt][n][e]);
          }
        }
      }
      float corr[2];
      float m_ref[2];  // the exp2 reference: m_new, or 0 while the row has seen nothing
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const float m_new = fmaxf(m[mt][h], tile_max[h]);
        corr[h] = m_new == -INFINITY ? 1.0f : mma::exp2_ftz(__fsub_rn(m[mt][h], m_new));
        m_ref[h] = m_new == -INFINITY ? 0.0f : m_new;
        m[mt][h] = m_new;
      }
      float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          // A masked score is −∞ and m_ref finite: exp2 gives exactly the 0 it must.
          const float pe = mma::exp2_ftz(__fsub_rn(sc[mt][n][e], m_ref[e / 2]));
          sc[mt][n][e] = pe;
          tile_sum[e / 2] = __fadd_rn(tile_sum[e / 2], pe);
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_sum[h] = __fadd_rn(tile_sum[h], __shfl_xor_sync(0xffffffffu, tile_sum[h], 1));
        tile_sum[h] = __fadd_rn(tile_sum[h], __shfl_xor_sync(0xffffffffu, tile_sum[h], 2));
        l[mt][h] = __fmaf_rn(l[mt][h], corr[h], tile_sum[h]);
      }
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        o[mt][n][0] = __fmul_rn(o[mt][n][0], corr[0]);
        o[mt][n][1] = __fmul_rn(o[mt][n][1], corr[0]);
        o[mt][n][2] = __fmul_rn(o[mt][n][2], corr[1]);
        o[mt][n][3] = __fmul_rn(o[mt][n][3], corr[1]);
      }
    }

    // O += P·V, P as hi + lo bf16 terms (the score accumulators of key tiles 2kk, 2kk+1 are the
    // A fragment of P for k-chunk kk).
    __syncwarp();  // after the per-lane softmax branches, before ldmatrix/mma (see above)
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      uint32_t a_hi[kMTiles][4];
      uint32_t a_lo[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int n = 2 * kk + r / 2;
          const int e = (r % 2) * 2;
          const float p0 = sc[mt][n][e];
          const float p1 = sc[mt][n][e + 1];
          a_hi[mt][r] = cvt_bf16x2(p0, p1);
          const float h0 = __uint_as_float(a_hi[mt][r] << 16);
          const float h1 = __uint_as_float(a_hi[mt][r] & 0xffff0000u);
          a_lo[mt][r] = cvt_bf16x2(__fsub_rn(p0, h0), __fsub_rn(p1, h1));
        }
      }
      // ldmatrix.x4.trans on row-major V gives the B fragments of dim tiles n and n+1: lane i
      // points at key row kk·16 + 8·((i/8)%2) + i%8, dims (n + (i/8)/2)·8.
      const bf16_t* vaddr =
          &vs[(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kKStride + (lane / 16) * 8];
#pragma unroll
      for (int n = 0; n < kDimTiles; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vaddr + n * 8);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16(o[mt][n], a_hi[mt], b[0], b[1]);
          mma_bf16(o[mt][n], a_lo[mt], b[0], b[1]);
          mma_bf16(o[mt][n + 1], a_hi[mt], b[2], b[3]);
          mma_bf16(o[mt][n + 1], a_lo[mt], b[2], b[3]);
        }
      }
    }
  }

  // Write: the final bf16 rows (two dims per 4-byte store when the output allows it), or this
  // split's partial state (unnormalized o, m, l).
  const bool pair_store = (reinterpret_cast<uintptr_t>(p.out) % 4 == 0) && (p.out_stride % 2 == 0);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t gr = row_of(mt, h);
      if (gr >= row_end) continue;
      const int64_t qi = gr / p.group;
      const int64_t head = int64_t{kvh} * p.group + gr - qi * p.group;
      if (p.part_acc == nullptr) {
        const float inv = l[mt][h] > 0.0f ? __fdiv_rn(1.0f, l[mt][h]) : 0.0f;
        bf16_t* orow = p.out + qi * p.out_stride + head * d_head;
#pragma unroll
        for (int n = 0; n < kDimTiles; ++n) {
          const int d = n * 8 + 2 * t;
          if (d < d_head) {
            const bf16_t lo = f32_to_bf16(__fmul_rn(o[mt][n][2 * h], inv));
            const bf16_t hi = f32_to_bf16(__fmul_rn(o[mt][n][2 * h + 1], inv));
            if (pair_store) {
              *reinterpret_cast<uint32_t*>(orow + d) = mma::pack(lo, hi);
            } else {
              orow[d] = lo;
              orow[d + 1] = hi;
            }
          }
        }
      } else {
        const int64_t prow = int64_t{blockIdx.z} * p.seq * p.heads + qi * p.heads + head;
        float* pa = p.part_acc + prow * d_head;
#pragma unroll
        for (int n = 0; n < kDimTiles; ++n) {
          const int d = n * 8 + 2 * t;
          if (d < d_head) {
            pa[d] = o[mt][n][2 * h];
            pa[d + 1] = o[mt][n][2 * h + 1];
          }
        }
        if (t == 0) {
          p.part_ml[prow * 2] = m[mt][h];
          p.part_ml[prow * 2 + 1] = l[mt][h];
        }
      }
    }
  }
}

template <int DP, int kWarps, int kMTiles>
void launch(const AttnParams& p, dim3 grid, cudaStream_t stream) {
  attention_mma_async_kernel<DP, kWarps, kMTiles><<<grid, kWarps * 32, 0, stream>>>(p);
}

template <int DP>
void launch_dp(const AttnParams& p, MmaVariant variant, dim3 grid, cudaStream_t stream) {
  switch (variant) {
    case MmaVariant::async_w8:
      launch<DP, 8, 1>(p, grid, stream);
      break;
    case MmaVariant::async_w4m2:
      if constexpr (DP <= 80) {
        launch<DP, 4, 2>(p, grid, stream);
      } else {
        launch<DP, 4, 1>(p, grid, stream);  // 2 m-tiles of 128 dims do not fit in registers
      }
      break;
    default:
      launch<DP, 4, 1>(p, grid, stream);
      break;
  }
}

}  // namespace

void launch_attention_mma_async(const AttnParams& p, int padded_dim, MmaVariant variant, dim3 grid,
                                cudaStream_t stream) {
  switch (padded_dim) {
    case 64:
      launch_dp<64>(p, variant, grid, stream);
      break;
    case 80:
      launch_dp<80>(p, variant, grid, stream);
      break;
    default:
      launch_dp<128>(p, variant, grid, stream);
      break;
  }
}

}  // namespace ferry::cuda
