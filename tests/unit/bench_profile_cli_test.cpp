// `ferry bench --op-profile` through the binary on a tiny synthesized Alpamayo: the JSON carries
// the profile of every stage, and the table says how ops were timed. And `--timeline-out`, read
// back by scripts/timeline_gaps.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_runner.h"
#include "model/presets.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

class BenchProfileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = preset("alpamayo-tiny");
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(testing::write_test_checkpoint(dir_, *c, 2).ok());
  }

  testing::CliRun bench(const std::string& args) {
    return testing::run_ferry("bench --model " + dir_ +
                              " --backend cpu --runs 1 --warmup 0 --images 1 --image-size 64x64 "
                              "--prompt-tokens 90 --tokens 3 --steps 2 " +
                              args);
  }

  testing::ScratchDir scratch_{"ferry_bench_profile", /*create=*/false};
  std::string dir_ = scratch_.str();
};

TEST_F(BenchProfileCli, JsonHasTheProfileOfEveryStage) {
  const testing::CliRun o = bench("--op-profile --json");
  ASSERT_FALSE(o.signaled) << o.err;
  ASSERT_EQ(o.code, 0) << o.err;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_TRUE(j.contains("op_profile")) << o.out;
  const auto& p = j["op_profile"];
  EXPECT_NE(p["method"].get<std::string>().find("synchroniz"), std::string::npos);
  for (const char* stage : {"vision", "prefill", "decode", "expert"}) {
    SCOPED_TRACE(stage);
    ASSERT_TRUE(p["phases"].contains(stage));
    const auto& s = p["phases"][stage];
    const double wall = s["wall_s"].get<double>();
    const double ops_s = s["op_s"].get<double>();
    EXPECT_GT(s["ops"].get<int64_t>(), 0);
    EXPECT_GT(ops_s, 0.0);
    EXPECT_LE(ops_s, wall);
    EXPECT_GT(s["timed_s"].get<double>(), 0.0);
    ASSERT_FALSE(s["kinds"].empty());
    ASSERT_FALSE(s["ops_by_time"].empty());
    int64_t count = 0;
    for (const auto& op : s["ops_by_time"]) {
      for (const char* key : {"op", "shape", "label", "count", "total_s", "mean_us", "share"}) {
        EXPECT_TRUE(op.contains(key)) << key;
      }
      count += op["count"].get<int64_t>();
    }
    EXPECT_EQ(count, s["ops"].get<int64_t>());
  }
  // Decode: 3 tokens on Alpamayo are 3 forward passes after prefill, each with the same ops.
  const auto& decode = p["phases"]["decode"];
  EXPECT_EQ(decode["ops"].get<int64_t>() % 3, 0);
  // The timed stages are still there, and the profile did not change the outputs (bench fails
  // if the profiled run disagrees with the timed one).
  EXPECT_TRUE(j["stages"].contains("decode"));
}

TEST_F(BenchProfileCli, TableNamesTheMethodAndTheTopOps) {
  const testing::CliRun o = bench("--op-profile --op-profile-top 3");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("launch + synchronize latency (~10 us on CUDA)"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("\nvision: "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("\nexpert: "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("  by kind: "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(" linear "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("more shapes)"), std::string::npos) << o.out;
}

TEST_F(BenchProfileCli, WithoutTheFlagNoProfileAndABadTopIsRefused) {
  const testing::CliRun o = bench("--json");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_FALSE(nlohmann::json::parse(o.out).contains("op_profile"));
  const testing::CliRun bad = bench("--op-profile --op-profile-top 0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--op-profile-top"), std::string::npos) << bad.err;
}

// --timeline-out: one more run's every call, resident or streamed, in call order, each copy
// before its call; scripts/timeline_gaps.py reads it back and its stages add up to the run's.
TEST_F(BenchProfileCli, TimelineOutWritesEveryCallAndTheScriptReadsIt) {
  for (const std::string plan : {"", "--resident none "}) {
    const std::string file = scratch_.str() + ".timeline.json";
    const testing::CliRun o = bench(plan + "--json --timeline-out " + file);
    ASSERT_FALSE(o.signaled) << o.err;
    ASSERT_EQ(o.code, 0) << o.err;
    std::ifstream in(file);
    ASSERT_TRUE(in.good()) << file;
    const auto t = nlohmann::json::parse(in);
    EXPECT_EQ(t["format"], "ferry-timeline");
    ASSERT_FALSE(t["calls"].empty());
    int64_t copies = 0;
    double last_end = 0;
    for (const auto& c : t["calls"]) {
      EXPECT_LE(c["start"].get<double>(), c["end"].get<double>()) << c.dump();
      EXPECT_GE(c["start"].get<double>(), last_end - 1e-9) << "one call at a time, in order";
      last_end = c["end"].get<double>();
      if (c.contains("copy_start")) {
        ++copies;
        EXPECT_LE(c["copy_end"].get<double>(), c["start"].get<double>() + 1e-6) << c.dump();
      }
    }
    EXPECT_EQ(copies > 0, !plan.empty()) << "only the streamed plan copies";
    const auto j = nlohmann::json::parse(o.out);
    int64_t calls = 0;
    for (const auto& [name, stage] : t["stage_wall_s"].items()) {
      if (stage.get<double>() > 0) {
        EXPECT_TRUE(j["stages"].contains(name)) << name;
      }
    }
    // The script's account: every call in a stage, device time no less than the spans.
    const testing::CliRun script = testing::run_timeline_gaps("--json " + file);
    ASSERT_EQ(script.code, 0) << script.err;
    const auto parsed = nlohmann::json::parse(script.out);
    EXPECT_EQ(parsed["inputs_end_s"], t["inputs_end"]);
    const auto& rows = parsed["stages"];
    for (const auto& [name, r] : rows.items()) {
      calls += r["calls"].get<int64_t>();
      EXPECT_GE(r["device_s"].get<double>(), r["spans_s"].get<double>()) << name;
    }
    EXPECT_EQ(calls, static_cast<int64_t>(t["calls"].size()));
    std::filesystem::remove(file);
  }
}

}  // namespace
}  // namespace ferry
