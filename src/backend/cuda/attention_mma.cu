// Attention on tensor cores: mma.sync m16n8k16, bf16 inputs, fp32 accumulators.
//
// A block of 4 warps owns 64 rows (query, head-of-group pairs of one kv head; 16 per warp) and one
// key split. Per tile of 64 keys (32 for head_dim 128): K and V are staged row-major in shared
// memory (B fragments come out through ldmatrix, .trans for V); each warp computes its 16×tile
// scores S = Q·Kᵀ (Q fragments stay in registers for the whole kernel), scales them, updates the
// rows' online softmax in fp32 (max and sum over the four lanes that share a row), and accumulates
// P·V. P is fed to the tensor cores as two bf16 terms, hi = bf16(p) and lo = bf16(p − hi), so P·V
// keeps ~16 bits of p (the op's numerics ask for fp32 p; one bf16 term alone would lose 8 of them).
// The output is o / l rounded to bf16.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16): with g = lane / 4 and t = lane % 4,
//   A (16×16, row):  a0 = A[g][2t..2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16×8, col):   b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g]
//   C (16×8, f32):   c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1]
// so the score accumulators of key tiles 2kk and 2kk+1 are exactly the A fragment of P for the
// k-chunk kk of the P·V product.
#include "backend/cuda/attention_impl.cuh"
#include "backend/cuda/attention_mma_frag.cuh"
#include "backend/cuda/cuda_check.h"

namespace ferry::cuda {
namespace {

using mma::cvt_bf16x2;
using mma::ldmatrix_x4;
using mma::ldmatrix_x4_trans;
using mma::mma_bf16;
using mma::q_pair;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

template <int DP>  // head_dim padded to a multiple of 16
__global__ void __launch_bounds__(kThreads) attention_mma_kernel(const AttnParams p) {
  constexpr int kTile = DP >= 128 ? 32 : 64;  // keys per tile (32 keeps DP = 128 off the stack)
  constexpr int kKStride = DP + 8;            // bf16; +16 bytes spreads rows over the banks
  constexpr int kChunks = DP / 16;            // k-chunks of Q·Kᵀ
  constexpr int kDimTiles = DP / 8;           // n-tiles of P·V
  __shared__ __align__(16) bf16_t ks[kTile * kKStride];
  __shared__ __align__(16) bf16_t vs[kTile * kKStride];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int d_head = p.head_dim;
  const int kvh = static_cast<int>(blockIdx.y);
  const BlockRange range = attention_block_range(p, kMmaRows);
  if (range.row0 >= range.row_end) return;  // a row block past its segment's end
  const int64_t total_rows = range.row_end;
  const int64_t row0 = range.row0;

  // The two rows this thread holds accumulators for: warp·16 + g and warp·16 + g + 8.
  int64_t qi[2];
  int64_t head[2];
  bool row_ok[2];
  const bf16_t* qrow[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t gr = row0 + warp * 16 + g + 8 * h;
    row_ok[h] = gr < total_rows;
    qi[h] = row_ok[h] ? gr / p.group : 0;
    head[h] = int64_t{kvh} * p.group + (row_ok[h] ? gr - qi[h] * p.group : 0);
    qrow[h] = row_ok[h] ? p.q + qi[h] * p.q_stride + head[h] * d_head : nullptr;
  }
  uint32_t qf[kChunks][4];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    qf[c][0] = q_pair(qrow[0], c * 16 + 2 * t, d_head);
    qf[c][1] = q_pair(qrow[1], c * 16 + 2 * t, d_head);
    qf[c][2] = q_pair(qrow[0], c * 16 + 2 * t + 8, d_head);
    qf[c][3] = q_pair(qrow[1], c * 16 + 2 * t + 8, d_head);
  }

  // Key range of this split, cut at the last key any row of the block may see.
  const int64_t q_pos0 = attn_q_pos0(p);
  const int64_t kb = range.key_begin;
  int64_t ke = range.key_end;
  if (p.causal) {
    int64_t last_row = row0 + kMmaRows - 1;
    if (last_row >= total_rows) last_row = total_rows - 1;
    const int64_t limit = q_pos0 + last_row / p.group + 1;
    if (ke > limit) ke = limit;
  }

