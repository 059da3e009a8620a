// Residency benefit per MB (paper Eq. 4, Tables IV-VI): given the paper's Table III numbers as a
// profile, the model reproduces Table VII.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/benefit.h"
#include "plan_toy_model.h"

namespace ferry {
namespace {

// The paper prints benefits in ms/MB with three decimals; ours are s/B.
double ms_per_mb(const GroupBenefit& b) {
  return b.per_byte * 1e9;
}
double round3(double x) {
  return std::round(x * 1000) / 1000;
}
double cut3(double x) {
  return std::floor(x * 1000) / 1000;
}

struct Row {
  double first, middle, last;
};

Row row(const std::vector<GroupBenefit>& b, const ModelWeights& w, const std::string& prefix,
        int layers) {
  auto at = [&](int i) {
    const WeightGroup* g = w.find(prefix + "." + std::to_string(i));
    EXPECT_NE(g, nullptr);
    return ms_per_mb(b[static_cast<size_t>(g - w.groups.data())]);
  };
  // Every middle layer has the same benefit; the row shows one of them.
  for (int i = 2; i < layers - 1; ++i) EXPECT_DOUBLE_EQ(at(i), at(1)) << prefix << " " << i;
  return Row{at(0), at(layers / 2), at(layers - 1)};
}

TEST(PlanBenefit, ReproducesTableVIIFromTableIII) {
  const testing::Toy toy = testing::paper_table3_toy(21, 10);
  const std::vector<GroupBenefit> b = residency_benefits(toy.schedule());
  ASSERT_EQ(b.size(), toy.weights.groups.size());

  const Row vit = row(b, toy.weights, "vision.blocks", 27);
  EXPECT_EQ(round3(vit.first), 0.031);
  EXPECT_EQ(vit.middle, 0.0);
  EXPECT_EQ(vit.last, 0.0);

  const Row vlm = row(b, toy.weights, "text.layers", 36);
  // 22 × 10.9 / 368.0 = 0.65163...: the paper prints it cut to 0.651, every other entry rounded.
  EXPECT_EQ(cut3(vlm.first), 0.651);
  EXPECT_EQ(round3(vlm.middle), 0.622);
  EXPECT_EQ(round3(vlm.last), 0.571);

  const Row expert = row(b, toy.weights, "expert.layers", 36);
  EXPECT_EQ(round3(expert.first), 0.298);
  EXPECT_EQ(round3(expert.middle), 0.298);
  EXPECT_EQ(round3(expert.last), 0.215);

  // The order the paper concludes: VLM layers first, then the expert, then the ViT.
  EXPECT_GT(vlm.last, expert.first);
  EXPECT_GT(expert.last, vit.first);
}

TEST(PlanBenefit, ClassifiesEachPhaseAndCountsRepetitions) {
  const testing::Toy toy = testing::paper_table3_toy(21, 10);
  const std::vector<GroupBenefit> b = residency_benefits(toy.schedule());
  const GroupBenefit& vlm0 =
      b[static_cast<size_t>(toy.weights.find("text.layers.0") - toy.weights.groups.data())];
  ASSERT_EQ(vlm0.phases.size(), 2u);  // hybrid: prefill and decode
  EXPECT_EQ(vlm0.phases[0].phase, Phase::prefill);
  EXPECT_EQ(vlm0.phases[0].repetitions, 1);
  EXPECT_FALSE(vlm0.phases[0].dma_bound);  // r = 0.66
  EXPECT_EQ(vlm0.phases[1].phase, Phase::decode);
  EXPECT_EQ(vlm0.phases[1].repetitions, 21);
  EXPECT_TRUE(vlm0.phases[1].dma_bound);  // r = 12.1
  EXPECT_EQ(vlm0.phases[1].position, StepPosition::first);
  // Table VI, first row: (N + 1) · C_DMA.
  EXPECT_NEAR(vlm0.saved_s, 22 * 10.9e-3, 1e-12);

  const GroupBenefit& e35 =
      b[static_cast<size_t>(toy.weights.find("expert.layers.35") - toy.weights.groups.data())];
  ASSERT_EQ(e35.phases.size(), 1u);
  EXPECT_EQ(e35.phases[0].repetitions, 10);
  EXPECT_EQ(e35.phases[0].position, StepPosition::last);
  EXPECT_NEAR(e35.saved_s, 10 * (3.6e-3 - 1.0e-3), 1e-12);  // Table V, last row

  // More decode steps raise the VLM benefit (Fig. 6): N = 5 puts it below the expert's.
  const testing::Toy few = testing::paper_table3_toy(5, 10);
  const std::vector<GroupBenefit> b5 = residency_benefits(few.schedule());
  const size_t vlm_mid =
      static_cast<size_t>(few.weights.find("text.layers.10") - few.weights.groups.data());
  const size_t exp_mid =
      static_cast<size_t>(few.weights.find("expert.layers.10") - few.weights.groups.data());
  EXPECT_LT(b5[vlm_mid].per_byte, b5[exp_mid].per_byte);
  EXPECT_GT(b[vlm_mid].per_byte, b[exp_mid].per_byte);
}

TEST(PlanBenefit, HostGroupsAndPositionsSkipTheEmbedding) {
  testing::ToyBuilder t;
  const int embed = t.group("text.embed", GroupKind::embedding, 1000, 1e-3);
  const auto layers =
      t.stack("text.layers", GroupKind::decoder_layer, 3, 500, 2e-3, Phase::decode, 1e-3);
  t.exe(embed, Phase::decode, 1e-5);
  std::vector<int> step = {embed};
  step.insert(step.end(), layers.begin(), layers.end());
  t.step(step, Phase::decode, 0).step(step, Phase::decode, 1);
  const testing::Toy toy = t.build();
  const std::vector<GroupBenefit> b = residency_benefits(toy.schedule());
  EXPECT_EQ(b[static_cast<size_t>(embed)].saved_s, 0.0);
  EXPECT_EQ(b[static_cast<size_t>(layers[0])].phases[0].position, StepPosition::first);
  EXPECT_EQ(b[static_cast<size_t>(layers[1])].phases[0].position, StepPosition::middle);
  EXPECT_EQ(b[static_cast<size_t>(layers[2])].phases[0].position, StepPosition::last);
  EXPECT_NEAR(b[static_cast<size_t>(layers[2])].saved_s, 2 * (2e-3 - 1e-3), 1e-15);
}

}  // namespace
}  // namespace ferry
