#include "plan/forms.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "plan/predictor.h"

namespace ferry {

Result<Plan> with_streamed_compressed_if_faster(const ModelWeights& weights,
                                                const Schedule& schedule, Plan plan,
                                                uint64_t weight_budget, int64_t* evaluations) {
  const std::vector<uint64_t>& sizes = schedule.compressed_bytes;
  if (sizes.size() != weights.groups.size()) return plan;
  std::vector<std::string> names;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    const bool cached = std::any_of(plan.cached.begin(), plan.cached.end(),
                                    [&](const auto& e) { return e.group == static_cast<int>(g); });
    if (plan.placement[g] == Placement::streamed && form_of(plan, g) == Form::raw && !cached &&
        sizes[g] > 0 && sizes[g] < weights.groups[g].bytes) {
      names.push_back(weights.groups[g].name);
    }
  }
  if (names.empty()) return plan;
  FERRY_ASSIGN_OR_RETURN(const Prediction raw, predict(weights, schedule, plan));
  if (evaluations != nullptr) ++*evaluations;
  std::optional<Plan> best;
  double best_s = raw.total_s;
  for (int staging : {2, 1}) {
    FERRY_ASSIGN_OR_RETURN(Plan packed, with_compressed(plan, weights, names, sizes, staging));
    if (plan_weight_device_bytes(packed, weights, sizes) > weight_budget) continue;
    FERRY_ASSIGN_OR_RETURN(const Prediction p, predict(weights, schedule, packed));
    if (evaluations != nullptr) ++*evaluations;
    if (p.total_s < best_s) {
      best_s = p.total_s;
      best = std::move(packed);
    }
  }
  return best ? std::move(*best) : plan;
}

}  // namespace ferry
