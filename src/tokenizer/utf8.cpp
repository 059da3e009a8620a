#include "tokenizer/utf8.h"

#include <cstdint>

namespace ferry::tok {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

struct Lead {
  int length = 0;     // 0: not a lead byte
  uint8_t lo = 0x80;  // allowed range of the second byte
  uint8_t hi = 0xBF;
};

Lead lead(uint8_t c) {
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};  // no overlong forms
  if (c == 0xED) return {3, 0x80, 0x9F};  // no UTF-16 surrogates
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};  // no overlong forms
  if (c == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  return {};
}

// How many bytes from `pos` continue a valid sequence (1 = the lead byte alone), up to its length.
int valid_prefix(std::string_view s, size_t pos, const Lead& l) {
  int n = 1;
  while (n < l.length && pos + static_cast<size_t>(n) < s.size()) {
    const auto c = static_cast<uint8_t>(s[pos + static_cast<size_t>(n)]);
    const uint8_t lo = n == 1 ? l.lo : uint8_t{0x80};
    const uint8_t hi = n == 1 ? l.hi : uint8_t{0xBF};
    if (c < lo || c > hi) break;
    ++n;
  }
  return n;
}

}  // namespace

std::optional<char32_t> next_code_point(std::string_view text, size_t& pos) {
  if (pos >= text.size()) return std::nullopt;
  const auto c = static_cast<uint8_t>(text[pos]);
  if (c < 0x80) {
    ++pos;
    return c;
  }
  const Lead l = lead(c);
  if (l.length == 0 || valid_prefix(text, pos, l) != l.length) return std::nullopt;
  char32_t cp = c & (0x7F >> l.length);
  for (int k = 1; k < l.length; ++k) {
    cp = (cp << 6) | (static_cast<uint8_t>(text[pos + static_cast<size_t>(k)]) & 0x3F);
  }
  pos += static_cast<size_t>(l.length);
  return cp;
}

size_t append_utf8_lossy(std::string_view bytes, bool hold_tail, std::string& out) {
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<uint8_t>(bytes[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    const Lead l = lead(c);
    if (l.length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    const auto n = static_cast<size_t>(valid_prefix(bytes, i, l));
    if (n == static_cast<size_t>(l.length)) {
      out.append(bytes.substr(i, n));
    } else if (hold_tail && i + n == bytes.size()) {
      return i;  // more bytes may complete it
    } else {
      out += kReplacement;
    }
    i += n;
  }
  return i;
}

}  // namespace ferry::tok
