// The kernels' small-device variants (device_limits.cuh: FERRY_MAX_SHARED_BYTES), run on whatever
// GPU the harness has: with the shared-memory cap of an sm_86/89/120 card (101,376 bytes per
// block) or lower, each kernel that chooses a layout by the device's limit must give the same
// output bytes as without the cap where its summation order is the same (the decode kernel with
// V copied over K; linear_skinny64 at unroll 2 instead of 4), and stay within the CPU reference's
// tolerance where the order changes (the decode shape falling back to the general kernels).
// The variant choice itself is a pure function, checked without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/attention_decode.cuh"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_limits.cuh"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/linear_skinny.cuh"
#include "core/bf16.h"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

constexpr int kConsumerShared = 101376;  // sm_86/89/120: 99 KB per block

// Sets the process-wide cap for its lifetime, then restores the previous one.
class CapScope {
 public:
  explicit CapScope(int bytes) : previous_(cuda::shared_memory_cap()) {
    cuda::set_shared_memory_cap(bytes);
  }
  ~CapScope() { cuda::set_shared_memory_cap(previous_); }
  CapScope(const CapScope&) = delete;
  CapScope& operator=(const CapScope&) = delete;

 private:
  int previous_;
};

// ---- the variant choice (no GPU) ---------------------------------------------------------------

TEST(SmallSharedMemory, DecodeVariantSizes) {
  constexpr size_t kAll = size_t{1} << 30;
  // Full layouts: K and V of the split, P as hi/lo, row maxima and sums.
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 256, kAll), 156672u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 128, kAll), 78848u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(64, 256, kAll), 91136u);
  // A 99 KB card: only 256 keys of head_dim 128 need V over K.
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 256, kConsumerShared), 87040u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 128, kConsumerShared), 78848u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(64, 256, kConsumerShared), 91136u);
  // 48 KB (no opt-in at all).
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 128, 49152), 44032u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(64, 128, 49152), 46080u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 256, 49152), 0u);
  EXPECT_EQ(cuda::attention_decode_smem_bytes(128, 128, 40000), 0u);
}

TEST(SmallSharedMemory, Skinny64Unroll) {
  // M > 32 (8 n-tiles): unroll 4 stages 96 KB of x, unroll 2 48 KB.
  EXPECT_EQ(cuda::linear_skinny64_unroll(64, 4, kConsumerShared), 4);
  EXPECT_EQ(cuda::linear_skinny64_unroll(64, 4, 65536), 2);
  EXPECT_EQ(cuda::linear_skinny64_unroll(64, 2, 65536), 2);
  EXPECT_EQ(cuda::linear_skinny64_unroll(64, 4, 40000), 0);
  EXPECT_EQ(cuda::linear_skinny64_unroll(16, 4, 40000), 4);  // 2 n-tiles: 24 KB
}

// ---- on the GPU --------------------------------------------------------------------------------

struct Direct {
  Status status;
  std::vector<uint8_t> out;  // the last buffer (the op's output)
};

// Uploads the case's buffers to `be`, runs `run` on the op, returns the last buffer.
template <class Run>
Direct run_direct(Backend& be, Stream& stream, const Case& c, Run run) {
  std::vector<DeviceBuffer> bufs;
  std::vector<TensorView> views;
  Direct d;
  for (const Buffer& b : c.buffers) {
    auto mem = be.allocate(b.host.size());
    if (!mem.ok()) {
      d.status = mem.status();
      return d;
    }
    be.copy_to_device(stream, mem->data(), b.host.data(), b.host.size());
    views.push_back(make_view(mem->data(), b.dtype, b.rows, b.cols, b.stride));
    bufs.push_back(std::move(mem).value());
  }
  const Op op = c.make(views);
  d.status = run(op);
  d.out.resize(c.buffers.back().host.size());
  be.copy_to_host(stream, d.out.data(), views.back().data, d.out.size());
  const Status sy = be.synchronize(stream);
  if (d.status.ok()) d.status = sy;
  return d;
}

double value_at(const std::vector<uint8_t>& bytes, DType t, int64_t i) {
  if (t == DType::bf16) {
    uint16_t v;
    std::memcpy(&v, bytes.data() + i * 2, 2);
    return bf16_to_f32(v);
  }
  float v;
  std::memcpy(&v, bytes.data() + i * 4, 4);
  return v;
}

