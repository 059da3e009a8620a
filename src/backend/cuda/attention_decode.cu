// Decode attention (S·group <= 16 rows per kv head, head_dim 64 or 128) on tensor cores.
//
// At decode every K/V byte is read once and serves only S·group rows, so the time is the KV
// bytes over the HBM bandwidth, provided enough bytes are in flight (H200: ~3.5 TB/s × ~0.7 µs
// ≈ 2.5 MB, ~20 KB per SM). The general kernels keep one register-staged tile per block in
// flight (a few KB); this one:
//
// - Grid: x = kv head, y = key split of kSplit keys. The split count is ceil(keys / kSplit) with
//   keys = the spans' rows (the cache capacity), never the visible keys: one captured graph
//   serves every q_pos0_dev. A block whose split lies past the last visible key exits at once,
//   writing an empty partial (m = −inf, l = 0). Blocks are dispatched in x-fastest order, so
//   every kv head's live (low) splits go out before any dead one takes a slot.
// - Loads: the block requests its whole split up front with cp.async (16 bytes each, straight
//   to shared memory, zero-fill past the visible keys, which are never read): kSplit·head_dim·4
//   bytes, 64 KB for 128 keys of head_dim 128, two blocks per SM. K is one commit group and V
//   another, so the scores start while V is still arriving.
// - Math: mma.sync m16n8k16, bf16 in, fp32 accumulate. The 16 rows of the m-tile are the (query,
//   head-of-group) pairs of the kv head (zeros past S·group). Warp w scores keys
//   [w·kSplit/4, (w+1)·kSplit/4); the softmax max and sum (fp32, base 2) are formed across the
//   four warps through shared memory, in warp order; P goes to shared memory as two bf16 terms
//   hi = bf16(p), lo = bf16(p − hi) (as in attention_mma.cu: ~16 bits of p); then warp w
//   accumulates P·V for dims [w·D/4, (w+1)·D/4) over all the split's keys, so the block ends with
//   one (o, m, l) per row and no per-warp partials to merge.
// - Output: one split: bf16(o / l) directly. Several: fp32 partials, then the combine kernel.
// - Shared memory (DecodeSmem): K and V of the split, P as hi/lo, the row maxima and sums; 77 KB
//   for 128 keys of head_dim 128, 153 KB for 256. Where the device (or FERRY_MAX_SHARED_BYTES)
//   allows less, the kShareKV variant lands V in K's buffer once every warp has scored its keys
//   (V's copies then overlap the softmax instead of the scores): 86 KB at 256 keys of head_dim
//   128, under the 99 KB of an sm_86/89/120 card. Same split, same instructions on the same
//   values: the same output bits (op_harness_small_smem_test.cpp).
// - Combine: a block per (row, 32 dims). Thread group g (8 threads × 4 dims, 16-byte loads)
//   sums splits g, g+16, ... in index order, then the 16 groups are added in order: a fixed
//   reduction order, no atomics, the same bits every run. It reads only the splits that can hold
//   visible keys (from the same q_pos0 the main kernel read) and skips any whose m is −inf.
#include "backend/cuda/attention_decode.cuh"

#include <string>

#include "backend/cuda/attention_impl.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/device_limits.cuh"
#include "backend/cuda/mma_ptx.cuh"

