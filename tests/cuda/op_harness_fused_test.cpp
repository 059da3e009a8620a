// The fused ops (ops.h AddRmsNorm, QkNormRope) against the CPU backend, which runs their
// sequences of plain ops: decode (one row) and prefill-like shapes, bf16 and f32 residual
// streams, q|k inside a wider fused qkv row, both rotary maths, and head dims the kernel holds
// (<= 128) and one it leaves to the sequence.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"

namespace ferry::cuda_test {
namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

Case add_rms_case(Rng& rng, int64_t rows, int64_t cols, DType xt, DType st) {
  Case c;
  c.op = "add_rms_norm";
  c.shape = str(rows) + "x" + str(cols) + (xt == DType::bf16 ? " x=bf16" : " x=f32") +
            (st == DType::bf16 ? " src=bf16" : " src=f32");
  const int x = c.add(xt, rows, cols, rng.uniform(xt, rows * cols, 2.0f), true);
  const int src = c.add(st, rows, cols, rng.uniform(st, rows * cols, 2.0f), false);
  const int w = c.add(DType::bf16, 1, cols, rng.uniform(DType::bf16, cols, 1.5f), false);
  const int y = c.add(xt, rows, cols, pattern_bytes(xt, rows * cols), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    return AddRmsNorm{v[x], v[src], v[w], v[y], 1e-6f};
  };
  c.tol = xt == DType::bf16 ? kBf16Reduce : Tolerance{1e-5, 1e-5};
  return c;
}

// x: rows of (q_heads + k_heads)·head_dim inside a row of `stride` (a fused q|k|v projection).
Case qk_case(Rng& rng, int64_t rows, int qh, int kh, int head_dim, RopeMath math,
             int64_t stride = 0) {
  Case c;
  c.op = "qk_norm_rope";
  const int64_t cols = int64_t{qh + kh} * head_dim;
  const int64_t st = stride == 0 ? cols : stride;
  const int half = head_dim / 2;
  c.shape = "S=" + str(rows) + " h=" + str(qh) + "+" + str(kh) + " hd=" + str(head_dim) +
            (math == RopeMath::bf16 ? " bf16-math" : " f32-math") +
            (stride != 0 ? " stride=" + str(stride) : "");
  const int x = c.add(DType::bf16, rows, cols, rng.uniform(DType::bf16, rows * st, 2.0f), true, st);
  const int wq = c.add(DType::bf16, 1, head_dim, rng.uniform(DType::bf16, head_dim, 1.5f), false);
  const int wk = c.add(DType::bf16, 1, head_dim, rng.uniform(DType::bf16, head_dim, 1.5f), false);
  const int co = c.add(DType::f32, rows, half, rng.uniform(DType::f32, rows * half), false);
  const int si = c.add(DType::f32, rows, half, rng.uniform(DType::f32, rows * half), false);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    return QkNormRope{v[x], v[wq], v[wk], v[co], v[si], qh, kh, head_dim, 1e-6f, math};
  };
  // The norm's sum of squares may round differently (another reduction order); the rotary after
  // it is exact, so the bf16 tolerance of a reduction covers the whole op.
  c.tol = kBf16Reduce;
  return c;
}

// x = the q|k heads of a fused q|k|v row; the op also stores k|v into `cap` cache rows.
Case qk_store_case(Rng& rng, int64_t rows, int qh, int kh, int head_dim, int64_t cap) {
  Case c;
  c.op = "qk_norm_rope";
  const int64_t kvd = int64_t{kh} * head_dim;
  const int64_t cols = int64_t{qh} * head_dim + kvd;
  const int64_t st = cols + kvd;  // q | k | v
  const int half = head_dim / 2;
  c.shape = "S=" + str(rows) + " h=" + str(qh) + "+" + str(kh) + " hd=" + str(head_dim) +
            " store into " + str(cap) + " rows";
  const int x = c.add(DType::bf16, rows, cols, rng.uniform(DType::bf16, rows * st, 2.0f), true, st);
  const int wq = c.add(DType::bf16, 1, head_dim, rng.uniform(DType::bf16, head_dim, 1.5f), false);
  const int wk = c.add(DType::bf16, 1, head_dim, rng.uniform(DType::bf16, head_dim, 1.5f), false);
  const int co = c.add(DType::f32, rows, half, rng.uniform(DType::f32, rows * half), false);
  const int si = c.add(DType::f32, rows, half, rng.uniform(DType::f32, rows * half), false);
  const int idx =
      c.add(DType::i32, rows, 1, rng.ints(rows, static_cast<int32_t>(cap), true), false);
  const int dst = c.add(DType::bf16, cap, 2 * kvd, pattern_bytes(DType::bf16, cap * 2 * kvd), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    QkNormRope op{v[x], v[wq], v[wk], v[co], v[si], qh, kh, head_dim, 1e-6f, RopeMath::bf16};
    const TensorView row = make_view(v[x].data, DType::bf16, rows, st);
    op.kv = row.slice_cols(int64_t{qh} * head_dim, 2 * kvd);
    op.rows = v[idx];
    op.kv_dst = v[dst];
    return op;
  };
  c.tol = kBf16Reduce;
  return c;
}

TEST(CudaOps, AddRmsNorm) {
  SKIP_WITHOUT_CUDA();
  Rng rng(4401);
  expect_pass(add_rms_case(rng, 1, 4096, DType::bf16, DType::bf16));  // decode
  expect_pass(add_rms_case(rng, 37, 4096, DType::bf16, DType::bf16));
  expect_pass(add_rms_case(rng, 64, 2048, DType::f32, DType::bf16));  // the expert's stream
  expect_pass(add_rms_case(rng, 3, 300, DType::f32, DType::f32));
  expect_pass(add_rms_case(rng, 5, 77, DType::bf16, DType::f32));  // odd width
}

TEST(CudaOps, QkNormRope) {
  SKIP_WITHOUT_CUDA();
  Rng rng(4402);
  expect_pass(qk_case(rng, 1, 32, 8, 128, RopeMath::bf16, 6144));  // decode, inside q|k|v
  expect_pass(qk_case(rng, 29, 32, 8, 128, RopeMath::bf16, 6144));
  expect_pass(qk_case(rng, 64, 16, 8, 128, RopeMath::f32, 4096));  // the expert
  expect_pass(qk_case(rng, 7, 4, 2, 16, RopeMath::bf16));          // tiny presets
  expect_pass(qk_case(rng, 5, 3, 1, 72, RopeMath::f32));
  expect_pass(qk_case(rng, 4, 2, 2, 160, RopeMath::bf16));  // > 128: the sequence
  expect_pass(qk_store_case(rng, 1, 32, 8, 128, 3028));     // a decode step
  expect_pass(qk_store_case(rng, 13, 4, 2, 64, 40));
  expect_pass(qk_store_case(rng, 3, 2, 2, 160, 9));  // > 128: the sequence, store included
}

}  // namespace
}  // namespace ferry::cuda_test
