// GPT-2's byte-level alphabet: every byte has a printable stand-in character, so a vocabulary of
// byte sequences can be stored as text. Bytes that are printable Latin-1 (0x21-0x7E, 0xA1-0xAC,
// 0xAE-0xFF) stand for themselves; the other 68 take U+0100, U+0101, ... in byte order (so a
// space is 'Ġ', U+0120, and a newline 'Ċ', U+010A).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::tok {

// The code point standing for each byte.
const std::array<char32_t, 256>& byte_to_code_point();

// The byte a code point stands for, or nullopt if it stands for none.
std::optional<uint8_t> code_point_to_byte(char32_t cp);

// The byte-level text of raw bytes (each byte becomes its stand-in, UTF-8 encoded).
std::string bytes_to_byte_level(std::string_view bytes);

// The raw bytes of byte-level text; nullopt if the text is not valid UTF-8 or holds a character
// that stands for no byte.
std::optional<std::string> byte_level_to_bytes(std::string_view text);

// Appends the UTF-8 encoding of a scalar value (the caller passes a valid one).
void append_utf8(std::string& out, char32_t cp);

}  // namespace ferry::tok
