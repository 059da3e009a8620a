// Attention on CUDA cores: any head_dim <= 128, and the decode path (few rows, split KV).
// attention_mma.cu has the tensor-core kernel that run_attention picks for larger row counts.
//
// A block owns one kv head, 16 "rows" and one key split. A row is a (query, query head) pair
// of that kv head's group, so with GQA the group's heads share each K/V tile that the block
// stages in shared memory (decode with S = 1 still fills the block). Keys stream through in tiles
// of 32: lane j of a warp scores key j of the tile against the warp's row (fp32 dot product
// in dimension order, times scale), the warp updates the row's online softmax (running max m and
// sum l, fp32) and accumulates p·v with lane c owning output dims c, c+32, c+64, c+96.
// Nothing depends on timing: the tile order, the butterfly reductions and the split combine
// (split 0, 1, ... in order) are fixed, so the same inputs give the same bits.
#include <atomic>
#include <string>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/attention_impl.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/device_limits.cuh"

namespace ferry::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 4;
constexpr int kRows = kWarps * kRowsPerWarp;  // rows per block
constexpr int kTileKeys = 32;
constexpr int kKStride = kAttentionMaxHeadDim + 1;  // odd: lane j reads row j without conflicts

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// NC = ceil(head_dim / 32); kVec: K/V rows allow 16-byte loads (head_dim % 8 == 0, aligned).
template <int NC, bool kVec>
__global__ void __launch_bounds__(kThreads) attention_kernel(const AttnParams p) {
  __shared__ float qs[kRows][kAttentionMaxHeadDim];
  __shared__ float ks[kTileKeys][kKStride];
  __shared__ float vs[kTileKeys][kAttentionMaxHeadDim];

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int d_head = p.head_dim;
  const int kvh = static_cast<int>(blockIdx.y);
  const BlockRange range = attention_block_range(p, kRows);
  if (range.row0 >= range.row_end) return;  // a row block past its segment's end
  const int64_t total_rows = range.row_end;
  const int64_t row0 = range.row0;

  // Stage this block's query rows (zeros for rows past the end); unrolled so that several
  // global loads are in flight per thread.
#pragma unroll 4
  for (int i = tid; i < kRows * d_head; i += kThreads) {
    const int r = i / d_head;
    const int d = i - r * d_head;
    const int64_t gr = row0 + r;
    float v = 0.0f;
    if (gr < total_rows) {
      const int64_t qi = gr / p.group;
      const int64_t h = int64_t{kvh} * p.group + (gr - qi * p.group);
      v = to_float(p.q[qi * p.q_stride + h * d_head + d]);
    }
    qs[r][d] = v;
  }

  // Key range of this split, cut at the last key any row of the block may see.
  const int64_t q_pos0 = attn_q_pos0(p);
  const int64_t kb = range.key_begin;
  int64_t ke = range.key_end;
  if (p.causal) {
    int64_t last_row = row0 + kRows - 1;
    if (last_row >= total_rows) last_row = total_rows - 1;
    const int64_t limit = q_pos0 + last_row / p.group + 1;
    if (ke > limit) ke = limit;
  }

  float m[kRowsPerWarp];
  float l[kRowsPerWarp];
  float acc[kRowsPerWarp][NC];
#pragma unroll
  for (int t = 0; t < kRowsPerWarp; ++t) {
    m[t] = -INFINITY;
    l[t] = 0.0f;
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[t][c] = 0.0f;
  }

  // With kVec the next tile's K/V vectors are loaded into registers while the current tile is
  // computed (software pipelining); otherwise each tile is loaded element by element.
  constexpr int kVecPerRow = NC * 4;  // 8-element vectors per row (upper bound: 32·NC dims)
  constexpr int kIters = kVec ? kTileKeys * kVecPerRow / kThreads : 1;
  const int vec_per_row = d_head / 8;
  uint4 kreg[kIters];
  uint4 vreg[kIters];
  auto key_row = [&](int64_t key, int* span) {
    *span = key < p.span0 ? 0 : 1;
    return *span == 0 ? key : key - p.span0;
  };
  auto load_tile = [&](int64_t t0) {
#pragma unroll
    for (int u = 0; u < kIters; ++u) {
      const int i = tid + u * kThreads;
      const int j = i / kVecPerRow;
      const int dv = i - j * kVecPerRow;
      kreg[u] = make_uint4(0, 0, 0, 0);
      vreg[u] = make_uint4(0, 0, 0, 0);
      if (dv < vec_per_row && t0 + j < ke) {
        int s = 0;
        const int64_t row = key_row(t0 + j, &s);
        const int64_t col = int64_t{kvh} * d_head + dv * 8;
        kreg[u] = *reinterpret_cast<const uint4*>(p.k[s] + row * p.k_stride[s] + col);
        vreg[u] = *reinterpret_cast<const uint4*>(p.v[s] + row * p.v_stride[s] + col);
      }
    }
  };
  auto store_tile = [&](int64_t t0) {
    if constexpr (kVec) {
#pragma unroll
      for (int u = 0; u < kIters; ++u) {
        const int i = tid + u * kThreads;
        const int j = i / kVecPerRow;
        const int dv = i - j * kVecPerRow;
        if (dv < vec_per_row) {
          const uint32_t kw[4] = {kreg[u].x, kreg[u].y, kreg[u].z, kreg[u].w};
          const uint32_t vw[4] = {vreg[u].x, vreg[u].y, vreg[u].z, vreg[u].w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            ks[j][dv * 8 + 2 * e] = bf16_to_f32(static_cast<bf16_t>(kw[e] & 0xffffu));
            ks[j][dv * 8 + 2 * e + 1] = bf16_to_f32(static_cast<bf16_t>(kw[e] >> 16));
            vs[j][dv * 8 + 2 * e] = bf16_to_f32(static_cast<bf16_t>(vw[e] & 0xffffu));
            vs[j][dv * 8 + 2 * e + 1] = bf16_to_f32(static_cast<bf16_t>(vw[e] >> 16));
          }
        }
      }
    } else {
      for (int i = tid; i < kTileKeys * d_head; i += kThreads) {
        const int j = i / d_head;
        const int d = i - j * d_head;
        float kv = 0.0f;
        float vv = 0.0f;
        if (t0 + j < ke) {
          int s = 0;
          const int64_t row = key_row(t0 + j, &s);
          const int64_t col = int64_t{kvh} * d_head + d;
          kv = to_float(p.k[s][row * p.k_stride[s] + col]);
          vv = to_float(p.v[s][row * p.v_stride[s] + col]);
        }
        ks[j][d] = kv;
        vs[j][d] = vv;
      }
    }
  };

  if (kVec && kb < ke) load_tile(kb);
  for (int64_t t0 = kb; t0 < ke; t0 += kTileKeys) {
    __syncthreads();  // previous tile fully consumed (and qs written, on the first pass)
    store_tile(t0);
    __syncthreads();
    if (kVec && t0 + kTileKeys < ke) load_tile(t0 + kTileKeys);

#pragma unroll
    for (int t = 0; t < kRowsPerWarp; ++t) {
      const int r = warp + kWarps * t;
      const int64_t gr = row0 + r;
      if (gr >= total_rows) continue;  // warp-uniform
      const int64_t qi = gr / p.group;
      const int64_t key = t0 + lane;
      const bool visible = key < ke && (!p.causal || key <= q_pos0 + qi);
      // Four interleaved partial sums (d mod 4), then ((0 + 1) + (2 + 3)): a fixed order with a
      // quarter of the dependent-FMA latency of one chain.
      float dp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      int d = 0;
      for (; d + 4 <= d_head; d += 4) {
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[e] = __fmaf_rn(qs[r][d + e], ks[lane][d + e], dp[e]);
      }
      for (; d < d_head; ++d) dp[0] = __fmaf_rn(qs[r][d], ks[lane][d], dp[0]);
      const float dot = __fadd_rn(__fadd_rn(dp[0], dp[1]), __fadd_rn(dp[2], dp[3]));
      const float s = visible ? __fmul_rn(dot, p.scale_log2) : -INFINITY;
      const float m_new = fmaxf(m[t], warp_max(s));
      if (m_new == -INFINITY) continue;  // nothing visible yet (warp-uniform)
      const float e = visible ? exp2f(__fsub_rn(s, m_new)) : 0.0f;
      const float corr = exp2f(__fsub_rn(m[t], m_new));  // 0 on the first visible tile
      l[t] = __fmaf_rn(l[t], corr, warp_sum(e));
      m[t] = m_new;
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[t][c] = __fmul_rn(acc[t][c], corr);
#pragma unroll 8
      for (int j = 0; j < kTileKeys; ++j) {
        const float ej = __shfl_sync(0xffffffffu, e, j);
#pragma unroll
        for (int c = 0; c < NC; ++c) acc[t][c] = __fmaf_rn(ej, vs[j][lane + 32 * c], acc[t][c]);
      }
    }
  }

  // Write the rows: final bf16 output, or this split's partial state.
#pragma unroll
  for (int t = 0; t < kRowsPerWarp; ++t) {
    const int r = warp + kWarps * t;
    const int64_t gr = row0 + r;
    if (gr >= total_rows) continue;
    const int64_t qi = gr / p.group;
    const int64_t h = int64_t{kvh} * p.group + (gr - qi * p.group);
    if (p.part_acc == nullptr) {
      const float inv = l[t] > 0.0f ? __fdiv_rn(1.0f, l[t]) : 0.0f;
      bf16_t* o = p.out + qi * p.out_stride + h * d_head;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int d = lane + 32 * c;
        if (d < d_head) o[d] = f32_to_bf16(__fmul_rn(acc[t][c], inv));
      }
    } else {
      const int64_t prow = int64_t{blockIdx.z} * p.seq * p.heads + qi * p.heads + h;
      float* pa = p.part_acc + prow * d_head;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int d = lane + 32 * c;
        if (d < d_head) pa[d] = acc[t][c];
      }
      if (lane == 0) {
        p.part_ml[prow * 2] = m[t];
        p.part_ml[prow * 2 + 1] = l[t];
      }
    }
  }
}

