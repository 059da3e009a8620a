// The VRAM-latency curve: the planner's plan, its predicted time and the lower bound at many
// budgets, from the smallest working one to the one where every group that cannot stay on the
// host is resident (`ferry plan --sweep`; `ferry bench --sweep` measures the same budgets).
//
// A plan that fits a budget fits every larger one, so at each budget the sweep keeps the faster
// of the planner's plan and the previous budget's (`carried`): the predicted curve never rises
// with the budget, whatever the search's luck at one budget.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/weights.h"
#include "plan/lower_bound.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/predictor.h"
#include "plan/schedule.h"

namespace ferry {

struct SweepPoint {
  uint64_t weight_budget = 0;  // device bytes for weights (resident groups + slots)
  Plan plan;
  Prediction prediction;
  LowerBound bound;
  bool carried = false;  // the previous budget's plan, predicted faster than the planner's
};

// `points` budgets for weights (at least 2), evenly spaced from smallest_working_budget to the
// bytes of every group that cannot stay on the host, ascending, without repeats (fewer when
// the range is narrower than the count).
std::vector<uint64_t> sweep_weight_budgets(const Schedule& schedule, bool allow_sequential,
                                           int points);

// The plan at each budget (ascending), as described above. Fails on a budget below the smallest.
Result<std::vector<SweepPoint>> sweep_plans(const ModelWeights& weights, const Schedule& schedule,
                                            const std::vector<uint64_t>& weight_budgets,
                                            const PlannerOptions& options = {});

}  // namespace ferry
