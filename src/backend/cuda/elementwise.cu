#include <initializer_list>

#include "backend/cuda/activation.cuh"
#include "backend/cuda/activation_math.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.cuh"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;

// bf16(silu(u)) of the double-based reference (activation.cuh): fast fp32 with the exact
// fallback, or the reference itself (kRef, for the tests and benchmarks).
template <bool kRef>
__device__ __forceinline__ float silu_bf16(float u) {
  if constexpr (kRef) {
    return round_bf16(silu_ref(u));
  } else {
    return bf16_to_f32(static_cast<bf16_t>(silu_bf16_bits(u)));
  }
}

// ---- kernels ---------------------------------------------------------------------------------

template <bool kRef>
__global__ void swiglu_kernel(const bf16_t* gate, int64_t gs, const bf16_t* up, int64_t us,
                              bf16_t* out, int64_t os, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const float s = silu_bf16<kRef>(to_float(gate[r * gs + c]));
    out[r * os + c] = f32_to_bf16(__fmul_rn(s, to_float(up[r * us + c])));
  }
}

// dst[map(r)] += src[r]; map is the identity when rows == nullptr.
template <class D, class S>
__global__ void add_kernel(D* dst, int64_t ds, const S* src, int64_t ss, const int32_t* rows,
                           int64_t n_rows, int64_t cols) {
  const int64_t n = n_rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const int64_t dr = rows != nullptr ? int64_t{rows[r]} : r;
    D* d = dst + dr * ds + c;
    *d = from_float<D>(__fadd_rn(to_float(*d), to_float(src[r * ss + c])));
  }
}

template <class X, class Y>
__global__ void cast_kernel(const X* x, int64_t xs, Y* y, int64_t ys, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    y[r * ys + c] = from_float<Y>(to_float(x[r * xs + c]));
  }
}

// 16-byte versions for bf16 rows whose pointers, strides and widths allow it: each thread
// handles 8 consecutive elements of one row (grid: x over 8-element vectors, y over rows).
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    f[2 * e] = bf16_to_f32(static_cast<bf16_t>(w[e] & 0xffffu));
    f[2 * e + 1] = bf16_to_f32(static_cast<bf16_t>(w[e] >> 16));
  }
}

__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint32_t w[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    w[e] = static_cast<uint32_t>(f32_to_bf16(f[2 * e])) |
           (static_cast<uint32_t>(f32_to_bf16(f[2 * e + 1])) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <bool kRef>
__global__ void swiglu_vec8_kernel(const bf16_t* gate, int64_t gs, const bf16_t* up, int64_t us,
                                   bf16_t* out, int64_t os, int64_t rows, int64_t vecs) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vecs;
         v += int64_t{gridDim.x} * blockDim.x) {
      float g[8];
      float u[8];
      unpack8(*reinterpret_cast<const uint4*>(gate + r * gs + v * 8), g);
      unpack8(*reinterpret_cast<const uint4*>(up + r * us + v * 8), u);
      float o[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) o[e] = __fmul_rn(silu_bf16<kRef>(g[e]), u[e]);
      *reinterpret_cast<uint4*>(out + r * os + v * 8) = pack8(o);
    }
  }
}

__global__ void add_vec8_kernel(bf16_t* dst, int64_t ds, const bf16_t* src, int64_t ss,
                                int64_t rows, int64_t vecs) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    for (int64_t v = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; v < vecs;
         v += int64_t{gridDim.x} * blockDim.x) {
      float a[8];
      float b[8];
      uint4* d = reinterpret_cast<uint4*>(dst + r * ds + v * 8);
      unpack8(*d, a);
      unpack8(*reinterpret_cast<const uint4*>(src + r * ss + v * 8), b);
#pragma unroll
      for (int e = 0; e < 8; ++e) a[e] = __fadd_rn(a[e], b[e]);
      *d = pack8(a);
    }
  }
}

// True when every view's pointer is 16-byte aligned and its stride and width are multiples of 8.
bool vec8_ok(std::initializer_list<const TensorView*> views) {
  for (const TensorView* v : views) {
    if (reinterpret_cast<uintptr_t>(v->data) % 16 != 0 || v->stride() % 8 != 0 ||
        v->cols % 8 != 0) {
      return false;
    }
  }
  return true;
}

dim3 vec8_grid(int64_t rows, int64_t vecs) {
  int64_t x = (vecs + kThreads - 1) / kThreads;
  if (x > 1024) x = 1024;
  const int64_t y = rows < 65535 ? rows : 65535;
  return dim3(static_cast<unsigned>(x < 1 ? 1 : x), static_cast<unsigned>(y < 1 ? 1 : y));
}

