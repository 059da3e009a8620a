// What the copy engine and the compute engine did during one inference, from timing events
// (Backend::create_timing_event): per call, when its compute started and ended on the compute
// stream; per streamed call, when its copy started and ended on the copy stream. The streaming
// provider records it when asked (StreamingProvider::set_timeline); `ferry bench` reads the copy
// engine's busy time and the copy time hidden under compute from it, and `ferry profile` reads
// each call's C_EXE.
//
// Times are seconds from one origin event recorded on the compute stream before the first copy
// of the inference (the copy stream waits for it while the timeline is on, so no span starts
// before it). A call's compute span starts after its copy is done (the stream's wait) and ends
// when its last op is done: it is the call's device time, without waiting for copies.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/call_sequence.h"
#include "model/weights.h"

namespace ferry {

struct Span {
  double start = 0;
  double end = 0;
  double seconds() const { return end - start; }
};

struct StreamTimeline {
  std::vector<Call> calls;
  double inputs_end = 0;             // the inputs on the device (CallHandler::upload_inputs): no
                                     // call or copy starts before it
  std::vector<Span> compute;         // per call
  std::vector<int64_t> copy_of;      // per call: its index in `copies`, -1 when not streamed
  std::vector<Span> copies;          // per streamed call, in order (sequential mode: on the compute
                                     // stream, right before the call)
  std::vector<uint64_t> copy_bytes;  // per streamed call: the group's bytes
};

struct PhaseStreamStats {
  double copy_busy_s = 0;    // Σ copy spans of the copies that serve this phase's calls
  double hidden_copy_s = 0;  // the part of those spans during which some call computed
  double compute_s = 0;      // Σ compute spans of its calls
  uint64_t link_bytes = 0;
  int64_t copies = 0;
};

struct TimelineSummary {
  double span_s = 0;           // from the origin to the last compute end or copy end
  double compute_busy_s = 0;   // Σ compute spans (the compute engine runs one call at a time)
  double copy_busy_s = 0;      // Σ copy spans (one copy at a time)
  double hidden_copy_s = 0;    // copy time during which the compute engine was also busy
  double hidden_fraction = 1;  // hidden_copy_s / copy_busy_s (1 when nothing was copied)
  double stall_s = 0;          // compute idle between calls while a copy it waits for runs
  uint64_t link_bytes = 0;
  std::array<PhaseStreamStats, kPhaseCount> phases{};  // by the phase of the call a copy serves
};

// Busy times and overlap; spans are taken as measured (a zero or reversed span counts 0).
TimelineSummary summarize_timeline(const StreamTimeline& t);

// The copy spans in time order (the copy engine runs one copy at a time); empty spans dropped.
std::vector<Span> copies_in_order(const StreamTimeline& t);
// How much of [a, b) a copy of `in_order` (copies_in_order) ran in.
double copy_time_within(const std::vector<Span>& in_order, double a, double b);

}  // namespace ferry
