// Bounds no plan can beat, for a budget of device bytes for weights (resident groups + slots).
//
// Time: T_lb = max(compute, link) where
//   compute = inputs + Σ C_EXE over the calls + Σ host steps: the all-resident time, with every
//             host launch assumed hidden (no plan computes less or skips a host step);
//   link    = inputs + min_link_bytes / link peak: no plan moves fewer bytes, and the link moves
//             them no faster than its measured peak;
//   inputs  = Schedule::inputs_s, the inputs' upload, which has the compute stream and the link
//             to itself before the first call and the first copy.
// min_link_bytes is a relaxation of the real problem, so it never exceeds what the best plan
// moves:
//   - If every group that may not stay on the host fits, nothing has to cross: 0.
//   - Otherwise some group streams. Any plan has a largest streamed group, of some size t among
//     the groups' sizes; every larger group is resident, and at least one slot (two without
//     sequential mode) holds t bytes. For each t, residents among the groups of at most t bytes
//     are chosen by a 0/1 knapsack that maximizes the traffic they avoid (bytes × calls) within
//     budget - (larger groups) - slots × t, with sizes rounded down and the room rounded down to
//     a unit of room/4096 (rounding sizes down only lets more fit). The bound is the least
//     traffic over t.
//   - A group the planner may map (Schedule::map_allowed) is never forced resident: mapped, it
//     needs no room and moves its bytes at each call, so it is a knapsack item at every t, and
//     t = 0 (nothing streamed) is tried as well; its calls count min(C_EXE, C_EXE mapped) in the
//     compute term. The smallest working budget does not count on map (the planner maps only
//     above it).
//   It ignores that pipelining wants two slots when sequential mode is allowed, and that the
//   link may idle (copy waits for a free slot), which only add.
//   - A lent cache of L bytes (plan/lent_cache.h) can spare more: every entry read in a step of
//     the lent window was filled in an earlier step, so all of them are in the region at the
//     step's first hit, and the bytes a step reads from it are at most L. The traffic spared is
//     therefore at most the sum over the window's steps of min(L, bytes of that step's calls
//     to groups called in an earlier window step), which is subtracted.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "model/weights.h"
#include "plan/plan.h"
#include "plan/schedule.h"

namespace ferry {

struct LowerBound {
  double compute_s = 0;         // inputs + Σ C_EXE + Σ host steps
  uint64_t min_link_bytes = 0;  // the fewest bytes any plan in the budget moves
  double link_s = 0;            // inputs + min_link_bytes / link peak
  double total_s = 0;           // max(compute_s, link_s)
};

// The smallest budget for weights in which some plan works: min over t of (every group larger
// than t resident) + slots × t rounded up to kGroupAlignment, t ranging over group sizes; the
// slots are 1 (sequential mode) when `allow_sequential`, else 2. Groups that may stay on the
// host need nothing.
uint64_t smallest_working_budget(const Schedule& schedule, bool allow_sequential);

// A plan that fits smallest_working_budget: the groups larger than the best t resident, the
// rest streamed through one slot (sequential mode, when allowed) or two, groups that may stay on
// the host there. What a budget error shows as the smallest working configuration.
Plan smallest_working_plan(const ModelWeights& weights, const Schedule& schedule,
                           bool allow_sequential);

// Fails (out_of_memory, naming the smallest working budget) when no plan fits the budget.
// `lent_bytes`: the runner's region a lent cache may use (0: none).
Result<LowerBound> latency_lower_bound(const Schedule& schedule, uint64_t weight_budget,
                                       bool allow_sequential = true, uint64_t lent_bytes = 0);

// The most link bytes a lent cache of `lent_bytes` can spare one inference (see above).
uint64_t lent_cache_savings_bound(const Schedule& schedule, uint64_t lent_bytes);

}  // namespace ferry
