// Attention on CUDA against the CPU reference: decode (S = 1, split-KV path), prefill (causal,
// q_pos0), vision (non-causal, head_dim 72), two KV spans, GQA ratios 1/2/4, head_dim 16/64/72/128,
// q/k/v as column slices of one fused projection. Shapes with S·group >= 32 and head_dim 64/72/128
// run the tensor-core kernel, the others the CUDA-core kernel; both are covered. Tolerance:
// kBf16Reduce (see op_harness_test.cpp). Segments (one launch for the images of a vision batch):
// against the CPU, against separate ops per segment (same bits), under hostile offsets; and every
// tensor-core variant (cuda::MmaVariant) against the CPU and against the legacy kernel's bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/attention.cuh"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

// The tensor-core variants these tests check: the ones run_attention can take by default
// (legacy), plus the cp.async variants when FERRY_TEST_ASYNC_ATTENTION=1. Those are opt-in and
// known to fail here on segmented and fused causal ops (docs/cuda.md); the variable reproduces
// the failures for whoever fixes them, without turning every harness run red meanwhile.
std::vector<cuda::MmaVariant> checked_variants() {
  const char* env = std::getenv("FERRY_TEST_ASYNC_ATTENTION");
  if (env != nullptr && std::string(env) == "1") {
    return {std::begin(cuda::kMmaVariants), std::end(cuda::kMmaVariants)};
  }
  return {cuda::kDefaultMmaVariant};
}

struct AttnShape {
  int64_t seq = 1;
  int64_t span0 = 0;
  int64_t span1 = 0;  // 0: one span
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 64;
  bool causal = false;
  int64_t q_pos0 = 0;
  bool fused_qkv = false;  // q, k, v of span 0 are column slices of one [S, (H + 2·KV)·D] buffer
  std::vector<int32_t> segments = {};  // Attention::segments (then span0 = seq), or none
  int64_t seg_stride = 1;              // row stride of the offsets' [n + 1, 1] view
  int64_t max_segment_rows = 0;        // 0: the longest segment
};

Case attention_case(Rng& rng, const AttnShape& a) {
  Case c;
  c.op = "attention";
  c.shape = "S=" + s(a.seq) + " L=" + s(a.span0) + (a.span1 > 0 ? "+" + s(a.span1) : "") +
            " H=" + s(a.heads) + "/" + s(a.kv_heads) + " hd=" + s(a.head_dim) +
            (a.causal ? " causal p0=" + s(a.q_pos0) : "") + (a.fused_qkv ? " fused" : "");
  const int64_t qc = int64_t{a.heads} * a.head_dim;
  const int64_t kc = int64_t{a.kv_heads} * a.head_dim;
  int q = -1;
  int k0 = -1;
  int v0 = -1;
  int qkv = -1;
  if (a.fused_qkv) {
    const int64_t w = qc + 2 * kc;
    qkv = c.add(DType::bf16, a.seq, w, rng.uniform(DType::bf16, a.seq * w, 2.0f), false);
  } else {
    q = c.add(DType::bf16, a.seq, qc, rng.uniform(DType::bf16, a.seq * qc, 2.0f), false);
    k0 = c.add(DType::bf16, a.span0, kc, rng.uniform(DType::bf16, a.span0 * kc, 2.0f), false);
    v0 = c.add(DType::bf16, a.span0, kc, rng.uniform(DType::bf16, a.span0 * kc), false);
  }
  int k1 = -1;
  int v1 = -1;
  if (a.span1 > 0) {
    // Span 1 lives in a wider cache row (row_stride > cols), as a KV cache with spare room would.
    k1 = c.add(DType::bf16, a.span1, kc, rng.uniform(DType::bf16, a.span1 * (kc + 8), 2.0f), false,
               kc + 8);
    v1 = c.add(DType::bf16, a.span1, kc, rng.uniform(DType::bf16, a.span1 * (kc + 8)), false,
               kc + 8);
  }
  const int out = c.add(DType::bf16, a.seq, qc, pattern_bytes(DType::bf16, a.seq * qc), true);
  // The offsets come last, so that `out` is the last buffer but one when they exist.
  int seg = -1;
  int64_t max_rows = a.max_segment_rows;
  if (!a.segments.empty()) {
    c.shape += " seg=" + s(static_cast<int64_t>(a.segments.size()) - 1);
    std::vector<int32_t> table(a.segments.size() * static_cast<size_t>(a.seg_stride), -7);
    for (size_t i = 0; i < a.segments.size(); ++i) {
      table[i * static_cast<size_t>(a.seg_stride)] = a.segments[i];
      if (i > 0 && a.max_segment_rows == 0) {
        max_rows = std::max<int64_t>(max_rows, a.segments[i] - a.segments[i - 1]);
      }
    }
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    seg = c.add(DType::i32, static_cast<int64_t>(a.segments.size()), 1, std::move(bytes), false,
                a.seg_stride);
  }
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    Attention op;
    if (qkv >= 0) {
      op.q = v[qkv].slice_cols(0, qc);
      op.kv[0].k = v[qkv].slice_cols(qc, kc);
      op.kv[0].v = v[qkv].slice_cols(qc + kc, kc);
    } else {
      op.q = v[q];
      op.kv[0].k = v[k0];
      op.kv[0].v = v[v0];
    }
    op.num_spans = 1;
    if (k1 >= 0) {
      op.kv[1].k = v[k1];
      op.kv[1].v = v[v1];
      op.num_spans = 2;
    }
    op.out = v[out];
    op.num_heads = a.heads;
    op.num_kv_heads = a.kv_heads;
    op.head_dim = a.head_dim;
    op.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    op.causal = a.causal;
    op.q_pos0 = a.q_pos0;
    if (seg >= 0) {
      op.segments = v[seg];
      op.max_segment_rows = max_rows;
    }
    return op;
  };
  c.tol = kBf16Reduce;
  return c;
}