namespace ferry::cuda {
namespace {

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::cvt_bf16x2;
using ptx::ldmatrix_x4;
using ptx::ldmatrix_x4_trans;
using ptx::mma_bf16;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kDecodeMaxRows;

// kShareKV: one K/V buffer, V copied into it after the scores (the small-device variant).
template <int D, int kSplit, bool kShareKV>
struct DecodeSmem {
  static constexpr int kStride = D + 8;        // bf16 per K/V row: +16 bytes, so the 8 rows an
                                               // ldmatrix reads fall in distinct banks
  static constexpr int kPStride = kSplit + 8;  // bf16 per P row, same reason
  bf16_t kv[(kShareKV ? 1 : 2) * kSplit * kStride];  // K's rows, then V's (kShareKV: V over K)
  __device__ bf16_t* k() { return kv; }
  __device__ bf16_t* v() { return kShareKV ? kv : kv + kSplit * kStride; }
  bf16_t p_hi[kRows * kPStride];
  bf16_t p_lo[kRows * kPStride];
  float row_max[kWarps][kRows];
  float row_sum[kWarps][kRows];
};

// One past the last key any row may see (may be <= 0: nothing visible).
__device__ __forceinline__ int64_t decode_key_end(const AttnParams& p, int64_t q_pos0) {
  int64_t end = p.keys;
  if (p.causal && q_pos0 + p.seq < end) end = q_pos0 + p.seq;
  return end;
}

// Row r of the m-tile is query r / group, head kvh·group + r % group; its partial-state row is
// query·heads + head (the layout the combine reads).
struct RowRef {
  int64_t query;
  int64_t head;
};
__device__ __forceinline__ RowRef row_ref(const AttnParams& p, int kvh, int r) {
  const int64_t qi = r / p.group;
  return {qi, int64_t{kvh} * p.group + (r - qi * p.group)};
}

template <int D, int kSplit, bool kShareKV>
__global__ void __launch_bounds__(kThreads) attention_decode_kernel(const AttnParams p) {
  using Smem = DecodeSmem<D, kSplit, kShareKV>;
  constexpr int kStride = Smem::kStride;
  constexpr int kPStride = Smem::kPStride;
  constexpr int kVecs = D / 8;                // 16-byte vectors per K/V row
  constexpr int kRowStep = kThreads / kVecs;  // rows one pass of the block covers
  constexpr int kLoads = kSplit / kRowStep;   // cp.async per thread, for K and again for V
  constexpr int kWarpKeys = kSplit / kWarps;  // keys each warp scores
  constexpr int kKeyTiles = kWarpKeys / 8;    // n-tiles of Q·Kᵀ per warp
  constexpr int kChunks = D / 16;             // k-chunks of Q·Kᵀ
  constexpr int kWarpDims = D / kWarps;       // output dims each warp accumulates
  constexpr int kDimTiles = kWarpDims / 8;    // n-tiles of P·V per warp
  static_assert(kSplit % kRowStep == 0 && kKeyTiles % 2 == 0 && kDimTiles % 2 == 0);

  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int kvh = static_cast<int>(blockIdx.x);
  const int64_t split = blockIdx.y;
  const int rows = static_cast<int>(p.seq) * p.group;  // <= kRows (checked on the host)
  const int64_t q_pos0 = attn_q_pos0(p);
  const int64_t kb = split * kSplit;
  int64_t ke = decode_key_end(p, q_pos0);
  if (ke > kb + kSplit) ke = kb + kSplit;

  if (kb >= ke) {
    // Nothing visible here: zeros when unsplit (a query that sees no key), else an empty partial.
    if (p.part_acc == nullptr) {
      for (int i = tid; i < rows * D; i += kThreads) {
        const RowRef rr = row_ref(p, kvh, i / D);
        p.out[rr.query * p.out_stride + rr.head * D + i % D] = 0;
      }
    } else if (tid < rows) {
      const RowRef rr = row_ref(p, kvh, tid);
      const int64_t prow = split * p.seq * p.heads + rr.query * p.heads + rr.head;
      p.part_ml[prow * 2] = -INFINITY;
      p.part_ml[prow * 2 + 1] = 0.0f;
    }
    return;
  }

  // Request the split's K rows (one group), then its V rows (another; with kShareKV after the
  // scores). Thread tid moves column vector tid % kVecs of rows tid / kVecs + u·kRowStep: a warp
  // reads whole row segments. Keys at or past ke are zero-filled without a read (their address
  // is key kb's, which is valid).
  const int col = (tid % kVecs) * 8;
  const int row0 = tid / kVecs;
  const int n_keys = static_cast<int>(ke - kb);
  auto issue = [&](const bf16_t* const(&base)[2], const int64_t(&stride)[2], bf16_t* dst) {
    auto key_ptr = [&](int64_t key) {
      const int s = key < p.span0 ? 0 : 1;
      const int64_t row = s == 0 ? key : key - p.span0;
      return base[s] + row * stride[s] + int64_t{kvh} * D + col;
    };
    const bf16_t* const at_kb = key_ptr(kb);
    if (ke <= p.span0 || kb >= p.span0) {
      // The usual case, all keys in one span: one pointer advanced by a constant step.
      const int64_t step = kRowStep * stride[kb < p.span0 ? 0 : 1];
      const bf16_t* src = at_kb + row0 * (step / kRowStep);
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int j = row0 + u * kRowStep;
        cp_async_16(dst + j * kStride + col, j < n_keys ? src : at_kb, j < n_keys);
        src += step;
      }
    } else {
#pragma unroll 1
      for (int u = 0; u < kLoads; ++u) {
        const int j = row0 + u * kRowStep;
        cp_async_16(dst + j * kStride + col, j < n_keys ? key_ptr(kb + j) : at_kb, j < n_keys);
      }
    }
  };
  issue(p.k, p.k_stride, sm.k());
  cp_async_commit();
  if constexpr (!kShareKV) {
    issue(p.v, p.v_stride, sm.v());
    cp_async_commit();
  }

