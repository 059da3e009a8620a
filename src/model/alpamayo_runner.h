// One Qwen3-VL or Alpamayo-R1 inference on synthetic inputs (seeded pixels, prompt and, for
// Alpamayo, ego history) or on real ones (ModelRunner::set_inputs); the vision tower, prefill with
// image embeddings and deepstack, decode, and (Alpamayo) the flow-matching action expert over the
// text KV cache, then the unicycle decode.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/inference.h"

namespace ferry {

// Spec §5.3: the cache rows the action expert sees, 1 + the index of the first
// <|traj_future_start|> (`future_start`) of the generated `tokens` in prompt + tokens (the prompt
// is not searched); prompt + tokens in full when no generated token is `future_start`. Exposed for
// the unit tests.
int64_t first_future_offset(const std::vector<int32_t>& prompt, const std::vector<int32_t>& tokens,
                            int32_t future_start);

// Qwen3-VL and Alpamayo-R1 inferences (synthetic pixels, prompt and ego history from the
// workload's seed until set_inputs gives real ones).
Result<std::unique_ptr<ModelRunner>> create_vision_language_runner(Backend& backend,
                                                                   const ModelConfig& config,
                                                                   const ModelWeights& weights,
                                                                   const Workload& workload,
                                                                   const InferenceOptions& options);

}  // namespace ferry
