// A GroupProvider decorator that labels a ProfilingBackend's ops with the phase of the call being
// run, so that the executor and the models stay unaware of profiling: execute() asks the
// provider for each call's group before handing the call to the model, and this wrapper sets the
// profiler's phase ("vision", "prefill", "decode", "expert") right then.
#pragma once

#include "backend/profiling_backend.h"
#include "exec/executor.h"
#include "model/call_sequence.h"

namespace ferry {

class ProfilingProvider final : public GroupProvider {
 public:
  ProfilingProvider(GroupProvider& inner, ProfilingBackend& profiler)
      : inner_(inner), profiler_(profiler) {}

  // The inputs uploaded before the first call (CallHandler::upload_inputs) count in its phase.
  Status begin(Stream& stream, std::span<const Call> calls) override {
    if (!calls.empty()) profiler_.set_phase(phase_name(calls.front().phase));
    return inner_.begin(stream, calls);
  }
  Result<void*> acquire(Stream& stream, const Call& call) override {
    profiler_.set_phase(phase_name(call.phase));
    return inner_.acquire(stream, call);
  }
  Status release(Stream& stream, const Call& call) override { return inner_.release(stream, call); }
  Status skip_to(Stream& stream, size_t next) override { return inner_.skip_to(stream, next); }

 private:
  GroupProvider& inner_;
  ProfilingBackend& profiler_;
};

}  // namespace ferry
