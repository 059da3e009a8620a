// Demand layering on the CPU backend: every plan gives the bytes of the all-resident run, with
// random delays on every stream and slots poisoned (NaN) before each copy, so that a missing wait
// between the copy and the compute stream changes the output; budgets are held by the arena.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <tuple>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "lent_plan.h"
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

struct PlanCase {
  std::string what;
  SessionOptions options;
};

// The plans every host path must run bit-exactly: none resident, all, consecutive k,
// interleaved k, random, sequential, three slots, graphs off.
std::vector<PlanCase> plan_cases(const TinyCheckpoint& m) {
  std::vector<std::string> all;
  for (const auto& g : m.weights().groups) all.push_back(g.name);
  std::mt19937 rng(42);
  std::vector<std::string> random;
  for (const auto& g : m.weights().groups) {
    if (rng() % 2 == 0) random.push_back(g.name);
  }
  const int layers = static_cast<int>(m.config().text().num_layers);
  std::vector<PlanCase> cases = {
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
  // The lent cache: the whole idle region (decode's entries and the expert's apart), a quarter of
  // it (entries of later steps overwrite earlier ones: fills wait for their last readers), and in
  // sequential mode.
  for (const auto& [what, base, divisor] :
       {std::tuple{"lent cache", with_resident({}), 1},
        std::tuple{"lent cache, a quarter", with_resident({"text.head.0"}), 4},
        std::tuple{"lent cache, sequential", with_resident({}, StreamMode::sequential), 1}}) {
    auto plan = testing::lent_cache_plan(m.config(), m.weights(), m.checkpoint(), m.workload(),
                                         base, static_cast<uint64_t>(divisor));
    EXPECT_TRUE(plan.ok()) << what << ": " << plan.error().to_string();
    if (plan.ok()) cases.push_back({what, testing::running(base, *plan)});
  }
  return cases;
}

// The bounce ring's small buffers: a group takes several fills and the ring wraps within one.
BounceOptions small_bounce(int max_fill_delay_us) {
  BounceOptions b;
  b.buffers = 2;
  b.buffer_bytes = 64 << 10;
  b.fill_threads = 2;
  b.max_fill_delay_us = max_fill_delay_us;
  b.delay_seed = 3;
  return b;
}

// Every plan of plan_cases, through `path`, with random delays on every stream (and before every
// buffer fill on the bounce path) and poisoned slots: the bytes of the all-resident run.
void expect_every_plan_exact(const char* preset, HostPath path) {
  TinyCheckpoint m(preset);
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok()) << want.error().to_string();
  for (PlanCase& c : plan_cases(m)) {
    c.options.host_path = path;
    if (path == HostPath::bounce || path == HostPath::storage) {
      c.options.streaming.bounce = small_bounce(20);
    }
    // Nothing reads the storage path's mapping in place: the embedding, which the hand-made
    // plans leave on the host, is resident there (as the planner places it off the mapping).
    auto& resident = c.options.plan.resident;
    if (path == HostPath::storage && resident &&
        std::find(resident->begin(), resident->end(), "text.embed") == resident->end()) {
      resident->push_back("text.embed");
    }
    if (path == HostPath::storage && c.options.plan.plan) {
      for (Placement& p : c.options.plan.plan->placement) {
        if (p == Placement::host) p = Placement::resident;
      }
    }
    auto got = m.run(c.options, hostile(), 2);
    ASSERT_TRUE(got.ok()) << c.what << ": " << got.error().to_string();
    expect_same(*got, *want, std::string(host_path_name(path)) + ", " + c.what);
  }
}

TEST_P(StreamingPlans, EveryPlanGivesTheAllResidentBytes) {
  expect_every_plan_exact(GetParam(), HostPath::automatic);
}

TEST_P(StreamingPlans, BouncePathGivesTheAllResidentBytes) {
  expect_every_plan_exact(GetParam(), HostPath::bounce);
}