  // While the copies fly: this lane's two rows (g and g + 8) and their Q fragments, straight from
  // global memory (zeros for rows past S·group). Key kb + j is visible to row h iff kb + j <
  // limit[h].
  int64_t limit[2];
  uint32_t qf[kChunks][4];
  {
    const bf16_t* qrow[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = g + 8 * h;
      qrow[h] = nullptr;
      limit[h] = kb;  // padding rows see nothing
      if (r < rows) {
        const RowRef rr = row_ref(p, kvh, r);
        qrow[h] = p.q + rr.query * p.q_stride + rr.head * D;
        limit[h] = ke;
        if (p.causal && q_pos0 + rr.query + 1 < limit[h]) limit[h] = q_pos0 + rr.query + 1;
      }
    }
    auto pair = [](const bf16_t* row, int d) -> uint32_t {
      if (row == nullptr) return 0u;
      return static_cast<uint32_t>(row[d]) | (static_cast<uint32_t>(row[d + 1]) << 16);
    };
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      qf[c][0] = pair(qrow[0], c * 16 + 2 * t);
      qf[c][1] = pair(qrow[1], c * 16 + 2 * t);
      qf[c][2] = pair(qrow[0], c * 16 + 2 * t + 8);
      qf[c][3] = pair(qrow[1], c * 16 + 2 * t + 8);
    }
  }

  cp_async_wait<kShareKV ? 0 : 1>();  // this thread's K copies have landed
  __syncthreads();                    // ... and everyone's

  // Scores of this warp's keys: ldmatrix.x4 gives the B fragments of key tiles n and n+1 for one
  // 16-dim chunk (lane i points at key row (i % 8) of tile n + i / 16, dims +8·((i / 8) % 2)).
  const int key0 = warp * kWarpKeys;  // first key of this warp, relative to kb
  float sc[kKeyTiles][4];
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
  for (int n = 0; n < kKeyTiles; n += 2) {
    const bf16_t* kaddr =
        &sm.k()[(key0 + n * 8 + (lane / 16) * 8 + lane % 8) * kStride + ((lane / 8) % 2) * 8];
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      uint32_t b[4];
      ldmatrix_x4(b, kaddr + c * 16);
      mma_bf16(sc[n], qf[c], b[0], b[1]);
      mma_bf16(sc[n + 1], qf[c], b[2], b[3]);
    }
  }

  // Scale and mask (element e of tile n: row g + 8·(e / 2), key kb + key0 + 8n + 2t + e % 2), the
  // warp's row maxima over the four lanes of a row, then the block's in warp order.
  int visible[2];  // keys [kb, kb + visible[h]) are visible to row h
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t v = limit[h] - kb;
    visible[h] = static_cast<int>(v < 0 ? 0 : (v > kSplit ? kSplit : v));
  }
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const int j = key0 + n * 8 + 2 * t + (e % 2);
      sc[n][e] = j < visible[h] ? __fmul_rn(sc[n][e], p.scale_log2) : -INFINITY;
      mx[h] = fmaxf(mx[h], sc[n][e]);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    if (t == 0) sm.row_max[warp][g + 8 * h] = mx[h];
  }
  __syncthreads();  // every warp is done with K (its scores are in registers)
  if constexpr (kShareKV) {
    issue(p.v, p.v_stride, sm.v());  // V over K, arriving while the softmax runs
    cp_async_commit();
  }
  float m_row[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = sm.row_max[0][g + 8 * h];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, sm.row_max[w][g + 8 * h]);
    m_row[h] = m;
  }

  // p = 2^(s − m) (0 for masked keys), the warp's row sums in a fixed order, and P as hi/lo bf16
  // terms into shared memory (row g + 8h, this warp's key columns).
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < kKeyTiles; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e / 2;
      const float pe = sc[n][e] == -INFINITY ? 0.0f : exp2f(__fsub_rn(sc[n][e], m_row[h]));
      sc[n][e] = pe;
      sum[h] = __fadd_rn(sum[h], pe);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float p0 = sc[n][2 * h];
      const float p1 = sc[n][2 * h + 1];
      const uint32_t hi = cvt_bf16x2(p0, p1);
      const float h0 = __uint_as_float(hi << 16);
      const float h1 = __uint_as_float(hi & 0xffff0000u);
      const uint32_t lo = cvt_bf16x2(__fsub_rn(p0, h0), __fsub_rn(p1, h1));
      const int at = (g + 8 * h) * kPStride + key0 + n * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(&sm.p_hi[at]) = hi;
      *reinterpret_cast<uint32_t*>(&sm.p_lo[at]) = lo;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] = __fadd_rn(sum[h], __shfl_xor_sync(0xffffffffu, sum[h], 1));
    sum[h] = __fadd_rn(sum[h], __shfl_xor_sync(0xffffffffu, sum[h], 2));
    if (t == 0) sm.row_sum[warp][g + 8 * h] = sum[h];
  }

  cp_async_wait<0>();  // V has landed too
  __syncthreads();     // V, P and the row sums are visible to every warp

  // O[:, dims of this warp] += P·V over the split's keys, P as hi + lo. A fragments of P come
  // from ldmatrix.x4 (lane i: row i % 16, keys +8·(i / 16)); B fragments of V from
  // ldmatrix.x4.trans (lane i: key row 8·((i / 8) % 2) + i % 8, dims of tile n + i / 16).
  const int dim0 = warp * kWarpDims;
  float o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
