// `ferry bench` (internal to cmd_bench.cpp and bench_sweep.cpp): its flags, and the timed runs
// of one session that the single-budget report and the sweep share.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/session_args.h"
#include "cli/cli_support.h"
#include "cli/progress.h"
#include "cli/workload_args.h"
#include "exec/executor.h"
#include "exec/session.h"
#include "measure/machine_limits.h"
#include "model/inference.h"
#include "plan/stream_timeline.h"

namespace ferry::cli {

struct BenchArgs {
  std::string model;
  std::string backend;
  int runs = 5;
  int warmup = 1;
  WorkloadArgs workload;
  bool json = false;
  bool graphs = true;
  bool op_profile = false;
  int op_profile_top = 15;
  bool timeline = true;      // one more run with timing events when weights stream
  std::string timeline_out;  // write that run's every call and copy here (JSON), resident or not
  bool link_check = true;    // SessionOptions::link_check; --no-link-check
  std::string sweep;         // "auto" or a list of budgets; empty: one session
  int sweep_points = 12;
  std::string plot;
  SessionArgs session;
  bool quiet = false;
};

inline const Reporter kBenchReport{"bench"};

// Warm-up and timed runs of a session; every timed run's outputs must equal the first's.
struct TimedRuns {
  std::optional<InferenceResult> first;
  std::vector<PhaseTimes> times;  // one per timed run
  double median_total() const;
  double median_of(Phase phase) const;  // the stage's median over the timed runs
};
TimedRuns time_runs(Session& session, const BenchArgs& a, const Checkpoint& checkpoint,
                    Progress& progress, bool say);

// One more run with the streaming provider's timeline on (what the copy engine did); nullopt
// when nothing is streamed.
std::optional<TimelineSummary> timeline_run(Session& session, const Checkpoint& checkpoint);

// One run with the timeline on, whatever the plan (all resident too), written to `path` as JSON:
// per call its phase, step, group, compute span and copy span, and the run's host-clock stage
// times beside them, so that where a stage's time goes between the calls can be read off
// (scripts/timeline_gaps.py). Returns the run's summary.
TimelineSummary dump_timeline(Session& session, const Checkpoint& checkpoint,
                              const ModelWeights& weights, const std::string& path);

// `ferry bench --sweep`: one session per budget, in one process (bench_sweep.cpp).
// Each session gets a backend of its own (a budget is reserved once per backend); `limits` were
// measured before.
void bench_sweep(const BenchArgs& a, const OpenModel& m, const Workload& w,
                 const MachineLimits& limits, const SessionOptions& so);

}  // namespace ferry::cli
