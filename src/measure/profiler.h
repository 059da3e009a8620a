// The profiler behind `ferry profile`: measures what the predictor needs (plan/profile.h) on the
// machine at hand, with device timing events, under a budget if one is given:
//
//   C_DMA   each group copied from the host tier into one device buffer on a copy stream, between
//           two timing events, nothing else running; one untimed copy first (page cache, clocks),
//           then the median of `runs`. The buffer is as large as the largest group, which any
//           working budget holds (resident or as a slot), so a 12-16 GB card can run it.
//   C_EXE   a session's inferences with the streaming provider's timeline on: each call's compute
//           span on the compute stream, from after its copy's wait to its last op, whether its
//           group is resident or in a slot. A copy crossing the link slows the kernels beside it
//           (on the H200: decode GEMVs 12-22%, prefill GEMMs 2-5%, gathers from host memory 3x),
//           so calls are split by how much of their span a copy ran in: under 5% gives C_EXE
//           alone, over 95% C_EXE copying; per (group, phase) the mean over such calls, then the
//           median over runs. A second pass measures what the plan's own runs could not show
//           (the plan in sequential mode: every call alone; an all-resident plan beside
//           BackgroundCopies: every call copying); see exe_times for what fills the rest.
//   host    launch: inferences through a decorator that times the host from one call to the next
//           where no host step or stage boundary falls between (median over every such gap).
//           Host steps (sampling, the Euler update): the gap they leave between two compute
//           spans in the timelines (host_step_gaps) less one launch, as the predictor adds a
//           launch after every host step, alone and with a copy running as for C_EXE; where no
//           timeline has such a gap, the decorator's time from the call's compute end (a
//           synchronize) to the next call's enqueue.
//   mapped  where kernels can read the host tier in place, a third pass (map_pass_plan): every
//           group whose file range is its layout read in place, the rest streamed one at a time,
//           nothing else on the link; each mapped call's compute span is its C_EXE mapped
//           (exe_mapped_s), what the planner weighs map by.
//   peaks   measure/machine_limits.h (measured before the session reserves its budget).
//
// The statistics over the recorded timelines are pure functions in plan/timeline_stats.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/session.h"
#include "host/host_tier.h"
#include "measure/machine_limits.h"
#include "model/weights.h"
#include "model/workload.h"
#include "plan/profile.h"
#include "plan/stream_timeline.h"
#include "plan/timeline_stats.h"

namespace ferry {

// C_DMA per group and how steady the link was while it was timed.
struct GroupCopyTimes {
  std::vector<double> dma_s;   // per group (index: ModelWeights::groups), median over the passes
  std::vector<double> pass_s;  // per timed pass, every group's copy summed
};
// Times every group's copy as a session streams it: after the tier's registration is complete
// (copies beside the pinning threads measure their contention), split where the session's copies
// split (HostTier::transfer_copies). One untimed pass, then `runs` passes over all the groups in
// turn: a link whose rate drifts while it is timed moves every group's median alike instead of
// the groups timed first (one group's runs back to back gave a profile whose first 60% of groups
// came out 4-20% slower than the rest; ninth session's Qwen3-8B profile).
Result<GroupCopyTimes> measure_group_copies(Backend& backend, const ModelWeights& weights,
                                            const HostTier& tier, int runs);

struct CallMeasurements {
  PhaseTimesOfGroups exe_s;          // per group, alone
  PhaseTimesOfGroups exe_copying_s;  // per group, a copy running
  PhaseTimesOfGroups exe_mapped_s;   // per group, read in place (the map pass; empty: not run)
  PhaseTimesOfGroups idle_start_s;   // per group, ExeTimes::idle_start
  std::vector<std::optional<double>> pipelined_dma_s;  // per group, where the session streamed it
  HostCosts host;
  int runs = 0;
  std::vector<StreamTimeline> timelines;  // the timed runs, as recorded (`profile --timeline-out`)
  double timed_sampling_s = 0;            // the host timer's medians (synchronized, ungraphed gaps)
  double timed_euler_s = 0;
  std::array<double, kPhaseCount> event_s{};  // the timing event cost taken off each span
};

// `runs` timed inferences with the timeline (after `warmup` untimed ones, which also record the
// session's graphs), then `runs` with the host timer; the times derived from them alone.
Result<CallMeasurements> measure_calls(Session& session, const ModelWeights& weights, int runs,
                                       int warmup);

// C_EXE, the pipelined C_DMA and the host steps from m.timelines (and the host timer's times
// where no timeline shows a step), with `alone`, if given, the timelines of the same plan run in
// sequential mode on a second session: C_EXE alone and the host steps alone come from it.
// `under_copies`, if given: timelines of the same plan with BackgroundCopies running (every call
// and host step there is copying).
void derive_call_times(CallMeasurements& m, const ModelWeights& weights,
                       const std::vector<StreamTimeline>* alone,
                       const std::vector<StreamTimeline>* under_copies = nullptr);

// `runs` inferences with the timeline on, after `warmup` without.
Result<std::vector<StreamTimeline>> timed_runs(Session& session, int runs, int warmup);

// The profile file's contents from the measurements: C_DMA from pipelined_dma(dma_s, ...). The
// link peak is the larger of the measured page-locked peak and the fastest lone group copy, so
// that no C_DMA beats bytes / peak (T_lb's link term stays a bound).
// `pipeline_ratio`, if given, receives pipelined_dma's ratio.
Profile measured_profile(const ModelWeights& weights, const std::vector<double>& dma_s,
                         const CallMeasurements& calls, const MachineLimits& limits,
                         const std::string& device, const std::string& byte_path,
                         const Workload& workload, double* pipeline_ratio = nullptr);

}  // namespace ferry
