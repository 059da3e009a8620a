#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/call_sequence.h"

namespace ferry {
namespace {

WeightGroup group(std::string name, GroupKind kind, int layer = -1) {
  WeightGroup g;
  g.name = std::move(name);
  g.kind = kind;
  g.layer = layer;
  return g;
}

// A decoder layer as the tables make it: three part groups.
void add_layer(ModelWeights& w, const std::string& name, GroupKind kind, int layer) {
  for (LayerPart part : kLayerParts) {
    WeightGroup g = group(layer_group_name(name, part), kind, layer);
    g.part = part;
    w.groups.push_back(std::move(g));
  }
}

void add_text_groups(ModelWeights& w, int layers) {
  w.groups.push_back(group("text.embed", GroupKind::embedding));
  for (int l = 0; l < layers; ++l) {
    add_layer(w, "text.layers." + std::to_string(l), GroupKind::decoder_layer, l);
  }
  w.groups.push_back(group("text.head", GroupKind::lm_head));
}

ModelConfig qwen3_config(int layers) {
  TextConfig t;
  t.num_layers = layers;
  ModelConfig c;
  c.arch = Architecture::qwen3;
  c.body = t;
  return c;
}

ModelConfig alpamayo_config(int text_layers, int vision_depth, int expert_layers) {
  AlpamayoConfig a;
  a.vlm.text.num_layers = text_layers;
  a.vlm.vision.depth = vision_depth;
  a.vlm.vision.deepstack_visual_indexes = {1, 3};
  a.expert.num_layers = expert_layers;
  ModelConfig c;
  c.arch = Architecture::alpamayo_r1;
  c.body = a;
  return c;
}

ModelWeights alpamayo_weights(int text_layers, int vision_depth, int expert_layers) {
  ModelWeights w;
  w.groups.push_back(group("vision.patch", GroupKind::vision_patch));
  for (int b = 0; b < vision_depth; ++b) {
    w.groups.push_back(group("vision.blocks." + std::to_string(b), GroupKind::vision_block, b));
  }
  w.groups.push_back(group("vision.merger", GroupKind::vision_merger));
  w.groups.push_back(group("vision.deepstack.0", GroupKind::vision_merger, 0));
  w.groups.push_back(group("vision.deepstack.1", GroupKind::vision_merger, 1));
  add_text_groups(w, text_layers);
  w.groups.push_back(group("expert.in", GroupKind::expert_in));
  for (int l = 0; l < expert_layers; ++l) {
    add_layer(w, "expert.layers." + std::to_string(l), GroupKind::expert_layer, l);
  }
  w.groups.push_back(group("expert.out", GroupKind::expert_out));
  return w;
}

TEST(TextCallSequence, Qwen3CountsPerGroup) {
  ModelWeights w;
  add_text_groups(w, 3);
  Workload wl;
  wl.prompt_tokens = 10;
  wl.gen_tokens = 5;
  auto calls = call_sequence(w, qwen3_config(3), wl);
  ASSERT_TRUE(calls.ok()) << calls.error().to_string();
  // Prefill plus gen_tokens - 1 decode forwards, each embed + 3 layers of 3 parts + head.
  EXPECT_EQ(calls->size(), 5u * 11u);
  auto counts = calls_per_group(*calls, w);
  EXPECT_EQ(counts["text.embed"], 5);
  EXPECT_EQ(counts["text.layers.2.attn"], 5);
  EXPECT_EQ(counts["text.layers.2.down"], 5);
  EXPECT_EQ(counts["text.head"], 5);
  EXPECT_EQ((*calls)[0], (Call{0, Phase::prefill, 0}));
  // Each layer's parts in order: attention, gate|up, down.
  for (int k = 1; k <= 9; ++k) EXPECT_EQ((*calls)[k], (Call{k, Phase::prefill, 0}));
  EXPECT_EQ((*calls)[10], (Call{10, Phase::prefill, 0}));
  EXPECT_EQ((*calls)[11], (Call{0, Phase::decode, 0}));
  EXPECT_EQ(calls->back(), (Call{10, Phase::decode, 3}));
}

TEST(TextCallSequence, AlpamayoOrderAndCounts) {
  const auto w = alpamayo_weights(2, 4, 2);
  Workload wl;
  wl.num_images = 2;
  wl.image_height = 64;
  wl.image_width = 96;
  wl.prompt_tokens = 100;
  wl.gen_tokens = 3;
  wl.flow_steps = 4;
  auto calls = call_sequence(w, alpamayo_config(2, 4, 2), wl);
  ASSERT_TRUE(calls.ok()) << calls.error().to_string();
  auto counts = calls_per_group(*calls, w);
  EXPECT_EQ(counts["vision.patch"], 1);
  EXPECT_EQ(counts["vision.blocks.3"], 1);
  EXPECT_EQ(counts["vision.deepstack.1"], 1);
  EXPECT_EQ(counts["vision.merger"], 1);
  // Prefill + gen_tokens decode forwards (the extra one writes <|traj_future_start|>'s KV).
  EXPECT_EQ(counts["text.layers.1.gate_up"], 1 + 3);
  EXPECT_EQ(counts["expert.in"], 4);
  EXPECT_EQ(counts["expert.layers.0.attn"], 4);
  EXPECT_EQ(counts["expert.layers.0.down"], 4);
  EXPECT_EQ(counts["expert.out"], 4);
  // Vision: patch, b0, b1, ds0, b2, b3, ds1, merger.
  std::vector<std::string> vision;
  for (const Call& c : *calls) {
    if (c.phase == Phase::vision) vision.push_back(w.groups[static_cast<size_t>(c.group)].name);
  }
  const std::vector<std::string> expected = {
      "vision.patch",    "vision.blocks.0", "vision.blocks.1",    "vision.deepstack.0",
      "vision.blocks.2", "vision.blocks.3", "vision.deepstack.1", "vision.merger"};
  EXPECT_EQ(vision, expected);
  // Phases never interleave: vision, prefill, decode, expert.
  for (size_t i = 1; i < calls->size(); ++i) {
    EXPECT_LE((*calls)[i - 1].phase, (*calls)[i].phase);
  }
  const std::string text = format_call_sequence(*calls, w);
  EXPECT_NE(text.find("decode steps 0..2"), std::string::npos) << text;
  EXPECT_NE(text.find("expert.layers.0..1"), std::string::npos) << text;
  EXPECT_NE(text.find("vision.blocks.0..1 vision.deepstack.0"), std::string::npos) << text;
}

TEST(TextCallSequence, NoImagesSkipsVision) {
  const auto w = alpamayo_weights(1, 2, 1);
  Workload wl;
  wl.prompt_tokens = 20;
  auto calls = call_sequence(w, alpamayo_config(1, 2, 1), wl);
  ASSERT_TRUE(calls.ok()) << calls.error().to_string();
  // Not vacuous: the sequence still runs the text model, starting with its prefill.
  ASSERT_FALSE(calls->empty());
  EXPECT_EQ(calls->front().phase, Phase::prefill);
  std::vector<std::string> prefill;
  for (const Call& c : *calls) {
    EXPECT_NE(c.phase, Phase::vision);
    if (c.phase == Phase::prefill) prefill.push_back(w.groups[static_cast<size_t>(c.group)].name);
  }
  const std::vector<std::string> expected = {"text.embed", "text.layers.0.attn",
                                             "text.layers.0.gate_up", "text.layers.0.down",
                                             "text.head"};
  EXPECT_EQ(prefill, expected);
}

TEST(TextCallSequence, RejectsBadWorkloads) {
  ModelWeights w;
  add_text_groups(w, 1);
  Workload wl;
  wl.prompt_tokens = 4;
  wl.gen_tokens = 0;
  EXPECT_FALSE(call_sequence(w, qwen3_config(1), wl).ok());
  wl.gen_tokens = 1;
  wl.num_images = 1;
  wl.image_height = wl.image_width = 64;
  EXPECT_FALSE(call_sequence(w, qwen3_config(1), wl).ok());  // text-only model
  // A missing group is an error naming it.
  ModelWeights partial;
  partial.groups.push_back(group("text.embed", GroupKind::embedding));
  wl.num_images = 0;
  auto r = call_sequence(partial, qwen3_config(1), wl);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("text.layers.0.attn"), std::string::npos);
}

TEST(TextCallSequence, FormatShowsWholeLayersAsOneNameAndPartialOnesPartByPart) {
  ModelWeights w;
  add_text_groups(w, 2);
  Workload wl;
  wl.prompt_tokens = 4;
  wl.gen_tokens = 1;
  const std::vector<Call> calls = call_sequence(w, qwen3_config(2), wl).value();
  const std::string text = format_call_sequence(calls, w);
  EXPECT_NE(text.find(": text.embed text.layers.0..1 text.head"), std::string::npos) << text;
  // A sequence that holds only some of a layer's parts names them.
  const std::vector<Call> partial = {Call{0, Phase::prefill, 0}, Call{1, Phase::prefill, 0},
                                     Call{2, Phase::prefill, 0}, Call{4, Phase::prefill, 0}};
  const std::string p = format_call_sequence(partial, w);
  EXPECT_NE(p.find("text.embed text.layers.0.attn text.layers.0.gate_up text.layers.1.attn"),
            std::string::npos)
      << p;
}

}  // namespace
}  // namespace ferry
