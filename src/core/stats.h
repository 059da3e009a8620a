// Small statistics over repeated timings.
#pragma once

#include <algorithm>
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

}  // namespace ferry
