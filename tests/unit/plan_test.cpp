// The plan as data: interleaved placement (paper Eq. 8), plans from resident lists, validation,
// and the JSON round trip.
#include <gtest/gtest.h>

#include "model/presets.h"
#include "model/weights.h"
#include "plan/plan.h"

namespace ferry {
namespace {

ModelWeights describe(std::string_view preset_name) {
  auto c = preset(preset_name);
  EXPECT_TRUE(c.ok());
  auto w = describe_weights(c.value());
  EXPECT_TRUE(w.ok()) << w.error().message;
  return std::move(w).value();
}

int index_of(const ModelWeights& w, std::string_view name) {
  for (size_t i = 0; i < w.groups.size(); ++i) {
    if (w.groups[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

TEST(Plan, InterleavedLayersFollowEquation8) {
  // Eq. 8 with 36 layers: floor(i·35/k).
  EXPECT_EQ(interleaved_layers(1, 36), (std::vector<int>{0}));
  EXPECT_EQ(interleaved_layers(5, 36), (std::vector<int>{0, 7, 14, 21, 28}));
  const auto k27 = interleaved_layers(27, 36);
  ASSERT_EQ(k27.size(), 27u);
  EXPECT_EQ(k27.front(), 0);
  EXPECT_LT(k27.back(), 35);  // the last layer stays out
  for (size_t i = 1; i < k27.size(); ++i) EXPECT_GT(k27[i], k27[i - 1]);
  EXPECT_EQ(interleaved_layers(36, 36).size(), 36u);
  EXPECT_EQ(interleaved_layers(40, 36).size(), 36u);
  EXPECT_TRUE(interleaved_layers(0, 36).empty());
}

TEST(Plan, ResidentListStreamsTheRestAndKeepsTheEmbeddingOnTheHost) {
  const ModelWeights w = describe("alpamayo-tiny");
  auto p = plan_with_resident(w, {"text.layers.0", "vision.patch"}, StreamMode::pipelined);
  ASSERT_TRUE(p.ok()) << p.error().message;
  const Plan& plan = p.value();
  // A layer's name selects its three part groups.
  for (const char* part : {"text.layers.0.attn", "text.layers.0.gate_up", "text.layers.0.down"}) {
    EXPECT_EQ(plan.placement[index_of(w, part)], Placement::resident) << part;
  }
  EXPECT_EQ(plan.placement[index_of(w, "vision.patch")], Placement::resident);
  EXPECT_EQ(plan.placement[index_of(w, "text.embed")], Placement::host);
  EXPECT_EQ(plan.placement[index_of(w, "text.layers.1.attn")], Placement::streamed);
  EXPECT_EQ(plan.slots, 2);
  EXPECT_GE(plan.slot_bytes, largest_streamed_group(plan, w));
  EXPECT_EQ(plan.slot_bytes % kGroupAlignment, 0u);
  EXPECT_EQ(resident_bytes(plan, w) + host_bytes(plan, w) + streamed_bytes(plan, w),
            w.total_bytes());
  EXPECT_TRUE(validate_plan(plan, w).ok());

  auto seq = plan_with_resident(w, {}, StreamMode::sequential);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(seq.value().slots, 1);
}

TEST(Plan, UnknownOrRepeatedGroupIsAnError) {
  const ModelWeights w = describe("alpamayo-tiny");
  auto p = plan_with_resident(w, {"text.layers.99"}, StreamMode::pipelined);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("text.layers.99"), std::string::npos);
  auto twice = plan_with_resident(w, {"text.layers.0", "text.layers.0"}, StreamMode::pipelined);
  EXPECT_FALSE(twice.ok());
  // A part named beside its whole layer is named twice too.
  EXPECT_FALSE(
      plan_with_resident(w, {"text.layers.0", "text.layers.0.down"}, StreamMode::pipelined).ok());
  // One part alone: only that part.
  const Plan part = plan_with_resident(w, {"text.layers.0.down"}, StreamMode::pipelined).value();
  EXPECT_EQ(part.placement[index_of(w, "text.layers.0.down")], Placement::resident);
  EXPECT_EQ(part.placement[index_of(w, "text.layers.0.attn")], Placement::streamed);
  EXPECT_FALSE(plan_with_resident(w, {"text.layers.0.mlp"}, StreamMode::pipelined).ok());
}

TEST(Plan, ValidationCatchesInconsistentSlots) {
  const ModelWeights w = describe("qwen3-tiny");
  Plan p = plan_with_resident(w, {}, StreamMode::pipelined).value();
  Plan small = p;
  small.slot_bytes = p.slot_bytes - kGroupAlignment;
  EXPECT_FALSE(validate_plan(small, w).ok());
  Plan one = p;
  one.slots = 1;
  EXPECT_FALSE(validate_plan(one, w).ok());
  Plan host_layer = p;  // the map path: any group may be read in place
  host_layer.placement[static_cast<size_t>(index_of(w, "text.layers.0.gate_up"))] = Placement::host;
  EXPECT_TRUE(validate_plan(host_layer, w).ok());
  Plan all = all_resident_plan(w);
  EXPECT_TRUE(validate_plan(all, w).ok());
  EXPECT_EQ(resident_bytes(all, w), w.total_bytes());
  all.slots = 2;
  EXPECT_FALSE(validate_plan(all, w).ok());  // slots with nothing to stream
}

TEST(Plan, MappedGroupsLeaveTheRingAndItsSlotsShrink) {
  const ModelWeights w = describe("alpamayo-tiny");
  const Plan p = plan_with_resident(w, {}, StreamMode::pipelined, 3).value();
  std::vector<std::string> layers;
  for (const WeightGroup& g : w.groups) {
    if (g.kind == GroupKind::decoder_layer) layers.push_back(g.name);
  }
  const Plan m = with_mapped(p, w, layers).value();
  for (const std::string& name : layers) {
    EXPECT_EQ(m.placement[static_cast<size_t>(index_of(w, name))], Placement::host) << name;
  }
  EXPECT_EQ(m.slots, 3);
  EXPECT_LE(m.slot_bytes, p.slot_bytes);
  EXPECT_EQ(m.slot_bytes, align_group_bytes(largest_streamed_group(m, w)));
  EXPECT_EQ(
      host_bytes(m, w), host_bytes(p, w) + [&] {
        uint64_t b = 0;
        for (const std::string& n : layers) b += w.groups[index_of(w, n)].bytes;
        return b;
      }());
  // Everything mapped: nothing streams, no slots.
  std::vector<std::string> all;
  for (const WeightGroup& g : w.groups) all.push_back(g.name);
  const Plan none = with_mapped(p, w, all).value();
  EXPECT_EQ(none.slots, 0);
  EXPECT_EQ(none.slot_bytes, 0u);
  EXPECT_FALSE(with_mapped(p, w, {"text.layers.99"}).ok());
  EXPECT_FALSE(with_mapped(p, w, {"text.layers.0", "text.layers.0"}).ok());
}

TEST(Plan, JsonRoundTripAndRefusals) {
  const ModelWeights w = describe("alpamayo-tiny");
  const Plan p =
      plan_with_resident(w, {"text.layers.1", "expert.layers.0"}, StreamMode::pipelined, 3).value();
  const std::string text = plan_to_json(p, w);
  auto back = plan_from_json(text, w);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value(), p);

  // For another model: refused, naming the mismatch.
  const ModelWeights other = describe("qwen3-tiny");
  EXPECT_FALSE(plan_from_json(text, other).ok());
  // Damaged files.
  EXPECT_FALSE(plan_from_json("{}", w).ok());
  EXPECT_FALSE(plan_from_json("[1,2]", w).ok());
  std::string bad_placement = text;
  bad_placement.replace(bad_placement.find("\"streamed\""), 10, "\"floating\"");
  EXPECT_FALSE(plan_from_json(bad_placement, w).ok());
}

}  // namespace
}  // namespace ferry
