// The small ops on CUDA against the CPU reference: swiglu, add, add_rows, gather_rows,
// scatter_rows, cast, copy, pos_embed_interp, argmax. All exact except swiglu (silu's exp may
// land one bf16 ulp apart: kBf16Reduce).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/bf16.h"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

TEST(CudaOps, SwiGlu) {
  SKIP_WITHOUT_CUDA();
  Rng rng(808);
  for (auto [m, i, fused] : {std::tuple<int64_t, int64_t, bool>{7, 1024, false},
                             {3, 33, false},
                             {5, 96, true},
                             {1, 12288, true}}) {
    Case c;
    c.op = "swiglu";
    c.shape = s(m) + "x" + s(i) + (fused ? " fused gate|up" : "");
    int g = -1;
    int u = -1;
    int gu = -1;
    if (fused) {
      gu = c.add(DType::bf16, m, 2 * i, rng.uniform(DType::bf16, m * 2 * i, 6.0f), false);
    } else {
      g = c.add(DType::bf16, m, i, rng.uniform(DType::bf16, m * i, 6.0f), false);
      u = c.add(DType::bf16, m, i, rng.uniform(DType::bf16, m * i, 2.0f), false);
    }
    const int o = c.add(DType::bf16, m, i, pattern_bytes(DType::bf16, m * i), true);
    const int64_t ii = i;
    c.make = [=](const std::vector<TensorView>& v) -> Op {
      SwiGlu op;
      op.gate = gu >= 0 ? v[gu].slice_cols(0, ii) : v[g];
      op.up = gu >= 0 ? v[gu].slice_cols(ii, ii) : v[u];
      op.out = v[o];
      return op;
    };
    c.tol = kBf16Reduce;
    expect_pass(c);
  }
}

TEST(CudaOps, AddAndAddRows) {
  SKIP_WITHOUT_CUDA();
  Rng rng(909);
  for (DType dt_dst : {DType::bf16, DType::f32}) {
    for (DType dt_src : {DType::bf16, DType::f32}) {
      Case c;
      c.op = "add";
      c.shape = "9x300 dst=" + std::string(dt(dt_dst)) + " src=" + dt(dt_src);
      const int d = c.add(dt_dst, 9, 300, rng.uniform(dt_dst, 9 * 300, 4.0f), true);
      const int sr = c.add(dt_src, 9, 300, rng.uniform(dt_src, 9 * 300, 4.0f), false);
      c.make = [=](const std::vector<TensorView>& v) -> Op { return Add{v[d], v[sr]}; };
      c.tol = kExact;
      expect_pass(c);
    }
  }
  {
    // The residual add at LM width: the 16-byte kernel.
    Case c;
    c.op = "add";
    c.shape = "6x4096 bf16 += bf16 (vectorized)";
    const int d = c.add(DType::bf16, 6, 4096, rng.uniform(DType::bf16, 6 * 4096, 4.0f), true);
    const int sr = c.add(DType::bf16, 6, 4096, rng.uniform(DType::bf16, 6 * 4096, 4.0f), false);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return Add{v[d], v[sr]}; };
    c.tol = kExact;
    expect_pass(c);
  }
  {
    Case c;
    c.op = "add_rows";
    c.shape = "dst 40x96 += 7 rows bf16 (deepstack)";
    const int d = c.add(DType::bf16, 40, 96, rng.uniform(DType::bf16, 40 * 96, 4.0f), true);
    const int sr = c.add(DType::bf16, 7, 96, rng.uniform(DType::bf16, 7 * 96, 4.0f), false);
    const int r = c.add(DType::i32, 7, 1, rng.ints(7, 40, true), false);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return AddRows{v[d], v[sr], v[r]}; };
    c.tol = kExact;
    expect_pass(c);
  }
}

TEST(CudaOps, GatherScatter) {
  SKIP_WITHOUT_CUDA();
  Rng rng(1001);
  for (DType t : {DType::bf16, DType::f32}) {
    Case c;
    c.op = "gather_rows";
    c.shape = "table 1000x72 " + std::string(dt(t)) + " n=13";
    const int tb = c.add(t, 1000, 72, rng.uniform(t, 1000 * 72), false);
    const int ids = c.add(DType::i32, 13, 1, rng.ints(13, 1000), false);
    const int o = c.add(t, 13, 72, pattern_bytes(t, 13 * 72), true);
    c.make = [=](const std::vector<TensorView>& v) -> Op {
      return GatherRows{v[tb], v[ids], v[o]};
    };
    c.tol = kExact;
    expect_pass(c);
  }
  {
    Case c;
    c.op = "scatter_rows";
    c.shape = "11 rows into 64x40 bf16";
    const int sr = c.add(DType::bf16, 11, 40, rng.uniform(DType::bf16, 11 * 40), false);
    const int r = c.add(DType::i32, 11, 1, rng.ints(11, 64, true), false);
    const int d = c.add(DType::bf16, 64, 40, rng.uniform(DType::bf16, 64 * 40), true);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return ScatterRows{v[sr], v[r], v[d]}; };
    c.tol = kExact;
    expect_pass(c);
  }
}