// Read from the files (O_DIRECT where the temporary folder's file system allows it): the same
// bytes, and the tier never reads the mapping in place.
TEST_P(StreamingPlans, StoragePathGivesTheAllResidentBytes) {
  expect_every_plan_exact(GetParam(), HostPath::storage);
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

// The lent cache is used, not only harmless: its hits replace copies, and the link carries fewer
// bytes than the same plan without it.
TEST_P(StreamingPlans, LentCacheHitsReplaceCopies) {
  TinyCheckpoint m(GetParam());
  const SessionOptions base = with_resident({});
  auto plan = testing::lent_cache_plan(m.config(), m.weights(), m.checkpoint(), m.workload(), base);
  ASSERT_TRUE(plan.ok()) << plan.error().to_string();
  auto stats = [&](const SessionOptions& o) {
    auto backend = create_cpu_backend();
    auto s = m.open(*backend, o);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    EXPECT_TRUE((*s)->run().ok());
    return (*s)->streaming_provider().stats();
  };
  const StreamingStats without = stats(base);
  const StreamingStats with = stats(testing::running(base, *plan));
  EXPECT_EQ(without.lent_hits, 0);
  EXPECT_GT(with.lent_hits, 0);
  EXPECT_EQ(with.group_copies + with.lent_hits, without.group_copies);
  EXPECT_LT(with.bytes_copied, without.bytes_copied);
}

INSTANTIATE_TEST_SUITE_P(Tiny, StreamingPlans,
                         ::testing::Values("alpamayo-tiny", "qwen3-tiny", "llama-tiny"));

// `broken` (a missing wait) on qwen3-tiny does not give the all-resident run's logits.
void expect_broken_run_differs(const SessionOptions& broken, const CpuBackendOptions& cpu) {
  TinyCheckpoint m("qwen3-tiny");
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  auto got = m.run(broken, cpu);
  // Poisoned weights give NaN logits (refused by sampling) or, when a copy won the race, other
  // numbers: either way not the all-resident run's.
  EXPECT_TRUE(!got.ok() || got->step_logits != want->step_logits);
}

// The check bites: without the compute stream's wait for a slot's copy, poisoned and delayed
// slots reach the kernels and the output changes.
TEST(StreamingChecks, AMissingWaitChangesTheOutput) {
  SessionOptions broken = with_resident({});
  broken.streaming.skip_dma_wait_for_tests = true;
  CpuBackendOptions slow = hostile();
  slow.max_delay_us = 2000;
  expect_broken_run_differs(broken, slow);
}

// The bounce path's host wait bites: when acquire does not wait for the ring's worker to have
// enqueued a slot's copy, the compute stream's wait orders after an older record (or none), and
// poisoned slots reach the kernels.
TEST(StreamingChecks, AMissingBounceWaitChangesTheOutput) {
  SessionOptions broken = with_resident({});
  broken.host_path = HostPath::bounce;
  broken.streaming.bounce = small_bounce(1000);
  broken.streaming.skip_bounce_wait_for_tests = true;
  expect_broken_run_differs(broken, hostile());
}

// Where registration is refused, auto takes the bounce ring (and says so), with the same bytes;
// registered is then an error, and pageable stays pageable.
TEST(StreamingChecks, RefusedRegistrationFallsBackToTheBounceRing) {
  TinyCheckpoint m("qwen3-tiny");
  SessionOptions base;
  base.inference.keep_all_logits = true;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  CpuBackendOptions refusing = hostile();
  refusing.refuse_host_registration = true;
  for (HostPath path : {HostPath::automatic, HostPath::registered, HostPath::pageable}) {
    SessionOptions o = with_resident({});
    o.host_path = path;
    auto backend = create_cpu_backend(refusing);
    auto s = Session::open(*backend, m.config(), m.weights(), m.checkpoint(), m.workload(), o);
    if (path == HostPath::registered) {
      ASSERT_FALSE(s.ok());
      EXPECT_NE(s.error().message.find("refused"), std::string::npos) << s.error().message;
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    const HostTier& tier = (*s)->tier();
    if (path == HostPath::automatic) {
      EXPECT_EQ(tier.path(), HostPath::bounce);
      ASSERT_NE(tier.bounce(), nullptr);
      EXPECT_NE(tier.how().find("refused (cpu test hook)"), std::string::npos) << tier.how();
    } else {
      EXPECT_EQ(tier.path(), HostPath::pageable);
      EXPECT_EQ(tier.bounce(), nullptr);
    }
    // The rate of the path was measured on the largest streamed group.
    EXPECT_GT((*s)->streaming().host_probe_bytes, 0u);
    EXPECT_GT((*s)->streaming().host_probe_seconds, 0.0);
    auto got = (*s)->run();
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    expect_same(*got, *want, host_path_name(path));
    if (tier.bounce() != nullptr) {
      // Every streamed copy went through the ring (at least one fill each).
      const BounceStats b = tier.bounce()->stats();
      EXPECT_GT(b.bytes, 0u);
      EXPECT_GE(b.chunks, static_cast<uint64_t>((*s)->streaming().group_copies));
    }
  }
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
