// The batch-1 GEMV's summation order (backend/gemv_order.h): its reference sums what it should,
// and in the order the contract names (position sums mod 256, lane sums, butterfly pairing, each
// product rounded before it is added); the CPU's fast engines (scalar, AVX2, AVX-512, each where
// this CPU runs it) give the reference's bits on random rows of every tail length, on denormal
// and overflowing products, signed zeros and NaNs; and the CPU backend's M = 1 Linear is the
// reference plus the epilogue.
#include "backend/gemv_order.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/bf16.h"
#include "core/tensor.h"

namespace ferry {
namespace {

constexpr float kBig = 16777216.0f;  // 2^24: adding 1 to it is a tie and rounds back to 2^24

// A row of k bf16 ones for x and a row of w that is zero but for the given (index, value) pairs.
struct Row {
  std::vector<uint16_t> x, w;
  explicit Row(int64_t k) : x(k, f32_to_bf16(1.0f)), w(k, f32_to_bf16(0.0f)) {}
  Row& at(int64_t i, float v) {
    w[i] = f32_to_bf16(v);
    return *this;
  }
  float dot() const { return dot_fixed_order_ref(x.data(), w.data(), int64_t(x.size())); }
};

TEST(GemvOrder, SumsSmallIntegersExactlyForAnyLength) {
  for (int64_t k : {1, 7, 8, 13, 255, 256, 257, 1000, 4096}) {
    std::vector<uint16_t> x(k), w(k);
    double want = 0;
    for (int64_t i = 0; i < k; ++i) {
      const float xv = float(int(i % 7) - 3), wv = float(int(i % 5) - 2);
      x[i] = f32_to_bf16(xv);
      w[i] = f32_to_bf16(wv);
      want += double(xv) * wv;
    }
    EXPECT_EQ(dot_fixed_order_ref(x.data(), w.data(), k), float(want)) << "k = " << k;
  }
}

TEST(GemvOrder, PositionsSumModulo256BeforeLanes) {
  // k = 0 and 256 share position 0: 2^24 + 1 rounds to 2^24 there. Positions 1 and 257 give 2,
  // which survives being added to 2^24 in the lane sum: 2^24 + 2.
  EXPECT_EQ(Row(512).at(0, kBig).at(256, 1).at(1, 1).at(257, 1).dot(), kBig + 2);
  // A plain left-to-right sum would add each 1 to 2^24 alone and keep 2^24.
}

TEST(GemvOrder, LaneSumsPairPositionsAsWritten) {
  // Positions 0 and 2 meet only after (a0 + a1) is formed: 2^24 + 1 (a1) is a tie, then + 1 (a2
  // + a3) again: 2^24. Positions 2 and 3 pair first: (1 + 1) = 2 survives.
  EXPECT_EQ(Row(256).at(0, kBig).at(1, 1).at(2, 1).dot(), kBig);
  EXPECT_EQ(Row(256).at(0, kBig).at(2, 1).at(3, 1).dot(), kBig + 2);
}

TEST(GemvOrder, TheButterflyPairsLaneLWithLanePlusOffset) {
  // Lane l holds positions 8l .. 8l+7. Lanes 1 and 17 meet at off = 16 (1 + 1 = 2) before lane 1
  // reaches lane 0 at off = 1; lanes 1 and 16 reach lane 0 separately, each a tie that rounds away.
  EXPECT_EQ(Row(256).at(0, kBig).at(8 * 1, 1).at(8 * 17, 1).dot(), kBig + 2);
  EXPECT_EQ(Row(256).at(0, kBig).at(8 * 1, 1).at(8 * 16, 1).dot(), kBig);
}

TEST(GemvOrder, TheGemvIsADotPerRowWithTheRowStride) {
  const int64_t n = 3, k = 300, ldw = 320;
  std::vector<uint16_t> x(k), w(n * ldw, f32_to_bf16(1000.0f));  // the padding must not count
  for (int64_t i = 0; i < k; ++i) x[i] = f32_to_bf16(0.25f * float(i % 9));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) w[r * ldw + i] = f32_to_bf16(float(r + 1) * float(i % 4));
  }
  std::vector<float> out(n);
  gemv_fixed_order_ref(x.data(), w.data(), ldw, n, k, out.data());
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(out[r], dot_fixed_order_ref(x.data(), w.data() + r * ldw, k)) << "row " << r;
    double want = 0;
    for (int64_t i = 0; i < k; ++i) want += 0.25 * double(i % 9) * double(r + 1) * double(i % 4);
    EXPECT_EQ(out[r], float(want)) << "row " << r;  // small multiples of 1/4: exact
  }
}

