#include "model/text_generation.h"

#include <algorithm>
#include <string>

#include "core/bf16.h"
#include "core/finite.h"

#include "model/inference.h"

namespace ferry {

Result<TextGeneration> TextGeneration::create(const TextConfig& config, Backend& backend,
                                              std::vector<int32_t> prompt, RopePositions positions,
                                              const GenerationParams& params,
                                              SharedRegion* activations) {
  if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "generation: empty prompt");
  if (positions.pos.size() != prompt.size() * 3) {
    return make_error(ErrorCode::internal, "generation: positions do not match the prompt");
  }
  if (params.gen_tokens < 1 || params.decode_steps < params.gen_tokens - 1) {
    return make_error(ErrorCode::invalid_argument, "generation: too few decode steps");
  }
  const auto s = static_cast<int64_t>(prompt.size());
  FERRY_ASSIGN_OR_RETURN(
      TextDecoder d, TextDecoder::create(config, backend, s, s + params.decode_steps, activations));
  return TextGeneration(std::move(d), std::move(prompt), std::move(positions), params);
}

Status TextGeneration::set_prompt(std::vector<int32_t> prompt, RopePositions positions) {
  if (prompt.empty()) return make_error(ErrorCode::invalid_argument, "generation: empty prompt");
  if (static_cast<int64_t>(prompt.size()) > max_prompt_) {
    return make_error(ErrorCode::invalid_argument, "prompt: " + std::to_string(prompt.size()) +
                                                       " tokens, but this session holds at most " +
                                                       std::to_string(max_prompt_));
  }
  if (positions.pos.size() != prompt.size() * 3) {
    return make_error(ErrorCode::internal, "generation: positions do not match the prompt");
  }
  const int64_t vocab = decoder_.config().vocab_size;
  for (int32_t id : prompt) {
    if (id < 0 || id >= vocab) {
      return make_error(ErrorCode::invalid_argument, "prompt: token id " + std::to_string(id) +
                                                         " is outside the model's vocabulary (" +
                                                         std::to_string(vocab) + ")");
    }
  }
  prompt_ = std::move(prompt);
  positions_ = std::move(positions);
  return {};
}

void TextGeneration::set_stop(StopRule stop, std::function<void(int32_t)> on_token) {
  stop_ = std::move(stop);
  on_token_ = std::move(on_token);
}

void TextGeneration::restart() {
  done_ = false;
  decode_steps_run_ = 0;
  tokens_.clear();
  prefill_logits_.clear();
  step_logits_.clear();
  logits_raw_.clear();
  prefill_hash_ = 0;
  rng_ = Rng(params_.seed);
  decoder_.cache().set_length(0);
}

Status TextGeneration::begin(Stream& stream, const Call& call) {
  if (call.phase == Phase::prefill) {
    if (decoder_.cache().length() != 0 || !tokens_.empty()) {
      return make_error(ErrorCode::internal, "generation: prefill after other steps");
    }
    decoder_.reset(stream);
    FERRY_RETURN_IF_ERROR(decoder_.begin_step(stream, prompt_, positions_.pos));
    if (visual_) FERRY_RETURN_IF_ERROR(decoder_.set_visual(stream, *visual_));
    return {};
  }
  // Decode step s feeds token s at cache row c, rotary position c + rope_delta (spec §2 step 7).
  const auto s = static_cast<size_t>(call.step);
  if (s >= tokens_.size()) {
    return make_error(ErrorCode::internal, "generation: decode step without an input token");
  }
  const int64_t row = decoder_.cache().length();
  const int32_t id = tokens_[s];
  ++decode_steps_run_;
  const std::vector<int32_t> pos = linear_positions(row + positions_.rope_delta, 1);
  return decoder_.begin_step(stream, std::span<const int32_t>(&id, 1), pos);
}

