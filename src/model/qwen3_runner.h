// One Qwen3 (text-only) inference: seeded random prompt ids, prefill, decode.
#pragma once

#include "model/inference.h"

namespace ferry {

Result<InferenceResult> run_qwen3(Backend& backend, const ModelConfig& config,
                                  const ModelWeights& weights, GroupProvider& provider,
                                  const Workload& workload, const InferenceOptions& options);

}  // namespace ferry
