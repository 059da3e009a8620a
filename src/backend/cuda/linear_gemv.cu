// The batch-1 GEMV on CUDA cores, in the order of backend/gemv_order.h.
//
// Why not the tensor-core skinny kernel: an mma accumulates inside the instruction, in an order
// and with an internal rounding no CPU can reproduce, so a decode layer computed by the host
// (issue 26) would give other bits. A GEMV is a read of w: CUDA cores keep up with HBM as long as
// enough loads are in flight, and the order below costs nothing but a shuffle tree per row.
//
// Work split. One warp owns `kRows` rows of w and all of K. Lane l takes the 16-byte chunks
// c = l, l + 32, l + 64, ... (k = 8c .. 8c + 7) of each of its rows and keeps 8 fp32 sums per row:
// sum e of lane l holds the positions k ≡ 8l + e (mod 256), taken in increasing k (the order's
// step 1). A round loads kUnroll chunks of every row and of x before the first multiply, so a
// lane has kUnroll·(kRows + 1) 16-byte loads in flight; the 32 lanes of a row read 512 contiguous
// bytes per chunk index. w is read with ld.global.nc.L1::no_allocate (each byte used once), x
// through L1 (every warp reads all of it). Chunks past K, and the rows past N of the last warp,
// load zeros: a product of zeros is +0, and adding +0 to a sum that started at +0 never changes
// it, so padding keeps the bits. The last partial chunk (K mod 8 values) is loaded element by
// element after the full ones, by the lane it belongs to, so it comes last in its positions.
//
// Then step 2, each lane's 8 sums paired ((0+1)+(2+3))+((4+5)+(6+7)), and step 3, a shuffle-xor
// tree over offsets 16, 8, 4, 2, 1: lane l < off adds lane l + off's value, as the order says
// (xor gives lanes >= off the same sums, fp32 addition being commutative). Every product and sum
// is an explicit __fmul_rn / __fadd_rn, which nvcc never contracts into an FMA (a product that
// underflows would round differently). Lane 0 runs the epilogue of ops.h Linear: bias in fp32,
// then y = bf16(act(bf16(acc))) or, for f32 y, act(acc), as the other linear kernels.
#include <cstdint>
#include <string>

#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/linear_gemv.cuh"
#include "backend/cuda/linear_skinny_impl.cuh"
#include "backend/gemv_order.h"
#include "core/bf16.h"

namespace ferry::cuda {
namespace {

using skinny::load16;
using skinny::load_x8;
using skinny::store_y;

constexpr int kWarps = 4;  // warps per block
static_assert(kGemvLanes == 32 && kGemvPositionsPerLane == 8,
              "one warp per row, one 16-byte chunk of 8 bf16 values per lane");

// The first `valid` of 8 consecutive bf16 values of w (element loads), zeros after.
__device__ __forceinline__ uint4 w_elems(const bf16_t* p, int valid) {
  uint32_t r[4] = {0, 0, 0, 0};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (e < valid) r[e / 2] |= uint32_t{__ldg(p + e)} << (16 * (e % 2));
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

__device__ __forceinline__ uint32_t x_bits(const bf16_t* p) {
  return __ldg(p);
}
__device__ __forceinline__ uint32_t x_bits(const float* p) {
  return f32_to_bf16(__ldg(p));  // an f32 x is rounded to bf16 (ops.h), as cvt.rn.bf16x2 does
}

template <class XT>
__device__ __forceinline__ uint4 x_elems(const XT* p, int valid) {
  uint32_t r[4] = {0, 0, 0, 0};
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    if (e < valid) r[e / 2] |= x_bits(p + e) << (16 * (e % 2));
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

// a[e] += x[e]·w[e] for the 8 bf16 pairs of a chunk (word i holds values 2i, low half, and 2i + 1).
__device__ __forceinline__ void add_chunk(float (&a)[8], const uint4& xv, const uint4& wv) {
  const uint32_t xs[4] = {xv.x, xv.y, xv.z, xv.w};
  const uint32_t ws[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float x0 = __uint_as_float(xs[i] << 16);
    const float w0 = __uint_as_float(ws[i] << 16);
    const float x1 = __uint_as_float(xs[i] & 0xffff0000u);
    const float w1 = __uint_as_float(ws[i] & 0xffff0000u);
    a[2 * i] = __fadd_rn(a[2 * i], __fmul_rn(x0, w0));
    a[2 * i + 1] = __fadd_rn(a[2 * i + 1], __fmul_rn(x1, w1));
  }
}

// kVec: x and every w row allow 16-byte loads; otherwise every chunk is loaded element by element.
template <class XT, class YT, int kRows, int kUnroll, bool kVec>
__global__ void __launch_bounds__(kWarps * 32)
    linear_gemv_kernel(const XT* __restrict__ x, const bf16_t* __restrict__ w, int64_t ldw,
                       const bf16_t* __restrict__ bias, YT* __restrict__ y, int64_t n_rows,
                       int64_t k_dim, Activation act) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t row0 = (int64_t{blockIdx.x} * kWarps + warp) * kRows;
  if (row0 >= n_rows) return;  // the whole warp leaves together

  const bf16_t* wr[kRows];
  bool ok[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    ok[r] = row0 + r < n_rows;
    wr[r] = w + (ok[r] ? row0 + r : row0) * ldw;  // absent rows read row0, predicated off
  }
  float a[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int e = 0; e < 8; ++e) a[r][e] = 0.0f;
  }

  const int64_t chunks = k_dim / 8;  // whole chunks
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint4 wv[kUnroll][kRows];
    uint4 xv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      const bool in = c < chunks;
      if constexpr (kVec) {
        xv[u] = load_x8<true>(x + 8 * c, in);
#pragma unroll
        for (int r = 0; r < kRows; ++r) wv[u][r] = load16<false>(wr[r] + 8 * c, in && ok[r]);
      } else {
        xv[u] = x_elems(x + 8 * c, in ? 8 : 0);
#pragma unroll
        for (int r = 0; r < kRows; ++r) wv[u][r] = w_elems(wr[r] + 8 * c, in && ok[r] ? 8 : 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) add_chunk(a[r], xv[u], wv[u][r]);
    }
  }
  const int tail = static_cast<int>(k_dim % 8);
  if (tail != 0 && lane == static_cast<int>(chunks % 32)) {
    const uint4 xv = x_elems(x + 8 * chunks, tail);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      add_chunk(a[r], xv, w_elems(wr[r] + 8 * chunks, ok[r] ? tail : 0));
  }

#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float* p = a[r];
    float s = __fadd_rn(__fadd_rn(__fadd_rn(p[0], p[1]), __fadd_rn(p[2], p[3])),
                        __fadd_rn(__fadd_rn(p[4], p[5]), __fadd_rn(p[6], p[7])));
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, off));
    if (lane == 0 && ok[r]) {
      const int64_t n = row0 + r;
      if (bias != nullptr) s = __fadd_rn(s, to_float(bias[n]));
      store_y(y + n, s, act);
    }
  }
}

