// Host-side parts of the CUDA backend that run without a GPU (so they also run on machines
// with CUDA installed but no device): the factory's answer when no device is visible, the
// CUDA-specific op limits, and the split-KV heuristic's contract.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/attention_impl.cuh"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/linear_skinny.cuh"
#include "backend/cuda/op_context.h"

namespace ferry::cuda_test {
namespace {

TEST(CudaHost, FactoryMatchesDevicePresence) {
  int n = 0;
  const bool has_device = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  const BackendFactory f = cuda_backend_factory();
  ASSERT_NE(f.available, nullptr);
  ASSERT_NE(f.create, nullptr);
  EXPECT_EQ(f.available(), has_device);
  auto be = f.create();
  if (has_device) {
    ASSERT_TRUE(be.ok()) << be.error().to_string();
    EXPECT_EQ((*be)->name(), "cuda");
  } else {
    ASSERT_FALSE(be.ok());
    EXPECT_EQ(be.error().code, ErrorCode::unsupported);
  }
}

TEST(CudaHost, HeadDimLimit) {
  Attention a;
  a.num_spans = 1;
  a.head_dim = 128;
  EXPECT_TRUE(cuda::check_cuda_limits(a).ok());
  a.head_dim = 129;
  const Status st = cuda::check_cuda_limits(a);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::unsupported);
  EXPECT_TRUE(cuda::check_cuda_limits(Add{}).ok());  // other ops have no CUDA-only limit
}

TEST(CudaHost, TensorCorePaddedDims) {
  EXPECT_EQ(cuda::mma_padded_dim(64), 64);
  EXPECT_EQ(cuda::mma_padded_dim(72), 80);  // vision head_dim: zero columns up to 80
  EXPECT_EQ(cuda::mma_padded_dim(128), 128);
  EXPECT_EQ(cuda::mma_padded_dim(100), 0);  // CUDA-core kernel
  EXPECT_EQ(cuda::mma_padded_dim(16), 0);
}

// The split count is a pure function of the shape, in [1, 128]; no split when the row blocks
// alone fill the GPU or the keys are few; and more keys never mean fewer splits.
TEST(CudaHost, SplitHeuristicContract) {
  for (int64_t keys : {1, 64, 128, 129, 1000, 3000, 8000, 100000}) {
    for (int64_t s : {1, 4, 64, 3000}) {
      const int a = cuda::attention_splits(s, 32, 8, keys, 16);
      EXPECT_EQ(a, cuda::attention_splits(s, 32, 8, keys, 16));
      EXPECT_GE(a, 1);
      EXPECT_LE(a, 128);
      if (keys <= 128) {
        EXPECT_EQ(a, 1);
      }
      EXPECT_LE(a, cuda::attention_splits(s, 32, 8, keys * 2, 16));
    }
  }
  EXPECT_EQ(cuda::attention_splits(3000, 32, 8, 3000, 64), 1);  // prefill fills the GPU
  EXPECT_GT(cuda::attention_splits(1, 32, 8, 3000, 16), 1);     // decode step splits
}

// run_linear's choice of the skinny kernel: M <= 8, K a multiple of 8, w rows 16-byte aligned;
// x and y alignment and strides do not matter (x has an element-load path).
TEST(CudaHost, LinearSkinnyRouting) {
  auto* base = reinterpret_cast<uint8_t*>(uintptr_t{1} << 20);  // 256-aligned; never dereferenced
  auto op_for = [&](int64_t m, int64_t n, int64_t k) {
    Linear op;
    op.x = make_view(base, DType::bf16, m, k);
    op.w = make_view(base, DType::bf16, n, k);
    op.y = make_view(base, DType::bf16, m, n);
    return op;
  };
  for (int64_t m = 1; m <= cuda::kSkinnyMaxM; ++m) {
    EXPECT_TRUE(cuda::linear_skinny_fits(op_for(m, 4096, 4096))) << m;
  }
  EXPECT_TRUE(cuda::linear_skinny_fits(op_for(1, 155697, 4096)));
  EXPECT_TRUE(cuda::linear_skinny_fits(op_for(1, 3, 8)));
  EXPECT_FALSE(cuda::linear_skinny_fits(op_for(cuda::kSkinnyMaxM + 1, 4096, 4096)));
  EXPECT_FALSE(cuda::linear_skinny_fits(op_for(64, 2048, 8256)));
  EXPECT_FALSE(cuda::linear_skinny_fits(op_for(1, 64, 60)));  // K % 8 != 0
  EXPECT_FALSE(cuda::linear_skinny_fits(op_for(0, 64, 64)));

  Linear op = op_for(1, 64, 64);
  op.w.row_stride = 72;  // a column slice with 16-byte rows
  EXPECT_TRUE(cuda::linear_skinny_fits(op));
  op.w.row_stride = 68;  // rows 8 bytes apart from 16-byte alignment
  EXPECT_FALSE(cuda::linear_skinny_fits(op));
  op = op_for(1, 64, 64);
  op.w.data = base + 8;
  EXPECT_FALSE(cuda::linear_skinny_fits(op));
  op = op_for(1, 64, 64);
  op.x.dtype = DType::f32;
  op.x.data = base + 4;  // f32 x 4 bytes off 16-byte alignment, odd stride
  op.x.row_stride = 67;
  op.y.data = base + 2;
  op.y.row_stride = 65;
  EXPECT_TRUE(cuda::linear_skinny_fits(op));

  // 9 <= M <= 64: the second kernel, same conditions on K and w.
  EXPECT_FALSE(cuda::linear_skinny64_fits(op_for(cuda::kSkinnyMaxM, 64, 64)));
  for (int64_t m : {9, 16, 33, 64}) {
    EXPECT_TRUE(cuda::linear_skinny64_fits(op_for(m, 2048, 8256))) << m;
    EXPECT_FALSE(cuda::linear_skinny_fits(op_for(m, 2048, 8256))) << m;
  }
  EXPECT_FALSE(cuda::linear_skinny64_fits(op_for(cuda::kSkinny64MaxM + 1, 64, 64)));
  EXPECT_FALSE(cuda::linear_skinny64_fits(op_for(64, 64, 60)));
  op = op_for(64, 64, 64);
  op.w.row_stride = 68;
  EXPECT_FALSE(cuda::linear_skinny64_fits(op));
}

// K splits of the M <= 64 kernel: a function of N and K only; none when the 64-row blocks fill
// the GPU or K is under 1024; at least 8 steps of 64 per split.
TEST(CudaHost, LinearSkinny64Splits) {
  EXPECT_EQ(cuda::linear_skinny64_splits(16512, 2048), 1);  // 258 blocks
  EXPECT_EQ(cuda::linear_skinny64_splits(2048, 8256), 8);   // 32 blocks, 16 steps per split
  EXPECT_EQ(cuda::linear_skinny64_splits(4096, 2048), 4);   // 64 blocks, 32 steps
  EXPECT_EQ(cuda::linear_skinny64_splits(2048, 2048), 4);   // capped by 8 steps per split
  EXPECT_EQ(cuda::linear_skinny64_splits(100, 960), 1);     // 15 steps: no room for two splits
  for (int64_t n : {1, 64, 2048, 100000}) {
    for (int64_t k : {8, 1024, 8256, 65536}) {
      const int s = cuda::linear_skinny64_splits(n, k);
      EXPECT_GE(s, 1);
      EXPECT_LE(s, 16);
      EXPECT_LE(s, std::max<int64_t>(1, (k + 63) / 64 / 8));
    }
  }
}

}  // namespace
}  // namespace ferry::cuda_test