std::vector<uint8_t> f32_with_specials(Rng& rng, int64_t n) {
  std::vector<uint8_t> b = rng.uniform(DType::f32, n, 100.0f);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            1.00390625f,  // 1 + 2^-8: a tie, rounds to even (1.0)
                            1.01171875f,  // 1 + 3·2^-8: a tie, rounds to even (1.015625)
                            3.4e38f,      // rounds to bf16 infinity
                            1e-40f};      // subnormal
  for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i) < n; ++i) {
    std::memcpy(b.data() + i * 4, &specials[i], 4);
  }
  return b;
}

TEST(CudaOps, CastAndCopy) {
  SKIP_WITHOUT_CUDA();
  Rng rng(1102);
  for (auto [xt, yt] : {std::pair{DType::f32, DType::bf16}, std::pair{DType::bf16, DType::f32}}) {
    Case c;
    c.op = "cast";
    c.shape = "17x33 " + std::string(dt(xt)) + "->" + dt(yt);
    const int x =
        c.add(xt, 17, 33,
              xt == DType::f32 ? f32_with_specials(rng, 17 * 33) : rng.uniform(xt, 17 * 33, 50.0f),
              false);
    const int y = c.add(yt, 17, 33, pattern_bytes(yt, 17 * 33), true);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return Cast{v[x], v[y]}; };
    c.tol = kExact;
    expect_pass(c);
  }
  for (DType t : {DType::bf16, DType::f32}) {
    Case c;
    c.op = "copy";
    c.shape = "5x128 " + std::string(dt(t)) + " src stride 384 -> dst stride 1024";
    const int sr = c.add(t, 5, 128, rng.uniform(t, 5 * 384), false, 384);
    const int d = c.add(t, 5, 128, rng.uniform(t, 5 * 1024), true, 1024);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return Copy{v[sr], v[d]}; };
    c.tol = kExact;
    expect_pass(c);
  }
}

TEST(CudaOps, PosEmbedInterp) {
  SKIP_WITHOUT_CUDA();
  Rng rng(1203);
  Case c;
  c.op = "pos_embed_interp";
  c.shape = "table 2304x72 n=45";
  const int tb = c.add(DType::bf16, 2304, 72, rng.uniform(DType::bf16, 2304 * 72, 2.0f), false);
  const int idx = c.add(DType::i32, 45, 4, rng.ints(45 * 4, 2304), false);
  std::vector<uint8_t> w = rng.uniform(DType::f32, 45 * 4, 1.0f);
  for (size_t i = 0; i < w.size(); i += 4) {  // weights in [0, 1]
    float f;
    std::memcpy(&f, w.data() + i, 4);
    f = std::fabs(f);
    std::memcpy(w.data() + i, &f, 4);
  }
  const int wt = c.add(DType::f32, 45, 4, std::move(w), false);
  const int o = c.add(DType::bf16, 45, 72, pattern_bytes(DType::bf16, 45 * 72), true);
  c.make = [=](const std::vector<TensorView>& v) -> Op {
    return PosEmbedInterp{v[tb], v[idx], v[wt], v[o]};
  };
  c.tol = kExact;
  expect_pass(c);
}

TEST(CudaOps, Argmax) {
  SKIP_WITHOUT_CUDA();
  Rng rng(1304);
  {
    // bf16 over a vocabulary-sized row: many exact ties, the lowest index must win.
    Case c;
    c.op = "argmax";
    c.shape = "3x155697 bf16";  // 77 chunks per row in pass 1
    const int x = c.add(DType::bf16, 3, 155697, rng.uniform(DType::bf16, 3 * 155697, 4.0f), false);
    const int o = c.add(DType::i32, 3, 1, pattern_bytes(DType::i32, 3), true);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return Argmax{v[x], v[o]}; };
    c.tol = kExact;
    expect_pass(c);
  }
  {
    Case c;
    c.op = "argmax";
    c.shape = "4x1000 f32 with NaN";
    std::vector<uint8_t> xs = rng.uniform(DType::f32, 4 * 1000, 4.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int r = 0; r < 4; ++r) std::memcpy(xs.data() + (r * 1000 + 17 * (r + 1)) * 4, &nan, 4);
    const int x = c.add(DType::f32, 4, 1000, std::move(xs), false);
    const int o = c.add(DType::i32, 4, 1, pattern_bytes(DType::i32, 4), true);
    c.make = [=](const std::vector<TensorView>& v) -> Op { return Argmax{v[x], v[o]}; };
    c.tol = kExact;
    expect_pass(c);
  }
}

}  // namespace
}  // namespace ferry::cuda_test
