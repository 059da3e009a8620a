// Small statistics over repeated timings.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace ferry {

// The upper median: the middle value of an odd count, the upper of the two middle ones of an
// even count; 0 for none. What ferry reports for repeated runs (robust to one slow outlier, and
// always a value that was measured).
inline double upper_median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The median: the middle value of an odd count, the mean of the two middle ones of an even
// count; 0 for none. What a measured profile takes over the many samples of one cost
// (measure/profiler.cpp, plan/timeline_stats.cpp: copy times, C_EXE per group and phase, host-step
// gaps): an estimate of the typical value that feeds the planner, not a report of runs, and the
// rule the stored profiles (bench/profiles) were measured with.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
// The same, none for no values.
inline std::optional<double> median_of(std::vector<double> v) {
  if (v.empty()) return std::nullopt;
  return median(std::move(v));
}

}  // namespace ferry
