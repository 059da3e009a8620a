// One Qwen3-VL or Alpamayo-R1 inference on synthetic inputs: seeded pixels, prompt and (Alpamayo)
// ego history; the vision tower, prefill with image embeddings and deepstack, decode, and
// (Alpamayo) the flow-matching action expert over the text KV cache, then the unicycle decode.
#pragma once

#include "model/inference.h"

namespace ferry {

Result<InferenceResult> run_vision_language(Backend& backend, const ModelConfig& config,
                                            const ModelWeights& weights, GroupProvider& provider,
                                            const Workload& workload,
                                            const InferenceOptions& options);

}  // namespace ferry
