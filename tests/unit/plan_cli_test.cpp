// `ferry plan`, `ferry profile` and `ferry bench --sweep` through the binary on a tiny synthesized
// Alpamayo (CPU backend): a plan written by `plan` runs bit-identical to all-resident; the
// predicted sweep never rises with the budget and is plotted; a measured profile round-trips
// through `plan`, `run` and `bench`; a bad profile file is named.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"
#include "model/presets.h"
#include "plan/plan.h"
#include "plan/profile.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

// The same small workload for every command, spelled by the same flags.
const std::string kWorkload =
    " --images 1 --image-size 64x64 --prompt-tokens 90 --tokens 3 --steps 2";

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = preset("alpamayo-tiny");
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE(testing::write_test_checkpoint(dir_ + "/model", *c, 2).ok());
  }

  std::string model() const { return " --model " + dir_ + "/model --backend cpu"; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

  nlohmann::json ok_json(const std::string& args) {
    const testing::CliRun r = testing::run_ferry(args);
    EXPECT_FALSE(r.signaled) << r.err;
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    if (r.code != 0) return nlohmann::json();
    return nlohmann::json::parse(r.out);
  }
  nlohmann::json sweep() { return ok_json("plan" + model() + kWorkload + " --sweep --json"); }
  // A budget from the sweep at which the plan streams some groups and keeps others resident.
  uint64_t middle_budget() {
    const nlohmann::json s = sweep();
    for (const auto& row : s["sweep"]) {
      if (row["slots"].get<int>() > 0 && row["resident_bytes"].get<uint64_t>() > 0) {
        return row["vram"].get<uint64_t>();
      }
    }
    ADD_FAILURE() << "no budget of the sweep both streams and keeps groups resident";
    return 0;
  }
  void expect_all_resident_outputs(const nlohmann::json& got) {
    const nlohmann::json want = ok_json("run" + model() + kWorkload + " --json");
    for (const char* key : {"tokens", "logits_hash", "prefill_logits_hash", "actions_hash"}) {
      EXPECT_EQ(got[key], want[key]) << key;
    }
  }

  testing::ScratchDir scratch_{"ferry_plan_cli"};
  std::string dir_ = scratch_.str();
};

