// ferry synth and ferry inspect end to end (the built binary), and the inspect report logic.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>
#include <set>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/inspect_report.h"
#include "cli_runner.h"
#include "core/parse_size.h"
#include "format/safetensors.h"
#include "model/config_json.h"
#include "model/presets.h"
#include "model/weights.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

using testing::CliRun;

CliRun ferry(const std::string& args) {
  return testing::run_ferry(args);
}

// A folder per test, not made yet (synth makes its output folder), removed afterwards.
using Dir = testing::ScratchDir;

TEST(SynthCli, WritesABindableCheckpointWithItsConfig) {
  Dir dir{"ferry_synth_test", /*create=*/false};
  CliRun r = ferry("synth --preset alpamayo-tiny --out " + dir.str() + " --seed 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("synth: wrote"), std::string::npos) << r.err;
  auto config = load_config(dir.str());
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(*config, preset("alpamayo-tiny").value());
  auto ckpt = Checkpoint::open(dir.str());
  ASSERT_TRUE(ckpt.ok()) << ckpt.error().to_string();
  ModelWeights w = describe_weights(*config).value();
  Status bound = bind_checkpoint(w, *ckpt);
  EXPECT_TRUE(bound.ok()) << bound.error().to_string();
  EXPECT_EQ(ckpt->entries().size(), 179u);
  // Norm weights are exactly 1 (bf16 0x3f80).
  const auto* norm = ckpt->find("vlm.model.language_model.layers.0.input_layernorm.weight");
  ASSERT_NE(norm, nullptr);
  auto bytes = ckpt->data(*norm);
  ASSERT_EQ(bytes.size(), 128u);
  for (size_t i = 0; i < bytes.size(); i += 2) {
    EXPECT_EQ(static_cast<int>(bytes[i]) | (static_cast<int>(bytes[i + 1]) << 8), 0x3f80);
  }
}

TEST(SynthCli, SameSeedSameBytesAcrossShardingDifferentSeedDiffers) {
  Dir a{"ferry_synth_test", false}, b{"ferry_synth_test", false}, c{"ferry_synth_test", false};
  ASSERT_EQ(ferry("synth --preset qwen3-tiny --out " + a.str() + " --seed 5").code, 0);
  // Small shards: several files and an index, same tensor bytes.
  CliRun rb = ferry("synth --preset qwen3-tiny --out " + b.str() + " --seed 5 --max-shard 8MB");
  ASSERT_EQ(rb.code, 0) << rb.err;
  ASSERT_EQ(ferry("synth --preset qwen3-tiny --out " + c.str() + " --seed 6").code, 0);
  EXPECT_TRUE(fs::exists(b.path() / "model.safetensors.index.json"));
  auto ca = Checkpoint::open(a.str());
  auto cb = Checkpoint::open(b.str());
  auto cc = Checkpoint::open(c.str());
  ASSERT_TRUE(ca.ok() && cb.ok() && cc.ok());
  EXPECT_EQ(ca->files().size(), 1u);
  EXPECT_GT(cb->files().size(), 1u);
  size_t differing = 0;
  for (const auto& e : ca->entries()) {
    const auto* eb = cb->find(e.info->name);
    const auto* ec = cc->find(e.info->name);
    ASSERT_NE(eb, nullptr);
    ASSERT_NE(ec, nullptr);
    auto da = ca->data(e);
    auto db = cb->data(*eb);
    auto dc = cc->data(*ec);
    EXPECT_TRUE(std::equal(da.begin(), da.end(), db.begin(), db.end())) << e.info->name;
    if (!std::equal(da.begin(), da.end(), dc.begin(), dc.end())) ++differing;
  }
  // Every tensor but the all-ones norms changes with the seed.
  EXPECT_EQ(differing, 1 + 4 * 7 + 1u);
}

TEST(SynthCli, RefusesANonEmptyFolderUnlessForced) {
  Dir dir{"ferry_synth_test", /*create=*/false};
  ASSERT_EQ(ferry("synth --preset qwen3-tiny --out " + dir.str() + " --max-shard 8MB").code, 0);
  const size_t sharded = std::distance(fs::directory_iterator(dir.str()), fs::directory_iterator());
  CliRun again = ferry("synth --preset qwen3-tiny --out " + dir.str());
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("holds a checkpoint (use --force"), std::string::npos) << again.err;
  std::ofstream(dir.path() / "notes.txt") << "keep me";
  CliRun forced = ferry("synth --preset qwen3-tiny --out " + dir.str() + " --force");
  ASSERT_EQ(forced.code, 0) << forced.err;
  // The old shards and index are gone (one file now), other files are left alone.
  EXPECT_FALSE(fs::exists(dir.path() / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir.path() / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(dir.path() / "notes.txt"));
  EXPECT_GT(sharded, 4u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.str()), fs::directory_iterator()), 4);
  EXPECT_TRUE(Checkpoint::open(dir.str()).ok());
}

