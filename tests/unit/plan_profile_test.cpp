// Profiles: the JSON round trip, strict parsing of hostile files, the checks against a model and
// its call sequence, and the cost-model estimate.
#include <gtest/gtest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "model/call_sequence.h"
#include "model/cost.h"
#include "model/presets.h"
#include "plan/profile.h"
#include "plan/schedule.h"
#include "plan_toy_model.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

Toy small_toy() {
  ToyBuilder b(2e9);
  const int embed = b.group("text.embed", GroupKind::embedding, 4096, 2e-6);
  const auto layers =
      b.stack("text.layers", GroupKind::decoder_layer, 3, 1024, 1e-6, Phase::prefill, 3e-6);
  const int head = b.group("text.head", GroupKind::lm_head, 2048, 1.5e-6);
  b.exe(embed, Phase::prefill, 1e-7).exe(embed, Phase::decode, 1e-7);
  b.exe(head, Phase::prefill, 2e-6).exe(head, Phase::decode, 2.5e-7);
  for (int l : layers) b.exe(l, Phase::decode, 2e-7);
  std::vector<int> step = {embed};
  step.insert(step.end(), layers.begin(), layers.end());
  step.push_back(head);
  b.step(step, Phase::prefill, 0).step(step, Phase::decode, 0).step(step, Phase::decode, 1);
  b.host(1e-5, 0, 3e-6);
  Toy t = b.build();
  t.profile.runs = 5;
  t.profile.workload = ProfileWorkload{0, 0, 0, 12, 3, 0};
  return t;
}

std::string toy_json() {
  return profile_to_json(small_toy().profile);
}

// The toy's JSON with one edit applied.
std::string edited(const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(toy_json());
  edit(j);
  return j.dump();
}

TEST(PlanProfile, JsonRoundTripKeepsEveryField) {
  const Toy t = small_toy();
  auto back = parse_profile(profile_to_json(t.profile));
  ASSERT_TRUE(back.ok()) << back.error().message;
  const Profile& p = back.value();
  EXPECT_EQ(p.source, "measured");
  EXPECT_EQ(p.device, "toy");
  EXPECT_EQ(p.runs, 5);
  EXPECT_EQ(p.byte_path, "pinned");
  EXPECT_DOUBLE_EQ(p.link_bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(p.peak_flops, t.profile.peak_flops);
  EXPECT_DOUBLE_EQ(p.memory_bandwidth, t.profile.memory_bandwidth);
  EXPECT_DOUBLE_EQ(p.host.sampling_s, 1e-5);
  EXPECT_DOUBLE_EQ(p.host.launch_s, 3e-6);
  ASSERT_TRUE(p.workload.has_value());
  EXPECT_EQ(*p.workload, *t.profile.workload);
  ASSERT_EQ(p.groups.size(), t.profile.groups.size());
  for (size_t i = 0; i < p.groups.size(); ++i) {
    EXPECT_EQ(p.groups[i].name, t.profile.groups[i].name);
    EXPECT_EQ(p.groups[i].bytes, t.profile.groups[i].bytes);
    EXPECT_DOUBLE_EQ(p.groups[i].dma_s, t.profile.groups[i].dma_s);
    for (size_t ph = 0; ph < kPhaseCount; ++ph) {
      ASSERT_EQ(p.groups[i].exe_s[ph].has_value(), t.profile.groups[i].exe_s[ph].has_value());
      if (p.groups[i].exe_s[ph]) {
        EXPECT_DOUBLE_EQ(*p.groups[i].exe_s[ph], *t.profile.groups[i].exe_s[ph]);
      }
    }
  }
  EXPECT_TRUE(check_profile(p, t.weights, t.calls).ok());
}

TEST(PlanProfile, CopyingTimesRoundTripAndVersionOneIsRead) {
  Toy t = small_toy();
  const size_t decode = phase_index(Phase::decode);
  t.profile.groups[1].exe_copying_s[decode] = 2.5e-4;
  const std::string text = profile_to_json(t.profile);
  auto back = parse_profile(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_TRUE(back->groups[1].exe_copying_s[decode].has_value());
  EXPECT_DOUBLE_EQ(*back->groups[1].exe_copying_s[decode], 2.5e-4);
  EXPECT_FALSE(back->groups[2].exe_copying_s[decode].has_value());
  EXPECT_NE(text.find("\"version\": 3"), std::string::npos);
  // The schedule takes the copying time where there is one, else the time alone.
  auto s = make_schedule(t.weights, t.calls, back.value());
  ASSERT_TRUE(s.ok());
  for (size_t i = 0; i < s->calls.size(); ++i) {
    const bool has = s->calls[i].group == 1 && s->calls[i].phase == Phase::decode;
    EXPECT_EQ(s->exe_copying_s[i], has ? 2.5e-4 : s->exe_s[i]) << i;
  }
  // A version 1 file (no copying times) is still read.
  nlohmann::json v1 = nlohmann::json::parse(toy_json());
  v1["version"] = 1;
  auto old = parse_profile(v1.dump());
  ASSERT_TRUE(old.ok()) << old.error().message;
  EXPECT_FALSE(old->groups[1].exe_copying_s[decode].has_value());
}

TEST(PlanProfile, MappedTimesRoundTripAndOnlyVersionThreeHasThem) {
  Toy t = small_toy();
  const size_t decode = phase_index(Phase::decode), prefill = phase_index(Phase::prefill);
  t.profile.groups[1].exe_mapped_s[decode] = 7.5e-4;
  t.profile.groups[1].exe_mapped_s[prefill] = 9.5e-3;
  auto back = parse_profile(profile_to_json(t.profile));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->groups[1].exe_mapped_s, t.profile.groups[1].exe_mapped_s);
  EXPECT_FALSE(back->groups[2].exe_mapped_s[decode].has_value());
  // The schedule: a mapped time per call where measured; the group may be mapped only when every
  // phase it runs in was measured and the caller says its range can be read in place.
  auto s = make_schedule(t.weights, t.calls, back.value());
  ASSERT_TRUE(s.ok());
  for (size_t i = 0; i < s->calls.size(); ++i) {
    if (s->calls[i].group != 1) continue;
    EXPECT_EQ(s->exe_mapped_s[i], s->calls[i].phase == Phase::decode ? 7.5e-4 : 9.5e-3) << i;
  }
  EXPECT_TRUE(s->map_measured[1]);
  EXPECT_FALSE(s->map_measured[2]);
  // A version 2 file has no mapped times: the key is unknown there.
  nlohmann::json v2 = nlohmann::json::parse(profile_to_json(t.profile));
  v2["version"] = 2;
  auto old = parse_profile(v2.dump());
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.error().message.find("exe_mapped_s"), std::string::npos) << old.error().message;
}

