// The Llama-layout tokenizers of tests/data/llama (SentencePiece BPE with byte fallback in its
// two tokenizer.json forms, and Llama-3's byte-level BPE with its own split pattern) against what
// Hugging Face tokenizers made of the same corpus (expected_tokens.json, written by
// make_tokenizers.py): ids with and without the post-processor's BOS, decoded text with and
// without special tokens, stream decoding. tests/python/test_tokenizer_llama.py runs the same
// comparison against the installed tokenizers package, and sentencepiece.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ferry {
namespace {

using json = nlohmann::json;
using Ids = std::vector<int32_t>;

std::string data_dir() {
  return std::string(FERRY_SOURCE_DIR) + "/tests/data/llama";
}

json expected() {
  std::ifstream in(data_dir() + "/expected_tokens.json");
  std::stringstream s;
  s << in.rdbuf();
  return json::parse(s.str());
}

class LlamaTokenizers : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaTokenizers, EncodeAndDecodeAsHuggingFaceTokenizers) {
  const std::string name = GetParam();
  auto tok = Tokenizer::load(data_dir() + "/" + name + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const json cases = expected().at("tokenizers").at(name);
  ASSERT_GT(cases.size(), 100u);
  int checked = 0;
  for (const json& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const Ids want = c.at("ids").get<Ids>();
    const Ids want_special = c.at("ids_special").get<Ids>();
    auto got = tok->encode(text);
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, want) << name << ": " << json(text).dump();
    auto got_special = tok->encode(text, /*add_special=*/true);
    ASSERT_TRUE(got_special.ok());
    EXPECT_EQ(*got_special, want_special) << name << ": " << json(text).dump();
    for (bool skip : {false, true}) {
      auto text_back = tok->decode(want_special, skip);
      ASSERT_TRUE(text_back.ok()) << text_back.error().message;
      EXPECT_EQ(*text_back, c.at(skip ? "decoded_skip" : "decoded").get<std::string>())
          << name << " skip " << skip << ": " << json(text).dump();
      StreamDecoder stream(*tok, skip);
      std::string joined;
      for (int32_t id : want_special) {
        auto piece = stream.push(id);
        ASSERT_TRUE(piece.ok());
        joined += *piece;
      }
      joined += stream.finish();
      EXPECT_EQ(joined, *text_back) << name << ": " << json(text).dump();
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
}

INSTANTIATE_TEST_SUITE_P(Files, LlamaTokenizers,
                         ::testing::Values("llama2", "llama2-metaspace", "llama3"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

TEST(LlamaTokenizer, TemplatePrefixIsTheBos) {
  auto l2 = Tokenizer::load(data_dir() + "/llama2/tokenizer.json");
  ASSERT_TRUE(l2.ok());
  EXPECT_EQ(l2->template_prefix(), Ids{1});
  auto l3 = Tokenizer::load(data_dir() + "/llama3/tokenizer.json");
  ASSERT_TRUE(l3.ok());
  const auto bos = l3->token_to_id("<|begin_of_text|>");
  ASSERT_TRUE(bos.has_value());
  EXPECT_EQ(l3->template_prefix(), Ids{*bos});
}

// Hand-made SentencePiece files: byte fallback, unknown fusing, the decoder chain's rules.
json sp_doc(bool byte_fallback, bool fuse_unk) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"\u2581", 3},
                {"a", 4},     {"b", 5},   {"ab", 6},   {"\u2581a", 7}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 8 + b;
  }
  const json seq = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", "\u2581"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}};
  const json decoder = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 0}, {"content", "<unk>"}, {"special", true}, {"normalized", false}},
            {{"id", 1}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
            {{"id", 2}, {"content", "</s>"}, {"special", true}, {"normalized", false}}}},
          {"normalizer", seq},
          {"pre_tokenizer", nullptr},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single",
             {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
            {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
          {"decoder", decoder},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", fuse_unk},
            {"byte_fallback", byte_fallback},
            {"vocab", vocab},
            {"merges", {"a b", "\u2581 a"}}}}};
}

TEST(LlamaTokenizer, ByteFallbackAndUnknowns) {
  auto with = Tokenizer::from_json(sp_doc(true, true).dump());
  ASSERT_TRUE(with.ok()) << with.error().message;
  // "▁ab": "a b" (rank 0) merges before "▁ a" (rank 1) could.
  EXPECT_EQ(*with->encode("ab"), (Ids{3, 6}));
  EXPECT_EQ(*with->encode("a"), (Ids{7}));
  // é is not in the vocabulary: its two UTF-8 bytes as <0xC3> <0xA9>.
  EXPECT_EQ(*with->encode("\u00e9"), (Ids{3, 8 + 0xC3, 8 + 0xA9}));
  EXPECT_EQ(*with->encode("a", true), (Ids{1, 7}));
  auto fused = Tokenizer::from_json(sp_doc(false, true).dump());
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(*fused->encode("\u00e9\u00e8a"), (Ids{3, 0, 4}));
  auto unfused = Tokenizer::from_json(sp_doc(false, false).dump());
  ASSERT_TRUE(unfused.ok());
  EXPECT_EQ(*unfused->encode("\u00e9\u00e8a"), (Ids{3, 0, 0, 4}));
  // Decoding: the first space is stripped; a broken byte run is one U+FFFD per byte.
  EXPECT_EQ(*with->decode(Ids{1, 7, 3, 6}), "<s> a ab");
  EXPECT_EQ(*with->decode(Ids{1, 7, 3, 6}, true), "a ab");
  EXPECT_EQ(*with->decode(Ids{7, 8 + 0xC3, 8 + 0xA9}), "a\u00e9");
  EXPECT_EQ(*with->decode(Ids{7, 8 + 0xC3, 4}), "a\ufffda");
  EXPECT_EQ(*with->decode(Ids{8 + 0xE4, 8 + 0xB8, 7}), "\ufffd\ufffd a");
}

TEST(LlamaTokenizer, RefusesWhatItCannotDo) {
  json doc = sp_doc(true, true);
  doc["model"]["byte_fallback"] = true;
  doc["pre_tokenizer"] = {{"type", "ByteLevel"}};
  auto bl = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(bl.ok());
  EXPECT_NE(bl.error().message.find("decoder"), std::string::npos) << bl.error().message;
  doc = sp_doc(true, true);
  doc["decoder"]["decoders"].erase(2);  // Strip without Fuse
  auto nofuse = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(nofuse.ok());
  EXPECT_NE(nofuse.error().message.find("Strip"), std::string::npos) << nofuse.error().message;
  doc = sp_doc(true, true);
  doc["post_processor"]["special_tokens"]["<s>"]["ids"] = {99999};
  auto bad_id = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.error().message.find("99999"), std::string::npos);
  doc = sp_doc(true, true);
  doc["model"]["unk_token"] = "<nope>";
  auto bad_unk = Tokenizer::from_json(doc.dump());
  ASSERT_FALSE(bad_unk.ok());
  EXPECT_NE(bad_unk.error().message.find("<nope>"), std::string::npos);
  doc = sp_doc(true, true);
  doc["post_processor"]["single"] = json::array();
  EXPECT_FALSE(Tokenizer::from_json(doc.dump()).ok());
}

}  // namespace
}  // namespace ferry
