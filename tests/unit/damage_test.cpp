// Damaged weights are named, not blamed on the code: one NaN or Inf in a weight of each kind of
// weight group of alpamayo-tiny makes `ferry run` stop with exit 2 and one line that names the
// stage where it surfaced and the damaged tensor, and `ferry verify` finds that tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_process.h"
#include "core/finite.h"
#include "format/safetensors.h"
#include "model/config_json.h"
#include "model/prompt.h"
#include "model/weights.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing::count_lines;
using testing::Ended;
using testing::run_ferry_args;

struct Poison {
  std::string group;
  std::string tensor;
  std::string file;
  uint64_t offset = 0;  // of the poisoned bf16 element in the file
  uint16_t bits = 0;
  std::string stage;  // what the run's message must name
};

// The tensor to damage in a group: the largest (a weight matrix), except the position table,
// whose entries only some image sizes read; in the embedding, a row the prompt always uses.
Poison choose(const WeightGroup& g, const Checkpoint& c, int64_t text_hidden, uint16_t bits) {
  const WeightSpec* pick = nullptr;
  for (const WeightSpec& s : g.tensors) {
    if (s.checkpoint_name.find("pos_embed") != std::string::npos) continue;
    if (pick == nullptr || s.bytes > pick->bytes) pick = &s;
  }
  const Checkpoint::Entry* e = c.find(pick->checkpoint_name);
  const uint64_t elements = e->info->bytes / 2;
  const uint64_t element = g.kind == GroupKind::embedding
                               ? static_cast<uint64_t>(kImStart) * text_hidden + 3
                               : elements / 2;
  Poison p;
  p.group = g.name;
  p.tensor = pick->checkpoint_name;
  p.file = c.files()[e->shard].path();
  p.offset = e->info->begin + 2 * element;
  p.bits = bits;
  switch (g.kind) {
    case GroupKind::vision_patch:
    case GroupKind::vision_block:
      p.stage = "in the vision encoder's output";
      break;
    case GroupKind::vision_merger:
      p.stage = g.layer < 0 ? "in the vision encoder's output"
                            : "in the vision encoder's deepstack output";
      break;
    case GroupKind::embedding:
    case GroupKind::decoder_layer:
    case GroupKind::lm_head:
      p.stage = "in the LM logits at prefill";
      break;
    default:
      p.stage = "in the action expert's velocity at flow step 0";
  }
  return p;
}

void write_bits(const Poison& p, uint16_t bits) {
  std::fstream f(p.file, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(p.offset));
  const char b[2] = {static_cast<char>(bits & 0xff), static_cast<char>(bits >> 8)};
  f.write(b, 2);
}

uint16_t read_bits(const Poison& p) {
  std::ifstream f(p.file, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(p.offset));
  unsigned char b[2] = {0, 0};
  f.read(reinterpret_cast<char*>(b), 2);
  return static_cast<uint16_t>(b[0] | (b[1] << 8));
}

TEST(DamagedWeights, EveryKindOfWeightGroupIsNamedAndVerifyFindsIt) {
  const testing::ScratchDir scratch("ferry_damage", /*create=*/false);
  const fs::path& dir = scratch.path();
  const fs::path ck = dir / "alpamayo";
  ASSERT_EQ(run_ferry_args({"synth", "--preset", "alpamayo-tiny", "--out", ck.string()}).code, 0);

  std::vector<Poison> cases;
  {
    const ModelConfig config = load_config(ck.string()).value();
    const ModelWeights weights = describe_weights(config).value();
    const Checkpoint c = Checkpoint::open(ck.string()).value();
    // The first group of each kind, and both kinds of merger (final and deepstack).
    std::vector<std::string> seen;
    const uint16_t kinds_of_damage[] = {0x7fc0, 0x7f80, 0xff80};  // NaN, +Inf, -Inf
    for (const WeightGroup& g : weights.groups) {
      const std::string key = std::string(group_kind_name(g.kind)) +
                              (g.kind == GroupKind::vision_merger && g.layer < 0 ? "/final" : "");
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      cases.push_back(choose(g, c, config.text().hidden_size, kinds_of_damage[cases.size() % 3]));
    }
  }
  ASSERT_EQ(cases.size(), 10u);  // 9 kinds, the merger twice

  const std::vector<std::string> run{"run",     "--model",  ck.string(), "--backend", "cpu",
                                     "--quiet", "--tokens", "2",         "--steps",   "2"};
  for (const Poison& p : cases) {
    SCOPED_TRACE(p.group + ": " + p.tensor);
    const uint16_t good = read_bits(p);
    write_bits(p, p.bits);

    const Ended r = run_ferry_args(run);
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("ferry run: damaged: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(p.stage), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tensor " + p.tensor + " "), std::string::npos) << r.err;

    const Ended v = run_ferry_args({"verify", "--json", ck.string()});
    EXPECT_FALSE(v.signaled);
    EXPECT_EQ(v.code, 1) << v.err;
    const auto j = nlohmann::json::parse(v.out);
    ASSERT_EQ(j["damaged"].size(), 1u) << v.out;
    EXPECT_EQ(j["damaged"][0]["tensor"], p.tensor);
    EXPECT_EQ(j["damaged"][0]["group"], p.group);
    EXPECT_EQ(j["damaged"][0]["nan"].get<int>() + j["damaged"][0]["inf"].get<int>(), 1);

    write_bits(p, good);
  }
  const Ended clean = run_ferry_args({"verify", ck.string()});
  EXPECT_EQ(clean.code, 0) << clean.err;
  EXPECT_NE(clean.out.find("ok: every value is finite"), std::string::npos) << clean.out;
}

TEST(DamagedWeights, CountsByDtype) {
  // bf16: 1.0, NaN, +Inf, -Inf, max finite
  const uint16_t bf16[] = {0x3f80, 0x7fc1, 0x7f80, 0xff80, 0x7f7f};
  NonFiniteCount c =
      count_nonfinite(reinterpret_cast<const std::byte*>(bf16), sizeof bf16, DType::bf16, 10);
  EXPECT_EQ(c.nan, 1u);
  EXPECT_EQ(c.inf, 2u);
  EXPECT_EQ(c.first, 11u);
  const float f32[] = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN()};
  c = count_nonfinite(reinterpret_cast<const std::byte*>(f32), sizeof f32, DType::f32);
  EXPECT_EQ(c.nan, 1u);
  EXPECT_EQ(c.first, 2u);
  const uint16_t f16[] = {0x7c00, 0x3c00};  // +Inf, 1.0
  EXPECT_EQ(count_nonfinite(reinterpret_cast<const std::byte*>(f16), 4, DType::f16).inf, 1u);
  const uint8_t e4m3[] = {0x7f, 0x7e, 0xff};  // NaN, 448, NaN (no Inf in this format)
  EXPECT_EQ(count_nonfinite(reinterpret_cast<const std::byte*>(e4m3), 3, DType::f8_e4m3).nan, 2u);
  const int32_t ints[] = {-1, 0x7f800000};
  EXPECT_EQ(count_nonfinite(reinterpret_cast<const std::byte*>(ints), 8, DType::i32).total(), 0u);
  EXPECT_TRUE(all_finite_bf16(std::vector<uint16_t>{0x3f80, 0xc000}));
  EXPECT_FALSE(all_finite_bf16(std::vector<uint16_t>{0x3f80, 0xff80}));
}

}  // namespace
}  // namespace ferry
