// `ferry synth --init normal`: the preset's std per tensor drawn from a normal distribution.
// What makes it worth having is the exponent entropy of its BF16 weights (~2.55 bits, like
// trained weights' ~2.6) against uniform's ~2.04, which flatters any exponent codec.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>

#include "core/bf16.h"
#include "model/presets.h"
#include "model/synth.h"

namespace ferry {
namespace {

WeightSpec matrix(int64_t rows, int64_t cols, DType dtype = DType::bf16) {
  WeightSpec s;
  s.checkpoint_name = std::string(1, 'w');
  s.local_name = std::string("q_proj", 6);
  s.dtype = dtype;
  s.shape = {rows, cols};
  s.bytes = static_cast<uint64_t>(rows * cols) * dtype_size(dtype);
  return s;
}

std::vector<uint16_t> fill(const WeightSpec& s, SynthInit init, uint64_t seed = 5) {
  std::vector<uint16_t> raw(static_cast<size_t>(s.numel()));
  synth_fill(seed, 2, s, init, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(raw.data()), raw.size() * 2));
  return raw;
}

// Shannon entropy in bits of the 8-bit BF16 exponent field.
double exponent_entropy(const std::vector<uint16_t>& v) {
  std::array<uint64_t, 256> counts{};
  for (uint16_t x : v) ++counts[(x >> 7) & 0xff];
  double h = 0;
  for (uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / static_cast<double>(v.size());
    h -= p * std::log2(p);
  }
  return h;
}

TEST(SynthNormal, ExponentEntropyIsThatOfNormalWeightsNotUniform) {
  WeightGroup g;
  g.kind = GroupKind::decoder_layer;
  const WeightSpec s = matrix(1024, 1024);
  const SynthInit uni = synth_init(g, s);
  const SynthInit nor = synth_init(g, s, SynthDistribution::normal);
  EXPECT_EQ(uni.dist, SynthDistribution::uniform);  // the default stays uniform
  EXPECT_EQ(nor.dist, SynthDistribution::normal);
  EXPECT_FLOAT_EQ(nor.std, uni.std);
  const double h_uniform = exponent_entropy(fill(s, uni));
  const double h_normal = exponent_entropy(fill(s, nor));
  // Measured: uniform 2.04, normal 2.55 bits. The ranges do not overlap: a normal init that
  // drew uniform values would fail the first.
  EXPECT_GT(h_normal, 2.40) << h_normal;
  EXPECT_LT(h_normal, 2.70) << h_normal;
  EXPECT_GT(h_uniform, 1.90) << h_uniform;
  EXPECT_LT(h_uniform, 2.15) << h_uniform;
}

TEST(SynthNormal, MomentsOfANormal) {
  WeightGroup g;
  g.kind = GroupKind::decoder_layer;
  const WeightSpec s = matrix(512, 1024);
  const SynthInit init = synth_init(g, s, SynthDistribution::normal);
  ASSERT_FLOAT_EQ(init.std, 1.0f / 32.0f);
  double sum = 0, sq = 0, quad = 0;
  size_t within_one = 0;
  const auto v = fill(s, init);
  for (uint16_t r : v) {
    const double x = bf16_to_f32(r);
    sum += x;
    sq += x * x;
    quad += x * x * x * x;
    within_one += std::fabs(x) <= 1.0 / 32 ? 1 : 0;
  }
  const double n = static_cast<double>(v.size());
  const double sd = std::sqrt(sq / n - (sum / n) * (sum / n));
  EXPECT_NEAR(sum / n, 0.0, 0.001);
  EXPECT_NEAR(sd, 1.0 / 32, 0.01 / 32);
  // Kurtosis 3 (uniform: 1.8) and 68.3% within one std (uniform: 57.7%).
  EXPECT_NEAR(quad / n / (sd * sd * sd * sd), 3.0, 0.1);
  EXPECT_NEAR(static_cast<double>(within_one) / n, 0.683, 0.01);
}

TEST(SynthNormal, ChunksGiveTheSameBytesAsOneFill) {
  const WeightSpec s = matrix(37, 101);  // odd: chunks start on the sin half of a pair
  const SynthInit init{false, 0.1f, SynthDistribution::normal};
  std::vector<std::byte> whole(s.bytes), parts(s.bytes);
  synth_fill(7, 3, s, init, 0, whole);
  const size_t cut1 = 2 * 1001, cut2 = 2 * 2222, cut3 = 2 * 2223;
  synth_fill(7, 3, s, init, 0, std::span(parts).subspan(0, cut1));
  synth_fill(7, 3, s, init, cut1 / 2, std::span(parts).subspan(cut1, cut2 - cut1));
  synth_fill(7, 3, s, init, cut2 / 2, std::span(parts).subspan(cut2, cut3 - cut2));
  synth_fill(7, 3, s, init, cut3 / 2, std::span(parts).subspan(cut3));
  EXPECT_EQ(whole, parts);
  // F32 and F16 too, and norms stay exactly one.
  const WeightSpec s32 = matrix(3, 5, DType::f32);
  std::vector<float> f(15);
  synth_fill(1, 0, s32, init, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(f.data()), f.size() * 4));
  for (float x : f) EXPECT_LT(std::fabs(x), 0.67f);
  synth_fill(1, 0, s32, SynthInit{true, 0, SynthDistribution::normal}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(f.data()), f.size() * 4));
  for (float x : f) EXPECT_EQ(x, 1.0f);
}

TEST(SynthNormal, TensorsDifferFromUniformOnlyWhenAsked) {
  ModelWeights w = describe_weights(preset("qwen3-tiny").value()).value();
  auto uniform_default = synth_tensors(w, 3);
  auto uniform = synth_tensors(w, 3, nullptr, SynthDistribution::uniform);
  auto normal = synth_tensors(w, 3, nullptr, SynthDistribution::normal);
  ASSERT_EQ(uniform.size(), normal.size());
  size_t compared = 0;
  for (size_t i = 0; i < uniform.size() && compared < 4; ++i) {
    uint64_t bytes = dtype_size(uniform[i].dtype);
    for (int64_t d : uniform[i].shape) bytes *= static_cast<uint64_t>(d);
    if (bytes > (1u << 20) || uniform[i].shape.size() < 2) continue;
    std::vector<std::byte> a(bytes), b(bytes), c(bytes);
    uniform_default[i].fill(a);
    uniform[i].fill(b);
    normal[i].fill(c);
    EXPECT_EQ(a, b) << uniform[i].name;
    EXPECT_NE(a, c) << uniform[i].name;
    ++compared;
  }
  EXPECT_EQ(compared, 4u);
}

}  // namespace
}  // namespace ferry
