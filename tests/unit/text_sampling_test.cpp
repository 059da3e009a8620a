#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "core/bf16.h"
#include "model/prompt.h"
#include "model/sampling.h"

namespace ferry {
namespace {

TEST(TextSampling, ArgmaxFirstMaxSkipsNanAndMask) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> l = {1.0f, 3.0f, nan, 3.0f, 2.0f};
  EXPECT_EQ(argmax_token(l), 1);
  EXPECT_EQ(argmax_token(l, LogitsMask{1, 2}), 3);
  EXPECT_EQ(argmax_token(l, LogitsMask{0, 5}), -1);
}

// Greedy decode selects on the raw bf16 logits: the same index as on their float values, for
// every ordering case (ties, negatives, -0 vs +0, infinities, NaN, masks).
TEST(TextSampling, ArgmaxOnBf16BitsMatchesArgmaxOnFloats) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint16_t> raw(1 + static_cast<size_t>(trial % 37));
    for (auto& r : raw) r = static_cast<uint16_t>(bits(gen));
    if (trial % 5 == 0) raw[raw.size() / 2] = raw.front();  // a tie
    std::vector<float> f(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) f[i] = bf16_to_f32(raw[i]);
    const LogitsMask mask{trial % 3, trial % 3 + trial % 4};
    EXPECT_EQ(argmax_token_bf16(raw, mask), argmax_token(f, mask)) << trial;
  }
  const std::vector<uint16_t> signed_zero = {0x8000, 0x0000, 0xff80 /* -inf */};
  EXPECT_EQ(argmax_token_bf16(signed_zero), 0);  // -0 == +0: the first stays
  const std::vector<uint16_t> nan_first = {0x7fc1, 0xff80, 0x7f80 /* +inf */};
  EXPECT_EQ(argmax_token_bf16(nan_first), 2);
}

TEST(TextSampling, RngIsSeededAndUniformInRange) {
  Rng a(7), b(7), c(8);
  EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(a.next(), c.next());
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = a.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
  EXPECT_NE(sub_seed(1, 1), sub_seed(1, 2));
}

TEST(TextSampling, TopPDropsTheTail) {
  // Probabilities ~ {0.6, 0.3, 0.1 spread}: with top_p 0.5 only the top token survives.
  std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.05f), std::log(0.05f)};
  Rng rng(1);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(sample_top_p(l, 1.0f, 0.5f, {}, rng), 0);
  // top_p 0.85: cumulative ascending 0.05, 0.1 (<= 0.15 dropped), 0.4 kept: tokens 0 and 1.
  std::map<int32_t, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[sample_top_p(l, 1.0f, 0.85f, {}, rng)];
  EXPECT_EQ(seen.count(2), 0u);
  EXPECT_EQ(seen.count(3), 0u);
  // Renormalized: 0.6 / 0.9 = 2/3 for token 0.
  EXPECT_NEAR(seen[0] / 2000.0, 2.0 / 3.0, 0.04);
}

TEST(TextSampling, TemperatureSharpensAndMaskExcludes) {
  std::vector<float> l = {0.0f, 1.0f};
  Rng rng(3);
  int hot = 0, cold = 0;
  for (int i = 0; i < 4000; ++i) {
    hot += sample_top_p(l, 1.0f, 1.0f, {}, rng);
    cold += sample_top_p(l, 0.25f, 1.0f, {}, rng);
  }
  // p(1) = 1/(1+e^-1) = 0.731 at T = 1, 1/(1+e^-4) = 0.982 at T = 0.25.
  EXPECT_NEAR(hot / 4000.0, 0.731, 0.03);
  EXPECT_NEAR(cold / 4000.0, 0.982, 0.01);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_top_p(l, 1.0f, 1.0f, LogitsMask{1, 2}, rng), 0);
  EXPECT_EQ(sample_top_p(l, 1.0f, 1.0f, LogitsMask{0, 2}, rng), -1);
}

TEST(TextSampling, SameSeedSameDraws) {
  std::vector<float> l(1000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(static_cast<float>(i)) * 3.0f;
  Rng a(42), b(42);
  SamplingParams p;
  p.greedy = false;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(select_token(l, p, {}, a), select_token(l, p, {}, b));
}

TEST(TextPrompt, AlpamayoStructureAndLength) {
  AlpamayoConfig c;
  c.vlm.text.vocab_size = 155697;
  std::vector<int32_t> hist(48, 154669 + 500);
  const std::vector<int64_t> per_image = {6, 6};
  auto p = alpamayo_prompt(5, 200, per_image, hist, c);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->ids.size(), 200u);
  EXPECT_EQ(p->ids.back(), kCotStart);
  EXPECT_EQ(p->ids.front(), kImStart);
  ASSERT_EQ(p->image_rows.size(), 12u);
  for (int32_t r : p->image_rows) EXPECT_EQ(p->ids[static_cast<size_t>(r)], 151655);
  // Image pads come in runs framed by vision start/end.
  EXPECT_EQ(p->ids[static_cast<size_t>(p->image_rows[0]) - 1], 151652);
  EXPECT_EQ(p->ids[static_cast<size_t>(p->image_rows[5]) + 1], 151653);
  // History: 48 ids between its start and end markers.
  size_t hs = 0;
  while (p->ids[hs] != kTrajHistoryStart) ++hs;
  EXPECT_EQ(p->ids[hs + 49], kTrajHistoryEnd);
  EXPECT_EQ(p->ids[hs + 1], 154669 + 500);
  // Filler text is ordinary ids, seeded.
  auto again = alpamayo_prompt(5, 200, per_image, hist, c);
  auto other = alpamayo_prompt(6, 200, per_image, hist, c);
  EXPECT_EQ(p->ids, again->ids);
  EXPECT_NE(p->ids, other->ids);
  // A vocabulary without Alpamayo's added tokens cannot hold the prompt.
  c.vlm.text.vocab_size = 151936;
  EXPECT_FALSE(alpamayo_prompt(5, 200, per_image, hist, c).ok());
}

TEST(TextPrompt, RandomTextStaysBelowSpecialIds) {
  auto ids = random_text_ids(9, 5000, 155697);
  for (int32_t id : ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, kFirstSpecialId);
  }
  auto small = random_text_ids(9, 500, 100);
  for (int32_t id : small) ASSERT_LT(id, 100);
}

}  // namespace
}  // namespace ferry
