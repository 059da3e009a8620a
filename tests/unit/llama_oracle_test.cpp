// ferry against transformers on tiny Llama checkpoints that transformers' save_pretrained wrote
// (tests/data/llama/make_checkpoints.py: random BF16 weights; the Llama-2 layout, and the
// Llama-3 layout with GQA, llama3 RoPE scaling and tied embeddings). `ferry run --prompt-ids`
// on the CPU backend, greedy: the generated tokens must be transformers' greedy tokens, and the
// logits at the prompt's last position and at the last step within BF16 tolerance of
// transformers' (expected.json; torch is not installed in CI, so its outputs are committed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "api/npy.h"
#include "cli_runner.h"
#include "model/config_json.h"

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

std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

// The largest difference between ferry's row and transformers', relative to the row's largest
// magnitude. BF16 logits carry 8 significant bits (2^-8 = 0.4% of a value); two engines that
// round their activations to BF16 at slightly different points differ by a few of those.
double relative_error(std::span<const double> got, const std::vector<double>& want) {
  double top = 0.0, worst = 0.0;
  for (double w : want) top = std::max(top, std::abs(w));
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst / top;
}

ModelConfig parse_ok(const std::string& path) {
  auto r = load_config(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().to_string());
  return r.ok() ? r.value() : ModelConfig{};
}

TEST(LlamaOracleConfigs, TheSavedTinyCheckpointsParse) {
  // Written by transformers 5 (rope_parameters), tests/data/llama/make_checkpoints.py.
  const ModelConfig l3 = parse_ok(data_dir() + "/llama3-tiny/config.json");
  EXPECT_TRUE(l3.text().tie_word_embeddings);
  EXPECT_EQ(l3.text().num_kv_heads, 2);
  ASSERT_TRUE(l3.text().llama3_rope.has_value());
  EXPECT_EQ(l3.text().llama3_rope->original_max_position_embeddings, 16);
  const ModelConfig l2 = parse_ok(data_dir() + "/llama2-tiny/config.json");
  EXPECT_FALSE(l2.text().llama3_rope.has_value());
  EXPECT_FALSE(l2.text().tie_word_embeddings);
  EXPECT_DOUBLE_EQ(l2.text().rms_norm_eps, 1e-5);
}

class LlamaOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaOracle, GreedyTokensAndLogitsMatchTransformers) {
  const std::string model = data_dir() + "/" + GetParam();
  const json expected = read_json(model + "/expected.json");
  const int steps = expected.at("steps").get<int>();
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("ferry_llama_oracle_" + GetParam());
  std::filesystem::create_directories(tmp);
  double worst = 0.0;
  for (const json& c : expected.at("cases")) {
    const std::vector<int32_t> prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    const std::string logits = (tmp / "logits.npy").string();
    const auto run = testing::run_ferry("run --model " + model + " --backend cpu --quiet --json " +
                                        "--greedy --prompt-ids " + join(prompt) + " --max-tokens " +
                                        std::to_string(steps) + " --dump-logits " + logits);
    ASSERT_EQ(run.code, 0) << run.err;
    const json out = json::parse(run.out);
    EXPECT_EQ(out.at("prompt_tokens").get<size_t>(), prompt.size());
    EXPECT_EQ(out.at("tokens"), c.at("tokens")) << c.at("text");
    auto rows = read_npy(logits, size_t{1} << 24);
    ASSERT_TRUE(rows.ok()) << rows.error().message;
    const std::vector<double> first = c.at("prefill_logits").get<std::vector<double>>();
    const std::vector<double> last = c.at("last_logits").get<std::vector<double>>();
    ASSERT_EQ(rows->shape, (std::vector<int64_t>{steps, static_cast<int64_t>(first.size())}));
    const std::span<const double> all(rows->values);
    const double e0 = relative_error(all.subspan(0, first.size()), first);
    const double e1 = relative_error(all.subspan((steps - 1) * first.size(), last.size()), last);
    EXPECT_LT(e0, 0.02) << c.at("text") << ": prefill";
    EXPECT_LT(e1, 0.02) << c.at("text") << ": last step";
    worst = std::max({worst, e0, e1});
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
  std::filesystem::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, LlamaOracle, ::testing::Values("llama2-tiny", "llama3-tiny"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// --prompt renders the checkpoint's declared chat template (the ids of chat.json, which
// transformers' apply_chat_template gave); --prompt-ids also reads .json and .npy lists, and
// refuses ids outside the vocabulary.
TEST(LlamaRun, PromptAndPromptIdFiles) {
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / "ferry_llama_run";
  std::filesystem::create_directories(tmp);
  for (const char* name : {"llama2-tiny", "llama3-tiny"}) {
    const std::string model = data_dir() + "/" + name;
    const json chat = read_json(model + "/chat.json").at("cases").at(0);
    ASSERT_TRUE(chat.at("system").is_null());
    const std::string dump = (tmp / name).string();
    const auto run =
        testing::run_ferry("run --model " + model + " --backend cpu --quiet --json " +
                           "--greedy --max-tokens 2 --prompt '" +
                           chat.at("user").get<std::string>() + "' --dump-inputs " + dump);
    ASSERT_EQ(run.code, 0) << run.err;
    auto ids = read_npy(dump + "/input_ids.npy", 1 << 20);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    std::vector<int32_t> got(ids->values.begin(), ids->values.end());
    EXPECT_EQ(got, chat.at("ids").get<std::vector<int32_t>>()) << name;

    const std::vector<int32_t> prompt = chat.at("ids").get<std::vector<int32_t>>();
    const std::string list = (tmp / (std::string(name) + ".json")).string();
    std::ofstream(list) << json(prompt).dump();
    std::vector<int64_t> wide(prompt.begin(), prompt.end());
    const std::string npy = (tmp / (std::string(name) + ".npy")).string();
    ASSERT_TRUE(
        write_npy(npy, std::span<const int64_t>(wide), {1, static_cast<int64_t>(wide.size())})
            .ok());
    std::vector<json> tokens;
    for (const std::string& arg : {join(prompt), list, npy}) {
      const auto r = testing::run_ferry("run --model " + model +
                                        " --backend cpu --quiet --json --greedy --max-tokens 3 "
                                        "--prompt-ids " +
                                        arg);
      ASSERT_EQ(r.code, 0) << arg << ": " << r.err;
      tokens.push_back(json::parse(r.out).at("tokens"));
      EXPECT_EQ(tokens.back().size(), 3u) << "exactly --max-tokens, no stop token";
    }
    EXPECT_EQ(tokens[0], tokens[1]);
    EXPECT_EQ(tokens[0], tokens[2]);
    const auto bad = testing::run_ferry("run --model " + model +
                                        " --backend cpu --quiet --prompt-ids 1,99999,2");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("99999"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("outside the vocabulary"), std::string::npos) << bad.err;
    const auto junk =
        testing::run_ferry("run --model " + model + " --backend cpu --quiet --prompt-ids 1,x");
    EXPECT_EQ(junk.code, 2);
    EXPECT_NE(junk.err.find("--prompt-ids"), std::string::npos) << junk.err;
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace ferry