#pragma unroll 4
  for (int kk = 0; kk < kSplit / 16; ++kk) {
    uint32_t a_hi[4];
    uint32_t a_lo[4];
    const int pat = (lane % 16) * kPStride + kk * 16 + (lane / 16) * 8;
    ldmatrix_x4(a_hi, &sm.p_hi[pat]);
    ldmatrix_x4(a_lo, &sm.p_lo[pat]);
    const bf16_t* vaddr =
        &sm.v()[(kk * 16 + ((lane / 8) % 2) * 8 + lane % 8) * kStride + dim0 + (lane / 16) * 8];
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

  // Write rows g and g + 8: bf16(o / l) when unsplit, else this split's (o, m, l).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h;
    if (r >= rows) continue;
    float l = sm.row_sum[0][r];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) l = __fadd_rn(l, sm.row_sum[w][r]);
    const RowRef rr = row_ref(p, kvh, r);
    if (p.part_acc == nullptr) {
      const float inv = l > 0.0f ? __fdiv_rn(1.0f, l) : 0.0f;
      bf16_t* orow = p.out + rr.query * p.out_stride + rr.head * D + dim0;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        orow[n * 8 + 2 * t] = f32_to_bf16(__fmul_rn(o[n][2 * h], inv));
        orow[n * 8 + 2 * t + 1] = f32_to_bf16(__fmul_rn(o[n][2 * h + 1], inv));
      }
    } else {
      const int64_t prow = split * p.seq * p.heads + rr.query * p.heads + rr.head;
      float* pa = p.part_acc + prow * D + dim0;
#pragma unroll
      for (int n = 0; n < kDimTiles; ++n) {
        *reinterpret_cast<float2*>(&pa[n * 8 + 2 * t]) = make_float2(o[n][2 * h], o[n][2 * h + 1]);
      }
      if (warp == 0 && t == 0) {
        p.part_ml[prow * 2] = m_row[h];
        p.part_ml[prow * 2 + 1] = l;
      }
    }
  }
}

constexpr int kCombineThreads = 128;
constexpr int kCombineVec = 4;                                   // dims per thread (16 bytes)
constexpr int kCombineLanes = 8;                                 // threads per split row
constexpr int kCombineDims = kCombineLanes * kCombineVec;        // dims per block
constexpr int kCombineGroups = kCombineThreads / kCombineLanes;  // splits read at once
constexpr int kCombinePrefetch = 4;  // partial loads per thread issued before the weights

