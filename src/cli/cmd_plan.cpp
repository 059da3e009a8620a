// `ferry plan`: the plan a session would run under a budget (the planner's, or the one the flags
// name), its memory, its predicted time per stage and the lower bound, written for
// `ferry run --plan`; with --sweep, the predicted VRAM-latency curve from the smallest working
// budget to all-resident, as a table, JSON and an SVG plot. The measure pass, the profile and the
// planner are the session's own (exec/session_plan.h), so a session opened with the same flags
// runs this plan.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/session_args.h"
#include "backend/backend.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/plan_report.h"
#include "cli/session_flags.h"
#include "cli/workload_args.h"
#include "core/parse_size.h"
#include "core/units.h"
#include "exec/session_plan.h"
#include "format/atomic_write.h"
#include "plan/sweep.h"

namespace ferry::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::string backend;
  WorkloadArgs workload;
  SessionArgs session;
  bool json = false;
  std::string out;
  bool sweep = false;
  int sweep_points = 12;
  std::string plot;
  std::string runtime;  // --runtime SIZE: the device runtime's share to set apart
};

const Reporter report{"plan"};

// A profile's C_EXE hold for the workload it was measured with.
bool profile_fits_workload(const Profile& p, const Workload& w) {
  return !p.workload || *p.workload == profile_workload(w);
}

nlohmann::ordered_json profile_summary(const Profile& p, const Workload& w) {
  return {{"source", p.source},         {"workload_matches", profile_fits_workload(p, w)},
          {"device", p.device},         {"runs", p.runs},
          {"byte_path", p.byte_path},   {"link_bytes_per_s", p.link_bytes_per_s},
          {"peak_flops", p.peak_flops}, {"memory_bandwidth_bytes_per_s", p.memory_bandwidth}};
}

void print_profile_line(const Profile& p, const Workload& w) {
  if (p.source == "measured") {
    std::printf("profile    measured on %s (median of %lld runs), link %.1f GB/s (%s)\n",
                p.device.c_str(), static_cast<long long>(p.runs), p.link_bytes_per_s / 1e9,
                p.byte_path.c_str());
  } else {
    std::printf(
        "profile    estimated from the cost model: link %.1f GB/s, %.3g TFLOP/s, %.0f GB/s "
        "(%s; `ferry profile` measures them)\n",
        p.link_bytes_per_s / 1e9, p.peak_flops / 1e12, p.memory_bandwidth / 1e9,
        p.byte_path.c_str());
  }
  if (!profile_fits_workload(p, w)) {
    std::printf(
        "note       the profile was measured with another workload (%lld images %lldx%lld, "
        "prompt %lld, %lld generated, %lld flow steps): its compute times may not hold\n",
        static_cast<long long>(p.workload->num_images),
        static_cast<long long>(p.workload->image_height),
        static_cast<long long>(p.workload->image_width),
        static_cast<long long>(p.workload->prompt_tokens),
        static_cast<long long>(p.workload->gen_tokens),
        static_cast<long long>(p.workload->flow_steps));
  }
}

void sweep(const PlanArgs& a, const OpenModel& m, const Workload& w, const PlanningContext& ctx) {
  const ModelWeights& weights = m.weights;
  const std::vector<uint64_t> budgets =
      sweep_weight_budgets(ctx.schedule, ctx.planner.allow_sequential, a.sweep_points);
  const std::vector<SweepPoint> points =
      report.check(sweep_plans(weights, ctx.schedule, budgets, ctx.planner));
  const uint64_t fixed = ctx.fixed_bytes();
  std::vector<SweepRow> rows;
  for (const SweepPoint& p : points) {
    SweepRow r;
    r.vram = fixed + p.weight_budget;
    r.weight_budget = p.weight_budget;
    r.plan = p.plan;
    r.predicted_s = p.prediction.total_s;
    r.predicted_link_bytes = p.prediction.link_bytes;
    r.bound_s = p.bound.total_s;
    r.carried = p.carried;
    rows.push_back(std::move(r));
  }
  if (!a.plot.empty()) {
    report.check(write_file_atomic(
        a.plot,
        sweep_svg(rows, "ferry plan --sweep: " + std::string(architecture_name(m.config.arch)) +
                            ", " + describe_workload(w, m.config))));
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["architecture"] = architecture_name(m.config.arch);
    j["workload"] = workload_json(w);
    j["profile"] = profile_summary(ctx.profile, w);
    j["fixed_bytes"] = fixed;
    j["sweep"] = sweep_json(rows, weights);
    if (!a.plot.empty()) j["plot"] = a.plot;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return;
  }
  std::printf("ferry plan --sweep: %s (%s), %s\n", a.model.c_str(),
              architecture_name(m.config.arch), describe_workload(w, m.config).c_str());
  print_profile_line(ctx.profile, w);
  std::printf("fixed      %s besides weights in every budget\n", binary_bytes(fixed).c_str());
  if (!a.plot.empty()) std::printf("plot       %s\n", a.plot.c_str());
  std::printf("\n");
  print_sweep(stdout, rows, weights);
}