  // Keys [kb, limit[h]) are visible to row h (none for a row past the end).
  int64_t limit[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int64_t lim = ke;
    if (p.causal && q_pos0 + qi[h] + 1 < lim) lim = q_pos0 + qi[h] + 1;
    limit[h] = row_ok[h] ? lim : kb;
  }

  // Padding dims of K and Vᵀ stay zero for the whole kernel (0·x must not meet garbage NaNs).
  for (int i = tid; i < kTile * kKStride; i += kThreads) ks[i] = 0;
  for (int i = tid; i < kTile * kKStride; i += kThreads) vs[i] = 0;

  float o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};

  // Tile loads are software-pipelined: the next tile's K/V vectors are in flight in registers
  // while the current tile is computed from shared memory. Vectors past head_dim or past the
  // key range stay zero.
  constexpr int kVecPerRow = DP / 8;  // 16-byte vectors per K/V row (an upper bound)
  constexpr int kIters = (kTile * kVecPerRow + kThreads - 1) / kThreads;
  const int vec_per_row = d_head / 8;
  uint4 kreg[kIters];
  uint4 vreg[kIters];
  auto load_tile = [&](int64_t t0) {
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      const int i = tid + u * kThreads;
      // Dims fastest: coalesced reads, conflict-free 16-byte shared stores.
      const int kj = i / kVecPerRow;
      const int kd = i - kj * kVecPerRow;
      kreg[u] = make_uint4(0, 0, 0, 0);
      vreg[u] = make_uint4(0, 0, 0, 0);
      if (kj < kTile && kd < vec_per_row && t0 + kj < ke) {
        const int64_t key = t0 + kj;
        const int s = key < p.span0 ? 0 : 1;
        const int64_t row = s == 0 ? key : key - p.span0;
        const int64_t col = int64_t{kvh} * d_head + kd * 8;
        kreg[u] = *reinterpret_cast<const uint4*>(p.k[s] + row * p.k_stride[s] + col);
        vreg[u] = *reinterpret_cast<const uint4*>(p.v[s] + row * p.v_stride[s] + col);
      }
    }
  };
  auto store_tile = [&]() {
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      const int i = tid + u * kThreads;
      const int kj = i / kVecPerRow;
      const int kd = i - kj * kVecPerRow;
      if (kj < kTile && kd < vec_per_row) {
        *reinterpret_cast<uint4*>(&ks[kj * kKStride + kd * 8]) = kreg[u];
        *reinterpret_cast<uint4*>(&vs[kj * kKStride + kd * 8]) = vreg[u];
      }
    }
  };

  if (kb < ke) load_tile(kb);
  for (int64_t t0 = kb; t0 < ke; t0 += kTile) {
    __syncthreads();  // previous tile consumed (and the zero fill done, on the first pass)
    store_tile();
    __syncthreads();
    if (t0 + kTile < ke) load_tile(t0 + kTile);

    // S = Q·Kᵀ for this warp's 16 rows × 64 keys.
    // ldmatrix.x4 gives the B fragments of key tiles n and n+1 for one 16-dim chunk: lane i
    // points at row (i % 8) of matrix i / 8 = (tile n + (i/8)/2, dims +8·((i/8)%2)).
    float sc[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int n = 0; n < kTile / 8; n += 2) {
      const bf16_t* kaddr =
          &ks[(n * 8 + (lane / 16) * 8 + lane % 8) * kKStride + ((lane / 8) % 2) * 8];
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        uint32_t b[4];
        ldmatrix_x4(b, kaddr + c * 16);
        mma_bf16(sc[n], qf[c], b[0], b[1]);
        mma_bf16(sc[n + 1], qf[c], b[2], b[3]);
      }
    }

    // Scale, mask, and the online softmax update of rows g (h = 0) and g + 8 (h = 1).
    // Key t0 + j is visible to row h iff j < visible_in_tile[h].
    int visible_in_tile[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int64_t v = limit[h] - t0;
      v = v < 0 ? 0 : (v > kTile ? kTile : v);
      visible_in_tile[h] = static_cast<int>(v);
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const bool visible = n * 8 + 2 * t + (e % 2) < visible_in_tile[h];
        sc[n][e] = visible ? __fmul_rn(sc[n][e], p.scale_log2) : -INFINITY;
        tile_max[h] = fmaxf(tile_max[h], sc[n][e]);
      }
    }
    float corr[2];
    float m_new[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      m_new[h] = fmaxf(m[h], tile_max[h]);
      corr[h] = m_new[h] == -INFINITY ? 1.0f : exp2f(__fsub_rn(m[h], m_new[h]));
    }
    float tile_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e / 2;
        const float pe = sc[n][e] == -INFINITY ? 0.0f : exp2f(__fsub_rn(sc[n][e], m_new[h]));
        sc[n][e] = pe;
        tile_sum[h] = __fadd_rn(tile_sum[h], pe);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_sum[h] = __fadd_rn(tile_sum[h], __shfl_xor_sync(0xffffffffu, tile_sum[h], 1));
      tile_sum[h] = __fadd_rn(tile_sum[h], __shfl_xor_sync(0xffffffffu, tile_sum[h], 2));
      l[h] = __fmaf_rn(l[h], corr[h], tile_sum[h]);
      m[h] = m_new[h];
    }
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      o[n][0] = __fmul_rn(o[n][0], corr[0]);
      o[n][1] = __fmul_rn(o[n][1], corr[0]);
      o[n][2] = __fmul_rn(o[n][2], corr[1]);
      o[n][3] = __fmul_rn(o[n][3], corr[1]);
    }

    // O += P·V, P as hi + lo bf16 terms.
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      uint32_t a_hi[4];
      uint32_t a_lo[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        // a0: tile 2kk row g; a1: tile 2kk row g+8; a2: tile 2kk+1 row g; a3: tile 2kk+1 row g+8.
        const int n = 2 * kk + r / 2;
        const int e = (r % 2) * 2;
        const float p0 = sc[n][e];
        const float p1 = sc[n][e + 1];
        a_hi[r] = cvt_bf16x2(p0, p1);
        const float h0 = __uint_as_float(a_hi[r] << 16);
        const float h1 = __uint_as_float(a_hi[r] & 0xffff0000u);
        a_lo[r] = cvt_bf16x2(__fsub_rn(p0, h0), __fsub_rn(p1, h1));
      }
      // ldmatrix.x4.trans on row-major V gives the B fragments of dim tiles n and n+1: lane i
      // points at key row kk·16 + 8·((i/8)%2) + i%8, dims (n + (i/8)/2)·8.
      const bf16_t* vaddr =
          &vs[(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kKStride + (lane / 16) * 8];
#pragma unroll
      for (int n = 0; n < kDimTiles; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vaddr + n * 8);
        mma_bf16(o[n], a_hi, b[0], b[1]);
        mma_bf16(o[n], a_lo, b[0], b[1]);
        mma_bf16(o[n + 1], a_hi, b[2], b[3]);
        mma_bf16(o[n + 1], a_lo, b[2], b[3]);
      }
    }
  }

  // Write: the final bf16 rows, or this split's partial state (unnormalized o, m, l).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!row_ok[h]) continue;
    if (p.part_acc == nullptr) {
      const float inv = l[h] > 0.0f ? __fdiv_rn(1.0f, l[h]) : 0.0f;
      bf16_t* orow = p.out + qi[h] * p.out_stride + head[h] * d_head;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        const int d = n * 8 + 2 * t;
        if (d < d_head) {
          orow[d] = f32_to_bf16(__fmul_rn(o[n][2 * h], inv));
          orow[d + 1] = f32_to_bf16(__fmul_rn(o[n][2 * h + 1], inv));
        }
      }
    } else {
      const int64_t prow = int64_t{blockIdx.z} * p.seq * p.heads + qi[h] * p.heads + head[h];
      float* pa = p.part_acc + prow * d_head;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        const int d = n * 8 + 2 * t;
        if (d < d_head) {
          pa[d] = o[n][2 * h];
          pa[d + 1] = o[n][2 * h + 1];
        }
      }
      if (t == 0) {
        p.part_ml[prow * 2] = m[h];
        p.part_ml[prow * 2 + 1] = l[h];
      }
    }
  }
}

}  // namespace

void launch_attention_mma(const AttnParams& p, int padded_dim, dim3 grid, cudaStream_t stream) {
  switch (padded_dim) {
    case 64:
      attention_mma_kernel<64><<<grid, kThreads, 0, stream>>>(p);
      break;
    case 80:
      attention_mma_kernel<80><<<grid, kThreads, 0, stream>>>(p);
      break;
    default:
      attention_mma_kernel<128><<<grid, kThreads, 0, stream>>>(p);
      break;
  }
}

}  // namespace ferry::cuda
