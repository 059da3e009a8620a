// Host emulation of attention_mma_async_kernel: one std::thread per GPU thread, barriers for
// warp collectives (mma, ldmatrix, shfl) and __syncthreads. cp.async copies synchronously.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>
using bf16_t = uint16_t;
struct dim3 {
  unsigned x = 0, y = 0, z = 0;
};
thread_local dim3 threadIdx, blockIdx;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(a, b)
#define __align__(n)
#define __shared__ static
#define __fmul_rn(a, b) ((float)((a) * (b)))
#define __fadd_rn(a, b) ((float)((a) + (b)))
#define __fsub_rn(a, b) ((float)((a) - (b)))
#define __fdiv_rn(a, b) ((float)((a) / (b)))
#define __fmaf_rn(a, b, c) std::fmaf(a, b, c)
struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return {a, b, c, d};
}
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t f2u(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline bf16_t f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return (bf16_t)(u >> 16);
}
inline float bf16_to_f32(bf16_t b) {
  return __uint_as_float((uint32_t)b << 16);
}

std::barrier<>* g_block_bar;
std::vector<std::barrier<>*> g_warp_bar;
inline void __syncthreads() {
  g_block_bar->arrive_and_wait();
}
inline int tid_() {
  return (int)threadIdx.x;
}
inline void warp_sync() {
  g_warp_bar[tid_() / 32]->arrive_and_wait();
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  warp_sync();
}

// exchange slots per thread
struct Slot {
  float f;
  uint32_t a[4], b0, b1;
  float c[4];
  const void* addr;
};
std::vector<Slot> g_slot;

