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
#include "cli_runner.h"
#include "exec/session.h"
#include "model/inference.h"
#include "model/presets.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = preset("qwen3-tiny");
    ASSERT_TRUE(c.ok());
    config_ = *c;
    ASSERT_TRUE(testing::write_test_checkpoint(dir_ + "/model", config_, 3).ok());
  }

  testing::CliRun ferry_run(const std::string& args) {
    return testing::run_ferry("run --model " + dir_ + "/model " + args);
  }

  testing::ScratchDir scratch_{"ferry_cli"};
  std::string dir_ = scratch_.str();
  ModelConfig config_;
};

TEST_F(RunCli, JsonMatchesInProcessRunAndDumpsLogits) {
  const testing::CliRun o = ferry_run(
      "--backend cpu --json --prompt-tokens 20 --tokens 3 --seed 9 "
      "--dump-logits " +
      dir_ + "/logits.npy");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);

  Workload w;
  w.prompt_tokens = 20;
  w.gen_tokens = 3;
  w.seed = 9;
  auto weights = describe_weights(config_);
  auto ckpt = Checkpoint::open(dir_ + "/model");
  ASSERT_TRUE(weights.ok() && ckpt.ok());
  ASSERT_TRUE(bind_checkpoint(*weights, *ckpt).ok());
  auto backend = create_cpu_backend();
  // The session `ferry run` opens without --vram: every group resident.
  auto session = Session::open(*backend, config_, *weights, *ckpt, w, SessionOptions{});
  ASSERT_TRUE(session.ok()) << session.error().to_string();
  auto r = (*session)->run();
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
  const testing::CliRun dry = ferry_run("--dry-run --tokens 4");
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("decode steps 0..2"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("text.layers.0..3"), std::string::npos) << dry.out;
  const testing::CliRun images = ferry_run("--images 2");
  EXPECT_EQ(images.code, 2);
  EXPECT_FALSE(images.signaled);
  EXPECT_NE(images.err.find("ferry run:"), std::string::npos) << images.err;
  const testing::CliRun missing = testing::run_ferry("run --model " + dir_ + "/none");
  EXPECT_EQ(missing.code, 2);
  EXPECT_FALSE(missing.signaled);
  EXPECT_NE(missing.err.find("ferry run:"), std::string::npos) << missing.err;
}

TEST_F(RunCli, GraphsFlagChangesNothingInTheOutput) {
  const testing::CliRun on = ferry_run("--json --tokens 5 --graphs on --backend cpu");
  const testing::CliRun off = ferry_run("--json --tokens 5 --graphs off --backend cpu");
  ASSERT_EQ(on.code, 0) << on.err;
  ASSERT_EQ(off.code, 0) << off.err;
  auto field = [](const std::string& out, const std::string& key) {
    const size_t end = out.find_last_not_of('\n');
    const size_t begin = out.rfind('\n', end);
    const nlohmann::json j =
        nlohmann::json::parse(out.substr(begin == std::string::npos ? 0 : begin + 1));
    return j.at(key).dump();
  };
  EXPECT_EQ(field(on.out, "tokens"), field(off.out, "tokens"));
  EXPECT_EQ(field(on.out, "logits_hash"), field(off.out, "logits_hash"));
  const testing::CliRun bad = ferry_run("--graphs maybe");
  EXPECT_NE(bad.code, 0);
  EXPECT_FALSE(bad.signaled);
  EXPECT_NE(bad.err.find("on or off"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ferry
