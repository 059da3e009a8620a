// The skinny linear kernel (linear_skinny.cu: M <= 8, K a multiple of 8, 16-byte aligned w rows)
// against the CPU reference, through Backend::run (so through run_linear's routing). Tolerances as
// for every linear case (op_harness_test.cpp): kBf16Reduce for bf16 y, kF32Reduce for f32 y (the
// f32 cases keep K <= 4096 as there). Covered: M in {1, 2, 3, 5, 8}; N odd and even, not a multiple
// of the 16-row block; K from 8 (one chunk) to 12288, with partial 64-wide steps and step counts
// that do not divide among the warps; every activation with and without bias; f32 x (rounded on
// load) and f32 y; x, y and w as strided views; x at an address or stride that forbids 16-byte
// loads (the element-load path). The harness runs every case twice and requires identical bytes.
// The M <= 64 kernel (linear_skinny64.cu) likewise, for M in {9, 16, 17, 33, 64}, with and without
// K splits (the split count follows N and K), and with x that must be copied or rounded first.
// Also: every launch shape the benchmark sweeps, called directly, against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/linear_skinny.cuh"
#include "core/bf16.h"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

struct Shape {
  int64_t m = 1, n = 64, k = 64;
  Activation act = Activation::none;
  bool bias = false;
  DType xt = DType::bf16;
  DType yt = DType::bf16;
  int64_t x_pad = 0;     // extra elements per x row
  int64_t x_offset = 0;  // the x view starts this many elements into its buffer (<= x_pad)
  int64_t y_pad = 0;     // extra elements per y row (left untouched)
  int64_t w_pad = 0;     // w as the first k columns of a [n, k + w_pad] matrix
};

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

Case skinny_case(Rng& rng, const Shape& s) {
  Case c;
  c.op = "linear";
  c.shape = "M=" + cuda_test::s(s.m) + " N=" + cuda_test::s(s.n) + " K=" + cuda_test::s(s.k) + " " +
            act_name(s.act) + (s.bias ? " bias" : "") + " x=" + dt(s.xt) + " y=" + dt(s.yt);
  if (s.x_pad != 0) c.shape += " ldx=" + cuda_test::s(s.k + s.x_pad);
  if (s.x_offset != 0) c.shape += " x+" + cuda_test::s(s.x_offset);
  if (s.y_pad != 0) c.shape += " ldy=" + cuda_test::s(s.n + s.y_pad);
  if (s.w_pad != 0) c.shape += " ldw=" + cuda_test::s(s.k + s.w_pad);
  const float wscale = 1.0f / std::sqrt(static_cast<float>(s.k));
  const int64_t ldx = s.k + s.x_pad;
  const int64_t ldw = s.k + s.w_pad;
  const int64_t ldy = s.n + s.y_pad;
  const int x = c.add(s.xt, s.m, s.k, rng.uniform(s.xt, s.m * ldx), false, ldx);
  const int w =
      c.add(DType::bf16, s.n, s.k, rng.uniform(DType::bf16, s.n * ldw, 2.0f * wscale), false, ldw);
  const int b =
      s.bias ? c.add(DType::bf16, 1, s.n, rng.uniform(DType::bf16, s.n, 0.5f), false) : -1;
  const int y = c.add(s.yt, s.m, s.n, pattern_bytes(s.yt, s.m * ldy), true, ldy);
  const int64_t x_offset = s.x_offset;
  const Activation act = s.act;
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    Linear op;
    op.x = v[x];
    op.x.data = static_cast<uint8_t*>(op.x.data) + x_offset * dtype_size(op.x.dtype);
    op.w = v[w];
    if (b >= 0) op.bias = v[b];
    op.y = v[y];
    op.act = act;
    return op;
  };
  c.tol = s.yt == DType::bf16 ? kBf16Reduce : kF32Reduce;
  return c;
}

constexpr DType kBf = DType::bf16;
constexpr DType kF32 = DType::f32;

