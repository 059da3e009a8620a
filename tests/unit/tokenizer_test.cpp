// The tokenizer on small hand-made tokenizer.json files (BPE ranks, added tokens, normalizer,
// decode and streaming decode), hostile files, and the synthetic tokenizer of every preset.
// The comparison with Hugging Face tokenizers on the real Qwen vocabulary is
// tests/python/test_tokenizer.py.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/presets.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/synthetic.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

constexpr const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string bl(std::string_view bytes) {
  return tok::bytes_to_byte_level(bytes);
}

// A byte-level tokenizer: byte b is id b, then one token per merge (ids from 256, in order).
json tiny_doc(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (unsigned b = 0; b < 256; ++b) vocab[bl(std::string(1, static_cast<char>(b)))] = b;
  json m = json::array();
  int id = 256;
  for (const auto& [l, r] : merges) {
    vocab[bl(l + r)] = id++;
    m.push_back(bl(l) + " " + bl(r));
  }
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", json::array()},
          {"normalizer", {{"type", "NFC"}}},
          {"pre_tokenizer",
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"},
               {"pattern", {{"Regex", kQwenPattern}}},
               {"behavior", "Isolated"},
               {"invert", false}},
              byte_level}}}},
          {"post_processor", byte_level},
          {"decoder", byte_level},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", m}}}};
}

void add_token(json& doc, int id, const std::string& content, bool special, bool normalized,
               bool lstrip = false, bool rstrip = false, bool single_word = false) {
  doc["added_tokens"].push_back({{"id", id},
                                 {"content", content},
                                 {"single_word", single_word},
                                 {"lstrip", lstrip},
                                 {"rstrip", rstrip},
                                 {"normalized", normalized},
                                 {"special", special}});
}

Tokenizer load(const json& doc) {
  auto t = Tokenizer::from_json(doc.dump());
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().to_string());
  return std::move(t).value();
}

