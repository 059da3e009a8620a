#include "plan/planner.h"

#include <algorithm>
#include <optional>

#include "plan/forms.h"
#include "plan/lent_cache.h"
#include "plan/lower_bound.h"
#include "plan/plan_search.h"

namespace ferry {
namespace {

// The plan with its lent cache (when the runner lends a region and the cache helps) and its
// streamed groups compressed (when the model has compressed forms, the staging buffers fit and
// the predictor says it is faster), priced.
Result<PlannerResult> finish(const ModelWeights& weights, const Schedule& s, Plan plan,
                             double start_s, int64_t evaluations, int64_t improvements,
                             uint64_t lent_bytes, uint64_t weight_budget) {
  PlannerResult r;
  FERRY_ASSIGN_OR_RETURN(
      r.plan, with_lent_cache_if_faster(weights, s, std::move(plan), lent_bytes, &evaluations));
  FERRY_ASSIGN_OR_RETURN(r.plan, with_streamed_compressed_if_faster(weights, s, std::move(r.plan),
                                                                    weight_budget, &evaluations));
  FERRY_ASSIGN_OR_RETURN(r.prediction, predict(weights, s, r.plan));
  r.start_s = start_s < 0 ? r.prediction.total_s : start_s;
  r.evaluations = evaluations;
  r.improvements = improvements;
  return r;
}

}  // namespace

std::vector<uint8_t> map_search_candidates(const Schedule& schedule) {
  const size_t n = schedule.group_count();
  std::vector<double> mapped(n, 0), serial(n, 0);
  for (size_t i = 0; i < schedule.calls.size(); ++i) {
    const auto g = static_cast<size_t>(schedule.calls[i].group);
    mapped[g] += schedule.exe_mapped_s[i];
    serial[g] += schedule.exe_s[i] + schedule.dma_s[g];
  }
  std::vector<uint8_t> out(n, 0);
  for (size_t g = 0; g < n; ++g) {
    out[g] = schedule.map_allowed[g] && !schedule.host_allowed[g] && mapped[g] < serial[g];
  }
  return out;
}

Result<Plan> with_lent_cache_if_faster(const ModelWeights& weights, const Schedule& schedule,
                                       Plan plan, uint64_t lent_bytes, int64_t* evaluations) {
  if (lent_bytes == 0) return plan;
  Plan cached = with_lent_cache(plan, schedule.calls, schedule.bytes, schedule.dma_s, lent_bytes);
  if (cached.cached.empty()) return plan;
  FERRY_ASSIGN_OR_RETURN(const Prediction without, predict(weights, schedule, plan));
  FERRY_ASSIGN_OR_RETURN(const Prediction with, predict(weights, schedule, cached));
  if (evaluations != nullptr) *evaluations += 2;
  return with.total_s < without.total_s ? cached : plan;
}

namespace {

// The device bytes two staging buffers of the largest compressed group take: what a plan must
// leave free for streamed compressed groups to fit beside it (0: the model has no group that
// shrinks).
uint64_t staging_reserve(const ModelWeights& weights, const Schedule& schedule) {
  if (schedule.compressed_bytes.size() != weights.groups.size()) return 0;
  uint64_t largest = 0;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    const uint64_t c = schedule.compressed_bytes[g];
    if (c > 0 && c < weights.groups[g].bytes && !schedule.host_allowed[g]) {
      largest = std::max(largest, c);
    }
  }
  return 2 * align_group_bytes(largest);
}

// The planner's search for `search_budget` (its resident groups and slots fit it), finished with
// the forms that fit `weight_budget` (the lent cache, streamed compressed groups).
Result<PlannerResult> search_plan(const ModelWeights& weights, const Schedule& schedule,
                                  uint64_t weight_budget, uint64_t final_budget,
                                  const PlannerOptions& options) {
  if (schedule.group_count() != weights.groups.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "plan: the schedule was built for another model (" +
                          std::to_string(schedule.group_count()) + " groups, not " +
                          std::to_string(weights.groups.size()) + ")");
  }
  if (options.max_slots < 2 || options.max_slots > 64) {
    return make_error(ErrorCode::invalid_argument, "plan: max_slots must be from 2 to 64");
  }
  if (!options.allow_sequential && !options.allow_pipelined) {
    return make_error(ErrorCode::invalid_argument,
                      "plan: neither sequential nor pipelined streaming is allowed");
  }
  if (weight_budget >= weights.total_bytes()) {
    return finish(weights, schedule, all_resident_plan(weights), -1, 0, 0, 0, final_budget);
  }
  const uint64_t need = smallest_working_budget(schedule, options.allow_sequential);
  if (weight_budget < need) {
    return make_error(ErrorCode::out_of_memory,
                      "plan: " + std::to_string(weight_budget) +
                          " bytes for weights fit no plan; the smallest budget that works is " +
                          std::to_string(need) + " bytes (" +
                          (options.allow_sequential ? "one slot" : "two slots") +
                          " of the largest streamed group, the larger groups resident)");
  }
  PlanSearch search(weights, schedule, weight_budget, options);
  SearchState all{std::vector<uint8_t>(weights.groups.size(), 1), 2, {}};
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    if (schedule.host_allowed[g]) all.resident[g] = 0;
  }
  if (search.fits(all)) {  // nothing crosses the link: no plan computes less
    return finish(weights, schedule, search.to_plan(all), -1, 0, 0, 0, final_budget);
  }
  std::optional<SearchState> best;
  double best_s = 0;
  for (int slots : search.ring_sizes()) {
    std::optional<SearchState> st = search.start(slots);
    if (!st) continue;
    const double t = search.cost(*st);
    if (!best || t < best_s) {
      best = std::move(st);
      best_s = t;
    }
  }
  if (!best) {
    return make_error(ErrorCode::internal, "plan: no start fits a budget above the smallest");
  }
  const double start_s = best_s;
  const int64_t improvements = search.run(*best, best_s);
  return finish(weights, schedule, search.to_plan(*best), start_s, search.evaluations(),
                improvements, options.lent_bytes, final_budget);
}

}  // namespace

Result<PlannerResult> make_plan(const ModelWeights& weights, const Schedule& schedule,
                                uint64_t weight_budget, const PlannerOptions& options) {
  FERRY_ASSIGN_OR_RETURN(PlannerResult raw,
                         search_plan(weights, schedule, weight_budget, weight_budget, options));
  // A plan that fills the budget leaves no room for staging buffers, so compressed streaming
  // would never be tried where it pays most (a full link). Search again with two staging buffers
  // set aside, and keep whichever plan the predictor says is faster.
  const uint64_t reserve = staging_reserve(weights, schedule);
  if (reserve == 0 || reserve >= weight_budget || weight_budget >= weights.total_bytes()) {
    return raw;
  }
  Result<PlannerResult> packed =
      search_plan(weights, schedule, weight_budget - reserve, weight_budget, options);
  if (!packed.ok()) return raw;  // the smaller budget fits no plan: the raw one stands
  packed->evaluations += raw.evaluations;
  raw.evaluations = packed->evaluations;
  return packed->prediction.total_s < raw.prediction.total_s ? std::move(*packed) : raw;
}

Result<PlannerResult> make_plan(const ModelWeights& weights, const std::vector<Call>& calls,
                                const Profile& profile, uint64_t weight_budget,
                                const PlannerOptions& options) {
  FERRY_ASSIGN_OR_RETURN(Schedule s, make_schedule(weights, calls, profile));
  return make_plan(weights, s, weight_budget, options);
}

}  // namespace ferry
