// The planner: optimal on small made-up models (checked by exhaustive search over every
// resident subset and ring size), the edges of the budget range, determinism, and the paper's
// setting, where it must be at least as fast as the paper's own rule.
#include <gtest/gtest.h>

#include <random>

#include "model/call_sequence.h"
#include "model/cost.h"
#include "model/presets.h"
#include "plan/lower_bound.h"
#include "plan/planner.h"
#include "plan_search_util.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

// Budgets from the smallest working one to everything but the embedding, in `count` steps.
std::vector<uint64_t> budget_sweep(const Toy& t, const Schedule& s, int count) {
  const uint64_t lo = smallest_working_budget(s, true);
  uint64_t hi = 0;
  for (const WeightGroup& g : t.weights.groups) hi += host_placement_allowed(g) ? 0 : g.bytes;
  std::vector<uint64_t> out;
  for (int i = 0; i < count; ++i)
    out.push_back(lo + (hi - lo) * static_cast<uint64_t>(i) / (count - 1));
  return out;
}

TEST(PlanPlanner, MatchesExhaustiveSearchOnMadeUpModels) {
  std::mt19937 rng(2024);
  int cases = 0, improved = 0;
  for (int model = 0; model < 12; ++model) {
    const int layers = 3 + model % 3;
    const Toy t = testing::random_toy(rng, layers, 2 + model % 4, model % 2 ? 3 : 0);
    const Schedule s = t.schedule();
    ASSERT_LE(testing::copyable_groups(t.weights), 11);
    for (uint64_t budget : budget_sweep(t, s, 7)) {
      PlannerOptions options;
      options.max_slots = 3;
      auto r = make_plan(t.weights, s, budget, options);
      ASSERT_TRUE(r.ok()) << r.error().message;
      const double best = testing::exhaustive_best(t, s, budget, 3);
      EXPECT_LE(plan_weight_device_bytes(r->plan, t.weights), budget);
      EXPECT_NEAR(r->prediction.total_s, best, 1e-12 * best)
          << "model " << model << " budget " << budget << ": planner " << r->prediction.total_s
          << " s, best " << best << " s";
      EXPECT_LE(r->prediction.total_s, r->start_s);
      improved += r->prediction.total_s < r->start_s ? 1 : 0;
      ++cases;
    }
  }
  // The search is doing work: the benefit-order start is not already optimal everywhere.
  EXPECT_GT(improved, 0) << cases << " cases";
}

Toy uniform_toy(int layers, uint64_t bytes, uint64_t head_bytes) {
  ToyBuilder b;
  const int embed = b.group("text.embed", GroupKind::embedding, 1 << 20, 1e-3);
  b.exe(embed, Phase::decode, 1e-6);
  std::vector<int> step = {embed};
  const auto l =
      b.stack("text.layers", GroupKind::decoder_layer, layers, bytes, 2e-3, Phase::decode, 1e-3);
  step.insert(step.end(), l.begin(), l.end());
  step.push_back(b.group("text.head", GroupKind::lm_head, head_bytes, 3e-3));
  b.exe(step.back(), Phase::decode, 1e-3);
  for (int s = 0; s < 3; ++s) b.step(step, Phase::decode, s);
  return b.build();
}

TEST(PlanPlanner, TooSmallABudgetNamesTheSmallestThatWorks) {
  const Toy t = uniform_toy(6, 4096, 4096);
  const Schedule s = t.schedule();
  PlannerOptions pipelined_only;
  pipelined_only.allow_sequential = false;
  // Two slots of the largest group.
  EXPECT_EQ(smallest_working_budget(s, false), 2u * 4096);
  auto r = make_plan(t.weights, s, 2 * 4096 - 1, pipelined_only);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(r.error().message.find("8192"), std::string::npos) << r.error().message;
  r = make_plan(t.weights, s, 2 * 4096, pipelined_only);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.slots, 2);
  EXPECT_EQ(resident_bytes(r->plan, t.weights), 0u);
  // Sequential mode needs one slot.
  r = make_plan(t.weights, s, 4096);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.mode, StreamMode::sequential);
  EXPECT_EQ(r->plan.slots, 1);
  EXPECT_FALSE(make_plan(t.weights, s, 4095).ok());

  // A head much larger than the layers: keeping it resident shrinks the slots.
  const Toy big_head = uniform_toy(6, 4096, 65536);
  const Schedule sb = big_head.schedule();
  EXPECT_EQ(smallest_working_budget(sb, false), 65536u + 2 * 4096);
  r = make_plan(big_head.weights, sb, 65536 + 2 * 4096 - 256, pipelined_only);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("73728"), std::string::npos) << r.error().message;
  r = make_plan(big_head.weights, sb, 65536 + 2 * 4096, pipelined_only);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->plan.placement.back(), Placement::resident);
}

