// The fixed-order batch-1 GEMV (linear_gemv.cu) against the CPU backend, bit for bit: both keep
// the order of backend/gemv_order.h, so with no activation (and with a bias, which both add in
// fp32) the tolerance is zero. Through Backend::run, so through run_linear's routing of every
// M = 1 op. Covered: K from 1 to 12288 with every tail mod 8 and mod 256; N of 1, odd, not a
// multiple of a block's rows, and past 8192 (the two-row config); f32 x (rounded as it is loaded)
// and f32 y; x at an odd address and w with an odd row stride (the element-load path); denormal,
// overflowing, infinite and NaN products; every launch config called directly; other placements.
// Activations, whose CPU and CUDA functions agree to rounding only, at the usual tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/linear.cuh"
#include "backend/cuda/linear_gemv.cuh"
#include "core/bf16.h"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

constexpr DType kBf = DType::bf16;
constexpr DType kF32 = DType::f32;

struct Shape {
  int64_t n = 64, k = 64;
  Activation act = Activation::none;
  bool bias = false;
  DType xt = kBf;
  DType yt = kBf;
  int64_t x_offset = 0;   // the x view starts this many elements into its buffer
  int64_t w_pad = 0;      // w as the first k columns of a [n, k + w_pad] matrix
  bool specials = false;  // denormal, overflowing, infinite and NaN products in some rows
};

// bf16 bits of `v` written into a host buffer of `dtype` at element i.
void put(std::vector<uint8_t>& host, DType dtype, int64_t i, float v) {
  if (dtype == kBf) {
    const uint16_t b = f32_to_bf16(v);
    std::memcpy(host.data() + i * 2, &b, 2);
  } else {
    std::memcpy(host.data() + i * 4, &v, 4);
  }
}

Case gemv_case(Rng& rng, const Shape& s) {
  Case c;
  c.op = "linear";
  c.shape = "M=1 N=" + cuda_test::s(s.n) + " K=" + cuda_test::s(s.k) + (s.bias ? " bias" : "") +
            " x=" + dt(s.xt) + " y=" + dt(s.yt) + (s.act != Activation::none ? " act" : "");
  if (s.x_offset != 0) c.shape += " x+" + cuda_test::s(s.x_offset);
  if (s.w_pad != 0) c.shape += " ldw=" + cuda_test::s(s.k + s.w_pad);
  if (s.specials) c.shape += " specials";
  const float wscale = 1.0f / std::sqrt(static_cast<float>(s.k));
  const int64_t ldw = s.k + s.w_pad;
  const int64_t x_len = s.k + s.x_offset;
  std::vector<uint8_t> xh = rng.uniform(s.xt, x_len);
  std::vector<uint8_t> wh = rng.uniform(kBf, s.n * ldw, 2.0f * wscale);
  if (s.specials) {
    // Row 0: products in fp32's denormal range (rounded before they are added); row 1: an
    // overflow to inf; row 2: inf · 0 = NaN; row 3: a NaN in the tail of x's positions.
    const int64_t k = s.k;
    put(xh, s.xt, s.x_offset + 1, 0x1.fep-72f);
    put(wh, kBf, 0 * ldw + 1, 0x1.02p-72f);
    put(wh, kBf, 0 * ldw + std::min<int64_t>(k - 1, 257), 0x1p-140f);
    if (s.n > 1) put(wh, kBf, 1 * ldw + 0, 0x1p127f), put(xh, s.xt, s.x_offset + 0, 0x1p120f);
    if (s.n > 2) put(wh, kBf, 2 * ldw + 2, INFINITY), put(xh, s.xt, s.x_offset + 2, 0.0f);
    if (s.n > 3) put(wh, kBf, 3 * ldw + (k - 1), NAN);
  }
  const int x = c.add(s.xt, 1, x_len, std::move(xh), false);
  const int w = c.add(kBf, s.n, s.k, std::move(wh), false, ldw);
  const int b = s.bias ? c.add(kBf, 1, s.n, rng.uniform(kBf, s.n, 0.5f), false) : -1;
  const int y = c.add(s.yt, 1, s.n, pattern_bytes(s.yt, s.n), true);
  const Shape shape = s;
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    Linear op;
    op.x = v[x];
    op.x.data = static_cast<uint8_t*>(op.x.data) + shape.x_offset * dtype_size(op.x.dtype);
    op.x.cols = shape.k;
    op.w = v[w];
    if (b >= 0) op.bias = v[b];
    op.y = v[y];
    op.act = shape.act;
    return op;
  };
  c.tol = s.act == Activation::none ? kExact : s.yt == kBf ? kBf16Reduce : kF32Reduce;
  return c;
}

