// One inference's shape: what `ferry run` feeds the model. The call sequence, the planner and the
// runners all read it.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "model/config.h"

namespace ferry {

struct SamplingParams {
  bool greedy = true;        // argmax; otherwise temperature + top-p (spec §5.1)
  float temperature = 0.6f;  // Alpamayo's reference setting
  float top_p = 0.98f;
};

struct Workload {
  int64_t num_images = 0;    // Qwen3-VL / Alpamayo only
  int64_t image_height = 0;  // pixels after resize, a multiple of 32
  int64_t image_width = 0;
  int64_t prompt_tokens = 0;  // total prompt length target (text + image tokens)
  int64_t gen_tokens = 1;     // tokens generated (Alpamayo: the last is <|traj_future_start|>)
  int64_t flow_steps = 10;    // Alpamayo Euler steps
  uint64_t seed = 0;          // pixels, filler text ids, history, sampling, flow noise
  SamplingParams sampling;
};

// Upper limits, so that no flag can drive an unbounded allocation (each is far above any real
// workload: Alpamayo-R1 uses 16 images of 320x576, ~3000 prompt tokens, 10 flow steps).
inline constexpr int64_t kMaxImages = 256;
inline constexpr int64_t kMaxImageSide = 8192;    // pixels
inline constexpr int64_t kMaxSequence = 1 << 20;  // prompt + generated tokens
inline constexpr int64_t kMaxFlowSteps = 1000;

// The side an image must be a multiple of: patch size x spatial merge (32 for Qwen3-VL); 0 for a
// model without a vision tower.
int64_t image_size_unit(const ModelConfig& config);
// LM tokens the workload's images take (num_images x (h/unit) x (w/unit)); 0 when the image
// counts or sizes are out of range (validate_workload says why).
int64_t image_tokens(const Workload& w, const ModelConfig& config);

// Checks the workload against the model and the limits above: counts positive where needed,
// image sides multiples of image_size_unit, no images for a text-only model, prompt + generated
// tokens within the model's max_position_embeddings (when it sets one).
Status validate_workload(const Workload& w, const ModelConfig& config);

// Forward passes after prefill. Qwen3 / Qwen3-VL: gen_tokens - 1 (the last sampled token is never
// fed back). Alpamayo: gen_tokens, because generation runs one extra forward after
// <|traj_future_start|> so that its KV is in the cache the expert reads (spec §5.2).
int64_t decode_steps(const ModelConfig& config, const Workload& w);

}  // namespace ferry