TEST(PlanPlanner, BudgetsThatFitEverything) {
  const Toy t = uniform_toy(4, 4096, 8192);
  const Schedule s = t.schedule();
  auto r = make_plan(t.weights, s, t.weights.total_bytes());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->plan, all_resident_plan(t.weights));
  EXPECT_EQ(r->plan.slots, 0);
  EXPECT_EQ(r->prediction.link_bytes, 0u);
  // All but the embedding: the embedding on the host, no slots.
  r = make_plan(t.weights, s, t.weights.total_bytes() - (1 << 20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->plan.placement[0], Placement::host);
  for (size_t g = 1; g < t.weights.groups.size(); ++g) {
    EXPECT_EQ(r->plan.placement[g], Placement::resident);
  }
  EXPECT_EQ(r->plan.slots, 0);
  EXPECT_EQ(r->plan.slot_bytes, 0u);
  EXPECT_TRUE(validate_plan(r->plan, t.weights).ok());
}

TEST(PlanPlanner, DeterministicAndValid) {
  std::mt19937 rng(5);
  const Toy t = testing::random_toy(rng, 6, 4, 3);
  const Schedule s = t.schedule();
  const uint64_t budget = budget_sweep(t, s, 5)[2];
  auto a = make_plan(t.weights, s, budget);
  auto b = make_plan(t.weights, t.calls, t.profile, budget);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->plan, b->plan);
  EXPECT_EQ(a->prediction.total_s, b->prediction.total_s);
  EXPECT_EQ(a->evaluations, b->evaluations);
  EXPECT_TRUE(validate_plan(a->plan, t.weights).ok());
  // The plan survives its JSON round trip.
  auto back = plan_from_json(plan_to_json(a->plan, t.weights), t.weights);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value(), a->plan);
}

TEST(PlanPlanner, TheSamePlanOnAnyThreadCount) {
  const Toy t = testing::paper_table3_toy(21, 10);
  const Schedule s = t.schedule();
  const uint64_t budget = budget_sweep(t, s, 5)[2];
  PlannerOptions one;
  one.threads = 1;
  auto a = make_plan(t.weights, s, budget, one);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_GT(a->evaluations, 100);  // a real search, not a start taken as it is
  for (int threads : {2, 3, 8}) {
    PlannerOptions o;
    o.threads = threads;
    auto b = make_plan(t.weights, s, budget, o);
    ASSERT_TRUE(b.ok()) << b.error().message;
    EXPECT_EQ(a->plan, b->plan) << threads;
    EXPECT_EQ(a->prediction.total_s, b->prediction.total_s) << threads;
    EXPECT_EQ(a->evaluations, b->evaluations) << threads;
  }
  // The evaluation bound cuts a round's priced moves at the same place on any thread count.
  one.max_evaluations = 700;
  PlannerOptions four = one;
  four.threads = 4;
  auto c = make_plan(t.weights, s, budget, one);
  auto d = make_plan(t.weights, s, budget, four);
  ASSERT_TRUE(c.ok() && d.ok());
  EXPECT_EQ(c->plan, d->plan);
  EXPECT_EQ(c->evaluations, d->evaluations);
}

TEST(PlanPlanner, AtLeastAsFastAsThePapersRuleInThePapersSetting) {
  // Table III's Alpamayo; the paper keeps k VLM layers resident at Eq. 8's positions, streams
  // the ViT and the expert through two slots of the largest layer.
  const Toy t = testing::paper_table3_toy(21, 10);
  const Schedule s = t.schedule();
  std::vector<std::string> vlm;
  for (int i = 0; i < 36; ++i) vlm.push_back("text.layers." + std::to_string(i));
  for (int k : {8, 20, 28}) {
    std::vector<std::string> names;
    for (int i : interleaved_layers(k, 36)) names.push_back(vlm[static_cast<size_t>(i)]);
    auto paper = plan_with_resident(t.weights, names, StreamMode::pipelined);
    ASSERT_TRUE(paper.ok());
    const uint64_t budget = plan_weight_device_bytes(paper.value(), t.weights);
    auto paper_s = predict(t.weights, s, paper.value());
    ASSERT_TRUE(paper_s.ok());
    auto r = make_plan(t.weights, s, budget);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_LE(r->prediction.total_s, paper_s->total_s) << k;
    auto lb = latency_lower_bound(s, budget);
    ASSERT_TRUE(lb.ok());
    EXPECT_LE(lb->total_s, r->prediction.total_s) << k;
  }
}