// One budget's plan as `ferry plan` reports it: the report its two printers render.
struct PlanReport {
  const PlanArgs& a;
  const ModelConfig& config;
  const ModelWeights& weights;
  const Workload& w;
  const Backend& backend;
  const PlanningContext& ctx;
  const SessionPlan& sp;
  std::optional<uint64_t> vram;
  uint64_t fixed = 0;  // the budget's bytes besides weights
};

nlohmann::ordered_json plan_report_json(const PlanReport& r) {
  const SessionPlan& sp = r.sp;
  const std::optional<uint64_t>& vram = r.vram;
  nlohmann::ordered_json j;
  j["model"] = r.a.model;
  j["architecture"] = architecture_name(r.config.arch);
  j["backend"] = std::string(r.backend.name());
  j["workload"] = workload_json(r.w);
  j["profile"] = profile_summary(r.ctx.profile, r.w);
  j["vram"] = vram ? nlohmann::ordered_json(*vram) : nlohmann::ordered_json();
  j["fixed_bytes"] = r.fixed;
  j["weight_budget"] =
      vram ? nlohmann::ordered_json(*vram - std::min(*vram, r.fixed)) : nlohmann::ordered_json();
  j["origin"] = sp.origin;
  j["plan"] = plan_summary_json(sp.plan, r.weights, sp.memory);
  j["prediction"] = prediction_json(sp.prediction);
  if (sp.bound) j["lower_bound"] = bound_json(*sp.bound);
  j["planner"] = {{"evaluations", sp.evaluations}, {"start_s", sp.start_s}};
  if (!r.a.out.empty()) j["plan_file"] = r.a.out;
  return j;
}

void print_plan_report(const PlanReport& r) {
  const SessionPlan& sp = r.sp;
  const std::optional<uint64_t>& vram = r.vram;
  std::printf("ferry plan: %s (%s), %zu groups, %.2f GB of weights\n", r.a.model.c_str(),
              architecture_name(r.config.arch), r.weights.groups.size(),
              static_cast<double>(r.weights.total_bytes()) / 1e9);
  std::printf("workload   %s\n", describe_workload(r.w, r.config).c_str());
  print_profile_line(r.ctx.profile, r.w);
  if (vram) {
    std::printf("budget     %s: %s besides weights, %s for weights\n", binary_bytes(*vram).c_str(),
                binary_bytes(r.fixed).c_str(),
                binary_bytes(*vram - std::min(*vram, r.fixed)).c_str());
  } else {
    std::printf("budget     none: every group resident\n");
  }
  std::printf("origin     %s", sp.origin.c_str());
  if (sp.evaluations > 0) {
    std::printf(" (%lld predictions; best start %.4f s)", static_cast<long long>(sp.evaluations),
                sp.start_s);
  }
  std::printf("\n");
  print_plan(stdout, sp.plan, r.weights, sp.memory);
  print_prediction(stdout, sp.prediction, sp.bound);
  if (!r.a.out.empty()) {
    std::printf("wrote      %s (ferry run --plan %s%s)\n", r.a.out.c_str(), r.a.out.c_str(),
                vram ? (" --vram " + std::to_string(*vram)).c_str() : "");
  }
}

