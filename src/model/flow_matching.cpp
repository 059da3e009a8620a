#include "model/flow_matching.h"

#include <cmath>
#include <cstddef>

#include "core/status.h"

namespace ferry {

std::vector<float> linspace_f32(float start, float end, int64_t n) {
  std::vector<float> out;
  if (n <= 0) return out;
  out.resize(static_cast<size_t>(n));
  if (n == 1) {
    out[0] = start;
    return out;
  }
  // torch's range kernel: one fp32 step, the first half counted up from start and the second
  // half counted down from end, so both endpoints are exact.
  const float step = (end - start) / static_cast<float>(n - 1);
  const int64_t halfway = n / 2;
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = i < halfway ? start + step * static_cast<float>(i)
                                              : end - step * static_cast<float>(n - 1 - i);
  }
  return out;
}

TimeGrid euler_time_grid(int64_t steps) {
  TimeGrid grid;
  if (steps <= 0) return grid;
  grid.times = linspace_f32(0.0f, 1.0f, steps + 1);
  grid.deltas.resize(static_cast<size_t>(steps));
  for (size_t i = 0; i < grid.deltas.size(); ++i) {
    grid.deltas[i] = grid.times[i + 1] - grid.times[i];
  }
  return grid;
}

void euler_step(std::vector<float>& x, const std::vector<float>& v, float delta) {
  FERRY_CHECK(x.size() == v.size(), "euler_step: x and v differ in size");
  for (size_t i = 0; i < x.size(); ++i) x[i] = x[i] + delta * v[i];
}

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in (0, 1]: 53 random bits, never zero (log below).
double uniform_open0(uint64_t& state) {
  return (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
}

}  // namespace

std::vector<float> gaussian_noise(uint64_t seed, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n > 0 ? n : 0));
  uint64_t state = seed;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (size_t i = 0; i < out.size(); i += 2) {
    // Box–Muller in double, each value rounded once to fp32.
    const double r = std::sqrt(-2.0 * std::log(uniform_open0(state)));
    const double a = kTwoPi * uniform_open0(state);
    out[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < out.size()) out[i + 1] = static_cast<float>(r * std::sin(a));
  }
  return out;
}

}  // namespace ferry
