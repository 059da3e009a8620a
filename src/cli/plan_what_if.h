// `ferry plan --what-if`: the planning context re-priced for another machine (plan/what_if.h)
// and what the command prints about it: a JSON account of every scale, and the text report with
// every line labelled as a projection.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "exec/session_plan.h"
#include "model/config.h"
#include "model/weights.h"
#include "model/workload.h"
#include "plan/what_if.h"

namespace ferry::cli {

// The runtime and stream workspaces a projection sets apart when the backend planning it holds
// none (the CPU): the H200's, measured (bench/profiles/README.md); --runtime gives the target's.
inline constexpr uint64_t kAssumedRuntimeBytes = uint64_t{466} << 20;

struct WhatIf {
  Repricing repricing;
  uint64_t runtime_bytes = 0;
  bool runtime_assumed = false;  // kAssumedRuntimeBytes, not --runtime nor the backend's own
};

// Re-prices ctx's profile for `target` and rebuilds the context with it (the same measure pass,
// map candidates and tier), with `runtime_bytes` set apart.
Result<WhatIf> what_if_context(Backend& backend, const ModelConfig& config,
                               const ModelWeights& weights, const Workload& workload,
                               const SessionOptions& options, const WhatIfTarget& target,
                               uint64_t runtime_bytes, bool runtime_assumed, PlanningContext& ctx);

nlohmann::ordered_json what_if_json(const WhatIf& w);

// The lines that head a projection's text report, each starting "projection".
void print_what_if_header(std::FILE* out, const WhatIf& w);

// Runs `print` into a buffer and writes its lines to `out`, each prefixed with `prefix`.
void print_prefixed(std::FILE* out, const char* prefix,
                    const std::function<void(std::FILE*)>& print);

}  // namespace ferry::cli
