// The map path in planning: the predictor's account of a mapped call (its measured time, the link
// taken in call order), the lower bound with groups that may be mapped, the planner weighing map
// against stream and resident (against exhaustive search over all three on made-up models),
// and the profiler's map-pass plan.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "plan/lower_bound.h"
#include "plan/planner.h"
#include "plan/predictor.h"
#include "plan/timeline_stats.h"
#include "plan_search_util.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

// Three decode groups a, m, b of 1000 bytes each (C_DMA 2 s, C_EXE 1 s; m mapped: 3 s), one
// step, no host costs.
Toy three_groups() {
  ToyBuilder b(1e3);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 1000, 2.0);
  const int m = b.group("text.layers.1", GroupKind::decoder_layer, 1000, 2.0);
  const int c = b.group("text.layers.2", GroupKind::decoder_layer, 1000, 2.0);
  for (int g : {a, m, c}) b.exe(g, Phase::decode, 1.0);
  b.step({a, m, c}, Phase::decode, 0);
  b.host(0, 0, 0);
  Toy t = b.build();
  t.profile.groups[static_cast<size_t>(m)].exe_mapped_s[phase_index(Phase::decode)] = 3.0;
  return t;
}

Plan placed(const ModelWeights& w, std::vector<Placement> p, int slots) {
  Plan plan;
  plan.placement = std::move(p);
  uint64_t largest = largest_streamed_group(plan, w);
  plan.mode = slots == 1 ? StreamMode::sequential : StreamMode::pipelined;
  plan.slots = largest > 0 ? slots : 0;
  plan.slot_bytes = align_group_bytes(largest);
  return plan;
}

TEST(PlanMap, AMappedCallTakesTheLinkInCallOrder) {
  const Toy t = three_groups();
  const Schedule s = t.schedule();
  EXPECT_TRUE(s.map_measured[1]);
  EXPECT_FALSE(s.map_measured[0]);
  const Plan plan =
      placed(t.weights, {Placement::streamed, Placement::host, Placement::streamed}, 2);
  std::vector<CallTiming> trace;
  auto p = predict(t.weights, s, plan, &trace);
  ASSERT_TRUE(p.ok()) << p.error().message;
  // a: copy [0, 2], compute [2, 3]; m mapped: [3, 6]; c's copy waits for m: [6, 8], compute
  // [8, 9]. Without the wait c's copy would run [2, 4] beside m and end the step at 7.
  EXPECT_DOUBLE_EQ(trace[1].compute_start, 3.0);
  EXPECT_DOUBLE_EQ(trace[1].compute_end, 6.0);
  EXPECT_DOUBLE_EQ(trace[2].copy_start, 6.0);
  EXPECT_DOUBLE_EQ(p->total_s, 9.0);
  EXPECT_EQ(p->mapped_bytes, 1000u);
  EXPECT_EQ(p->link_bytes, 3000u);  // two copies and one mapped read
  EXPECT_EQ(p->phases[phase_index(Phase::decode)].mapped_calls, 1);

  // Sequential mode: the copy after the mapped call waits for it anyway.
  const Plan seq =
      placed(t.weights, {Placement::streamed, Placement::host, Placement::streamed}, 1);
  auto q = predict(t.weights, s, seq);
  ASSERT_TRUE(q.ok());
  EXPECT_DOUBLE_EQ(q->total_s, 2 + 1 + 3 + 2 + 1);

  // A group mapped by hand that the profile never timed mapped: max(C_EXE, bytes / link peak).
  const Plan by_hand =
      placed(t.weights, {Placement::host, Placement::resident, Placement::resident}, 2);
  EXPECT_DOUBLE_EQ(s.exe_mapped_s[0], 1.0);  // max(1 s, 1000 B / 1000 B/s)
  auto r = predict(t.weights, s, by_hand);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->total_s, 3.0);
}

TEST(PlanMap, TheEmbeddingOnTheHostIsNotAMappedCall) {
  // A row-gathering group on the host keeps its C_EXE and does not hold the link.
  ToyBuilder b(1e3);
  const int e = b.group("text.embed", GroupKind::embedding, 1000, 2.0);
  const int l = b.group("text.layers.0", GroupKind::decoder_layer, 1000, 2.0);
  b.exe(e, Phase::decode, 0.5).exe(l, Phase::decode, 1.0);
  b.step({e, l}, Phase::decode, 0);
  b.host(0, 0, 0);
  Toy t = b.build();
  t.profile.groups[0].exe_mapped_s[phase_index(Phase::decode)] = 9.0;  // ignored: it gathers
  const Schedule s = t.schedule();
  EXPECT_FALSE(s.map_measured[0]);
  auto p = predict(t.weights, s, placed(t.weights, {Placement::host, Placement::streamed}, 2));
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->total_s, 3.0);  // l's copy [0, 2] beside e's gather [0, 0.5]; l [2, 3]
  EXPECT_EQ(p->mapped_bytes, 0u);
}

