// The VRAM-latency sweep (plan/sweep.h) on made-up models: budgets from the smallest working one
// to all-resident, every plan within its budget, the predicted curve never rising with the budget
// and never below T_lb, nothing over the link at the top; and the smallest working plan fits the
// smallest working budget exactly.
#include <gtest/gtest.h>

#include <random>

#include "plan/lower_bound.h"
#include "plan/sweep.h"
#include "plan_search_util.h"

namespace ferry {
namespace {

TEST(PlanSweep, TheCurveNeverRisesAndStaysAboveTheBound) {
  std::mt19937 rng(77);
  for (int model = 0; model < 8; ++model) {
    SCOPED_TRACE(model);
    const testing::Toy t = testing::random_toy(rng, 4 + model % 3, 3, model % 2 ? 2 : 0);
    const Schedule s = t.schedule();
    for (bool sequential : {true, false}) {
      PlannerOptions options;
      options.allow_sequential = sequential;
      options.max_slots = 3;
      const std::vector<uint64_t> budgets = sweep_weight_budgets(s, sequential, 12);
      ASSERT_GE(budgets.size(), 12u);
      EXPECT_EQ(budgets.front(), smallest_working_budget(s, sequential));
      uint64_t copyable = 0;
      for (size_t g = 0; g < s.group_count(); ++g) copyable += s.host_allowed[g] ? 0 : s.bytes[g];
      EXPECT_EQ(budgets.back(), copyable);
      auto points = sweep_plans(t.weights, s, budgets, options);
      ASSERT_TRUE(points.ok()) << points.error().message;
      ASSERT_EQ(points->size(), budgets.size());
      for (size_t i = 0; i < points->size(); ++i) {
        const SweepPoint& p = (*points)[i];
        EXPECT_TRUE(std::is_sorted(budgets.begin(), budgets.end()));
        EXPECT_LE(plan_weight_device_bytes(p.plan, t.weights), p.weight_budget);
        EXPECT_LE(p.bound.total_s, p.prediction.total_s * (1 + 1e-12));
        if (i > 0) {
          EXPECT_LE(p.prediction.total_s, (*points)[i - 1].prediction.total_s);
        }
        if (!sequential && p.plan.slots > 0) {
          EXPECT_EQ(p.plan.mode, StreamMode::pipelined);
        }
      }
      EXPECT_EQ(points->back().prediction.link_bytes, 0u);
      EXPECT_LE(points->back().prediction.total_s, points->front().prediction.total_s);
    }
  }
}

TEST(PlanSweep, SmallestWorkingPlanFitsTheSmallestBudget) {
  std::mt19937 rng(5);
  for (int model = 0; model < 10; ++model) {
    const testing::Toy t = testing::random_toy(rng, 3 + model % 4, 2, model % 2 ? 2 : 0);
    const Schedule s = t.schedule();
    for (bool sequential : {true, false}) {
      const Plan p = smallest_working_plan(t.weights, s, sequential);
      ASSERT_TRUE(validate_plan(p, t.weights).ok());
      EXPECT_EQ(plan_weight_device_bytes(p, t.weights), smallest_working_budget(s, sequential));
      EXPECT_TRUE(predict(t.weights, s, p).ok());
      if (p.slots > 0) {
        EXPECT_EQ(p.slots, sequential ? 1 : 2);
      }
    }
  }
}

TEST(PlanSweep, SequentialOnlyWhenPipelinedIsNotAllowed) {
  std::mt19937 rng(9);
  const testing::Toy t = testing::random_toy(rng, 5, 3, 2);
  const Schedule s = t.schedule();
  PlannerOptions options;
  options.allow_pipelined = false;
  for (uint64_t b : sweep_weight_budgets(s, true, 6)) {
    auto r = make_plan(t.weights, s, b, options);
    ASSERT_TRUE(r.ok()) << r.error().message;
    if (r->plan.slots > 0) {
      EXPECT_EQ(r->plan.mode, StreamMode::sequential);
      EXPECT_EQ(r->plan.slots, 1);
    }
  }
  options.allow_sequential = false;
  EXPECT_FALSE(make_plan(t.weights, s, sweep_weight_budgets(s, true, 2).back(), options).ok());
}

}  // namespace
}  // namespace ferry
