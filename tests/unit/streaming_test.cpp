// Demand layering on the CPU backend: every plan gives the bytes of the all-resident run, with
// random delays on every stream and slots poisoned (NaN) before each copy, so that a missing wait
// between the copy and the compute stream changes the output; budgets are held by the arena.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

using testing::expect_same;
using testing::TinyCheckpoint;

CpuBackendOptions hostile() {
  return testing::hostile_streams();
}

SessionOptions with_resident(std::vector<std::string> names,
                             StreamMode mode = StreamMode::pipelined, int slots = 2) {
  SessionOptions o;
  o.inference.keep_all_logits = true;
  o.plan.resident = std::move(names);
  o.plan.mode = mode;
  o.plan.slots = slots;
  o.streaming.poison_slots = true;
  return o;
}

std::vector<std::string> text_layers(const std::vector<int>& idx) {
  std::vector<std::string> n;
  for (int i : idx) n.push_back("text.layers." + std::to_string(i));
  return n;
}

class StreamingPlans : public ::testing::TestWithParam<const char*> {};

TEST_P(StreamingPlans, EveryPlanGivesTheAllResidentBytes) {
  TinyCheckpoint m(GetParam());
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok()) << want.error().to_string();

  std::vector<std::string> all;
  for (const auto& g : m.weights().groups) all.push_back(g.name);
  std::mt19937 rng(42);
  std::vector<std::string> random;
  for (const auto& g : m.weights().groups) {
    if (rng() % 2 == 0) random.push_back(g.name);
  }
  const int layers = static_cast<int>(m.config().text().num_layers);
  struct Case {
    std::string what;
    SessionOptions options;
  };
  std::vector<Case> cases = {
      {"none resident", with_resident({})},
      {"all resident", with_resident(all)},
      {"consecutive k", with_resident(text_layers({0, 1}))},
      {"random", with_resident(random)},
      {"sequential", with_resident(text_layers({1}), StreamMode::sequential)},
      {"three slots", with_resident({"text.head.0"}, StreamMode::pipelined, 3)},
  };
  SessionOptions counted = with_resident({});
  counted.plan.resident.reset();
  counted.plan.resident_count = layers / 2;
  cases.push_back({"interleaved k", counted});
  SessionOptions off = with_resident({});
  off.inference.exec.graphs = false;
  cases.push_back({"none resident, graphs off", off});
  for (const Case& c : cases) {
    auto got = m.run(c.options, hostile(), 2);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.error().to_string();
    expect_same(*got, *want, c.what);
  }
}

TEST_P(StreamingPlans, BudgetsHoldAndTheSmallestIsNamed) {
  TinyCheckpoint m(GetParam());
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  auto backend = create_cpu_backend();
  auto least = smallest_budget(*backend, m.config(), m.weights(), m.workload(), base, 0, true);
  ASSERT_TRUE(least.ok()) << least.error().to_string();
  const uint64_t smallest = least->total();
  // The whole model's bytes on top: every budget from the smallest to all-resident.
  const uint64_t most = smallest + m.weights().total_bytes();
  for (uint64_t vram : {smallest, smallest + (most - smallest) / 3, (smallest + most) / 2, most}) {
    SessionOptions o = base;
    o.vram = vram;
    o.streaming.poison_slots = true;
    MemoryLedger ledger;
    auto got = m.run(o, hostile(), 1, &ledger);
    ASSERT_TRUE(got.ok()) << vram << ": " << got.error().to_string();
    expect_same(*got, *want, "budget " + std::to_string(vram));
    EXPECT_EQ(ledger.reserved, vram / 256 * 256);
    EXPECT_LE(ledger.peak, vram);
  }
  // Below the smallest: refused, naming it.
  SessionOptions o = base;
  o.vram = smallest - 4096;
  auto refused = m.run(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(refused.error().message.find("smallest budget"), std::string::npos)
      << refused.error().message;
}

INSTANTIATE_TEST_SUITE_P(Tiny, StreamingPlans, ::testing::Values("alpamayo-tiny", "qwen3-tiny"));

// The check bites: without the compute stream's wait for a slot's copy, poisoned and delayed
// slots reach the kernels and the output changes.
TEST(StreamingChecks, AMissingWaitChangesTheOutput) {
  TinyCheckpoint m("qwen3-tiny");
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  SessionOptions broken = with_resident({});
  broken.streaming.skip_dma_wait_for_tests = true;
  CpuBackendOptions slow = hostile();
  slow.max_delay_us = 2000;
  auto got = m.run(broken, slow);
  // Poisoned weights give NaN logits (refused by sampling) or, when a copy won the race, other
  // numbers: either way not the all-resident run's.
  EXPECT_TRUE(!got.ok() || got->step_logits != want->step_logits);
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

// The plan chosen under a budget fits it, from the smallest budget to all-resident, on the real
// model shapes (the measure pass needs no checkpoint and no device memory).
TEST(StreamingBudget, ThePlannedPlanFitsEveryBudgetOfTheRealModel) {
  const ModelConfig config = preset("alpamayo-r1-10b").value();
  const ModelWeights weights = describe_weights(config).value();
  Workload w;
  w.num_images = 16;
  w.image_height = 320;
  w.image_width = 576;
  w.prompt_tokens = 3007;
  w.gen_tokens = 21;
  w.flow_steps = 10;
  auto backend = create_cpu_backend();
  const uint64_t runtime = uint64_t{600} << 20;  // what a CUDA context takes, about
  SessionOptions o;
  auto least = smallest_budget(*backend, config, weights, w, o, runtime, true);
  ASSERT_TRUE(least.ok()) << least.error().to_string();
  uint64_t previous_resident = 0;
  for (uint64_t gib4 = 10; gib4 <= 100; gib4 += 5) {  // 2.5 GiB .. 25 GiB in quarter steps
    o.vram = gib4 * (uint64_t{1} << 30) / 4;
    auto planned = plan_session(*backend, config, weights, w, o, runtime, true);
    if (*o.vram < least->total()) {
      EXPECT_FALSE(planned.ok());
      continue;
    }
    ASSERT_TRUE(planned.ok()) << *o.vram << ": " << planned.error().to_string();
    EXPECT_LE(planned->second.total(), *o.vram);
    const uint64_t resident = resident_bytes(planned->first, weights);
    EXPECT_GE(resident, previous_resident) << "more budget, no fewer residents";
    previous_resident = resident;
  }
  // At 25 GiB everything fits: the planner streams nothing (the embedding may stay on the host
  // or be resident, whichever it predicts faster).
  o.vram = uint64_t{25} << 30;
  auto roomy = plan_session(*backend, config, weights, w, o, runtime, true);
  ASSERT_TRUE(roomy.ok()) << roomy.error().to_string();
  EXPECT_EQ(streamed_bytes(roomy->first, weights), 0u);
  EXPECT_EQ(roomy->first.slots, 0);
}

}  // namespace
}  // namespace ferry
