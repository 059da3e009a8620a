// The lent cache (plan/lent_cache.h): the window, the copy order the predictor and the executor
// share, the chooser's packing, the predictor's time on a hand-worked case, the lower bound's
// allowance for it, and the checks that refuse entries sharing bytes while both are in use.
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "plan/lent_cache.h"
#include "plan/lower_bound.h"
#include "plan/planner.h"
#include "plan_search_util.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

TEST(LentCache, TheWindowStartsAfterTheLastVisionOrPrefillCall) {
  std::vector<Call> calls = {{0, Phase::vision, 0},
                             {1, Phase::prefill, 0},
                             {1, Phase::decode, 0},
                             {1, Phase::decode, 1},
                             {2, Phase::expert, 0}};
  EXPECT_EQ(lent_window_start(calls), 2u);
  calls.resize(2);
  EXPECT_EQ(lent_window_start(calls), 2u);
  std::vector<Call> expert_only = {{2, Phase::expert, 0}, {2, Phase::expert, 1}};
  EXPECT_EQ(lent_window_start(expert_only), 0u);
}

// One group A streamed in prefill and three decode steps, sequential: the cache turns the last
// two decode copies into hits.
TEST(LentCache, PredictorHandCase) {
  ToyBuilder b(1e9);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 4096 * 10, 1e-3);
  b.exe(a, Phase::prefill, 0.5e-3).exe(a, Phase::decode, 0.1e-3);
  b.step({a}, Phase::prefill, 0);
  for (int s = 0; s < 3; ++s) b.step({a}, Phase::decode, s);
  const Toy t = b.build();
  const Schedule s = t.schedule();
  Plan p = testing::mask_plan(t.weights, 0, 1);
  EXPECT_NEAR(predict_unchecked(s, p).total_s, 1.5e-3 + 3 * 1.1e-3, 1e-12);
  const Plan cached = with_lent_cache(p, s.calls, s.bytes, s.dma_s, 4096 * 10);
  ASSERT_EQ(cached.cached.size(), 1u);
  EXPECT_EQ(cached.cached[0].offset, 0u);
  auto order = copy_order(cached, s.calls, s.bytes);
  ASSERT_TRUE(order.ok()) << order.error().message;
  EXPECT_EQ(order->kind,
            (std::vector<CopyKind>{CopyKind::ring, CopyKind::fill, CopyKind::hit, CopyKind::hit}));
  auto pred = predict(t.weights, s, cached);
  ASSERT_TRUE(pred.ok()) << pred.error().message;
  EXPECT_NEAR(pred->total_s, 1.5e-3 + 1.1e-3 + 2 * 0.1e-3, 1e-12);
  EXPECT_EQ(pred->link_bytes, 2u * 4096 * 10);
  EXPECT_EQ(pred->copies, 2);
  // One byte too few lent: nothing fits.
  EXPECT_TRUE(with_lent_cache(p, s.calls, s.bytes, s.dma_s, 4096 * 10 - 1).cached.empty());
}

