// The parts of a loaded tokenizer (internal to src/tokenizer): filled by tokenizer_json.cpp and
// tokenizer_pipeline.cpp, used by tokenizer.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace ferry {

// One Split pre-tokenizer: the pieces the regex matches and those between them.
struct SplitStep {
  tok::Regex regex;
  bool remove_matches = false;  // behavior Removed (else Isolated: every piece is kept)
  bool invert = false;          // the pieces between matches play the matches' part
};

// The Metaspace pre-tokenizer (SentencePiece): spaces become `replacement` ("▁"), which is also
// put in front of a piece by `prepend` (always; first: only the piece that starts the text;
// never); `split` cuts before every replacement character (MergedWithNext).
struct MetaspaceStep {
  enum class Prepend { always, first, never };
  std::string replacement = "\xE2\x96\x81";
  Prepend prepend = Prepend::always;
  bool split = true;
};

// How ids become text.
// byte_level: the ByteLevel decoder (each token's characters stand for bytes).
// pieces: SentencePiece's chain as Llama-2's files write it: Replace (replacement -> " "),
//   ByteFallback (a run of <0xNN> tokens is its bytes if they are UTF-8, else one U+FFFD per
//   byte), Fuse, then Strip (up to strip_left leading `strip_char`s of the whole text).
// metaspace: the Metaspace decoder: replacement -> " ", except in the first token, where
//   replacement characters are dropped (unless prepend is never).
struct DecoderSpec {
  enum class Kind { byte_level, pieces, metaspace };
  Kind kind = Kind::byte_level;
  std::string replace_from;  // pieces: the Replace step's pattern ("" = no Replace step)
  std::string replace_to;
  bool byte_fallback = false;  // pieces: a ByteFallback step
  size_t strip_left = 0;       // pieces: Strip's start
  char strip_char = ' ';
  bool drop_first = true;  // metaspace: drop the replacement in the first token
};

// One item of a TemplateProcessing `single` template: the text's ids, or fixed special ids.
struct TemplateItem {
  bool sequence = false;
  std::vector<int32_t> ids;
};

struct Tokenizer::Impl {
  tok::Normalizer normalizer;
  std::vector<SplitStep> splits;
  bool byte_level = true;                      // the vocabulary is GPT-2 byte-level text
  std::optional<MetaspaceStep> metaspace;      // SentencePiece pre-tokenizer
  bool prefix_space = false;                   // ByteLevel add_prefix_space
  std::optional<tok::Regex> byte_level_regex;  // ByteLevel use_regex: GPT-2's pattern
  std::optional<tok::Bpe> bpe;
  std::vector<tok::AddedToken> added;
  tok::AddedMatcher raw_matcher;         // added tokens with normalized = false
  tok::AddedMatcher normalized_matcher;  // added tokens with normalized = true
  DecoderSpec decoder;
  std::vector<TemplateItem> single_template;  // the post-processor's; empty: nothing added
  bool has_template = false;

  // Per id (vocab_size entries): the text in the file ("" and !known for unused ids), the bytes
  // it decodes to, whether it is a special added token, and (ByteFallback) the byte of a
  // <0xNN> token (-1 for any other).
  std::vector<std::string> token_text;
  std::vector<std::string> decoded;
  std::vector<uint8_t> known;
  std::vector<uint8_t> special;
  std::vector<int16_t> byte_token;
  std::unordered_map<std::string, int32_t> text_to_id;  // vocabulary entries and added contents

  // Steps 3 and 4 of encoding for one stretch of normalized text; `at_start`: it begins the
  // text (Metaspace's prepend scheme "first").
  Status encode_plain(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
};

}  // namespace ferry
