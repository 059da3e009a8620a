// `ferry run --prompt-ids`: a prompt given as token ids, fed as they are (no chat template, no
// BOS added), for exact comparisons with other runtimes on the same ids. The argument is a comma
// list ("1,2,3"), or a file: .npy (integers, one row or a flat list) or .json (a list of ids).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::api {

// The most ids a prompt may hold (the longest sequence ferry plans for is far below this).
inline constexpr size_t kMaxPromptIds = size_t{1} << 20;

// The ids `arg` gives; each must lie in [0, vocab_size). Errors name the argument and the first
// bad entry.
Result<std::vector<int32_t>> parse_prompt_ids(const std::string& arg, int64_t vocab_size);

}  // namespace ferry::api
