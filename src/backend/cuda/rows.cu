#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/rows.cuh"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;

// dst[dmap(r)] = src[smap(r)] for r < n, element type E (moved as raw bits). A null map is the
// identity. Gather maps the source row, scatter the destination row.
template <class E>
__global__ void move_rows_kernel(const E* src, int64_t ss, const int32_t* smap, int64_t smap_stride,
                                 E* dst, int64_t ds, const int32_t* dmap, int64_t dmap_stride,
                                 int64_t n, int64_t cols) {
  const int64_t total = n * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    const int64_t sr = smap != nullptr ? int64_t{smap[r * smap_stride]} : r;
    const int64_t dr = dmap != nullptr ? int64_t{dmap[r * dmap_stride]} : r;
    dst[dr * ds + c] = src[sr * ss + c];
  }
}

template <class E>
void launch_move(const TensorView& src, const int32_t* smap, int64_t smap_stride,
                 const TensorView& dst, const int32_t* dmap, int64_t dmap_stride, int64_t n,
                 cudaStream_t stream) {
  const int64_t total = n * src.cols;
  move_rows_kernel<E><<<grid_for(total, kThreads), kThreads, 0, stream>>>(
      ptr<const E>(src), src.stride(), smap, smap_stride, ptr<E>(dst), dst.stride(), dmap,
      dmap_stride, n, src.cols);
}

Status move_rows(const OpContext& ctx, const TensorView& src, const int32_t* smap,
                 int64_t smap_stride, const TensorView& dst, const int32_t* dmap,
                 int64_t dmap_stride, int64_t n) {
  if (n == 0 || src.cols == 0) return Status();
  switch (dtype_size(src.dtype)) {
    case 1:
      launch_move<uint8_t>(src, smap, smap_stride, dst, dmap, dmap_stride, n, ctx.stream);
      break;
    case 2:
      launch_move<uint16_t>(src, smap, smap_stride, dst, dmap, dmap_stride, n, ctx.stream);
      break;
    case 4:
      launch_move<uint32_t>(src, smap, smap_stride, dst, dmap, dmap_stride, n, ctx.stream);
      break;
    case 8:
      launch_move<uint64_t>(src, smap, smap_stride, dst, dmap, dmap_stride, n, ctx.stream);
      break;
    default:
      return make_error(ErrorCode::unsupported, "cuda: row move of this element size");
  }
  return launch_status("move_rows_kernel");
}

// Spec §3.2: every product and partial sum rounded to bf16, weights rounded to bf16 first.
__global__ void pos_embed_kernel(const bf16_t* table, int64_t ts, const int32_t* idx, int64_t is,
                                 const float* weight, int64_t ws, bf16_t* out, int64_t os,
                                 int64_t n, int64_t cols) {
  const int64_t total = n * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / cols;
    const int64_t c = i - r * cols;
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float w = round_bf16(weight[r * ws + k]);
      const float e = to_float(table[int64_t{idx[r * is + k]} * ts + c]);
      const float term = round_bf16(__fmul_rn(e, w));
      acc = k == 0 ? term : round_bf16(__fadd_rn(acc, term));
    }
    out[r * os + c] = f32_to_bf16(acc);
  }
}

}  // namespace

Status run_gather_rows(const OpContext& ctx, const GatherRows& op) {
  return move_rows(ctx, op.table, ptr<const int32_t>(op.ids), op.ids.stride(), op.out, nullptr, 0,
                   op.out.rows);
}

Status run_scatter_rows(const OpContext& ctx, const ScatterRows& op) {
  return move_rows(ctx, op.src, nullptr, 0, op.dst, ptr<const int32_t>(op.rows), op.rows.stride(),
                   op.src.rows);
}

Status run_copy(const OpContext& ctx, const Copy& op) {
  if (op.src.rows == 0 || op.src.cols == 0) return Status();
  const size_t es = dtype_size(op.src.dtype);
  FERRY_CUDA_CHECK(cudaMemcpy2DAsync(
      op.dst.data, static_cast<size_t>(op.dst.stride()) * es, op.src.data,
      static_cast<size_t>(op.src.stride()) * es, static_cast<size_t>(op.src.cols) * es,
      static_cast<size_t>(op.src.rows), cudaMemcpyDeviceToDevice, ctx.stream));
  return Status();
}

Status run_pos_embed_interp(const OpContext& ctx, const PosEmbedInterp& op) {
  const int64_t total = op.out.numel();
  if (total == 0) return Status();
  pos_embed_kernel<<<grid_for(total, kThreads), kThreads, 0, ctx.stream>>>(
      ptr<const bf16_t>(op.table), op.table.stride(), ptr<const int32_t>(op.idx), op.idx.stride(),
      ptr<const float>(op.weight), op.weight.stride(), ptr<bf16_t>(op.out), op.out.stride(),
      op.out.rows, op.out.cols);
  return launch_status("pos_embed_kernel");
}

}  // namespace ferry::cuda
