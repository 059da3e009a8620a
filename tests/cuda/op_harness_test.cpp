// Every op of backend/ops.h on the CUDA backend against the CPU backend, on random inputs of
// several shapes (odd sizes, M = 1, K not a multiple of 8, strided views, in-place forms).
//
// Tolerances (|cuda − cpu| <= atol + rtol·|cpu|), and why:
// - exact: ops whose documented numerics are a fixed sequence of correctly rounded fp32
//   operations and bf16 roundings (add, add_rows, cast, copy, gather/scatter, pos_embed_interp,
//   rope) or pure selection (argmax).
// - rope_table: f32, atol 2e-6: cos/sin of the same fp32 angle, correctly rounded on both
//   sides, may still differ in the last ulp.
// - bf16 outputs of reductions (linear, rms_norm, layer_norm, attention, swiglu): the fp32
//   sums run in a different order on the two backends, so a value next to a bf16 rounding
//   boundary may round the other way: rtol 2^-6 (two bf16 ulps) plus a small atol for values
//   near zero after cancellation. A wrong index or a lost term shows up orders of magnitude
//   larger.
// - f32 outputs of reductions: rtol 1e-4, atol 1e-4 (fp32 summation order over K <= 4096).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "harness.h"

namespace ferry::cuda_test {
namespace {

// ---- linear --------------------------------------------------------------------------------

const char* act_name(Activation a) {
  switch (a) {
    case Activation::silu:
      return "silu";
    case Activation::gelu_tanh:
      return "gelu_tanh";
    case Activation::gelu_erf:
      return "gelu_erf";
    case Activation::none:
      break;
  }
  return "none";
}

Case linear_case(Rng& rng, int64_t m, int64_t n, int64_t k, Activation act, bool bias, DType xt,
                 DType yt, int64_t x_pad = 0) {
  Case c;
  c.op = "linear";
  c.shape = "M=" + s(m) + " N=" + s(n) + " K=" + s(k) + " " + act_name(act) +
            (bias ? " bias" : "") + " x=" + dt(xt) + " y=" + dt(yt) +
            (x_pad != 0 ? " ldx=" + s(k + x_pad) : "");
  const float wscale = 1.0f / std::sqrt(static_cast<float>(k));
  const int x = c.add(xt, m, k, rng.uniform(xt, m * (k + x_pad)), false, k + x_pad);
  const int w = c.add(DType::bf16, n, k, rng.uniform(DType::bf16, n * k, 2.0f * wscale), false);
  const int b = bias ? c.add(DType::bf16, 1, n, rng.uniform(DType::bf16, n, 0.5f), false) : -1;
  const int y = c.add(yt, m, n, pattern_bytes(yt, m * n), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    Linear op;
    op.x = v[x];
    op.w = v[w];
    if (b >= 0) op.bias = v[b];
    op.y = v[y];
    op.act = act;
    return op;
  };
  c.tol = yt == DType::bf16 ? kBf16Reduce : kF32Reduce;
  return c;
}

TEST(CudaOps, Linear) {
  SKIP_WITHOUT_CUDA();
  Rng rng(101);
  const auto bf = DType::bf16;
  const auto f32 = DType::f32;
  expect_pass(linear_case(rng, 1, 64, 64, Activation::none, false, bf, bf));
  expect_pass(linear_case(rng, 1, 1024, 4096, Activation::none, false, bf, bf));
  expect_pass(linear_case(rng, 7, 33, 13, Activation::none, false, bf, bf));  // odd K: align 2
  expect_pass(linear_case(rng, 5, 17, 1, Activation::none, true, bf, bf));    // K = 1
  expect_pass(linear_case(rng, 64, 256, 512, Activation::silu, false, bf, bf));
  expect_pass(linear_case(rng, 33, 96, 72, Activation::gelu_tanh, true, bf, bf));
  expect_pass(linear_case(rng, 9, 80, 200, Activation::gelu_erf, true, bf, bf));
  expect_pass(linear_case(rng, 3, 40, 24, Activation::none, true, f32, bf));         // f32 x
  expect_pass(linear_case(rng, 6, 64, 96, Activation::silu, true, f32, f32));        // f32 y
  expect_pass(linear_case(rng, 1, 155, 64, Activation::none, false, bf, f32));       // logits
  expect_pass(linear_case(rng, 11, 48, 64, Activation::none, true, bf, bf, 8));      // strided x
  expect_pass(linear_case(rng, 4, 30, 27, Activation::gelu_erf, false, bf, bf, 5));  // ld odd
}

// Bit-exactness across placements: the same op with its buffers at other 256-byte-aligned
// addresses (a weight resident vs streamed into a slot) gives the same bytes.
TEST(CudaOps, LinearPlacementInvariant) {
  SKIP_WITHOUT_CUDA();
  Rng rng(111);
  for (size_t offset : {size_t{256}, size_t{768}, size_t{4096 + 256}}) {
    std::string why;
    EXPECT_TRUE(placement_invariant(
        linear_case(rng, 1, 1024, 4096, Activation::none, false, DType::bf16, DType::bf16), offset,
        &why))
        << why;
    EXPECT_TRUE(placement_invariant(
        linear_case(rng, 64, 256, 512, Activation::silu, true, DType::bf16, DType::bf16), offset,
        &why))
        << why;
  }
}

// ---- norms ---------------------------------------------------------------------------------

Case rms_case(Rng& rng, int64_t rows, int64_t cols, int64_t dim, DType t, bool in_place,
              int64_t stride = 0) {
  Case c;
  c.op = "rms_norm";
  const int64_t st = stride == 0 ? cols : stride;
  c.shape = s(rows) + "x" + s(cols) + " dim=" + s(dim) + " " + dt(t) +
            (in_place ? " in-place" : "") + (stride != 0 ? " stride=" + s(stride) : "");
  const int x = c.add(t, rows, cols, rng.uniform(t, rows * st, 2.0f), in_place, st);
  const int w = c.add(DType::bf16, 1, dim, rng.uniform(DType::bf16, dim, 1.5f), false);
  const int y = in_place ? x : c.add(t, rows, cols, pattern_bytes(t, rows * cols), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    RmsNorm op;
    op.x = v[x];
    op.w = v[w];
    op.y = v[y];
    op.dim = dim;
    op.eps = 1e-6f;
    return op;
  };
  c.tol = t == DType::bf16 ? kBf16Reduce : Tolerance{1e-6, 1e-5};
  return c;
}

TEST(CudaOps, RmsNorm) {
  SKIP_WITHOUT_CUDA();
  Rng rng(202);
  expect_pass(rms_case(rng, 1, 4096, 4096, DType::bf16, false));
  expect_pass(rms_case(rng, 7, 4096, 128, DType::bf16, true));  // per-head q_norm, in place
  expect_pass(rms_case(rng, 3, 100, 100, DType::bf16, false));
  expect_pass(rms_case(rng, 5, 64, 16, DType::bf16, false));
  expect_pass(rms_case(rng, 3, 2048, 2048, DType::f32, false));     // expert residual stream
  expect_pass(rms_case(rng, 4, 256, 128, DType::bf16, true, 768));  // k inside fused qkv
  // The register-resident team kernels at each team size (16, 32, 128, 256 threads), partial
  // last blocks, and a chunk too wide for them (one block per chunk).
  expect_pass(rms_case(rng, 33, 2048, 2048, DType::bf16, false));      // team 32, 8 vectors each
  expect_pass(rms_case(rng, 9, 1152, 1152, DType::bf16, true));        // team 32, partial vectors
  expect_pass(rms_case(rng, 5, 4096, 4096, DType::bf16, true));        // team 128, in place
  expect_pass(rms_case(rng, 3, 16384, 16384, DType::bf16, false));     // team 256
  expect_pass(rms_case(rng, 2, 16392, 16392, DType::bf16, false));     // too wide: block kernel
  expect_pass(rms_case(rng, 19, 5120, 128, DType::bf16, true, 5376));  // 40 heads in qkv
}

Case layer_norm_case(Rng& rng, int64_t rows, int64_t cols, DType xt, DType yt) {
  Case c;
  c.op = "layer_norm";
  c.shape = s(rows) + "x" + s(cols) + " x=" + dt(xt) + " y=" + dt(yt);
  const int x = c.add(xt, rows, cols, rng.uniform(xt, rows * cols, 3.0f), false);
  const int w = c.add(DType::bf16, 1, cols, rng.uniform(DType::bf16, cols, 1.5f), false);
  const int b = c.add(DType::bf16, 1, cols, rng.uniform(DType::bf16, cols, 0.5f), false);
  const int y = c.add(yt, rows, cols, pattern_bytes(yt, rows * cols), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    LayerNorm op;
    op.x = v[x];
    op.w = v[w];
    op.b = v[b];
    op.y = v[y];
    op.eps = 1e-6f;
    return op;
  };
  c.tol = yt == DType::bf16 ? kBf16Reduce : Tolerance{1e-5, 1e-5};
  return c;
}

TEST(CudaOps, LayerNorm) {
  SKIP_WITHOUT_CUDA();
  Rng rng(303);
  expect_pass(layer_norm_case(rng, 1, 1152, DType::bf16, DType::bf16));
  expect_pass(layer_norm_case(rng, 7, 4608, DType::bf16, DType::f32));
  expect_pass(layer_norm_case(rng, 3, 37, DType::f32, DType::bf16));
  expect_pass(layer_norm_case(rng, 5, 2048, DType::f32, DType::f32));
  // The register-resident team kernels (bf16 x and y): the vision width with a partial last
  // block, the merger width, a narrow row, and a row too wide for them.
  expect_pass(layer_norm_case(rng, 37, 1152, DType::bf16, DType::bf16));  // team 32
  expect_pass(layer_norm_case(rng, 5, 4608, DType::bf16, DType::bf16));   // team 128
  expect_pass(layer_norm_case(rng, 3, 64, DType::bf16, DType::bf16));     // team 16
  expect_pass(layer_norm_case(rng, 2, 12288, DType::bf16, DType::bf16));  // team 256
  expect_pass(layer_norm_case(rng, 2, 20000, DType::bf16, DType::bf16));  // block kernel
}

// ---- rotary ---------------------------------------------------------------------------------

Case rope_case(Rng& rng, int64_t rows, int heads, int head_dim, RopeMath math, int64_t stride = 0) {
  Case c;
  c.op = "rope";
  const int64_t cols = int64_t{heads} * head_dim;
  const int64_t st = stride == 0 ? cols : stride;
  const int half = head_dim / 2;
  c.shape = "S=" + s(rows) + " heads=" + s(heads) + " hd=" + s(head_dim) +
            (math == RopeMath::bf16 ? " bf16-math" : " f32-math") +
            (stride != 0 ? " stride=" + s(stride) : "");
  const int x = c.add(DType::bf16, rows, cols, rng.uniform(DType::bf16, rows * st, 2.0f), true, st);
  const int co = c.add(DType::f32, rows, half, rng.uniform(DType::f32, rows * half), false);
  const int si = c.add(DType::f32, rows, half, rng.uniform(DType::f32, rows * half), false);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    Rope op;
    op.x = v[x];
    op.cos = v[co];
    op.sin = v[si];
    op.num_heads = heads;
    op.head_dim = head_dim;
    op.math = math;
    return op;
  };
  c.tol = kExact;
  return c;
}

TEST(CudaOps, Rope) {
  SKIP_WITHOUT_CUDA();
  Rng rng(404);
  expect_pass(rope_case(rng, 5, 4, 128, RopeMath::bf16));
  expect_pass(rope_case(rng, 9, 16, 72, RopeMath::f32));
  expect_pass(rope_case(rng, 3, 2, 16, RopeMath::bf16, 3 * 2 * 16));  // q inside fused qkv
  expect_pass(rope_case(rng, 1, 8, 128, RopeMath::f32, 4096));
  // The model's shapes on the vectorized kernel: text q|k (40 heads of 128 inside qkv, 16-byte
  // accesses), vision q|k (32 heads of 72 inside qkv, 8-byte accesses); and a half of 10 (no
  // vector width fits: the scalar kernel).
  expect_pass(rope_case(rng, 7, 40, 128, RopeMath::bf16, 6144));
  expect_pass(rope_case(rng, 11, 32, 72, RopeMath::f32, 3456));
  expect_pass(rope_case(rng, 4, 3, 20, RopeMath::bf16));
}

Case rope_table_case(Rng& rng, int64_t rows, int head_dim, float theta, std::array<int, 3> sec,
                     bool equal_cols, int32_t max_pos, RopeLlama3 llama3 = {}) {
  Case c;
  c.op = "rope_table";
  const int half = head_dim / 2;
  c.shape = "S=" + s(rows) + " hd=" + s(head_dim) + " theta=" + s(static_cast<int64_t>(theta)) +
            (equal_cols ? " 1-D" : " mrope") + " pos<" + s(max_pos) +
            (llama3.factor != 0.0f ? " llama3" : "");
  std::vector<uint8_t> pos = rng.ints(rows * 3, max_pos);
  if (equal_cols) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(pos.data() + (r * 3 + 1) * 4, pos.data() + r * 12, 4);
      std::memcpy(pos.data() + (r * 3 + 2) * 4, pos.data() + r * 12, 4);
    }
  }
  const int p = c.add(DType::i32, rows, 3, std::move(pos), false);
  const int co = c.add(DType::f32, rows, half, pattern_bytes(DType::f32, rows * half), true);
  const int si = c.add(DType::f32, rows, half, pattern_bytes(DType::f32, rows * half), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    RopeTable op;
    op.pos = v[p];
    op.cos = v[co];
    op.sin = v[si];
    op.theta = theta;
    op.head_dim = head_dim;
    op.sections = sec;
    op.llama3 = llama3;
    return op;
  };
  c.tol = Tolerance{2e-6, 0.0};
  return c;
}

TEST(CudaOps, RopeTable) {
  SKIP_WITHOUT_CUDA();
  Rng rng(505);
  expect_pass(rope_table_case(rng, 17, 128, 5e6f, {24, 20, 20}, false, 5000));
  expect_pass(rope_table_case(rng, 9, 128, 5e6f, {24, 20, 20}, true, 3000));
  expect_pass(rope_table_case(rng, 5, 64, 10000.0f, {12, 10, 10}, false, 100));
  // Llama-3.1's scaling (the host's table, a kernel argument) and a tiny model's.
  expect_pass(
      rope_table_case(rng, 13, 128, 5e5f, {64, 0, 0}, true, 9000, {8.0f, 1.0f, 4.0f, 8192.0f}));
  expect_pass(rope_table_case(rng, 6, 16, 5e5f, {8, 0, 0}, true, 200, {4.0f, 1.0f, 4.0f, 16.0f}));
}

}  // namespace
}  // namespace ferry::cuda_test