// Random models and plans: entries never share bytes while both are in use, each fill waits for
// the region's last user and for the last reader of any earlier entry whose bytes it takes, ring
// slots still rotate, and the prediction's link bytes are exactly the copies the order makes.
TEST(LentCache, OrderAndPackingOnRandomModels) {
  std::mt19937 rng(11);
  int shared_bytes = 0;
  for (int model = 0; model < 8; ++model) {
    const Toy t = testing::random_toy(rng, 4, 4, model % 2 ? 3 : 0);
    const Schedule s = t.schedule();
    const int n = testing::copyable_groups(t.weights);
    for (uint64_t mask = 0; mask < (uint64_t{1} << n); mask += 5) {
      for (int slots : {1, 2, 3}) {
        const Plan base = testing::mask_plan(t.weights, mask, slots);
        for (uint64_t lent : {uint64_t{4096} * 24, uint64_t{4096} * 60}) {
          const Plan p = with_lent_cache(base, s.calls, s.bytes, s.dma_s, lent);
          ASSERT_TRUE(check_lent_cache(p, s.calls, s.bytes, lent).ok());
          auto order = copy_order(p, s.calls, s.bytes);
          ASSERT_TRUE(order.ok()) << order.error().message;
          uint64_t copied = 0;
          int ring = 0;
          for (const CopyItem& item : order->items) {
            copied += s.bytes[static_cast<size_t>(s.calls[item.call].group)];
            if (item.entry < 0) {
              EXPECT_EQ(item.slot, ring % slots);
              ++ring;
              continue;
            }
            EXPECT_GE(item.after + 1, static_cast<int32_t>(order->window));
            EXPECT_LT(item.after, static_cast<int32_t>(item.call));
            const CacheEntry& e = p.cached[static_cast<size_t>(item.entry)];
            for (size_t o = 0; o < p.cached.size(); ++o) {
              const CacheEntry& other = p.cached[o];
              const bool share = e.offset < other.offset + s.bytes[other.group] &&
                                 other.offset < e.offset + s.bytes[e.group];
              if (o == static_cast<size_t>(item.entry) || !share) continue;
              ++shared_bytes;
              // Sharing bytes: one's lifetime ends before the other's starts, and the later
              // fill waits for the earlier's last call.
              const int32_t last = order->entry_last[o];
              ASSERT_TRUE(last < static_cast<int32_t>(item.call) ||
                          order->entry_first[o] > order->entry_last[item.entry]);
              if (last < static_cast<int32_t>(item.call)) {
                EXPECT_GE(item.after, last);
              }
            }
          }
          const Prediction pred = predict_unchecked(s, p);
          EXPECT_EQ(pred.link_bytes, copied);
          EXPECT_EQ(pred.copies, static_cast<int64_t>(order->items.size()));
        }
      }
    }
  }
  EXPECT_GT(shared_bytes, 0) << "no plan reused bytes across lifetimes: the test saw too little";
}

TEST(LentCache, LowerBoundNeverAboveAPlanWithACache) {
  std::mt19937 rng(23);
  for (int model = 0; model < 6; ++model) {
    const Toy t = testing::random_toy(rng, 4, 3, model % 2 ? 2 : 0);
    const Schedule s = t.schedule();
    const int n = testing::copyable_groups(t.weights);
    for (uint64_t mask = 0; mask < (uint64_t{1} << n); mask += 3) {
      for (int slots : {1, 2}) {
        for (uint64_t lent : {uint64_t{4096} * 16, uint64_t{4096} * 200}) {
          const Plan p = with_lent_cache(testing::mask_plan(t.weights, mask, slots), s.calls,
                                         s.bytes, s.dma_s, lent);
          const uint64_t budget = plan_weight_device_bytes(p, t.weights);
          auto lb = latency_lower_bound(s, budget, true, lent);
          ASSERT_TRUE(lb.ok()) << lb.error().message;
          const Prediction pred = predict_unchecked(s, p);
          EXPECT_LE(lb->min_link_bytes, pred.link_bytes) << model << " " << mask;
          EXPECT_LE(lb->total_s, pred.total_s * (1 + 1e-12)) << model << " " << mask;
        }
      }
    }
  }
}

TEST(LentCache, EntriesInUseTogetherMayNotShareBytes) {
  ToyBuilder b(1e9);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 8192, 1e-3);
  const int c = b.group("text.layers.1", GroupKind::decoder_layer, 8192, 1e-3);
  for (int g : {a, c}) b.exe(g, Phase::prefill, 1e-4).exe(g, Phase::decode, 1e-5);
  b.step({a, c}, Phase::prefill, 0);
  for (int s = 0; s < 3; ++s) b.step({a, c}, Phase::decode, s);
  const Toy t = b.build();
  const Schedule s = t.schedule();
  Plan p = testing::mask_plan(t.weights, 0, 2);
  p.cached = {{a, 0}, {c, 4096}};
  auto order = copy_order(p, s.calls, s.bytes);
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.error().message.find("share lent bytes"), std::string::npos);
  p.cached = {{a, 0}, {c, 8192}};
  EXPECT_TRUE(copy_order(p, s.calls, s.bytes).ok());
  EXPECT_FALSE(check_lent_cache(p, s.calls, s.bytes, 16383).ok()) << "one byte short";
  EXPECT_TRUE(check_lent_cache(p, s.calls, s.bytes, 16384).ok());
  // A group called only before the window cannot be cached.
  ToyBuilder once(1e9);
  const int g = once.group("text.layers.0", GroupKind::decoder_layer, 8192, 1e-3);
  once.exe(g, Phase::prefill, 1e-4);
  once.step({g}, Phase::prefill, 0);
  const Toy u = once.build();
  const Schedule su = u.schedule();
  Plan q = testing::mask_plan(u.weights, 0, 2);
  q.cached = {{g, 0}};
  EXPECT_FALSE(copy_order(q, su.calls, su.bytes).ok());
}

