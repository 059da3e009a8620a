// Hostile config.json files: each is rejected with an error that names the field and the reason,
// never a crash or an exception.
#include <gtest/gtest.h>

#include <string>

#include "model/config_json.h"

namespace ferry {
namespace {

// A valid Qwen3 config with one key replaced (or removed when `value` is empty).
std::string qwen3_with(const std::string& key, const std::string& value) {
  std::string fields[][2] = {
      {"architectures", R"(["Qwen3ForCausalLM"])"},
      {"model_type", R"("qwen3")"},
      {"hidden_size", "64"},
      {"num_hidden_layers", "2"},
      {"num_attention_heads", "4"},
      {"num_key_value_heads", "2"},
      {"head_dim", "16"},
      {"intermediate_size", "128"},
      {"vocab_size", "1000"},
      {"rms_norm_eps", "1e-06"},
      {"rope_theta", "1000000"},
      {"torch_dtype", R"("bfloat16")"},
  };
  std::string out = "{";
  bool found = false;
  for (auto& f : fields) {
    std::string v = f[1];
    if (f[0] == key) {
      found = true;
      v = value;
    }
    if (v.empty()) continue;
    out += (out.size() > 1 ? ", " : "") + ("\"" + f[0] + "\": " + v);
  }
  if (!found && !value.empty()) out += ", \"" + key + "\": " + value;
  return out + "}";
}

// A valid Qwen3-VL config with a text_config/vision_config/top-level key replaced.
std::string qwen3_vl_with(const std::string& where, const std::string& key,
                          const std::string& value) {
  std::string text = R"("hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 152000,
    "rope_theta": 5000000, "rope_scaling": {"rope_type": "default", "mrope_section": [4, 2, 2],
    "mrope_interleaved": true})";
  std::string vision = R"("depth": 4, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64,
    "out_hidden_size": 64, "num_position_embeddings": 256, "deepstack_visual_indexes": [1, 2])";
  std::string top = R"("architectures": ["Qwen3VLForConditionalGeneration"],
    "model_type": "qwen3_vl", "image_token_id": 10)";
  std::string& target = where == "text" ? text : where == "vision" ? vision : top;
  target += ", \"" + key + "\": " + value;  // nlohmann keeps the last of duplicate keys
  return "{" + top + ", \"text_config\": {" + text + "}, \"vision_config\": {" + vision + "}}";
}

struct Case {
  const char* name;
  std::string json;
  const char* expect;  // a substring of the error message
};

class HostileConfig : public ::testing::TestWithParam<Case> {};

TEST_P(HostileConfig, IsRejectedWithItsReason) {
  const Case& c = GetParam();
  auto r = parse_config(c.json);
  ASSERT_FALSE(r.ok()) << "accepted: " << c.json;
  EXPECT_NE(r.error().message.find(c.expect), std::string::npos)
      << "message: " << r.error().message << "\nexpected to contain: " << c.expect;
  EXPECT_EQ(r.error().message.rfind("config.json", 0), 0u) << r.error().message;
}

