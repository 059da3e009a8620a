// Llama chat prompts (api/llama_chat.h) against transformers' apply_chat_template with the
// templates the test checkpoints declare (tests/data/llama/*/chat.json, written by
// make_checkpoints.py): the rendered text and its ids; and the templates ferry refuses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/llama_chat.h"
#include "scratch_dir.h"

#include "llama_data.h"

namespace ferry {
namespace {

using json = nlohmann::json;

std::string data_dir() {
  return testing::llama_data_dir();
}
json read_json(const std::string& path) {
  return testing::read_json_file(path);
}

class LlamaChatTemplates : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaChatTemplates, RenderAsTransformersApplyChatTemplate) {
  const std::string dir = data_dir() + "/" + GetParam();
  auto chat = api::load_llama_chat(dir);
  ASSERT_TRUE(chat.ok()) << chat.error().message;
  auto tok = Tokenizer::load_dir(dir);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const json cases = read_json(dir + "/chat.json").at("cases");
  ASSERT_GE(cases.size(), 4u);
  for (const json& c : cases) {
    ChatRequest req;
    if (!c.at("system").is_null()) req.system = c.at("system").get<std::string>();
    req.user = c.at("user").get<std::string>();
    EXPECT_EQ(api::llama_chat_text(*chat, req), c.at("text").get<std::string>());
    auto in = api::llama_chat_inputs(*tok, *chat, req);
    ASSERT_TRUE(in.ok()) << in.error().message;
    EXPECT_EQ(in->prompt, c.at("ids").get<std::vector<int32_t>>()) << req.user;
    EXPECT_FALSE(in->stop.stop_tokens.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, LlamaChatTemplates,
                         ::testing::Values("llama2-tiny", "llama3-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(LlamaChat, StopsAtTheEndOfATurn) {
  const std::string dir = data_dir() + "/llama3-tiny";
  auto chat = api::load_llama_chat(dir);
  auto tok = Tokenizer::load_dir(dir);
  ASSERT_TRUE(chat.ok() && tok.ok());
  auto in = api::llama_chat_inputs(*tok, *chat, ChatRequest{std::nullopt, "hi", true});
  ASSERT_TRUE(in.ok());
  for (const char* end : {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"}) {
    const auto id = tok->token_to_id(end);
    ASSERT_TRUE(id.has_value());
    EXPECT_NE(std::find(in->stop.stop_tokens.begin(), in->stop.stop_tokens.end(), *id),
              in->stop.stop_tokens.end())
        << end;
  }
}

TEST(LlamaChat, TemplatesItCannotRenderAreRefused) {
  testing::ScratchDir scratch("llama_chat");
  const std::string dir = scratch.path().string();
  auto write = [&](const json& doc) {
    std::ofstream(dir + "/tokenizer_config.json") << doc.dump();
  };
  auto refused = [&](const char* words) {
    auto r = api::load_llama_chat(dir);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  };
  refused("--prompt-ids");  // no tokenizer_config.json
  write({{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  refused("--prompt-ids");  // no chat_template
  write({{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"chat_template", "{{ messages }}"}});
  refused("does not know");
  write({{"bos_token", "<|begin_of_text|>"},
         {"eos_token", "<|eot_id|>"},
         {"chat_template",
          "Cutting Knowledge Date: December 2023 <|start_header_id|><|end_header_id|><|eot_id|>"}});
  refused("dated system preamble");
  write({{"eos_token", "</s>"}, {"chat_template", "[INST] [/INST]"}});
  refused("bos_token");
  write({{"bos_token", {{"content", "<s>"}}},
         {"eos_token", {{"content", "</s>"}}},
         {"chat_template", json::array({{{"name", "default"}, {"template", "[INST] [/INST]"}}})}});
  auto ok = api::load_llama_chat(dir);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->bos, "<s>");
  EXPECT_EQ(ok->format, api::LlamaChat::Format::llama2_inst);
}

}  // namespace
}  // namespace ferry
