// `ferry plan`: the plan a session would run under a budget (the planner's, or the one the flags
// name), its memory, its predicted time per stage and the lower bound, written for
// `ferry run --plan`; with --sweep, the predicted VRAM-latency curve from the smallest working
// budget to all-resident, as a table, JSON and an SVG plot. The measure pass, the profile and the
// planner are the session's own (exec/session_plan.h), so a session opened with the same flags
// runs this plan. With --what-if, the profile is first re-priced for another machine
// (plan/what_if.h) and everything printed is a projection for it.
#include <algorithm>
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
#include "cli/plan_what_if.h"
#include "cli/session_flags.h"
#include "cli/workload_args.h"
#include "core/parse_size.h"
#include "core/units.h"
#include "exec/session_plan.h"
#include "format/atomic_write.h"
#include "plan/sweep.h"
#include "plan/what_if.h"

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
  std::string what_if;  // --what-if: a card or link=,hbm=,tflops=,vram= (plan/what_if.h)
  std::string budgets;  // --budgets: the sweep's VRAM budgets, comma-separated sizes
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

void print_profile_line(std::FILE* out, const Profile& p, const Workload& w,
                        const std::optional<WhatIf>& wi) {
  if (wi) {
    std::fprintf(out, "profile    %s, re-priced (median of %lld runs), link %.1f GB/s\n",
                 p.device.c_str(), static_cast<long long>(p.runs), p.link_bytes_per_s / 1e9);
  } else if (p.source == "measured") {
    std::fprintf(out, "profile    measured on %s (median of %lld runs), link %.1f GB/s (%s)\n",
                 p.device.c_str(), static_cast<long long>(p.runs), p.link_bytes_per_s / 1e9,
                 p.byte_path.c_str());
  } else {
    std::fprintf(
        out,
        "profile    estimated from the cost model: link %.1f GB/s, %.3g TFLOP/s, %.0f GB/s "
        "(%s; `ferry profile` measures them)\n",
        p.link_bytes_per_s / 1e9, p.peak_flops / 1e12, p.memory_bandwidth / 1e9,
        p.byte_path.c_str());
  }
  if (!profile_fits_workload(p, w)) {
    std::fprintf(
        out,
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

// The weights' budgets of the sweep: --budgets as given, else evenly spaced from the smallest
// working budget to all-resident, none above the target's VRAM in a projection (its VRAM then the
// last point).
std::vector<uint64_t> sweep_budgets(const PlanArgs& a, const ModelWeights& weights,
                                    const PlanningContext& ctx, const std::optional<WhatIf>& wi) {
  const uint64_t fixed = ctx.fixed_bytes();
  const uint64_t least = ctx.smallest(weights, ctx.planner.allow_sequential).total();
  // The target's VRAM (0: none given).
  const uint64_t cap = wi ? wi->repricing.target.figures.vram.value_or(0) : 0;
  std::vector<uint64_t> out;
  if (!a.budgets.empty()) {
    std::string_view rest = a.budgets;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      const Result<uint64_t> v = parse_size(item);
      if (!v.ok()) report.fail("--budgets: " + v.error().message);
      if (*v < least) {
        report.fail("--budgets: " + binary_bytes(*v) + " is below the smallest budget, " +
                    binary_bytes(least));
      }
      if (cap > 0 && *v > cap) {
        report.fail("--budgets: " + binary_bytes(*v) + " is more than the " + binary_bytes(cap) +
                    " of " + wi->repricing.target.label);
      }
      out.push_back(*v - fixed);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  out = sweep_weight_budgets(ctx.schedule, ctx.planner.allow_sequential, a.sweep_points);
  if (cap > 0) {
    if (cap < least) {
      report.fail("the model and workload do not fit " + wi->repricing.target.label + "'s " +
                  binary_bytes(cap) + ": the smallest budget is " + binary_bytes(least));
    }
    const uint64_t room = cap - fixed;
    const bool cut = out.back() > room;
    std::erase_if(out, [&](uint64_t b) { return b > room; });
    if (cut && (out.empty() || out.back() < room)) out.push_back(room);
  }
  return out;
}

void sweep(const PlanArgs& a, const OpenModel& m, const Workload& w, const PlanningContext& ctx,
           const std::optional<WhatIf>& wi) {
  const ModelWeights& weights = m.weights;
  const std::vector<uint64_t> budgets = sweep_budgets(a, weights, ctx, wi);
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
    const std::string what =
        std::string(architecture_name(m.config.arch)) + ", " + describe_workload(w, m.config);
    report.check(write_file_atomic(
        a.plot, wi ? sweep_svg(rows, "PROJECTION for " + ctx.profile.device + ": " + what,
                               "predicted (projection)")
                   : sweep_svg(rows, "ferry plan --sweep: " + what)));
  }
  if (a.json) {
    nlohmann::ordered_json j;
    j["model"] = a.model;
    j["architecture"] = architecture_name(m.config.arch);
    j["workload"] = workload_json(w);
    j["profile"] = profile_summary(ctx.profile, w);
    j["fixed_bytes"] = fixed;
    if (wi) j["what_if"] = what_if_json(*wi);
    j["sweep"] = sweep_json(rows, weights);
    if (wi) {
      for (auto& row : j["sweep"]) row["projected"] = true;
    }
    if (!a.plot.empty()) j["plot"] = a.plot;
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return;
  }
  auto print = [&](std::FILE* out) {
    std::fprintf(out, "ferry plan --sweep: %s (%s), %s\n", a.model.c_str(),
                 architecture_name(m.config.arch), describe_workload(w, m.config).c_str());
    print_profile_line(out, ctx.profile, w, wi);
    std::fprintf(out, "fixed      %s besides weights in every budget\n",
                 binary_bytes(fixed).c_str());
    if (!a.plot.empty()) std::fprintf(out, "plot       %s\n", a.plot.c_str());
    std::fprintf(out, "\n");
    print_sweep(out, rows, weights);
  };
  if (!wi) {
    print(stdout);
    return;
  }
  print_what_if_header(stdout, *wi);
  print_prefixed(stdout, "projected | ", print);
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
  const std::optional<WhatIf>& what_if;
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
  if (r.what_if) j["what_if"] = what_if_json(*r.what_if);
  return j;
}

void print_plan_report(std::FILE* out, const PlanReport& r) {
  const SessionPlan& sp = r.sp;
  const std::optional<uint64_t>& vram = r.vram;
  std::fprintf(out, "ferry plan: %s (%s), %zu groups, %.2f GB of weights\n", r.a.model.c_str(),
               architecture_name(r.config.arch), r.weights.groups.size(),
               static_cast<double>(r.weights.total_bytes()) / 1e9);
  std::fprintf(out, "workload   %s\n", describe_workload(r.w, r.config).c_str());
  print_profile_line(out, r.ctx.profile, r.w, r.what_if);
  if (vram) {
    std::fprintf(out, "budget     %s: %s besides weights, %s for weights\n",
                 binary_bytes(*vram).c_str(), binary_bytes(r.fixed).c_str(),
                 binary_bytes(*vram - std::min(*vram, r.fixed)).c_str());
  } else {
    std::fprintf(out, "budget     none: every group resident\n");
  }
  std::fprintf(out, "origin     %s", sp.origin.c_str());
  if (sp.evaluations > 0) {
    std::fprintf(out, " (%lld predictions; best start %.4f s)",
                 static_cast<long long>(sp.evaluations), sp.start_s);
  }
  std::fprintf(out, "\n");
  print_plan(out, sp.plan, r.weights, sp.memory);
  print_prediction(out, sp.prediction, sp.bound);
  if (!r.a.out.empty()) {
    std::fprintf(out, "wrote      %s (ferry run --plan %s%s)\n", r.a.out.c_str(), r.a.out.c_str(),
                 vram ? (" --vram " + std::to_string(*vram)).c_str() : "");
  }
}

void plan(const PlanArgs& a) {
  if (a.sweep_points < 2 || a.sweep_points > 1000)
    report.fail("--sweep-points must be in [2, 1000]");
  // --what-if is checked before the model is opened: its errors need nothing else.
  const std::optional<WhatIfTarget> target =
      a.what_if.empty() ? std::nullopt : std::optional(report.check(parse_what_if(a.what_if)));
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
    SessionOptions with_compressed = so;  // the forms this session's encoding allows
    with_compressed.plan.compressed_bytes = ctx.schedule.compressed_bytes;
    ctx = report.check(planning_context_elsewhere(*backend, m.config, weights, m.checkpoint, w,
                                                  with_compressed, *runtime));
  }
  std::optional<WhatIf> wi;
  if (target) {
    if (so.vram_auto) report.fail("--vram auto measures this machine: give a size with --what-if");
    if (target->integrated && (so.vram || a.sweep || !a.budgets.empty())) {
      report.fail("--what-if " + target->label +
                  " is an integrated GPU: weights are read in place from the memory it shares "
                  "with the host, so there is no budget to sweep: drop --vram, --sweep, --budgets");
    }
    if (so.vram && target->figures.vram && *so.vram > *target->figures.vram) {
      report.fail("--vram " + binary_bytes(*so.vram) + " is more than the " +
                  binary_bytes(*target->figures.vram) + " of " + target->label);
    }
    // The target's runtime: --runtime, else what this backend holds (a GPU's), else assumed.
    const bool assumed = a.runtime.empty() && ctx.runtime_bytes == 0;
    const uint64_t runtime = assumed ? kAssumedRuntimeBytes : ctx.runtime_bytes;
    wi = report.check(
        what_if_context(*backend, m.config, weights, w, so, *target, runtime, assumed, ctx));
  }
  if (!a.budgets.empty() && !a.sweep && !wi) report.fail("--budgets sets the points of --sweep");
  const bool curve =
      a.sweep || !a.budgets.empty() || (wi && !wi->repricing.target.integrated && !so.vram);
  if (curve) {
    if (!a.out.empty()) report.fail("--out writes one plan: give --vram instead of --sweep");
    if (so.vram || so.vram_auto)
      report.fail("--sweep runs from the smallest budget up: drop --vram");
    if (so.plan.plan || so.plan.resident || so.plan.resident_count) {
      report.fail("--sweep plans every budget: drop --plan, --resident and --resident-count");
    }
    sweep(a, m, w, ctx, wi);
    return;
  }
  if (!a.plot.empty()) report.fail("--plot draws the curve of --sweep");
  if (wi && wi->repricing.target.integrated &&
      (so.plan.plan || so.plan.resident || so.plan.resident_count)) {
    report.fail("--what-if " + wi->repricing.target.label +
                " reads every group in place: drop --plan, --resident and --resident-count");
  }
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
                     .fixed = ctx.fixed_bytes(),
                     .what_if = wi};
  if (a.json) {
    std::cout << plan_report_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  if (!wi) {
    print_plan_report(stdout, r);
    return;
  }
  print_what_if_header(stdout, *wi);
  if (wi->repricing.target.integrated) {
    std::printf(
        "projection integrated GPU: device memory is host memory, so ferry reads every group in "
        "place (no copies, no slots); the prediction is the all-resident plan's, at the shared "
        "memory's bandwidth\n");
  }
  print_prefixed(stdout, "projected | ", [&](std::FILE* out) { print_plan_report(out, r); });
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
  cmd->add_option("--what-if", args->what_if,
                  "Re-price the profile for another machine and print the projected curve (or "
                  "the plan at --vram): a card (rtx-3080-ti, rtx-3090, rtx-4060-ti-16gb, "
                  "rtx-4070-ti-super, rtx-4080, rtx-5070-ti, rtx-5080, jetson-orin) and/or "
                  "link=25GB/s,hbm=717GB/s,tflops=97,vram=16GiB (docs/planner.md)")
      ->check(not_empty());
  cmd->add_option("--budgets", args->budgets,
                  "The sweep's VRAM budgets instead of --sweep-points, e.g. 8GiB,12GiB,16GiB")
      ->check(not_empty());
  cmd->callback([args] { plan(*args); });
}

}  // namespace ferry::cli
