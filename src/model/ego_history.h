// Ego-motion history and the trajectory decode of Alpamayo-R1 (spec §4.5, §6.5): all host math.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace ferry {

inline constexpr int kHistoryPoints = 16;               // 1.5 s at 10 Hz, the last point at t0
inline constexpr int kHistoryTokens = 48;               // 16 deltas × (x, y, z)
inline constexpr int32_t kHistoryTokenOffset = 154669;  // 151669 + 3000 future bins (§4.5)

// Positions and yaw in the t0 ego frame; xyz[15] is the origin and yaw[15] is 0.
struct EgoHistory {
  std::array<std::array<float, 3>, kHistoryPoints> xyz{};
  std::array<float, kHistoryPoints> yaw{};
};

// A history from user data: `xyz` the 16 positions (x, y, z) in the t0 ego frame, oldest first,
// 48 values; headings from `rotations` (16 row-major 3x3 matrices, yaw = atan2(R10, R00) as the
// reference takes it) or `yaw` (16 angles), at most one of the two. With neither, each heading is
// the direction of motion around its point (central differences; 0 at t0, whose frame this is;
// the previous heading where the vehicle stands still). Values that are not finite, or positions
// farther than kMaxHistoryMeters, are errors naming the point.
inline constexpr double kMaxHistoryMeters = 1000.0;
Result<EgoHistory> ego_history_from(std::span<const double> xyz, std::span<const double> rotations,
                                    std::span<const double> yaw);

// A plausible smooth 1.5 s history ending at the origin: constant speed in [5, 15] m/s with a
// gentle constant yaw rate, both drawn from the seed.
EgoHistory synthetic_history(uint64_t seed);

// The 48 history token ids (§4.5): deltas from a padded origin, quantized per axis into 1000
// bins over (±4, ±4, ±10), round half to even, clamped to [0, 999], plus kHistoryTokenOffset.
std::array<int32_t, kHistoryTokens> history_tokens(const EgoHistory& history);

// The speed at t0 (§6.5): regularized least squares over the history, fp32 Cholesky.
float estimate_v0(const EgoHistory& history, double dt);

struct Trajectory {
  std::vector<std::array<float, 3>> xyz;  // [num_waypoints] in the t0 ego frame
  std::vector<float> yaw;                 // [num_waypoints] heading θ_{n+1}
};

// Unicycle integration of normalized (accel, curvature) actions [num_waypoints·2] (§6.5).
Trajectory unicycle_decode(std::span<const float> actions, const EgoHistory& history,
                           const ActionSpaceConfig& config);

}  // namespace ferry