TEST(CudaOps, LinearSkinnyShapes) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Rng rng(131);
  for (int64_t m : {1, 2, 3, 5, 8}) {
    expect_pass(skinny_case(rng, {.m = m, .n = 64, .k = 64}));
    expect_pass(skinny_case(rng, {.m = m, .n = 33, .k = 8, .bias = true}));  // one chunk
    expect_pass(
        skinny_case(rng, {.m = m, .n = 17, .k = 72, .act = Activation::silu, .bias = true}));
    expect_pass(skinny_case(rng, {.m = m, .n = 130, .k = 200, .act = Activation::gelu_tanh}));
    expect_pass(
        skinny_case(rng, {.m = m, .n = 48, .k = 520, .act = Activation::gelu_erf, .bias = true}));
    // 17 steps of 64: two rounds for warp 0, one for the others.
    expect_pass(skinny_case(rng, {.m = m, .n = 1000, .k = 1032, .act = Activation::silu}));
    expect_pass(skinny_case(rng, {.m = m, .n = 40, .k = 12288, .bias = true}));
  }
  // The decode shapes' widths (at smaller N to keep the CPU reference quick), and N = 1.
  expect_pass(skinny_case(rng, {.m = 1, .n = 4096, .k = 4096}));
  expect_pass(skinny_case(rng, {.m = 1, .n = 512, .k = 12288, .act = Activation::silu}));
  expect_pass(skinny_case(rng, {.m = 1, .n = 1, .k = 4096, .bias = true}));
  expect_pass(skinny_case(rng, {.m = 8, .n = 2049, .k = 2048, .act = Activation::gelu_tanh}));
}

TEST(CudaOps, LinearSkinnyDtypes) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Rng rng(132);
  const Activation acts[] = {Activation::none, Activation::silu, Activation::gelu_tanh,
                             Activation::gelu_erf};
  for (Activation act : acts) {
    for (bool bias : {false, true}) {
      expect_pass(skinny_case(rng, {.m = 3, .n = 77, .k = 328, .act = act, .bias = bias}));
      expect_pass(skinny_case(
          rng, {.m = 5, .n = 64, .k = 256, .act = act, .bias = bias, .xt = kF32, .yt = kBf}));
      expect_pass(skinny_case(
          rng, {.m = 2, .n = 45, .k = 1096, .act = act, .bias = bias, .xt = kBf, .yt = kF32}));
      expect_pass(skinny_case(
          rng, {.m = 8, .n = 31, .k = 4096, .act = act, .bias = bias, .xt = kF32, .yt = kF32}));
    }
  }
  // Logits: M = 1, f32 y, a wide odd N.
  expect_pass(skinny_case(rng, {.m = 1, .n = 32771, .k = 512, .yt = kF32}));
}

TEST(CudaOps, LinearSkinnyStrides) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Rng rng(133);
  // Aligned strided x and y, and w as a column slice with a stride that keeps 16-byte rows.
  expect_pass(skinny_case(rng, {.m = 4, .n = 50, .k = 136, .bias = true, .x_pad = 8, .y_pad = 5}));
  expect_pass(skinny_case(rng, {.m = 3, .n = 36, .k = 96, .act = Activation::silu, .w_pad = 8}));
  expect_pass(skinny_case(rng, {.m = 6, .n = 21, .k = 200, .yt = kF32, .y_pad = 3}));
  // x rows that forbid 16-byte loads: odd stride, odd start, f32 x with a stride of 2 mod 4.
  expect_pass(skinny_case(rng, {.m = 5, .n = 40, .k = 80, .x_pad = 3}));
  expect_pass(skinny_case(rng, {.m = 2, .n = 24, .k = 64, .x_pad = 1, .x_offset = 1}));
  expect_pass(skinny_case(
      rng, {.m = 7, .n = 19, .k = 72, .act = Activation::gelu_erf, .xt = kF32, .x_pad = 2}));
  expect_pass(skinny_case(
      rng, {.m = 1, .n = 33, .k = 520, .xt = kF32, .yt = kF32, .x_pad = 1, .x_offset = 1}));
  // Outside the kernel's domain (run_linear falls back to cuBLASLt): w stride not a multiple of 8,
  // K not a multiple of 8, M = 9.
  expect_pass(skinny_case(rng, {.m = 2, .n = 40, .k = 64, .w_pad = 4}));
  expect_pass(skinny_case(rng, {.m = 2, .n = 40, .k = 60}));
  expect_pass(skinny_case(rng, {.m = 9, .n = 40, .k = 64, .act = Activation::silu}));
}