TEST(GemvOrder, EachProductIsRoundedBeforeItIsAdded) {
  // One position (k = 0, 256, 512) sums 2^-120, 2^-143 and a product whose exact value,
  // 2^-144 - 2^-152, lies in fp32's denormal range: rounded, it is 2^-144, half an ulp of the sum
  // 2^-120 + 2^-143 (odd last bit), a tie that rounds up to 2^-120 + 2^-142. A fused
  // multiply-add sees the exact value, just under the tie, and keeps 2^-120 + 2^-143.
  Row row(513);
  row.x[0] = f32_to_bf16(std::ldexp(1.0f, -60));
  row.at(0, std::ldexp(1.0f, -60));
  row.x[256] = f32_to_bf16(std::ldexp(1.0f, -72));
  row.at(256, std::ldexp(1.0f, -71));
  row.x[512] = f32_to_bf16(std::ldexp(1.0f - 1.0f / 256, -72));  // 8 significant bits: exact
  row.at(512, std::ldexp(1.0f, -72));
  ASSERT_EQ(bf16_to_f32(row.x[512]), std::ldexp(1.0f - 1.0f / 256, -72));
  for (int64_t i = 1; i < 513; ++i) {
    if (i != 256 && i != 512) row.x[i] = f32_to_bf16(0.0f);
  }
  const float a = std::ldexp(1.0f, -120) + std::ldexp(1.0f, -143);
  ASSERT_EQ(a - std::ldexp(1.0f, -120), std::ldexp(1.0f, -143));  // both bits are kept
  const float fused = std::fma(bf16_to_f32(row.x[512]), bf16_to_f32(row.w[512]), a);
  EXPECT_EQ(row.dot(), std::ldexp(1.0f, -120) + std::ldexp(1.0f, -142));
  EXPECT_NE(row.dot(), fused);  // so an engine that fused would fail the engines' tests below
  EXPECT_EQ(fused, a);
}

// ---- the fast engines against the reference -------------------------------------------------

// Same bits, or both NaN (a NaN's payload is not part of the contract).
::testing::AssertionResult same_bits(float got, float want) {
  if (std::isnan(got) && std::isnan(want)) return ::testing::AssertionSuccess();
  uint32_t g = 0, w = 0;
  std::memcpy(&g, &got, 4);
  std::memcpy(&w, &want, 4);
  if (g == w) return ::testing::AssertionSuccess();
  char bits[64];
  std::snprintf(bits, sizeof bits, " (0x%08x, want 0x%08x)", g, w);
  return ::testing::AssertionFailure() << "got " << got << ", want " << want << bits;
}

class GemvEngine : public ::testing::TestWithParam<GemvIsa> {
 protected:
  void SetUp() override {
    if (!gemv_isa_supported(GetParam())) {
      GTEST_SKIP() << "this CPU does not run the " << gemv_isa_name(GetParam()) << " engine";
    }
  }
  // n rows of k values (row stride ldw, the padding poisoned) through the engine and the reference.
  void expect_same(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, int64_t ldw,
                   int64_t n, int64_t k, const std::string& what) {
    std::vector<float> got(n, -1.0f), want(n, -2.0f);
    gemv_fixed_order(GetParam(), x.data(), w.data(), ldw, n, k, got.data());
    gemv_fixed_order_ref(x.data(), w.data(), ldw, n, k, want.data());
    for (int64_t r = 0; r < n; ++r) {
      EXPECT_TRUE(same_bits(got[r], want[r])) << what << ", k = " << k << ", row " << r;
    }
  }
};

// Values of varied exponent (a wide dynamic range makes the order show in the low bits).
uint16_t random_bf16(std::mt19937& gen) {
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-12, 6);
  return f32_to_bf16(std::ldexp(mant(gen), ex(gen)));
}

TEST_P(GemvEngine, GivesTheReferenceBitsForEveryTailLength) {
  std::mt19937 gen(11);
  for (int64_t k :
       {1, 7, 8, 15, 16, 63, 64, 255, 256, 257, 300, 511, 512, 1000, 4096, 4099, 12288}) {
    const int64_t n = 5;
    const int64_t ldw = k + 3;  // rows that start at every alignment
    std::vector<uint16_t> x(k), w(n * ldw, f32_to_bf16(NAN));
    for (auto& v : x) v = random_bf16(gen);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < k; ++i) w[r * ldw + i] = random_bf16(gen);
    }
    expect_same(x, w, ldw, n, k, "random");
  }
}

