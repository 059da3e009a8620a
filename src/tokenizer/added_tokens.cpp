#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace ferry::tok {
namespace {

// Unicode White_Space, and the word characters of tokenizers' \w (Alphabetic, marks, decimal
// digits, connector punctuation, join controls), asked of PCRE2's property tables.
const Regex& white_space() {
  static const Regex r = Regex::compile("\\p{White_Space}", "white space").value();
  return r;
}
const Regex& word_char() {
  static const Regex r =
      Regex::compile("[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", "word").value();
  return r;
}

// Start of the last character of text[0, end).
size_t char_before(std::string_view text, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  return b;
}

bool word_before(std::string_view text, size_t end) {
  if (end == 0) return false;
  const size_t b = char_before(text, end);
  return word_char().matches_whole(text.substr(b, end - b));
}

bool word_after(std::string_view text, size_t begin) {
  size_t e = begin;
  if (!next_code_point(text, e)) return false;
  return word_char().matches_whole(text.substr(begin, e - begin));
}

// Start of the run of white space that ends at `end` (not before `floor`).
size_t white_run_before(std::string_view text, size_t end, size_t floor) {
  while (end > floor) {
    const size_t b = char_before(text, end);
    if (b < floor || !white_space().matches_whole(text.substr(b, end - b))) break;
    end = b;
  }
  return end;
}

// End of the run of white space that starts at `begin`.
size_t white_run_after(std::string_view text, size_t begin) {
  while (begin < text.size()) {
    size_t e = begin;
    if (!next_code_point(text, e) || !white_space().matches_whole(text.substr(begin, e - begin)))
      break;
    begin = e;
  }
  return begin;
}

}  // namespace

AddedMatcher::AddedMatcher(const std::vector<AddedToken>& tokens,
                           const std::vector<std::string>& patterns) {
  terminal_.push_back(-1);  // the root
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& p = patterns[i];
    if (p.empty()) continue;
    uint64_t node = 0;
    for (char ch : p) {
      const uint64_t k = node << 8 | static_cast<uint8_t>(ch);
      auto it = edges_.find(k);
      if (it == edges_.end()) {
        it = edges_.emplace(k, static_cast<int32_t>(terminal_.size())).first;
        terminal_.push_back(-1);
      }
      node = static_cast<uint64_t>(it->second);
    }
    starts_[static_cast<uint8_t>(p[0])] = true;
    // Two tokens with the same pattern: the first one listed is found.
    if (terminal_[node] < 0) {
      terminal_[node] = static_cast<int32_t>(patterns_.size());
      patterns_.push_back(Pattern{p.size(), tokens[i].id, tokens[i].lstrip, tokens[i].rstrip,
                                  tokens[i].single_word});
    }
  }
}

AddedMatcher::Found AddedMatcher::find(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (!starts_[static_cast<uint8_t>(text[i])]) continue;
    uint64_t node = 0;
    int32_t best = -1;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find(node << 8 | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = static_cast<uint64_t>(it->second);
      if (terminal_[node] >= 0) best = terminal_[node];
    }
    if (best >= 0) return {i, i + patterns_[static_cast<size_t>(best)].length, best};
  }
  return {};
}

void AddedMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t done = 0;  // text before this is in `out`
  size_t from = 0;  // where the next search starts
  while (from < text.size() && !patterns_.empty()) {
    const Found f = find(text, from);
    if (f.index < 0) break;
    from = f.end;
    const Pattern& p = patterns_[static_cast<size_t>(f.index)];
    if (p.single_word && (word_before(text, f.begin) || word_after(text, f.end))) continue;
    size_t begin = f.begin, end = f.end;
    if (p.lstrip) begin = white_run_before(text, begin, done);
    if (p.rstrip) end = white_run_after(text, end);
    if (begin < done) continue;  // overlaps what an rstrip already took
    if (begin > done) out.push_back({std::string(text.substr(done, begin - done)), -1});
    out.push_back({std::string(text.substr(begin, end - begin)), p.id});
    done = end;
  }
  if (done < text.size()) out.push_back({std::string(text.substr(done)), -1});
}

}  // namespace ferry::tok