// A random toy whose groups have mapped times: some cheaper than any streamed call could be (a
// coherent link), some dearer (a PCIe link), drawn per group.
Toy random_mapped_toy(std::mt19937& rng, int layers, int decode_steps, int flow_steps) {
  Toy t = testing::random_toy(rng, layers, decode_steps, flow_steps);
  std::uniform_real_distribution<double> factor(0.6, 3.0);
  for (size_t g = 0; g < t.profile.groups.size(); ++g) {
    if (host_placement_allowed(t.weights.groups[g])) continue;
    GroupProfile& p = t.profile.groups[g];
    const double f = factor(rng);
    for (size_t ph = 0; ph < p.exe_s.size(); ++ph) {
      if (p.exe_s[ph]) p.exe_mapped_s[ph] = std::max(*p.exe_s[ph], p.dma_s * f * 0.5);
    }
  }
  return t;
}

Schedule map_allowed_schedule(const Toy& t) {
  Schedule s = t.schedule();
  for (size_t g = 0; g < s.group_count(); ++g) s.map_allowed[g] = s.map_measured[g];
  return s;
}

// Every placement of the non-host groups among resident, streamed and mapped (where the search
// considers it: map_search_candidates), for ring sizes 1..max_slots: the fastest predicted
// latency within the budget.
double exhaustive_with_map(const Toy& t, const Schedule& s, uint64_t budget, int max_slots,
                           Plan* arg = nullptr) {
  std::vector<size_t> groups;
  for (size_t g = 0; g < s.group_count(); ++g) {
    if (!s.host_allowed[g]) groups.push_back(g);
  }
  double best = std::numeric_limits<double>::infinity();
  const std::vector<uint8_t> may_map = map_search_candidates(s);
  std::vector<int> choice(groups.size(), 0);  // 0 streamed, 1 resident, 2 mapped
  while (true) {
    Plan p;
    p.placement.assign(s.group_count(), Placement::host);
    bool valid = true;
    for (size_t k = 0; k < groups.size(); ++k) {
      const size_t g = groups[k];
      if (choice[k] == 2 && !may_map[g]) valid = false;
      p.placement[g] = choice[k] == 0   ? Placement::streamed
                       : choice[k] == 1 ? Placement::resident
                                        : Placement::host;
    }
    if (valid) {
      for (int slots = 1; slots <= max_slots; ++slots) {
        const Plan q = placed(t.weights, p.placement, slots);
        if (plan_weight_device_bytes(q, t.weights) > budget) continue;
        const double x = predict_total_s(s, q);
        if (x < best) {
          best = x;
          if (arg) *arg = q;
        }
        if (q.slots == 0) break;
      }
    }
    size_t k = 0;
    while (k < choice.size() && ++choice[k] == 3) choice[k++] = 0;
    if (k == choice.size()) break;
  }
  return best;
}

TEST(PlanMap, PlannerMatchesExhaustiveSearchOverResidentStreamedAndMapped) {
  std::mt19937 rng(77);
  int cases = 0, mapping = 0, exact = 0;
  for (int model = 0; model < 40; ++model) {
    const Toy t = random_mapped_toy(rng, 2 + model % 2, 2 + model % 3, model % 2 ? 2 : 0);
    const Schedule s = map_allowed_schedule(t);
    ASSERT_LE(testing::copyable_groups(t.weights), 9);
    const uint64_t lo = smallest_working_budget(s, true);
    uint64_t hi = 0;
    for (const WeightGroup& g : t.weights.groups) hi += host_placement_allowed(g) ? 0 : g.bytes;
    for (int i = 0; i < 5; ++i) {
      const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(i) / 4;
      PlannerOptions options;
      options.max_slots = 3;
      auto r = make_plan(t.weights, s, budget, options);
      ASSERT_TRUE(r.ok()) << r.error().message;
      Plan arg;
      const double best = exhaustive_with_map(t, s, budget, 3, &arg);
      EXPECT_LE(plan_weight_device_bytes(r->plan, t.weights), budget);
      // With three placements the search is not exact everywhere (199 of these 200 cases when
      // written; the miss 1.4% slower); never worse than 2%, and exact almost always.
      EXPECT_GE(r->prediction.total_s, best * (1 - 1e-12));
      EXPECT_LE(r->prediction.total_s, best * 1.02)
          << "model " << model << " budget " << budget << "\nplanner "
          << plan_to_json(r->plan, t.weights) << "\nbest " << plan_to_json(arg, t.weights);
      exact += r->prediction.total_s <= best * (1 + 1e-9) ? 1 : 0;
      mapping += r->prediction.mapped_bytes > 0 ? 1 : 0;
      auto lb = latency_lower_bound(s, budget);
      ASSERT_TRUE(lb.ok());
      EXPECT_LE(lb->total_s, r->prediction.total_s * (1 + 1e-12));
      EXPECT_LE(lb->min_link_bytes, r->prediction.link_bytes);
      ++cases;
    }
  }
  EXPECT_GE(exact, cases - cases / 50) << cases;
  // Map is a real choice here: some plans take it, not all.
  EXPECT_GT(mapping, 0) << cases;
  EXPECT_LT(mapping, cases);
}

