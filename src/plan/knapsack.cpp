#include "plan/knapsack.h"

#include <algorithm>

namespace ferry {

KnapsackResult solve_knapsack(const std::vector<KnapsackItem>& items, uint64_t room, bool round_up,
                              size_t max_units) {
  const uint64_t units = std::max<uint64_t>(1, max_units);
  const uint64_t unit = std::max<uint64_t>(1, (room + units - 1) / units);
  const size_t cap = static_cast<size_t>(room / unit);
  std::vector<double> best(cap + 1, 0.0);  // best[c]: the most value within c units
  std::vector<uint8_t> took(items.size() * (cap + 1), 0);
  std::vector<size_t> weight(items.size(), cap + 1);  // cap + 1: never fits
  for (size_t i = 0; i < items.size(); ++i) {
    const uint64_t w = round_up ? (items[i].bytes + unit - 1) / unit : items[i].bytes / unit;
    if (items[i].value <= 0 || w > cap) continue;
    weight[i] = static_cast<size_t>(w);
    for (size_t c = cap + 1; c-- > weight[i];) {
      const double with = best[c - weight[i]] + items[i].value;
      if (with > best[c]) {
        best[c] = with;
        took[i * (cap + 1) + c] = 1;
      }
    }
  }
  KnapsackResult r;
  r.value = best[cap];
  size_t c = cap;
  for (size_t i = items.size(); i-- > 0;) {
    if (took[i * (cap + 1) + c]) {
      r.chosen.push_back(i);
      c -= weight[i];
    }
  }
  std::reverse(r.chosen.begin(), r.chosen.end());
  return r;
}

}  // namespace ferry
