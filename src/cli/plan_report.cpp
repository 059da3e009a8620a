#include "cli/plan_report.h"

#include <algorithm>
#include <cmath>

#include "cli/svg_plot.h"
#include "core/units.h"
#include "plan/profile.h"

namespace ferry::cli {

namespace {

constexpr std::array<Phase, kPhaseCount> kStages = {Phase::vision, Phase::prefill, Phase::decode,
                                                    Phase::expert};

double gib(uint64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(uint64_t{1} << 30);
}

}  // namespace

nlohmann::ordered_json link_check_json(const SessionPlan::LinkCheck& c) {
  nlohmann::ordered_json j;
  j["factor"] = c.factor;
  j["sample_bytes"] = c.bytes;
  j["sample_groups"] = c.groups;
  j["passes"] = c.passes;
  j["prediction"] = prediction_json(c.prediction);
  return j;
}

nlohmann::ordered_json prediction_json(const Prediction& p) {
  nlohmann::ordered_json j;
  j["total_s"] = p.total_s;
  j["link_bytes"] = p.link_bytes;
  j["mapped_bytes"] = p.mapped_bytes;
  j["copies"] = p.copies;
  j["copy_busy_s"] = p.copy_busy_s;
  j["compute_busy_s"] = p.compute_busy_s;
  j["hidden_copy_s"] = p.hidden_copy_s;
  j["hidden_fraction"] = p.hidden_fraction;
  j["stall_s"] = p.stall_s;
  j["host_s"] = p.host_s;
  nlohmann::ordered_json stages = nlohmann::ordered_json::object();
  for (Phase ph : kStages) {
    const PhaseTime& t = p.phases[phase_index(ph)];
    if (t.calls == 0) continue;
    stages[phase_name(ph)] = {{"wall_s", t.wall_s},
                              {"compute_s", t.compute_s},
                              {"copy_s", t.copy_s},
                              {"stall_s", t.stall_s},
                              {"host_s", t.host_s},
                              {"link_bytes", t.link_bytes},
                              {"mapped_bytes", t.mapped_bytes},
                              {"calls", t.calls},
                              {"mapped_calls", t.mapped_calls}};
  }
  j["stages"] = stages;
  return j;
}

nlohmann::ordered_json bound_json(const LowerBound& b) {
  return {{"total_s", b.total_s},
          {"compute_s", b.compute_s},
          {"link_s", b.link_s},
          {"min_link_bytes", b.min_link_bytes}};
}

void print_prediction(std::FILE* out, const Prediction& p, const std::optional<LowerBound>& bound) {
  std::fprintf(out, "predicted  %.4f s", p.total_s);
  if (bound) {
    std::fprintf(out, "; T_lb %.4f s (compute %.4f s, link %.4f s for %.2f GB), %.3fx the bound",
                 bound->total_s, bound->compute_s, bound->link_s,
                 static_cast<double>(bound->min_link_bytes) / 1e9,
                 bound->total_s > 0 ? p.total_s / bound->total_s : 0.0);
  }
  std::fprintf(out, "\n");
  if (p.copies > 0) {
    std::fprintf(out,
                 "           %.2f GB over the link in %lld copies; copy engine busy %.4f s, "
                 "%.1f%% of it under compute; compute stalled %.4f s\n",
                 static_cast<double>(p.link_bytes) / 1e9, static_cast<long long>(p.copies),
                 p.copy_busy_s, 100.0 * p.hidden_fraction, p.stall_s);
  }
  if (p.mapped_bytes > 0) {
    std::fprintf(out, "           %.2f GB read in place by mapped calls (the map path)\n",
                 static_cast<double>(p.mapped_bytes) / 1e9);
  }
  std::fprintf(out, "%-10s %10s %10s %10s %10s %10s %9s\n", "stage", "predicted", "compute", "copy",
               "stall", "host", "link GB");
  for (Phase ph : kStages) {
    const PhaseTime& t = p.phases[phase_index(ph)];
    if (t.calls == 0) continue;
    std::fprintf(out, "%-10s %8.2fms %8.2fms %8.2fms %8.2fms %8.2fms %9.2f\n", phase_name(ph),
                 t.wall_s * 1e3, t.compute_s * 1e3, t.copy_s * 1e3, t.stall_s * 1e3, t.host_s * 1e3,
                 static_cast<double>(t.link_bytes) / 1e9);
  }
}

void print_sweep(std::FILE* out, const std::vector<SweepRow>& rows, const ModelWeights& weights) {
  const bool measured = std::any_of(rows.begin(), rows.end(),
                                    [](const SweepRow& r) { return r.measured_s.has_value(); });
  std::fprintf(out, "%10s %10s %10s %6s %10s %10s %9s", "budget", "weights", "resident", "slots",
               "predicted", "T_lb", "link GB");
  if (measured) std::fprintf(out, " %10s %8s %8s", "measured", "err", "vs T_lb");
  const bool checked = std::any_of(rows.begin(), rows.end(),
                                   [](const SweepRow& r) { return r.checked_s.has_value(); });
  if (checked) std::fprintf(out, " %10s %8s", "checked", "err");
  const bool peaks = std::any_of(rows.begin(), rows.end(),
                                 [](const SweepRow& r) { return r.outside_peak.has_value(); });
  if (peaks) std::fprintf(out, " %10s", "peak");
  std::fprintf(out, "\n");
  for (const SweepRow& r : rows) {
    std::fprintf(out, "%10s %10s %10s %6d %9.4fs %9.4fs %9.2f", binary_bytes(r.vram).c_str(),
                 binary_bytes(r.weight_budget).c_str(),
                 binary_bytes(resident_bytes(r.plan, weights)).c_str(), r.plan.slots, r.predicted_s,
                 r.bound_s, static_cast<double>(r.predicted_link_bytes) / 1e9);
    if (r.measured_s) {
      const double m = *r.measured_s;
      std::fprintf(out, " %9.4fs %+7.2f%% %7.3fx", m, m > 0 ? 100.0 * (r.predicted_s - m) / m : 0,
                   r.bound_s > 0 ? m / r.bound_s : 0.0);
    }
    if (checked) {
      const double c = r.checked_s.value_or(r.predicted_s);
      const double m = r.measured_s.value_or(0);
      std::fprintf(out, " %9.4fs %+7.2f%%", c, m > 0 ? 100.0 * (c - m) / m : 0);
    }
    if (peaks) {
      std::fprintf(out, " %10s%s", r.outside_peak ? binary_bytes(*r.outside_peak).c_str() : "-",
                   r.outside_peak && *r.outside_peak > r.vram ? " OVER" : "");
    }
    std::fprintf(out, "%s\n", r.carried ? "  (plan of the budget before)" : "");
  }
}

nlohmann::ordered_json sweep_json(const std::vector<SweepRow>& rows, const ModelWeights& weights) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const SweepRow& r : rows) {
    nlohmann::ordered_json j;
    j["vram"] = r.vram;
    j["weight_budget"] = r.weight_budget;
    j["predicted_s"] = r.predicted_s;
    j["bound_s"] = r.bound_s;
    j["bound_compute_s"] = r.bound_compute_s;
    j["bound_link_s"] = r.bound_link_s;
    j["predicted_link_bytes"] = r.predicted_link_bytes;
    j["resident_bytes"] = resident_bytes(r.plan, weights);
    j["mode"] = stream_mode_name(r.plan.mode);
    j["slots"] = r.plan.slots;
    j["slot_bytes"] = r.plan.slot_bytes;
    j["carried"] = r.carried;
    if (r.measured_s) {
      j["measured_s"] = *r.measured_s;
      j["error"] = *r.measured_s > 0 ? (r.predicted_s - *r.measured_s) / *r.measured_s : 0.0;
      j["measured_vs_bound"] = r.bound_s > 0 ? *r.measured_s / r.bound_s : 0.0;
    }
    if (r.measured_link) j["measured_link_bytes"] = *r.measured_link;
    if (r.outside_peak) j["outside_peak_bytes"] = *r.outside_peak;
    if (r.checked_s) {
      j["link_factor"] = r.link_factor.value_or(1.0);
      j["checked_s"] = *r.checked_s;
      if (r.measured_s && *r.measured_s > 0) {
        j["error_checked"] = (*r.checked_s - *r.measured_s) / *r.measured_s;
      }
    }
    nlohmann::ordered_json stages;
    for (size_t ph = 0; ph < r.predicted_phase_s.size(); ++ph) {
      nlohmann::ordered_json s;
      s["predicted_s"] = r.predicted_phase_s[ph];
      if (r.checked_s) s["checked_s"] = r.checked_phase_s[ph];
      if (r.measured_phase_s) s["measured_s"] = (*r.measured_phase_s)[ph];
      stages[phase_name(static_cast<Phase>(ph))] = std::move(s);
    }
    j["stages"] = std::move(stages);
    a.push_back(std::move(j));
  }
  return a;
}