// M = 9..64: the split count is a function of N and K (linear_skinny64_splits): N <= 128 with
// K >= 1024 splits K, K < 1024 never does.
TEST(CudaOps, LinearSkinny64Shapes) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Rng rng(136);
  for (int64_t m : {9, 16, 17, 33, 64}) {
    expect_pass(skinny_case(rng, {.m = m, .n = 64, .k = 64}));
    expect_pass(skinny_case(rng, {.m = m, .n = 33, .k = 8, .bias = true}));
    expect_pass(skinny_case(rng, {.m = m, .n = 130, .k = 520, .act = Activation::silu}));
    // 2 splits (9 + 8 steps of 64); 15 splits (14 of 9 steps, the last of 3).
    expect_pass(skinny_case(
        rng, {.m = m, .n = 100, .k = 1032, .act = Activation::gelu_tanh, .bias = true}));
    expect_pass(skinny_case(rng, {.m = m, .n = 300, .k = 8256, .bias = true}));
  }
  // The expert's shapes at a smaller N or K (the CPU reference stays quick).
  expect_pass(skinny_case(rng, {.m = 64, .n = 4160, .k = 2048, .act = Activation::silu}));
  expect_pass(skinny_case(rng, {.m = 64, .n = 16512, .k = 512, .bias = true, .xt = kF32}));
  expect_pass(skinny_case(rng, {.m = 64, .n = 520, .k = 8256}));
}

TEST(CudaOps, LinearSkinny64DtypesStrides) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Rng rng(137);
  const Activation acts[] = {Activation::none, Activation::silu, Activation::gelu_tanh,
                             Activation::gelu_erf};
  for (Activation act : acts) {
    for (bool bias : {false, true}) {
      // With and without splits, f32 x (rounded into scratch) and f32 y.
      expect_pass(skinny_case(
          rng, {.m = 20, .n = 72, .k = 2048, .act = act, .bias = bias, .xt = kF32, .yt = kF32}));
      expect_pass(skinny_case(rng, {.m = 64, .n = 90, .k = 136, .act = act, .bias = bias}));
    }
  }
  expect_pass(skinny_case(rng, {.m = 12, .n = 50, .k = 136, .bias = true, .x_pad = 8, .y_pad = 5}));
  expect_pass(skinny_case(rng, {.m = 64, .n = 36, .k = 1096, .act = Activation::silu, .w_pad = 8}));
  expect_pass(skinny_case(rng, {.m = 30, .n = 40, .k = 80, .x_pad = 3}));  // x copied first
  expect_pass(skinny_case(rng, {.m = 64, .n = 24, .k = 64, .x_pad = 1, .x_offset = 1}));
  expect_pass(skinny_case(rng, {.m = 64, .n = 33, .k = 520, .yt = kF32, .y_pad = 3}));
  // M = 65: cuBLASLt again.
  expect_pass(skinny_case(rng, {.m = 65, .n = 40, .k = 64, .act = Activation::silu}));
}

// Same bytes with every buffer at other 256-byte-aligned addresses (weights resident or in a
// streaming slot take the same kernel and sum in the same order).
TEST(CudaOps, LinearSkinnyPlacementInvariant) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Rng rng(134);
  for (size_t offset : {size_t{256}, size_t{4096 + 768}}) {
    std::string why;
    EXPECT_TRUE(placement_invariant(skinny_case(rng, {.m = 1, .n = 2048, .k = 4096}), offset, &why))
        << why;
    EXPECT_TRUE(placement_invariant(
        skinny_case(rng, {.m = 8, .n = 100, .k = 1032, .act = Activation::silu, .bias = true}),
        offset, &why))
        << why;
    EXPECT_TRUE(placement_invariant(skinny_case(rng, {.m = 64, .n = 100, .k = 2048, .bias = true}),
                                    offset, &why))
        << why;
  }
}

