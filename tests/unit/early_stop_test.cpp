// Generation that ends early on real inputs: the session's call sequence is built for the most
// tokens a run may generate, and a stop makes the executor skip the decode calls left (and the
// streaming provider drop what it read ahead for them). A run that stops at token k must give
// the bytes of a run sized for exactly k + 1 tokens, resident or streamed with poisoned slots
// and random stream delays; synthetic runs are untouched (golden_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "lent_plan.h"
#include "model/presets.h"
#include "model/prompt.h"
#include "model/sampling.h"
#include "scratch_dir.h"
#include "text_test_model.h"

namespace ferry {
namespace {

// ---- the executor alone ----

class OrderProvider : public GroupProvider {
 public:
  Result<void*> acquire(Stream&, const Call& call) override {
    acquired.push_back(call.step);
    return static_cast<void*>(&dummy);
  }
  Status skip_to(Stream&, size_t next) override {
    skips.push_back(next);
    return {};
  }
  int dummy = 0;
  std::vector<int64_t> acquired;
  std::vector<size_t> skips;
};

// Skips decode calls from step `stop_after + 1` on once decode step `stop_after` has run.
class StoppingHandler : public CallHandler {
 public:
  explicit StoppingHandler(int64_t stop_after) : stop_after_(stop_after) {}
  Status run_call(Stream&, const Call& call, const WeightGroup&, void*) override {
    ran.push_back(std::string(phase_name(call.phase)) + std::to_string(call.step));
    if (call.phase == Phase::decode && call.step == stop_after_) stopped_ = true;
    return {};
  }
  bool skip(const Call& call) const override { return stopped_ && call.phase == Phase::decode; }
  std::vector<std::string> ran;

 private:
  int64_t stop_after_;
  bool stopped_ = false;
};

TEST(EarlyStop, ExecutorSkipsTheRestOfDecodeAndTellsTheProvider) {
  auto backend = create_cpu_backend();
  auto stream = backend->create_stream();
  ModelWeights w;
  w.groups.resize(1);
  std::vector<Call> calls = {{0, Phase::prefill, 0}};
  for (int s = 0; s < 5; ++s) calls.push_back({0, Phase::decode, s});
  calls.push_back({0, Phase::expert, 0});
  calls.push_back({0, Phase::expert, 1});
  OrderProvider provider;
  StoppingHandler handler(1);
  auto t = execute(*backend, *stream, w, calls, provider, handler);
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  EXPECT_EQ(handler.ran,
            (std::vector<std::string>{"prefill0", "decode0", "decode1", "expert0", "expert1"}));
  EXPECT_EQ(provider.skips, (std::vector<size_t>{6}));  // the first expert call
  EXPECT_EQ(t->calls[static_cast<size_t>(Phase::decode)], 2);
  EXPECT_EQ(t->calls[static_cast<size_t>(Phase::expert)], 2);

  // A stop at the last decode call skips nothing.
  OrderProvider p2;
  StoppingHandler h2(4);
  ASSERT_TRUE(execute(*backend, *stream, w, calls, p2, h2).ok());
  EXPECT_TRUE(p2.skips.empty());
  EXPECT_EQ(h2.ran.size(), calls.size());
}

// ---- whole runs ----

class Model {
 public:
  explicit Model(const std::string& preset_name)
      : scratch_("ferry_early_" + preset_name, /*create=*/false), dir_(scratch_.str()) {
    config_ = preset(preset_name).value();
    EXPECT_TRUE(testing::write_test_checkpoint(dir_, config_, 4).ok());
    weights_ = describe_weights(config_).value();
    checkpoint_.emplace(Checkpoint::open(dir_).value());
  }

  // Real-looking inputs: random text around one 64x64 image (vision models), a history.
  ModelInputs inputs() const {
    ModelInputs in;
    in.prompt = random_text_ids(21, 30, 151643);
    if (const Qwen3VLConfig* vlm = config_.vlm()) {
      const int64_t values = vlm->vision.patch_values();
      in.image_grid_thw = {{1, 4, 4}};
      in.pixel_values.resize(static_cast<size_t>(16 * values));
      Rng rng(9);
      for (float& v : in.pixel_values) v = static_cast<float>(rng.uniform() * 2.0 - 1.0);
      std::vector<int32_t> image = {static_cast<int32_t>(vlm->vision_start_token_id)};
      image.insert(image.end(), 4, static_cast<int32_t>(vlm->image_token_id));
      image.push_back(static_cast<int32_t>(vlm->vision_end_token_id));
      in.prompt.insert(in.prompt.begin() + 10, image.begin(), image.end());
    }
    if (config_.alpamayo() != nullptr) in.history = synthetic_history(6);
    return in;
  }

  Workload workload(int64_t max_tokens) const {
    Workload w;
    const ModelInputs in = inputs();
    w.num_images = static_cast<int64_t>(in.image_grid_thw.size());
    w.image_height = w.image_width = 64;
    w.prompt_tokens = static_cast<int64_t>(in.prompt.size());
    w.gen_tokens = max_tokens;
    w.flow_steps = 2;
    w.seed = 3;
    w.sampling.greedy = false;  // sampled: the stream of draws must line up too
    return w;
  }

