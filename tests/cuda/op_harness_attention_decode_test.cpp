// Decode attention and the device-side q_pos0 on CUDA, against the CPU reference (tolerance
// kBf16Reduce, see op_harness_test.cpp): S·group <= 16 with head_dim 64/128 runs the decode kernel
// (attention_decode.cu); the other shapes here check q_pos0_dev in the tensor-core and CUDA-core
// kernels. The spans run to the cache's capacity, and every K/V row past the last visible key is
// NaN: a kernel that read one (or let one reach the sum) would print NaN. Also: q_pos0_dev and
// the host q_pos0 give the same bits, and one captured graph serves every q_pos0_dev value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/attention_decode.cuh"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

struct DecodeShape {
  int64_t seq = 1;
  int64_t visible = 1;   // q_pos0 + S: keys the last query sees (before clamping to capacity)
  int64_t capacity = 0;  // rows of the spans together; 0: = visible
  int heads = 32;
  int kv_heads = 8;
  int head_dim = 128;
  bool device_pos = true;  // q_pos0 from a device int32 (else the host field)
  bool fused_kv = false;   // K and V as column slices of one [capacity, 2·kv_dim] buffer
  int64_t span0 = 0;       // > 0: two spans, span0 rows then the rest (a wider row stride)
  bool causal = true;
  int64_t q_pad = 0;  // extra elements per q row (q as a column slice)
};

constexpr uint16_t kBf16NaN = 0x7FC0;

// Sets rows [from, rows) of a bf16 buffer (all `stride` elements of each) to NaN.
void poison_rows(std::vector<uint8_t>& host, int64_t stride, int64_t from, int64_t rows) {
  for (int64_t r = from < 0 ? 0 : from; r < rows; ++r) {
    for (int64_t c = 0; c < stride; ++c) {
      std::memcpy(host.data() + (r * stride + c) * 2, &kBf16NaN, 2);
    }
  }
}

Case decode_case(Rng& rng, const DecodeShape& a) {
  const int64_t cap = a.capacity > 0 ? a.capacity : a.visible;
  const int64_t q_pos0 = a.causal ? a.visible - a.seq : 0;
  const int64_t qc = int64_t{a.heads} * a.head_dim;
  const int64_t kc = int64_t{a.kv_heads} * a.head_dim;
  const int64_t visible = a.causal ? a.visible : cap;  // rows past this stay NaN
  Case c;
  c.op = "attention";
  c.shape = "S=" + s(a.seq) + " vis=" + s(a.visible) + " cap=" + s(cap) + " H=" + s(a.heads) + "/" +
            s(a.kv_heads) + " hd=" + s(a.head_dim) +
            (a.causal ? (a.device_pos ? " p0_dev=" : " p0=") + s(q_pos0) : " full") +
            (a.fused_kv ? " kv_fused" : "") + (a.span0 > 0 ? " span0=" + s(a.span0) : "") +
            (a.q_pad > 0 ? " q_strided" : "");
  const int64_t q_stride = qc + a.q_pad;
  const int q = c.add(DType::bf16, a.seq, qc, rng.uniform(DType::bf16, a.seq * q_stride, 2.0f),
                      false, q_stride);
  // Spans: (buffer, rows, stride, first key) for K and V.
  int kv = -1;
  int k[2] = {-1, -1};
  int v[2] = {-1, -1};
  const int64_t rows0 = a.span0 > 0 ? a.span0 : cap;
  if (a.fused_kv) {
    std::vector<uint8_t> host = rng.uniform(DType::bf16, cap * 2 * kc, 2.0f);
    poison_rows(host, 2 * kc, visible, cap);
    kv = c.add(DType::bf16, cap, 2 * kc, std::move(host), false);
  } else {
    for (int span = 0; span < (a.span0 > 0 ? 2 : 1); ++span) {
      const int64_t rows = span == 0 ? rows0 : cap - rows0;
      const int64_t first = span == 0 ? 0 : rows0;
      const int64_t stride = span == 0 ? kc : kc + 8;  // span 1 in a wider cache row
      std::vector<uint8_t> kh = rng.uniform(DType::bf16, rows * stride, 2.0f);
      std::vector<uint8_t> vh = rng.uniform(DType::bf16, rows * stride);
      poison_rows(kh, stride, visible - first, rows);
      poison_rows(vh, stride, visible - first, rows);
      k[span] = c.add(DType::bf16, rows, kc, std::move(kh), false, stride);
      v[span] = c.add(DType::bf16, rows, kc, std::move(vh), false, stride);
    }
  }
  std::vector<uint8_t> pos(4);
  const auto pos_value = static_cast<int32_t>(q_pos0);
  std::memcpy(pos.data(), &pos_value, 4);
  const int pos_buf = c.add(DType::i32, 1, 1, std::move(pos), false);
  const int out = c.add(DType::bf16, a.seq, qc, pattern_bytes(DType::bf16, a.seq * qc), true);
  c.make = [=](const std::vector<TensorView>& bufs) -> Op {
    Attention op;
    op.q = bufs[q];
    if (kv >= 0) {
      op.kv[0] = {bufs[kv].slice_cols(0, kc), bufs[kv].slice_cols(kc, kc)};
    } else {
      op.kv[0] = {bufs[k[0]], bufs[v[0]]};
      if (k[1] >= 0) {
        op.kv[1] = {bufs[k[1]], bufs[v[1]]};
        op.num_spans = 2;
      }
    }
    op.out = bufs[out];
    op.num_heads = a.heads;
    op.num_kv_heads = a.kv_heads;
    op.head_dim = a.head_dim;
    op.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    op.causal = a.causal;
    if (a.causal && a.device_pos) {
      op.q_pos0_dev = bufs[pos_buf];
    } else if (a.causal) {
      op.q_pos0 = q_pos0;
    }
    return op;
  };
  c.tol = kBf16Reduce;
  return c;
}

