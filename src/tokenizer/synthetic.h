// The tokenizer.json `ferry synth` writes beside synthetic weights, so a synthetic checkpoint can
// tokenize prompts and print what it generates. The layout is the real one (spec §4.4): Qwen3's 26
// added tokens from 151643 (<|im_start|> 151644, <|image_pad|> 151655, ...), for Alpamayo-R1 the
// 4000 <i*> tokens from traj_token_start_idx and its 28 specials after them
// (<|traj_future_start|> 155681); every other id below vocab_size is an ordinary byte-level BPE
// token (the 256 bytes, then merges of pairs), so every id a model can produce decodes.
#pragma once

#include <string>

#include "core/status.h"
#include "model/config.h"

namespace ferry {

// The tokenizer.json text for a model configuration; an error if the configuration's special ids
// do not sit where the Qwen layout puts them or the vocabulary is too small to hold them.
Result<std::string> synthetic_tokenizer_json(const ModelConfig& config);

// Writes DIR/tokenizer.json.
Status write_synthetic_tokenizer(const std::string& dir, const ModelConfig& config);

}  // namespace ferry