// ---- every launch shape the benchmark sweeps, called directly ---------------------------------

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

// Elements of y out of tolerance (NaN never passes).
int64_t count_bad(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                  const Buffer& yb, const Tolerance& tol) {
  int64_t bad = 0;
  for (int64_t i = 0; i < yb.rows * yb.stride; ++i) {
    const double a = value_at(want, yb.dtype, i);
    const double g = value_at(got, yb.dtype, i);
    if (!(std::fabs(g - a) <= tol.atol + tol.rtol * std::fabs(a))) ++bad;
  }
  return bad;
}

TEST(CudaOps, LinearSkinnyConfigs) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Backends* be = backends(nullptr);
  Rng rng(135);
  const cuda::SkinnyConfig configs[] = {{8, 2}, {8, 1}, {8, 4}, {4, 2}, {4, 4}};
  const Shape shapes[] = {
      {.m = 1, .n = 300, .k = 4096},
      {.m = 8, .n = 77, .k = 1032, .act = Activation::silu, .bias = true, .xt = kF32},
      {.m = 3, .n = 40, .k = 200, .yt = kF32},
  };
  for (const Shape& s : shapes) {
    const Case c = skinny_case(rng, s);
    const Buffer& yb = c.buffers.back();
    const std::vector<uint8_t> want =
        run_linear_direct(*be->cpu, *be->cpu_stream, c,
                          [&](const Linear& op) { return be->cpu->run(*be->cpu_stream, op); });
    for (const cuda::SkinnyConfig& cfg : configs) {
      const cuda::OpContext ctx{cuda::stream_handle(*be->cuda_stream)};
      const std::vector<uint8_t> got =
          run_linear_direct(*be->cuda, *be->cuda_stream, c, [&](const Linear& op) {
            EXPECT_TRUE(cuda::linear_skinny_fits(op));
            return cuda::run_linear_skinny(ctx, op, cfg);
          });
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(count_bad(want, got, yb, c.tol), 0)
          << c.shape << " warps=" << cfg.warps << " unroll=" << cfg.unroll;
    }
  }
}

TEST(CudaOps, LinearSkinny64Configs) {
  const cuda::LinearRouteScope route(cuda::LinearRoute::skinny_when_fits);
  SKIP_WITHOUT_CUDA();
  Backends* be = backends(nullptr);
  Rng rng(138);
  const cuda::Skinny64Config configs[] = {{2, 0}, {4, 0}, {2, 1}, {4, 3}, {2, 16}};
  const Shape shapes[] = {
      {.m = 64, .n = 200, .k = 2048},
      {.m = 24, .n = 77, .k = 1032, .act = Activation::silu, .bias = true, .xt = kF32},
      {.m = 40, .n = 40, .k = 8256, .yt = kF32},
  };
  for (const Shape& s : shapes) {
    const Case c = skinny_case(rng, s);
    const Buffer& yb = c.buffers.back();
    const std::vector<uint8_t> want =
        run_linear_direct(*be->cpu, *be->cpu_stream, c,
                          [&](const Linear& op) { return be->cpu->run(*be->cpu_stream, op); });
    for (const cuda::Skinny64Config& cfg : configs) {
      const cuda::OpContext ctx{cuda::stream_handle(*be->cuda_stream)};
      const std::vector<uint8_t> got =
          run_linear_direct(*be->cuda, *be->cuda_stream, c, [&](const Linear& op) {
            EXPECT_TRUE(cuda::linear_skinny64_fits(op));
            return cuda::run_linear_skinny64(ctx, op, cfg);
          });
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(count_bad(want, got, yb, c.tol), 0)
          << c.shape << " unroll=" << cfg.unroll << " splits=" << cfg.splits;
    }
  }
}

}  // namespace
}  // namespace ferry::cuda_test
