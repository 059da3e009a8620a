// A model loaded for one workload under a device budget, kept for as many inferences as wanted:
// the plan, the device arena, the resident groups, the slot ring, every activation buffer and the
// recorded graphs live as long as the session.
//
// Opening one: measure what the model's buffers take (a measure pass over the same code that
// allocates them), choose the plan (given, from flags, or the default rule), add everything up,
// refuse a budget that cannot hold it with the smallest one that can, reserve the budget as one
// region, then load. Every device byte after that comes from the region.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/host_tier.h"
#include "exec/runner.h"
#include "exec/streaming_provider.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "model/inference.h"
#include "model/weights.h"
#include "model/workload.h"
#include "plan/plan.h"

namespace ferry {

// Where the plan comes from. At most one of plan / resident / resident_count; none of them: all
// groups resident without a budget, the default rule under one.
struct PlanRequest {
  std::optional<Plan> plan;                          // a plan file
  std::optional<std::vector<std::string>> resident;  // exactly these groups resident
  std::optional<int> resident_count;  // K text layers by Eq. 8, plus the non-layer groups
  StreamMode mode = StreamMode::pipelined;
  int slots = 2;
};

struct SessionOptions {
  std::optional<uint64_t> vram;  // every device byte of the process, the CUDA context included
  PlanRequest plan;
  HostPath host_path = HostPath::automatic;
  StreamingOptions streaming;
  InferenceOptions inference;
};

// The device memory of a session, added up before anything is allocated.
struct MemoryBudget {
  std::vector<std::pair<std::string, uint64_t>> items;  // in the order they are printed
  uint64_t budget = 0;                                  // --vram; 0: none
  uint64_t total() const;
  uint64_t of(std::string_view item) const;
  // "runtime 0.52 GiB + kv cache 0.45 GiB + ... = 2.31 GiB"
  std::string summary() const;
};

// The plan and the memory it needs, without taking any device memory: what --dry-run prints and
// what open() checks the budget against. `runtime_bytes`: what the backend holds already (the
// CUDA context and libraries) plus a margin for code loaded later; `in_place`: whether kernels
// can read host memory in place (then the embedding stays on the host).
Result<std::pair<Plan, MemoryBudget>> plan_session(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Workload& workload,
                                                   const SessionOptions& options,
                                                   uint64_t runtime_bytes, bool in_place);

// The smallest budget at which the model and workload run (every group streamed, the embedding
// on the host where it can be), with its breakdown.
Result<MemoryBudget> smallest_budget(Backend& backend, const ModelConfig& config,
                                     const ModelWeights& weights, const Workload& workload,
                                     const SessionOptions& options, uint64_t runtime_bytes,
                                     bool in_place);

// Device memory the runtime keeps outside the arena beyond what it holds when a session opens:
// kernels loaded lazily on first use, graph instantiations (checked from outside on the GPU).
inline constexpr uint64_t kRuntimeMarginBytes = uint64_t{96} << 20;

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

  const Plan& plan() const { return plan_; }
  const MemoryBudget& memory() const { return memory_; }
  const HostTier& tier() const { return tier_; }
  const StreamingStats& streaming() const { return provider_->stats(); }
  GroupProvider& provider() { return *provider_; }
  size_t graphs() const { return graphs_.size(); }
  const std::vector<Call>& calls() const { return runner_->calls(); }
  double open_seconds() const { return open_seconds_; }

 private:
  Session() = default;
  Backend* backend_ = nullptr;
  const Checkpoint* checkpoint_ = nullptr;
  Plan plan_;
  MemoryBudget memory_;
  HostTier tier_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<StreamingProvider> provider_;
  std::unique_ptr<ModelRunner> runner_;
  GraphCache graphs_;
  double open_seconds_ = 0.0;
};

}  // namespace ferry
