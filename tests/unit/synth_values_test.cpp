// Synthetic weights: deterministic, chunk-independent, with the documented scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/bf16.h"
#include "model/presets.h"
#include "model/synth.h"

namespace ferry {
namespace {

WeightSpec matrix(int64_t rows, int64_t cols, DType dtype = DType::bf16) {
  WeightSpec s;
  s.checkpoint_name = "w";
  s.local_name = "q_proj";
  s.dtype = dtype;
  s.shape = {rows, cols};
  s.bytes = static_cast<uint64_t>(rows * cols) * dtype_size(dtype);
  return s;
}

std::vector<float> fill_bf16(uint64_t seed, uint64_t index, const WeightSpec& s, SynthInit init) {
  std::vector<uint16_t> raw(static_cast<size_t>(s.numel()));
  synth_fill(seed, index, s, init, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(raw.data()), raw.size() * 2));
  std::vector<float> out;
  for (uint16_t r : raw) out.push_back(bf16_to_f32(r));
  return out;
}

TEST(SynthValues, ChunksGiveTheSameBytesAsOneFill) {
  WeightSpec s = matrix(37, 101);  // odd sizes: chunks cut inside a 4-element draw
  SynthInit init{false, 0.1f};
  std::vector<std::byte> whole(s.bytes), parts(s.bytes);
  synth_fill(7, 3, s, init, 0, whole);
  size_t cut1 = 2 * 1001, cut2 = 2 * 2223;
  synth_fill(7, 3, s, init, 0, std::span(parts).subspan(0, cut1));
  synth_fill(7, 3, s, init, cut1 / 2, std::span(parts).subspan(cut1, cut2 - cut1));
  synth_fill(7, 3, s, init, cut2 / 2, std::span(parts).subspan(cut2));
  EXPECT_EQ(whole, parts);
}

TEST(SynthValues, SeedAndTensorIndexChangeTheValues) {
  WeightSpec s = matrix(16, 16);
  SynthInit init{false, 0.1f};
  auto a = fill_bf16(1, 0, s, init);
  EXPECT_EQ(a, fill_bf16(1, 0, s, init));
  EXPECT_NE(a, fill_bf16(2, 0, s, init));
  EXPECT_NE(a, fill_bf16(1, 1, s, init));
}

TEST(SynthValues, MatricesHaveStdOneOverSqrtFanIn) {
  WeightGroup g;
  g.kind = GroupKind::decoder_layer;
  WeightSpec s = matrix(512, 1024);
  SynthInit init = synth_init(g, s);
  EXPECT_FALSE(init.ones);
  EXPECT_FLOAT_EQ(init.std, 1.0f / 32.0f);
  auto v = fill_bf16(42, 5, s, init);
  double sum = 0, sq = 0;
  float max_abs = 0;
  for (float x : v) {
    sum += x;
    sq += static_cast<double>(x) * x;
    max_abs = std::max(max_abs, std::fabs(x));
  }
  const double n = static_cast<double>(v.size());
  const double mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(sd, 1.0 / 32, 0.01 / 32);
  EXPECT_LE(max_abs, 1.7321f / 32 * 1.01f);  // uniform on [-sqrt(3) std, sqrt(3) std]
  std::set<float> distinct(v.begin(), v.end());
  EXPECT_GT(distinct.size(), 1000u);
}

TEST(SynthValues, InitPerRole) {
  ModelWeights w = describe_weights(preset("alpamayo-tiny").value()).value();
  auto init_of = [&](const char* group, const char* local) {
    const WeightGroup* g = w.find(group);
    EXPECT_NE(g, nullptr) << group;
    const WeightSpec* s = g->find(local);
    EXPECT_NE(s, nullptr) << local;
    return synth_init(*g, *s);
  };
  EXPECT_TRUE(init_of("text.layers.0.attn", "input_layernorm").ones);
  EXPECT_TRUE(init_of("text.layers.0.attn", "q_norm").ones);
  EXPECT_TRUE(init_of("text.head.0", "norm").ones);
  EXPECT_TRUE(init_of("vision.blocks.1", "norm1.weight").ones);
  EXPECT_TRUE(init_of("expert.in", "trunk.2.weight").ones);
  EXPECT_FLOAT_EQ(init_of("vision.blocks.1", "qkv.bias").std, 0.01f);
  EXPECT_FLOAT_EQ(init_of("vision.merger", "norm.bias").std, 0.01f);
  EXPECT_FLOAT_EQ(init_of("text.embed", "embed_tokens").std, 0.02f);
  EXPECT_FLOAT_EQ(init_of("vision.patch", "pos_embed").std, 0.02f);
  // The patch conv [32, 3, 2, 16, 16] has fan_in 1536.
  EXPECT_FLOAT_EQ(init_of("vision.patch", "proj.weight").std, 1.0f / std::sqrt(1536.0f));
  EXPECT_FLOAT_EQ(init_of("text.head.0", "lm_head").std, 1.0f / 8.0f);

  const WeightGroup* g = w.find("text.layers.0.attn");
  const WeightSpec* norm = g->find("input_layernorm");
  auto ones = fill_bf16(3, 0, *norm, synth_init(*g, *norm));
  for (float x : ones) EXPECT_EQ(x, 1.0f);
}

TEST(SynthValues, OtherDtypes) {
  WeightSpec s32 = matrix(4, 8, DType::f32);
  std::vector<float> f(32);
  synth_fill(1, 0, s32, SynthInit{true, 0}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(f.data()), f.size() * 4));
  for (float x : f) EXPECT_EQ(x, 1.0f);
  WeightSpec s16 = matrix(4, 8, DType::f16);
  std::vector<uint16_t> h(32);
  synth_fill(1, 0, s16, SynthInit{true, 0}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(h.data()), h.size() * 2));
  for (uint16_t x : h) EXPECT_EQ(x, 0x3c00);  // 1.0 in IEEE half
  // Random f16 values stay in range and are not all equal.
  synth_fill(1, 0, s16, SynthInit{false, 0.5f}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(h.data()), h.size() * 2));
  std::set<uint16_t> distinct(h.begin(), h.end());
  EXPECT_GT(distinct.size(), 20u);
  for (uint16_t x : h) EXPECT_LE(x & 0x7fff, 0x3aee);  // |x| <= 0.866 (sqrt(3) * 0.5)
}

