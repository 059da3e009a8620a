#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace ferry::tok {

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
};

void Regex::CodeDeleter::operator()(Code* c) const {
  if (c != nullptr) pcre2_code_free(c->code);
  delete c;
}

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof buf);
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<char*>(buf));
}

struct MatchData {
  explicit MatchData(const pcre2_code* c) : md(pcre2_match_data_create_from_pattern(c, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};

}  // namespace

Result<Regex> Regex::compile(std::string_view pattern, std::string_view label, bool literal) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL allows UTF but not the options that only shape pattern syntax.
  const uint32_t options =
      literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &err, &offset, nullptr);
  if (code == nullptr) {
    return make_error(ErrorCode::format, std::string(label) + ": " + pcre2_message(err) +
                                             " at offset " + std::to_string(offset));
  }
  Regex r;
  r.code_.reset(new Code{code, pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0});
  r.pattern_ = std::string(pattern);
  r.label_ = std::string(label);
  return r;
}

Result<std::vector<Span>> Regex::find_all(std::string_view text) const {
  std::vector<Span> out;
  MatchData data(code_->code);
  if (data.md == nullptr) return make_error(ErrorCode::out_of_memory, label_ + ": no match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    // The text was checked as UTF-8 by the caller; the JIT's stack may still run out on a long
    // backtracking match, and the interpreter (with its own limits) takes over then.
    int rc =
        pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       data.md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return make_error(ErrorCode::invalid_argument, label_ + ": " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.push_back({b, e});
      pos = e;
      continue;
    }
    // Empty match: step over one whole character.
    if (b >= text.size()) break;
    pos = b + 1;
    while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
  }
  return out;
}

bool Regex::matches_whole(std::string_view text) const {
  MatchData data(code_->code);
  if (data.md == nullptr) return false;
  const int rc =
      pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                  PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_NO_UTF_CHECK, data.md, nullptr);
  return rc >= 0;
}

std::string onig_compatible_pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char next = pattern[++i];
    if (next == 'Q') {  // \Q...\E quotes: copied as they are
      const size_t end = pattern.find("\\E", i + 1);
      const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
      out += '\\';
      out.append(pattern.substr(i, stop - i));
      i = stop - 1;
    } else if (next == 's') {
      out += "\\p{White_Space}";
    } else if (next == 'S') {
      out += "\\P{White_Space}";
    } else {
      out += '\\';
      out += next;
    }
  }
  return out;
}

}  // namespace ferry::tok
