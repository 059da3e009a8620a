// Llama configs as transformers 4.x writes them (rope_theta beside rope_scaling, torch_dtype) and
// as 5.x does (rope_parameters holding rope_theta, dtype): Llama-3's llama3 RoPE scaling, GQA,
// tied embeddings, and the biases ferry refuses with an error naming them.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config_json.h"
#include "model/presets.h"

namespace ferry {
namespace {

using json = nlohmann::json;

json fixture(const std::string& path) {
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/tests/" + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

ModelConfig parse_ok(const json& j) {
  auto r = parse_config(j.dump());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? r.value() : ModelConfig{};
}

TEST(ConfigLlama, Llama31WithRopeScalingOfTransformers4) {
  const ModelConfig c = parse_ok(fixture("fixtures/llama-3.1-8b.config.json"));
  EXPECT_EQ(c.arch, Architecture::llama);
  const TextConfig& t = c.text();
  EXPECT_EQ(t.num_kv_heads, 8);
  EXPECT_EQ(t.head_dim, 128);
  EXPECT_FALSE(t.qk_norm);
  EXPECT_DOUBLE_EQ(t.rope_theta, 500000.0);
  ASSERT_TRUE(t.llama3_rope.has_value());
  EXPECT_DOUBLE_EQ(t.llama3_rope->factor, 8.0);
  EXPECT_DOUBLE_EQ(t.llama3_rope->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(t.llama3_rope->high_freq_factor, 4.0);
  EXPECT_EQ(t.llama3_rope->original_max_position_embeddings, 8192);
  EXPECT_EQ(c, preset("llama-3.1-8b").value());
}

TEST(ConfigLlama, RopeParametersOfTransformers5AreTheSameConfig) {
  json j = fixture("fixtures/llama-3.1-8b.config.json");
  json params = j["rope_scaling"];
  params["rope_theta"] = j["rope_theta"];
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = params;
  j["dtype"] = j["torch_dtype"];
  j.erase("torch_dtype");
  EXPECT_EQ(parse_ok(j), parse_ok(fixture("fixtures/llama-3.1-8b.config.json")));
}

TEST(ConfigLlama, WritingAndReadingKeepsTheScaling) {
  const ModelConfig c = preset("llama-3.1-8b").value();
  EXPECT_EQ(parse_ok(json::parse(write_config(c))), c);
}

TEST(ConfigLlama, RefusedWithAnErrorNamingTheKey) {
  const json base = fixture("fixtures/llama-3.1-8b.config.json");
  auto refused = [&](const char* key, json value, const char* words) {
    json j = base;
    j[key] = value;
    auto r = parse_config(j.dump());
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_NE(r.error().message.find(key), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(words), std::string::npos) << r.error().message;
  };
  refused("attention_bias", true, "no bias");
  refused("mlp_bias", true, "no bias");
  json scaling = base["rope_scaling"];
  scaling["rope_type"] = "yarn";
  refused("rope_scaling", scaling, "not supported");
  scaling = base["rope_scaling"];
  scaling.erase("original_max_position_embeddings");
  refused("rope_scaling", scaling, "original_max_position_embeddings");
  scaling = base["rope_scaling"];
  scaling["high_freq_factor"] = 0.5;
  refused("rope_scaling", scaling, "high_freq_factor");
}

}  // namespace
}  // namespace ferry