TEST_F(PlanCli, APlannedRunGivesTheAllResidentBytes) {
  const uint64_t vram = middle_budget();
  ASSERT_GT(vram, 0u);
  const std::string v = " --vram " + std::to_string(vram);
  const nlohmann::json p =
      ok_json("plan" + model() + kWorkload + v + " --json --out " + file("plan.json"));
  EXPECT_EQ(p["origin"], "planner");
  EXPECT_FALSE(p["plan"]["streamed"].empty());
  EXPECT_FALSE(p["plan"]["resident"].empty());
  EXPECT_LE(p["plan"]["memory"]["total"].get<uint64_t>(), vram);
  const double predicted = p["prediction"]["total_s"].get<double>();
  EXPECT_GT(predicted, 0.0);
  EXPECT_LE(p["lower_bound"]["total_s"].get<double>(), predicted * (1 + 1e-9));
  ASSERT_TRUE(std::filesystem::exists(file("plan.json")));

  const nlohmann::json run = ok_json("run" + model() + kWorkload + v + " --plan " +
                                     file("plan.json") + " --json --check-streams");
  EXPECT_GT(run["streamed_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(run["plan"]["resident"], p["plan"]["resident"]);
  expect_all_resident_outputs(run);
  // Without the file, the session's own planner makes the same plan at the same budget.
  const nlohmann::json planned = ok_json("run" + model() + kWorkload + v + " --json");
  EXPECT_EQ(planned["plan"]["resident"], p["plan"]["resident"]);
  EXPECT_EQ(planned["plan"]["slots"], p["plan"]["slots"]);
}

// Map weighed by measurement: on a packed checkpoint the profile's map pass times every group read
// in place; the planner maps where those times say it pays (here edited to cheap, then dear), only
// groups whose file range is their layout, and a plan that maps runs to the all-resident bytes.
TEST_F(PlanCli, MapIsWeighedByTheProfilesMappedTimes) {
  const uint64_t vram = middle_budget();
  ASSERT_GT(vram, 0u);
  const std::string v = " --vram " + std::to_string(vram);
  const std::string packed = " --model " + file("packed") + " --backend cpu";
  ok_json("pack " + dir_ + "/model " + file("packed") + " --json");
  const nlohmann::json summary =
      ok_json("profile" + packed + kWorkload + v + " --out " + file("profile.json") +
              " --runs 1 --json --quiet --no-second-pass");
  const ModelWeights weights = describe_weights(preset("alpamayo-tiny").value()).value();
  int64_t whole = 0;  // groups that read their whole range (not the row-gathering embedding)
  for (const WeightGroup& g : weights.groups) whole += host_placement_allowed(g) ? 0 : 1;
  EXPECT_EQ(summary["mapped_groups"], whole) << summary.dump();
  EXPECT_EQ(summary["map_pass"].get<std::string>().rfind("mapped (", 0), 0u) << summary.dump();
  auto measured = parse_profile(slurp(file("profile.json")));
  ASSERT_TRUE(measured.ok()) << measured.error().message;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    if (host_placement_allowed(weights.groups[g])) continue;
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      EXPECT_EQ(measured->groups[g].exe_mapped_s[ph].has_value(),
                measured->groups[g].exe_s[ph].has_value())
          << weights.groups[g].name;
    }
  }
  // The same profile with the mapped times edited: as fast as resident (a coherent link), and
  // dearer than copying and running each call one after the other.
  auto edited = [&](const std::string& name, bool cheap) {
    Profile p = *measured;
    for (GroupProfile& g : p.groups) {
      for (size_t ph = 0; ph < kPhaseCount; ++ph) {
        if (!g.exe_mapped_s[ph]) continue;
        g.exe_mapped_s[ph] = cheap ? *g.exe_s[ph] : *g.exe_s[ph] + 10 * g.dma_s + 1e-3;
      }
    }
    std::ofstream(file(name)) << profile_to_json(p);
    return " --profile " + file(name);
  };
  auto mapped_groups = [&](const nlohmann::json& plan) {
    int64_t n = 0;
    for (const auto& name : plan["plan"]["host"]) n += name == "text.embed" ? 0 : 1;
    return n;
  };
  const std::string cheap = edited("cheap.json", true), dear = edited("dear.json", false);
  const nlohmann::json c =
      ok_json("plan" + packed + kWorkload + v + cheap + " --json --out " + file("cheap.plan"));
  EXPECT_GT(mapped_groups(c), 0) << c["plan"].dump();
  EXPECT_GT(c["prediction"]["mapped_bytes"].get<uint64_t>(), 0u);
  EXPECT_LE(c["plan"]["memory"]["total"].get<uint64_t>(), vram);
  const nlohmann::json d = ok_json("plan" + packed + kWorkload + v + dear + " --json");
  EXPECT_EQ(mapped_groups(d), 0) << d["plan"].dump();
  EXPECT_EQ(d["prediction"]["mapped_bytes"], 0);
  const nlohmann::json run = ok_json("run" + packed + kWorkload + v + " --plan " +
                                     file("cheap.plan") + " --json --check-streams");
  expect_all_resident_outputs(run);
  // The unpacked checkpoint: only groups whose range is their layout can be read in place, so
  // the planner maps no other (a session would refuse the plan), and the plan runs.
  const nlohmann::json u =
      ok_json("plan" + model() + kWorkload + v + cheap + " --json --out " + file("u.plan"));
  EXPECT_LT(mapped_groups(u), whole) << u["plan"].dump();
  const nlohmann::json urun =
      ok_json("run" + model() + kWorkload + v + " --plan " + file("u.plan") + " --json");
  expect_all_resident_outputs(urun);
}

// --thorough-search plans with the lent cache priced in every step; its plan runs to the
// all-resident bytes like any other.
TEST_F(PlanCli, AThoroughSearchPlanRuns) {
  const uint64_t vram = middle_budget();
  ASSERT_GT(vram, 0u);
  const std::string v = " --vram " + std::to_string(vram);
  const nlohmann::json p = ok_json("plan" + model() + kWorkload + v +
                                   " --thorough-search --json --out " + file("thorough.plan"));
  EXPECT_EQ(p["origin"], "planner");
  EXPECT_LE(p["plan"]["memory"]["total"].get<uint64_t>(), vram);
  const nlohmann::json run = ok_json("run" + model() + kWorkload + v + " --plan " +
                                     file("thorough.plan") + " --json --check-streams");
  expect_all_resident_outputs(run);
}