// The same case with q_pos0 given on the host instead of the device (same buffers).
Case with_host_pos(const Case& c, int64_t q_pos0) {
  Case h = c;
  h.shape += " (host p0)";
  h.make = [make = c.make, q_pos0](const std::vector<TensorView>& bufs) -> Op {
    Op op = make(bufs);
    auto& a = std::get<Attention>(op);
    a.q_pos0_dev = TensorView{};
    a.q_pos0 = q_pos0;
    return op;
  };
  return h;
}

TEST(CudaOps, AttentionDecodeKernel) {
  SKIP_WITHOUT_CUDA();
  Rng rng(909);
  // The LM decode step, KV cache larger than the visible keys (128-key splits: 24 of 32 live).
  expect_pass(decode_case(rng, {.visible = 3000, .capacity = 4096}));
  expect_pass(decode_case(rng, {.visible = 8000, .capacity = 8192}));
  // Odd L, spans exactly the visible keys, q_pos0 on the host (today's executor call).
  expect_pass(decode_case(rng, {.visible = 1001, .device_pos = false}));
  // One key; exactly one split (no combine); one live split of many; exactly two splits; one key
  // into the second split; a capacity far past the visible keys.
  expect_pass(decode_case(rng, {.visible = 1, .capacity = 4096}));
  expect_pass(decode_case(rng, {.visible = 128}));
  expect_pass(decode_case(rng, {.visible = 128, .capacity = 2048}));
  expect_pass(decode_case(rng, {.visible = 256}));
  expect_pass(decode_case(rng, {.visible = 129, .capacity = 512}));
  expect_pass(decode_case(rng, {.visible = 300, .capacity = 8192}));
  // q_pos0_dev past the capacity: every key is visible.
  expect_pass(decode_case(rng, {.visible = 5001, .capacity = 4096}));
}

