// Golden end-to-end runs on the tiny presets: a seeded checkpoint written in-process, one
// inference through the same path as `ferry run` (Session::open with no budget, so every group
// resident, then Session::run on the CPU backend), greedy tokens and hashes compared to values
// recorded from a reviewed run. A change in any op's numerics, the weight tables, the prompt, the
// sampling or the session's loading and executing shows up here. Last recorded 2026-12-06, when
// M = 1 Linear moved to the fixed-order GEMV (backend/gemv_order.h): the tokens and the actions
// kept their values; the logits' hashes moved (the LM head runs at M = 1, now in another order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <memory>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "model/inference.h"
#include "model/presets.h"
#include "model/sampling.h"
#include "plan/plan.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

struct Golden {
  std::vector<int32_t> tokens;
  uint64_t logits_hash;
  uint64_t prefill_logits_hash;
  uint64_t actions_hash;  // 0 for models without an expert
};

class TinyModel {
 public:
  explicit TinyModel(const std::string& preset_name)
      : scratch_("ferry_golden_" + preset_name, /*create=*/false), dir_(scratch_.str()) {
    auto c = preset(preset_name);
    EXPECT_TRUE(c.ok());
    config_ = *c;
    Status s = testing::write_test_checkpoint(dir_, config_, 1);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  }

  Result<InferenceResult> run(const Workload& w, const InferenceOptions& options = {},
                              const CpuBackendOptions& cpu = {}) {
    FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config_));
    FERRY_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir_));
    FERRY_RETURN_IF_ERROR(bind_checkpoint(weights, ckpt));
    auto backend = create_cpu_backend(cpu);
    SessionOptions so;  // no --vram: no budget, every group resident (the plan `ferry run` makes)
    so.inference = options;
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                           Session::open(*backend, config_, weights, ckpt, w, so));
    if (!(session->plan() == all_resident_plan(weights))) {
      return make_error(ErrorCode::internal, "golden: the session's plan is not all resident");
    }
    return session->run();
  }

  const ModelConfig& config() const { return config_; }

 private:
  testing::ScratchDir scratch_;
  std::string dir_;
  ModelConfig config_;
};

std::string describe(const InferenceResult& r) {
  std::string s = "tokens {";
  for (size_t i = 0; i < r.tokens.size(); ++i) s += (i ? ", " : "") + std::to_string(r.tokens[i]);
  char buf[160];
  std::snprintf(buf, sizeof buf, "}, 0x%016" PRIx64 "ull, 0x%016" PRIx64 "ull, 0x%016" PRIx64 "ull",
                r.logits_hash, r.prefill_logits_hash, r.actions_hash);
  return s + buf;
}

void expect_golden(const InferenceResult& r, const Golden& g) {
  EXPECT_EQ(r.tokens, g.tokens) << describe(r);
  EXPECT_EQ(r.logits_hash, g.logits_hash) << describe(r);
  EXPECT_EQ(r.prefill_logits_hash, g.prefill_logits_hash) << describe(r);
  EXPECT_EQ(r.actions_hash, g.actions_hash) << describe(r);
}

TEST(Golden, Qwen3TinyGreedy) {
  TinyModel m("qwen3-tiny");
  Workload w;
  w.prompt_tokens = 40;
  w.gen_tokens = 6;
  w.seed = 7;
  auto a = m.run(w);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  auto b = m.run(w);
  ASSERT_TRUE(b.ok());
  // Two runs are bit-identical.
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logits_hash, b->logits_hash);
  ASSERT_EQ(a->tokens.size(), 6u);
  EXPECT_EQ(a->prompt.size(), 40u);
  // Greedy: the first kept token is the argmax of the prefill logits, found here independently of
  // the library's argmax_token (std::max_element gives the first maximum, as greedy picks).
  const std::vector<float>& logits = a->prefill_logits;
  ASSERT_FALSE(logits.empty());
  for (float v : logits) ASSERT_FALSE(std::isnan(v));
  const auto first_max = std::max_element(logits.begin(), logits.end());
  EXPECT_EQ(a->tokens[0], static_cast<int32_t>(first_max - logits.begin()));
  expect_golden(*a, Golden{{127189, 119492, 87879, 33656, 106130, 4146},
                           0x649a501bec1212efull,
                           0x91bd719e80fd82beull,
                           0});
}

TEST(Golden, Qwen3TinySampled) {
  TinyModel m("qwen3-tiny");
  Workload w;
  w.prompt_tokens = 24;
  w.gen_tokens = 5;
  w.seed = 3;
  w.sampling.greedy = false;
  w.sampling.temperature = 0.6f;
  w.sampling.top_p = 0.98f;
  auto a = m.run(w);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  auto b = m.run(w);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  w.seed = 4;
  auto c = m.run(w);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->tokens, c->tokens);  // another seed, another prompt and draw
  expect_golden(
      *a,
      Golden{{75375, 61353, 5591, 117337, 31944}, 0xce7b7d77c7f1eb9cull, 0x24974fbae8217d65ull, 0});
}

TEST(Golden, Qwen3VlTiny) {
  TinyModel m("qwen3-vl-tiny");
  Workload w;
  w.num_images = 2;
  w.image_height = 64;
  w.image_width = 96;
  w.prompt_tokens = 60;
  w.gen_tokens = 4;
  w.seed = 11;
  auto a = m.run(w);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  // 2 images of 2x3 merged tokens: the grid advances positions by 3, not 6.
  EXPECT_EQ(a->rope_delta, 2 * (3 - 6));
  expect_golden(
      *a, Golden{{47496, 34120, 30074, 30074}, 0x30bdb3a0c434a45aull, 0x2660c49fb043dfe6ull, 0});
}

