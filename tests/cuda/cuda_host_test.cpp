// Host-side parts of the CUDA backend that run without a GPU (so they also run on machines
// with CUDA installed but no device): the factory's answer when no device is visible, the
// CUDA-specific op limits, and the split-KV heuristic's contract.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "backend/cuda/attention.cuh"
#include "backend/cuda/attention_impl.cuh"
#include "backend/cuda/cuda_backend.h"
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

}  // namespace
}  // namespace ferry::cuda_test
