// The call sequence: the ordered (group, phase, step) invocations of one inference. It is data
// that the planner, the predictor and the executor all read; `ferry run --dry-run` prints it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"
#include "model/workload.h"

namespace ferry {

enum class Phase : uint8_t { vision, prefill, decode, expert };
const char* phase_name(Phase p);
// The number of phases, from the enum: every array indexed by phase has this size, and
// phase_index(p) is p's place in it. Phase::expert stays the last enumerator.
inline constexpr size_t kPhaseCount = static_cast<size_t>(Phase::expert) + 1;
inline constexpr size_t phase_index(Phase p) {
  return static_cast<size_t>(p);
}
static_assert(phase_index(Phase::vision) == 0 && phase_index(Phase::prefill) == 1 &&
                  phase_index(Phase::decode) == 2 && phase_index(Phase::expert) == kPhaseCount - 1,
              "phases index arrays of kPhaseCount: from 0 in execution order, expert last");

struct Call {
  int group = 0;  // index into ModelWeights::groups
  Phase phase = Phase::prefill;
  int step = 0;  // decode token index or flow step; 0 for vision and prefill

  bool operator==(const Call&) const = default;
};

// Vision groups once (patch, blocks with each deepstack merger right after its block, the final
// merger) when the workload has images; prefill (text.embed, text.layers.0..N-1 each as its
// three part groups, text.head);
// decode_steps(config, w) times the same; Alpamayo: flow_steps times (expert.in,
// expert.layers.0..N-1, expert.out). Fails if a group the sequence needs is missing.
Result<std::vector<Call>> call_sequence(const ModelWeights& weights, const ModelConfig& config,
                                        const Workload& w);

// Invocations per group name.
std::map<std::string, int64_t> calls_per_group(const std::vector<Call>& calls,
                                               const ModelWeights& weights);

// Compact, one line per distinct step shape:
//   "prefill  step 0       : text.embed text.layers.0..35 text.head"
//   "decode   steps 0..19  : text.embed text.layers.0..35 text.head"
std::string format_call_sequence(const std::vector<Call>& calls, const ModelWeights& weights);

}  // namespace ferry
