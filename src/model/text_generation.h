// The text half of an inference: the prompt's prefill and the decode loop, driven call by call
// ("text.embed", "text.layers.N.<part>", "text.head.K") by the executor. Shared by the Qwen3 and
// the Qwen3-VL / Alpamayo runners.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "model/call_sequence.h"
#include "model/model_inputs.h"
#include "model/rope_index.h"
#include "model/sampling.h"
#include "model/text_decoder.h"

namespace ferry {

struct GenerationParams {
  int64_t gen_tokens = 1;    // tokens kept in the output
  int64_t decode_steps = 0;  // forwards after prefill (decode_steps(config, workload))
  SamplingParams sampling;
  LogitsMask mask;    // ids never selected
  uint64_t seed = 0;  // sampling stream
  // Replaces the last kept token (Alpamayo: <|traj_future_start|>, which a synthetic model would
  // not emit by itself, so that the expert sees a complete cache).
  std::optional<int32_t> final_token;
  bool keep_all_logits = false;
};

class TextGeneration {
 public:
  // `activations`: see TextDecoder::create.
  static Result<TextGeneration> create(const TextConfig& config, Backend& backend,
                                       std::vector<int32_t> prompt, RopePositions positions,
                                       const GenerationParams& params,
                                       SharedRegion* activations = nullptr);

  // Image embeddings and deepstack features, injected at prefill.
  void set_visual(VisualInjection visual) { visual_ = std::move(visual); }
  // Real inputs: the prompt of the next runs (at most as long as the one create was given; the
  // buffers stay), and generation that ends at `stop` instead of after exactly gen_tokens
  // tokens (then gen_tokens is the most, and final_token no longer applies). `on_token` sees
  // each token as it is generated.
  Status set_prompt(std::vector<int32_t> prompt, RopePositions positions);
  void set_stop(StopRule stop, std::function<void(int32_t)> on_token);
  // With a stop rule: generation has ended, the decode calls left are to be skipped.
  bool done() const { return done_; }
  // Forgets the last inference (tokens, logits, the cache's length, the sampling stream), so the
  // same buffers serve the next one; the cache bytes are zeroed at the next prefill.
  void restart();

  // Handles a text call (embedding, decoder_layer or lm_head group).
  Status run_call(Stream& stream, const Call& call, const WeightGroup& group, void* base);
  // After the LM head's last chunk: reads the logits back and picks the next token.
  Status host_step(Stream& stream, const Call& call, const WeightGroup& group);
  // Decode layers (CallHandler::replayable): their ops read the step's position from the device.
  static bool replayable(const Call& call, const WeightGroup& group) {
    return call.phase == Phase::decode && group.kind == GroupKind::decoder_layer;
  }

  const std::vector<int32_t>& prompt() const { return prompt_; }
  const RopePositions& positions() const { return positions_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int64_t decode_steps_run() const { return decode_steps_run_; }
  const std::vector<float>& prefill_logits() const { return prefill_logits_; }
  std::vector<std::vector<float>>& step_logits() { return step_logits_; }
  // FNV-1a 64 of the last step's bf16 logits.
  uint64_t last_logits_hash() const {
    return fnv1a64(logits_raw_.data(), logits_raw_.size() * sizeof(uint16_t));
  }
  uint64_t prefill_logits_hash() const { return prefill_hash_; }
  TextDecoder& decoder() { return decoder_; }
  const TextDecoder& decoder() const { return decoder_; }

 private:
  TextGeneration(TextDecoder decoder, std::vector<int32_t> prompt, RopePositions positions,
                 const GenerationParams& params)
      : decoder_(std::move(decoder)),
        prompt_(std::move(prompt)),
        positions_(std::move(positions)),
        params_(params),
        max_prompt_(static_cast<int64_t>(prompt_.size())),
        rng_(params.seed) {}
  Status begin(Stream& stream, const Call& call);
  Status finish_step(Stream& stream, const Call& call);

  TextDecoder decoder_;
  std::vector<int32_t> prompt_;
  RopePositions positions_;
  GenerationParams params_;
  int64_t max_prompt_ = 0;  // the prompt length the buffers were sized for
  std::optional<StopRule> stop_;
  std::function<void(int32_t)> on_token_;
  bool done_ = false;
  int64_t decode_steps_run_ = 0;
  Rng rng_;
  std::optional<VisualInjection> visual_;
  std::vector<int32_t> tokens_;
  std::vector<float> logits_f32_;
  std::vector<uint16_t> logits_raw_;
  std::vector<float> prefill_logits_;
  std::vector<std::vector<float>> step_logits_;
  uint64_t prefill_hash_ = 0;
};

struct InferenceResult;
// Moves what generation produced (prompt, positions, tokens, logits and their hashes) into `r`.
void take_text_results(TextGeneration& gen, InferenceResult& r);

}  // namespace ferry