// The host's stage entries: kept per phase through the file, absent when not measured, checked
// like every time.
TEST(PlanProfile, StageEntriesRoundTripAndAreChecked) {
  Toy t = small_toy();
  t.profile.host.stage_entry_s[phase_index(Phase::decode)] = 9e-4;
  t.profile.host.stage_entry_s[phase_index(Phase::expert)] = 1.2e-4;
  const std::string text = profile_to_json(t.profile);
  auto back = parse_profile(text);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value().host.stage_entry_s, t.profile.host.stage_entry_s);
  EXPECT_FALSE(back.value().host.stage_entry_s[phase_index(Phase::prefill)].has_value());
  // None measured: no key written, none read.
  EXPECT_EQ(toy_json().find("stage_entry_s"), std::string::npos);
  auto none = parse_profile(toy_json());
  ASSERT_TRUE(none.ok());
  for (const auto& e : none.value().host.stage_entry_s) EXPECT_FALSE(e.has_value());
  for (const auto& [why, value] :
       std::vector<std::pair<std::string, nlohmann::json>>{{"negative", {{"decode", -1.0}}},
                                                           {"unknown phase", {{"train", 1e-3}}},
                                                           {"not an object", 1e-3},
                                                           {"a string", {{"decode", "1ms"}}}}) {
    const std::string bad = edited([&](auto& j) { j["host"]["stage_entry_s"] = value; });
    auto p = parse_profile(bad);
    ASSERT_FALSE(p.ok()) << why;
    EXPECT_NE(p.error().message.find("stage_entry_s"), std::string::npos)
        << why << ": " << p.error().message;
  }
}

