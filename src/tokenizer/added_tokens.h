// Added tokens (special or not) are found in the text before anything else touches it and become
// one id each, whatever BPE would have made of their characters. Matching is leftmost-longest
// over all contents at once; a match is then adjusted by the token's flags as tokenizers does:
// single_word drops it unless no word character touches it on either side, lstrip / rstrip take
// the whitespace before / after it into the token.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ferry::tok {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;     // skipped by decode when special tokens are skipped
  bool normalized = false;  // matched in the normalized text (else in the raw text)
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// One piece of a split text: an added token's id, or text still to tokenize (id < 0).
struct Segment {
  std::string text;
  int32_t id = -1;
};

class AddedMatcher {
 public:
  AddedMatcher() = default;
  // `patterns[i]` is what token `tokens[i]` looks like in the text it is matched in.
  AddedMatcher(const std::vector<AddedToken>& tokens, const std::vector<std::string>& patterns);

  bool empty() const { return patterns_.empty(); }

  // Appends the segments of `text`, in order: the matched tokens and the text between them
  // (empty stretches are left out).
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Found {
    size_t begin = 0;
    size_t end = 0;
    int32_t index = -1;  // into patterns_
  };
  Found find(std::string_view text, size_t from) const;

  struct Pattern {
    size_t length;
    int32_t id;
    bool lstrip, rstrip, single_word;
  };
  std::vector<Pattern> patterns_;
  // A byte trie over the patterns: edge (node << 8 | byte) -> child; terminal[node] = pattern.
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_;
  std::array<bool, 256> starts_{};
};

}  // namespace ferry::tok
