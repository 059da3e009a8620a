// Statistics over recorded timelines (plan/stream_timeline.h), as pure functions: what each
// call's compute took alone and beside copies, the gaps host steps and stage boundaries leave,
// the timing events' own cost, copy times as the pipeline sees them, and the map pass's plan and
// times. measure/profiler.h records the timelines on a device and turns these into a profile;
// tests feed them made-up timelines.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/plan.h"
#include "plan/profile.h"
#include "plan/stream_timeline.h"

namespace ferry {

// Per group and phase, what the timelines show (seconds; median over runs of the per-run mean):
// over calls with a copy in under 5% of their span (alone), over 95% (copying), all of them
// (mean), and the mean share of the calls' spans under copies (cover).
using PhaseTimesOfGroups = std::vector<std::array<std::optional<double>, kPhaseCount>>;
// A call starts on an idle engine when the previous call's compute ended more than
// kBackToBackGap before it (after its copy, a host step, or the run's start); back to back
// otherwise (timing events leave about 1.3 us between calls on the H200). Such a call takes a few
// microseconds longer (on the H200 about 4 us for an expert call), which matters where calls
// are short: `*_idle_share` is the share of a mean's calls that started idle, `alone_b2b` and
// `alone_idle` split the alone calls by how they started.
inline constexpr double kBackToBackGap = 3e-6;
//
// Every span is taken less its phase's timing event cost (timing_event_cost): the call's own
// time, as it runs without the timeline.
struct ExeSplit {
  PhaseTimesOfGroups alone, copying, mean, cover;
  std::array<double, kPhaseCount> event_s{};  // what was taken off each span, per phase
  PhaseTimesOfGroups alone_b2b, alone_idle;
  PhaseTimesOfGroups alone_idle_share, copying_idle_share, mean_idle_share;
};
ExeSplit split_exe_times(const std::vector<StreamTimeline>& timelines, size_t groups);

// What one timing event costs the compute engine, per phase: the median gap between two calls
// of the phase back to back (over 0, at most kBackToBackGap), where nothing but the first call's
// end event and the second's start event ran (about 1.3 us on the H200); a phase with no such gap
// takes the median over all phases, 0 without any. A compute span runs from its start event to
// its end event and so holds one event's cost that a run without the timeline does not have.
std::array<double, kPhaseCount> timing_event_cost(const std::vector<StreamTimeline>& timelines);

// The gap at each stage boundary (index: the phase entered), median over the timelines: from
// the previous stage's last call's compute end to this stage's first call's compute start,
// where that call did not wait for its copy. It holds the host step after the last call, the
// executor's synchronize at the boundary and the next stage's setup (HostCosts::stage_entry_s
// is it less one launch). host_step_gaps leaves boundaries out.
std::array<std::optional<double>, kPhaseCount> stage_entry_gaps(
    const std::vector<StreamTimeline>& timelines);

// From the origin to when the inference's inputs were on the device (StreamTimeline::
// inputs_end), median over the timelines: HostCosts::inputs_s. Empty without timelines.
std::optional<double> inputs_upload_time(const std::vector<StreamTimeline>& timelines);

// C_EXE per group and phase, alone and with a copy running, set together for every (group,
// phase) the timelines call. `pipelined`: the profiled plan's own runs; `sequential`, if given:
// the same plan in sequential mode, where no copy runs beside a call, so every call there is
// alone. Each (group, phase):
//   alone    the sequential runs' mean; else the pipelined calls alone;
//   copying  the pipelined calls copying; else the runs under background copies; else solved
//            from its part-covered calls
//            (mean = alone + (copying - alone) * cover) when they were at least a quarter
//            covered; else alone times its class's ratio copying / alone (class: kind, layer part,
//            bytes; the groups of one class run the same kernels); else alone (no slowdown seen);
//   alone, when neither pass saw it alone: copying over the class's ratio (1 without one), or,
//            with only part-covered calls, solved from their mean and cover with that ratio.
struct ExeTimes {
  PhaseTimesOfGroups alone;    // back to back
  PhaseTimesOfGroups copying;  // back to back
  // What a call adds when it starts on an idle engine: per class (kind, layer part, bytes) and
  // phase, the median of its groups' alone calls started idle less the median of those started
  // back to back, in the sequential pass (else the pipelined one), at least 0; absent where the
  // class was not seen both ways (then nothing is taken off either).
  PhaseTimesOfGroups idle_start;
};
// `under_copies`, if given: the same plan's runs with BackgroundCopies keeping the link busy the
// whole time; where the pipelined runs saw no call copying, their mean is the copying time.
ExeTimes exe_times(const ModelWeights& weights, const ExeSplit& pipelined,
                   const ExeSplit* sequential = nullptr, const ExeSplit* under_copies = nullptr);

// Below this share of its span under a copy a call counts as alone; above 1 minus it, copying.
inline constexpr double kCopyCoverMargin = 0.05;

// Per group: the median copy span of its streamed calls in the timelines (absent for groups
// the session did not stream).
std::vector<std::optional<double>> pipelined_copy_times(
    const std::vector<StreamTimeline>& timelines, size_t groups);

// The device-side gap a host step leaves in the pipeline: per HostStep kind (index: HostStep), the
// median over the timelines of compute start of the call after the step minus compute end of the
// call before it, counting only gaps where the next call did not wait for its copy (its copy, if
// any, ended before the previous call's compute did). This is what the executor's host step
// costs the device: noticing the compute end, reading the result, the host work, enqueuing the
// next call; nullopt for a kind with no such gap.
// `any`: over every such gap; `alone` / `copying`: over the gaps a copy ran in for under 5% /
// over 95% of.
struct StepGaps {
  std::optional<double> any;
  std::optional<double> alone;
  std::optional<double> copying;
};
std::array<StepGaps, 3> host_step_gaps(const std::vector<StreamTimeline>& timelines,
                                       const ModelWeights& weights);

// C_DMA as the pipeline sees it. A copy issued back to back with others while kernels run takes
// longer than the same copy alone (measured on the H200: about 2%), and the predictor must see
// the former. Groups the session streamed take their median copy span from its timelines; the
// others their lone copy time scaled by the ratio of the two over the streamed groups (the lone
// times as they are when nothing was streamed). `ratio`, if given, receives that ratio (1 when
// nothing was streamed).
std::vector<double> pipelined_dma(const std::vector<double>& alone_s,
                                  const std::vector<std::optional<double>>& pipelined_s,
                                  double* ratio = nullptr);

// The map pass's plan: every group of `in_place` (HostTier::in_place_groups) on the host, read in
// place by its kernels; the others placed as in `base` (the first pass's plan, so it fits the
// same budget), those streamed in sequential mode (one slot, no copy beside any call), so that
// no copy shares the link with a mapped call. nullopt when no group that reads its whole range
// (not a row-gathering embedding) can be mapped.
std::optional<Plan> map_pass_plan(const ModelWeights& weights, const std::vector<uint8_t>& in_place,
                                  const Plan& base);

// C_EXE mapped per group and phase from the map pass's timelines: the mean over each mapped
// group's calls in a phase, the median over runs; only for the groups `plan` maps whole.
PhaseTimesOfGroups mapped_exe_times(const std::vector<StreamTimeline>& timelines,
                                    const ModelWeights& weights, const Plan& plan);

}  // namespace ferry
