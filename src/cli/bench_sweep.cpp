// `ferry bench --sweep`: the measured VRAM-latency curve, one session per budget in one process,
// beside the predictor's time for each session's plan and the lower bound. Budgets ascend; at each
// one the plan is the planner's, or the previous budget's when that fits and is predicted faster
// (as `ferry plan --sweep` does), so measured and predicted curves describe the same plans.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/bench.h"
#include "cli/plan_report.h"
#include "core/parse_size.h"
#include "core/units.h"
#include "exec/session.h"
#include "format/atomic_write.h"
#include "measure/peak_sampler.h"
#include "plan/sweep.h"

namespace ferry::cli {

namespace {

const Reporter& report = kBenchReport;

// The budgets of --sweep. "auto": plan/sweep.h's budgets for weights, each session's budget its
// fixed bytes at the moment it opens plus that share (the runtime grows as sessions load kernels:
// budgets fixed at the start would leave the later sessions less for weights than the sweep
// meant, and the top one streaming where a lone run keeps every weight resident). A list: the
// budgets as given.
struct SweepBudgets {
  std::vector<uint64_t> values;
  bool weights_only = false;  // auto: values are weight budgets
  uint64_t vram(size_t i, const PlanningContext& ctx, uint64_t runtime_now) const {
    return weights_only ? ctx.vram_for_weights(values[i], runtime_now) : values[i];
  }
};

// A backend per session: a budget is reserved once per backend and held until it goes.
std::unique_ptr<Backend> make_backend(const BenchArgs& a) {
  return report.check(backend_from_flag(a.backend, a.session.check_streams));
}

// A row's plan, predictions (plain and link-checked) and measured medians, from its session.
SweepRow session_row(const Session& session, const TimedRuns& timed) {
  const SessionPlan& planned = session.planned();
  SweepRow r;
  r.plan = session.plan();
  r.predicted_s = planned.prediction.total_s;
  r.predicted_link_bytes = planned.prediction.link_bytes;
  if (const auto& b = planned.bound) {
    r.bound_s = b->total_s;
    r.bound_compute_s = b->compute_s;
    r.bound_link_s = b->link_s;
  }
  r.measured_s = timed.median_total();
  for (size_t ph = 0; ph < r.predicted_phase_s.size(); ++ph) {
    r.predicted_phase_s[ph] = planned.prediction.phases[ph].wall_s;
  }
  std::array<double, kPhaseCount> medians{};
  for (size_t ph = 0; ph < medians.size(); ++ph) {
    medians[ph] = timed.median_of(static_cast<Phase>(ph));
  }
  r.measured_phase_s = medians;
  if (const auto& check = planned.link_check) {
    r.link_factor = check->factor;
    r.checked_s = check->prediction.total_s;
    for (size_t ph = 0; ph < r.checked_phase_s.size(); ++ph) {
      r.checked_phase_s[ph] = check->prediction.phases[ph].wall_s;
    }
  }
  return r;
}

SweepBudgets sweep_budgets(const BenchArgs& a, const PlanningContext& ctx) {
  SweepBudgets out;
  if (a.sweep == "auto") {
    out.values = sweep_weight_budgets(ctx.schedule, ctx.planner.allow_sequential, a.sweep_points);
    out.weights_only = true;
    return out;
  }
  std::stringstream in(a.sweep);
  std::string item;
  while (std::getline(in, item, ',')) {
    Result<uint64_t> b = parse_size(item);
    if (!b.ok()) report.fail("--sweep: " + b.error().message + " (or auto)");
    out.values.push_back(*b);
  }
  if (out.values.empty()) report.fail("--sweep: no budgets");
  std::sort(out.values.begin(), out.values.end());
  out.values.erase(std::unique(out.values.begin(), out.values.end()), out.values.end());
  return out;
}

// The all-resident session that bounds T_lb's compute term (below).
struct AllResident {
  std::optional<double> measured_s;
  std::optional<double> predicted_s;  // the profile's time for the same plan
  std::string note;
};

// What a sweep measured: the report its two printers render.
struct SweepReport {
  const BenchArgs& a;
  const ModelConfig& config;
  const ModelWeights& weights;
  const Workload& w;
  const MachineLimits& limits;
  std::string profile_source{};
  std::string backend_name{};
  std::string device{};
  std::string peak_method{};
  std::vector<SweepRow> rows{};
  AllResident all_resident{};
  double worst = 0;          // the largest |predicted - measured| / measured
  double worst_checked = 0;  // the same with each session's link check
  size_t peaks = 0;          // budgets whose driver-counted peak was read
  size_t over = 0;           // of those, how many went over
};

// One budget's session: its plan (the planner's, or `previous` when that fits and is predicted
// faster), timed runs and what the link carried, as a row of the curve.
SweepRow measure_budget(const BenchArgs& a, const OpenModel& m, const Workload& w,
                        const SessionOptions& so, const PlanningContext& ctx,
                        const SweepBudgets& budgets, size_t i, std::optional<Plan>& previous) {
  const ModelWeights& weights = m.weights;
  std::unique_ptr<Backend> owned = make_backend(a);
  Backend& backend = *owned;
  const uint64_t runtime = runtime_bytes_now(backend);
  const uint64_t vram = budgets.vram(i, ctx, runtime);
  SessionOptions o = so;
  o.vram = vram;
  o.plan.map_candidates = ctx.map_candidates;
  // The planner's plan here, against the previous budget's (now planned with this moment's
  // runtime bytes, exactly as the session will check them).
  SessionPlan chosen =
      report.check(plan_session_full(backend, m.config, weights, w, o, runtime, ctx.in_place));
  bool carried = false;
  if (previous) {
    SessionOptions with_previous = o;
    with_previous.plan.plan = *previous;
    Result<SessionPlan> again =
        plan_session_full(backend, m.config, weights, w, with_previous, runtime, ctx.in_place);
    if (again.ok() && again->prediction.total_s < chosen.prediction.total_s) {
      chosen = std::move(again).value();
      carried = true;
    }
  }
  o.plan.plan = chosen.plan;
  if (!a.json && !a.quiet) {
    std::fprintf(stderr, "bench: budget %zu/%zu, %s: predicted %.4f s\n", i + 1,
                 budgets.values.size(), binary_bytes(vram).c_str(), chosen.prediction.total_s);
  }
  std::optional<Progress> progress(std::in_place, "bench", !a.quiet);
  progress->stage("loading weights for " + binary_bytes(vram));
  // The outside view of this budget: what the driver counts for the process from the session's
  // open to its last run.
  std::optional<PeakSampler> sampler(std::in_place, backend);
  std::unique_ptr<Session> session =
      report.check(Session::open(backend, m.config, weights, m.checkpoint, w, o));
  const StreamingStats loaded = session->streaming();
  const TimedRuns timed = time_runs(*session, a, m.checkpoint, *progress, false);
  progress.reset();
  const std::optional<uint64_t> outside_peak = sampler->peak();
  sampler.reset();
  // The link bytes of the warm-up and timed runs, before a timeline run adds its own.
  const uint64_t copied = session->streaming().bytes_copied;
  if (!a.timeline_out.empty()) {
    if (session->streaming_provider().records_timelines()) {
      dump_timeline(*session, m.checkpoint, weights,
                    a.timeline_out + "." + std::to_string(vram) + ".json");
    } else {
      std::fprintf(stderr, "bench: %s: no timeline through the bounce ring\n",
                   binary_bytes(vram).c_str());
    }
  }
  SweepRow r = session_row(*session, timed);
  r.vram = vram;
  r.weight_budget = vram - std::min(vram, ctx.vram_for_weights(0, runtime));
  r.carried = carried;
  r.outside_peak = outside_peak;
  r.measured_link =
      static_cast<double>(copied - loaded.bytes_copied) / static_cast<double>(a.warmup + a.runs);
  previous = session->plan();
  return r;
}

// T_lb's compute term is the profile's Σ C_EXE, timed in another process (and with timing
// events): it can come out above what this process runs. Where the device holds every weight,
// the all-resident run measured here is the compute no plan beats; the bound takes the smaller.
AllResident measure_all_resident(const BenchArgs& a, const OpenModel& m, const Workload& w,
                                 const SessionOptions& so, std::vector<SweepRow>& rows) {
  AllResident out;
  std::unique_ptr<Backend> owned = make_backend(a);
  Result<std::unique_ptr<Session>> session =
      Session::open(*owned, m.config, m.weights, m.checkpoint, w, so);
  if (!session.ok()) {
    out.note = "not measured: " + session.error().message;
  } else {
    std::optional<Progress> progress(std::in_place, "bench", !a.quiet);
    progress->stage("all resident, for T_lb's compute term");
    const TimedRuns timed = time_runs(**session, a, m.checkpoint, *progress, false);
    out.measured_s = timed.median_total();
    out.predicted_s = (*session)->planned().prediction.total_s;
    out.note = "measured in this process, every weight resident";
  }
  for (SweepRow& r : rows) {
    if (out.measured_s && *out.measured_s > 0 && *out.measured_s < r.bound_compute_s) {
      r.bound_compute_s = *out.measured_s;
      r.bound_s = std::max(r.bound_compute_s, r.bound_link_s);
    }
  }
  return out;
}

// The prediction's worst error over the rows, and the budgets the driver's peak went over.
void summarize_rows(SweepReport& s) {
  for (const SweepRow& r : s.rows) {
    if (r.outside_peak) {
      ++s.peaks;
      s.over += *r.outside_peak > r.vram ? 1 : 0;
    }
    if (r.measured_s && *r.measured_s > 0) {
      s.worst = std::max(s.worst, std::abs(r.predicted_s - *r.measured_s) / *r.measured_s);
      const double c = r.checked_s.value_or(r.predicted_s);
      s.worst_checked = std::max(s.worst_checked, std::abs(c - *r.measured_s) / *r.measured_s);
    }
  }
}

nlohmann::ordered_json sweep_report_json(const SweepReport& s) {
  const BenchArgs& a = s.a;
  const AllResident& all = s.all_resident;
  nlohmann::ordered_json j;
  j["model"] = a.model;
  j["architecture"] = architecture_name(s.config.arch);
  j["backend"] = s.backend_name;
  j["device"] = s.device;
  j["runs"] = a.runs;
  j["warmup"] = a.warmup;
  j["workload"] = workload_json(s.w);
  j["profile_source"] = s.profile_source;
  j["machine"] = {{"bf16_gemm_tflops", s.limits.gemm_flops / 1e12},
                  {"copy_bandwidth_gbs", s.limits.copy_bandwidth / 1e9},
                  {"h2d_gbs", s.limits.h2d_bandwidth / 1e9}};
  j["max_abs_error"] = s.worst;
  // The same with each session's link check (a budget that streams nothing has none).
  j["max_abs_error_checked"] = s.worst_checked;
  // Budgets whose driver-counted peak was read, and of those, how many went over.
  j["outside_peaks"] = {{"read", s.peaks}, {"over_budget", s.over}, {"method", s.peak_method}};
  j["all_resident_s"] =
      all.measured_s ? nlohmann::ordered_json(*all.measured_s) : nlohmann::ordered_json();
  j["all_resident_note"] = all.note;
  // Against it, how far this process's compute ran from the profile's (no copies to blame).
  if (all.predicted_s) j["all_resident_predicted_s"] = *all.predicted_s;
  j["sweep"] = sweep_json(s.rows, s.weights);
  if (!a.plot.empty()) j["plot"] = a.plot;
  return j;
}

void print_sweep_report(const SweepReport& s) {
  const BenchArgs& a = s.a;
  const AllResident& all = s.all_resident;
  std::printf("ferry bench --sweep: %s (%s) on %s, %s; median of %d runs after %d warm-up\n",
              a.model.c_str(), architecture_name(s.config.arch), s.device.c_str(),
              describe_workload(s.w, s.config).c_str(), a.runs, a.warmup);
  std::printf("predicted from the %s profile; link %.1f GB/s measured (page-locked)\n\n",
              s.profile_source.c_str(), s.limits.h2d_bandwidth / 1e9);
  print_sweep(stdout, s.rows, s.weights);
  if (all.measured_s) {
    std::printf(
        "\nall resident: %.4f s (%s; T_lb's compute term where smaller than the "
        "profile's)\n",
        *all.measured_s, all.note.c_str());
    if (all.predicted_s && *all.measured_s > 0) {
      std::printf(
          "              predicted %.4f s (%+.2f%%): this process's compute against the "
          "profile's\n",
          *all.predicted_s, 100.0 * (*all.predicted_s - *all.measured_s) / *all.measured_s);
    }
  } else {
    std::printf("\nall resident: %s\n", all.note.c_str());
  }
  if (!a.plot.empty()) std::printf("\nplot: %s", a.plot.c_str());
  std::printf("\nlargest |predicted - measured| / measured: %.2f%% over %zu budgets\n",
              100.0 * s.worst, s.rows.size());
  if (s.peaks > 0) {
    std::printf("device peak seen from outside ferry's books (%s): over the budget at %zu of %zu\n",
                s.peak_method.c_str(), s.over, s.peaks);
  }
}

}  // namespace

void bench_sweep(const BenchArgs& a, const OpenModel& m, const Workload& w,
                 const MachineLimits& limits, const SessionOptions& so) {
  if (so.vram || so.vram_auto) report.fail("--sweep sets the budget of each session: drop --vram");
  if (so.plan.plan || so.plan.resident || so.plan.resident_count) {
    report.fail("--sweep plans every budget: drop --plan, --resident and --resident-count");
  }
  SweepReport s{.a = a, .config = m.config, .weights = m.weights, .w = w, .limits = limits};
  std::unique_ptr<Backend> probe = make_backend(a);
  s.backend_name = std::string(probe->name());
  s.device = probe->info().name;
  s.peak_method = probe->driver_device_bytes_method();
  const PlanningContext ctx =
      report.check(planning_context_now(*probe, m.config, m.weights, m.checkpoint, w, so));
  probe.reset();
  s.profile_source = ctx.profile.source;
  const SweepBudgets budgets = sweep_budgets(a, ctx);
  std::optional<Plan> previous;
  for (size_t i = 0; i < budgets.values.size(); ++i) {
    s.rows.push_back(measure_budget(a, m, w, so, ctx, budgets, i, previous));
  }
  s.all_resident = measure_all_resident(a, m, w, so, s.rows);
  const std::string title =
      "ferry bench --sweep: " + std::string(architecture_name(m.config.arch)) + " on " + s.device;
  if (!a.plot.empty()) report.check(write_file_atomic(a.plot, sweep_svg(s.rows, title)));
  summarize_rows(s);
  if (a.json) {
    std::cout << sweep_report_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  print_sweep_report(s);
}

}  // namespace ferry::cli