Status TextGeneration::finish_step(Stream& stream, const Call& call) {
  FERRY_RETURN_IF_ERROR(decoder_.read_logits(stream, logits_raw_));
  // Damaged weights show here first for a text model (a few µs over the vocabulary).
  if (!all_finite_bf16(logits_raw_)) {
    return nonfinite_error(call.phase == Phase::prefill
                               ? std::string("the LM logits at prefill")
                               : "the LM logits at decode step " + std::to_string(call.step));
  }
  // Float logits only where they are kept or sampled from: greedy selection reads the bf16 bits
  // (the same order as their float values), which saves a pass over the vocabulary every step.
  const bool keep = call.phase == Phase::prefill || params_.keep_all_logits;
  if (keep || !params_.sampling.greedy) {
    logits_f32_.resize(logits_raw_.size());
    for (size_t i = 0; i < logits_raw_.size(); ++i) logits_f32_[i] = bf16_to_f32(logits_raw_[i]);
  }
  // Hashing 311 KB byte by byte takes ~0.3 ms of host time while the GPU waits for the next
  // step, so only the hashes that are reported are computed: prefill's here, the last on demand.
  if (call.phase == Phase::prefill) {
    prefill_logits_ = logits_f32_;
    prefill_hash_ = fnv1a64(logits_raw_.data(), logits_raw_.size() * sizeof(uint16_t));
  } else if (params_.keep_all_logits) {
    step_logits_.push_back(logits_f32_);
  }
  // Spec §5.2: the forward that fed <|traj_future_start|> ends generation; its sample is dropped.
  if (stop_ && stop_->stop_after && call.phase == Phase::decode &&
      tokens_[static_cast<size_t>(call.step)] == *stop_->stop_after) {
    done_ = true;
    return {};
  }
  if (static_cast<int64_t>(tokens_.size()) >= params_.gen_tokens) return {};  // discarded
  int32_t next = params_.sampling.greedy
                     ? argmax_token_bf16(logits_raw_, params_.mask)
                     : select_token(logits_f32_, params_.sampling, params_.mask, rng_);
  if (next < 0) return make_error(ErrorCode::internal, "generation: every token is masked");
  if (!stop_ && params_.final_token &&
      static_cast<int64_t>(tokens_.size()) + 1 == params_.gen_tokens) {
    next = *params_.final_token;
  }
  tokens_.push_back(next);
  if (on_token_) on_token_(next);
  if (stop_) {
    // A stop token, like the last token allowed, is never fed back (as transformers' generate).
    const auto& st = stop_->stop_tokens;
    done_ = std::find(st.begin(), st.end(), next) != st.end() ||
            static_cast<int64_t>(tokens_.size()) >= params_.gen_tokens;
  }
  return {};
}

Status TextGeneration::run_call(Stream& stream, const Call& call, const WeightGroup& group,
                                void* base) {
  if (call.phase != Phase::prefill && call.phase != Phase::decode) {
    return make_error(ErrorCode::internal, "generation: not a text call");
  }
  switch (group.kind) {
    case GroupKind::embedding:
      FERRY_RETURN_IF_ERROR(begin(stream, call));
      return decoder_.run_embed(stream, group, base);
    case GroupKind::decoder_layer:
      return decoder_.run_layer(stream, group.layer, group, base);
    case GroupKind::lm_head:
      return decoder_.run_head(stream, group, base);
    default:
      return make_error(ErrorCode::internal,
                        "generation: group " + group.name + " is not a text group");
  }
}

Status TextGeneration::host_step(Stream& stream, const Call& call, const WeightGroup& group) {
  if (group.kind != GroupKind::lm_head) return {};
  const WeightSpec* spec = group.find("lm_head");
  if (spec == nullptr || spec->shape.empty()) {
    return make_error(ErrorCode::internal, "generation: " + group.name + " has no lm_head");
  }
  // Only the chunk that ends the vocabulary completes the logits.
  if (spec->source_row0 + spec->shape[0] != decoder_.config().vocab_size) return {};
  return finish_step(stream, call);
}

void take_text_results(TextGeneration& gen, InferenceResult& r) {
  r.prompt = gen.prompt();
  r.positions = gen.positions().pos;
  r.rope_delta = gen.positions().rope_delta;
  r.tokens = gen.tokens();
  r.decode_steps = gen.decode_steps_run();
  r.prefill_logits = gen.prefill_logits();
  r.step_logits = std::move(gen.step_logits());
  r.logits_hash = gen.last_logits_hash();
  r.prefill_logits_hash = gen.prefill_logits_hash();
}

}  // namespace ferry
