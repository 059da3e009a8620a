#include "plan/sweep.h"

#include <algorithm>
#include <string>

namespace ferry {

std::vector<uint64_t> sweep_weight_budgets(const Schedule& s, bool allow_sequential, int points) {
  const uint64_t lo = smallest_working_budget(s, allow_sequential);
  uint64_t hi = 0;
  for (size_t g = 0; g < s.group_count(); ++g) {
    if (!s.host_allowed[g]) hi += s.bytes[g];
  }
  hi = std::max(hi, lo);
  const auto n = static_cast<uint64_t>(std::max(points, 2));
  std::vector<uint64_t> out;
  for (uint64_t i = 0; i < n; ++i) {
    // lo + (hi - lo) * i / (n - 1), without overflow for any byte count below 2^63.
    const uint64_t span = hi - lo;
    const uint64_t step = span / (n - 1) * i + span % (n - 1) * i / (n - 1);
    const uint64_t b = i + 1 == n ? hi : lo + step;
    if (out.empty() || b > out.back()) out.push_back(b);
  }
  return out;
}

Result<std::vector<SweepPoint>> sweep_plans(const ModelWeights& weights, const Schedule& schedule,
                                            const std::vector<uint64_t>& weight_budgets,
                                            const PlannerOptions& options) {
  std::vector<SweepPoint> out;
  for (size_t i = 0; i < weight_budgets.size(); ++i) {
    const uint64_t b = weight_budgets[i];
    if (i > 0 && b < weight_budgets[i - 1]) {
      return make_error(ErrorCode::invalid_argument, "sweep: budgets must ascend");
    }
    FERRY_ASSIGN_OR_RETURN(PlannerResult planned, make_plan(weights, schedule, b, options));
    SweepPoint p;
    p.weight_budget = b;
    p.plan = std::move(planned.plan);
    p.prediction = planned.prediction;
    if (!out.empty() && out.back().prediction.total_s < p.prediction.total_s) {
      p.plan = out.back().plan;
      p.prediction = out.back().prediction;
      p.carried = true;
    }
    FERRY_ASSIGN_OR_RETURN(
        p.bound, latency_lower_bound(schedule, b, /*allow_sequential=*/true, options.lent_bytes));
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ferry