inline float __shfl_xor_sync(unsigned, float v, int m) {
  int tid = tid_();
  g_slot[tid].f = v;
  warp_sync();
  float r = g_slot[(tid & ~31) | ((tid & 31) ^ m)].f;
  warp_sync();
  return r;
}
#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
struct AttnParams {
  const bf16_t* q;
  int64_t q_stride;
  const bf16_t* k[2];
  const bf16_t* v[2];
  int64_t k_stride[2];
  int64_t v_stride[2];
  int64_t span0, seq, keys;
  bf16_t* out;
  int64_t out_stride;
  int heads, group, head_dim;
  float scale_log2;
  bool causal;
  int64_t q_pos0;
  const int32_t* q_pos0_dev;
  int64_t keys_per_split;
  float* part_acc;
  float* part_ml;
  const int32_t* segments;
  int64_t segments_stride, seg_row_blocks, max_segment_rows;
};
inline int64_t attn_q_pos0(const AttnParams& p) {
  if (p.q_pos0_dev == nullptr) return p.q_pos0;
  const int32_t v = *p.q_pos0_dev;
  return v < 0 ? 0 : int64_t{v};
}
struct BlockRange {
  int64_t row0, row_end, key_begin, key_end;
};
inline BlockRange attention_block_range(const AttnParams& p, int rows_per_block) {
  BlockRange r;
  if (p.segments == nullptr) {
    r.row0 = int64_t{blockIdx.x} * rows_per_block;
    r.row_end = p.seq * p.group;
    r.key_begin = int64_t{blockIdx.z} * p.keys_per_split;
    r.key_end = r.key_begin + p.keys_per_split < p.keys ? r.key_begin + p.keys_per_split : p.keys;
    return r;
  }
  const int64_t seg = int64_t{blockIdx.x} / p.seg_row_blocks;
  const int64_t rb = int64_t{blockIdx.x} - seg * p.seg_row_blocks;
  int64_t s0 = p.segments[seg * p.segments_stride], s1 = p.segments[(seg + 1) * p.segments_stride];
  s0 = s0 < 0 ? 0 : (s0 > p.seq ? p.seq : s0);
  s1 = s1 < s0 ? s0 : (s1 > p.seq ? p.seq : s1);
  if (s1 - s0 > p.max_segment_rows) s1 = s0 + p.max_segment_rows;
  r.row0 = s0 * p.group + rb * rows_per_block;
  r.row_end = s1 * p.group;
  r.key_begin = s0;
  r.key_end = s1;
  return r;
}
namespace mma {
inline uint32_t pack(bf16_t lo, bf16_t hi) {
  return (uint32_t)lo | ((uint32_t)hi << 16);
}
inline float lo_f(uint32_t r) {
  return bf16_to_f32((bf16_t)(r & 0xffff));
}
inline float hi_f(uint32_t r) {
  return bf16_to_f32((bf16_t)(r >> 16));
}
inline void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  int tid = tid_();
  int base = tid & ~31;
  Slot& s = g_slot[tid];
  for (int i = 0; i < 4; ++i) {
    s.a[i] = a[i];
    s.c[i] = c[i];
  }
  s.b0 = b0;
  s.b1 = b1;
  warp_sync();
  // reconstruct A 16x16, B 16x8
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; ++l) {
    const Slot& o = g_slot[base + l];
    int g = l / 4, t = l % 4;
    A[g][2 * t] = lo_f(o.a[0]);
    A[g][2 * t + 1] = hi_f(o.a[0]);
    A[g + 8][2 * t] = lo_f(o.a[1]);
    A[g + 8][2 * t + 1] = hi_f(o.a[1]);
    A[g][2 * t + 8] = lo_f(o.a[2]);
    A[g][2 * t + 9] = hi_f(o.a[2]);
    A[g + 8][2 * t + 8] = lo_f(o.a[3]);
    A[g + 8][2 * t + 9] = hi_f(o.a[3]);
    B[2 * t][g] = lo_f(o.b0);
    B[2 * t + 1][g] = hi_f(o.b0);
    B[2 * t + 8][g] = lo_f(o.b1);
    B[2 * t + 9][g] = hi_f(o.b1);
  }
  int l = tid & 31, g = l / 4, t = l % 4;
  float d[4];
  for (int e = 0; e < 4; ++e) {
    int row = g + 8 * (e / 2), col = 2 * t + (e % 2);
    double acc = c[e];
    for (int k = 0; k < 16; ++k) acc += (double)A[row][k] * B[k][col];
    d[e] = (float)acc;
  }
  warp_sync();
  for (int e = 0; e < 4; ++e) c[e] = d[e];
}
inline void ldm(uint32_t (&r)[4], const bf16_t* p, bool trans) {
  int tid = tid_();
  int base = tid & ~31;
  int l = tid & 31;
  g_slot[tid].addr = p;
  warp_sync();
  for (int m = 0; m < 4; ++m) {
    const bf16_t* rows[8];
    for (int i = 0; i < 8; ++i) rows[i] = (const bf16_t*)g_slot[base + m * 8 + i].addr;
    bf16_t e0, e1;
    if (!trans) {
      e0 = rows[l / 4][2 * (l % 4)];
      e1 = rows[l / 4][2 * (l % 4) + 1];
    } else {
      e0 = rows[2 * (l % 4)][l / 4];
      e1 = rows[2 * (l % 4) + 1][l / 4];
    }
    r[m] = pack(e0, e1);
  }
  warp_sync();
}
inline void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* p) {
  ldm(r, p, false);
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16_t* p) {
  ldm(r, p, true);
}
inline uint32_t cvt_bf16x2(float lo, float hi) {
  return pack(f32_to_bf16(lo), f32_to_bf16(hi));
}
inline uint32_t q_pair(const bf16_t* row, int d, int head_dim) {
  if (row == nullptr || d >= head_dim) return 0u;
  return pack(row[d], row[d + 1]);
}
inline float exp2_ftz(float x) {
  float y = std::exp2(x);
  return y < 1.17549435e-38f ? 0.0f : y;
}
struct Cp {
  bf16_t* s;
  const bf16_t* g;
  bool v;
};
thread_local std::vector<Cp> t_cp;
inline void cp_async16(bf16_t* smem, const bf16_t* gmem, bool valid) {
  t_cp.push_back({smem, gmem, valid});
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {
  for (auto& c : t_cp) {
    if (c.v)
      std::memcpy(c.s, c.g, 16);
    else
      std::memset(c.s, 0, 16);
  }
  t_cp.clear();
}
}  // namespace mma

inline void emu_poison(void* p, size_t n) {
  if (tid_() == 0) {
    bf16_t* b = (bf16_t*)p;
    for (size_t i = 0; i < n / 2; ++i) b[i] = 0x7fc0;
  }
  g_block_bar->arrive_and_wait();
}
namespace emu {
using namespace mma;
#include "kernel_body.inc"
}  // namespace emu

template <int DP, int W, int MT>
void launch(const AttnParams& p, dim3 grid) {
  const int nt = W * 32;
  g_slot.assign(nt, Slot{});
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        std::barrier<> bb(nt);
        g_block_bar = &bb;
        std::vector<std::barrier<>*> wb;
        for (int w = 0; w < W; ++w) wb.push_back(new std::barrier<>(32));
        g_warp_bar = wb;
        std::vector<std::thread> th;
        for (int t = 0; t < nt; ++t)
          th.emplace_back([&, t] {
            threadIdx = {(unsigned)t, 0, 0};
            blockIdx = {x, y, z};
            emu::attention_mma_async_kernel<DP, W, MT>(p);
          });
        for (auto& t : th) t.join();
        for (auto* b : wb) delete b;
      }
}