// --runtime plans for another device: its runtime and the registered tier's page tables are set
// apart, so less is left for weights than on this backend, which sets none apart.
TEST_F(PlanCli, AnotherDevicesRuntimeIsSetApart) {
  const uint64_t vram = middle_budget();
  ASSERT_GT(vram, 0u);
  const std::string v = " --vram " + std::to_string(vram + (8u << 20));
  const nlohmann::json here = ok_json("plan" + model() + kWorkload + v + " --json");
  const nlohmann::json there = ok_json("plan" + model() + kWorkload + v + " --runtime 8MiB --json");
  EXPECT_FALSE(here["plan"]["memory"].contains("runtime"));
  EXPECT_EQ(there["plan"]["memory"]["runtime"].get<uint64_t>(), 8u << 20);
  EXPECT_GT(there["plan"]["memory"]["host page tables"].get<uint64_t>(), 0u);
  EXPECT_EQ(there["fixed_bytes"].get<uint64_t>(),
            here["fixed_bytes"].get<uint64_t>() + (8u << 20) +
                there["plan"]["memory"]["host page tables"].get<uint64_t>());
  EXPECT_LE(there["plan"]["memory"]["total"].get<uint64_t>(), vram + (8u << 20));
  for (const char* bad : {" --runtime 0", " --runtime lots"}) {
    const testing::CliRun r = testing::run_ferry("plan" + model() + kWorkload + v + bad);
    EXPECT_NE(r.code, 0) << bad;
    EXPECT_NE(r.err.find("--runtime"), std::string::npos) << r.err;
  }
}

// --runtime plans for the other device's registered tier, not this machine's: with --host-path
// storage (what auto takes here when the checkpoint does not fit in this machine's memory) the
// plan still reads the embedding on the host, sets page tables apart and is priced the same. Before
// the fix such a plan kept every group off the host, and the H200's 8 GiB prediction rose from
// 3.98 to 4.47 s on a machine with less free memory than the checkpoint.
TEST_F(PlanCli, AnotherDevicesPlanIgnoresThisMachinesHostPath) {
  const uint64_t vram = middle_budget();
  ASSERT_GT(vram, 0u);
  const std::string v = " --vram " + std::to_string(vram + (8u << 20)) + " --runtime 8MiB --json";
  const nlohmann::json as_is = ok_json("plan" + model() + kWorkload + v);
  ASSERT_FALSE(as_is["plan"]["host"].empty()) << as_is["plan"].dump();
  for (const char* path : {" --host-path storage", " --host-path bounce"}) {
    const nlohmann::json other = ok_json("plan" + model() + kWorkload + v + path);
    ASSERT_FALSE(other.is_null()) << path;
    EXPECT_GT(other["plan"]["memory"]["host page tables"].get<uint64_t>(), 0u) << path;
    EXPECT_EQ(other["plan"]["memory"], as_is["plan"]["memory"]) << path;
    EXPECT_EQ(other["plan"]["host"], as_is["plan"]["host"]) << path;
    EXPECT_EQ(other["plan"]["resident"], as_is["plan"]["resident"]) << path;
    EXPECT_EQ(other["prediction"], as_is["prediction"]) << path;
  }
}

TEST_F(PlanCli, TheSweepNeverRisesAndIsPlotted) {
  const nlohmann::json s =
      ok_json("plan" + model() + kWorkload + " --sweep --json --plot " + file("sweep.svg"));
  const auto& rows = s["sweep"];
  ASSERT_GE(rows.size(), 12u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double t = rows[i]["predicted_s"].get<double>();
    EXPECT_LE(rows[i]["bound_s"].get<double>(), t * (1 + 1e-9));
    if (i > 0) {
      EXPECT_GT(rows[i]["vram"].get<uint64_t>(), rows[i - 1]["vram"].get<uint64_t>());
      EXPECT_LE(t, rows[i - 1]["predicted_s"].get<double>()) << "row " << i;
    }
  }
  EXPECT_EQ(rows.back()["predicted_link_bytes"].get<uint64_t>(), 0u);
  const std::string svg = slurp(file("sweep.svg"));
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("T_lb"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // The table form says the same.
  const testing::CliRun text = testing::run_ferry("plan" + model() + kWorkload + " --sweep");
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("predicted"), std::string::npos);
  // One plan at a time: --out with --sweep is refused.
  const testing::CliRun both =
      testing::run_ferry("plan" + model() + kWorkload + " --sweep --out " + file("x.json"));
  EXPECT_EQ(both.code, 2);
}