std::string sweep_svg(const std::vector<SweepRow>& rows, const std::string& title,
                      const std::string& predicted_name) {
  Plot plot;
  plot.title = title;
  plot.x_label = "VRAM budget (GiB)";
  plot.y_label = "latency per inference (s)";
  PlotSeries predicted{predicted_name, "#1f77b4", false, {}};
  PlotSeries bound{"T_lb (lower bound)", "#7f7f7f", true, {}};
  PlotSeries measured{"measured", "#d62728", false, {}};
  // Where a session checked the link, the plan priced with it; elsewhere the same as predicted.
  PlotSeries checked{"predicted, link checked at open", "#2ca02c", true, {}};
  bool any_checked = false;
  for (const SweepRow& r : rows) {
    const double x = gib(r.vram);
    predicted.points.emplace_back(x, r.predicted_s);
    bound.points.emplace_back(x, r.bound_s);
    if (r.measured_s) measured.points.emplace_back(x, *r.measured_s);
    checked.points.emplace_back(x, r.checked_s.value_or(r.predicted_s));
    any_checked = any_checked || r.checked_s.has_value();
  }
  plot.series.push_back(std::move(predicted));
  if (any_checked) plot.series.push_back(std::move(checked));
  if (!measured.points.empty()) plot.series.push_back(std::move(measured));
  plot.series.push_back(std::move(bound));
  return render_svg(plot);
}

}  // namespace ferry::cli