// One block of kCombineThreads per (query, head) row. Thread s first reads split s's (m, l) (all
// splits' loads in flight at once, not one after another), the block forms M = max m and the
// weights w_s = 2^(m_s − M) and L = Σ l_s·w_s (fixed tree order); then thread d sums
// Σ_s o_s[d]·w_s over the splits in index order and writes bf16(that / L).
constexpr int kCombineThreads = 128;  // >= the largest split count and head_dim

__global__ void __launch_bounds__(kCombineThreads)
    attention_combine_kernel(const float* part_acc, const float* part_ml, int splits, int64_t rows,
                             int head_dim, int heads, bf16_t* out, int64_t out_stride) {
  __shared__ float w[kCombineThreads];
  __shared__ float red[kCombineThreads / 32];
  const int64_t row = blockIdx.x;
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % 32;
  const int warp = tid / 32;
  float ms = -INFINITY;
  float ls = 0.0f;
  if (tid < splits) {
    ms = part_ml[(tid * rows + row) * 2];
    ls = part_ml[(tid * rows + row) * 2 + 1];
  }
  float mx = warp_max(ms);
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
  for (int i = 1; i < kCombineThreads / 32; ++i) mx = fmaxf(mx, red[i]);
  const float ws = (tid < splits && ms != -INFINITY) ? exp2f(__fsub_rn(ms, mx)) : 0.0f;
  w[tid] = ws;
  float l = warp_sum(__fmul_rn(ls, ws));
  __syncthreads();  // everyone has read red[] (the max) before it is reused for the sums
  if (lane == 0) red[warp] = l;
  __syncthreads();
  l = 0.0f;
  for (int i = 0; i < kCombineThreads / 32; ++i) l = __fadd_rn(l, red[i]);
  if (tid >= head_dim) return;
  float a = 0.0f;
#pragma unroll 8
  for (int s = 0; s < splits; ++s)
    a = __fmaf_rn(part_acc[(s * rows + row) * head_dim + tid], w[s], a);
  const float o = (mx != -INFINITY && l > 0.0f) ? __fmul_rn(a, __fdiv_rn(1.0f, l)) : 0.0f;
  const int64_t qi = row / heads;
  const int64_t h = row - qi * heads;
  out[qi * out_stride + h * head_dim + tid] = f32_to_bf16(o);
}