TEST(PlanMap, NeverMappedWhereNotAllowedOrDearer) {
  std::mt19937 rng(5);
  const Toy t = random_mapped_toy(rng, 3, 3, 2);
  Schedule s = t.schedule();  // measured but not allowed (the caller said no range is in place)
  const uint64_t budget = smallest_working_budget(s, true);
  auto r = make_plan(t.weights, s, budget);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(host_bytes(r->plan, t.weights), t.weights.groups[0].bytes);  // the embedding only
  // Allowed, but every mapped call takes its time resident plus 4x a copy's (a slow link): no
  // plan gains by it.
  Toy dear = t;
  for (GroupProfile& g : dear.profile.groups) {
    for (size_t ph = 0; ph < g.exe_mapped_s.size(); ++ph) {
      if (g.exe_mapped_s[ph]) g.exe_mapped_s[ph] = *g.exe_s[ph] + 4 * g.dma_s;
    }
  }
  const Schedule d = map_allowed_schedule(dear);
  auto q = make_plan(dear.weights, d, budget);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->prediction.mapped_bytes, 0u);
}

TEST(PlanMap, LowerBoundHoldsForRandomMappedPlans) {
  std::mt19937 rng(11);
  for (int model = 0; model < 6; ++model) {
    const Toy t = random_mapped_toy(rng, 3, 2 + model % 3, model % 2 ? 2 : 0);
    const Schedule s = map_allowed_schedule(t);
    const uint64_t lo = smallest_working_budget(s, true);
    for (int trial = 0; trial < 200; ++trial) {
      Plan p;
      p.placement.assign(s.group_count(), Placement::host);
      for (size_t g = 0; g < s.group_count(); ++g) {
        if (s.host_allowed[g]) continue;
        p.placement[g] = static_cast<Placement>(rng() % 3);
      }
      const Plan q = placed(t.weights, p.placement, 1 + static_cast<int>(rng() % 3));
      const uint64_t bytes = std::max(plan_weight_device_bytes(q, t.weights), lo);
      auto lb = latency_lower_bound(s, bytes);
      ASSERT_TRUE(lb.ok()) << lb.error().message;
      const double predicted = predict_total_s(s, q);
      EXPECT_LE(lb->total_s, predicted * (1 + 1e-12)) << model << "/" << trial;
    }
  }
}

TEST(PlanMap, TheMapPassPlan) {
  std::mt19937 rng(3);
  const Toy t = testing::random_toy(rng, 3, 2, 0);
  const size_t n = t.weights.groups.size();
  Plan base = testing::mask_plan(t.weights, 0b101, 2);  // layers 0 and 2 resident
  // Nothing readable in place (or only the row-gathering embedding): no pass.
  std::vector<uint8_t> none(n, 0);
  EXPECT_FALSE(map_pass_plan(t.weights, none, base).has_value());
  none[0] = 1;  // text.embed
  EXPECT_FALSE(map_pass_plan(t.weights, none, base).has_value());
  // Layer 1 and head 0 readable: those mapped, the rest as the base has them, the streamed ones
  // one at a time.
  std::vector<uint8_t> some(n, 0);
  some[2] = 1;  // text.layers.1
  some[4] = 1;  // text.head.0
  auto p = map_pass_plan(t.weights, some, base);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->placement[2], Placement::host);
  EXPECT_EQ(p->placement[4], Placement::host);
  EXPECT_EQ(p->placement[1], Placement::resident);
  EXPECT_EQ(p->placement[5], Placement::streamed);
  EXPECT_EQ(p->mode, StreamMode::sequential);
  EXPECT_EQ(p->slots, 1);
  EXPECT_EQ(p->slot_bytes, align_group_bytes(t.weights.groups[5].bytes));
  EXPECT_TRUE(validate_plan(*p, t.weights).ok());
  EXPECT_LE(plan_weight_device_bytes(*p, t.weights), plan_weight_device_bytes(base, t.weights));
}

}  // namespace
}  // namespace ferry
