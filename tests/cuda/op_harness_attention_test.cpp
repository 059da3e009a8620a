// Attention on CUDA against the CPU reference: decode (S = 1, split-KV path), prefill (causal,
// q_pos0), vision (non-causal, head_dim 72), two KV spans, GQA ratios 1/2/4, head_dim 16/64/72/128,
// q/k/v as column slices of one fused projection. Shapes with S·group >= 32 and head_dim 64/72/128
// run the tensor-core kernel, the others the CUDA-core kernel; both are covered. Tolerance:
// kBf16Reduce (see op_harness_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness.h"

namespace ferry::cuda_test {
namespace {

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

}  // namespace
}  // namespace ferry::cuda_test