// ---- launchers -------------------------------------------------------------------------------

template <class D, class S>
void launch_add(const TensorView& dst, const TensorView& src, const int32_t* rows, int64_t n_rows,
                cudaStream_t stream) {
  const int64_t n = n_rows * src.cols;
  add_kernel<D, S><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
      ptr<D>(dst), dst.stride(), ptr<const S>(src), src.stride(), rows, n_rows, src.cols);
}

Status add_dispatch(const OpContext& ctx, const TensorView& dst, const TensorView& src,
                    const int32_t* rows, int64_t n_rows) {
  if (n_rows == 0 || src.cols == 0) return Status();
  const bool db = dst.dtype == DType::bf16;
  const bool sb = src.dtype == DType::bf16;
  if (db && sb) launch_add<bf16_t, bf16_t>(dst, src, rows, n_rows, ctx.stream);
  if (db && !sb) launch_add<bf16_t, float>(dst, src, rows, n_rows, ctx.stream);
  if (!db && sb) launch_add<float, bf16_t>(dst, src, rows, n_rows, ctx.stream);
  if (!db && !sb) launch_add<float, float>(dst, src, rows, n_rows, ctx.stream);
  return launch_status("add_kernel");
}

template <class X, class Y>
void launch_cast(const Cast& op, cudaStream_t stream) {
  const int64_t n = op.x.numel();
  cast_kernel<X, Y><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
      ptr<const X>(op.x), op.x.stride(), ptr<Y>(op.y), op.y.stride(), op.x.rows, op.x.cols);
}

template <bool kRef>
Status launch_swiglu(const OpContext& ctx, const SwiGlu& op) {
  const int64_t n = op.out.numel();
  if (n == 0) return Status();
  if (vec8_ok({&op.gate, &op.up, &op.out})) {
    const int64_t vecs = op.out.cols / 8;
    swiglu_vec8_kernel<kRef><<<vec8_grid(op.out.rows, vecs), kThreads, 0, ctx.stream>>>(
        ptr<const bf16_t>(op.gate), op.gate.stride(), ptr<const bf16_t>(op.up), op.up.stride(),
        ptr<bf16_t>(op.out), op.out.stride(), op.out.rows, vecs);
    return launch_status("swiglu_vec8_kernel");
  }
  swiglu_kernel<kRef><<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(
      ptr<const bf16_t>(op.gate), op.gate.stride(), ptr<const bf16_t>(op.up), op.up.stride(),
      ptr<bf16_t>(op.out), op.out.stride(), op.out.rows, op.out.cols);
  return launch_status("swiglu_kernel");
}

}  // namespace

Status run_swiglu(const OpContext& ctx, const SwiGlu& op, ActImpl impl) {
  return impl == ActImpl::reference ? launch_swiglu<true>(ctx, op) : launch_swiglu<false>(ctx, op);
}

Status run_add(const OpContext& ctx, const Add& op) {
  if (op.dst.dtype == DType::bf16 && op.src.dtype == DType::bf16 && op.src.numel() > 0 &&
      vec8_ok({&op.dst, &op.src})) {
    const int64_t vecs = op.src.cols / 8;
    add_vec8_kernel<<<vec8_grid(op.src.rows, vecs), kThreads, 0, ctx.stream>>>(
        ptr<bf16_t>(op.dst), op.dst.stride(), ptr<const bf16_t>(op.src), op.src.stride(),
        op.src.rows, vecs);
    return launch_status("add_vec8_kernel");
  }
  return add_dispatch(ctx, op.dst, op.src, nullptr, op.src.rows);
}

Status run_add_rows(const OpContext& ctx, const AddRows& op) {
  return add_dispatch(ctx, op.dst, op.src, ptr<const int32_t>(op.rows), op.src.rows);
}

Status run_cast(const OpContext& ctx, const Cast& op) {
  if (op.x.numel() == 0) return Status();
  const bool xb = op.x.dtype == DType::bf16;
  const bool yb = op.y.dtype == DType::bf16;
  if (xb && yb) launch_cast<bf16_t, bf16_t>(op, ctx.stream);
  if (xb && !yb) launch_cast<bf16_t, float>(op, ctx.stream);
  if (!xb && yb) launch_cast<float, bf16_t>(op, ctx.stream);
  if (!xb && !yb) launch_cast<float, float>(op, ctx.stream);
  return launch_status("cast_kernel");
}

}  // namespace ferry::cuda
