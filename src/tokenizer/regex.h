// PCRE2 behind a narrow interface: UTF-8 patterns with Unicode properties (UTF + UCP), compiled
// once (JIT when the platform has it), matched leftmost-first as Oniguruma, the engine Hugging
// Face tokenizers uses, does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ferry::tok {

struct Span {
  size_t begin = 0;
  size_t end = 0;
};

class Regex {
 public:
  // `label` starts error messages ("tokenizer.json: pre_tokenizer pattern: ..."). `literal`:
  // the pattern is a plain string to find.
  static Result<Regex> compile(std::string_view pattern, std::string_view label,
                               bool literal = false);

  // Every non-empty match in `text` (valid UTF-8), left to right, not overlapping. An empty
  // match is skipped by one character, as Oniguruma's find_iter does.
  Result<std::vector<Span>> find_all(std::string_view text) const;

  // Whether the whole of `text` matches (anchored at both ends).
  bool matches_whole(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  struct CodeDeleter {
    void operator()(Code* c) const;
  };
  std::unique_ptr<Code, CodeDeleter> code_;
  std::string pattern_;
  std::string label_;
};

// Oniguruma's \s and \S are Unicode White_Space; PCRE2's UCP \s also takes U+180E (MONGOLIAN
// VOWEL SEPARATOR, a format character since Unicode 6.3). Returns the pattern with \s and \S
// spelled as the White_Space property, so PCRE2 splits as tokenizers does; other escapes and
// \Q...\E quotes are copied unchanged.
std::string onig_compatible_pattern(std::string_view pattern);

}  // namespace ferry::tok
