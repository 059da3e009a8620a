// Qwen3 (text-only) inferences: seeded random prompt ids, prefill, decode.
#pragma once

#include <memory>

#include "model/inference.h"

namespace ferry {

Result<std::unique_ptr<ModelRunner>> create_qwen3_runner(Backend& backend,
                                                         const ModelConfig& config,
                                                         const ModelWeights& weights,
                                                         const Workload& workload,
                                                         const InferenceOptions& options);

}  // namespace ferry
