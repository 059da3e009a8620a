// The latency predictor: an event simulation of the host, the copy engine and the compute
// engine carrying out a plan over a Schedule, exactly as plan/plan.h says the executor does:
//
//   The copies are plan/lent_cache.h's CopyOrder: ring copies u_0, u_1, ... (in call order; a
//   group called twice is copied twice) use ring slot k mod S (S = plan.slots), lent-cache fills
//   go to their entries, lent-cache hits copy nothing. Copies run one at a time, in order, each
//   after the compute of the call it waits for (`after`: the slot's previous user u_{k-S}; for a
//   fill, the region's last user or the last reader of the bytes it overwrites):
//     copy_start(c_j) = max(copy_end(c_{j-1}), compute_end(after(c_j)))
//                       [sequential mode instead: compute_end(the call before c_j's)]
//     copy_end(c_j)   = copy_start(c_j) + C_DMA(group)
//   The inputs' upload (Schedule::inputs_s) comes first on the compute stream, and the copy
//   stream waits for it: both engines start their work at inputs_s.
//   The host enqueues calls in order, launch_s each; after a call with a host step it first
//   waits for that call's compute, then spends the step's time:
//     enqueued(i)     = host clock after launching i
//     host clock      = max(host clock, compute_end(i)) + host step after i
//   A call computes on one engine, in order:
//     compute_start(i) = max(compute_end(i-1), enqueued(i), copy_end(i) if streamed)
//     compute_end(i)   = compute_start(i) + C_EXE(group, phase)   with the link idle;
//   a call that starts on an idle engine (compute_start(i) > compute_end(i-1): it waited for its
//   copy, a host step or its launch) first spends idle_start_s (profile.h) before its work;
//   a copy's traffic slows kernels (profile.h exe_copying_s), so in pipelined mode the call
//   progresses at 1/C_EXE while no copy runs and at 1/C_EXE_copying while one does, over the
//   copies scheduled at that time (each as soon as the copy before it and its slot's previous
//   user are done; every copy that can overlap a call is known by then). Host steps likewise
//   take their copying time where copies run.
//   Copies are enqueued at the start (those that wait for nothing) or when the call they wait
//   for is enqueued, which never binds above, so prefetch runs through stage boundaries and host
//   steps. Resident and host groups are never copied (a host group's C_EXE includes its rows).
//   A group on the host that does not gather rows is mapped (the map path): its kernels read it
//   whole over the link, for exe_mapped_s; the link is then the call's alone, so a copy whose
//   call comes after a mapped call starts after that call's compute ends (the copies and the
//   mapped calls take the link in call order, which on a saturated link ends each pair when
//   sharing it would).
//   Compressed groups (plan/plan.h's rules): ring calls are the streamed raw calls and the decoded
//   calls, in call order, slot k mod S. A staged copy (a streamed compressed call's compressed
//   bytes into staging buffer j mod plan.staging) takes the copy engine in the copy order like
//   any copy, for Schedule::dma_compressed_s, and starts no earlier than the end of the decode of
//   that buffer's previous user. Decodes run one at a time, in call order, on a decode engine of
//   their own:
//     decode_start(d) = max(decode_end(d-1), copy_end(its copy) if staged,
//                           compute_end(the slot's previous user))
//     decode_end(d)   = decode_start(d) + C_DEC(group)       (Schedule::decode_s)
//   and the call's compute starts no earlier than its decode's end. Sequential mode: copy,
//   decode and compute of a call one after another. Decoding is assumed not to slow a kernel
//   running beside it (not measured yet: the H200 measurement of decode beside compute
//   decides whether it needs a rate of its own, as copies have).
//   The inference ends when the last compute and the last host step have both finished.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/plan.h"
#include "plan/schedule.h"

namespace ferry {

struct PhaseTime {
  double wall_s = 0;     // from the end of the previous phase's last call (and its host step)
                         // to the end of this phase's last call (and its host step)
  double compute_s = 0;  // Σ its calls' compute time (C_EXE, slowed where copies ran)
  double copy_s = 0;     // Σ C_DMA of the copies its calls consume
  double decode_s = 0;   // Σ C_DEC of its decoded calls (on the decode stream)
  int64_t decodes = 0;
  double stall_s = 0;         // compute idle before its calls, waiting for their copies
  double host_s = 0;          // host steps after its calls (their time alone)
  uint64_t link_bytes = 0;    // copied, plus read in place by mapped calls
  uint64_t mapped_bytes = 0;  // of those, read in place (each mapped call reads its group once)
  int64_t calls = 0;
  int64_t mapped_calls = 0;
};

struct Prediction {
  double total_s = 0;
  std::array<PhaseTime, kPhaseCount> phases{};  // index phase_index(Phase)
  uint64_t link_bytes = 0;    // bytes over the link per inference (copies, mapped reads)
  uint64_t mapped_bytes = 0;  // of those, read in place by mapped calls
  int64_t copies = 0;
  double copy_busy_s = 0;    // Σ C_DMA: how long the copy engine works
  double decode_busy_s = 0;  // Σ C_DEC: how long the decode stream works
  int64_t decodes = 0;
  double compute_busy_s = 0;   // Σ compute time of all calls
  double host_s = 0;           // Σ host steps
  double stall_s = 0;          // compute engine idle waiting for copies
  double hidden_copy_s = 0;    // copy time during which the compute engine was also busy
  double hidden_fraction = 1;  // hidden_copy_s / copy_busy_s (1 when nothing is copied)
};

// One call's simulated times (seconds from the start of the inference).
struct CallTiming {
  int slot = -1;           // ring slot (ring calls only: streamed raw and decoded calls)
  double copy_start = -1;  // -1 when the call is not streamed
  double copy_end = -1;
  double decode_start = -1;  // -1 when the call is not a decoded call
  double decode_end = -1;
  double enqueued = 0;  // when the host had launched it
  double compute_start = 0;
  double compute_end = 0;
  double finished = 0;  // compute_end, or the end of the host step after it
};

// Validates the plan against the model (validate_plan) and the schedule, then simulates.
// `trace`, when given, receives one CallTiming per call.
Result<Prediction> predict(const ModelWeights& weights, const Schedule& schedule, const Plan& plan,
                           std::vector<CallTiming>* trace = nullptr);

// The simulation without checks: `plan` must be valid for the schedule's model.
Prediction predict_unchecked(const Schedule& schedule, const Plan& plan,
                             std::vector<CallTiming>* trace = nullptr);

// Only the total latency, without the accounting (what the planner's search evaluates).
double predict_total_s(const Schedule& schedule, const Plan& plan);

}  // namespace ferry
