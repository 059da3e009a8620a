// Presets: valid, and round-trip through config.json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config_json.h"
#include "model/presets.h"

namespace ferry {
namespace {

class PresetRoundTrip : public ::testing::TestWithParam<std::string_view> {};

TEST_P(PresetRoundTrip, ParseOfWriteIsTheSameConfig) {
  auto p = preset(GetParam());
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  std::string text = write_config(*p);
  auto back = parse_config(text, GetParam());
  ASSERT_TRUE(back.ok()) << back.error().to_string() << "\n" << text;
  EXPECT_EQ(*back, *p) << text;
  // Writing again gives the same bytes (keys are sorted, numbers print exactly).
  EXPECT_EQ(write_config(*back), text);
}

INSTANTIATE_TEST_SUITE_P(All, PresetRoundTrip, ::testing::ValuesIn(preset_names()),
                         [](const auto& p) {
                           std::string s(p.param);
                           for (char& ch : s)
                             if (ch == '-' || ch == '.') ch = '_';
                           return s;
                         });

TEST(Presets, UnknownNameListsTheKnownOnes) {
  auto r = preset("gpt-5");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(r.error().message.find("alpamayo-tiny"), std::string::npos);
}

TEST(Presets, WrittenConfigsUseTheHuggingFaceFieldNames) {
  using nlohmann::json;
  json q = json::parse(write_config(preset("qwen3-8b").value()));
  EXPECT_EQ(q["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(q["model_type"], "qwen3");
  EXPECT_EQ(q["torch_dtype"], "bfloat16");
  EXPECT_EQ(q["num_key_value_heads"], 8);
  EXPECT_EQ(q["rope_theta"], 1e6);

  json v = json::parse(write_config(preset("qwen3-vl-tiny").value()));
  EXPECT_EQ(v["architectures"][0], "Qwen3VLForConditionalGeneration");
  EXPECT_EQ(v["model_type"], "qwen3_vl");
  EXPECT_EQ(v["text_config"]["model_type"], "qwen3_vl_text");
  EXPECT_EQ(v["text_config"]["rope_scaling"]["mrope_section"], json({4, 2, 2}));
  EXPECT_EQ(v["text_config"]["rope_scaling"]["mrope_interleaved"], true);
  EXPECT_EQ(v["vision_config"]["deepstack_visual_indexes"], json({1, 2, 3}));
  EXPECT_EQ(v["vision_config"]["out_hidden_size"], 64);

  json a = json::parse(write_config(preset("alpamayo-r1-10b").value()));
  EXPECT_EQ(a["architectures"][0], "AlpamayoR1");
  EXPECT_EQ(a["vlm_name_or_path"], "Qwen/Qwen3-VL-8B-Instruct");
  EXPECT_EQ(a["vocab_size"], 155697);
  EXPECT_EQ(a["expert_cfg"], json({{"dtype", "bfloat16"},
                                   {"head_dim", 128},
                                   {"hidden_size", 2048},
                                   {"intermediate_size", 8256},
                                   {"num_attention_heads", 16}}));
  EXPECT_EQ(a["action_space_cfg"]["n_waypoints"], 64);
  EXPECT_EQ(a["traj_token_ids"]["future_start"], 155681);
}

TEST(Presets, TinyAlpamayoKeepsTheStructuralConstraints) {
  const AlpamayoConfig* a = nullptr;
  auto p = preset("alpamayo-tiny");
  ASSERT_TRUE(p.ok());
  a = p->alpamayo();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->vlm.text.vocab_size, 155697);
  EXPECT_EQ(a->expert.num_layers, a->vlm.text.num_layers);
  EXPECT_EQ(a->expert.num_kv_heads * a->expert.head_dim,
            a->vlm.text.num_kv_heads * a->vlm.text.head_dim);
  EXPECT_NE(a->expert.num_heads * a->expert.head_dim, a->expert.hidden_size);
  EXPECT_EQ(a->vlm.vision.out_hidden_size, a->vlm.text.hidden_size);
  EXPECT_EQ(a->vlm.vision.deepstack_visual_indexes.size(), 3u);
  // The VLM of alpamayo-tiny is the qwen3-vl-tiny preset.
  EXPECT_EQ(a->vlm, *preset("qwen3-vl-tiny")->vlm());
}

TEST(Presets, ValidateRejectsAnInconsistentExpert) {
  ModelConfig c = preset("alpamayo-tiny").value();
  std::get<AlpamayoConfig>(c.body).expert.num_layers = 3;
  Status s = validate_config(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("expert_cfg.num_hidden_layers"), std::string::npos);
  // And a written config with that flaw is rejected by the parser too.
  auto r = parse_config(write_config(c));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("expert_cfg.num_hidden_layers: 3 differs"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(ConfigWrite, TextModelWithMropeKeepsItsSections) {
  ModelConfig c = preset("qwen3-tiny").value();
  auto& t = std::get<TextConfig>(c.body);
  t.mrope_section = {4, 2, 2};
  t.mrope_interleaved = true;
  auto back = parse_config(write_config(c));
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, c);
}

}  // namespace
}  // namespace ferry
