// UTF-8 helpers of the tokenizer: strict reading of one code point, and lossy decoding of a byte
// stream that may hold partial or broken sequences (what a byte-level vocabulary produces).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::tok {

// Reads the well-formed UTF-8 sequence at text[pos] and advances pos past it; nullopt (pos
// unchanged) if the bytes there are not one.
std::optional<char32_t> next_code_point(std::string_view text, size_t& pos);

// Appends `bytes` to `out` as text: well-formed sequences as they are, each maximal ill-formed
// subpart (the longest prefix of a sequence that could still have become well-formed, or one
// byte) as U+FFFD, the replacement Unicode recommends and Rust's from_utf8_lossy makes. With
// `hold_tail`, a prefix at the very end that more bytes could still complete is left unconsumed.
// Returns the number of bytes consumed.
size_t append_utf8_lossy(std::string_view bytes, bool hold_tail, std::string& out);

}  // namespace ferry::tok
