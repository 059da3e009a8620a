// libFuzzer target: tokenizer.json parsing and encoding. An input starting with '{' is a
// tokenizer.json: whatever loads must encode a fixed text into ids that all decode. Any other
// input is text for a small fixed tokenizer (built below, like fuzz/tokenizer_seeds/
// tokenizer.json): valid UTF-8 must encode, decode and stream-decode to the same text, and ASCII
// without added tokens must come back unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "format/strict_json.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace {

const ferry::Tokenizer& fixed() {
  static const ferry::Tokenizer t = [] {
    using json = nlohmann::json;
    json vocab = json::object();
    for (unsigned b = 0; b < 256; ++b)
      vocab[ferry::tok::bytes_to_byte_level(std::string(1, static_cast<char>(b)))] = b;
    json merges = json::array();
    int id = 256;
    for (const char* pair : {"t h", "th e", "Ġ t", "Ġ the", "i n", "e r", "Ġ a", "a a", "aa aa"}) {
      std::string p(pair);
      const size_t space = p.find(' ');
      vocab[p.substr(0, space) + p.substr(space + 1)] = id++;
      merges.push_back(p);
    }
    const json bl = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
    const json doc = {
        {"added_tokens",
         {{{"id", 300}, {"content", "<|im_end|>"}, {"special", true}, {"normalized", false}},
          {{"id", 301}, {"content", "<i0>"}, {"special", false}, {"normalized", true}}}},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern",
              {{"Regex",
                R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
             {"behavior", "Isolated"}},
            bl}}}},
        {"decoder", bl},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
    auto r = ferry::Tokenizer::from_json(doc.dump());
    if (!r.ok()) {
      std::fprintf(stderr, "fixed tokenizer: %s\n", r.error().to_string().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return t;
}

void check_round_trip(const ferry::Tokenizer& t, std::string_view text) {
  auto ids = t.encode(text);
  if (!ids.ok()) {
    if (!ferry::strict_json::find_invalid_utf8(text)) std::abort();  // only bad UTF-8 may fail
    return;
  }
  auto back = t.decode(*ids);
  if (!back.ok()) std::abort();
  ferry::StreamDecoder stream(t);
  std::string joined;
  for (int32_t id : *ids) {
    auto piece = stream.push(id);
    if (!piece.ok()) std::abort();
    joined += *piece;
  }
  joined += stream.finish();
  if (joined != *back) std::abort();
  bool plain = text.find('<') == std::string_view::npos;
  for (char c : text) plain = plain && static_cast<unsigned char>(c) < 0x80;
  if (plain && *back != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  if (!input.empty() && input[0] == '{') {
    auto t = ferry::Tokenizer::from_json(input, "fuzz");
    if (t.ok()) check_round_trip(*t, "Hello <|im_end|> wörld\n\n  12 🚗 <i0>");
    return 0;
  }
  check_round_trip(fixed(), input);
  return 0;
}