uintptr_t address(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

// Whether x (one row: its stride is never used) and every w row allow 16-byte loads.
bool vector_loads(const Linear& op) {
  return address(op.x.data) % 16 == 0 && address(op.w.data) % 16 == 0 && op.w.stride() % 8 == 0;
}

template <class XT, class YT, int kRows, int kUnroll, bool kVec>
Status launch(const OpContext& ctx, const Linear& op) {
  const int64_t n = op.y.cols;
  const int64_t per_block = int64_t{kWarps} * kRows;
  const auto blocks = static_cast<unsigned>((n + per_block - 1) / per_block);
  linear_gemv_kernel<XT, YT, kRows, kUnroll, kVec><<<blocks, kWarps * 32, 0, ctx.stream>>>(
      ptr<const XT>(op.x), ptr<const bf16_t>(op.w), op.w.stride(),
      op.bias.empty() ? nullptr : ptr<const bf16_t>(op.bias), ptr<YT>(op.y), n, op.w.cols, op.act);
  return launch_status("linear_gemv_kernel");
}

template <int kRows, int kUnroll, bool kVec>
Status launch_types(const OpContext& ctx, const Linear& op) {
  const bool x_bf16 = op.x.dtype == DType::bf16;
  if (op.y.dtype == DType::bf16) {
    return x_bf16 ? launch<bf16_t, bf16_t, kRows, kUnroll, kVec>(ctx, op)
                  : launch<float, bf16_t, kRows, kUnroll, kVec>(ctx, op);
  }
  return x_bf16 ? launch<bf16_t, float, kRows, kUnroll, kVec>(ctx, op)
                : launch<float, float, kRows, kUnroll, kVec>(ctx, op);
}

template <int kRows, int kUnroll>
Status launch_loads(const OpContext& ctx, const Linear& op) {
  return vector_loads(op) ? launch_types<kRows, kUnroll, true>(ctx, op)
                          : launch_types<kRows, kUnroll, false>(ctx, op);
}

}  // namespace

GemvConfig linear_gemv_config(int64_t n) {
  // Measured on an H100 (docs/benchmarks.md, 2026-12-06, bench/cuda_ops_bench): one row per warp
  // with 8 chunks in flight is the fastest or within 1% below 8192 rows (N = 4096, 6144); past it
  // two rows sharing x's loads, 2 chunks each (N = 24576: 68.6 us against 70.6 for {2, 4}; the LM
  // head, N = 155697: 409 against 419). Four rows per warp lose everywhere (too few warps).
  return n >= 8192 ? GemvConfig{2, 2} : GemvConfig{1, 8};
}

bool linear_gemv_fits(const Linear& op) {
  const int64_t k = op.w.cols;
  return op.y.rows == 1 && k >= 1 && k < (int64_t{1} << 31);
}

Status run_linear_gemv(const OpContext& ctx, const Linear& op, GemvConfig config) {
  if (!linear_gemv_fits(op)) {
    return make_error(ErrorCode::invalid_argument, "linear_gemv: the op does not fit");
  }
  if (op.y.cols == 0) return Status();
  if (config.rows == 0 && config.unroll == 0) config = linear_gemv_config(op.y.cols);
  switch (config.rows * 10 + config.unroll) {
    case 14:
      return launch_loads<1, 4>(ctx, op);
    case 18:
      return launch_loads<1, 8>(ctx, op);
    case 22:
      return launch_loads<2, 2>(ctx, op);
    case 24:
      return launch_loads<2, 4>(ctx, op);
    case 42:
      return launch_loads<4, 2>(ctx, op);
    default:
      return make_error(ErrorCode::invalid_argument,
                        "linear_gemv: unsupported config " + std::to_string(config.rows) +
                            " rows, unroll " + std::to_string(config.unroll));
  }
}

}  // namespace ferry::cuda
