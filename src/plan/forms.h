// Compressed forms chosen from the times (issue 24): the planner's last step (plan/planner.h's
// make_plan, after its search and the lent cache) streams groups compressed where the predictor
// says that is faster, so forms come from measured (or modelled) C_DMA and C_DEC, not a flag.
// A first step: resident compressed placements (VRAM saved against a decode per use) are not yet
// moves of the planner's search.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "model/weights.h"
#include "plan/plan.h"
#include "plan/schedule.h"

namespace ferry {

// `plan` with every raw streamed group that has a smaller compressed form (Schedule::
// compressed_bytes) and no lent cache entry streamed compressed, through 2 staging buffers or 1,
// where that fits `weight_budget` (plan_weight_device_bytes) and the predictor says it is faster
// (less link time, a decode per call); else `plan` itself. `evaluations`, if given, counts the
// predictions.
Result<Plan> with_streamed_compressed_if_faster(const ModelWeights& weights,
                                                const Schedule& schedule, Plan plan,
                                                uint64_t weight_budget,
                                                int64_t* evaluations = nullptr);

}  // namespace ferry