TEST(CudaOps, LinearGemvMatchesTheCpuBitForBit) {
  SKIP_WITHOUT_CUDA();
  Rng rng(141);
  for (int64_t k : {1, 5, 8, 13, 64, 255, 256, 257, 263, 1000, 4096, 4099}) {
    expect_pass(gemv_case(rng, {.n = 37, .k = k}));
    expect_pass(gemv_case(rng, {.n = 5, .k = k, .bias = true, .yt = kF32}));
  }
  // The decode shapes' widths (N smaller, to keep the CPU reference quick), N = 1, and the
  // two-row config past 8192 rows with a last block that is partly empty.
  expect_pass(gemv_case(rng, {.n = 4096, .k = 4096}));
  expect_pass(gemv_case(rng, {.n = 300, .k = 12288, .bias = true}));
  expect_pass(gemv_case(rng, {.n = 1, .k = 4096, .bias = true}));
  expect_pass(gemv_case(rng, {.n = 8199, .k = 520}));
  expect_pass(gemv_case(rng, {.n = 32771, .k = 512, .yt = kF32}));  // logits
}

TEST(CudaOps, LinearGemvDtypesAndLoads) {
  SKIP_WITHOUT_CUDA();
  Rng rng(142);
  for (DType xt : {kBf, kF32}) {
    for (DType yt : {kBf, kF32}) {
      expect_pass(gemv_case(rng, {.n = 77, .k = 1096, .bias = true, .xt = xt, .yt = yt}));
      // x at an odd address, w rows at odd strides: element loads.
      expect_pass(gemv_case(rng, {.n = 40, .k = 520, .xt = xt, .yt = yt, .x_offset = 1}));
      expect_pass(gemv_case(rng, {.n = 41, .k = 333, .xt = xt, .yt = yt, .w_pad = 3}));
    }
  }
}

TEST(CudaOps, LinearGemvSpecialValues) {
  SKIP_WITHOUT_CUDA();
  Rng rng(143);
  for (int64_t k : {9, 300, 4099}) {
    expect_pass(gemv_case(rng, {.n = 6, .k = k, .specials = true}));
    expect_pass(gemv_case(rng, {.n = 6, .k = k, .yt = kF32, .specials = true}));
    expect_pass(gemv_case(rng, {.n = 6, .k = k, .xt = kF32, .yt = kF32, .specials = true}));
  }
}

TEST(CudaOps, LinearGemvActivations) {
  SKIP_WITHOUT_CUDA();
  Rng rng(144);
  for (Activation act : {Activation::silu, Activation::gelu_tanh, Activation::gelu_erf}) {
    for (bool bias : {false, true}) {
      expect_pass(gemv_case(rng, {.n = 130, .k = 520, .act = act, .bias = bias}));
      expect_pass(gemv_case(rng, {.n = 45, .k = 1096, .act = act, .bias = bias, .yt = kF32}));
    }
  }
}

TEST(CudaOps, LinearGemvPlacementInvariant) {
  SKIP_WITHOUT_CUDA();
  Rng rng(145);
  for (size_t offset : {size_t{256}, size_t{4096 + 768}}) {
    std::string why;
    EXPECT_TRUE(placement_invariant(gemv_case(rng, {.n = 2048, .k = 4096}), offset, &why)) << why;
    EXPECT_TRUE(
        placement_invariant(gemv_case(rng, {.n = 9000, .k = 1032, .bias = true}), offset, &why))
        << why;
  }
}

// Every launch config the benchmark sweeps gives the CPU's bytes.
TEST(CudaOps, LinearGemvConfigs) {
  SKIP_WITHOUT_CUDA();
  Backends* be = backends(nullptr);
  Rng rng(146);
  const cuda::GemvConfig configs[] = {{1, 4}, {1, 8}, {2, 2}, {2, 4}, {4, 2}};
  const Shape shapes[] = {
      {.n = 301, .k = 4096},
      {.n = 77, .k = 1037, .bias = true, .xt = kF32},
      {.n = 40, .k = 200, .yt = kF32, .x_offset = 1},
  };
  for (const Shape& s : shapes) {
    const Case c = gemv_case(rng, s);
    const std::vector<uint8_t> want =
        run_linear_direct(*be->cpu, *be->cpu_stream, c,
                          [&](const Linear& op) { return be->cpu->run(*be->cpu_stream, op); });
    for (const cuda::GemvConfig& cfg : configs) {
      const cuda::OpContext ctx{cuda::stream_handle(*be->cuda_stream)};
      const std::vector<uint8_t> got =
          run_linear_direct(*be->cuda, *be->cuda_stream, c, [&](const Linear& op) {
            EXPECT_TRUE(cuda::linear_gemv_fits(op));
            return cuda::run_linear_gemv(ctx, op, cfg);
          });
      EXPECT_EQ(got, want) << c.shape << " rows=" << cfg.rows << " unroll=" << cfg.unroll;
    }
  }
}

}  // namespace
}  // namespace ferry::cuda_test