  Result<InferenceResult> run(int64_t max_tokens, const StopRule& stop,
                              const SessionOptions& o = {}, const CpuBackendOptions& cpu = {}) {
    auto backend = create_cpu_backend(cpu);
    FERRY_ASSIGN_OR_RETURN(
        std::unique_ptr<Session> s,
        Session::open(*backend, config_, weights_, *checkpoint_, workload(max_tokens), o));
    ModelInputs in = inputs();
    in.stop = stop;
    std::vector<int32_t> seen;
    in.on_token = [&seen](int32_t id) { seen.push_back(id); };
    FERRY_RETURN_IF_ERROR(s->set_inputs(std::move(in)));
    FERRY_ASSIGN_OR_RETURN(InferenceResult r, s->run());
    EXPECT_EQ(seen, r.tokens) << "on_token sees every token, in order";
    // The same session again: the same bytes (the stop state is reset per run).
    FERRY_ASSIGN_OR_RETURN(InferenceResult again, s->run());
    EXPECT_EQ(again.tokens, r.tokens);
    EXPECT_EQ(again.logits_hash, r.logits_hash);
    EXPECT_EQ(again.actions_hash, r.actions_hash);
    return r;
  }

  // One session, one run per stop rule, in order.
  Result<std::vector<InferenceResult>> run_each(int64_t max_tokens,
                                                const std::vector<StopRule>& stops) {
    auto backend = create_cpu_backend();
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Session> s,
                           Session::open(*backend, config_, weights_, *checkpoint_,
                                         workload(max_tokens), SessionOptions{}));
    std::vector<InferenceResult> out;
    for (const StopRule& stop : stops) {
      ModelInputs in = inputs();
      in.stop = stop;
      FERRY_RETURN_IF_ERROR(s->set_inputs(std::move(in)));
      FERRY_ASSIGN_OR_RETURN(InferenceResult r, s->run());
      out.push_back(std::move(r));
    }
    return out;
  }

  // Opens a session for workload(4) and gives it `in`.
  Status set_inputs(ModelInputs in) {
    auto backend = create_cpu_backend();
    FERRY_ASSIGN_OR_RETURN(
        std::unique_ptr<Session> s,
        Session::open(*backend, config_, weights_, *checkpoint_, workload(4), SessionOptions{}));
    return s->set_inputs(std::move(in));
  }

  const ModelWeights& weights() const { return weights_; }
  const ModelConfig& config() const { return config_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }

 private:
  testing::ScratchDir scratch_;
  std::string dir_;
  ModelConfig config_;
  ModelWeights weights_;
  std::optional<Checkpoint> checkpoint_;
};

SessionOptions all_streamed(const ModelWeights& w) {
  SessionOptions o;
  o.inference.hash_kv_cache = true;
  o.plan.resident = std::vector<std::string>{};
  for (const auto& g : w.groups) {
    if (g.kind == GroupKind::embedding) o.plan.resident->push_back(g.name);
  }
  o.streaming.poison_slots = true;
  return o;
}

// `same_cache`: both sessions have a KV cache of one capacity, so its whole buffer can be compared.
void expect_same(const InferenceResult& got, const InferenceResult& want, const char* what,
                 bool same_cache) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logits_hash, want.logits_hash) << what;
  EXPECT_EQ(got.actions_hash, want.actions_hash) << what;
  EXPECT_EQ(got.expert_offset, want.expert_offset) << what;
  if (same_cache) {
    EXPECT_EQ(got.kv_hash_before_expert, want.kv_hash_before_expert) << what;
  }
}

class EarlyStopRuns : public ::testing::TestWithParam<const char*> {};

