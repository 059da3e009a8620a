// A GroupProvider decorator that labels an OpTimingBackend's ops with the phase of the call being
// run, so that the executor and the models stay unaware of op timing: execute() asks the
// provider for each call's group before handing the call to the model, and this wrapper sets the
// timer's phase ("vision", "prefill", "decode", "expert") right then.
#pragma once

#include "backend/op_timing_backend.h"
#include "exec/executor.h"
#include "model/call_sequence.h"

namespace ferry {

class OpTimingProvider final : public GroupProvider {
 public:
  OpTimingProvider(GroupProvider& inner, OpTimingBackend& timer) : inner_(inner), timer_(timer) {}

  // The inputs uploaded before the first call (CallHandler::upload_inputs) count in its phase.
  Status begin(Stream& stream, std::span<const Call> calls) override {
    if (!calls.empty()) timer_.set_phase(phase_name(calls.front().phase));
    return inner_.begin(stream, calls);
  }
  Result<void*> acquire(Stream& stream, const Call& call) override {
    timer_.set_phase(phase_name(call.phase));
    return inner_.acquire(stream, call);
  }
  Status release(Stream& stream, const Call& call) override { return inner_.release(stream, call); }
  Status skip_to(Stream& stream, size_t next) override { return inner_.skip_to(stream, next); }
  Status end_run(Stream& stream) override { return inner_.end_run(stream); }

 private:
  GroupProvider& inner_;
  OpTimingBackend& timer_;
};

}  // namespace ferry