// Elements of the output out of tolerance (NaN never passes).
int64_t count_bad(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                  const Buffer& yb, const Tolerance& tol) {
  if (want.size() != got.size()) return -1;
  int64_t bad = 0;
  for (int64_t i = 0; i < yb.rows * yb.stride; ++i) {
    const double a = value_at(want, yb.dtype, i);
    const double g = value_at(got, yb.dtype, i);
    if (!(std::fabs(g - a) <= tol.atol + tol.rtol * std::fabs(a))) ++bad;
  }
  return bad;
}

// A decode step: S = 1, 32/8 heads (group 4), q_pos0 on the device, spans to `capacity` rows.
Case decode_case(Rng& rng, int64_t visible, int64_t capacity, int head_dim) {
  const int heads = 32;
  const int kv_heads = 8;
  const int64_t qc = int64_t{heads} * head_dim;
  const int64_t kc = int64_t{kv_heads} * head_dim;
  Case c;
  c.op = "attention";
  c.shape = "S=1 vis=" + s(visible) + " cap=" + s(capacity) + " H=32/8 hd=" + s(head_dim);
  const int q = c.add(DType::bf16, 1, qc, rng.uniform(DType::bf16, qc, 2.0f), false);
  const int k =
      c.add(DType::bf16, capacity, kc, rng.uniform(DType::bf16, capacity * kc, 2.0f), false);
  const int v = c.add(DType::bf16, capacity, kc, rng.uniform(DType::bf16, capacity * kc), false);
  std::vector<uint8_t> pos(4);
  const auto p0 = static_cast<int32_t>(visible - 1);
  std::memcpy(pos.data(), &p0, 4);
  const int pos_buf = c.add(DType::i32, 1, 1, std::move(pos), false);
  const int out = c.add(DType::bf16, 1, qc, pattern_bytes(DType::bf16, qc), true);
  c.make = [=](const std::vector<TensorView>& bufs) -> Op {
    Attention op;
    op.q = bufs[q];
    op.kv[0] = {bufs[k], bufs[v]};
    op.out = bufs[out];
    op.num_heads = heads;
    op.num_kv_heads = kv_heads;
    op.head_dim = head_dim;
    op.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    op.causal = true;
    op.q_pos0_dev = bufs[pos_buf];
    return op;
  };
  c.tol = kBf16Reduce;
  return c;
}

// The decode kernel at `split` keys per split, called directly, under `cap` (0: none).
Direct decode_direct(const Case& c, int split, int cap) {
  Backends* be = backends(nullptr);
  const CapScope scope(cap);
  const cuda::OpContext ctx{cuda::stream_handle(*be->cuda_stream)};
  return run_direct(*be->cuda, *be->cuda_stream, c, [&](const Op& op) {
    return cuda::run_attention_decode(ctx, std::get<Attention>(op), split);
  });
}

std::vector<uint8_t> cpu_output(const Case& c) {
  Backends* be = backends(nullptr);
  return run_direct(*be->cpu, *be->cpu_stream, c,
                    [&](const Op& op) { return be->cpu->run(*be->cpu_stream, op); })
      .out;
}

// Every decode split and head_dim under the consumer cap and under 48 KB: the same bytes as
// without a cap wherever a variant fits, and within the CPU's tolerance.
TEST(SmallSharedMemory, DecodeKernelSameBytes) {
  SKIP_WITHOUT_CUDA();
  Rng rng(2701);
  struct Shape {
    int64_t visible, capacity;
    int head_dim;
  };
  const Shape shapes[] = {
      {3000, 4096, 128}, {1001, 1001, 128}, {200, 256, 128}, {3000, 4096, 64}, {77, 300, 64}};
  for (const Shape& sh : shapes) {
    const Case c = decode_case(rng, sh.visible, sh.capacity, sh.head_dim);
    const std::vector<uint8_t> want = cpu_output(c);
    for (int split : {64, 128, 256}) {
      const Direct full = decode_direct(c, split, 0);
      ASSERT_TRUE(full.status.ok())
          << c.shape << " split=" << split << ": " << full.status.error().to_string();
      EXPECT_EQ(count_bad(want, full.out, c.buffers.back(), c.tol), 0)
          << c.shape << " split=" << split << " (uncapped vs CPU)";
      for (int cap : {kConsumerShared, 49152}) {
        const size_t smem =
            cuda::attention_decode_smem_bytes(sh.head_dim, split, static_cast<size_t>(cap));
        const Direct small = decode_direct(c, split, cap);
        if (smem == 0) {  // no variant fits: refused, not run wrong
          EXPECT_FALSE(small.status.ok()) << c.shape << " split=" << split << " cap=" << cap;
          continue;
        }
        ASSERT_TRUE(small.status.ok()) << c.shape << " split=" << split << " cap=" << cap << ": "
                                       << small.status.error().to_string();
        EXPECT_TRUE(small.out == full.out)
            << c.shape << " split=" << split << " cap=" << cap << " (" << smem
            << " bytes): bytes differ from the uncapped run";
      }
      // Deterministic: the capped variant twice.
      EXPECT_TRUE(decode_direct(c, split, kConsumerShared).out ==
                  decode_direct(c, split, kConsumerShared).out)
          << c.shape << " split=" << split;
    }
  }
}