TEST(CudaOps, AttentionDecodeLayouts) {
  SKIP_WITHOUT_CUDA();
  Rng rng(910);
  // K and V as column slices of one row (stride 2·kv_dim); q as a column slice too.
  expect_pass(decode_case(rng, {.visible = 777, .capacity = 1024, .fused_kv = true, .q_pad = 8}));
  // Two spans whose boundary falls inside a split (600 = 4·128 + 88), span 1 strided.
  expect_pass(decode_case(rng, {.visible = 1000, .capacity = 2000, .span0 = 600}));
  expect_pass(decode_case(rng, {.visible = 600, .capacity = 2000, .span0 = 600}));
  // head_dim 64, GQA 4 and 1.
  expect_pass(decode_case(
      rng, {.visible = 999, .capacity = 2048, .heads = 16, .kv_heads = 4, .head_dim = 64}));
  expect_pass(decode_case(
      rng, {.visible = 500, .heads = 8, .kv_heads = 8, .head_dim = 64, .device_pos = false}));
  // Small S: 16 rows (4 queries × group 4, 2 × group 8), 12 rows; non-causal, 2 queries.
  expect_pass(
      decode_case(rng, {.seq = 4, .visible = 2000, .capacity = 4096, .heads = 16, .kv_heads = 4}));
  expect_pass(
      decode_case(rng, {.seq = 2, .visible = 1500, .capacity = 2048, .heads = 16, .kv_heads = 2}));
  expect_pass(decode_case(rng, {.seq = 3, .visible = 700, .capacity = 1024}));
  expect_pass(decode_case(
      rng,
      {.seq = 2, .visible = 333, .heads = 8, .kv_heads = 4, .device_pos = false, .causal = false}));
}

TEST(CudaOps, AttentionDevicePosOtherKernels) {
  SKIP_WITHOUT_CUDA();
  Rng rng(911);
  // Tensor-core kernel (S·group = 256): a prefill chunk after a cache, spans to capacity.
  expect_pass(
      decode_case(rng, {.seq = 64, .visible = 1500, .capacity = 2048, .heads = 16, .kv_heads = 4}));
  // CUDA-core kernel: head_dim 96 (no tensor-core instance), and S·group = 32 with head_dim 48.
  expect_pass(decode_case(
      rng,
      {.seq = 2, .visible = 900, .capacity = 1024, .heads = 8, .kv_heads = 2, .head_dim = 96}));
  expect_pass(decode_case(
      rng,
      {.seq = 8, .visible = 600, .capacity = 1024, .heads = 8, .kv_heads = 2, .head_dim = 48}));
}

// q_pos0_dev = p and the host q_pos0 = p over the same spans give the same bytes, in every kernel.
TEST(CudaOps, AttentionDevicePosMatchesHostBits) {
  SKIP_WITHOUT_CUDA();
  Rng rng(912);
  const DecodeShape shapes[] = {
      {.visible = 3000, .capacity = 4096},                                         // decode
      {.visible = 1000, .capacity = 2000, .span0 = 600},                           // two spans
      {.seq = 4, .visible = 2000, .capacity = 4096, .heads = 16, .kv_heads = 4},   // small S
      {.seq = 64, .visible = 1500, .capacity = 2048, .heads = 16, .kv_heads = 4},  // tensor core
      {.seq = 2, .visible = 900, .capacity = 1024, .heads = 8, .kv_heads = 2, .head_dim = 96},
  };
  for (const DecodeShape& a : shapes) {
    const Case dev = decode_case(rng, a);
    std::string why;
    EXPECT_TRUE(same_cuda_bits(dev, with_host_pos(dev, a.visible - a.seq), &why))
        << dev.shape << ": " << why;
  }
}