TEST(Golden, AlpamayoTinyAndTheExpertLeavesTheCacheAlone) {
  TinyModel m("alpamayo-tiny");
  Workload w;
  w.num_images = 2;
  w.image_height = 64;
  w.image_width = 96;
  w.prompt_tokens = 120;
  w.gen_tokens = 5;
  w.flow_steps = 3;
  w.seed = 5;
  InferenceOptions opts;
  opts.hash_kv_cache = true;
  auto a = m.run(w, opts);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  ASSERT_EQ(a->tokens.size(), 5u);
  // The last kept token is <|traj_future_start|>: not the model's choice, the generation replaces
  // the last kept token with it (GenerationParams::final_token, set by run_vision_language), since
  // a synthetic model would not emit it. So the expert sees the whole cache, prompt + 5 tokens.
  // first_future_offset's own cases are in alpamayo_runner_test.cpp.
  EXPECT_EQ(a->tokens.back(), 155681);
  EXPECT_EQ(a->expert_offset, 120 + 5);
  for (int32_t t : a->tokens) EXPECT_TRUE(t < 151669 || t >= 155669) << t;  // <i*> masked
  EXPECT_EQ(a->actions.size(), 128u);
  EXPECT_EQ(a->trajectory_xyz.size(), 64u);
  EXPECT_NE(a->kv_hash_before_expert, 0u);
  EXPECT_EQ(a->kv_hash_before_expert, a->kv_hash_after_expert);
  auto b = m.run(w, opts);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->actions, b->actions);
  EXPECT_EQ(a->kv_hash_after_expert, b->kv_hash_after_expert);  // every cache byte is defined
  expect_golden(*a, Golden{{28802, 143313, 8004, 49534, 155681},
                           0x1aa5bba1a3aae0b8ull,
                           0xee2ff72a12e3fa52ull,
                           0xa8c062c2dd40767full});
}

// Stream ordering: every enqueued item sleeps a random while first, so a host buffer released
// too early or a missing synchronization would change the result.
TEST(Golden, SameBitsUnderRandomStreamDelays) {
  TinyModel m("alpamayo-tiny");
  Workload w;
  w.num_images = 1;
  w.image_height = 64;
  w.image_width = 64;
  w.prompt_tokens = 80;
  w.gen_tokens = 3;
  w.flow_steps = 2;
  w.seed = 21;
  auto plain = m.run(w);
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  CpuBackendOptions delays;
  delays.max_delay_us = 30;
  delays.delay_seed = 5;
  auto delayed = m.run(w, {}, delays);
  ASSERT_TRUE(delayed.ok()) << delayed.error().to_string();
  EXPECT_EQ(plain->tokens, delayed->tokens);
  EXPECT_EQ(plain->logits_hash, delayed->logits_hash);
  EXPECT_EQ(plain->actions_hash, delayed->actions_hash);
}

// Graphs: decode layers and expert layers are recorded at their first call and replayed after.
// A replay reuses every pointer and parameter of the recording, so anything a layer still took
// from the host (a position, a cache length, a row to write) would be stale from the second step
// on and change the tokens or the actions. With and without graphs, the bits must be the same.
TEST(Golden, GraphsOnAndOffGiveTheSameBits) {
  for (const char* name : {"alpamayo-tiny", "qwen3-tiny"}) {
    SCOPED_TRACE(name);
    TinyModel m(name);
    Workload w;
    const bool vision = std::string(name) == "alpamayo-tiny";
    w.num_images = vision ? 1 : 0;
    w.image_height = 64;
    w.image_width = 64;
    w.prompt_tokens = 70;
    w.gen_tokens = 6;
    w.flow_steps = vision ? 3 : 0;
    w.seed = 9;
    InferenceOptions on;
    on.keep_all_logits = true;
    InferenceOptions off = on;
    off.exec.graphs = false;
    auto a = m.run(w, on);
    ASSERT_TRUE(a.ok()) << a.error().to_string();
    auto b = m.run(w, off);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    EXPECT_EQ(a->tokens, b->tokens);
    EXPECT_EQ(a->step_logits, b->step_logits);
    EXPECT_EQ(a->logits_hash, b->logits_hash);
    EXPECT_EQ(a->actions_hash, b->actions_hash);

    // Every layer is three part groups (LayerPart), each a call of its own.
    const int64_t parts = static_cast<int64_t>(std::size(kLayerParts));
    const int64_t layers = m.config().text().num_layers * parts;
    const auto decode = static_cast<size_t>(Phase::decode);
    const int64_t head_chunks = lm_head_chunks(m.config().text()).count;
    const int64_t steps = b->times.calls[decode] / (layers + 1 + head_chunks);  // embed, ..., head
    ASSERT_GE(steps, 2);
    EXPECT_EQ(a->times.recorded[decode], layers);
    EXPECT_EQ(a->times.replayed[decode], layers * (steps - 1));
    EXPECT_EQ(b->times.recorded[decode], 0);
    EXPECT_EQ(b->times.replayed[decode], 0);
    if (vision) {
      const auto expert = static_cast<size_t>(Phase::expert);
      const int64_t xl = m.config().alpamayo()->expert.num_layers * parts;
      EXPECT_EQ(a->times.recorded[expert], xl);
      EXPECT_EQ(a->times.replayed[expert], xl * (w.flow_steps - 1));
    }
  }
}

}  // namespace
}  // namespace ferry