TEST(CudaOps, AttentionDecode) {
  SKIP_WITHOUT_CUDA();
  Rng rng(606);
  // LM decode step: prompt cache + generated cache, GQA 4, split-KV path.
  expect_pass(attention_case(rng, {1, 600, 400, 32, 8, 128, true, 999, false}));
  expect_pass(attention_case(rng, {1, 5000, 0, 32, 8, 128, true, 4999, false}));
  // A few queries whose causal limit cuts the keys short: later splits see nothing.
  expect_pass(attention_case(rng, {4, 2000, 0, 8, 2, 128, true, 500, false}));
  // Expert: non-causal over prompt cache + own tokens.
  expect_pass(attention_case(rng, {64, 700, 64, 16, 8, 128, false, 0, false}));
}

TEST(CudaOps, AttentionPrefill) {
  SKIP_WITHOUT_CUDA();
  Rng rng(707);
  expect_pass(attention_case(rng, {37, 37, 0, 4, 2, 64, true, 0, true}));
  expect_pass(attention_case(rng, {128, 128, 0, 8, 2, 128, true, 0, true}));
  expect_pass(attention_case(rng, {20, 50, 0, 16, 16, 72, false, 0, false}));  // vision
  expect_pass(attention_case(rng, {5, 30, 5, 2, 1, 16, true, 30, false}));
  expect_pass(attention_case(rng, {3, 1, 0, 3, 1, 32, false, 0, false}));
  expect_pass(attention_case(rng, {50, 17, 33, 6, 3, 100, true, 0, false}));  // generic hd
  // Tensor-core path: vision-sized (hd 72 padded to 80), chunked prefill after a cache.
  expect_pass(attention_case(rng, {300, 300, 0, 4, 4, 72, false, 0, false}));
  expect_pass(attention_case(rng, {200, 800, 200, 8, 2, 128, true, 800, false}));
  expect_pass(attention_case(rng, {70, 70, 0, 2, 1, 64, true, 0, false}));
  // Empty spans: an empty prompt cache before the new keys, and no keys at all (zeros).
  expect_pass(attention_case(rng, {40, 0, 40, 4, 2, 64, true, 0, false}));
  expect_pass(attention_case(rng, {3, 0, 0, 4, 2, 64, false, 0, false}));
}

TEST(CudaOps, AttentionPlacementInvariant) {
  SKIP_WITHOUT_CUDA();
  Rng rng(808);
  for (size_t offset : {size_t{256}, size_t{4096 + 512}}) {
    std::string why;
    EXPECT_TRUE(placement_invariant(
        attention_case(rng, {1, 600, 400, 32, 8, 128, true, 999, false}), offset, &why))
        << why;
    EXPECT_TRUE(placement_invariant(attention_case(rng, {128, 128, 0, 8, 2, 128, true, 0, true}),
                                    offset, &why))
        << why;
  }
}

