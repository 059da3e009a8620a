#include "model/ego_history.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "core/status.h"

namespace ferry {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double uniform01(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

constexpr float kHistLo[3] = {-4.0f, -4.0f, -10.0f};
constexpr float kHistHi[3] = {4.0f, 4.0f, 10.0f};
constexpr float kHistBinsMinusOne = 999.0f;  // 1000 bins

}  // namespace

Result<EgoHistory> ego_history_from(std::span<const double> xyz, std::span<const double> rotations,
                                    std::span<const double> yaw) {
  auto bad = [](const std::string& msg) { return make_error(ErrorCode::invalid_argument, msg); };
  constexpr size_t n = kHistoryPoints;
  if (xyz.size() != n * 3) {
    return bad("ego history: " + std::to_string(xyz.size()) + " position values, expected " +
               std::to_string(n) + " points x 3 (x, y, z)");
  }
  if (!rotations.empty() && !yaw.empty()) {
    return bad("ego history: give rotations or yaw angles, not both");
  }
  if (!rotations.empty() && rotations.size() != n * 9) {
    return bad("ego history: " + std::to_string(rotations.size()) +
               " rotation values, expected 16 3x3 matrices (144)");
  }
  if (!yaw.empty() && yaw.size() != n) {
    return bad("ego history: " + std::to_string(yaw.size()) + " yaw angles, expected 16");
  }
  auto check = [&](std::span<const double> v, size_t per_point, const char* what,
                   double limit) -> Status {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i]) || std::abs(v[i]) > limit) {
        return bad("ego history: point " + std::to_string(i / per_point) + " has " +
                   (std::isfinite(v[i]) ? "a " + std::string(what) + " beyond " +
                                              std::to_string(static_cast<int>(limit))
                                        : std::string("a non-finite ") + what) +
                   " (" + std::to_string(v[i]) + ")");
      }
    }
    return {};
  };
  FERRY_RETURN_IF_ERROR(check(xyz, 3, "position", kMaxHistoryMeters));
  FERRY_RETURN_IF_ERROR(check(rotations, 9, "rotation entry", 1e3));
  FERRY_RETURN_IF_ERROR(check(yaw, 1, "yaw angle", 1e3));
  EgoHistory h;
  for (size_t k = 0; k < n; ++k) {
    for (size_t a = 0; a < 3; ++a) h.xyz[k][a] = static_cast<float>(xyz[k * 3 + a]);
  }
  if (!rotations.empty()) {
    for (size_t k = 0; k < n; ++k) {
      h.yaw[k] = static_cast<float>(std::atan2(rotations[k * 9 + 3], rotations[k * 9 + 0]));
    }
  } else if (!yaw.empty()) {
    for (size_t k = 0; k < n; ++k) h.yaw[k] = static_cast<float>(yaw[k]);
  } else {
    // Direction of motion, newest first so a standing start borrows the later heading.
    double heading = 0.0;  // the t0 frame's own
    for (size_t k = n - 1; k-- > 0;) {
      const size_t lo = k == 0 ? 0 : k - 1;
      const double dx = xyz[(k + 1) * 3] - xyz[lo * 3];
      const double dy = xyz[(k + 1) * 3 + 1] - xyz[lo * 3 + 1];
      if (std::hypot(dx, dy) > 1e-2) heading = std::atan2(dy, dx);
      h.yaw[k] = static_cast<float>(heading);
    }
    h.yaw[n - 1] = 0.0f;
  }
  return h;
}

