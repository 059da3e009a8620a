// Test helper: a tiny preset's checkpoint written to a temporary folder, opened, with a small
// workload and a one-session runner (the sessions tests: streaming, the planner in sessions,
// timelines).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "model/presets.h"
#include "text_test_model.h"

namespace ferry::testing {

class TinyCheckpoint {
 public:
  explicit TinyCheckpoint(const std::string& preset_name, const std::string& tag = "stream") {
    dir_ = (std::filesystem::temp_directory_path() /
            ("ferry_" + tag + "_" + preset_name + "_" + std::to_string(::getpid())))
               .string();
    config_ = preset(preset_name).value();
    const Status s = write_test_checkpoint(dir_, config_, 3);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    weights_ = describe_weights(config_).value();
    auto c = Checkpoint::open(dir_);
    EXPECT_TRUE(c.ok());
    checkpoint_.emplace(std::move(c).value());
  }
  ~TinyCheckpoint() { std::filesystem::remove_all(dir_); }
  TinyCheckpoint(const TinyCheckpoint&) = delete;
  TinyCheckpoint& operator=(const TinyCheckpoint&) = delete;

  Workload workload() const {
    Workload w;
    const bool vision = config_.vlm() != nullptr;
    w.num_images = vision ? 1 : 0;
    w.image_height = 64;
    w.image_width = 64;
    w.prompt_tokens = 48;
    w.gen_tokens = 4;
    w.flow_steps = config_.alpamayo() != nullptr ? 2 : 10;
    w.seed = 5;
    return w;
  }

  Result<std::unique_ptr<Session>> open(Backend& backend, const SessionOptions& o) const {
    return Session::open(backend, config_, weights_, *checkpoint_, workload(), o);
  }

  // One session, `runs` inferences (all must agree); the first result.
  Result<InferenceResult> run(const SessionOptions& o, const CpuBackendOptions& cpu = {},
                              int runs = 1, MemoryLedger* ledger = nullptr) const {
    auto backend = create_cpu_backend(cpu);
    FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, open(*backend, o));
    FERRY_ASSIGN_OR_RETURN(InferenceResult first, s->run());
    for (int i = 1; i < runs; ++i) {
      FERRY_ASSIGN_OR_RETURN(InferenceResult again, s->run());
      EXPECT_EQ(again.tokens, first.tokens);
      EXPECT_EQ(again.logits_hash, first.logits_hash);
      EXPECT_EQ(again.actions_hash, first.actions_hash);
      EXPECT_EQ(again.times.recorded_calls(), 0) << "graphs are kept by the session";
    }
    if (ledger != nullptr) *ledger = backend->ledger();
    return first;
  }

  const ModelWeights& weights() const { return weights_; }
  const ModelConfig& config() const { return config_; }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  ModelConfig config_;
  ModelWeights weights_;
  std::optional<Checkpoint> checkpoint_;
};

inline void expect_same(const InferenceResult& got, const InferenceResult& want,
                        const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.logits_hash, want.logits_hash) << what;
  EXPECT_EQ(got.prefill_logits_hash, want.prefill_logits_hash) << what;
  EXPECT_EQ(got.step_logits, want.step_logits) << what;
  EXPECT_EQ(got.actions_hash, want.actions_hash) << what;
}

// Random delays on every stream (a missing wait then shows).
inline CpuBackendOptions hostile_streams() {
  CpuBackendOptions o;
  o.max_delay_us = 150;
  o.delay_seed = 11;
  return o;
}

}  // namespace ferry::testing
