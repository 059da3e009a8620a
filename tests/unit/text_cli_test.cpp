// `ferry run` end to end through the binary: the CLI's workload, output and dumps agree with
// the in-process inference.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "exec/resident_weights.h"
#include "model/inference.h"
#include "model/presets.h"
#include "text_test_model.h"

namespace ferry {
namespace {

struct Output {
  int status = -1;
  std::string text;
};

Output run_command(const std::string& cmd) {
  Output out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.text.append(buf.data(), n);
  out.status = ::pclose(p);
  return out;
}

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("ferry_cli_" + std::to_string(::getpid())))
               .string();
    auto c = preset("qwen3-tiny");
    ASSERT_TRUE(c.ok());
    config_ = *c;
    ASSERT_TRUE(testing::write_test_checkpoint(dir_ + "/model", config_, 3).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string ferry(const std::string& args) {
    return std::string(FERRY_BINARY) + " run --model " + dir_ + "/model " + args;
  }

  std::string dir_;
  ModelConfig config_;
};

TEST_F(RunCli, JsonMatchesInProcessRunAndDumpsLogits) {
  const Output o =
      run_command(ferry("--backend cpu --json --prompt-tokens 20 --tokens 3 --seed 9 "
                        "--dump-logits " +
                        dir_ + "/logits.npy"));
  ASSERT_EQ(o.status, 0) << o.text;
  const auto j = nlohmann::json::parse(o.text);

  Workload w;
  w.prompt_tokens = 20;
  w.gen_tokens = 3;
  w.seed = 9;
  auto weights = describe_weights(config_);
  auto ckpt = Checkpoint::open(dir_ + "/model");
  ASSERT_TRUE(weights.ok() && ckpt.ok());
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();
  auto resident = ResidentWeights::load(*backend, *stream, *weights, *ckpt);
  ASSERT_TRUE(resident.ok());
  auto r = run_inference(*backend, config_, *weights, *resident, w, {});
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(), r->tokens);
  EXPECT_EQ(j["prompt_tokens"].get<int>(), 20);
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(r->logits_hash));
  EXPECT_EQ(j["logits_hash"].get<std::string>(), hash);

  // [1 + 2 decode steps, vocab] f32 after a 128-byte-aligned .npy header.
  std::ifstream f(dir_ + "/logits.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(1, 5), "NUMPY");
  const size_t header =
      10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
  EXPECT_EQ(header % 64, 0u);
  EXPECT_NE(bytes.find("'shape': (3, " + std::to_string(config_.text().vocab_size) + ")"),
            std::string::npos);
  ASSERT_EQ(bytes.size(), header + 3 * static_cast<size_t>(config_.text().vocab_size) * 4);
  float first = 0;
  std::memcpy(&first, bytes.data() + header, 4);
  EXPECT_EQ(first, r->prefill_logits[0]);
}

TEST_F(RunCli, DryRunAndErrors) {
  const Output dry = run_command(ferry("--dry-run --tokens 4"));
  ASSERT_EQ(dry.status, 0) << dry.text;
  EXPECT_NE(dry.text.find("decode steps 0..2"), std::string::npos) << dry.text;
  EXPECT_NE(dry.text.find("text.layers.0..3"), std::string::npos) << dry.text;
  const Output images = run_command(ferry("--images 2"));
  EXPECT_NE(images.status, 0);
  EXPECT_NE(images.text.find("ferry run:"), std::string::npos) << images.text;
  const Output missing = run_command(std::string(FERRY_BINARY) + " run --model " + dir_ + "/none");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.text.find("ferry run:"), std::string::npos) << missing.text;
}

}  // namespace
}  // namespace ferry