TEST(SynthCli, BadArgumentsExitTwoWithOneLine) {
  Dir dir{"ferry_synth_test", /*create=*/false};
  CliRun r = ferry("synth --preset no-such --out " + dir.str());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.rfind("ferry synth: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("unknown preset 'no-such'"), std::string::npos);
  CliRun s = ferry("synth --preset qwen3-tiny --out " + dir.str() + " --max-shard lots");
  EXPECT_EQ(s.code, 2);
  EXPECT_NE(s.err.find("'lots' is not a size"), std::string::npos) << s.err;
  EXPECT_FALSE(fs::exists(dir.str()));
}

TEST(InspectCli, PrintsModuleTotalsForTheTinyModel) {
  Dir dir{"ferry_synth_test", /*create=*/false};
  ASSERT_EQ(ferry("synth --preset alpamayo-tiny --out " + dir.str()).code, 0);
  CliRun r = ferry("inspect " + dir.str());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("architecture: alpamayo_r1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("binding: ok"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("text.layers.0-3"), std::string::npos) << r.out;
  CliRun j = ferry("inspect --json --tensors " + dir.str());
  ASSERT_EQ(j.code, 0) << j.err;
  auto doc = nlohmann::json::parse(j.out);
  ModelWeights w = describe_weights(preset("alpamayo-tiny").value()).value();
  EXPECT_EQ(doc["total"]["params"], w.total_params());
  EXPECT_EQ(doc["total"]["tensors"], 179);
  std::map<std::string, int64_t> expected;
  for (const auto& g : w.groups) expected[group_module_name(g.kind)] += g.params();
  ASSERT_EQ(doc["modules"].size(), 4u);
  for (const auto& m : doc["modules"]) {
    EXPECT_EQ(m["params"], expected[m["module"].get<std::string>()]) << m.dump();
  }
  EXPECT_EQ(doc["groups"][0]["name"], "vision.patch");
  EXPECT_EQ(doc["groups"][0]["tensor_list"].size(), 3u);
}

TEST(InspectCli, BadFilesExitTwoWithOneLine) {
  Dir dir{"ferry_synth_test", /*create=*/false};
  fs::create_directories(dir.str());
  CliRun missing = ferry("inspect " + (dir.path() / "nothing").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_EQ(missing.err.rfind("ferry inspect: ", 0), 0u) << missing.err;
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1);
  std::ofstream(dir.path() / "junk.safetensors", std::ios::binary)
      << std::string("\xff\xff\xff\xff", 4);
  CliRun junk = ferry("inspect " + (dir.path() / "junk.safetensors").string());
  EXPECT_EQ(junk.code, 2);
  EXPECT_EQ(junk.err.rfind("ferry inspect: ", 0), 0u) << junk.err;
  EXPECT_EQ(std::count(junk.err.begin(), junk.err.end(), '\n'), 1);
}

TEST(InspectCli, UnrecognizedConfigFallsBackToPrefixes) {
  Dir dir{"ferry_synth_test", /*create=*/false};
  ASSERT_EQ(ferry("synth --preset qwen3-tiny --out " + dir.str()).code, 0);
  std::ofstream(dir.path() / "config.json") << R"({"model_type": "gpt2"})";
  CliRun r = ferry("inspect " + dir.str());
  // Printed by prefix, saying why, and a success: the file was read (issue 27 item 6).
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("architecture: none recognised"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'gpt2'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.layers.0-3"), std::string::npos) << r.out;
}

TEST(InspectReport, HumanUnitsAndPrefixes) {
  EXPECT_EQ(human_params(576'388'336), "576.4M");
  EXPECT_EQ(human_params(7'583'806'464), "7.58B");
  EXPECT_EQ(human_params(6146), "6146");
  EXPECT_EQ(human_bytes(1'152'776'672), "1.15 GB");
  EXPECT_EQ(human_bytes(196), "196 B");
  EXPECT_EQ(cli::prefix_group("model.layers.3.mlp.up_proj.weight"), "model.layers.3");
  EXPECT_EQ(cli::prefix_group("model.embed_tokens.weight"), "model.embed_tokens");
  EXPECT_EQ(cli::prefix_group("lm_head.weight"), "lm_head");
  EXPECT_EQ(cli::prefix_group("weird"), "weird");
}

TEST(InspectReport, TableGroupsAndBindingProblems) {
  ModelConfig c = preset("qwen3-tiny").value();
  ModelWeights w = describe_weights(c).value();
  cli::InspectReport r;
  std::set<std::string> seen;
  for (const auto& g : w.groups)
    for (const auto& t : g.tensors) {
      // As the checkpoint lists them: a head chunk's tensor once, whole.
      if (!seen.insert(t.checkpoint_name).second || t.checkpoint_name == "lm_head.weight") continue;
      uint64_t bytes = dtype_size(t.dtype);
      for (int64_t d : t.checkpoint_shape()) bytes *= static_cast<uint64_t>(d);
      r.tensors.push_back({t.checkpoint_name, t.dtype, t.checkpoint_shape(), bytes, "f"});
    }
  r.tensors.push_back({"extra.thing.weight", DType::f32, {3}, 12, "f"});
  cli::group_report(r, &c);
  EXPECT_EQ(r.architecture, "qwen3");
  EXPECT_NE(r.binding.find("tensor lm_head.weight: missing"), std::string::npos) << r.binding;
  EXPECT_NE(r.binding.find("tensor extra.thing.weight: unexpected"), std::string::npos);
  // embed, 4 layers of 3 part groups, head (norm only), extra.thing
  ASSERT_EQ(r.groups.size(), 1 + 4 * 3 + 1 + 1u);
  EXPECT_EQ(r.groups.back().name, "extra.thing");
  EXPECT_EQ(r.groups.back().module, "extra.thing");
  EXPECT_EQ(r.total_params, w.total_params() - 151'936LL * 64 + 3);
}

TEST(SizeArg, Units) {
  EXPECT_EQ(parse_size("5GB").value(), 5'000'000'000ull);
  EXPECT_EQ(parse_size("500mb").value(), 500'000'000ull);
  EXPECT_EQ(parse_size("2GiB").value(), 2ull << 30);
  EXPECT_EQ(parse_size("4096").value(), 4096ull);
  EXPECT_FALSE(parse_size("").ok());
  EXPECT_FALSE(parse_size("0GB").ok());
  EXPECT_FALSE(parse_size("GB").ok());
  EXPECT_FALSE(parse_size("-5GB").ok());
  EXPECT_FALSE(parse_size("99999999999999999999").ok());
  EXPECT_FALSE(parse_size("20000000000TB").ok());
  // Fractions, as people write budgets.
  EXPECT_EQ(parse_size("2.5GiB").value(), (5ull << 30) / 2);
  EXPECT_EQ(parse_size("1.25GB").value(), 1'250'000'000ull);
  EXPECT_EQ(parse_size("0.5KiB").value(), 512ull);
  EXPECT_FALSE(parse_size("2.GiB").ok());
  EXPECT_FALSE(parse_size("2.5.1GiB").ok());
  EXPECT_FALSE(parse_size(".5GiB").ok());
  EXPECT_FALSE(parse_size("0.0GB").ok());
}

}  // namespace
}  // namespace ferry
