// Synthetic prompts: the real structure and special ids of each model's chat prompt, with the
// ordinary text replaced by seeded random ids (ferry has no tokenizer), sized so the total length
// is the workload's prompt_tokens whenever the fixed parts leave room.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/workload.h"

namespace ferry {

// Qwen chat-template ids (Qwen2 byte-level BPE vocabulary, shared by Qwen3 and Qwen3-VL).
inline constexpr int32_t kImStart = 151644;         // <|im_start|>
inline constexpr int32_t kImEnd = 151645;           // <|im_end|>
inline constexpr int32_t kFirstSpecialId = 151643;  // <|endoftext|>: ordinary ids lie below
inline constexpr int32_t kTokSystem = 8948;         // "system"
inline constexpr int32_t kTokUser = 872;            // "user"
inline constexpr int32_t kTokAssistant = 77091;     // "assistant"
inline constexpr int32_t kTokNewline = 198;         // "\n"
// Alpamayo-R1 added tokens (spec §4.4).
inline constexpr int32_t kTrajHistoryStart = 155674;
inline constexpr int32_t kTrajHistoryEnd = 155676;
inline constexpr int32_t kCotStart = 155677;

struct Prompt {
  std::vector<int32_t> ids;
  std::vector<int32_t> image_rows;  // positions of the <|image_pad|> tokens, in order
};

// The shortest prompt the model's builder below makes for this workload: its fixed parts (chat
// template, image spans, ego history) plus one filler token. A shorter prompt_tokens is
// lengthened to this; the CLI refuses it instead.
int64_t min_prompt_tokens(const ModelConfig& config, const Workload& w);

// `length` seeded random ordinary ids in [0, min(vocab, 151643)).
std::vector<int32_t> random_text_ids(uint64_t seed, int64_t length, int64_t vocab);

// Qwen3-VL: "<|im_start|>user\n" {<|vision_start|> <|image_pad|>×n_i <|vision_end|>} filler
// "<|im_end|>\n<|im_start|>assistant\n".
Result<Prompt> qwen3_vl_prompt(uint64_t seed, int64_t target_tokens,
                               std::span<const int64_t> tokens_per_image,
                               const Qwen3VLConfig& config);

// Alpamayo-R1 (spec §4.3): system turn, user turn with the images, the 48 history ids between
// <|traj_history_start|> and <|traj_history_end|>, the instruction (filler), and the assistant
// turn ending with <|cot_start|>.
Result<Prompt> alpamayo_prompt(uint64_t seed, int64_t target_tokens,
                               std::span<const int64_t> tokens_per_image,
                               std::span<const int32_t> history_ids, const AlpamayoConfig& config);

}  // namespace ferry