template <int NC>
void launch_attention(const AttnParams& p, bool vec, dim3 grid, cudaStream_t stream) {
  if (vec) {
    attention_kernel<NC, true><<<grid, kThreads, 0, stream>>>(p);
  } else {
    attention_kernel<NC, false><<<grid, kThreads, 0, stream>>>(p);
  }
}

std::atomic<MmaVariant> g_mma_variant{kDefaultMmaVariant};

}  // namespace

const char* mma_variant_name(MmaVariant v) {
  switch (v) {
    case MmaVariant::legacy:
      return "legacy";
    case MmaVariant::async_w4:
      return "async_w4";
    case MmaVariant::async_w8:
      return "async_w8";
    case MmaVariant::async_w4m2:
      return "async_w4m2";
  }
  return "?";
}

void set_attention_mma_variant(MmaVariant v) {
  g_mma_variant.store(v);
}

MmaVariant attention_mma_variant() {
  return g_mma_variant.load();
}

int attention_splits(int64_t q_rows, int num_heads, int num_kv_heads, int64_t keys,
                     int rows_per_block) {
  const int group = num_heads / num_kv_heads;
  const int64_t blocks = (q_rows * group + rows_per_block - 1) / rows_per_block * num_kv_heads;
  // Fixed constants (never read off the device, so a shape always splits the same way): about
  // two blocks per SM of an H100/H200 (132 SMs), at least 128 keys per split (measured on the
  // H200: 24 splits for L=3000 decode 29 us vs 33 us with 12; four blocks per SM was slower for
  // long L and for the vision shape).
  constexpr int64_t kTargetBlocks = 264;
  constexpr int64_t kMinKeysPerSplit = 128;
  if (blocks >= kTargetBlocks / 2 || keys <= kMinKeysPerSplit) return 1;
  int64_t splits = (kTargetBlocks + blocks - 1) / blocks;
  const int64_t by_keys = (keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  if (splits > by_keys) splits = by_keys;
  if (splits > 128) splits = 128;
  return static_cast<int>(splits < 1 ? 1 : splits);
}

Status run_attention(const OpContext& ctx, const Attention& op) {
  const int64_t seq = op.q.rows;
  const int d_head = op.head_dim;
  if (seq == 0) return Status();
  if (d_head <= 0 || d_head > kAttentionMaxHeadDim) {
    return make_error(ErrorCode::unsupported,
                      "attention: cuda supports head_dim <= 128, got " + std::to_string(d_head));
  }
  if (attention_decode_fits(op)) {  // S·group <= 16, and a variant fits the device's shared memory
    FERRY_ASSIGN_OR_RETURN(const DeviceLimits* dev, limits_for(ctx.limits));
    if (attention_decode_fits_device(op, *dev)) return run_attention_decode(ctx, op);
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
  // The tensor-core kernels count keys in 32 bits (no device holds a cache that long anyway).
  if (keys > 0x7fffffff) return make_error(ErrorCode::unsupported, "attention: 2^31 keys or more");
  p.span0 = op.kv[0].k.rows;
  p.seq = seq;
  p.keys = keys;
  p.out = ptr<bf16_t>(op.out);
  p.out_stride = op.out.stride();
  p.heads = op.num_heads;
  p.group = op.num_heads / op.num_kv_heads;
  p.head_dim = d_head;
  p.scale_log2 = op.scale * 1.4426950408889634f;  // log2(e): softmax runs in base 2
  p.causal = op.causal;
  p.q_pos0 = op.q_pos0;
  p.q_pos0_dev = op.q_pos0_dev.empty() ? nullptr : ptr<const int32_t>(op.q_pos0_dev);

  // Tensor cores when the head_dim has a padded instance, the rows fill at least half a block,
  // and K/V rows allow 16-byte loads; otherwise the CUDA-core kernel (any head_dim <= 128).
  const int padded = mma_padded_dim(d_head);
  bool vec_ok = d_head % 8 == 0;
  for (int s = 0; s < op.num_spans; ++s) {
    for (const TensorView* v : {&op.kv[s].k, &op.kv[s].v}) {
      vec_ok = vec_ok && reinterpret_cast<uintptr_t>(v->data) % 16 == 0 && v->stride() % 8 == 0;
    }
  }
  // With segments a block never spans two of them, so the segment size sets how full it is.
  const bool segmented = !op.segments.empty();
  const int64_t block_rows = segmented ? op.max_segment_rows : seq;
  const bool use_mma = padded != 0 && vec_ok && block_rows * p.group >= kMmaRows / 2;
  const MmaVariant variant = attention_mma_variant();
  const int rows_per_block = use_mma ? mma_rows_per_block(variant, padded) : kRows;

  // Segments run in one split: each block sees at most max_segment_rows keys, and the segments'
  // row blocks are what fills the GPU (vision: 16 images x 12 row blocks x 16 heads).
  const int splits =
      segmented ? 1 : attention_splits(seq, op.num_heads, op.num_kv_heads, keys, rows_per_block);
  constexpr int64_t kSplitQuantum = 64;  // a multiple of both kernels' key tiles
  int64_t per_split = (keys + splits - 1) / splits;
  per_split = (per_split + kSplitQuantum - 1) / kSplitQuantum * kSplitQuantum;
  if (per_split == 0) per_split = kSplitQuantum;
  p.keys_per_split = per_split;

  int64_t row_blocks = (seq * p.group + rows_per_block - 1) / rows_per_block;
  if (segmented) {
    const int64_t n = op.segments.rows - 1;
    p.segments = ptr<const int32_t>(op.segments);
    p.segments_stride = op.segments.stride();
    p.max_segment_rows = op.max_segment_rows;
    p.seg_row_blocks = (op.max_segment_rows * p.group + rows_per_block - 1) / rows_per_block;
    row_blocks = p.seg_row_blocks > 0x7fffffff / n ? int64_t{1} << 31 : n * p.seg_row_blocks;
  }
  if (row_blocks > 0x7fffffff) return make_error(ErrorCode::unsupported, "attention: S too large");
  const dim3 grid(static_cast<unsigned>(row_blocks), static_cast<unsigned>(op.num_kv_heads),
                  static_cast<unsigned>(splits));

  StreamScratch scratch;
  const int64_t prow = seq * op.num_heads;
  if (splits > 1) {
    const size_t bytes = static_cast<size_t>(splits * prow) * (static_cast<size_t>(d_head) + 2) * 4;
    FERRY_ASSIGN_OR_RETURN(scratch, take_scratch(ctx, bytes));
    p.part_acc = static_cast<float*>(scratch.get());
    p.part_ml = p.part_acc + splits * prow * d_head;
  }

  int nc = (d_head + 31) / 32;
  if (use_mma) {
    if (variant == MmaVariant::legacy) {
      launch_attention_mma(p, padded, grid, ctx.stream);
    } else {
      launch_attention_mma_async(p, padded, variant, grid, ctx.stream);
    }
    nc = 0;
  }
  switch (nc) {
    case 0:
      break;
    case 1:
      launch_attention<1>(p, vec_ok, grid, ctx.stream);
      break;
    case 2:
      launch_attention<2>(p, vec_ok, grid, ctx.stream);
      break;
    case 3:
      launch_attention<3>(p, vec_ok, grid, ctx.stream);
      break;
    default:
      launch_attention<4>(p, vec_ok, grid, ctx.stream);
      break;
  }
  FERRY_RETURN_IF_ERROR(launch_status("attention_kernel"));
  if (splits > 1) {
    attention_combine_kernel<<<static_cast<unsigned>(prow), kCombineThreads, 0, ctx.stream>>>(
        p.part_acc, p.part_ml, splits, prow, d_head, op.num_heads, p.out, p.out_stride);
    FERRY_RETURN_IF_ERROR(launch_status("attention_combine_kernel"));
  }
  return Status();
}

}  // namespace ferry::cuda