// Selects a tensor-core variant for a scope (the process-wide setting run_attention reads).
class VariantScope {
 public:
  explicit VariantScope(cuda::MmaVariant v) : saved_(cuda::attention_mma_variant()) {
    cuda::set_attention_mma_variant(v);
  }
  ~VariantScope() { cuda::set_attention_mma_variant(saved_); }
  VariantScope(const VariantScope&) = delete;
  VariantScope& operator=(const VariantScope&) = delete;

 private:
  cuda::MmaVariant saved_;
};

AttnShape segmented(std::vector<int32_t> bounds, int heads, int kv_heads, int head_dim,
                    bool fused = false) {
  AttnShape a;
  a.seq = a.span0 = bounds.back();
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  a.fused_qkv = fused;
  a.segments = std::move(bounds);
  return a;
}

// Segmented shapes on the tensor-core kernels (the longest segment fills half a block).
std::vector<AttnShape> mma_segment_shapes() {
  std::vector<AttnShape> v;
  v.push_back(segmented({0, 100, 200, 300, 400}, 4, 4, 72));          // equal
  v.push_back(segmented({0, 1, 38, 121, 200, 333}, 4, 4, 72, true));  // 1 row, odd sizes, fused
  AttnShape gqa = segmented({0, 70, 70, 135, 300}, 8, 2, 64);         // empty segment, GQA 4
  gqa.seg_stride = 2;
  v.push_back(gqa);
  v.push_back(segmented({0, 50, 177}, 4, 4, 128));
  v.push_back(segmented({0, 720, 1440, 2160, 2880}, 4, 4, 72, true));  // vision-sized images
  AttnShape roomy = segmented({0, 40, 97}, 2, 2, 72);
  roomy.max_segment_rows = 97;  // a generous bound: more row blocks than rows, which exit
  v.push_back(roomy);
  return v;
}

TEST(CudaOps, AttentionSegments) {
  SKIP_WITHOUT_CUDA();
  Rng rng(909);
  for (cuda::MmaVariant variant : checked_variants()) {
    const VariantScope scope(variant);
    for (const AttnShape& a : mma_segment_shapes()) {
      Case c = attention_case(rng, a);
      c.shape += std::string(" ") + cuda::mma_variant_name(variant);
      expect_pass(c);
    }
  }
  // CUDA-core kernel: segments too short for the tensor cores, and a head_dim they lack.
  expect_pass(attention_case(rng, segmented({0, 5, 9, 18, 20}, 2, 2, 64)));
  expect_pass(attention_case(rng, segmented({0, 1, 2, 3}, 4, 1, 16)));
  expect_pass(attention_case(rng, segmented({0, 40, 97}, 2, 2, 100)));
}

// The CUDA outputs of a case (after the op), or a test failure.
std::vector<uint8_t> cuda_output(const Case& c, int out_index) {
  const CudaRun r = run_cuda(c);
  EXPECT_TRUE(r.status.ok()) << c.shape << ": " << r.status.error().to_string();
  EXPECT_TRUE(r.guard_ok) << c.shape;
  return r.status.ok() ? r.images[static_cast<size_t>(out_index)] : std::vector<uint8_t>{};
}

