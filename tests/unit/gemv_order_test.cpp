// The batch-1 GEMV's summation order (backend/gemv_order.h): its reference sums what it should,
// and in the order the contract names (position sums mod 256, lane sums, butterfly pairing).
#include "backend/gemv_order.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

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

}  // namespace
}  // namespace ferry