// --what-if: the profile re-priced for another machine, every row and line labelled a projection,
// copies priced at the target's link, no budget above its VRAM, and one-line errors.
TEST_F(PlanCli, AWhatIfIsAProjectionForTheTarget) {
  const std::string rt = " --runtime 8MiB";
  const nlohmann::json base = ok_json("plan" + model() + kWorkload + rt + " --sweep --json");
  // The CPU backend's estimate copies at 10 GB/s: half that doubles every copy.
  const nlohmann::json half = ok_json("plan" + model() + kWorkload + rt +
                                      " --what-if link=5GB/s --json --plot " + file("wi.svg"));
  ASSERT_TRUE(half.contains("what_if")) << half.dump();
  EXPECT_EQ(half["what_if"]["projection"], true);
  EXPECT_DOUBLE_EQ(half["what_if"]["copy_scale"].get<double>(), 2.0);
  // Compute as it was (only the embedding's row gathers move with the link).
  EXPECT_DOUBLE_EQ(half["what_if"]["exe_scale"]["min"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(half["what_if"]["exe_scale"]["max"].get<double>(), 1.0);
  EXPECT_EQ(half["what_if"]["runtime_assumed"], false);
  EXPECT_EQ(half["profile"]["link_bytes_per_s"].get<double>(), 5e9);
  ASSERT_EQ(half["sweep"].size(), base["sweep"].size());
  for (const auto& row : half["sweep"]) EXPECT_EQ(row["projected"], true);
  // The smallest budget streams: slower at half the link.
  EXPECT_GT(half["sweep"][0]["predicted_s"].get<double>(),
            base["sweep"][0]["predicted_s"].get<double>());
  EXPECT_NE(slurp(file("wi.svg")).find("projection"), std::string::npos);

  // A VRAM below all-resident: no budget above it, the last one at it.
  uint64_t cap = 0;
  for (const auto& row : base["sweep"]) {
    if (cap == 0 && row["slots"].get<int>() > 0 && row["resident_bytes"].get<uint64_t>() > 0) {
      cap = row["vram"].get<uint64_t>();
    }
  }
  ASSERT_GT(cap, 0u);
  const nlohmann::json capped =
      ok_json("plan" + model() + kWorkload + rt +
              " --what-if link=5GB/s,vram=" + std::to_string(cap) + " --json");
  ASSERT_FALSE(capped["sweep"].empty());
  for (const auto& row : capped["sweep"]) EXPECT_LE(row["vram"].get<uint64_t>(), cap);
  EXPECT_EQ(capped["sweep"].back()["vram"].get<uint64_t>(), cap);

  // Text: the header lines say projection, every line of the report is marked.
  const testing::CliRun text =
      testing::run_ferry("plan" + model() + kWorkload + " --what-if rtx-4080");
  ASSERT_EQ(text.code, 0) << text.err;
  std::istringstream lines(text.out);
  std::string line;
  int marked = 0;
  while (std::getline(lines, line)) {
    EXPECT_TRUE(line.rfind("projection", 0) == 0 || line.rfind("projected | ", 0) == 0) << line;
    ++marked;
  }
  EXPECT_GT(marked, 10);
  EXPECT_NE(text.out.find("assumed: the H200's"), std::string::npos) << text.out;

  // An integrated card: every group read in place, priced as all resident; no budget to sweep.
  const nlohmann::json orin =
      ok_json("plan" + model() + kWorkload + " --what-if jetson-orin --json");
  EXPECT_EQ(orin["what_if"]["integrated"], true);
  EXPECT_EQ(orin["origin"], "all resident");
  EXPECT_EQ(orin["prediction"]["copies"].get<int64_t>(), 0);
  EXPECT_EQ(
      testing::run_ferry("plan" + model() + kWorkload + " --what-if jetson-orin --vram 1GiB").code,
      2);

  for (const char* bad : {" --what-if rtx-9090", " --what-if link=5", " --what-if fast=1"}) {
    const testing::CliRun r = testing::run_ferry("plan" + model() + kWorkload + bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(r.err.rfind("ferry plan: invalid argument: --what-if: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(PlanCli, AMeasuredProfileRoundTrips) {
  const uint64_t vram = middle_budget();
  ASSERT_GT(vram, 0u);
  const std::string v = " --vram " + std::to_string(vram);
  const nlohmann::json summary =
      ok_json("profile" + model() + kWorkload + " --vram " + std::to_string(vram + (8u << 20)) +
              " --out " + file("profile.json") + " --runs 2 --json --quiet --mode pipelined " +
              "--timeline-out " + file("timelines.json") + " --no-map-pass");
  EXPECT_EQ(summary["out"], file("profile.json"));
  // Without mapped times the planner streams what does not fit (map has its own test below).
  EXPECT_EQ(summary["map_pass"], "none (--no-map-pass)");
  EXPECT_EQ(summary["mapped_groups"], 0);
  // The plan streams through a ring here: the second pass runs it in sequential mode.
  EXPECT_EQ(summary["plan"]["mode"], "pipelined");
  EXPECT_EQ(summary["second_pass"], "sequential");
  // The timelines: one per timed run, every call with its group, phase and compute span, the
  // streamed ones with their copy span.
  const nlohmann::json t = nlohmann::json::parse(slurp(file("timelines.json")));
  EXPECT_EQ(t["format"], "ferry-timelines");
  EXPECT_EQ(t["version"], 2);
  ASSERT_EQ(t["runs"].size(), 2u);
  const ModelWeights described = describe_weights(preset("alpamayo-tiny").value()).value();
  int64_t streamed = 0;
  const double inputs_end = t["runs"][0]["inputs_end"].get<double>();
  EXPECT_GT(inputs_end, 0.0) << "the pixels went up first";
  for (const auto& c : t["runs"][0]["calls"]) {
    EXPECT_NE(described.find(c["group"].get<std::string>()), nullptr) << c.dump();
    EXPECT_GE(c["end"].get<double>(), c["start"].get<double>());
    EXPECT_GE(c["start"].get<double>(), inputs_end);
    if (c.contains("copy_start")) {
      ++streamed;
      EXPECT_GE(c["copy_end"].get<double>(), c["copy_start"].get<double>());
      EXPECT_GE(c["copy_start"].get<double>(), inputs_end) << "a copy shared the link with them";
      EXPECT_LE(c["copy_end"].get<double>(), c["start"].get<double>() + 1e-6)
          << "a call starts after its copy";
    }
  }
  EXPECT_GT(streamed, 0);
  // scripts/timeline_gaps.py reads a profile's run as it reads a bench's timeline (no host clock).
  {
    const testing::CliRun script =
        testing::run_timeline_gaps("--json --run 1 " + file("timelines.json"));
    ASSERT_EQ(script.code, 0) << script.err;
    const auto gaps = nlohmann::json::parse(script.out);
    EXPECT_EQ(gaps["inputs_end_s"], t["runs"][1]["inputs_end"]);
    size_t calls = 0;
    for (const auto& [name, r] : gaps["stages"].items()) {
      calls += r["calls"].get<size_t>();
      EXPECT_TRUE(r["stage_wall_s"].is_null()) << name;
    }
    EXPECT_EQ(calls, t["runs"][1]["calls"].size());
  }
  auto parsed = parse_profile(slurp(file("profile.json")));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->source, "measured");
  EXPECT_EQ(parsed->runs, 2);
  const ModelWeights weights = describe_weights(preset("alpamayo-tiny").value()).value();
  ASSERT_EQ(parsed->groups.size(), weights.groups.size());
  double copies = 0;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    EXPECT_EQ(parsed->groups[g].name, weights.groups[g].name);
    EXPECT_GE(parsed->groups[g].dma_s, 0.0);
    copies += parsed->groups[g].dma_s;
  }
  EXPECT_GT(copies, 0.0);
  EXPECT_GT(parsed->link_bytes_per_s, 0.0);
  EXPECT_GT(parsed->host.sampling_s, 0.0);
  EXPECT_GT(parsed->host.euler_s, 0.0);
  // Every timed (group, phase) has both times.
  for (const GroupProfile& g : parsed->groups) {
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      EXPECT_EQ(g.exe_s[ph].has_value(), g.exe_copying_s[ph].has_value()) << g.name;
    }
  }
  // All resident (no budget): the second pass runs beside background copies.
  const nlohmann::json resident = ok_json("profile" + model() + kWorkload + " --out " +
                                          file("resident.json") + " --runs 1 --json --quiet");
  EXPECT_EQ(resident["second_pass"], "under copies");
  const nlohmann::json skipped =
      ok_json("profile" + model() + kWorkload + " --out " + file("skipped.json") +
              " --runs 1 --json --quiet " + "--no-second-pass");
  EXPECT_EQ(skipped["second_pass"], "none");

  const std::string with = " --profile " + file("profile.json");
  const nlohmann::json p = ok_json("plan" + model() + kWorkload + v + with + " --json");
  EXPECT_EQ(p["profile"]["source"], "measured");
  const nlohmann::json run = ok_json("run" + model() + kWorkload + v + with + " --json");
  expect_all_resident_outputs(run);
  const nlohmann::json bench =
      ok_json("bench" + model() + kWorkload + v + with + " --runs 1 --warmup 0 --json --quiet");
  EXPECT_EQ(bench["profile_source"], "measured");
  EXPECT_FALSE(bench.contains("prediction_on_path"));  // the registered path: the profile's link
  EXPECT_GT(bench["prediction"]["total_s"].get<double>(), 0.0);
  ASSERT_TRUE(bench.contains("streams")) << "weights stream at this budget";
  // Through the bounce ring the ring's worker enqueues the copies: no timeline, and the bench
  // still measures, with the same tokens. (The storage path shares the ring, but reads nothing
  // in place, so this budget cannot hold its resident embedding.)
  for (const char* path : {"bounce"}) {
    const nlohmann::json ring =
        ok_json("bench" + model() + kWorkload + v + with + " --runs 1 --warmup 0 --json --quiet" +
                " --host-path " + path);
    EXPECT_FALSE(ring.contains("streams")) << path;
    // Priced again with copies at the ring's measured rate, which the profile did not see.
    ASSERT_TRUE(ring.contains("prediction_on_path")) << path;
    EXPECT_GT(ring["prediction_on_path"]["copy_bytes_per_s"].get<double>(), 0.0);
    EXPECT_GE(ring["prediction_on_path"]["total_s"].get<double>(),
              ring["prediction"]["total_s"].get<double>() * (1 - 1e-12));
    EXPECT_GT(ring["stages"]["total"]["median_s"].get<double>(), 0.0) << path;
    EXPECT_GT(ring["streamed_bytes_per_run"].get<double>(), 0.0) << path;
    EXPECT_EQ(ring["tokens"], bench["tokens"]) << path;
  }
  EXPECT_GT(bench["streams"]["copy_busy_s"].get<double>(), 0.0);
  const double hidden = bench["streams"]["hidden_fraction"].get<double>();
  EXPECT_GE(hidden, 0.0);
  EXPECT_LE(hidden, 1.0);

  // A damaged profile is refused with the file's name.
  std::ofstream(file("bad.json")) << "{\"format\": \"ferry-profile\", \"version\": 7}";
  const testing::CliRun bad =
      testing::run_ferry("plan" + model() + kWorkload + v + " --profile " + file("bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find(file("bad.json")), std::string::npos) << bad.err;
}

TEST_F(PlanCli, BenchSweepsMeasuredAgainstPredicted) {
  const nlohmann::json s = sweep();
  const auto& rows = s["sweep"];
  ASSERT_GE(rows.size(), 3u);
  const std::string budgets = std::to_string(rows[1]["vram"].get<uint64_t>()) + "," +
                              std::to_string(rows.back()["vram"].get<uint64_t>());
  const nlohmann::json b =
      ok_json("bench" + model() + kWorkload + " --sweep " + budgets +
              " --runs 1 --warmup 0 --json --quiet --plot " + file("bench.svg"));
  ASSERT_EQ(b["sweep"].size(), 2u);
  for (const auto& row : b["sweep"]) {
    EXPECT_GT(row["measured_s"].get<double>(), 0.0);
    EXPECT_GT(row["predicted_s"].get<double>(), 0.0);
    EXPECT_TRUE(row.contains("error"));
  }
  EXPECT_GT(b["sweep"][0]["measured_link_bytes"].get<double>(), 0.0);
  const std::string svg = slurp(file("bench.svg"));
  EXPECT_NE(svg.find("measured"), std::string::npos);
  // The budget that streams checked the link at open and was priced again with it; the
  // all-resident one had nothing to check.
  const auto& streamed = b["sweep"][0];
  ASSERT_TRUE(streamed.contains("checked_s")) << streamed.dump();
  EXPECT_GT(streamed["link_factor"].get<double>(), 0.0);
  EXPECT_GT(streamed["checked_s"].get<double>(), 0.0);
  EXPECT_TRUE(streamed.contains("error_checked"));
  EXPECT_FALSE(b["sweep"][1].contains("checked_s"));
  EXPECT_GE(b["max_abs_error_checked"].get<double>(), 0.0);
  EXPECT_NE(svg.find("link checked at open"), std::string::npos);
  // The CPU holds every weight: the all-resident run is measured, and T_lb's compute term is
  // never above it; the bound is still the larger of its terms.
  ASSERT_TRUE(b["all_resident_s"].is_number()) << b["all_resident_note"];
  const double all = b["all_resident_s"].get<double>();
  EXPECT_GT(all, 0.0);
  // Its prediction is the top budget's (the same plan: every weight resident).
  ASSERT_TRUE(b["all_resident_predicted_s"].is_number());
  EXPECT_DOUBLE_EQ(b["all_resident_predicted_s"].get<double>(),
                   b["sweep"][1]["predicted_s"].get<double>());
  for (const auto& row : b["sweep"]) {
    const double compute = row["bound_compute_s"].get<double>();
    const double link = row["bound_link_s"].get<double>();
    EXPECT_GT(compute, 0.0);
    EXPECT_LE(compute, all);
    EXPECT_DOUBLE_EQ(row["bound_s"].get<double>(), std::max(compute, link));
  }
}

// --sweep auto gives each session the weights' share `plan --sweep` plans for (the runtime share
// is whatever that session finds held; none on the CPU), so its top budget keeps every weight
// resident. The CPU cannot count device bytes from outside: no row claims a peak.
TEST_F(PlanCli, BenchSweepAutoMeasuresThePlannedShares) {
  const nlohmann::json planned =
      ok_json("plan" + model() + kWorkload + " --sweep --sweep-points 3 --json");
  const nlohmann::json b =
      ok_json("bench" + model() + kWorkload +
              " --sweep auto --sweep-points 3 --runs 1 --warmup 0 --json --quiet");
  ASSERT_EQ(b["sweep"].size(), planned["sweep"].size());
  for (size_t i = 0; i < b["sweep"].size(); ++i) {
    EXPECT_EQ(b["sweep"][i]["weight_budget"], planned["sweep"][i]["weight_budget"]) << i;
    EXPECT_EQ(b["sweep"][i]["vram"], planned["sweep"][i]["vram"]) << i;
    EXPECT_FALSE(b["sweep"][i].contains("outside_peak_bytes"));
  }
  const auto& top = b["sweep"].back();
  EXPECT_EQ(top["slots"].get<int>(), 0) << top.dump();
  EXPECT_EQ(top["measured_link_bytes"].get<double>(), 0.0);
  EXPECT_GT(b["sweep"][0]["measured_link_bytes"].get<double>(), 0.0);
  EXPECT_EQ(b["outside_peaks"]["read"].get<int>(), 0);
  EXPECT_EQ(b["outside_peaks"]["over_budget"].get<int>(), 0);
}

TEST_F(PlanCli, AutomaticBudget) {
  const nlohmann::json run = ok_json("run" + model() + kWorkload + " --vram auto --json");
  EXPECT_GT(run["plan"]["memory"]["budget"].get<uint64_t>(), 0u);
  expect_all_resident_outputs(run);
  const testing::CliRun bad = testing::run_ferry("run" + model() + " --vram lots");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("auto"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ferry
