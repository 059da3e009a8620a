// Test helper: the plan a session would choose for `options`, with streamed groups kept in the
// runner's idle activations (the lent cache, plan/lent_cache.h) in 1/`divisor` of the region the
// runner lends, as a plan file would give it; and session options that run exactly that plan.
#pragma once

#include "backend/cpu/cpu_backend.h"
#include "exec/session_plan.h"
#include "plan/lent_cache.h"

namespace ferry::testing {

inline Result<Plan> lent_cache_plan(const ModelConfig& config, const ModelWeights& weights,
                                    const Checkpoint& checkpoint, const Workload& workload,
                                    const SessionOptions& options, uint64_t divisor = 1) {
  auto backend = create_cpu_backend();
  FERRY_ASSIGN_OR_RETURN(PlanningContext ctx, planning_context_now(*backend, config, weights,
                                                                   checkpoint, workload, options));
  if (ctx.lent_bytes == 0) {
    return make_error(ErrorCode::internal, "the runner lends no region for this workload");
  }
  FERRY_ASSIGN_OR_RETURN(SessionPlan sp, choose_plan(ctx, weights, options, options.vram));
  Plan p = with_lent_cache(sp.plan, ctx.calls, ctx.schedule.bytes, ctx.schedule.dma_s,
                           ctx.lent_bytes / divisor);
  if (p.cached.empty()) return make_error(ErrorCode::internal, "nothing to cache");
  return p;
}

// `options` with `plan` as its plan file (the flags that chose it cleared).
inline SessionOptions running(SessionOptions options, Plan plan) {
  options.plan.resident.reset();
  options.plan.resident_count.reset();
  options.plan.plan = std::move(plan);
  return options;
}

}  // namespace ferry::testing
