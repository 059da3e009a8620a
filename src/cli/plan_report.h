// What `ferry plan` and `ferry bench` print about predictions: a plan's predicted time per stage
// against the lower bound, and the VRAM-latency curve of a sweep as a table, JSON and an SVG
// plot (predicted, measured when there is a measurement, T_lb).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exec/session_plan.h"
#include "model/call_sequence.h"
#include "plan/lower_bound.h"
#include "plan/plan.h"
#include "plan/predictor.h"

namespace ferry::cli {

nlohmann::ordered_json prediction_json(const Prediction& p);
nlohmann::ordered_json bound_json(const LowerBound& b);
// A session's link check: its factor, sample and the prediction it gives.
nlohmann::ordered_json link_check_json(const SessionPlan::LinkCheck& c);

// "predicted  1.234 s, T_lb 1.100 s (...)" and one line per stage.
void print_prediction(std::FILE* out, const Prediction& p, const std::optional<LowerBound>& bound);

struct SweepRow {
  uint64_t vram = 0;           // the whole budget
  uint64_t weight_budget = 0;  // its share for weights
  Plan plan;
  double predicted_s = 0;
  uint64_t predicted_link_bytes = 0;
  double bound_s = 0;
  double bound_compute_s = 0;  // T_lb's terms (plan/lower_bound.h), compute as used in bound_s
  double bound_link_s = 0;
  bool carried = false;                 // a smaller budget's plan (plan/sweep.h)
  std::optional<double> measured_s;     // bench: the median of the timed runs
  std::optional<double> measured_link;  // bench: bytes over the link per inference
  // By Phase: the prediction's wall time per stage.
  std::array<double, kPhaseCount> predicted_phase_s{};
  std::optional<std::array<double, kPhaseCount>> measured_phase_s;  // bench: each stage's median
  // bench: the session's link check (SessionPlan::link_check): its factor and the prediction
  // with C_DMA scaled by it.
  std::optional<double> link_factor;
  std::optional<double> checked_s;
  std::array<double, kPhaseCount> checked_phase_s{};
  // bench: the device memory the driver counted for the process at its highest while the session
  // opened and ran (PeakSampler; none where the backend cannot tell), against `vram`.
  std::optional<uint64_t> outside_peak;
};

void print_sweep(std::FILE* out, const std::vector<SweepRow>& rows, const ModelWeights& weights);
nlohmann::ordered_json sweep_json(const std::vector<SweepRow>& rows, const ModelWeights& weights);
// Seconds against GiB of budget: predicted, T_lb, and measured where the rows have it.
// `predicted_name` names the predicted series in the legend ("predicted (projection)" for
// --what-if).
std::string sweep_svg(const std::vector<SweepRow>& rows, const std::string& title,
                      const std::string& predicted_name = "predicted");

}  // namespace ferry::cli
