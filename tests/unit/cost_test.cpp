// The cost model behind `ferry bench`'s floors: counted by hand for the Qwen3-8B shapes.
#include <gtest/gtest.h>

#include "model/call_sequence.h"
#include "model/cost.h"
#include "model/presets.h"
#include "model/weights.h"

namespace ferry {
namespace {

struct Fixture {
  ModelConfig config;
  ModelWeights weights;
  Workload w;
  std::vector<Call> calls;
};

Fixture qwen3_8b(int64_t prompt, int64_t tokens) {
  Fixture f;
  f.config = preset("qwen3-8b").value();
  f.weights = describe_weights(f.config).value();
  f.w.prompt_tokens = prompt;
  f.w.gen_tokens = tokens;
  f.calls = call_sequence(f.weights, f.config, f.w).value();
  return f;
}

TEST(Cost, DecoderLayerCountsMatricesAndAttention) {
  Fixture f = qwen3_8b(1500, 3);
  const CostContext ctx = cost_context(f.config, f.w, 1500, 0);
  const auto costs = call_costs(f.config, f.weights, f.calls, ctx);
  ASSERT_EQ(costs.size(), f.calls.size());
  // Qwen3-8B layer matrices by part: attention q 4096², k and v 1024·4096, o 4096²; gate|up
  // 2·12288·4096; down 12288·4096. Attention and the KV cache belong to the attention part.
  const double attn_mat = 2.0 * 4096 * 4096 + 2.0 * 1024 * 4096;
  const double gate_up_mat = 2.0 * 12288 * 4096, down_mat = 12288.0 * 4096;
  const double attn_dim = 32.0 * 128;
  bool saw_prefill = false, saw_decode = false;
  for (size_t i = 0; i < f.calls.size(); ++i) {
    const WeightGroup& g = f.weights.groups[static_cast<size_t>(f.calls[i].group)];
    if (g.kind != GroupKind::decoder_layer) continue;
    const double mat = g.part == LayerPart::attention ? attn_mat
                       : g.part == LayerPart::gate_up ? gate_up_mat
                                                      : down_mat;
    const bool attention = g.part == LayerPart::attention;
    if (f.calls[i].phase == Phase::prefill) {
      saw_prefill = true;
      EXPECT_DOUBLE_EQ(costs[i].flops,
                       2.0 * 1500 * mat + (attention ? 4.0 * 1500 * (1501 / 2.0) * attn_dim : 0))
          << g.name;
    } else if (f.calls[i].step == 1) {
      saw_decode = true;
      // Decode step 1 attends the prompt plus two tokens.
      EXPECT_DOUBLE_EQ(costs[i].flops, 2.0 * mat + (attention ? 4.0 * 1502 * attn_dim : 0))
          << g.name;
      EXPECT_GE(costs[i].weight_bytes, 2.0 * mat);
      EXPECT_DOUBLE_EQ(costs[i].other_bytes, attention ? 1502.0 * 2 * 1024 * 2 : 0.0) << g.name;
    }
  }
  EXPECT_TRUE(saw_prefill);
  EXPECT_TRUE(saw_decode);
}

TEST(Cost, EmbeddingReadsOnlyItsRowsAndFloorTakesTheLargerBound) {
  Fixture f = qwen3_8b(100, 2);
  const auto costs = call_costs(f.config, f.weights, f.calls, cost_context(f.config, f.w, 100, 0));
  const WeightGroup& embed = f.weights.groups[static_cast<size_t>(f.calls[0].group)];
  ASSERT_EQ(embed.kind, GroupKind::embedding);
  EXPECT_DOUBLE_EQ(costs[0].weight_bytes, 100.0 * 4096 * 2);
  EXPECT_LT(costs[0].weight_bytes, static_cast<double>(embed.bytes));

  CallCost c;
  c.flops = 1e12;
  c.weight_bytes = 1e9;
  EXPECT_DOUBLE_EQ(c.floor_seconds(1e15, 1e12), 1e-3);  // both 1 ms
  EXPECT_DOUBLE_EQ(c.floor_seconds(1e14, 1e12), 1e-2);  // compute-bound
  EXPECT_DOUBLE_EQ(c.floor_seconds(1e15, 1e11), 1e-2);  // bandwidth-bound
}

}  // namespace
}  // namespace ferry