__device__ __forceinline__ float block_max(float v, float* red) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) red[warp] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < kCombineThreads / 32; ++w) v = fmaxf(v, red[w]);
  __syncthreads();  // red is reused next
  return v;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) red[warp] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < kCombineThreads / 32; ++w) v = __fadd_rn(v, red[w]);
  return v;
}

// grid: x = partial row (query·heads + head), y = 32-dim slice of head_dim.
__global__ void __launch_bounds__(kCombineThreads)
    attention_decode_combine_kernel(const AttnParams p, int64_t splits, int split_keys) {
  __shared__ float red[kCombineThreads / 32];
  __shared__ float4 part[kCombineGroups][kCombineLanes];
  const int tid = static_cast<int>(threadIdx.x);
  const int grp = tid / kCombineLanes;
  const int vec = tid % kCombineLanes;
  const int64_t rows = p.seq * p.heads;
  const int64_t row = blockIdx.x;
  const int d = static_cast<int>(blockIdx.y) * kCombineDims + vec * kCombineVec;
  const int64_t d_head = p.head_dim;

  // Splits that can hold a visible key: the same bound the main kernel's blocks used.
  const int64_t key_end = decode_key_end(p, attn_q_pos0(p));
  int64_t live = key_end <= 0 ? 0 : (key_end + split_keys - 1) / split_keys;
  if (live > splits) live = splits;

  auto o_at = [&](int64_t s) {
    return *reinterpret_cast<const float4*>(&p.part_acc[(s * rows + row) * d_head + d]);
  };
  // The first partial vectors do not depend on the weights: load them before the m/l pass.
  float4 pre[kCombinePrefetch];
#pragma unroll
  for (int u = 0; u < kCombinePrefetch; ++u) {
    const int64_t s = grp + int64_t{u} * kCombineGroups;
    pre[u] = s < live ? o_at(s) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  float m = -INFINITY;
  for (int64_t s = tid; s < live; s += kCombineThreads)
    m = fmaxf(m, p.part_ml[(s * rows + row) * 2]);
  m = block_max(m, red);
  float l = 0.0f;
  for (int64_t s = tid; s < live; s += kCombineThreads) {
    const float ms = p.part_ml[(s * rows + row) * 2];
    if (ms != -INFINITY) {
      l = __fadd_rn(l, __fmul_rn(p.part_ml[(s * rows + row) * 2 + 1], exp2f(__fsub_rn(ms, m))));
    }
  }
  l = block_sum(l, red);

  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto add = [&](int64_t s, const float4& v) {
    const float ms = p.part_ml[(s * rows + row) * 2];
    if (ms == -INFINITY) return;  // no visible key of this row in split s
    const float w = exp2f(__fsub_rn(ms, m));
    acc.x = __fmaf_rn(v.x, w, acc.x);
    acc.y = __fmaf_rn(v.y, w, acc.y);
    acc.z = __fmaf_rn(v.z, w, acc.z);
    acc.w = __fmaf_rn(v.w, w, acc.w);
  };
#pragma unroll
  for (int u = 0; u < kCombinePrefetch; ++u) {
    const int64_t s = grp + int64_t{u} * kCombineGroups;
    if (s < live) add(s, pre[u]);
  }
  for (int64_t s = grp + int64_t{kCombinePrefetch} * kCombineGroups; s < live;
       s += kCombineGroups) {
    add(s, o_at(s));
  }
  part[grp][vec] = acc;
  __syncthreads();
  if (tid >= kCombineDims) return;
  // Thread tid finishes dim slice·32 + tid: the groups' sums in group order.
  float o = 0.0f;
  for (int gi = 0; gi < kCombineGroups; ++gi) {
    o = __fadd_rn(o, reinterpret_cast<const float*>(part[gi])[tid]);
  }
  o = (m != -INFINITY && l > 0.0f) ? __fmul_rn(o, __fdiv_rn(1.0f, l)) : 0.0f;
  const int64_t qi = row / p.heads;
  const int64_t h = row - qi * p.heads;
  p.out[qi * p.out_stride + h * d_head + blockIdx.y * kCombineDims + tid] = f32_to_bf16(o);
}

template <int D, int kSplit, bool kShareKV>
Status launch_decode_variant(const DeviceLimits& dev, const AttnParams& p, int64_t splits,
                             int kv_heads, cudaStream_t stream) {
  constexpr int kSmem = static_cast<int>(sizeof(DecodeSmem<D, kSplit, kShareKV>));
  const auto kernel = attention_decode_kernel<D, kSplit, kShareKV>;
  // Over 48 KB of dynamic shared memory needs the opt-in, per kernel and device.
  FERRY_RETURN_IF_ERROR(
      opt_in_shared(dev, reinterpret_cast<const void*>(kernel), kSmem, "attention_decode_kernel"));
  const dim3 grid(static_cast<unsigned>(kv_heads), static_cast<unsigned>(splits));
  kernel<<<grid, kThreads, kSmem, stream>>>(p);
  return launch_status("attention_decode_kernel");
}

// Shared memory of the variant that fits `allowed` bytes (the full one when it does), or 0.
// The kShareKV variant exists for the splits whose full layout needs more than 48 KB.
template <int D, int kSplit>
constexpr bool kHasShareKV = sizeof(DecodeSmem<D, kSplit, false>) > 48 * 1024;

template <int D, int kSplit>
size_t decode_smem(size_t allowed) {
  if (sizeof(DecodeSmem<D, kSplit, false>) <= allowed) return sizeof(DecodeSmem<D, kSplit, false>);
  if (kHasShareKV<D, kSplit> && sizeof(DecodeSmem<D, kSplit, true>) <= allowed) {
    return sizeof(DecodeSmem<D, kSplit, true>);
  }
  return 0;
}

template <int D, int kSplit>
Status launch_decode(const DeviceLimits& dev, const AttnParams& p, int64_t splits, int kv_heads,
                     cudaStream_t stream) {
  const auto allowed = static_cast<size_t>(shared_bytes_allowed(dev));
  if (sizeof(DecodeSmem<D, kSplit, false>) <= allowed) {
    return launch_decode_variant<D, kSplit, false>(dev, p, splits, kv_heads, stream);
  }
  if constexpr (kHasShareKV<D, kSplit>) {
    if (sizeof(DecodeSmem<D, kSplit, true>) <= allowed) {
      return launch_decode_variant<D, kSplit, true>(dev, p, splits, kv_heads, stream);
    }
  }
  return make_error(ErrorCode::unsupported,
                    "attention_decode: " + std::to_string(kSplit) + " keys of head_dim " +
                        std::to_string(D) + " need more shared memory than the " +
                        std::to_string(allowed) + " bytes " + dev.name + " allows");
}

template <int D>
Status launch_decode_dim(const DeviceLimits& dev, const AttnParams& p, int split_keys,
                         int64_t splits, int kv_heads, cudaStream_t stream) {
  switch (split_keys) {
    case 64:
      return launch_decode<D, 64>(dev, p, splits, kv_heads, stream);
    case 128:
      return launch_decode<D, 128>(dev, p, splits, kv_heads, stream);
    default:
      return launch_decode<D, 256>(dev, p, splits, kv_heads, stream);
  }
}

constexpr int64_t kMaxSplits = 65535;  // the grid's y limit

bool vec16(const TensorView& v) {
  return reinterpret_cast<uintptr_t>(v.data) % 16 == 0 && v.stride() % 8 == 0;
}

}  // namespace