TEST(PlanProfile, InputsUploadRoundTripsAndIsChecked) {
  Toy t = small_toy();
  t.profile.host.inputs_s = 6.7e-4;
  auto back = parse_profile(profile_to_json(t.profile));
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_TRUE(back->host.inputs_s.has_value());
  EXPECT_DOUBLE_EQ(*back->host.inputs_s, 6.7e-4);
  // Not measured: no key written, none read (an older profile).
  EXPECT_EQ(toy_json().find("inputs_s"), std::string::npos);
  auto none = parse_profile(toy_json());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->host.inputs_s.has_value());
  for (const auto& [why, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"negative", -1e-3}, {"a string", "1ms"}, {"too long", 1e9}}) {
    auto p = parse_profile(edited([&](auto& j) { j["host"]["inputs_s"] = value; }));
    ASSERT_FALSE(p.ok()) << why;
    EXPECT_NE(p.error().message.find("inputs_s"), std::string::npos)
        << why << ": " << p.error().message;
  }
}

TEST(PlanProfile, HostileFilesAreRefusedWithTheReason) {
  struct Case {
    std::string why;
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"not JSON", "{\"format\": ", "profile"},
      {"another format", edited([](auto& j) { j["format"] = "ferry-plan"; }), "format"},
      {"a future version", edited([](auto& j) { j["version"] = 4; }), "version"},
      {"unknown top key", edited([](auto& j) { j["extra"] = 1; }), "extra"},
      {"missing groups", edited([](auto& j) { j.erase("groups"); }), "groups"},
      {"negative link", edited([](auto& j) { j["link"]["h2d_peak_bytes_per_s"] = -1.0; }),
       "h2d_peak"},
      {"zero link", edited([](auto& j) { j["link"]["h2d_peak_bytes_per_s"] = 0; }), "h2d_peak"},
      {"absurd link", edited([](auto& j) { j["link"]["h2d_peak_bytes_per_s"] = 1e30; }),
       "h2d_peak"},
      {"string time", edited([](auto& j) { j["host"]["sampling_s"] = "fast"; }), "sampling_s"},
      {"bool time", edited([](auto& j) { j["groups"][1]["dma_s"] = true; }), "dma_s"},
      {"negative time", edited([](auto& j) { j["groups"][1]["exe_s"]["decode"] = -1e-3; }),
       "exe_s.decode"},
      {"huge time", edited([](auto& j) { j["groups"][1]["exe_s"]["decode"] = 1e9; }),
       "exe_s.decode"},
      {"unknown phase", edited([](auto& j) { j["groups"][1]["exe_s"]["train"] = 1.0; }), "train"},
      {"fractional bytes", edited([](auto& j) { j["groups"][1]["bytes"] = 10.5; }), "bytes"},
      {"negative bytes", edited([](auto& j) { j["groups"][1]["bytes"] = -4; }), "bytes"},
      {"huge bytes", edited([](auto& j) { j["groups"][1]["bytes"] = 1ull << 60; }), "bytes"},
      {"group twice", edited([](auto& j) { j["groups"][2]["name"] = j["groups"][1]["name"]; }),
       "twice"},
      {"empty name", edited([](auto& j) { j["groups"][0]["name"] = ""; }), "name"},
      {"control character", edited([](auto& j) { j["device"] = "a\nb"; }), "device"},
      {"unknown source", edited([](auto& j) { j["source"] = "guessed"; }), "source"},
      {"zero runs", edited([](auto& j) { j["runs"] = 0; }), "runs"},
      {"workload out of range", edited([](auto& j) { j["workload"]["flow_steps"] = 1 << 30; }),
       "flow_steps"},
      {"duplicate key", "{\"format\": \"ferry-profile\", \"format\": \"ferry-profile\"}",
       "duplicate"},
      {"not an object", "[1, 2]", "object"},
  };
  // Each optional time per phase: negative, for a phase exe_s lacks, not an object.
  std::vector<Case> all = cases;
  for (const char* key : {"exe_copying_s", "exe_mapped_s", "idle_start_s"}) {
    const std::string k = key;
    all.push_back({"negative " + k, edited([&](auto& j) { j["groups"][1][k]["decode"] = -1e-3; }),
                   k + ".decode"});
    all.push_back({k + " of an untimed phase",
                   edited([&](auto& j) { j["groups"][1][k]["vision"] = 1e-3; }),
                   k + ".vision without"});
    all.push_back({k + " not an object", edited([&](auto& j) { j["groups"][1][k] = 1.0; }), k});
  }
  for (const Case& c : all) {
    auto p = parse_profile(c.text);
    ASSERT_FALSE(p.ok()) << c.why;
    EXPECT_EQ(p.error().code, ErrorCode::format) << c.why;
    EXPECT_NE(p.error().message.find(c.says), std::string::npos)
        << c.why << ": " << p.error().message;
  }
}