// One segmented op gives the same bits as one plain op per segment on that segment's rows, when
// both run the same kernel with the same key split: segments of 32..128 rows (the plain op then
// also takes the tensor cores and, with <= 128 keys, never splits).
TEST(CudaOps, AttentionSegmentsMatchSeparateOps) {
  SKIP_WITHOUT_CUDA();
  Rng rng(910);
  const std::vector<AttnShape> shapes = {segmented({0, 32, 109, 237, 300}, 4, 4, 72, true),
                                         segmented({0, 128, 161}, 8, 2, 64),
                                         segmented({0, 45, 90, 135}, 2, 2, 128)};
  for (cuda::MmaVariant variant : checked_variants()) {
    const VariantScope scope(variant);
    for (const AttnShape& a : shapes) {
      const Case whole = attention_case(rng, a);
      const int out = static_cast<int>(whole.buffers.size()) - 2;  // before the offsets
      ASSERT_TRUE(whole.buffers[static_cast<size_t>(out)].output);
      const std::vector<uint8_t> want = cuda_output(whole, out);
      const size_t row_bytes = static_cast<size_t>(a.heads * a.head_dim) * 2;
      for (size_t s = 0; s + 1 < a.segments.size(); ++s) {
        const int64_t r0 = a.segments[s];
        const int64_t n = a.segments[s + 1] - r0;
        Case one = whole;
        const auto make = whole.make;
        one.make = [make, r0, n](const std::vector<TensorView>& v) -> Op {
          Attention op = std::get<Attention>(make(v));
          op.q = op.q.slice_rows(r0, n);
          op.kv[0] = {op.kv[0].k.slice_rows(r0, n), op.kv[0].v.slice_rows(r0, n)};
          op.out = op.out.slice_rows(r0, n);
          op.segments = TensorView{};
          op.max_segment_rows = 0;
          return op;
        };
        const std::vector<uint8_t> got = cuda_output(one, out);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data() + r0 * row_bytes, want.data() + r0 * row_bytes,
                              static_cast<size_t>(n) * row_bytes),
                  0)
            << whole.shape << " " << cuda::mma_variant_name(variant) << ": segment " << s;
      }
    }
  }
}

// Offsets are device data that the CUDA kernels cannot check before they run: whatever they hold,
// the op must stay inside its buffers (guard bytes intact, inputs unchanged, no fault).
TEST(CudaOps, AttentionSegmentsHostileOffsets) {
  SKIP_WITHOUT_CUDA();
  Rng rng(911);
  const std::vector<std::vector<int32_t>> tables = {
      {0, -5, 1000000, 3, 200}, {200, 0},  {-2147483647 - 1, 2147483647},
      {0, 150, 100, 200},       {5, 7, 9}, {0, 200, 200, 200}};
  for (cuda::MmaVariant variant : checked_variants()) {
    const VariantScope scope(variant);
    for (const std::vector<int32_t>& t : tables) {
      for (int hd : {72, 100}) {  // tensor cores, CUDA cores
        AttnShape a = segmented({0, 200}, 2, 2, hd, true);
        a.segments = t;
        a.max_segment_rows = 64;
        const Case c = attention_case(rng, a);
        const CudaRun r = run_cuda(c);
        ASSERT_TRUE(r.status.ok()) << c.shape << ": " << r.status.error().to_string();
        EXPECT_TRUE(r.guard_ok) << c.shape;
        for (size_t i = 0; i < c.buffers.size(); ++i) {
          if (!c.buffers[i].output) {
            EXPECT_EQ(r.images[i], c.buffers[i].host) << c.shape;
          }
        }
      }
    }
  }
}

// The tensor-core variants compute the same arithmetic: with the same key tiles and splits they
// must give the legacy kernel's bits (shapes where no variant splits the keys, causal and two
// spans included: the tile that straddles the two spans takes the general load path).
TEST(CudaOps, AttentionMmaVariantsAgreeBitForBit) {
  SKIP_WITHOUT_CUDA();
  if (checked_variants().size() < 2) {
    GTEST_SKIP() << "one verified variant; FERRY_TEST_ASYNC_ATTENTION=1 compares the others";
  }
  Rng rng(912);
  const std::vector<AttnShape> shapes = {
      segmented({0, 720, 1440, 2160}, 16, 16, 72, true),
      {1100, 1100, 0, 16, 8, 128, true, 0, true},
      {600, 500, 600, 32, 8, 64, true, 500, false},
      segmented({0, 33, 160, 161, 400}, 8, 8, 64),
  };
  for (const AttnShape& a : shapes) {
    const Case c = attention_case(rng, a);
    const int out = a.segments.empty() ? static_cast<int>(c.buffers.size()) - 1
                                       : static_cast<int>(c.buffers.size()) - 2;
    std::vector<uint8_t> legacy;
    {
      const VariantScope scope(cuda::MmaVariant::legacy);
      legacy = cuda_output(c, out);
    }
    for (cuda::MmaVariant variant : checked_variants()) {
      const VariantScope scope(variant);
      EXPECT_TRUE(cuda_output(c, out) == legacy)
          << c.shape << ": " << cuda::mma_variant_name(variant) << " differs from legacy";
    }
  }
}

}  // namespace
}  // namespace ferry::cuda_test
