// The executor: walks a call sequence, gets each group's bytes from a GroupProvider (resident
// now, a streaming slot later) and hands (call, group, base) to the model's CallHandler, timing
// each phase. It decides nothing: what runs, and in which order, is the call sequence.
#pragma once

#include <span>

#include "backend/backend.h"
#include "core/status.h"
#include "model/call_handler.h"
#include "model/call_sequence.h"
#include "model/config.h"
#include "model/inference.h"
#include "model/model_inputs.h"
#include "model/weights.h"
#include "model/workload.h"

namespace ferry {

// Where a group's bytes are on the device for one call.
class GroupProvider {
 public:
  virtual ~GroupProvider() = default;
  // The calls about to be executed, before the first acquire; acquire and release then come in
  // exactly this order (a provider that streams reads ahead in it to prefetch).
  virtual Status begin(Stream& /*stream*/, std::span<const Call> /*calls*/) { return {}; }
  // The device address of the call's group, valid for work enqueued on `stream` until release.
  virtual Result<void*> acquire(Stream& stream, const Call& call) = 0;
  // The call's work has been enqueued on `stream`; the bytes may be reused after it completes.
  virtual Status release(Stream& /*stream*/, const Call& /*call*/) { return {}; }
  // The calls from the next expected one up to (not including) index `next` of begin()'s calls
  // will not run (generation stopped early); acquire continues with call `next`. A provider that
  // prefetches drops what it read ahead for them and reads ahead from `next` instead.
  virtual Status skip_to(Stream& /*stream*/, size_t /*next*/) { return {}; }
  // Every call has run (the executor has synchronized `stream`): errors of work the provider
  // enqueued on streams of its own (a decode that failed), reported once.
  virtual Status end_run(Stream& /*stream*/) { return {}; }
};

// Runs every call in order; synchronizes the stream at each phase boundary and at the end.
// `graphs` keeps recordings across executions (null: recorded for this execution only).
Result<PhaseTimes> execute(Backend& backend, Stream& stream, const ModelWeights& weights,
                           std::span<const Call> calls, GroupProvider& provider,
                           CallHandler& handler, const ExecOptions& options = {},
                           GraphCache* graphs = nullptr);

// The walker a runner is handed: execute() over one provider, with `graphs` kept across walks
// (may be null).
class Executor final : public CallWalker {
 public:
  Executor(Backend& backend, const ModelWeights& weights, GroupProvider& provider,
           GraphCache* graphs)
      : backend_(backend), weights_(weights), provider_(provider), graphs_(graphs) {}
  Result<PhaseTimes> walk(Stream& stream, std::span<const Call> calls, CallHandler& handler,
                          const ExecOptions& options) override {
    return execute(backend_, stream, weights_, calls, provider_, handler, options, graphs_);
  }
  GraphCache* graphs() override { return graphs_; }

 private:
  Backend& backend_;
  const ModelWeights& weights_;
  GroupProvider& provider_;
  GraphCache* graphs_;
};

// One inference: create_runner, then run once on a stream of its own with `provider`'s groups;
// with `inputs`, on them.
Result<InferenceResult> run_inference(Backend& backend, const ModelConfig& config,
                                      const ModelWeights& weights, GroupProvider& provider,
                                      const Workload& workload, const InferenceOptions& options,
                                      const ModelInputs* inputs = nullptr);

}  // namespace ferry