TEST_P(EarlyStopRuns, StopTokenGivesTheBytesOfAShorterRun) {
  Model m(GetParam());
  SessionOptions hashed;
  hashed.inference.hash_kv_cache = true;
  hashed.inference.keep_all_logits = true;
  auto full = m.run(8, {}, hashed);
  ASSERT_TRUE(full.ok()) << full.error().to_string();
  ASSERT_EQ(full->tokens.size(), 8u);
  // Stop at the first occurrence of the token generated at index 3.
  const int32_t stop_id = full->tokens[3];
  const auto k = static_cast<size_t>(std::find(full->tokens.begin(), full->tokens.end(), stop_id) -
                                     full->tokens.begin());

  StopRule eos;
  eos.stop_tokens = {stop_id};
  auto stopped = m.run(8, eos, hashed);
  ASSERT_TRUE(stopped.ok()) << stopped.error().to_string();
  EXPECT_EQ(stopped->tokens,
            std::vector<int32_t>(full->tokens.begin(), full->tokens.begin() + (k + 1)));
  EXPECT_EQ(stopped->decode_steps, static_cast<int64_t>(k)) << "the stop token is not fed";
  ASSERT_EQ(stopped->step_logits.size(), k);
  for (size_t i = 0; i < k; ++i) EXPECT_EQ(stopped->step_logits[i], full->step_logits[i]) << i;

  auto shorter = m.run(static_cast<int64_t>(k + 1), {}, hashed);
  ASSERT_TRUE(shorter.ok()) << shorter.error().to_string();
  expect_same(*stopped, *shorter, "stop token vs a run sized for k + 1 tokens", false);
  if (!stopped->actions.empty()) {
    // Nothing fed after the last token: the expert sees one row more than the cache holds,
    // which is every row (spec §5.3's "last index + 1").
    EXPECT_EQ(stopped->expert_offset, static_cast<int64_t>(stopped->prompt.size() + k + 1));
    EXPECT_EQ(stopped->kv_hash_before_expert, stopped->kv_hash_after_expert);
  }

  CpuBackendOptions hostile;
  hostile.max_delay_us = 150;
  hostile.delay_seed = 5;
  auto streamed = m.run(8, eos, all_streamed(m.weights()), hostile);
  ASSERT_TRUE(streamed.ok()) << streamed.error().to_string();
  expect_same(*streamed, *stopped, "streamed with poisoned slots and delays", true);

  // The lent cache: the decode calls skipped hold entries' last reads (fills after them wait for
  // the skip instead) and hits whose fills never ran.
  auto lent = testing::lent_cache_plan(m.config(), m.weights(), m.checkpoint(), m.workload(8),
                                       all_streamed(m.weights()), 2);
  ASSERT_TRUE(lent.ok()) << lent.error().to_string();
  auto cached = m.run(8, eos, testing::running(all_streamed(m.weights()), *lent), hostile);
  ASSERT_TRUE(cached.ok()) << cached.error().to_string();
  expect_same(*cached, *stopped, "streamed through the lent cache", true);
}

TEST_P(EarlyStopRuns, StopAfterFeedsTheTokenThenEnds) {
  Model m(GetParam());
  auto full = m.run(8, {});
  ASSERT_TRUE(full.ok()) << full.error().to_string();
  const int32_t stop_id = full->tokens[2];
  const auto k = static_cast<size_t>(std::find(full->tokens.begin(), full->tokens.end(), stop_id) -
                                     full->tokens.begin());
  StopRule after;
  after.stop_after = stop_id;
  auto r = m.run(8, after);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->tokens, std::vector<int32_t>(full->tokens.begin(), full->tokens.begin() + (k + 1)));
  EXPECT_EQ(r->decode_steps, static_cast<int64_t>(k + 1)) << "one forward feeds the token";
}

TEST_P(EarlyStopRuns, OneSessionRunsInputsOfEveryLengthAsFreshSessionsDo) {
  // Graphs recorded by one run are replayed by the next: a run that generates another number of
  // tokens (the expert sees another cache length) must not replay stale work.
  Model m(GetParam());
  auto full = m.run(8, {});
  ASSERT_TRUE(full.ok()) << full.error().to_string();
  std::vector<StopRule> stops(3);
  stops[1].stop_tokens = {full->tokens[1]};
  stops[2].stop_tokens = {full->tokens[4]};
  auto shared = m.run_each(8, stops);
  ASSERT_TRUE(shared.ok()) << shared.error().to_string();
  for (size_t i = 0; i < stops.size(); ++i) {
    auto fresh = m.run(8, stops[i]);
    ASSERT_TRUE(fresh.ok()) << fresh.error().to_string();
    expect_same((*shared)[i], *fresh, "a shared session vs a fresh one", false);
  }
  EXPECT_NE((*shared)[1].tokens.size(), (*shared)[0].tokens.size());
}

INSTANTIATE_TEST_SUITE_P(Tiny, EarlyStopRuns,
                         ::testing::Values("qwen3-tiny", "qwen3-vl-tiny", "alpamayo-tiny"));

TEST(EarlyStop, InputsThatDoNotFitTheSessionAreRefused) {
  Model m("alpamayo-tiny");
  auto expect_refused = [&](ModelInputs bad, const std::string& expect) {
    Status st = m.set_inputs(std::move(bad));
    ASSERT_FALSE(st.ok()) << expect;
    EXPECT_NE(st.error().message.find(expect), std::string::npos) << st.error().message;
  };
  ModelInputs longer = m.inputs();  // (the synthetic prompt sized the buffers: a few more fit)
  longer.prompt.insert(longer.prompt.end(), 1000, 5);
  expect_refused(longer, "this session holds at most");
  ModelInputs other_size = m.inputs();
  other_size.image_grid_thw = {{1, 4, 6}};
  expect_refused(other_size, "1 images of 4x6 patches, but this session holds 1 images of 4x4");
  ModelInputs no_history = m.inputs();
  no_history.history.reset();
  expect_refused(no_history, "needs the ego history");
  ModelInputs outside = m.inputs();
  outside.prompt[0] = 155697;
  expect_refused(outside, "outside the model's vocabulary");
  ModelInputs pads = m.inputs();
  pads.prompt[0] = 151655;  // one image token too many
  expect_refused(pads, "image");
  EXPECT_TRUE(m.set_inputs(m.inputs()).ok());
}

}  // namespace
}  // namespace ferry