EgoHistory synthetic_history(uint64_t seed) {
  uint64_t state = seed;
  const double speed = 5.0 + 10.0 * uniform01(state);     // m/s
  const double yaw_rate = -0.1 + 0.2 * uniform01(state);  // rad/s: gentle
  const double dt = 0.1;
  EgoHistory h;
  for (int k = 0; k < kHistoryPoints; ++k) {
    // Constant speed on a circular arc with heading 0 at t0 = 0, sampled at t = (k − 15)·dt.
    const double t = static_cast<double>(k - (kHistoryPoints - 1)) * dt;
    const double yaw = yaw_rate * t;
    double x = speed * t;
    double y = 0.0;
    if (std::abs(yaw_rate) > 1e-9) {
      x = speed / yaw_rate * std::sin(yaw);
      y = speed / yaw_rate * (1.0 - std::cos(yaw));
    }
    h.xyz[static_cast<size_t>(k)] = {static_cast<float>(x), static_cast<float>(y), 0.0f};
    h.yaw[static_cast<size_t>(k)] = static_cast<float>(yaw);
  }
  return h;
}

std::array<int32_t, kHistoryTokens> history_tokens(const EgoHistory& history) {
  std::array<int32_t, kHistoryTokens> ids{};
  std::array<float, 3> prev = {0.0f, 0.0f, 0.0f};  // the padded origin before p0
  for (size_t k = 0; k < kHistoryPoints; ++k) {
    for (size_t a = 0; a < 3; ++a) {
      const float d = history.xyz[k][a] - prev[a];
      const float scaled = (d - kHistLo[a]) / (kHistHi[a] - kHistLo[a]) * kHistBinsMinusOne;
      // torch.round: half to even, which nearbyint gives under the default rounding mode.
      float q = std::nearbyint(scaled);
      if (!(q >= 0.0f)) q = 0.0f;  // also maps NaN to 0
      if (q > kHistBinsMinusOne) q = kHistBinsMinusOne;
      ids[k * 3 + a] = static_cast<int32_t>(q) + kHistoryTokenOffset;
    }
    prev = history.xyz[k];
  }
  return ids;
}

float estimate_v0(const EgoHistory& history, double dt) {
  constexpr int n = kHistoryPoints;
  const auto fdt = static_cast<float>(dt);
  // Headings as the reference takes them from rotation matrices (atan2, so in (−π, π]), then
  // unwrapped by summing the wrapped differences.
  std::array<float, n> theta{};
  theta[0] = std::atan2(std::sin(history.yaw[0]), std::cos(history.yaw[0]));
  for (int t = 1; t < n; ++t) {
    const float d = history.yaw[static_cast<size_t>(t)] - history.yaw[static_cast<size_t>(t - 1)];
    theta[static_cast<size_t>(t)] =
        theta[static_cast<size_t>(t - 1)] + std::atan2(std::sin(d), std::cos(d));
  }
  // Normal equations (AᵀA + λ/dt⁶·D₃ᵀD₃ + 1e-4·I) V = Aᵀb, all fp32.
  std::array<std::array<float, n>, n> m{};
  std::array<float, n> rhs{};
  for (int t = 0; t + 1 < n; ++t) {
    const auto i = static_cast<size_t>(t);
    const float c0 = std::cos(theta[i]), c1 = std::cos(theta[i + 1]);
    const float s0 = std::sin(theta[i]), s1 = std::sin(theta[i + 1]);
    const float bx = 2.0f * (history.xyz[i + 1][0] - history.xyz[i][0]) / fdt;
    const float by = 2.0f * (history.xyz[i + 1][1] - history.xyz[i][1]) / fdt;
    for (const auto& [a0, a1, b] : {std::array<float, 3>{c0, c1, bx}, {s0, s1, by}}) {
      m[i][i] += a0 * a0;
      m[i][i + 1] += a0 * a1;
      m[i + 1][i] += a1 * a0;
      m[i + 1][i + 1] += a1 * a1;
      rhs[i] += a0 * b;
      rhs[i + 1] += a1 * b;
    }
  }
  const auto reg = static_cast<float>(1e-6 / std::pow(dt, 6));
  constexpr float kD3[4] = {-1.0f, 3.0f, -3.0f, 1.0f};
  for (int r = 0; r + 3 < n; ++r) {
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 4; ++b) {
        m[static_cast<size_t>(r + a)][static_cast<size_t>(r + b)] += reg * kD3[a] * kD3[b];
      }
    }
  }
  for (size_t i = 0; i < n; ++i) m[i][i] += 1e-4f;

  // Cholesky m = L·Lᵀ in fp32, then two triangular solves.
  std::array<std::array<float, n>, n> l{};
  for (size_t j = 0; j < n; ++j) {
    float diag = m[j][j];
    for (size_t k = 0; k < j; ++k) diag -= l[j][k] * l[j][k];
    // Positive definite by construction (+1e-4·I); only non-finite input gets here.
    if (!(diag > 0.0f)) return std::numeric_limits<float>::quiet_NaN();
    l[j][j] = std::sqrt(diag);
    for (size_t i = j + 1; i < n; ++i) {
      float s = m[i][j];
      for (size_t k = 0; k < j; ++k) s -= l[i][k] * l[j][k];
      l[i][j] = s / l[j][j];
    }
  }
  std::array<float, n> z{};
  for (size_t i = 0; i < n; ++i) {
    float s = rhs[i];
    for (size_t k = 0; k < i; ++k) s -= l[i][k] * z[k];
    z[i] = s / l[i][i];
  }
  std::array<float, n> v{};
  for (size_t ii = n; ii-- > 0;) {
    float s = z[ii];
    for (size_t k = ii + 1; k < n; ++k) s -= l[k][ii] * v[k];
    v[ii] = s / l[ii][ii];
  }
  return v[n - 1];
}