TEST_P(GemvEngine, GivesTheReferenceBitsOnSpecialValues) {
  const int64_t k = 777;
  std::mt19937 gen(5);
  std::vector<uint16_t> x(k);
  for (auto& v : x) v = random_bf16(gen);
  struct Special {
    const char* what;
    int64_t at;
    float xv, wv;
  };
  // Each row is random but for a few elements set to the special values.
  const std::vector<std::vector<Special>> rows = {
      {{"denormal products", 3, 0x1p-70f, 0x1.02p-70f},
       {"", 259, 0x1.fep-72f, 0x1p-72f},
       {"", 515, -0x1.8p-75f, 0x1p-70f}},
      {{"denormal inputs", 10, 0x1p-130f, 3.0f}, {"", 266, 0.5f, -0x1p-128f}},
      {{"overflow", 0, 0x1p100f, 0x1p100f}},
      {{"overflow both signs", 0, 0x1p100f, 0x1p100f}, {"", 256, -0x1p100f, 0x1p100f}},
      {{"inf times zero", 1, INFINITY, 0.0f}},
      {{"nan in x", 700, NAN, 1.0f}},
      {{"nan in the tail", 770, 1.0f, NAN}},
  };
  for (const auto& specials : rows) {
    std::vector<uint16_t> xr(x.begin(), x.end());
    std::vector<uint16_t> w(k);
    for (auto& v : w) v = random_bf16(gen);
    for (const Special& s : specials) {
      xr[s.at] = f32_to_bf16(s.xv);
      w[s.at] = f32_to_bf16(s.wv);
    }
    expect_same(xr, w, k, 1, k, specials[0].what);
  }
  // Signed zeros: a row of products that are all -0 sums to +0, in every engine.
  std::vector<uint16_t> zeros_x(k, f32_to_bf16(-0.0f)), ones_w(k, f32_to_bf16(1.0f));
  expect_same(zeros_x, ones_w, k, 1, k, "negative zeros");
  float got = -1.0f;
  gemv_fixed_order(GetParam(), zeros_x.data(), ones_w.data(), k, 1, k, &got);
  EXPECT_TRUE(same_bits(got, 0.0f));
  // The rounding-before-adding case of the test above: an engine that fused fails it.
  Row row(513);
  row.x.assign(513, f32_to_bf16(0.0f));
  row.x[0] = f32_to_bf16(0x1p-60f);
  row.at(0, 0x1p-60f);
  row.x[256] = f32_to_bf16(0x1p-72f);
  row.at(256, 0x1p-71f);
  row.x[512] = f32_to_bf16(0x1.fep-73f);
  row.at(512, 0x1p-72f);
  expect_same(row.x, row.w, 513, 1, 513, "product rounded before it is added");
}

INSTANTIATE_TEST_SUITE_P(Isas, GemvEngine,
                         ::testing::Values(GemvIsa::scalar, GemvIsa::avx2, GemvIsa::avx512),
                         [](const ::testing::TestParamInfo<GemvIsa>& i) {
                           return std::string(gemv_isa_name(i.param));
                         });

// ---- the CPU backend's M = 1 Linear ---------------------------------------------------------

TEST(GemvCpuLinear, IsTheReferenceThenTheEpilogue) {
  std::mt19937 gen(3);
  const int64_t k = 1030, n = 131;  // rows over two of the backend's 64-row tasks, and a tail
  std::vector<uint16_t> x(k), w(n * k), bias(n);
  for (auto& v : x) v = random_bf16(gen);
  for (auto& v : w) v = random_bf16(gen);
  for (auto& v : bias) v = random_bf16(gen);
  std::vector<float> want(n);
  gemv_fixed_order_ref(x.data(), w.data(), k, n, k, want.data());

  std::vector<float> y(n, -1.0f);
  Linear f32_out{make_view(x.data(), DType::bf16, 1, k),
                 make_view(w.data(), DType::bf16, n, k),
                 {},
                 make_view(y.data(), DType::f32, 1, n)};
  ASSERT_TRUE(cpu::linear(f32_out, nullptr).ok());
  for (int64_t r = 0; r < n; ++r) EXPECT_TRUE(same_bits(y[r], want[r])) << "row " << r;

  // bf16 y with a bias: bf16(dot + bias), the epilogue of ops.h.
  std::vector<uint16_t> yb(n, 0xFFFF);
  Linear biased = f32_out;
  biased.bias = make_view(bias.data(), DType::bf16, 1, n);
  biased.y = make_view(yb.data(), DType::bf16, 1, n);
  ASSERT_TRUE(cpu::linear(biased, nullptr).ok());
  for (int64_t r = 0; r < n; ++r) {
    EXPECT_EQ(yb[r], f32_to_bf16(want[r] + bf16_to_f32(bias[r]))) << "row " << r;
  }

  // An f32 x is rounded to bf16 first.
  std::vector<float> xf(k);
  for (int64_t i = 0; i < k; ++i) xf[i] = bf16_to_f32(x[i]) * (1.0f + 0x1p-12f);
  std::vector<uint16_t> xr(k);
  for (int64_t i = 0; i < k; ++i) xr[i] = f32_to_bf16(xf[i]);
  gemv_fixed_order_ref(xr.data(), w.data(), k, n, k, want.data());
  Linear from_f32 = f32_out;
  from_f32.x = make_view(xf.data(), DType::f32, 1, k);
  ASSERT_TRUE(cpu::linear(from_f32, nullptr).ok());
  for (int64_t r = 0; r < n; ++r) EXPECT_TRUE(same_bits(y[r], want[r])) << "row " << r;
}

}  // namespace
}  // namespace ferry
