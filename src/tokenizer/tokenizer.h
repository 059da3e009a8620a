// A BPE tokenizer read from a Hugging Face `tokenizer.json`: the byte-level BPE of Qwen2, Qwen3,
// Qwen3-VL, Alpamayo-R1 and Llama-3, and the SentencePiece BPE of Llama-2 (metaspace "▁", byte
// fallback): encode text to ids and decode ids to text, with the same ids as Hugging Face
// tokenizers. See docs/tokenizer.md for what a file may hold.
//
// Encoding, in order (as tokenizers does it):
//   1. added tokens whose `normalized` is false are found in the raw text and kept whole;
//   2. the rest is normalized (NFC for Qwen; Prepend and Replace for Llama-2), and added tokens
//      with `normalized` true are found;
//   3. the rest is pre-tokenized: each Split regex, then ByteLevel (optional prefix space and
//      GPT-2 regex) into pre-tokens of raw bytes, or Metaspace (spaces to "▁") into text;
//   4. BPE turns each pre-token into ids;
//   5. with add_special, the post-processor's template puts its ids around them (Llama's BOS).
// Decoding maps each id to its bytes (ByteLevel decoder; or "▁" as a space and <0xNN> tokens as
// bytes) and reads them as UTF-8, each broken sequence becoming U+FFFD. StreamDecoder does the
// same one id at a time, holding back a character whose bytes have not all arrived.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ferry {

class StreamDecoder;

class Tokenizer {
 public:
  // Parses a tokenizer.json document (hostile input: every field and size is checked). `label`
  // starts error messages.
  static Result<Tokenizer> from_json(std::string_view json,
                                     std::string_view label = "tokenizer.json");
  // Reads a tokenizer.json file.
  static Result<Tokenizer> load(const std::string& path);
  // Reads DIR/tokenizer.json.
  static Result<Tokenizer> load_dir(const std::string& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The ids of `text` (UTF-8; anything else is an error). Added tokens in the text, special or
  // not, become their ids: a prompt is written with its special tokens spelled out. With
  // `add_special`, the post-processor's template adds its ids (tokenizers' add_special_tokens).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special = false) const;

  // The ids the post-processor puts before a text (Llama's BOS), empty without a template.
  std::vector<int32_t> template_prefix() const;

  // The text of `ids`; an id that names no token is an error. With `skip_special`, added tokens
  // marked special are left out (as tokenizers' skip_special_tokens).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes one id decodes to (may be part of a UTF-8 character); error if it names no token.
  Result<std::string_view> token_bytes(int32_t id) const;

  // The id of a vocabulary entry (as written in the file, byte-level) or an added token's content.
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocabulary entry or added token content of an id.
  std::optional<std::string_view> id_to_token(int32_t id) const;

  // One more than the largest id.
  int64_t vocab_size() const;
  // Whether `id` is an added token marked special.
  bool is_special(int32_t id) const;

  struct Impl;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes ids one at a time for printing generated text as it comes: push() returns the text
// that is complete so far, holding back the bytes of a character not yet finished; finish()
// returns what is left (an unfinished character as U+FFFD). The pieces joined equal
// Tokenizer::decode of all the ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}

  Result<std::string> push(int32_t id);
  std::string finish();

 private:
  // SentencePiece decoders: `text` with the leading characters Strip removes taken off.
  std::string strip(std::string text);

  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;   // bytes of an unfinished character (SentencePiece: a byte-token run)
  size_t pushed_ = 0;     // ids decoded so far (skipped special tokens not counted)
  size_t stripped_ = 0;   // leading characters Strip has removed
  bool started_ = false;  // a character Strip keeps has been returned
};

}  // namespace ferry