TEST(SynthTensors, OnePerDistinctNameWithProgress) {
  ModelConfig c = preset("qwen3-tiny").value();
  std::get<TextConfig>(c.body).tie_word_embeddings = true;
  ModelWeights w = describe_weights(c).value();
  std::atomic<uint64_t> progress{0};
  auto tensors = synth_tensors(w, 9, &progress);
  std::set<std::string> names;
  uint64_t total = 0;
  for (const auto& t : tensors) {
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
    uint64_t bytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    total += bytes;
    if (bytes < (1u << 20)) {
      std::vector<std::byte> buf(bytes);
      t.fill(buf);
    }
  }
  EXPECT_EQ(names.count("lm_head.weight"), 0u);  // tied: the head is the embedding
  EXPECT_EQ(tensors.size(), 1 + 4 * 11 + 1u);
  uint64_t small = 0;
  for (const auto& t : tensors) {
    uint64_t bytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
    if (bytes < (1u << 20)) small += bytes;
  }
  EXPECT_EQ(progress.load(), small);
  EXPECT_GT(total, small);
}

TEST(SynthTensors, ALargeTensorSplitAcrossThreadsGivesTheSameBytes) {
  // 8192 x 8192 bf16 = 128 MiB: large enough for the fill to use helper threads.
  ModelWeights w;
  WeightGroup g;
  g.name = "text.layers.0";
  g.kind = GroupKind::decoder_layer;
  WeightSpec s = matrix(8192, 8192);
  s.checkpoint_name = "big";
  g.tensors.push_back(s);
  w.groups.push_back(g);
  std::atomic<uint64_t> progress{0};
  auto tensors = synth_tensors(w, 11, &progress);
  ASSERT_EQ(tensors.size(), 1u);
  std::vector<std::byte> threaded(s.bytes), serial(s.bytes);
  tensors[0].fill(threaded);
  synth_fill(11, 0, s, synth_init(g, s), 0, serial);
  EXPECT_TRUE(threaded == serial);
  EXPECT_EQ(progress.load(), s.bytes);
}

}  // namespace
}  // namespace ferry