const Case kCases[] = {
    {"not_json", "{\"hidden_size\": ", "not valid JSON"},
    {"not_object", "[1, 2, 3]", "expected a JSON object"},
    {"empty", "", "not valid JSON"},
    {"deep_nesting", std::string(100000, '['), "nested deeper than"},
    {"no_arch", R"({"hidden_size": 64})", "neither model_type nor architectures"},
    {"unknown_arch", qwen3_with("model_type", R"("gpt2")"), "'gpt2'"},
    {"architectures_not_list", qwen3_with("architectures", "7"), "architectures: expected a list"},
    {"missing_hidden", qwen3_with("hidden_size", ""), "hidden_size: missing"},
    {"null_hidden", qwen3_with("hidden_size", "null"), "hidden_size: missing"},
    {"negative_heads", qwen3_with("num_attention_heads", "-3"),
     "num_attention_heads: expected a positive integer, got -3"},
    {"zero_layers", qwen3_with("num_hidden_layers", "0"),
     "num_hidden_layers: expected a positive integer, got 0"},
    {"string_size", qwen3_with("hidden_size", R"("64")"),
     "hidden_size: expected a positive integer, got \"64\""},
    {"float_size", qwen3_with("hidden_size", "64.5"),
     "hidden_size: expected a positive integer, got 64.5"},
    {"bool_size", qwen3_with("vocab_size", "true"), "vocab_size: expected a positive integer"},
    {"huge_vocab", qwen3_with("vocab_size", "1099511627776"),
     "vocab_size: expected at most 16777216"},
    {"u64_overflow", qwen3_with("intermediate_size", "18446744073709551615"),
     "intermediate_size: expected at most"},
    {"beyond_u64", qwen3_with("hidden_size", "1e400"), "not valid JSON"},
    {"absurd_product", qwen3_with("num_hidden_layers", "4097"),
     "num_hidden_layers: expected at most 4096"},
    {"kv_not_dividing", qwen3_with("num_key_value_heads", "3"),
     "num_key_value_heads: 3 does not divide num_attention_heads (4)"},
    {"odd_head_dim", qwen3_with("head_dim", "15"), "head_dim: expected an even size"},
    {"heads_times_dim", qwen3_with("head_dim", "8388608"),
     "num_attention_heads * head_dim exceeds"},
    {"negative_eps", qwen3_with("rms_norm_eps", "-1e-6"), "rms_norm_eps: expected a number"},
    {"nan_like_theta", qwen3_with("rope_theta", R"("inf")"), "rope_theta: expected a number"},
    {"zero_theta", qwen3_with("rope_theta", "0"), "rope_theta: expected a positive number, got 0"},
    {"bad_dtype", qwen3_with("torch_dtype", R"("int4")"), "torch_dtype: expected bfloat16"},
    {"dtype_wrong_type", qwen3_with("torch_dtype", "16"), "torch_dtype: expected a string"},
    {"bias_unsupported", qwen3_with("attention_bias", "true"), "attention_bias: true is not"},
    {"act_unsupported", qwen3_with("hidden_act", R"("gelu")"), "hidden_act: 'gelu'"},
    {"tie_not_bool", qwen3_with("tie_word_embeddings", "1"),
     "tie_word_embeddings: expected true or false"},
    {"rope_scaling_yarn", qwen3_with("rope_scaling", R"({"rope_type": "yarn", "factor": 4})"),
     "rope_scaling.rope_type: 'yarn' is not supported"},
    {"rope_scaling_not_object", qwen3_with("rope_scaling", "[1]"),
     "rope_scaling: expected an object"},
    {"llama_heads_not_dividing",
     R"({"model_type": "llama", "hidden_size": 100, "num_hidden_layers": 1,
         "num_attention_heads": 3, "intermediate_size": 8, "vocab_size": 10})",
     "hidden_size: 100 is not a multiple of num_attention_heads (3)"},
    {"vl_missing_text", R"({"model_type": "qwen3_vl", "vision_config": {}})",
     "text_config: missing"},
    {"vl_text_not_object", R"({"model_type": "qwen3_vl", "text_config": 5})",
     "text_config: expected an object, got 5"},
    {"vl_negative_heads", qwen3_vl_with("text", "num_attention_heads", "-3"),
     "text_config.num_attention_heads: expected a positive integer, got -3"},
    {"vl_mrope_sum", qwen3_vl_with("text", "rope_scaling", R"({"mrope_section": [4, 2, 1]})"),
     "text_config.rope_scaling.mrope_section: sums to 7, expected head_dim/2 = 8"},
    {"vl_mrope_len", qwen3_vl_with("text", "rope_scaling", R"({"mrope_section": [4, 4]})"),
     "mrope_section: expected 3 entries"},
    {"vl_mrope_missing", qwen3_vl_with("text", "rope_scaling", R"({"rope_type": "default"})"),
     "text_config.rope_scaling.mrope_section: missing"},
    {"vl_mrope_not_ints", qwen3_vl_with("text", "rope_scaling", R"({"mrope_section": ["a"]})"),
     "mrope_section[0]: expected a positive integer"},
    {"vl_vision_heads", qwen3_vl_with("vision", "num_heads", "3"),
     "vision_config.num_heads: hidden_size / num_heads must be a whole multiple of 4"},
    {"vl_pos_not_square", qwen3_vl_with("vision", "num_position_embeddings", "250"),
     "vision_config.num_position_embeddings: expected a square"},
    {"vl_deepstack_range", qwen3_vl_with("vision", "deepstack_visual_indexes", "[1, 9]"),
     "vision_config.deepstack_visual_indexes[1]: 9 is not a block index"},
    {"vl_deepstack_order", qwen3_vl_with("vision", "deepstack_visual_indexes", "[2, 1]"),
     "deepstack_visual_indexes[1]: indexes must be strictly increasing"},
    {"vl_deepstack_negative", qwen3_vl_with("vision", "deepstack_visual_indexes", "[-1]"),
     "deepstack_visual_indexes[0]: expected a non-negative integer"},
    {"vl_out_hidden", qwen3_vl_with("vision", "out_hidden_size", "32"),
     "vision_config.out_hidden_size: 32 differs from text_config.hidden_size (64)"},
    {"vl_image_token", qwen3_vl_with("top", "image_token_id", "152000"),
     "image_token_id: 152000 is outside the vocabulary (152000)"},
    {"vl_vision_act", qwen3_vl_with("vision", "hidden_act", R"("relu")"),
     "vision_config.hidden_act: 'relu'"},
    {"alpamayo_no_vlm", R"({"model_type": "alpamayo_r1", "expert_cfg": {}})",
     "vlm_config: missing"},
};

INSTANTIATE_TEST_SUITE_P(Table, HostileConfig, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

TEST(HostileConfigFixed, TheBaseConfigsAreValid) {
  // The table edits valid configs: check they are valid before editing.
  auto q = parse_config(qwen3_with("", ""));
  EXPECT_TRUE(q.ok()) << q.error().to_string();
  auto v = parse_config(qwen3_vl_with("top", "vision_end_token_id", "11"));
  EXPECT_TRUE(v.ok()) << v.error().to_string();
}

TEST(HostileConfigFixed, InvalidUtf8IsAnErrorNotAnException) {
  std::string text = qwen3_with("model_type",
                                "\"qw\xff\xfe"
                                "en3\"");
  auto r = parse_config(text);
  EXPECT_FALSE(r.ok());
}

TEST(HostileConfigFixed, OversizedTextIsRejectedBeforeParsing) {
  std::string text(kMaxConfigBytes + 1, ' ');
  auto r = parse_config(text);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("larger than a config can be"), std::string::npos);
}

}  // namespace
}  // namespace ferry
