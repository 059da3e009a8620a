#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "model/flow_matching.h"

namespace ferry {
namespace {

TEST(ExpertFlow, LinspaceUsesTorchsTwoSidedFormula) {
  const std::vector<float> t = linspace_f32(0.0f, 1.0f, 11);
  ASSERT_EQ(t.size(), 11u);
  EXPECT_EQ(t[0], 0.0f);
  EXPECT_EQ(t[10], 1.0f);
  // Second half counts down from the end: t[9] = 1 − 0.1f, not 9·0.1f.
  EXPECT_EQ(t[9], 1.0f - 0.1f);
  EXPECT_NE(t[9], 9.0f * 0.1f);
  EXPECT_EQ(t[3], 3.0f * 0.1f);
  EXPECT_EQ(linspace_f32(2.0f, 5.0f, 1), std::vector<float>{2.0f});
  EXPECT_TRUE(linspace_f32(0.0f, 1.0f, 0).empty());
  const std::vector<float> g = linspace_f32(0.0f, 47.0f, 48);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(g[i], static_cast<float>(i));
}

TEST(ExpertFlow, EulerDeltasMatchSpecValuesBitExact) {
  // spec §7.7: the Δ_i the formula gives, printed to 9 significant digits (which identify an
  // fp32 value uniquely).
  const char* expected[10] = {"0.100000001", "0.100000001", "0.100000009", "0.099999994",
                              "0.099999994", "0.100000024", "0.099999964", "0.100000024",
                              "0.099999964", "0.100000024"};
  const TimeGrid grid = euler_time_grid(10);
  ASSERT_EQ(grid.times.size(), 11u);
  ASSERT_EQ(grid.deltas.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(grid.deltas[i], std::strtof(expected[i], nullptr)) << i;
  }
}

TEST(ExpertFlow, EulerStepIsFp32Axpy) {
  std::vector<float> x = {1.0f, -2.0f, 0.5f};
  euler_step(x, {0.25f, 4.0f, -1.0f}, 0.5f);
  EXPECT_EQ(x, (std::vector<float>{1.125f, 0.0f, 0.0f}));
}

TEST(ExpertFlow, GaussianNoiseIsSeededAndStandard) {
  const std::vector<float> a = gaussian_noise(42, 200001);
  EXPECT_EQ(a, gaussian_noise(42, 200001));
  EXPECT_NE(a, gaussian_noise(43, 200001));
  // A prefix of a longer draw is the shorter draw.
  const std::vector<float> b = gaussian_noise(42, 128);
  EXPECT_TRUE(std::equal(b.begin(), b.end(), a.begin()));
  double sum = 0, sq = 0, within1 = 0;
  for (float v : a) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += static_cast<double>(v) * v;
    within1 += std::abs(v) < 1.0f;
  }
  const double n = static_cast<double>(a.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  EXPECT_NEAR(within1 / n, 0.6827, 0.01);  // the 1σ mass of N(0, 1)
}

}  // namespace
}  // namespace ferry
