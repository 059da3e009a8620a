#include "model/ego_history.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

namespace ferry {
namespace {

EgoHistory straight_history(float speed) {
  EgoHistory h;
  for (int k = 0; k < kHistoryPoints; ++k) {
    h.xyz[static_cast<size_t>(k)] = {speed * 0.1f * static_cast<float>(k - 15), 0.0f, 0.0f};
  }
  return h;
}

// Nearest bin in float64 (ties cannot happen for the values this is used on).
int32_t reference_bin(double d, double lo, double hi) {
  double q = std::round((d - lo) / (hi - lo) * 999.0);
  if (q < 0) q = 0;
  if (q > 999) q = 999;
  return static_cast<int32_t>(q) + 154669;
}

TEST(EgoHistory, TokensTieToEvenAndClamp) {
  EgoHistory h = straight_history(10.0f);
  // These fp32 deltas make (d − lo)/(hi − lo)·999 land exactly on k + 0.5 in fp32 arithmetic
  // (found by scanning with numpy.float32): 47.5 and 17.5 round up to the even 48 and 18;
  // 48.5 rounds down to 48 (std::round would give 49).
  h.xyz[0] = {-0x1.cf4fb2p+1f, -0x1.ce494ap+1f, -0x1.34c9eep+3f};
  h.xyz[1] = {h.xyz[0][0] - 5.0f, h.xyz[0][1] + 5.0f, h.xyz[0][2] + 0.25f};  // ±5 m clamps
  const auto ids = history_tokens(h);
  EXPECT_EQ(ids[0], 154669 + 48);
  EXPECT_EQ(ids[1], 154669 + 48);
  EXPECT_EQ(ids[2], 154669 + 18);
  EXPECT_EQ(ids[3], 154669 + 0);    // Δx = −5 < −4
  EXPECT_EQ(ids[4], 154669 + 999);  // Δy = +5 > 4
  const double dz = static_cast<double>(h.xyz[1][2] - h.xyz[0][2]);
  EXPECT_EQ(ids[5], reference_bin(dz, -10, 10));
  for (int32_t id : ids) {
    EXPECT_GE(id, 154669);
    EXPECT_LE(id, 154669 + 999);
  }
}

TEST(EgoHistory, TokensOfSyntheticHistoryMatchFloat64) {
  for (uint64_t seed : {1u, 2u, 3u, 42u}) {
    const EgoHistory h = synthetic_history(seed);
    const auto ids = history_tokens(h);
    const std::array<double, 3> lo = {-4, -4, -10}, hi = {4, 4, 10};
    std::array<float, 3> prev = {0, 0, 0};
    for (size_t k = 0; k < 16; ++k) {
      for (size_t a = 0; a < 3; ++a) {
        const double d = static_cast<double>(h.xyz[k][a] - prev[a]);
        const double scaled = (d - lo[a]) / (hi[a] - lo[a]) * 999.0;
        if (std::abs(scaled - std::floor(scaled) - 0.5) < 1e-3) continue;  // near a tie
        EXPECT_EQ(ids[k * 3 + a], reference_bin(d, lo[a], hi[a])) << "k=" << k << " a=" << a;
      }
      prev = h.xyz[k];
    }
    // p0 is ~1.5 s back: at >= 5 m/s that is beyond −4 m in x, so d0x clamps to bin 0.
    EXPECT_EQ(ids[0], 154669);
  }
}

TEST(EgoHistory, SyntheticHistoryIsSmoothAndEndsAtOrigin) {
  for (uint64_t seed : {7u, 8u, 9u}) {
    const EgoHistory h = synthetic_history(seed);
    EXPECT_EQ(h.xyz[15][0], 0.0f);
    EXPECT_EQ(h.xyz[15][1], 0.0f);
    EXPECT_EQ(h.yaw[15], 0.0f);
    double first_step = 0;
    for (size_t k = 1; k < 16; ++k) {
      const double step = std::hypot(h.xyz[k][0] - h.xyz[k - 1][0], h.xyz[k][1] - h.xyz[k - 1][1]);
      EXPECT_GE(step, 0.5 - 1e-4);  // 5..15 m/s at 10 Hz
      EXPECT_LE(step, 1.5 + 1e-4);
      if (k == 1) first_step = step;
      EXPECT_NEAR(step, first_step, 1e-4);  // constant speed
    }
    EXPECT_NE(synthetic_history(seed).xyz[0][0], synthetic_history(seed + 100).xyz[0][0]);
  }
}

// The same regularized least squares, built from explicit A and D₃ in float64 and solved by
// Gaussian elimination with partial pivoting.
double reference_v0(const EgoHistory& h, double dt) {
  constexpr int n = 16;
  std::vector<double> theta(n);
  theta[0] = h.yaw[0];
  for (int t = 1; t < n; ++t) {
    const double d = static_cast<double>(h.yaw[t]) - h.yaw[t - 1];
    theta[t] = theta[t - 1] + std::atan2(std::sin(d), std::cos(d));
  }
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  for (int t = 0; t + 1 < n; ++t) {
    std::vector<double> rx(n, 0.0), ry(n, 0.0);
    rx[t] = std::cos(theta[t]);
    rx[t + 1] = std::cos(theta[t + 1]);
    ry[t] = std::sin(theta[t]);
    ry[t + 1] = std::sin(theta[t + 1]);
    a.push_back(rx);
    b.push_back(2.0 * (static_cast<double>(h.xyz[t + 1][0]) - h.xyz[t][0]) / dt);
    a.push_back(ry);
    b.push_back(2.0 * (static_cast<double>(h.xyz[t + 1][1]) - h.xyz[t][1]) / dt);
  }
  std::vector<std::vector<double>> m(n, std::vector<double>(n + 1, 0.0));
  for (size_t r = 0; r < a.size(); ++r) {
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) m[i][j] += a[r][i] * a[r][j];
      m[i][n] += a[r][i] * b[r];
    }
  }
  const double lambda = 1e-6 / std::pow(dt, 6);
  for (int r = 0; r + 3 < n; ++r) {
    const double d3[4] = {-1, 3, -3, 1};
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) m[r + i][r + j] += lambda * d3[i] * d3[j];
  }
  for (int i = 0; i < n; ++i) m[i][i] += 1e-4;
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::abs(m[r][c]) > std::abs(m[p][c])) p = r;
    std::swap(m[c], m[p]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = m[r][c] / m[c][c];
      for (int j = c; j <= n; ++j) m[r][j] -= f * m[c][j];
    }
  }
  return m[n - 1][n] / m[n - 1][n - 1];
}

