// Progress lines of `run` and `bench` (cli/progress.h): the stage, step/steps and the elapsed
// time; nothing at all with --quiet.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli/progress.h"
#include "cli_process.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

TEST(Progress, LineSaysStageStepAndElapsed) {
  cli::Progress p("bench", /*enabled=*/false);
  const std::vector<Call> calls = {
      {0, Phase::prefill, 0}, {1, Phase::prefill, 0}, {2, Phase::prefill, 0},
      {1, Phase::decode, 0},  {2, Phase::decode, 0},  {1, Phase::decode, 1},
      {2, Phase::decode, 1},  {1, Phase::decode, 2},  {2, Phase::decode, 2}};
  p.stage("loading weights");
  EXPECT_EQ(p.line().rfind("bench: loading weights, ", 0), 0u) << p.line();
  p.stage("run 2/5");
  p.begin_calls(calls);
  p.at(calls[0]);
  p.at(calls[1]);
  EXPECT_EQ(p.line().rfind("bench: run 2/5, prefill 2/3, ", 0), 0u) << p.line();
  p.at(calls[6]);
  EXPECT_EQ(p.line().rfind("bench: run 2/5, decode step 2/3, ", 0), 0u) << p.line();
  EXPECT_EQ(p.line().back(), 's');
  p.end_calls();
  EXPECT_EQ(p.line().rfind("bench: run 2/5, ", 0), 0u) << p.line();
}

TEST(Progress, QuietMeansNothingOnStderr) {
  namespace fs = std::filesystem;
  const testing::ScratchDir scratch("ferry_progress", /*create=*/false);
  const fs::path& dir = scratch.path();
  ASSERT_EQ(
      testing::run_ferry_args({"synth", "--preset", "qwen3-tiny", "--out", dir.string()}).code, 0);
  const auto quiet = testing::run_ferry_args({"bench", "--model", dir.string(), "--backend", "cpu",
                                              "--runs", "1", "--warmup", "0", "--quiet"});
  EXPECT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  const auto loud = testing::run_ferry_args(
      {"bench", "--model", dir.string(), "--backend", "cpu", "--runs", "1", "--warmup", "0"});
  EXPECT_EQ(loud.code, 0) << loud.err;
  EXPECT_NE(loud.err.find("bench: run 1/1"), std::string::npos) << loud.err;
}

}  // namespace
}  // namespace ferry