TEST(PlanProfile, CheckedAgainstTheModelAndTheCalls) {
  const Toy t = small_toy();
  Profile renamed = t.profile;
  renamed.groups[2].name = "text.layers.9";
  auto s = check_profile(renamed, t.weights, t.calls);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("text.layers.9"), std::string::npos);

  Profile resized = t.profile;
  resized.groups[1].bytes += 256;
  EXPECT_FALSE(check_profile(resized, t.weights, t.calls).ok());

  Profile shorter = t.profile;
  shorter.groups.pop_back();
  EXPECT_FALSE(check_profile(shorter, t.weights, t.calls).ok());

  Profile untimed = t.profile;
  untimed.groups[3].exe_s[phase_index(Phase::decode)].reset();
  s = check_profile(untimed, t.weights, t.calls);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("decode"), std::string::npos);
  EXPECT_NE(s.error().message.find(t.weights.groups[3].name), std::string::npos);

  // A phase the workload never calls may be missing.
  std::vector<Call> prefill_only(t.calls.begin(), t.calls.begin() + 5);
  EXPECT_TRUE(check_profile(untimed, t.weights, prefill_only).ok());
}

TEST(PlanProfile, EstimateFromTheCostModel) {
  auto config = preset("alpamayo-tiny");
  ASSERT_TRUE(config.ok());
  auto weights = describe_weights(config.value());
  ASSERT_TRUE(weights.ok());
  Workload w;
  w.num_images = 1;
  w.image_height = 64;
  w.image_width = 64;
  w.prompt_tokens = 120;
  w.gen_tokens = 3;
  w.flow_steps = 2;
  auto calls = call_sequence(weights.value(), config.value(), w);
  ASSERT_TRUE(calls.ok()) << calls.error().message;
  const CostContext ctx = cost_context(config.value(), w, w.prompt_tokens, w.prompt_tokens);
  MachineRates rates;
  rates.link_bytes_per_s = 50e9;
  rates.peak_flops = 5e14;
  rates.memory_bandwidth = 4e12;
  rates.host = HostCosts{1e-4, 2e-5, 5e-6, {}, {}, {}, {}};
  auto p = estimate_profile(config.value(), weights.value(), calls.value(), ctx, rates);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->source, "estimated");
  EXPECT_TRUE(check_profile(p.value(), weights.value(), calls.value()).ok());
  for (size_t g = 0; g < weights->groups.size(); ++g) {
    const GroupProfile& gp = p->groups[g];
    EXPECT_DOUBLE_EQ(gp.dma_s, static_cast<double>(weights->groups[g].bytes) / 50e9);
  }
  // Every call is timed, and no time is zero (each call reads at least its weights).
  for (size_t i = 0; i < calls->size(); ++i) {
    const Call& c = calls.value()[i];
    const auto& exe = p->groups[static_cast<size_t>(c.group)].exe_s[phase_index(c.phase)];
    ASSERT_TRUE(exe.has_value());
    EXPECT_GT(*exe, 0);
  }
  // The prefill layer computes many tokens, a decode call one: prefill costs more.
  const GroupProfile* l0 = p->find("text.layers.0.attn");
  ASSERT_NE(l0, nullptr);
  EXPECT_GT(*l0->exe_s[phase_index(Phase::prefill)], *l0->exe_s[phase_index(Phase::decode)]);
  // The images' bf16 pixels cross the link before the first call.
  ASSERT_TRUE(p->host.inputs_s.has_value());
  const double pixel_bytes = static_cast<double>(ctx.image_patches) *
                             static_cast<double>(config->vlm()->vision.patch_values()) * 2.0;
  EXPECT_GT(ctx.image_patches, 0);
  EXPECT_DOUBLE_EQ(*p->host.inputs_s, pixel_bytes / 50e9);
  // The round trip of an estimate parses.
  EXPECT_TRUE(parse_profile(profile_to_json(p.value())).ok());

  rates.link_bytes_per_s = 0;
  EXPECT_FALSE(estimate_profile(config.value(), weights.value(), calls.value(), ctx, rates).ok());
}

}  // namespace
}  // namespace ferry
