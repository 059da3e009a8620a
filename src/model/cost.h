// The work of one call: FLOPs and the fewest device bytes it must move. Per call, the floor is
// max(FLOPs / peak, bytes / bandwidth); a stage's floor is the sum over its calls. `ferry bench`
// prints each stage against it, and the planner's predictor will start from the same numbers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/call_sequence.h"
#include "model/config.h"
#include "model/weights.h"
#include "model/workload.h"

namespace ferry {

struct CallCost {
  double flops = 0;         // matrix products and attention (2 per multiply-add)
  double weight_bytes = 0;  // weight bytes the call must read (an embedding: only its rows)
  double other_bytes = 0;   // KV cache reads and writes, activations in and out

  double bytes() const { return weight_bytes + other_bytes; }
  // max(flops / peak, bytes / bandwidth), seconds; peak in FLOP/s, bandwidth in B/s.
  double floor_seconds(double peak_flops, double bandwidth) const;
};

// What the costs depend on beyond the config: the actual prompt, as built for the workload.
struct CostContext {
  int64_t prompt_tokens = 0;      // S at prefill
  int64_t image_patches = 0;      // Σ (h/16)(w/16) over the images
  int64_t patches_per_image = 0;  // attention runs within each image
  int64_t expert_keys = 0;        // prompt-cache rows the expert attends (offset)
};

CostContext cost_context(const ModelConfig& config, const Workload& w, int64_t prompt_tokens,
                         int64_t expert_keys);

// One entry per call, in order.
std::vector<CallCost> call_costs(const ModelConfig& config, const ModelWeights& weights,
                                 std::span<const Call> calls, const CostContext& ctx);

}  // namespace ferry
