#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.cuh"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;

// silu(u) = u / (1 + e^-u). The exponential is evaluated in double and rounded once to float, so
// it is the correctly rounded expf almost always (as the CPU reference's libm expf).
__device__ __forceinline__ float silu_f(float u) {
  const float e = static_cast<float>(exp(-static_cast<double>(u)));
  return __fdiv_rn(u, __fadd_rn(1.0f, e));
}

// ---- kernels ---------------------------------------------------------------------------------

__global__ void swiglu_kernel(const bf16_t* gate, int64_t gs, const bf16_t* up, int64_t us,
                              bf16_t* out, int64_t os, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const float s = round_bf16(silu_f(to_float(gate[r * gs + c])));
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

}  // namespace

Status run_swiglu(const OpContext& ctx, const SwiGlu& op) {
  const int64_t n = op.out.numel();
  if (n == 0) return Status();
  swiglu_kernel<<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(
      ptr<const bf16_t>(op.gate), op.gate.stride(), ptr<const bf16_t>(op.up), op.up.stride(),
      ptr<bf16_t>(op.out), op.out.stride(), op.out.rows, op.out.cols);
  return launch_status("swiglu_kernel");
}

Status run_add(const OpContext& ctx, const Add& op) {
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