TEST(EgoHistory, V0OfStraightConstantSpeedIsTheSpeed) {
  for (float speed : {0.0f, 3.0f, 10.0f, 25.0f}) {
    const float v0 = estimate_v0(straight_history(speed), 0.1);
    EXPECT_NEAR(v0, speed, 1e-3 * speed + 1e-4) << speed;
  }
}

TEST(EgoHistory, V0MatchesFloat64SolveOnCurvedHistories) {
  for (uint64_t seed : {11u, 12u, 13u, 14u}) {
    EgoHistory h = synthetic_history(seed);
    // Add some acceleration so the solution is not trivially constant.
    for (size_t k = 0; k < 16; ++k) {
      const float t = 0.1f * static_cast<float>(static_cast<int>(k) - 15);
      h.xyz[k][0] += 0.5f * t * t;
    }
    const double ref = reference_v0(h, 0.1);
    EXPECT_NEAR(estimate_v0(h, 0.1), ref, 1e-4 * std::abs(ref) + 1e-4) << seed;
  }
}

TEST(EgoHistory, UnicycleMatchesClosedFormForConstantControls) {
  const ActionSpaceConfig cfg;
  const EgoHistory h = straight_history(10.0f);
  const double v0 = estimate_v0(h, cfg.dt);
  const float a_hat = 0.7f, k_hat = 0.5f;
  std::vector<float> actions;
  for (int i = 0; i < 64; ++i) actions.insert(actions.end(), {a_hat, k_hat});
  const Trajectory traj = unicycle_decode(actions, h, cfg);
  ASSERT_EQ(traj.xyz.size(), 64u);
  ASSERT_EQ(traj.yaw.size(), 64u);

  // The fp32 denormalization, then everything in float64.
  const double a = a_hat * static_cast<float>(cfg.accel_std) + static_cast<float>(cfg.accel_mean);
  const double k =
      k_hat * static_cast<float>(cfg.curvature_std) + static_cast<float>(cfg.curvature_mean);
  const double dt = cfg.dt;
  auto speed = [&](int n) { return v0 + a * dt * n; };
  // With constant a and κ the two cumsums telescope: θ(t) = κ·s(t), s = v0·t + a·t²/2.
  auto theta = [&](int n) { return k * (v0 * dt * n + 0.5 * a * dt * dt * n * n); };
  double x = 0, y = 0;
  for (int n = 0; n < 64; ++n) {
    x += 0.5 * dt * (speed(n) * std::cos(theta(n)) + speed(n + 1) * std::cos(theta(n + 1)));
    y += 0.5 * dt * (speed(n) * std::sin(theta(n)) + speed(n + 1) * std::sin(theta(n + 1)));
    EXPECT_NEAR(traj.yaw[n], theta(n + 1), 1e-5 + 1e-5 * std::abs(theta(n + 1))) << n;
    EXPECT_NEAR(traj.xyz[n][0], x, 2e-3) << n;
    EXPECT_NEAR(traj.xyz[n][1], y, 2e-3) << n;
    EXPECT_EQ(traj.xyz[n][2], 0.0f);
    // And the exact arc (trapezoid error is O(dt²)): x = sin(κs)/κ, y = (1 − cos κs)/κ.
    const double s = v0 * dt * (n + 1) + 0.5 * a * dt * dt * (n + 1) * (n + 1);
    EXPECT_NEAR(traj.xyz[n][0], std::sin(k * s) / k, 0.05) << n;
    EXPECT_NEAR(traj.xyz[n][1], (1 - std::cos(k * s)) / k, 0.05) << n;
  }
}

}  // namespace
}  // namespace ferry
