// Prompts of real inputs, as each model's chat template renders them and its processor expands
// them, tokenized with the checkpoint's tokenizer:
//
// - Qwen3 (text models): an optional system turn, the user turn, then the assistant's
//   generation prompt (apply_chat_template with add_generation_prompt=True).
// - Qwen3-VL: the same with each image as <|vision_start|><|image_pad|><|vision_end|> before the
//   user's text (images first, as a content list [image, ..., text] renders).
// - Alpamayo-R1 (spec §4.3): the fixed system and user turns of the official helper with 16
//   images and 48 <|traj_history|> placeholders, and the assistant turn continued after
//   <|cot_start|> (continue_final_message=True).
//
// Then, as Qwen3VLProcessor does, each <|image_pad|> becomes t·h·w / merge² copies for its image,
// and (Alpamayo) the 48 placeholders are overwritten in order by the ego history's ids
// (fuse_traj_tokens, spec §4.5). Special tokens are written into the text and found whole by the
// tokenizer, so the ids are what transformers' processor gives for the same messages.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "image/qwen_vl_preprocess.h"
#include "model/config.h"
#include "model/ego_history.h"
#include "model/model_inputs.h"
#include "model/prompt.h"
#include "model/workload.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

// Alpamayo-R1's system text and instruction (AR1/helper.py:create_message).
inline constexpr std::string_view kAlpamayoSystem =
    "You are a driving assistant that generates safe and accurate actions.";
inline constexpr std::string_view kAlpamayoInstruction =
    "output the chain-of-thought reasoning of the driving process, then output the future "
    "trajectory.";

struct ChatRequest {
  std::optional<std::string> system;  // no system turn when absent
  std::string user;
  // Qwen3 only: false appends the empty <think></think> block that Qwen3's template writes for
  // enable_thinking=False, so the model answers without reasoning first.
  bool thinking = true;
};

// The rendered chat texts (special tokens spelled out).
std::string qwen3_chat_text(const ChatRequest& chat);
std::string qwen3_vl_chat_text(const ChatRequest& chat, int64_t images);
std::string alpamayo_chat_text(int64_t images, int64_t history_tokens);

// Tokenizes `text` and expands its <|image_pad|> tokens (id `image_pad`): the i-th becomes
// tokens_per_image[i] copies. Their count must equal the number of images.
Result<Prompt> tokenize_and_expand(const Tokenizer& tokenizer, std::string_view text,
                                   int32_t image_pad, std::span<const int64_t> tokens_per_image);

// Overwrites the `placeholder` ids of `ids`, in order, with `history` (their counts must match).
Status fuse_history(std::vector<int32_t>& ids, int32_t placeholder,
                    std::span<const int32_t> history);

// LM tokens of each image: t·h·w / merge² of its grid in patches.
std::vector<int64_t> image_token_counts(std::span<const std::array<int64_t, 3>> grid_thw,
                                        int64_t merge);

// The whole inputs of one inference, with the stop rule of the model's generation:
// - Alpamayo-R1: `images` (16 frames, camera-major) and `history`; generation ends one forward
//   after <|traj_future_start|> (spec §5.2) or at <|im_end|> / <|endoftext|>.
// - Qwen3 / Qwen3-VL: `chat` (and for Qwen3-VL optional `images`); ends at <|im_end|> or
//   <|endoftext|>.
// The tokenizer must hold the model's special tokens at the ids the config gives them.
Result<ModelInputs> alpamayo_inputs(const Tokenizer& tokenizer, const AlpamayoConfig& config,
                                    PreprocessedImages images, const EgoHistory& history);
Result<ModelInputs> chat_inputs(const Tokenizer& tokenizer, const ModelConfig& config,
                                const ChatRequest& chat, PreprocessedImages images);

// The workload a session needs to run `inputs`: their images at their size, their prompt length,
// and up to `max_tokens` generated. validate_workload's checks apply (a prompt that leaves no
// room for max_tokens in the model's context is an error).
Result<Workload> workload_for_inputs(const ModelConfig& config, const ModelInputs& inputs,
                                     int64_t max_tokens);

}  // namespace ferry
