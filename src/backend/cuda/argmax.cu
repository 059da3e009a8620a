// argmax in two passes so that one long row (the LM head's 155697 logits at decode) is spread
// over many blocks: pass 1, block (chunk, row) finds the best (value, index) of a chunk of the
// row; pass 2, one block per row combines the chunks. The combine rule is order-independent
// (larger value wins, ties go to the lower index, NaN never wins), so the result is exact and
// the same whatever the chunking.
#include <cmath>

#include "backend/cuda/argmax.cuh"
#include "backend/cuda/common.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_resources.h"

namespace ferry::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = 2048;  // elements per pass-1 block (8 per thread)

struct Best {
  float v;
  int64_t i;  // -1: nothing seen yet (or only NaN)
};

__device__ __forceinline__ Best better(Best a, Best b) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  if (a.v > b.v || (a.v == b.v && a.i < b.i)) return a;
  return b;
}

// Best of the block's threads, valid in thread 0.
__device__ __forceinline__ Best block_best(Best b) {
  __shared__ float sv[kThreads / 32];
  __shared__ int64_t si[kThreads / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    const Best o{__shfl_xor_sync(0xffffffffu, b.v, off),
                 static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, b.i, off))};
    b = better(b, o);
  }
  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x % 32 == 0) {
    sv[warp] = b.v;
    si[warp] = b.i;
  }
  __syncthreads();
  Best r{sv[0], si[0]};
  for (int w = 1; w < kThreads / 32; ++w) r = better(r, Best{sv[w], si[w]});
  return r;
}

// Pass 1: block (x = chunk, y = row).
template <class T>
__global__ void argmax_chunk_kernel(const T* x, int64_t xs, int64_t cols, float* part_v,
                                    int64_t* part_i, int chunks) {
  const int64_t row = blockIdx.y;
  const T* xr = x + row * xs;
  const int64_t c0 = int64_t{blockIdx.x} * kChunk;
  const int64_t c1 = c0 + kChunk < cols ? c0 + kChunk : cols;
  Best b{0.0f, -1};
#pragma unroll 8
  for (int64_t c = c0 + threadIdx.x; c < c1; c += kThreads) {
    const float v = to_float(xr[c]);
    if (!isnan(v) && (b.i < 0 || v > b.v)) b = Best{v, c};
  }
  const Best r = block_best(b);
  if (threadIdx.x == 0) {
    part_v[row * chunks + blockIdx.x] = r.v;
    part_i[row * chunks + blockIdx.x] = r.i;
  }
}

// Pass 2: one block per row over its chunks.
__global__ void argmax_combine_kernel(const float* part_v, const int64_t* part_i, int chunks,
                                      int32_t* out, int64_t os) {
  const int64_t row = blockIdx.x;
  Best b{0.0f, -1};
  for (int c = static_cast<int>(threadIdx.x); c < chunks; c += kThreads) {
    b = better(b, Best{part_v[row * chunks + c], part_i[row * chunks + c]});
  }
  const Best r = block_best(b);
  if (threadIdx.x == 0) out[row * os] = static_cast<int32_t>(r.i < 0 ? 0 : r.i);
}

}  // namespace

Status run_argmax(const OpContext& ctx, const Argmax& op) {
  const int64_t rows = op.x.rows;
  if (rows == 0) return Status();
  if (rows > 65535) return make_error(ErrorCode::unsupported, "argmax: more than 65535 rows");
  const int64_t chunks = op.x.cols == 0 ? 1 : (op.x.cols + kChunk - 1) / kChunk;
  if (chunks > 0x7fffffff) return make_error(ErrorCode::unsupported, "argmax: row too long");
  const size_t parts = static_cast<size_t>(rows * chunks);
  FERRY_ASSIGN_OR_RETURN(StreamScratch scratch,
                         take_scratch(ctx, parts * (sizeof(float) + sizeof(int64_t))));
  auto* part_i = static_cast<int64_t*>(scratch.get());
  auto* part_v = reinterpret_cast<float*>(part_i + parts);
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(rows));
  const int nchunks = static_cast<int>(chunks);
  if (op.x.dtype == DType::bf16) {
    argmax_chunk_kernel<bf16_t><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<const bf16_t>(op.x), op.x.stride(), op.x.cols, part_v, part_i, nchunks);
  } else {
    argmax_chunk_kernel<float><<<grid, kThreads, 0, ctx.stream>>>(
        ptr<const float>(op.x), op.x.stride(), op.x.cols, part_v, part_i, nchunks);
  }
  FERRY_RETURN_IF_ERROR(launch_status("argmax_chunk_kernel"));
  argmax_combine_kernel<<<static_cast<unsigned>(rows), kThreads, 0, ctx.stream>>>(
      part_v, part_i, nchunks, ptr<int32_t>(op.out), op.out.stride());
  return launch_status("argmax_combine_kernel");
}

}  // namespace ferry::cuda