// Through the backend (run_attention's own split): under the consumer cap the same kernel and
// the same bytes; under a cap no decode variant fits, the general kernels (another order of
// summation) within the tolerance, twice the same bytes (expect_pass checks both).
TEST(SmallSharedMemory, AttentionThroughBackend) {
  SKIP_WITHOUT_CUDA();
  Rng rng(2702);
  for (int head_dim : {64, 128}) {
    const Case c = decode_case(rng, 3000, 4096, head_dim);
    CudaRun full;
    {
      const CapScope none(0);
      full = run_cuda(c);
    }
    ASSERT_TRUE(full.status.ok()) << full.status.error().to_string();
    {
      const CapScope small(kConsumerShared);
      const CudaRun capped = run_cuda(c);
      ASSERT_TRUE(capped.status.ok()) << capped.status.error().to_string();
      EXPECT_TRUE(capped.images.back() == full.images.back()) << c.shape;
      expect_pass(c);
    }
    {
      const CapScope tiny(32768);  // under every decode layout at 128 keys
      Case g = c;
      g.shape += " cap=32768 (general kernels)";
      expect_pass(g);
    }
  }
}

// A linear for 9 <= M <= 64 rows (the action expert's M = 64).
Case linear_case(Rng& rng, int64_t m, int64_t n, int64_t k, bool f32_y) {
  Case c;
  c.op = "linear";
  c.shape = "M=" + s(m) + " N=" + s(n) + " K=" + s(k) + (f32_y ? " y=f32" : "") + " bias silu";
  const int x = c.add(DType::bf16, m, k, rng.uniform(DType::bf16, m * k), false);
  const int w = c.add(DType::bf16, n, k, rng.uniform(DType::bf16, n * k, 0.05f), false);
  const int b = c.add(DType::bf16, 1, n, rng.uniform(DType::bf16, n), false);
  const DType yt = f32_y ? DType::f32 : DType::bf16;
  const int y = c.add(yt, m, n, pattern_bytes(yt, m * n), true);
  c.make = [=](const std::vector<TensorView>& bufs) -> Op {
    Linear op;
    op.x = bufs[x];
    op.w = bufs[w];
    op.bias = bufs[b];
    op.y = bufs[y];
    op.act = Activation::silu;
    return op;
  };
  c.tol = f32_y ? kF32Reduce : kBf16Reduce;
  return c;
}

// linear_skinny64 asked for unroll 4 (96 KB of x stages at M = 64) under a 64 KB cap runs
// unroll 2: the same bytes as unroll 4 uncapped.
TEST(SmallSharedMemory, Skinny64SameBytes) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Backends* be = backends(nullptr);
  Rng rng(2703);
  struct Shape {
    int64_t m, n, k;
    bool f32_y;
  };
  const Shape shapes[] = {{64, 200, 2048, false}, {40, 77, 1032, true}, {64, 2048, 8256, false}};
  for (const Shape& sh : shapes) {
    const Case c = linear_case(rng, sh.m, sh.n, sh.k, sh.f32_y);
    const std::vector<uint8_t> want = cpu_output(c);
    auto run = [&](int unroll, int cap) {
      const CapScope scope(cap);
      const cuda::OpContext ctx{cuda::stream_handle(*be->cuda_stream)};
      return run_direct(*be->cuda, *be->cuda_stream, c, [&](const Op& op) {
        return cuda::run_linear_skinny64(ctx, std::get<Linear>(op), {.unroll = unroll});
      });
    };
    const Direct u4 = run(4, 0);
    ASSERT_TRUE(u4.status.ok()) << u4.status.error().to_string();
    EXPECT_EQ(count_bad(want, u4.out, c.buffers.back(), c.tol), 0) << c.shape;
    for (int cap : {kConsumerShared, 65536}) {
      const Direct small = run(4, cap);
      ASSERT_TRUE(small.status.ok()) << small.status.error().to_string();
      EXPECT_TRUE(small.out == u4.out) << c.shape << " cap=" << cap;
    }
    EXPECT_TRUE(run(2, 0).out == u4.out) << c.shape << " unroll 2 vs 4";
  }
}

}  // namespace
}  // namespace ferry::cuda_test