void plan(const PlanArgs& a) {
  if (a.sweep_points < 2 || a.sweep_points > 1000)
    report.fail("--sweep-points must be in [2, 1000]");
  const OpenModel m = report.check(open_model(a.model));
  const ModelWeights& weights = m.weights;
  const Workload w = report.check(reference_workload(a.workload, m.config));
  const SessionOptions so = report.check(session_options(a.session, weights, InferenceOptions{}));
  std::unique_ptr<Backend> backend = report.check(backend_from_flag(a.backend));
  PlanningContext ctx;
  if (a.runtime.empty()) {
    ctx = report.check(planning_context_now(*backend, m.config, weights, m.checkpoint, w, so));
  } else {
    // Another device's runtime and stream workspaces (this backend's own are not counted), and
    // its registered tier: read in place there, with page tables, whichever path this machine's
    // tier would take (auto takes storage here when the checkpoint does not fit in memory).
    const Result<uint64_t> runtime = parse_size(a.runtime);
    if (!runtime.ok()) report.fail("--runtime: " + runtime.error().message);
    if (*runtime == 0) report.fail("--runtime must be more than 0 bytes");
    ctx = report.check(
        planning_context_elsewhere(*backend, m.config, weights, m.checkpoint, w, so, *runtime));
  }
  if (a.sweep) {
    if (!a.out.empty()) report.fail("--out writes one plan: give --vram instead of --sweep");
    if (so.vram || so.vram_auto)
      report.fail("--sweep runs from the smallest budget up: drop --vram");
    if (so.plan.plan || so.plan.resident || so.plan.resident_count) {
      report.fail("--sweep plans every budget: drop --plan, --resident and --resident-count");
    }
    sweep(a, m, w, ctx);
    return;
  }
  if (!a.plot.empty()) report.fail("--plot draws the curve of --sweep");
  const std::optional<uint64_t> vram = report.check(resolve_vram(*backend, so));
  const SessionPlan sp = report.check(choose_plan(ctx, weights, so, vram));
  if (!a.out.empty()) report.check(write_file_atomic(a.out, plan_to_json(sp.plan, weights)));
  const PlanReport r{.a = a,
                     .config = m.config,
                     .weights = weights,
                     .w = w,
                     .backend = *backend,
                     .ctx = ctx,
                     .sp = sp,
                     .vram = vram,
                     .fixed = ctx.fixed_bytes()};
  if (a.json) {
    std::cout << plan_report_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  print_plan_report(r);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan", "Choose and price the plan for a VRAM budget, or sweep every budget");
  cmd->add_option("--model", args->model, "Checkpoint folder (config.json + safetensors)")
      ->check(not_empty())
      ->required();
  cmd->add_option("--backend", args->backend, "cpu or cuda (default: cuda when available)")
      ->check(not_empty());
  add_workload_options(cmd, &args->workload, WorkloadDefaults::reference);
  add_session_options(cmd, &args->session);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_option("--out", args->out, "Write the plan here (for `ferry run --plan`)")
      ->check(not_empty());
  cmd->add_flag("--sweep", args->sweep,
                "Predict the whole VRAM-latency curve, from the smallest working budget to "
                "all-resident");
  add_int_option(cmd, "--sweep-points", &args->sweep_points, 2, 1000, "Budgets in the sweep")
      ->default_str(std::to_string(args->sweep_points));
  cmd->add_option("--plot", args->plot, "With --sweep: an SVG of predicted time and T_lb")
      ->check(not_empty());
  cmd->add_option("--runtime", args->runtime,
                  "Plan for a device whose runtime and stream workspaces take SIZE beside ferry's "
                  "buffers (its plan's memory line: 466MiB on the H200, runtime 418 + stream "
                  "workspaces 48) and whose kernels read its registered checkpoint in place (page "
                  "tables set apart): a GPU's plan, made on another machine, whichever host path "
                  "this machine would take (--host-path is not read) (default: what this backend "
                  "holds now)")
      ->check(not_empty());
  cmd->callback([args] { plan(*args); });
}

}  // namespace ferry::cli