Ids encode(const Tokenizer& t, std::string_view text) {
  auto r = t.encode(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? r.value() : Ids{};
}

TEST(TokenizerBpe, LowestRankFirstLeftmostAmongEqual) {
  // "ab" (256) before "bc" (257): "abc" -> ab + c; then "abc" from (ab, c) = 258.
  auto t = load(tiny_doc({{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  EXPECT_EQ(encode(t, "abc"), (Ids{258}));
  EXPECT_EQ(encode(t, "bc"), (Ids{257}));
  EXPECT_EQ(encode(t, "xbc"), (Ids{'x', 257}));
  // Equal ranks: "aaa" merges its leftmost pair first: (aa, a).
  auto u = load(tiny_doc({{"a", "a"}}));
  EXPECT_EQ(encode(u, "aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(encode(u, "aaaa"), (Ids{256, 256}));
}

TEST(TokenizerBpe, RankOrderDecidesBetweenOverlappingPairs) {
  // "bc" ranks before "ab": "abc" -> a + bc.
  auto t = load(tiny_doc({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(encode(t, "abc"), (Ids{'a', 256}));
}

TEST(TokenizerBpe, CachedResultsEqualFreshOnes) {
  auto t = load(tiny_doc({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}}));
  const Ids first = encode(t, "hello hello hello");
  EXPECT_EQ(first, (Ids{259, ' ', 259, ' ', 259}));
  EXPECT_EQ(encode(t, "hello hello hello"), first);
  EXPECT_EQ(encode(t, "hello"), (Ids{259}));
}

TEST(TokenizerPreTokenize, RegexPiecesAreMergedSeparately) {
  // " a" would merge across the space, but only inside one pre-token: "x a" is "x", " a".
  auto t = load(tiny_doc({{" ", "a"}, {"x", " "}}));
  EXPECT_EQ(encode(t, "x a"), (Ids{'x', 256}));
  // Digits are pre-tokens of one digit each: "12" never merges.
  auto d = load(tiny_doc({{"1", "2"}}));
  EXPECT_EQ(encode(d, "12"), (Ids{'1', '2'}));
}

TEST(TokenizerAdded, SpecialTokensAreAtomicAndWinOverBpe) {
  json doc = tiny_doc({{"<", "|"}});
  add_token(doc, 300, "<|im_start|>", true, false);
  add_token(doc, 301, "<|im_start|>x", true, false);  // longest match wins
  add_token(doc, 302, "<think>", false, false);
  auto t = load(doc);
  EXPECT_EQ(encode(t, "a<|im_start|>b"), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(encode(t, "<|im_start|>x<think>"), (Ids{301, 302}));
  EXPECT_EQ(encode(t, "<|im"), (Ids{256, 'i', 'm'}));
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 300);
  EXPECT_EQ(t.id_to_token(302), "<think>");
  EXPECT_TRUE(t.is_special(300));
  EXPECT_FALSE(t.is_special(302));
  EXPECT_EQ(t.vocab_size(), 303);
  EXPECT_EQ(t.decode(Ids{'a', 300, 302}).value(), "a<|im_start|><think>");
  EXPECT_EQ(t.decode(Ids{'a', 300, 302}, /*skip_special=*/true).value(), "a<think>");
}

TEST(TokenizerAdded, NormalizedTokensMatchAfterNfc) {
  json doc = tiny_doc({});
  // "é" precomposed (U+00E9); the text spells it decomposed (e + U+0301): NFC joins them.
  add_token(doc, 300, "caf\xC3\xA9", false, /*normalized=*/true);
  add_token(doc, 301, "tr\xC3\xA9s", false, /*normalized=*/false);
  auto t = load(doc);
  EXPECT_EQ(encode(t, "cafe\xCC\x81"), (Ids{300}));
  // A raw-matched token must appear as it is: the decomposed spelling is ordinary text.
  EXPECT_EQ(encode(t, "tr\xC3\xA9s"), (Ids{301}));
  EXPECT_NE(encode(t, "tre\xCC\x81s"), (Ids{301}));
}

TEST(TokenizerAdded, StripAndSingleWordFlags) {
  json doc = tiny_doc({});
  add_token(doc, 300, "<m>", true, false, /*lstrip=*/true, /*rstrip=*/true);
  add_token(doc, 301, "cat", false, false, false, false, /*single_word=*/true);
  auto t = load(doc);
  EXPECT_EQ(encode(t, "a  <m>  b"), (Ids{'a', 300, 'b'}));
  EXPECT_EQ(encode(t, "a cat"), (Ids{'a', ' ', 301}));
  EXPECT_EQ(encode(t, "cats"), (Ids{'c', 'a', 't', 's'}));
}

TEST(TokenizerNormalize, NfcBeforeBpe) {
  auto t = load(tiny_doc({}));
  // e + combining acute becomes U+00E9: bytes C3 A9.
  EXPECT_EQ(encode(t, "e\xCC\x81"), (Ids{0xC3, 0xA9}));
}

TEST(TokenizerDecode, ByteLevelRoundTrip) {
  auto t = load(tiny_doc({{"\xE4", "\xBD"}, {"\xE4\xBD", "\xA0"}}));
  const std::string text = "Hi \xE4\xBD\xA0 \xF0\x9F\x9A\x97\n\t end";
  EXPECT_EQ(t.decode(encode(t, text)).value(), text);
}

TEST(TokenizerDecode, BrokenBytesBecomeReplacementCharacters) {
  auto t = load(tiny_doc({}));
  // E4 BD then 'a': one U+FFFD for the incomplete prefix, then 'a'. A lone FF: one U+FFFD.
  EXPECT_EQ(t.decode(Ids{0xE4, 0xBD, 'a'}).value(),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(t.decode(Ids{0xFF, 'b'}).value(),
            "\xEF\xBF\xBD"
            "b");
  // F0 80: F0 cannot be followed by 80 (overlong): two replacements.
  EXPECT_EQ(t.decode(Ids{0xF0, 0x80}).value(), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_FALSE(t.decode(Ids{5000}).ok());
  EXPECT_FALSE(t.decode(Ids{-1}).ok());
}

TEST(TokenizerDecode, StreamHoldsBackPartialCharacters) {
  auto t = load(tiny_doc({}));
  const std::string text = "a\xF0\x9F\x9A\x97\xE4\xBD\xA0z";  // a, U+1F697, U+4F60, z
  const Ids ids = encode(t, text);
  ASSERT_EQ(ids.size(), text.size());  // one byte a token
  StreamDecoder s(t);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(s.push(id).value());
  pieces.push_back(s.finish());
  EXPECT_EQ(pieces[0], "a");
  EXPECT_EQ(pieces[1], "");  // F0: held back
  EXPECT_EQ(pieces[4], "\xF0\x9F\x9A\x97");
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, text);
  // An unfinished character at the end comes out as U+FFFD, as decode() gives it.
  StreamDecoder cut(t);
  EXPECT_EQ(cut.push(0xE4).value(), "");
  EXPECT_EQ(cut.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode(Ids{0xE4}).value(), "\xEF\xBF\xBD");
}

TEST(TokenizerUtf8, LossyMatchesMaximalSubparts) {
  auto lossy = [](std::string_view b) {
    std::string out;
    tok::append_utf8_lossy(b, false, out);
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);          // a surrogate: each byte alone
  EXPECT_EQ(lossy("\xE2\x82"), r);                      // a truncated sequence: one
  EXPECT_EQ(lossy("\xC0\xAF"), r + r);                  // overlong
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  std::string held;
  EXPECT_EQ(tok::append_utf8_lossy("ab\xF0\x9F", true, held), 2u);
  EXPECT_EQ(held, "ab");
}

TEST(TokenizerRegex, WhiteSpaceAsOnigurumaSeesIt) {
  EXPECT_EQ(tok::onig_compatible_pattern(R"(\s+(?!\S)|[^\s\p{L}]|\\s|\Q\s\E)"),
            R"(\p{White_Space}+(?!\P{White_Space})|[^\p{White_Space}\p{L}]|\\s|\Q\s\E)");
  // U+180E is no longer white space (Unicode 6.3): PCRE2's own \s would still take it.
  const std::string mvs = "\xE1\xA0\x8E";
  auto raw = tok::Regex::compile("\\s", "test").value();
  auto onig = tok::Regex::compile(tok::onig_compatible_pattern("\\s"), "test").value();
  EXPECT_EQ(raw.find_all(mvs).value().size(), 1u);
  EXPECT_TRUE(onig.find_all(mvs).value().empty());
  // Empty matches are stepped over by whole characters.
  auto empty = tok::Regex::compile("x*", "test").value();
  const auto spans = empty.find_all("\xC3\xA9xx\xC3\xA9").value();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].begin, 2u);
  EXPECT_EQ(spans[0].end, 4u);
}

TEST(TokenizerEncode, RejectsInvalidUtf8) {
  auto t = load(tiny_doc({}));
  auto r = t.encode("ab\xFF");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_TRUE(t.encode("").value().empty());
}

// Every malformed document is an error value naming the problem, never a crash.
TEST(TokenizerHostile, MalformedFilesAreErrors) {
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    const char* expect;  // part of the message
  };
  const std::vector<Case> cases = {
      {"no model", [](json& d) { d.erase("model"); }, "missing key 'model'"},
      {"unknown top key", [](json& d) { d["extra"] = 1; }, "unknown key 'extra'"},
      {"not BPE", [](json& d) { d["model"]["type"] = "WordPiece"; }, "ferry reads BPE"},
      {"dropout", [](json& d) { d["model"]["dropout"] = 0.1; }, "dropout"},
      {"merge of unknown token", [](json& d) { d["model"]["merges"].push_back("zz q"); },
       "not in the vocabulary"},
      {"merge without result",
       [](json& d) { d["model"]["merges"].push_back(bl("q") + " " + bl("z")); }, "merged token"},
      {"merge with two spaces", [](json& d) { d["model"]["merges"].push_back("a b c"); },
       "two tokens"},
      {"merge not a string", [](json& d) { d["model"]["merges"].push_back(3); }, "a merge is"},
      {"byte missing", [](json& d) { d["model"]["vocab"].erase(bl("\x01")); },
       "no token for byte 1"},
      {"negative id", [](json& d) { d["model"]["vocab"]["xyz"] = -4; }, "outside"},
      {"huge id", [](json& d) { d["model"]["vocab"]["xyz"] = int64_t{1} << 40; }, "outside"},
      {"duplicate vocab id", [](json& d) { d["model"]["vocab"]["xyz"] = 5; }, "two tokens"},
      {"float id", [](json& d) { d["model"]["vocab"]["xyz"] = 1.5; }, "integer"},
      {"bad regex",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
       "Split"},
      {"unknown normalizer",
       [](json& d) {
         d["normalizer"] = {{"type", "Lowercase"}};
       },
       "Lowercase"},
      {"no byte level", [](json& d) { d["pre_tokenizer"]["pretokenizers"].erase(1); }, "ByteLevel"},
      {"added id clash",
       [](json& d) {
         add_token(d, 'a', "<x>", true, false);  // id 97 is "a"
       },
       "both"},
      {"added twice",
       [](json& d) {
         add_token(d, 300, "<x>", true, false);
         add_token(d, 301, "<x>", true, false);
       },
       "listed twice"},
      {"added empty", [](json& d) { add_token(d, 300, "", true, false); }, "empty"},
      {"truncation",
       [](json& d) {
         d["truncation"] = {{"max_length", 5}};
       },
       "truncation"},
      {"decoder",
       [](json& d) {
         d["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder"},
  };
  for (const Case& c : cases) {
    json doc = tiny_doc({});
    c.edit(doc);
    auto t = Tokenizer::from_json(doc.dump());
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_NE(t.error().message.find(c.expect), std::string::npos)
        << c.name << ": " << t.error().message;
  }
  for (const char* text : {"", "{", "[]", "null", "{\"model\": 1, \"model\": 2}", "\xFF"}) {
    EXPECT_FALSE(Tokenizer::from_json(text).ok()) << text;
  }
  EXPECT_FALSE(Tokenizer::load("/nonexistent/tokenizer.json").ok());
}

TEST(TokenizerSynthetic, EveryPresetMatchesItsConfig) {
  for (const char* name : {"qwen3-tiny", "qwen3-vl-tiny", "alpamayo-tiny"}) {
    SCOPED_TRACE(name);
    const ModelConfig config = preset(name).value();
    auto text = synthetic_tokenizer_json(config);
    ASSERT_TRUE(text.ok()) << text.error().to_string();
    auto t = Tokenizer::from_json(*text);
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    EXPECT_EQ(t->vocab_size(), config.text().vocab_size);
    EXPECT_EQ(t->token_to_id("<|endoftext|>"), 151643);
    EXPECT_EQ(t->token_to_id("<|im_start|>"), 151644);
    EXPECT_EQ(t->token_to_id("<|im_end|>"), 151645);
    for (int32_t id = 0; id < t->vocab_size(); id += 97) EXPECT_TRUE(t->token_bytes(id).ok()) << id;
    const std::string prompt =
        "<|im_start|>user\nHello, world! 你好 🚗 12345\n\n  x<|im_end|>\n<|im_start|>assistant\n";
    const Ids ids = encode(*t, prompt);
    EXPECT_EQ(ids.front(), 151644);
    EXPECT_EQ(t->decode(ids).value(), prompt);
    if (const Qwen3VLConfig* v = config.vlm()) {
      EXPECT_EQ(t->token_to_id("<|image_pad|>"), v->image_token_id);
      EXPECT_EQ(t->token_to_id("<|vision_start|>"), v->vision_start_token_id);
    }
    if (const AlpamayoConfig* a = config.alpamayo()) {
      EXPECT_EQ(t->token_to_id("<|traj_future_start|>"), a->traj_future_start_token_id);
      EXPECT_EQ(t->token_to_id("<|traj_history_start|>"), 155674);
      EXPECT_EQ(t->token_to_id("<|traj_history|>"), 155684);
      EXPECT_EQ(t->token_to_id("<|cot_start|>"), 155677);
      EXPECT_EQ(t->token_to_id("<|answer_end|>"), 155696);
      EXPECT_EQ(t->token_to_id("<i0>"), 151669);
      EXPECT_EQ(t->token_to_id("<i3999>"), 155668);
      EXPECT_EQ(encode(*t, "<i7><|traj_future_start|>"), (Ids{151676, 155681}));
    }
  }
}

TEST(TokenizerSynthetic, MisplacedSpecialIdsAreRefused) {
  ModelConfig config = preset("qwen3-vl-tiny").value();
  std::get<Qwen3VLConfig>(config.body).image_token_id = 7;
  auto r = synthetic_tokenizer_json(config);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("<|image_pad|>"), std::string::npos);
}

}  // namespace
}  // namespace ferry
