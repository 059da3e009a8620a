// The per-architecture name tables: group order, names, layout, parameter counts, binding.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "model/presets.h"
#include "model/weights.h"

namespace ferry {
namespace {

ModelWeights describe(std::string_view preset_name) {
  auto c = preset(preset_name);
  EXPECT_TRUE(c.ok());
  auto w = describe_weights(*c);
  EXPECT_TRUE(w.ok()) << w.error().to_string();
  return w.ok() ? std::move(w).value() : ModelWeights{};
}

std::map<std::string, int64_t> params_by_module(const ModelWeights& w) {
  std::map<std::string, int64_t> m;
  for (const auto& g : w.groups) m[group_module_name(g.kind)] += g.params();
  return m;
}

TEST(WeightsTable, AlpamayoR1ParameterCountsMatchThePublishedModel) {
  ModelWeights w = describe("alpamayo-r1-10b");
  auto m = params_by_module(w);
  // Vision 27 blocks + patch/pos + merger + 3 deepstack mergers: 576.4M.
  EXPECT_EQ(m["vision"], 576'388'336);
  // Embedding 155697 x 4096 + 36 layers of 192,946,432: 7.58B.
  EXPECT_EQ(m["text"], 155'697LL * 4096 + 36LL * 192'946'432);
  EXPECT_NEAR(static_cast<double>(m["text"]), 7.58e9, 0.005e9);
  // Final norm + LM head [155697, 4096]: 637.7M.
  EXPECT_EQ(m["lm_head"], 155'697LL * 4096 + 4096);
  EXPECT_NEAR(static_cast<double>(m["lm_head"]), 637.7e6, 0.05e6);
  // Expert: 36 layers of 63,312,128 + action_in_proj + norm + action_out_proj: 2.28B.
  const int64_t in_proj =
      (60 * 512 + 512) + 512 + (512 * 512 + 512) + 512 + (512 * 2048 + 2048) + 2 * 2048;
  EXPECT_EQ(m["expert"], 36LL * 63'312'128 + in_proj + 2048 + (2 * 2048 + 2));
  EXPECT_NEAR(static_cast<double>(m["expert"]), 2.28e9, 0.005e9);
  EXPECT_NEAR(static_cast<double>(w.total_params()), 11.08e9, 0.005e9);
  EXPECT_EQ(w.total_params(), m["vision"] + m["text"] + m["lm_head"] + m["expert"]);
  EXPECT_EQ(m.size(), 4u);
}

TEST(WeightsTable, Qwen3_8BParameterCount) {
  ModelWeights w = describe("qwen3-8b");
  // Qwen3-8B: 8.19B parameters (model card), untied embedding and head.
  EXPECT_EQ(w.total_params(), 2 * 151'936LL * 4096 + 36LL * 192'946'432 + 4096);
  EXPECT_NEAR(static_cast<double>(w.total_params()), 8.19e9, 0.005e9);
  // embed, 36 layers of 3 parts, the head in 7 row chunks, each no larger than a layer's
  // largest part (gate|up: 2 x 12288 x 4096 = 100.7M elements; 151936 x 4096 = 622.3M -> 7).
  ASSERT_EQ(w.groups.size(), 1u + 36 * 3 + 7);
  EXPECT_EQ(w.groups.front().name, "text.embed");
  EXPECT_EQ(w.groups[1].name, "text.layers.0.attn");
  EXPECT_EQ(w.groups[2].name, "text.layers.0.gate_up");
  EXPECT_EQ(w.groups[3].name, "text.layers.0.down");
  EXPECT_EQ(w.groups[109].name, "text.head.0");
  EXPECT_EQ(w.groups.back().name, "text.head.6");
  uint64_t largest_part = 0;
  for (const WeightGroup& g : w.groups) {
    if (g.kind == GroupKind::decoder_layer) largest_part = std::max(largest_part, g.bytes);
  }
  EXPECT_EQ(largest_part, uint64_t{2} * 12288 * 4096 * 2 + 4096 * 2);
  for (const WeightGroup& g : w.groups) {
    if (g.kind == GroupKind::lm_head) {
      EXPECT_LE(g.bytes, largest_part) << g.name;
    }
  }
  EXPECT_EQ(w.groups.back().find("lm_head")->checkpoint_name, "lm_head.weight");
}

TEST(WeightsTable, GroupsAreInExecutionOrderWithDeepstackAfterItsBlock) {
  ModelWeights w = describe("alpamayo-r1-10b");
  std::vector<std::string> names;
  for (const auto& g : w.groups) names.push_back(g.name);
  auto at = [&](const std::string& n) {
    return std::find(names.begin(), names.end(), n) - names.begin();
  };
  EXPECT_EQ(names.front(), "vision.patch");
  EXPECT_EQ(at("vision.deepstack.0"), at("vision.blocks.8") + 1);
  EXPECT_EQ(at("vision.deepstack.1"), at("vision.blocks.16") + 1);
  EXPECT_EQ(at("vision.deepstack.2"), at("vision.blocks.24") + 1);
  EXPECT_EQ(at("vision.merger"), at("vision.blocks.26") + 1);
  EXPECT_EQ(at("text.embed"), at("vision.merger") + 1);
  EXPECT_EQ(at("text.layers.0.attn"), at("text.embed") + 1);
  EXPECT_EQ(at("text.layers.0.gate_up"), at("text.layers.0.attn") + 1);
  EXPECT_EQ(at("text.layers.0.down"), at("text.layers.0.gate_up") + 1);
  EXPECT_EQ(at("text.layers.1.attn"), at("text.layers.0.down") + 1);
  EXPECT_EQ(at("text.head.0"), at("text.layers.35.down") + 1);
  EXPECT_EQ(at("expert.in"), at("text.head.6") + 1);
  EXPECT_EQ(at("expert.layers.0.attn"), at("expert.in") + 1);
  EXPECT_EQ(at("expert.out"), at("expert.layers.35.down") + 1);
  EXPECT_EQ(names.back(), "expert.out");
  EXPECT_EQ(names.size(), 1u + 27 + 3 + 1 + 1 + 36 * 3 + 7 + 1 + 36 * 3 + 1);
  std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
}

TEST(WeightsTable, DecoderLayerLayoutAndNames) {
  ModelWeights w = describe("alpamayo-r1-10b");
  // A layer is three groups: attention, gate|up, down (LayerPart), in that order.
  std::vector<std::string> locals;
  for (LayerPart part : kLayerParts) {
    const WeightGroup* p = w.find(layer_group_name("text.layers.3", part));
    ASSERT_NE(p, nullptr) << layer_part_suffix(part);
    EXPECT_EQ(p->kind, GroupKind::decoder_layer);
    EXPECT_EQ(p->layer, 3);
    EXPECT_EQ(p->part, part);
    EXPECT_EQ(layer_of_group_name(p->name), "text.layers.3");
    for (const auto& t : p->tensors) locals.push_back(t.local_name);
  }
  EXPECT_EQ(locals,
            (std::vector<std::string>{"input_layernorm", "q_proj", "k_proj", "v_proj", "q_norm",
                                      "k_norm", "o_proj", "post_attention_layernorm", "gate_proj",
                                      "up_proj", "down_proj"}));
  const WeightGroup* g = w.find("text.layers.3.attn");
  const WeightGroup* mlp = w.find("text.layers.3.gate_up");
  const WeightGroup* down = w.find("text.layers.3.down");
  ASSERT_TRUE(g != nullptr && mlp != nullptr && down != nullptr);
  EXPECT_EQ(down->tensors.size(), 1u);
  const WeightSpec* q = g->find("q_proj");
  EXPECT_EQ(q->checkpoint_name, "vlm.model.language_model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(q->shape, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(g->find("k_proj")->shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(down->find("down_proj")->shape, (std::vector<int64_t>{4096, 12288}));
  // gate and up adjacent, so that they are one GEMM.
  EXPECT_EQ(mlp->find("up_proj")->offset,
            mlp->find("gate_proj")->offset + mlp->find("gate_proj")->bytes);
  EXPECT_EQ(g->find("k_norm")->checkpoint_name,
            "vlm.model.language_model.layers.3.self_attn.k_norm.weight");

  const WeightGroup* e = w.find("expert.layers.35.attn");
  const WeightGroup* eg = w.find("expert.layers.35.gate_up");
  ASSERT_NE(e, nullptr);
  ASSERT_NE(eg, nullptr);
  EXPECT_EQ(e->kind, GroupKind::expert_layer);
  EXPECT_EQ(e->find("q_proj")->checkpoint_name, "expert.layers.35.self_attn.q_proj.weight");
  EXPECT_EQ(e->find("q_proj")->shape, (std::vector<int64_t>{2048, 2048}));
  EXPECT_EQ(e->find("k_proj")->shape, (std::vector<int64_t>{1024, 2048}));
  EXPECT_EQ(eg->find("gate_proj")->shape, (std::vector<int64_t>{8256, 2048}));
}

TEST(WeightsTable, VisionAndExpertGroupNames) {
  ModelWeights w = describe("alpamayo-r1-10b");
  const WeightGroup* patch = w.find("vision.patch");
  ASSERT_NE(patch, nullptr);
  EXPECT_EQ(patch->find("proj.weight")->shape, (std::vector<int64_t>{1152, 3, 2, 16, 16}));
  EXPECT_EQ(patch->find("proj.weight")->checkpoint_name,
            "vlm.model.visual.patch_embed.proj.weight");
  EXPECT_EQ(patch->find("pos_embed")->checkpoint_name, "vlm.model.visual.pos_embed.weight");
  EXPECT_EQ(patch->find("pos_embed")->shape, (std::vector<int64_t>{2304, 1152}));
  // The conv kernel is viewed as [1152, 1536].
  TensorView pv = patch->view(nullptr, "proj.weight");
  EXPECT_EQ(pv.rows, 1152);
  EXPECT_EQ(pv.cols, 1536);

  const WeightGroup* blk = w.find("vision.blocks.0");
  EXPECT_EQ(blk->find("qkv.weight")->checkpoint_name, "vlm.model.visual.blocks.0.attn.qkv.weight");
  EXPECT_EQ(blk->find("qkv.weight")->shape, (std::vector<int64_t>{3456, 1152}));
  EXPECT_EQ(blk->find("fc1.weight")->checkpoint_name,
            "vlm.model.visual.blocks.0.mlp.linear_fc1.weight");
  EXPECT_EQ(blk->tensors.size(), 12u);

  const WeightGroup* merger = w.find("vision.merger");
  EXPECT_EQ(merger->find("norm.weight")->shape, (std::vector<int64_t>{1152}));
  EXPECT_EQ(merger->find("fc2.weight")->checkpoint_name,
            "vlm.model.visual.merger.linear_fc2.weight");
  const WeightGroup* ds = w.find("vision.deepstack.2");
  EXPECT_EQ(ds->find("norm.weight")->shape, (std::vector<int64_t>{4608}));
  EXPECT_EQ(ds->find("fc1.weight")->checkpoint_name,
            "vlm.model.visual.deepstack_merger_list.2.linear_fc1.weight");
  EXPECT_EQ(ds->find("fc2.weight")->shape, (std::vector<int64_t>{4096, 4608}));

  const WeightGroup* head = w.find("text.head.0");
  EXPECT_EQ(head->find("lm_head")->checkpoint_name, "vlm.lm_head.weight");
  EXPECT_EQ(head->find("norm")->checkpoint_name, "vlm.model.language_model.norm.weight");
  EXPECT_EQ(w.find("text.embed")->find("embed_tokens")->checkpoint_name,
            "vlm.model.language_model.embed_tokens.weight");

  const WeightGroup* in = w.find("expert.in");
  std::vector<std::string> in_names;
  for (const auto& t : in->tensors) in_names.push_back(t.checkpoint_name);
  EXPECT_EQ(in_names, (std::vector<std::string>{
                          "action_in_proj.encoder.trunk.0.weight",
                          "action_in_proj.encoder.trunk.0.bias",
                          "action_in_proj.encoder.trunk.2.weight",
                          "action_in_proj.encoder.trunk.3.weight",
                          "action_in_proj.encoder.trunk.3.bias",
                          "action_in_proj.encoder.trunk.5.weight",
                          "action_in_proj.encoder.trunk.6.weight",
                          "action_in_proj.encoder.trunk.6.bias",
                          "action_in_proj.norm.weight",
                          "action_in_proj.norm.bias",
                      }));
  EXPECT_EQ(in->find("trunk.0.weight")->shape, (std::vector<int64_t>{512, 60}));
  EXPECT_EQ(in->find("trunk.6.weight")->shape, (std::vector<int64_t>{2048, 512}));
  const WeightGroup* out = w.find("expert.out");
  EXPECT_EQ(out->find("norm")->checkpoint_name, "expert.norm.weight");
  EXPECT_EQ(out->find("action_out_proj.weight")->shape, (std::vector<int64_t>{2, 2048}));
  EXPECT_EQ(out->find("action_out_proj.bias")->shape, (std::vector<int64_t>{2}));
}

TEST(WeightsTable, OffsetsAreAlignedAndNonOverlapping) {
  for (auto name : preset_names()) {
    ModelWeights w = describe(name);
    ASSERT_FALSE(w.groups.empty()) << name;
    for (const auto& g : w.groups) {
      uint64_t end = 0;
      for (const auto& t : g.tensors) {
        EXPECT_EQ(t.offset % kGroupAlignment, 0u) << g.name << " " << t.local_name;
        EXPECT_GE(t.offset, end) << g.name << " " << t.local_name;
        EXPECT_EQ(t.bytes, static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype));
        EXPECT_EQ(t.dtype, DType::bf16);
        end = t.offset + t.bytes;
      }
      EXPECT_GE(g.bytes, end) << g.name;
      EXPECT_EQ(g.bytes % kGroupAlignment, 0u) << g.name;
      EXPECT_LT(g.bytes - end, kGroupAlignment) << g.name;
    }
  }
}

TEST(WeightsTable, ViewsPointAtTheirOffsets) {
  ModelWeights w = describe("qwen3-tiny");
  const WeightGroup* g = w.find("text.layers.1.attn");
  ASSERT_NE(g, nullptr);
  std::vector<std::byte> buf(g->bytes);
  TensorView k = g->view(buf.data(), "k_proj");
  EXPECT_EQ(k.data, buf.data() + g->find("k_proj")->offset);
  EXPECT_EQ(k.rows, 32);  // 2 kv heads x 16
  EXPECT_EQ(k.cols, 64);
  TensorView n = g->view(buf.data(), "q_norm");
  EXPECT_EQ(n.rows, 1);
  EXPECT_EQ(n.cols, 16);
}

TEST(WeightsTable, LlamaHasNoQkNorm) {
  ModelConfig c = preset("qwen3-tiny").value();
  c.arch = Architecture::llama;
  std::get<TextConfig>(c.body).qk_norm = false;
  auto w = describe_weights(c);
  ASSERT_TRUE(w.ok());
  const WeightGroup* g = w->find("text.layers.0.attn");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->find("q_norm"), nullptr);
  EXPECT_EQ(g->tensors.size(), 5u);  // input norm, q, k, v, o
}

TEST(WeightsTable, TiedHeadReadsTheEmbedding) {
  ModelConfig c = preset("qwen3-tiny").value();
  std::get<TextConfig>(c.body).tie_word_embeddings = true;
  auto w = describe_weights(c);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->find("text.head.0")->find("lm_head")->checkpoint_name, "model.embed_tokens.weight");
  // The tied tensor counts once.
  ModelWeights untied = describe("qwen3-tiny");
  EXPECT_EQ(untied.total_params() - w->total_params(), 151'936LL * 64);
  // Binding needs no lm_head.weight.
  std::vector<TensorMeta> metas;
  std::set<std::string> seen;
  for (const auto& g : w->groups)
    for (const auto& t : g.tensors)
      if (seen.insert(t.checkpoint_name).second)
        metas.push_back({t.checkpoint_name, t.dtype, t.shape});
  EXPECT_TRUE(bind_tensors(*w, metas).ok());
}

std::vector<TensorMeta> metas_of(const ModelWeights& w) {
  std::vector<TensorMeta> metas;
  std::set<std::string> seen;  // as a checkpoint lists them: each tensor once, whole
  for (const auto& g : w.groups)
    for (const auto& t : g.tensors)
      if (seen.insert(t.checkpoint_name).second)
        metas.push_back({t.checkpoint_name, t.dtype, t.checkpoint_shape()});
  return metas;
}

TEST(WeightsBind, AcceptsExactlyTheTable) {
  ModelWeights w = describe("alpamayo-tiny");
  EXPECT_TRUE(bind_tensors(w, metas_of(w)).ok());
  // The Fourier buffers the release omits are tolerated when present.
  auto metas = metas_of(w);
  metas.push_back({"action_in_proj.sinus.0.freqs", DType::f32, {1, 10}});
  EXPECT_TRUE(bind_tensors(w, metas).ok());
}

TEST(WeightsBind, NamesMismatchedMissingAndUnexpectedTensors) {
  ModelWeights w = describe("qwen3-8b");
  auto metas = metas_of(w);
  for (auto& m : metas) {
    if (m.name == "model.layers.0.self_attn.q_proj.weight") m.shape = {4096, 1024};
  }
  metas.erase(std::remove_if(metas.begin(), metas.end(),
                             [](const TensorMeta& m) { return m.name == "model.norm.weight"; }),
              metas.end());
  metas.push_back({"model.layers.99.mlp.extra.weight", DType::bf16, {4}});
  Status s = bind_tensors(w, metas, "ckpt");
  ASSERT_FALSE(s.ok());
  const std::string& msg = s.error().message;
  EXPECT_NE(msg.find("tensor model.layers.0.self_attn.q_proj.weight: expected BF16 [4096, 4096], "
                     "got BF16 [4096, 1024]"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("tensor model.norm.weight: missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor model.layers.99.mlp.extra.weight: unexpected"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.rfind("ckpt: ", 0), 0u);
}

TEST(WeightsBind, DtypeMismatchIsNamed) {
  ModelWeights w = describe("qwen3-tiny");
  auto metas = metas_of(w);
  metas[0].dtype = DType::f32;
  Status s = bind_tensors(w, metas);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("expected BF16 [151936, 64], got F32 [151936, 64]"),
            std::string::npos)
      << s.error().message;
}

TEST(WeightsBind, ManyProblemsAreSummarized) {
  ModelWeights w = describe("qwen3-tiny");
  Status s = bind_tensors(w, {});
  ASSERT_FALSE(s.ok());
  // 1 + 4 x 11 + 2 tensors missing: five named, the rest counted.
  EXPECT_NE(s.error().message.find("42 more missing"), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// The LM head's row chunks cover the vocabulary exactly once, in order, each no larger than a
// decoder layer's largest part (or the floor), rows a multiple of the unit; chunk 0 alone carries
// the norm.
TEST(WeightsTable, LmHeadChunksCoverTheVocabularyAndFitALayerPart) {
  for (const char* name : {"alpamayo-r1-10b", "qwen3-8b", "qwen3-tiny", "alpamayo-tiny"}) {
    SCOPED_TRACE(name);
    const ModelConfig c = preset(name).value();
    const ModelWeights w = describe_weights(c).value();
    const TextConfig& t = c.text();
    uint64_t layer_bytes = 0;
    std::vector<const WeightGroup*> chunks;
    for (const auto& g : w.groups) {
      if (g.kind == GroupKind::decoder_layer) layer_bytes = std::max(layer_bytes, g.bytes);
      if (g.kind == GroupKind::lm_head) chunks.push_back(&g);
    }
    ASSERT_FALSE(chunks.empty());
    EXPECT_EQ(static_cast<int>(chunks.size()), lm_head_chunks(t).count);
    int64_t next_row = 0;
    for (size_t k = 0; k < chunks.size(); ++k) {
      const WeightGroup& g = *chunks[k];
      EXPECT_EQ(g.name, "text.head." + std::to_string(k));
      EXPECT_EQ(g.layer, static_cast<int>(k));
      EXPECT_EQ(g.find("norm") != nullptr, k == 0);
      const WeightSpec* s = g.find("lm_head");
      ASSERT_NE(s, nullptr);
      EXPECT_EQ(s->source_row0, next_row);
      EXPECT_EQ(s->checkpoint_shape(), (std::vector<int64_t>{t.vocab_size, t.hidden_size}));
      EXPECT_EQ(s->source_offset(), static_cast<uint64_t>(next_row * t.hidden_size * 2));
      if (k + 1 < chunks.size()) {
        EXPECT_EQ(s->shape[0] % kLmHeadRowUnit, 0);
      }
      next_row += s->shape[0];
      EXPECT_LE(g.bytes, std::max<uint64_t>(layer_bytes, kLmHeadChunkFloor * 2 + 65536));
    }
    EXPECT_EQ(next_row, t.vocab_size);
  }
  // The real model: seven chunks of 22272 rows (the last 22065), each ~182 MB < the 201 MB
  // gate|up part (637.7M elements of head over 100.7M per part: 6.3, so 7 chunks).
  const ModelWeights ar = describe_weights(preset("alpamayo-r1-10b").value()).value();
  EXPECT_EQ(ar.find("text.head.0")->find("lm_head")->shape[0], 22272);
  EXPECT_EQ(ar.find("text.head.6")->find("lm_head")->shape[0], 155697 - 6 * 22272);
  EXPECT_EQ(ar.find("text.head.7"), nullptr);
}

}  // namespace
}  // namespace ferry
