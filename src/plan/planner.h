// The planner: a pure function from (model weights, timed call sequence, budget for weights) to
// the plan the predictor says is fastest, found by search:
//
//   1. Everything fits: every group resident, no slots. Every group but those that may stay on
//      the host fits: those on the host, the rest resident, no slots. A budget below
//      smallest_working_budget (plan/lower_bound.h) is an error that names that budget.
//   2. Starts, one per ring size S (1 = sequential mode if allowed, 2..max_slots pipelined):
//      the fewest large groups resident that make S slots fit, then groups added in order of
//      residency benefit per byte (plan/benefit.h, paper Eq. 4); groups of equal benefit and
//      kind are taken in a spread order (0, 1/2, 1/4, 3/4, ... of their run), so that residents
//      interleave with streamed groups (the idea of Eq. 8, for any k and any module).
//   3. Local search from the best start: each round prices every move below with the
//      predictor and applies the one that lowers the predicted latency most, until none does.
//      Each round first flips every group alone (priced whether or not it fits): that gives
//      the add and drop moves, and each group's marginal worth now (seconds saved resident),
//      which orders the compound moves better than the static benefit:
//        swap     one resident streams, one streamed group becomes resident, then the room left
//                 is filled by worth (one for one, one for several, a resident moved to another
//                 position of its module); of each class of interchangeable groups (kind, layer
//                 part, size: the 36 gate|up parts of a text model are one class) only the
//                 `swaps_per_class` first by worth take part, which keeps the moves per round
//                 near (classes × that)² instead of residents × streamed;
//        evict    a streamed group becomes resident, residents of least worth (or least static
//                 benefit) stream until it fits, then the room left is filled;
//        re-choose  every resident chosen again by a knapsack over the worths (plan/knapsack.h),
//                 for every ring size and bound on the largest streamed group, and with each of
//                 the `forced_resolves` best streamed groups forced in / least residents out.
//   4. Kicks: from a local optimum, each of its `kicks` nearest non-improving neighbours is
//      searched from in turn; the first that ends faster becomes the new optimum, and kicks
//      start again from it. max_evaluations bounds the whole search.
//   5. The lent cache (plan/lent_cache.h): when the runner lends `lent_bytes` of idle region,
//      the best plan's streamed groups with repeated calls after prefill are cached there by
//      with_lent_cache, kept when the predictor says it is faster.
//   Everything is evaluated in a fixed order and ties keep the earlier candidate, so the result
//   depends on the inputs only. A round's moves are built first and then priced in parallel
//   (`threads`); the thread count changes how fast, never which plan.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/plan.h"
#include "plan/predictor.h"
#include "plan/profile.h"
#include "plan/schedule.h"

namespace ferry {

struct PlannerOptions {
  int max_slots = 4;             // pipelined ring sizes tried: 2..max_slots (at most 64)
  bool allow_sequential = true;  // one slot, no overlap: for budgets below two slots
  bool allow_pipelined = true;   // rings of 2..max_slots (false: sequential mode only)
  int kicks = 8;                 // nearest non-improving neighbours searched from
  int forced_resolves = 8;       // knapsack re-choices with one group forced in / out
  int swaps_per_class = 4;  // swap moves: of each class of groups (kind, layer part, size), the
                            // residents of least worth and streamed groups of most worth tried
  int64_t max_evaluations = 200000;  // predictor runs the search may spend
  int threads = 0;  // threads pricing each round's moves (0: the machine's, at most 8); the plan
                    // is the same for any count
  uint64_t lent_bytes = 0;  // the runner's region idle after prefill (0: no lent cache)
  // Price every plan the search tries with its lent cache where that is faster (not only the
  // final plan, step 5): the cache changes what a resident is worth (a group it holds after
  // prefill need not be resident). About 10x the planning time: with the H200 profile of
  // Alpamayo-R1-10B, 15 GiB predicted 1.0866 -> 1.0650 s; 4, 8, 12 GiB within 0.02%.
  bool lent_in_search = false;
};

struct PlannerResult {
  Plan plan;
  Prediction prediction;  // the predictor's account of `plan`
  double start_s = 0;     // the predicted latency of the best start, before improvement
  int64_t evaluations = 0;
  int64_t improvements = 0;  // moves applied
};

// Whether the search considers mapping group g (Schedule::map_allowed): only when its calls,
// mapped, take less time than copying and running them one after the other would
// (Σ C_EXE mapped < Σ (C_EXE + C_DMA)). A group dearer than that mapped could still pay by
// freeing its slot (if it is the largest streamed group), but on a link where reading in place is
// that slow the slot's bytes are worth less than the calls lose; those plans are not searched.
std::vector<uint8_t> map_search_candidates(const Schedule& schedule);

// The plan for a budget of device bytes for weights (resident groups plus slots: the budget
// left after the KV cache, activations and workspaces the caller has set aside).
Result<PlannerResult> make_plan(const ModelWeights& weights, const Schedule& schedule,
                                uint64_t weight_budget, const PlannerOptions& options = {});

// `plan` with a lent cache of at most `lent_bytes` (plan/lent_cache.h) where the predictor says
// that is faster, else `plan` itself; `evaluations`, if given, counts the prediction. What the
// planner does to its best plan, for plans chosen by hand (--resident, --resident-count).
Result<Plan> with_lent_cache_if_faster(const ModelWeights& weights, const Schedule& schedule,
                                       Plan plan, uint64_t lent_bytes,
                                       int64_t* evaluations = nullptr);

// The same from a call sequence and a profile (builds the Schedule first).
Result<PlannerResult> make_plan(const ModelWeights& weights, const std::vector<Call>& calls,
                                const Profile& profile, uint64_t weight_budget,
                                const PlannerOptions& options = {});

}  // namespace ferry