// The real models' shapes with a profile estimated from the cost model (H200-like rates): the
// planner's plan fits, beats the paper's rule (LM head and vision patch/mergers resident, as
// many VLM layers as fit at Eq. 8's positions, the rest streamed through two slots), and stays
// above the lower bound.
struct RealCase {
  const char* preset;
  Workload workload;
};

TEST(PlanPlanner, RealShapesWithAnEstimatedProfile) {
  Workload alpamayo;
  alpamayo.num_images = 16;
  alpamayo.image_height = 320;
  alpamayo.image_width = 576;
  alpamayo.prompt_tokens = 3007;
  alpamayo.gen_tokens = 21;
  alpamayo.flow_steps = 10;
  Workload qwen;
  qwen.prompt_tokens = 1500;
  qwen.gen_tokens = 128;
  for (const RealCase& c : {RealCase{"alpamayo-r1-10b", alpamayo}, RealCase{"qwen3-8b", qwen}}) {
    auto config = preset(c.preset);
    ASSERT_TRUE(config.ok());
    auto weights = describe_weights(config.value());
    ASSERT_TRUE(weights.ok());
    const ModelWeights& w = weights.value();
    auto calls = call_sequence(w, config.value(), c.workload);
    ASSERT_TRUE(calls.ok()) << calls.error().message;
    const int64_t prompt = c.workload.prompt_tokens;
    MachineRates rates;
    rates.link_bytes_per_s = 55e9;
    rates.peak_flops = 7e14;
    rates.memory_bandwidth = 3.5e12;
    rates.host = HostCosts{1e-4, 3e-5, 4e-6, {}, {}, {}, {}};
    auto profile =
        estimate_profile(config.value(), w, calls.value(),
                         cost_context(config.value(), c.workload, prompt, prompt), rates);
    ASSERT_TRUE(profile.ok()) << profile.error().message;
    auto schedule = make_schedule(w, calls.value(), profile.value());
    ASSERT_TRUE(schedule.ok());
    const Schedule& s = schedule.value();
    const int layers = static_cast<int>(config->text().num_layers);
    for (uint64_t gib : {8, 12}) {
      const uint64_t budget = gib << 30;
      // The paper's rule: the most VLM layers that fit beside the non-layer groups.
      std::vector<std::string> fixed;
      for (const WeightGroup& g : w.groups) {
        if (g.kind == GroupKind::lm_head || g.kind == GroupKind::vision_patch ||
            g.kind == GroupKind::vision_merger) {
          fixed.push_back(g.name);
        }
      }
      Plan paper;
      for (int k = 0; k <= layers; ++k) {
        std::vector<std::string> names = fixed;
        for (int i : interleaved_layers(k, layers)) {
          names.push_back("text.layers." + std::to_string(i));
        }
        auto p = plan_with_resident(w, names, StreamMode::pipelined);
        ASSERT_TRUE(p.ok()) << p.error().message;
        if (plan_weight_device_bytes(p.value(), w) > budget) break;
        paper = p.value();
      }
      ASSERT_FALSE(paper.placement.empty()) << c.preset << " " << gib;
      auto paper_s = predict(w, s, paper);
      ASSERT_TRUE(paper_s.ok());
      auto r = make_plan(w, s, budget);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_TRUE(validate_plan(r->plan, w).ok());
      EXPECT_LE(plan_weight_device_bytes(r->plan, w), budget);
      EXPECT_LE(r->prediction.total_s, paper_s->total_s) << c.preset << " " << gib;
      EXPECT_LE(r->prediction.link_bytes, paper_s->link_bytes) << c.preset << " " << gib;
      auto lb = latency_lower_bound(s, budget);
      ASSERT_TRUE(lb.ok());
      EXPECT_LE(lb->total_s, r->prediction.total_s);
      EXPECT_LE(lb->min_link_bytes, r->prediction.link_bytes);
    }
  }
}

}  // namespace
}  // namespace ferry
