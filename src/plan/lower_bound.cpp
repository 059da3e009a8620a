#include "plan/lower_bound.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "plan/knapsack.h"
#include "plan/lent_cache.h"
#include "plan/plan.h"

namespace ferry {
namespace {

constexpr uint64_t kKnapsackUnits = 4096;

struct Smallest {
  uint64_t bytes = 0;    // resident groups + slots
  uint64_t largest = 0;  // the largest streamed group's size (0: everything resident)
};

// min over t of (groups larger than t resident) + slots × t; ties keep the larger t (fewer
// groups streamed).
Smallest smallest_of(const Schedule& s, bool allow_sequential) {
  std::vector<uint64_t> sizes;
  for (size_t g = 0; g < s.group_count(); ++g) {
    if (!s.host_allowed[g]) sizes.push_back(s.bytes[g]);
  }
  std::sort(sizes.begin(), sizes.end(), std::greater<>());
  const uint64_t slots = allow_sequential ? 1 : 2;
  Smallest best;  // t = 0: everything resident, no slots
  for (uint64_t b : sizes) best.bytes += b;
  uint64_t larger = 0;  // bytes of the groups before i, all larger than sizes[i] at a new size
  for (size_t i = 0; i < sizes.size() && sizes[i] > 0; ++i) {
    if (i == 0 || sizes[i] != sizes[i - 1]) {
      const uint64_t bytes = larger + slots * align_group_bytes(sizes[i]);
      if (bytes < best.bytes) best = {bytes, sizes[i]};
    }
    larger += sizes[i];
  }
  return best;
}

}  // namespace

uint64_t smallest_working_budget(const Schedule& s, bool allow_sequential) {
  return smallest_of(s, allow_sequential).bytes;
}

Plan smallest_working_plan(const ModelWeights& weights, const Schedule& s, bool allow_sequential) {
  const Smallest best = smallest_of(s, allow_sequential);
  Plan p;
  p.placement.assign(s.group_count(), Placement::resident);
  for (size_t g = 0; g < s.group_count(); ++g) {
    if (s.host_allowed[g]) {
      p.placement[g] = Placement::host;
    } else if (best.largest > 0 && s.bytes[g] <= best.largest) {
      p.placement[g] = Placement::streamed;
    }
  }
  p.mode = allow_sequential ? StreamMode::sequential : StreamMode::pipelined;
  const uint64_t largest = largest_streamed_group(p, weights);
  p.slots = largest == 0 ? 0 : (allow_sequential ? 1 : 2);
  p.slot_bytes = largest == 0 ? 0 : align_group_bytes(largest);
  if (largest == 0) p.mode = StreamMode::pipelined;
  return p;
}

uint64_t lent_cache_savings_bound(const Schedule& s, uint64_t lent_bytes) {
  if (lent_bytes == 0) return 0;
  const size_t window = lent_window_start(s.calls);
  std::vector<uint8_t> seen(s.group_count(), 0);  // called in an earlier step of the window
  std::vector<int> in_step;                       // groups called in the current step
  uint64_t total = 0, step_bytes = 0;
  auto close_step = [&] {
    total += std::min(lent_bytes, step_bytes);
    step_bytes = 0;
    for (int g : in_step) seen[static_cast<size_t>(g)] = 1;
    in_step.clear();
  };
  for (size_t i = window; i < s.calls.size(); ++i) {
    const Call& c = s.calls[i];
    if (i > window && (c.phase != s.calls[i - 1].phase || c.step != s.calls[i - 1].step)) {
      close_step();
    }
    const auto g = static_cast<size_t>(c.group);
    if (seen[g] && !s.host_allowed[g]) step_bytes += s.bytes[g];
    in_step.push_back(c.group);
  }
  close_step();
  return total;
}

Result<LowerBound> latency_lower_bound(const Schedule& s, uint64_t weight_budget,
                                       bool allow_sequential, uint64_t lent_bytes) {
  const uint64_t need = smallest_working_budget(s, allow_sequential);
  if (weight_budget < need) {
    return make_error(ErrorCode::out_of_memory,
                      "a budget of " + std::to_string(weight_budget) +
                          " bytes for weights fits no plan; the smallest that works is " +
                          std::to_string(need) + " bytes");
  }
  LowerBound lb;
  lb.compute_s = s.inputs_s;
  for (size_t i = 0; i < s.calls.size(); ++i) {
    const double exe = s.map_allowed[static_cast<size_t>(s.calls[i].group)]
                           ? std::min(s.exe_s[i], s.exe_mapped_s[i])
                           : s.exe_s[i];
    lb.compute_s += exe + s.host_after_s[i];
  }

  uint64_t copyable = 0;
  std::vector<uint64_t> sizes;                      // distinct sizes of the groups that can stream
  std::vector<uint64_t> value(s.group_count(), 0);  // per group: its traffic, bytes x calls
  for (size_t g = 0; g < s.group_count(); ++g) {
    if (s.host_allowed[g]) continue;
    copyable += s.bytes[g];
    if (__builtin_mul_overflow(s.bytes[g], static_cast<uint64_t>(s.calls_of[g]), &value[g]) ||
        value[g] > (uint64_t{1} << 53) / std::max<size_t>(1, s.group_count())) {
      return make_error(ErrorCode::invalid_argument,
                        "lower bound: the traffic of one inference is beyond 2^53 bytes");
    }
    if (s.bytes[g] > 0) sizes.push_back(s.bytes[g]);
  }
  if (copyable > weight_budget) {
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    const uint64_t slots = allow_sequential ? 1 : 2;
    // A group the planner may map needs no room and no slot but moves its bytes at every call,
    // like a streamed one: it is never forced resident, and t = 0 (nothing streamed, the rest
    // mapped or resident) is a case too.
    if (std::find(s.map_allowed.begin(), s.map_allowed.end(), true) != s.map_allowed.end()) {
      sizes.insert(sizes.begin(), 0);
    }
    uint64_t least = std::numeric_limits<uint64_t>::max();
    for (uint64_t t : sizes) {  // t: the largest streamed group's size
      uint64_t forced = t > 0 ? slots * align_group_bytes(t) : 0, traffic = 0;
      std::vector<KnapsackItem> items;  // value: the traffic a group avoids when resident
      for (size_t g = 0; g < s.group_count(); ++g) {
        if (s.host_allowed[g]) continue;
        if (s.bytes[g] > t && !s.map_allowed[g]) {
          forced += s.bytes[g];
        } else {
          traffic += value[g];
          if (value[g] > 0) items.push_back({s.bytes[g], static_cast<double>(value[g])});
        }
      }
      if (forced > weight_budget) continue;  // larger groups and the slot do not fit
      // Values are whole numbers below 2^53: exact in a double.
      const KnapsackResult best =
          solve_knapsack(items, weight_budget - forced, /*round_up=*/false, kKnapsackUnits);
      least = std::min(least, traffic - std::min(traffic, static_cast<uint64_t>(best.value)));
    }
    // smallest_working_budget passed, so some t fits.
    lb.min_link_bytes = least == std::numeric_limits<uint64_t>::max() ? 0 : least;
    const uint64_t saved = lent_cache_savings_bound(s, lent_bytes);
    lb.min_link_bytes -= std::min(lb.min_link_bytes, saved);
  }
  lb.link_s = s.inputs_s + static_cast<double>(lb.min_link_bytes) / s.link_bytes_per_s;
  lb.total_s = std::max(lb.compute_s, lb.link_s);
  return lb;
}

}  // namespace ferry