bool attention_decode_fits(const Attention& op) {
  if (!op.segments.empty() || (op.head_dim != 64 && op.head_dim != 128)) return false;
  if (op.num_kv_heads <= 0 || op.num_heads % op.num_kv_heads != 0) return false;
  const int64_t group = op.num_heads / op.num_kv_heads;
  if (op.q.rows < 1 || op.q.rows * group > kDecodeMaxRows) return false;
  int64_t keys = 0;
  for (int s = 0; s < op.num_spans; ++s) {
    if (!vec16(op.kv[s].k) || !vec16(op.kv[s].v)) return false;
    keys += op.kv[s].k.rows;
  }
  return attention_decode_splits(keys, kDecodeSplitKeys) <= kMaxSplits;
}

size_t attention_decode_smem_bytes(int head_dim, int split_keys, size_t allowed) {
  const bool d64 = head_dim == 64;
  switch (split_keys) {
    case 64:
      return d64 ? decode_smem<64, 64>(allowed) : decode_smem<128, 64>(allowed);
    case 128:
      return d64 ? decode_smem<64, 128>(allowed) : decode_smem<128, 128>(allowed);
    case 256:
      return d64 ? decode_smem<64, 256>(allowed) : decode_smem<128, 256>(allowed);
    default:
      return 0;
  }
}

