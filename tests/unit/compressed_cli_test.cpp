// --compress-at-open and --compressed through the binary on a tiny synthesized Qwen3 (CPU
// backend): a run with compressed groups gives the all-resident bytes, `ferry plan` prints each
// group's form, and --compressed without compressed forms is refused naming the flag to add.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "model/presets.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

const std::string kWorkload = " --prompt-tokens 24 --tokens 3";

class CompressedCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = preset("qwen3-tiny");
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(testing::write_test_checkpoint(dir_ + "/model", *c, 2).ok());
  }
  std::string model() const { return " --model " + dir_ + "/model --backend cpu" + kWorkload; }

  testing::ScratchDir scratch_{"ferry_compressed_cli"};
  std::string dir_ = scratch_.str();
};

TEST_F(CompressedCli, CompressedGroupsRunBitIdenticalAndThePlanShowsTheirForm) {
  const testing::CliRun want = testing::run_ferry("run" + model() + " --json");
  ASSERT_EQ(want.code, 0) << want.err;
  const testing::CliRun got = testing::run_ferry(
      "run" + model() + " --json --compress-at-open --resident 1 --compressed 0,1,text.head.0");
  ASSERT_EQ(got.code, 0) << got.err;
  const nlohmann::json a = nlohmann::json::parse(want.out), b = nlohmann::json::parse(got.out);
  for (const char* key : {"tokens", "logits_hash", "prefill_logits_hash"}) {
    EXPECT_EQ(a[key], b[key]) << key;
  }
  const testing::CliRun dry =
      testing::run_ferry("plan" + model() + " --compress-at-open --resident 1 --compressed 0,1");
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_NE(dry.out.find("streamed compressed text.layers.0"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("resident compressed text.layers.1"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("staging    2 buffers of"), std::string::npos) << dry.out;
}

TEST_F(CompressedCli, CompressedWithoutCompressedFormsIsRefused) {
  const testing::CliRun r = testing::run_ferry("run" + model() + " --compressed 0");
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(r.signaled);
  EXPECT_NE(r.err.find("--compress-at-open"), std::string::npos) << r.err;
  // --dry-run opens no checkpoint: it says where to look instead.
  const testing::CliRun dry =
      testing::run_ferry("run" + model() + " --dry-run --compress-at-open --compressed 0");
  EXPECT_NE(dry.code, 0);
  EXPECT_NE(dry.err.find("ferry plan --compress-at-open"), std::string::npos) << dry.err;
}

}  // namespace
}  // namespace ferry