Trajectory unicycle_decode(std::span<const float> actions, const EgoHistory& history,
                           const ActionSpaceConfig& config) {
  const auto n = static_cast<size_t>(config.num_waypoints);
  FERRY_CHECK(actions.size() == n * 2, "unicycle_decode: actions must be [num_waypoints, 2]");
  const auto dt = static_cast<float>(config.dt);
  const auto accel_mean = static_cast<float>(config.accel_mean);
  const auto accel_std = static_cast<float>(config.accel_std);
  const auto curv_mean = static_cast<float>(config.curvature_mean);
  const auto curv_std = static_cast<float>(config.curvature_std);

  std::vector<float> accel(n), curv(n);
  for (size_t i = 0; i < n; ++i) {
    accel[i] = actions[2 * i] * accel_std + accel_mean;
    curv[i] = actions[2 * i + 1] * curv_std + curv_mean;
  }
  // Speeds v_0..v_n: v_0 = v0, v_{i+1} = v0 + cumsum(a·dt)_i.
  const float v0 = estimate_v0(history, config.dt);
  std::vector<float> speed(n + 1);
  speed[0] = v0;
  float acc_sum = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    acc_sum += accel[i] * dt;
    speed[i + 1] = v0 + acc_sum;
  }
  // Headings θ_0..θ_n: two separate cumsums, added afterwards.
  std::vector<float> theta(n + 1);
  theta[0] = 0.0f;
  float turn_v = 0.0f, turn_a = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    turn_v += curv[i] * speed[i] * dt;
    turn_a += curv[i] * accel[i] * dt * dt / 2.0f;
    theta[i + 1] = turn_v + turn_a;
  }
  // Positions: trapezoids, again as two separate cumsums.
  Trajectory out;
  out.xyz.resize(n);
  out.yaw.resize(n);
  const float z = history.xyz[kHistoryPoints - 1][2];
  float x_a = 0.0f, x_b = 0.0f, y_a = 0.0f, y_b = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    x_a += speed[i] * std::cos(theta[i]) * dt / 2.0f;
    x_b += speed[i + 1] * std::cos(theta[i + 1]) * dt / 2.0f;
    y_a += speed[i] * std::sin(theta[i]) * dt / 2.0f;
    y_b += speed[i + 1] * std::sin(theta[i + 1]) * dt / 2.0f;
    out.xyz[i] = {x_a + x_b, y_a + y_b, z};
    out.yaw[i] = theta[i + 1];
  }
  return out;
}

}  // namespace ferry