bool attention_decode_fits_device(const Attention& op, const DeviceLimits& dev, int split_keys) {
  const auto allowed = static_cast<size_t>(shared_bytes_allowed(dev));
  return attention_decode_smem_bytes(static_cast<int>(op.head_dim), split_keys, allowed) != 0;
}

int64_t attention_decode_splits(int64_t keys, int split_keys) {
  return keys <= split_keys ? 1 : (keys + split_keys - 1) / split_keys;
}

Status run_attention_decode(const OpContext& ctx, const Attention& op, int split_keys) {
  if (!attention_decode_fits(op)) {
    return make_error(ErrorCode::invalid_argument, "attention_decode: shape does not fit");
  }
  if (split_keys != 64 && split_keys != 128 && split_keys != 256) {
    return make_error(
        ErrorCode::invalid_argument,
        "attention_decode: split_keys must be 64, 128 or 256, got " + std::to_string(split_keys));
  }
  AttnParams p{};
  p.q = ptr<const bf16_t>(op.q);
  p.q_stride = op.q.stride();
  int64_t keys = 0;
  for (int s = 0; s < 2; ++s) {
    const bool used = s < op.num_spans;
    p.k[s] = used ? ptr<const bf16_t>(op.kv[s].k) : nullptr;
    p.v[s] = used ? ptr<const bf16_t>(op.kv[s].v) : nullptr;
    p.k_stride[s] = used ? op.kv[s].k.stride() : 0;
    p.v_stride[s] = used ? op.kv[s].v.stride() : 0;
    if (used) keys += op.kv[s].k.rows;
  }
  p.span0 = op.kv[0].k.rows;
  p.seq = op.q.rows;
  p.keys = keys;
  p.out = ptr<bf16_t>(op.out);
  p.out_stride = op.out.stride();
  p.heads = op.num_heads;
  p.group = op.num_heads / op.num_kv_heads;
  p.head_dim = op.head_dim;
  p.scale_log2 = op.scale * 1.4426950408889634f;  // log2(e): softmax runs in base 2
  p.causal = op.causal;
  p.q_pos0 = op.q_pos0;
  p.q_pos0_dev = op.q_pos0_dev.empty() ? nullptr : ptr<const int32_t>(op.q_pos0_dev);
  p.keys_per_split = split_keys;

  const int64_t splits = attention_decode_splits(keys, split_keys);
  if (splits > kMaxSplits) return make_error(ErrorCode::unsupported, "attention: too many keys");
  const int64_t prow = p.seq * p.heads;
  StreamScratch scratch;
  if (splits > 1) {
    const size_t bytes =
        static_cast<size_t>(splits * prow) * (static_cast<size_t>(op.head_dim) + 2) * 4;
    FERRY_ASSIGN_OR_RETURN(scratch, take_scratch(ctx, bytes));
    p.part_acc = static_cast<float*>(scratch.get());
    p.part_ml = p.part_acc + splits * prow * op.head_dim;
    if (reinterpret_cast<uintptr_t>(p.part_acc) % 16 != 0) {
      return make_error(ErrorCode::backend, "attention_decode: scratch not 16-byte aligned");
    }
  }
  FERRY_ASSIGN_OR_RETURN(const DeviceLimits* dev, limits_for(ctx.limits));
  FERRY_RETURN_IF_ERROR(
      op.head_dim == 64
          ? launch_decode_dim<64>(*dev, p, split_keys, splits, op.num_kv_heads, ctx.stream)
          : launch_decode_dim<128>(*dev, p, split_keys, splits, op.num_kv_heads, ctx.stream));
  if (splits > 1) {
    const dim3 grid(static_cast<unsigned>(prow), static_cast<unsigned>(op.head_dim / kCombineDims));
    attention_decode_combine_kernel<<<grid, kCombineThreads, 0, ctx.stream>>>(p, splits,
                                                                              split_keys);
    FERRY_RETURN_IF_ERROR(launch_status("attention_decode_combine_kernel"));
  }
  return Status();
}

}  // namespace ferry::cuda
