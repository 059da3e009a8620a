// `ferry bench --op-profile`: the op timing of one more run (backend/op_timing_backend.h), per
// phase, as a table and as JSON.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/op_timing_backend.h"
#include "exec/executor.h"

namespace ferry::cli {

struct KindTotal {
  std::string kind;
  int64_t count = 0;
  double seconds = 0.0;
};

struct PhaseOpTimes {
  std::string phase;
  double wall_seconds = -1.0;   // the phase's wall time in the profiled run; < 0 when unknown
  double timed_seconds = -1.0;  // the same phase in the timed runs (median), when the caller has it
  double op_seconds = 0.0;      // sum of every op's time
  int64_t ops = 0;              // ops, copies and fills
  std::vector<OpBucket> buckets;  // by total time, largest first
  std::vector<KindTotal> kinds;   // by total time, largest first

  // What a share is a share of: the wall time when known, else the sum of op times.
  double share_base() const { return wall_seconds > 0 ? wall_seconds : op_seconds; }
};

// Phases in execution order (vision, prefill, decode, expert), then any other label ("other":
// ops enqueued before the first call); wall times from the profiled run's own PhaseTimes.
std::vector<PhaseOpTimes> summarize_op_times(const std::vector<OpBucket>& buckets,
                                             const PhaseTimes& times);

// The table: a header saying how ops were timed, then per phase the totals, a line by op kind
// and the `top` buckets by total time.
void print_op_times(std::FILE* out, const std::vector<PhaseOpTimes>& phases, size_t top);

// {"method": ..., "phases": {"vision": {"wall_s", "timed_s", "op_s", "ops", "kinds": [...],
//  "ops_by_time": [{"op", "shape", "label", "count", "total_s", "mean_us", "share", ...}]}}}
// with every bucket, not only the top ones.
nlohmann::json op_times_json(const std::vector<PhaseOpTimes>& phases);

}  // namespace ferry::cli