// One graph captured with q_pos0_dev serves every step: change the device value between replays
// and compare with direct runs that pass the same position on the host.
TEST(CudaGraph, AttentionDevicePosReplay) {
  SKIP_WITHOUT_CUDA();
  Backends& be = *backends(nullptr);
  Backend& gpu = *be.cuda;
  Stream& stream = *be.cuda_stream;
  const int heads = 32;
  const int kv_heads = 8;
  const int hd = 128;
  const int64_t cap = 4096;
  const int64_t qc = int64_t{heads} * hd;
  const int64_t kc = int64_t{kv_heads} * hd;
  Rng rng(913);
  const std::vector<uint8_t> qh = rng.uniform(DType::bf16, qc, 2.0f);
  const std::vector<uint8_t> kh = rng.uniform(DType::bf16, cap * kc, 2.0f);
  const std::vector<uint8_t> vh = rng.uniform(DType::bf16, cap * kc);
  auto upload = [&](const std::vector<uint8_t>& h) {
    auto b = gpu.allocate(h.size());
    FERRY_CHECK(b.ok(), "allocate");
    gpu.copy_to_device(stream, b->data(), h.data(), h.size());
    return std::move(b).value();
  };
  DeviceBuffer q = upload(qh);
  DeviceBuffer k = upload(kh);
  DeviceBuffer v = upload(vh);
  DeviceBuffer pos = upload(std::vector<uint8_t>(4, 0));
  DeviceBuffer out = upload(std::vector<uint8_t>(static_cast<size_t>(qc) * 2, 0));
  ASSERT_TRUE(gpu.synchronize(stream).ok());

  auto op = [&](bool device_pos, int64_t p) {
    Attention a;
    a.q = make_view(q.data(), DType::bf16, 1, qc);
    a.kv[0] = {make_view(k.data(), DType::bf16, cap, kc),
               make_view(v.data(), DType::bf16, cap, kc)};
    a.out = make_view(out.data(), DType::bf16, 1, qc);
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    a.head_dim = hd;
    a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
    a.causal = true;
    if (device_pos) {
      a.q_pos0_dev = make_view(pos.data(), DType::i32, 1, 1);
    } else {
      a.q_pos0 = p;
    }
    return a;
  };
  auto download = [&]() {
    std::vector<uint8_t> h(static_cast<size_t>(qc) * 2);
    gpu.copy_to_host(stream, h.data(), out.data(), h.size());
    FERRY_CHECK(gpu.synchronize(stream).ok(), "download");
    return h;
  };

  auto graph = record(gpu, stream, [&] { return gpu.run(stream, op(true, 0)); });
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  for (int64_t p : {0, 127, 128, 1000, 2999, 4095, 100}) {
    ASSERT_TRUE(gpu.run(stream, op(false, p)).ok());
    const std::vector<uint8_t> want = download();
    gpu.fill_zero(stream, out.data(), static_cast<size_t>(qc) * 2);
    const auto p32 = static_cast<int32_t>(p);
    gpu.copy_to_device(stream, pos.data(), &p32, 4);
    ASSERT_TRUE(gpu.launch(stream, **graph).ok());
    EXPECT_EQ(download(), want) << "q_pos0_dev = " << p;
  }
}

// Host side, no GPU needed: which shapes take the decode kernel, and its split count.
TEST(CudaHost, DecodeKernelFitsAndSplits) {
  auto* base = reinterpret_cast<uint8_t*>(uintptr_t{1} << 20);  // never dereferenced
  Attention a;
  a.q = make_view(base, DType::bf16, 1, 32 * 128);
  a.kv[0] = {make_view(base + (1 << 16), DType::bf16, 100, 8 * 128),
             make_view(base + (1 << 18), DType::bf16, 100, 8 * 128)};
  a.out = make_view(base + (1 << 19), DType::bf16, 1, 32 * 128);
  a.num_heads = 32;
  a.num_kv_heads = 8;
  a.head_dim = 128;
  EXPECT_TRUE(cuda::attention_decode_fits(a));
  Attention b = a;
  b.q.rows = 4;  // 16 rows per kv head
  EXPECT_TRUE(cuda::attention_decode_fits(b));
  b.q.rows = 5;  // 20
  EXPECT_FALSE(cuda::attention_decode_fits(b));
  b = a;
  b.head_dim = 96;
  EXPECT_FALSE(cuda::attention_decode_fits(b));
  b = a;
  b.kv[0].v.data = base + (1 << 18) + 2;  // not 16-byte aligned
  EXPECT_FALSE(cuda::attention_decode_fits(b));
  b = a;
  b.kv[0].k.row_stride = 8 * 128 + 4;  // rows not 16-byte aligned
  EXPECT_FALSE(cuda::attention_decode_fits(b));
  b = a;
  b.kv[0].k.row_stride = 2 * 8 * 128;  // a column slice of a [K | V] row is fine
  EXPECT_TRUE(cuda::attention_decode_fits(b));
  b = a;
  b.segments = make_view(base, DType::i32, 2, 1);
  EXPECT_FALSE(cuda::attention_decode_fits(b));

  EXPECT_EQ(cuda::attention_decode_splits(0, 128), 1);
  EXPECT_EQ(cuda::attention_decode_splits(1, 128), 1);
  EXPECT_EQ(cuda::attention_decode_splits(128, 128), 1);
  EXPECT_EQ(cuda::attention_decode_splits(129, 128), 2);
  EXPECT_EQ(cuda::attention_decode_splits(8192, 128), 64);
  EXPECT_EQ(cuda::attention_decode_splits(8192, 64), 128);
}

}  // namespace
}  // namespace ferry::cuda_test
