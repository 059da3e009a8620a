// The lower bound: its knapsack is exact where the rounding unit is one byte, it never exceeds
// any plan's predicted latency, and it behaves at the edges of the budget range.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "plan/lower_bound.h"
#include "plan_search_util.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

// Fewest bytes over the link by brute force: every resident subset that fits beside one slot of
// its largest streamed group (the relaxation), or nothing when every copyable group fits.
uint64_t brute_min_bytes(const Schedule& s, uint64_t budget) {
  std::vector<size_t> groups;
  uint64_t all = 0;
  for (size_t g = 0; g < s.group_count(); ++g) {
    if (s.host_allowed[g]) continue;
    groups.push_back(g);
    all += s.bytes[g];
  }
  if (all <= budget) return 0;
  uint64_t best = std::numeric_limits<uint64_t>::max();
  for (uint64_t mask = 0; mask < (uint64_t{1} << groups.size()); ++mask) {
    uint64_t resident = 0, traffic = 0, largest = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const size_t g = groups[i];
      if ((mask >> i) & 1u) {
        resident += s.bytes[g];
      } else {
        traffic += s.bytes[g] * static_cast<uint64_t>(s.calls_of[g]);
        largest = std::max(largest, s.bytes[g]);
      }
    }
    if (largest > 0 && resident + align_group_bytes(largest) <= budget) {
      best = std::min(best, traffic);
    }
  }
  return best;
}

TEST(PlanLowerBound, KnapsackIsExactAtByteUnits) {
  // Groups of a few hundred bytes: the room is below 4096 bytes, so the unit is one byte.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> size(1, 300), reps(1, 6);
  for (int trial = 0; trial < 40; ++trial) {
    ToyBuilder b;
    std::vector<std::vector<int>> steps(6);
    const int n = 4 + trial % 6;
    for (int i = 0; i < n; ++i) {
      const int g = b.group("expert.layers." + std::to_string(i), GroupKind::expert_layer,
                            static_cast<uint64_t>(size(rng)), 1e-6);
      b.exe(g, Phase::expert, 1e-6);
      const int r = reps(rng);
      for (int s = 0; s < r; ++s) steps[static_cast<size_t>(s)].push_back(g);
    }
    for (size_t s = 0; s < steps.size(); ++s) b.step(steps[s], Phase::expert, static_cast<int>(s));
    const Toy t = b.build();
    const Schedule s = t.schedule();
    const uint64_t lo = smallest_working_budget(s, true), hi = t.weights.total_bytes();
    for (uint64_t budget = lo; budget <= hi + 10; budget += std::max<uint64_t>(1, (hi - lo) / 9)) {
      auto lb = latency_lower_bound(s, budget);
      ASSERT_TRUE(lb.ok()) << lb.error().message;
      EXPECT_EQ(lb->min_link_bytes, brute_min_bytes(s, budget)) << trial << " " << budget;
      EXPECT_DOUBLE_EQ(lb->link_s, static_cast<double>(lb->min_link_bytes) / 1e9);
    }
  }
}

TEST(PlanLowerBound, NeverAboveAnyPlansPrediction) {
  std::mt19937 rng(19);
  for (int model = 0; model < 6; ++model) {
    const Toy t = testing::random_toy(rng, 4, 3, model % 2 ? 2 : 0);
    const Schedule s = t.schedule();
    const int n = testing::copyable_groups(t.weights);
    double compute = 0;
    for (size_t i = 0; i < s.calls.size(); ++i) compute += s.exe_s[i] + s.host_after_s[i];
    for (uint64_t mask = 0; mask < (uint64_t{1} << n); mask += 3) {
      for (int slots : {1, 2, 3}) {
        const Plan p = testing::mask_plan(t.weights, mask, slots);
        const uint64_t budget = plan_weight_device_bytes(p, t.weights);
        auto lb = latency_lower_bound(s, budget);
        ASSERT_TRUE(lb.ok()) << lb.error().message;
        EXPECT_DOUBLE_EQ(lb->compute_s, compute);
        const Prediction pred = predict_unchecked(s, p);
        EXPECT_LE(lb->total_s, pred.total_s * (1 + 1e-12)) << model << " " << mask;
        EXPECT_LE(lb->min_link_bytes, pred.link_bytes);
      }
    }
  }
}

TEST(PlanLowerBound, ChargesASlotOfTheLargestStreamedGroup) {
  // Two big groups used 10 times, one small group used once, and 1.5 MiB. Keeping one big group
  // resident would leave 0.5 MiB, too little for the slot the other needs: both stream through
  // a 1 MiB slot and only the small group stays. (A relaxation that charged a slot of the
  // smallest group would keep a big one resident and claim half this traffic.)
  ToyBuilder b;
  const int a = b.group("expert.layers.0", GroupKind::expert_layer, 1 << 20, 1e-6);
  const int c = b.group("expert.layers.1", GroupKind::expert_layer, 1 << 20, 1e-6);
  const int small = b.group("expert.out", GroupKind::expert_out, 4096, 1e-6);
  for (int g : {a, c, small}) b.exe(g, Phase::expert, 1e-6);
  for (int step = 0; step < 10; ++step) {
    std::vector<int> calls = {a, c};
    if (step == 0) calls.push_back(small);
    b.step(calls, Phase::expert, step);
  }
  const Toy t = b.build();
  const Schedule s = t.schedule();
  const uint64_t budget = (uint64_t{3} << 20) / 2;
  auto lb = latency_lower_bound(s, budget);
  ASSERT_TRUE(lb.ok()) << lb.error().message;
  EXPECT_EQ(lb->min_link_bytes, uint64_t{20} << 20);
  EXPECT_EQ(lb->min_link_bytes, brute_min_bytes(s, budget));
}

TEST(PlanLowerBound, EdgesOfTheBudgetRange) {
  std::mt19937 rng(23);
  const Toy t = testing::random_toy(rng, 5, 4, 2);
  const Schedule s = t.schedule();
  uint64_t copyable = 0;
  for (size_t g = 0; g < s.group_count(); ++g) copyable += s.host_allowed[g] ? 0 : s.bytes[g];
  auto all = latency_lower_bound(s, copyable);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->min_link_bytes, 0u);
  EXPECT_EQ(all->total_s, all->compute_s);

  const uint64_t lo = smallest_working_budget(s, true);
  auto below = latency_lower_bound(s, lo - 1);
  ASSERT_FALSE(below.ok());
  EXPECT_EQ(below.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(below.error().message.find(std::to_string(lo)), std::string::npos);

  // More budget never raises the bound.
  double prev = std::numeric_limits<double>::infinity();
  for (uint64_t budget = lo; budget <= copyable; budget += (copyable - lo) / 16 + 1) {
    auto lb = latency_lower_bound(s, budget);
    ASSERT_TRUE(lb.ok());
    EXPECT_LE(lb->total_s, prev);
    prev = lb->total_s;
  }
}

}  // namespace
}  // namespace ferry
