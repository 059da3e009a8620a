#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace ferry::tok {
namespace {

bool stands_for_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::array<char32_t, 256> make_table() {
  std::array<char32_t, 256> t{};
  char32_t next = 0x100;
  for (unsigned b = 0; b < 256; ++b) t[b] = stands_for_itself(b) ? char32_t(b) : next++;
  return t;
}

}  // namespace

const std::array<char32_t, 256>& byte_to_code_point() {
  static const std::array<char32_t, 256> table = make_table();
  return table;
}

std::optional<uint8_t> code_point_to_byte(char32_t cp) {
  // The stand-ins are U+0021..U+00FF for themselves and U+0100..U+0143 for the rest.
  static const std::array<int16_t, 0x144> inverse = [] {
    std::array<int16_t, 0x144> inv{};
    inv.fill(-1);
    const auto& t = byte_to_code_point();
    for (unsigned b = 0; b < 256; ++b) inv[t[b]] = static_cast<int16_t>(b);
    return inv;
  }();
  if (cp >= inverse.size() || inverse[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(inverse[cp]);
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string bytes_to_byte_level(std::string_view bytes) {
  const auto& t = byte_to_code_point();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, t[static_cast<uint8_t>(c)]);
  return out;
}

std::optional<std::string> byte_level_to_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto cp = next_code_point(text, i);
    if (!cp) return std::nullopt;
    const auto b = code_point_to_byte(*cp);
    if (!b) return std::nullopt;
    out += static_cast<char>(*b);
  }
  return out;
}

}  // namespace ferry::tok
