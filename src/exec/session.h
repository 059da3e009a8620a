// A model loaded for one workload under a device budget, kept for as many inferences as wanted:
// the plan, the device arena, the resident groups, the slot ring, every activation buffer and the
// recorded graphs live as long as the session.
//
// Opening one: choose the plan (exec/session_plan.h: a measure pass over the model's buffers, a
// profile, then the plan given, from flags, or the planner's), refuse a budget that cannot hold
// it with the smallest one that can, reserve the budget as one region, then load. Every device
// byte after that comes from the region. The host tier registers the checkpoint in pieces on a
// thread (SessionOptions::registration) while the plan is chosen and the resident groups are
// copied in; a piece refused part-way makes the session release every piece and open as if
// registration had been refused at once (the bounce ring or pageable, replanned).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/executor.h"
#include "exec/session_plan.h"
#include "exec/start_times.h"
#include "exec/streaming_provider.h"
#include "format/safetensors.h"
#include "host/compressed_groups.h"
#include "host/host_tier.h"
#include "model/config.h"
#include "model/inference.h"
#include "model/weights.h"
#include "model/workload.h"
#include "plan/plan.h"

namespace ferry {

class Session {
 public:
  static Result<std::unique_ptr<Session>> open(Backend& backend, const ModelConfig& config,
                                               const ModelWeights& weights,
                                               const Checkpoint& checkpoint,
                                               const Workload& workload,
                                               const SessionOptions& options);
  ~Session();

  // One inference (the same inputs every time). `through`, when given, is a decorator of
  // provider() (progress, profiling) that the executor talks to instead. A checkpoint file
  // changed or truncated during the run is an error naming it.
  Result<InferenceResult> run(GroupProvider* through = nullptr);
  // Real inputs for the runs that follow, in place of the workload's synthetic ones
  // (ModelRunner::set_inputs: they must fit the workload the session was opened for).
  Status set_inputs(ModelInputs inputs) { return runner_->set_inputs(std::move(inputs)); }

  const Plan& plan() const { return planned_.plan; }
  const MemoryBudget& memory() const { return planned_.memory; }
  // The plan with its origin, predicted time and lower bound.
  const SessionPlan& planned() const { return planned_; }
  const HostTier& tier() const { return tier_; }
  // The model's compressed groups (SessionOptions::compress_at_open); null when none were made.
  const CompressedGroups* compressed() const { return compressed_.get(); }
  const StreamingStats& streaming() const { return provider_->stats(); }
  Backend& backend() { return *backend_; }
  GroupProvider& provider() { return *provider_; }
  StreamingProvider& streaming_provider() { return *provider_; }
  size_t graphs() const { return graphs_.size(); }
  const std::vector<Call>& calls() const { return runner_->calls(); }
  double open_seconds() const { return start_.open_s; }
  // Session::open's steps and the registration beside them (the caller's steps left at zero).
  const StartTimes& start_times() const { return start_; }

 private:
  Session() = default;
  // Fills planned_.link_check (SessionOptions::link_check).
  Status check_link(const ModelWeights& weights);
  Backend* backend_ = nullptr;
  const ModelWeights* weights_ = nullptr;  // outlives the session, as the checkpoint does
  const Checkpoint* checkpoint_ = nullptr;
  SessionPlan planned_;
  HostTier tier_;
  std::unique_ptr<CompressedGroups> compressed_;  // outlives provider_ (declared before it)
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<StreamingProvider> provider_;
  std::unique_ptr<ModelRunner> runner_;
  GraphCache graphs_;
  StartTimes start_;
};

}  // namespace ferry
