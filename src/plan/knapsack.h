// A 0/1 knapsack over byte sizes, for the planner (which residents fit) and the lower bound
// (the most traffic residents can avoid). Sizes are counted in units of room / max_units bytes,
// so the table stays small whatever the byte counts:
//   - round_up = true: each size rounds up, so every chosen set really fits in `room` (it may
//     miss a set that fits only to the byte);
//   - round_up = false: each size and the room round down, so every set that fits is allowed
//     and the value found is an upper bound on the best (a relaxation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry {

struct KnapsackItem {
  uint64_t bytes = 0;
  double value = 0;  // items of value <= 0 are never chosen
};

struct KnapsackResult {
  double value = 0;
  std::vector<size_t> chosen;  // indices into the items, ascending
};

KnapsackResult solve_knapsack(const std::vector<KnapsackItem>& items, uint64_t room, bool round_up,
                              size_t max_units = 4096);

}  // namespace ferry
