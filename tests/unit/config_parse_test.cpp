// Parsing the real configs (tests/fixtures/) into typed configs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "model/config_json.h"
#include "model/presets.h"

namespace ferry {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/tests/fixtures/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ModelConfig parse_ok(const std::string& text) {
  auto r = parse_config(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? r.value() : ModelConfig{};
}

TEST(ConfigParse, Qwen3_8B) {
  ModelConfig c = parse_ok(fixture("qwen3-8b.config.json"));
  EXPECT_EQ(c.arch, Architecture::qwen3);
  const TextConfig& t = c.text();
  EXPECT_EQ(t.hidden_size, 4096);
  EXPECT_EQ(t.num_layers, 36);
  EXPECT_EQ(t.num_heads, 32);
  EXPECT_EQ(t.num_kv_heads, 8);
  EXPECT_EQ(t.head_dim, 128);
  EXPECT_EQ(t.intermediate_size, 12288);
  EXPECT_EQ(t.vocab_size, 151936);
  EXPECT_DOUBLE_EQ(t.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(t.rms_norm_eps, 1e-6);
  EXPECT_TRUE(t.mrope_section.empty());
  EXPECT_TRUE(t.qk_norm);
  EXPECT_FALSE(t.tie_word_embeddings);
  EXPECT_EQ(t.dtype, "bfloat16");
  // The real config and the preset describe the same model.
  EXPECT_EQ(c, preset("qwen3-8b").value());
}

TEST(ConfigParse, Llama2DerivesHeadDimAndHasNoQkNorm) {
  ModelConfig c = parse_ok(fixture("llama-2-7b.config.json"));
  EXPECT_EQ(c.arch, Architecture::llama);
  const TextConfig& t = c.text();
  EXPECT_EQ(t.head_dim, 128);  // 4096 / 32: Llama configs do not name it
  EXPECT_EQ(t.num_kv_heads, 32);
  EXPECT_FALSE(t.qk_norm);
  EXPECT_DOUBLE_EQ(t.rope_theta, 10000.0);  // absent: HF's default
  EXPECT_DOUBLE_EQ(t.rms_norm_eps, 1e-5);
  EXPECT_EQ(t.dtype, "float16");
  EXPECT_EQ(t.vocab_size, 32000);
}

TEST(ConfigParse, LlamaWithoutKvHeadsDefaultsToHeads) {
  std::string text = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
    "vocab_size": 100})";
  ModelConfig c = parse_ok(text);
  EXPECT_EQ(c.arch, Architecture::llama);  // from architectures alone
  EXPECT_EQ(c.text().num_kv_heads, 4);
  EXPECT_EQ(c.text().head_dim, 16);
}

TEST(ConfigParse, Qwen3VL8B) {
  ModelConfig c = parse_ok(fixture("qwen3-vl-8b-instruct.config.json"));
  ASSERT_EQ(c.arch, Architecture::qwen3_vl);
  const Qwen3VLConfig* v = c.vlm();
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->text.hidden_size, 4096);
  EXPECT_EQ(v->text.mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_TRUE(v->text.mrope_interleaved);
  EXPECT_DOUBLE_EQ(v->text.rope_theta, 5e6);
  EXPECT_EQ(v->vision.depth, 27);
  EXPECT_EQ(v->vision.hidden_size, 1152);
  EXPECT_EQ(v->vision.num_heads, 16);
  EXPECT_EQ(v->vision.head_dim(), 72);
  EXPECT_EQ(v->vision.intermediate_size, 4304);
  EXPECT_EQ(v->vision.patch_values(), 1536);
  EXPECT_EQ(v->vision.num_position_embeddings, 2304);
  EXPECT_EQ(v->vision.out_hidden_size, 4096);
  EXPECT_EQ(v->vision.deepstack_visual_indexes, (std::vector<int64_t>{8, 16, 24}));
  EXPECT_EQ(v->image_token_id, 151655);
  EXPECT_EQ(*v, qwen3_vl_8b_config());
  EXPECT_EQ(c, preset("qwen3-vl-8b").value());
}

TEST(ConfigParse, Qwen3VLAcceptsTransformers5RopeParameters) {
  // transformers 5 writes rope_parameters with rope_theta inside and no top-level rope_theta.
  std::string text = fixture("qwen3-vl-8b-instruct.config.json");
  auto pos = text.find("\"rope_scaling\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, std::string("\"rope_scaling\"").size(), "\"rope_parameters\"");
  pos = text.find("\"rope_theta\": 5000000,");
  ASSERT_NE(pos, std::string::npos);
  text.erase(pos, std::string("\"rope_theta\": 5000000,").size());
  pos = text.find("\"rope_type\": \"default\"");
  text.insert(pos, "\"rope_theta\": 5000000.0, ");
  ModelConfig c = parse_ok(text);
  EXPECT_DOUBLE_EQ(c.text().rope_theta, 5e6);
  EXPECT_EQ(c.text().mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_EQ(c, preset("qwen3-vl-8b").value());
}

TEST(ConfigParse, AlpamayoR1ReleasedConfigUsesTheNamedVlm) {
  ModelConfig c = parse_ok(fixture("alpamayo-r1-10b.config.json"));
  ASSERT_EQ(c.arch, Architecture::alpamayo_r1);
  const AlpamayoConfig* a = c.alpamayo();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->vlm.text.vocab_size, 155697);  // resized from Qwen3-VL's 151936
  EXPECT_EQ(a->vlm.vision.depth, 27);
  EXPECT_EQ(a->expert.hidden_size, 2048);
  EXPECT_EQ(a->expert.num_heads, 16);
  EXPECT_EQ(a->expert.num_kv_heads, 8);  // inherited from the text config
  EXPECT_EQ(a->expert.num_layers, 36);
  EXPECT_EQ(a->expert.head_dim, 128);
  EXPECT_EQ(a->expert.intermediate_size, 8256);
  EXPECT_EQ(a->expert.vocab_size, 0);
  EXPECT_EQ(a->expert.mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_EQ(a->action_in_proj.hidden_size, 512);
  EXPECT_EQ(a->action_in_proj.num_enc_layers, 2);
  EXPECT_EQ(a->action_in_proj.num_fourier_feats, 20);
  EXPECT_DOUBLE_EQ(a->action_in_proj.max_freq, 100.0);
  EXPECT_EQ(a->action_space.num_waypoints, 64);
  EXPECT_DOUBLE_EQ(a->action_space.accel_std, 0.6810426736454882);
  EXPECT_DOUBLE_EQ(a->action_space.curvature_mean, 0.0002692167976330542);
  EXPECT_EQ(a->diffusion.num_inference_steps, 10);
  EXPECT_EQ(a->traj_future_start_token_id, 155681);
  EXPECT_EQ(a->traj_token_start_idx, 151669);
  EXPECT_EQ(a->traj_vocab_size, 4000);
  EXPECT_EQ(c, preset("alpamayo-r1-10b").value());
}

TEST(ConfigParse, AlpamayoWithUnknownVlmNameIsAnError) {
  std::string text = fixture("alpamayo-r1-10b.config.json");
  auto pos = text.find("Qwen/Qwen3-VL-8B-Instruct");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 25, "some/other-vlm");
  auto r = parse_config(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("vlm_config: missing"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("some/other-vlm"), std::string::npos);
}

TEST(ConfigParse, LoadConfigReadsAFolderOrAFile) {
  std::string dir = std::string(FERRY_SOURCE_DIR) + "/tests/fixtures";
  auto file = load_config(dir + "/qwen3-8b.config.json");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_EQ(file->text().num_layers, 36);
  auto missing = load_config(dir + "/no-such-file.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::io);
  auto folder = load_config(dir);  // the fixtures folder has no config.json
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.error().code, ErrorCode::io);
}

}  // namespace
}  // namespace ferry
