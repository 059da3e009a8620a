// Real inputs of one inference, in place of the workload's synthetic ones: the prompt's token ids
// (images expanded, ego history fused: api/chat_prompt.h builds them), the preprocessed pixels
// (image/qwen_vl_preprocess.h), Alpamayo's ego history, and how generation ends.
//
// A runner's buffers are sized once from the workload; inputs must fit in them: at most
// workload.prompt_tokens prompt ids, exactly the workload's images at its image size. Generation
// then runs up to workload.gen_tokens tokens and stops early at a stop token (the executor skips
// the decode calls left), where synthetic inputs always generate exactly gen_tokens.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/ego_history.h"

namespace ferry {

struct StopRule {
  // A sampled id in this list ends generation; it is kept but never fed back (EOS, <|im_end|>).
  std::vector<int32_t> stop_tokens;
  // Alpamayo (spec §5.2): once this id has been fed (its KV is in the cache), generation ends and
  // that step's sample is discarded: <|traj_future_start|>.
  std::optional<int32_t> stop_after;
};

struct ModelInputs {
  std::vector<int32_t> prompt;  // token ids fed at prefill
  // Vision models: pixel_values [patches, patch_values] f32 and image_grid_thw (t, h, w) in
  // patches per image, as image/qwen_vl_preprocess.h makes them.
  std::vector<float> pixel_values;
  std::vector<std::array<int64_t, 3>> image_grid_thw;
  std::optional<EgoHistory> history;  // Alpamayo: the 16 past poses
  StopRule stop;
  // Called with each token as it is generated (from the thread that runs the inference), for
  // printing text as it comes; may be empty.
  std::function<void(int32_t)> on_token;
};

}  // namespace ferry
