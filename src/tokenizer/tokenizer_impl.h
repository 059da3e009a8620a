// The parts of a loaded tokenizer (internal to src/tokenizer): filled by tokenizer_json.cpp,
// used by tokenizer.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalize.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

// One Split pre-tokenizer: the pieces the regex matches and those between them.
struct SplitStep {
  tok::Regex regex;
  bool remove_matches = false;  // behavior Removed (else Isolated: every piece is kept)
  bool invert = false;          // the pieces between matches play the matches' part
};

struct Tokenizer::Impl {
  std::vector<tok::NormalForm> normalizer;
  std::vector<SplitStep> splits;
  bool prefix_space = false;                   // ByteLevel add_prefix_space
  std::optional<tok::Regex> byte_level_regex;  // ByteLevel use_regex: GPT-2's pattern
  std::optional<tok::Bpe> bpe;
  std::vector<tok::AddedToken> added;
  tok::AddedMatcher raw_matcher;         // added tokens with normalized = false
  tok::AddedMatcher normalized_matcher;  // added tokens with normalized = true

  // Per id (vocab_size entries): the text in the file ("" and !known for unused ids), the bytes
  // it decodes to, and whether it is a special added token.
  std::vector<std::string> token_text;
  std::vector<std::string> decoded;
  std::vector<uint8_t> known;
  std::vector<uint8_t> special;
  std::unordered_map<std::string, int32_t> text_to_id;  // vocabulary entries and added contents

  // Steps 3 and 4 of encoding for one stretch of normalized text.
  Status encode_plain(std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace ferry