TEST(LentCache, PlanFilesKeepTheOffsets) {
  ToyBuilder b(1e9);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 8192, 1e-3);
  const int c = b.group("text.layers.1", GroupKind::decoder_layer, 8192, 1e-3);
  const Toy t = b.build();
  Plan p = testing::mask_plan(t.weights, 0, 2);
  p.cached = {{a, 0}, {c, 8192}};
  auto back = plan_from_json(plan_to_json(p, t.weights), t.weights);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
  p.cached = {{c, 0}, {a, 8192}};
  EXPECT_FALSE(validate_plan(p, t.weights).ok()) << "out of group order";
  p.cached = {{a, 100}};
  EXPECT_FALSE(validate_plan(p, t.weights).ok()) << "unaligned";
  Plan resident = p;
  resident.placement[static_cast<size_t>(a)] = Placement::resident;
  resident.cached = {{a, 0}};
  EXPECT_FALSE(validate_plan(resident, t.weights).ok()) << "cached but resident";
}

// --thorough-search: the search prices every plan with its lent cache. On made-up models it
// finds the best plan by that measure (exhaustive search over every resident subset and ring
// size, each plan with and without its cache) where pricing only the final plan falls short.
TEST(LentCache, ThoroughSearchFindsTheBestPlanWithItsCache) {
  std::mt19937 rng(21);
  int cases = 0, exact = 0, better = 0;
  for (int model = 0; model < 8; ++model) {
    const Toy t = testing::random_toy(rng, 3 + model % 2, 3, model % 2 ? 3 : 0);
    const Schedule s = t.schedule();
    const int n = testing::copyable_groups(t.weights);
    const uint64_t lent = uint64_t{4096} * 40;
    const uint64_t lo = smallest_working_budget(s, true);
    uint64_t hi = 0;
    for (const WeightGroup& g : t.weights.groups) hi += host_placement_allowed(g) ? 0 : g.bytes;
    for (int i = 0; i < 5; ++i) {
      const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(i) / 5;
      double best = std::numeric_limits<double>::infinity();
      for (uint64_t mask = 0; mask < (uint64_t{1} << n); ++mask) {
        for (int slots = 1; slots <= 3; ++slots) {
          const Plan p = testing::mask_plan(t.weights, mask, slots);
          if (plan_weight_device_bytes(p, t.weights) > budget) continue;
          const Plan c = with_lent_cache(p, s.calls, s.bytes, s.dma_s, lent);
          best = std::min({best, predict_total_s(s, p), predict_total_s(s, c)});
          if (p.slots == 0) break;
        }
      }
      PlannerOptions options;
      options.max_slots = 3;
      options.lent_bytes = lent;
      auto plain = make_plan(t.weights, s, budget, options);
      options.lent_in_search = true;
      auto thorough = make_plan(t.weights, s, budget, options);
      ASSERT_TRUE(plain.ok() && thorough.ok());
      EXPECT_GE(thorough->prediction.total_s, best * (1 - 1e-12));
      EXPECT_LE(thorough->prediction.total_s, best * 1.02) << model << " " << budget;
      exact += thorough->prediction.total_s <= best * (1 + 1e-9) ? 1 : 0;
      better += thorough->prediction.total_s < plain->prediction.total_s * (1 - 1e-9) ? 1 : 0;
      ++cases;
    }
  }
  // When written: 40 of 40 exact, 12 of them faster than the plain search's plan.
  EXPECT_GE(exact, cases - cases / 10) << cases;
  EXPECT_GT(better, 0) << cases;
}

}  // namespace
}  // namespace ferry
