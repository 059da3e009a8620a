// `ferry profile`: measures, on this machine and under a budget if one is given, what the planner
// and the predictor need (measure/profiler.h: C_DMA and C_EXE per group and phase from device
// events, the link and compute peaks, the host steps and the launch time) and writes it as a
// profile file (docs/planner.md) for `ferry plan --profile` and `run/bench --profile`.
#include <algorithm>
#include <array>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/session_args.h"
#include "backend/backend.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/session_flags.h"
#include "cli/timeline_json.h"
#include "cli/workload_args.h"
#include "core/units.h"
#include "exec/session.h"
#include "format/atomic_write.h"
#include "measure/background_copies.h"
#include "measure/machine_limits.h"
#include "measure/profiler.h"

namespace ferry::cli {
namespace {

struct ProfileArgs {
  std::string model;
  std::string backend;
  WorkloadArgs workload;
  SessionArgs session;
  std::string out;
  std::string timeline_out;
  int runs = 5;
  int warmup = 1;
  bool json = false;
  bool quiet = false;
  bool second_pass = true;
  bool map_pass = true;
  int map_runs = 1;
};

const Reporter report{"profile"};

// The timed runs' timelines as recorded, for looking at one call at a time (cli/timeline_json.h).
nlohmann::ordered_json timelines_json(const std::vector<StreamTimeline>& timelines,
                                      const ModelWeights& weights) {
  nlohmann::ordered_json j;
  j["format"] = "ferry-timelines";
  j["version"] = 2;
  j["origin"] = kTimelineOrigin;
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  for (const StreamTimeline& t : timelines) runs.push_back(timeline_json(t, weights));
  j["runs"] = std::move(runs);
  return j;
}

// What the profile says the copies read: the tier's path as the planner's docs name it.
std::string byte_path_of(const Backend& backend, const HostTier& tier) {
  if (backend.name() == "cpu") return "host-memory";
  return tier.registered() ? "registered-mapping" : "pageable";
}

// Background copies of a small buffer from the budget's room (16, 4 or 1 MiB); null, with a note,
// where not even 1 MiB is left.
std::unique_ptr<BackgroundCopies> start_background_copies(Backend& backend) {
  for (uint64_t bytes : {uint64_t{16} << 20, uint64_t{4} << 20, uint64_t{1} << 20}) {
    Result<std::unique_ptr<BackgroundCopies>> c = BackgroundCopies::start(backend, bytes);
    if (c.ok()) return std::move(c).value();
  }
  std::fprintf(stderr,
               "ferry profile: no room in the budget for a 1 MiB copy buffer: the calls' times "
               "beside copies are taken as their times alone\n");
  return nullptr;
}

// The profiler's second pass (measure/profiler.h), chosen by the first pass's plan: a ring runs
// again in sequential mode on a second session (every call alone; one session at a time, and a
// backend reserves its budget once, so it gets a backend of its own); a plan that streams
// nothing runs again beside background copies of a small buffer from the budget's room (every
// call copying). Updates `calls`; returns what ran ("sequential", "under copies", "none").
std::string run_second_pass(const ProfileArgs& a, const OpenModel& m, const Workload& w,
                            const SessionOptions& so, const Plan& plan,
                            std::unique_ptr<Backend>& backend, std::unique_ptr<Session>& session,
                            Progress& progress, CallMeasurements& calls) {
  const ModelWeights& weights = m.weights;
  if (plan.mode == StreamMode::pipelined && plan.slots > 0) {
    session.reset();
    backend.reset();
    backend = report.check(backend_from_flag(a.backend, a.session.check_streams));
    Plan sequential = plan;
    sequential.mode = StreamMode::sequential;
    sequential.slots = 1;
    SessionOptions seq = so;
    seq.plan.plan = sequential;
    seq.plan.resident.reset();
    seq.plan.resident_count.reset();
    progress.stage("loading weights (sequential)");
    session = report.check(Session::open(*backend, m.config, weights, m.checkpoint, w, seq));
    progress.stage("timing every call alone (sequential)");
    const std::vector<StreamTimeline> alone = report.check(timed_runs(*session, a.runs, a.warmup));
    derive_call_times(calls, weights, &alone);
    return "sequential";
  }
  if (plan.slots > 0) return "none";  // sequential already: nothing overlaps, no room to copy
  std::unique_ptr<BackgroundCopies> copies = start_background_copies(*backend);
  if (!copies) return "none";
  progress.stage("timing every call beside copies");
  Result<std::vector<StreamTimeline>> under = timed_runs(*session, a.runs, 0);
  copies->stop();
  const std::vector<StreamTimeline> timelines = report.check(std::move(under));
  derive_call_times(calls, weights, nullptr, &timelines);
  return "under copies";
}

// The map pass (measure/profiler.h map_pass_plan): on a backend and session of its own, every group
// kernels can read in place is mapped, the rest stream one at a time; each mapped call's span is
// its C_EXE mapped. Updates `calls`; returns what ran, or why it did not.
std::string run_map_pass(const ProfileArgs& a, const OpenModel& m, const Workload& w,
                         const SessionOptions& so, const std::vector<uint8_t>& in_place,
                         const Plan& base, std::unique_ptr<Backend>& backend,
                         std::unique_ptr<Session>& session, Progress& progress,
                         CallMeasurements& calls) {
  const ModelWeights& weights = m.weights;
  const std::optional<Plan> plan = map_pass_plan(weights, in_place, base);
  if (!plan) {
    return "none (no group can be read in place here: it needs a tier kernels can read and a "
           "group range that is its layout, as `ferry pack` writes)";
  }
  session.reset();
  backend.reset();
  backend = report.check(backend_from_flag(a.backend, a.session.check_streams));
  SessionOptions mapped = so;
  mapped.plan.plan = *plan;
  mapped.plan.resident.reset();
  mapped.plan.resident_count.reset();
  mapped.plan.mapped.clear();
  progress.stage("loading weights (mapped)");
  Result<std::unique_ptr<Session>> opened =
      Session::open(*backend, m.config, weights, m.checkpoint, w, mapped);
  if (!opened.ok()) return "none (" + opened.error().message + ")";
  session = std::move(opened).value();
  progress.stage("timing every call read in place (mapped)");
  const std::vector<StreamTimeline> timelines =
      report.check(timed_runs(*session, a.map_runs, std::min(a.warmup, 1)));
  calls.exe_mapped_s = mapped_exe_times(timelines, weights, session->plan());
  int64_t groups = 0;
  for (size_t g = 0; g < weights.groups.size(); ++g) {
    groups += plan->placement[g] == Placement::host && !host_placement_allowed(weights.groups[g]);
  }
  return "mapped (" + std::to_string(groups) + " groups read in place, " +
         std::to_string(a.map_runs) + " run" + (a.map_runs == 1 ? "" : "s") + ")";
}

// What `ferry profile` measured and wrote: the report its two printers render.
struct ProfileReport {
  const ProfileArgs& a;
  const ModelConfig& config;
  const ModelWeights& weights;
  const Workload& w;
  const Profile& p;
  const GroupCopyTimes& copies;
  const CallMeasurements& calls;
  const Plan& plan;
  const MemoryBudget& memory;
  const std::string& second_pass;
  const std::string& map_pass;
  double pipeline_ratio = 1;
  double dma_total = 0;                   // every group copied once
  std::array<double, kPhaseCount> exe{};  // Σ C_EXE over the session's calls, by phase
};

nlohmann::ordered_json profile_summary_json(const ProfileReport& r) {
  const Profile& p = r.p;
  nlohmann::ordered_json j;
  j["out"] = r.a.out;
  j["device"] = p.device;
  j["runs"] = p.runs;
  j["groups"] = p.groups.size();
  j["byte_path"] = p.byte_path;
  j["link_bytes_per_s"] = p.link_bytes_per_s;
  j["peak_flops"] = p.peak_flops;
  j["memory_bandwidth_bytes_per_s"] = p.memory_bandwidth;
  j["host"] = {{"sampling_s", p.host.sampling_s},
               {"euler_s", p.host.euler_s},
               {"launch_s", p.host.launch_s}};
  if (p.host.inputs_s) j["host"]["inputs_s"] = *p.host.inputs_s;
  for (Phase ph : {Phase::vision, Phase::prefill, Phase::decode, Phase::expert}) {
    if (const auto& t = p.host.stage_entry_s[phase_index(ph)]) {
      j["host"]["stage_entry_s"][phase_name(ph)] = *t;
    }
    if (r.exe[phase_index(ph)] > 0) {
      j["timing_event_s"][phase_name(ph)] = r.calls.event_s[phase_index(ph)];
    }
  }
  j["all_copies_s"] = r.dma_total;
  // Each timed pass's copies of every group: their spread is how far the link moved meanwhile.
  j["copy_passes_s"] = r.copies.pass_s;
  j["pipelined_copy_ratio"] = r.pipeline_ratio;
  for (Phase ph : {Phase::vision, Phase::prefill, Phase::decode, Phase::expert}) {
    if (r.exe[phase_index(ph)] > 0) j["compute_s"][phase_name(ph)] = r.exe[phase_index(ph)];
  }
  j["plan"] = plan_summary_json(r.plan, r.weights, r.memory);
  j["second_pass"] = r.second_pass;
  j["map_pass"] = r.map_pass;
  int64_t mapped_groups = 0;
  for (const GroupProfile& g : p.groups) {
    mapped_groups += std::any_of(g.exe_mapped_s.begin(), g.exe_mapped_s.end(),
                                 [](const auto& t) { return t.has_value(); });
  }
  j["mapped_groups"] = mapped_groups;
  return j;
}

void print_profile_summary(const ProfileReport& r) {
  const Profile& p = r.p;
  const std::vector<double>& passes = r.copies.pass_s;
  std::printf("ferry profile: %s on %s, %s, median of %d runs\n", r.a.model.c_str(),
              p.device.c_str(), describe_workload(r.w, r.config).c_str(), r.a.runs);
  std::printf(
      "link       %.1f GB/s peak (%s); every group copied once: %.4f s (copies in the pipeline "
      "take %.3fx their time alone)\n",
      p.link_bytes_per_s / 1e9, p.byte_path.c_str(), r.dma_total, r.pipeline_ratio);
  if (!passes.empty()) {
    const auto [lo, hi] = std::minmax_element(passes.begin(), passes.end());
    std::printf("           the %zu timed passes over every group: %.4f-%.4f s (%.2f%% apart)\n",
                passes.size(), *lo, *hi, *lo > 0 ? 100.0 * (*hi - *lo) / *lo : 0.0);
  }
  std::printf("compute    BF16 GEMM %.3g TFLOP/s, device memory %.1f GB/s\n", p.peak_flops / 1e12,
              p.memory_bandwidth / 1e9);
  std::printf(
      "calls      vision %.4f s, prefill %.4f s, decode %.4f s, expert %.4f s "
      "(sums of C_EXE over the calls)\n",
      r.exe[0], r.exe[1], r.exe[2], r.exe[3]);
  std::printf("host       sampling %.1f us, Euler %.1f us, launch %.2f us per call\n",
              p.host.sampling_s * 1e6, p.host.euler_s * 1e6, p.host.launch_s * 1e6);
  std::string entries;
  for (Phase ph : {Phase::prefill, Phase::decode, Phase::expert}) {
    if (const auto& t = p.host.stage_entry_s[phase_index(ph)]) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %.1f us", entries.empty() ? "" : ", ", phase_name(ph),
                    *t * 1e6);
      entries += buf;
    }
  }
  if (!entries.empty()) std::printf("           stage entries: %s\n", entries.c_str());
  if (p.host.inputs_s) {
    std::printf("           inputs uploaded before the first call: %.1f us\n",
                *p.host.inputs_s * 1e6);
  }
  const std::array<double, kPhaseCount>& events = r.calls.event_s;
  std::printf(
      "events     %.2f / %.2f / %.2f / %.2f us taken off every vision / prefill / decode / "
      "expert span (one timing event's cost)\n",
      events[0] * 1e6, events[1] * 1e6, events[2] * 1e6, events[3] * 1e6);
  std::printf("second pass %s\n", r.second_pass.c_str());
  std::printf("map pass   %s\n", r.map_pass.c_str());
  print_plan(stdout, r.plan, r.weights, r.memory);
  std::printf("wrote      %s (%zu groups)\n", r.a.out.c_str(), p.groups.size());
}

// Every group's copy timed over a host tier of its own, closed before the session registers the
// checkpoint again. `byte_path`: what the copies read, as the profile names it.
GroupCopyTimes time_group_copies(const ProfileArgs& a, Backend& backend, const OpenModel& m,
                                 const SessionOptions& so, Progress& progress,
                                 std::string& byte_path) {
  const HostTier tier = report.check(HostTier::open(backend, m.checkpoint, so.host_path));
  byte_path = byte_path_of(backend, tier);
  progress.stage("timing the copy of every group");
  return report.check(measure_group_copies(backend, m.weights, tier, a.runs));
}

void profile(const ProfileArgs& a) {
  const OpenModel m = report.check(open_model(a.model));
  const ModelWeights& weights = m.weights;
  const Workload w = report.check(reference_workload(a.workload, m.config));
  SessionOptions so = report.check(session_options(a.session, weights, InferenceOptions{}));
  std::unique_ptr<Backend> backend =
      report.check(backend_from_flag(a.backend, a.session.check_streams));
  std::optional<Progress> progress(std::in_place, "profile", !a.quiet);
  MachineLimits limits;
  {
    // Before the budget is reserved: its buffers are large and temporary.
    auto stream = backend->create_stream();
    progress->stage("measuring the machine's limits");
    limits = report.check(measure_machine_limits(*backend, *stream));
  }
  so.rates = measured_machine_rates(*backend, limits);
  std::string byte_path;
  const GroupCopyTimes copies = time_group_copies(a, *backend, m, so, *progress, byte_path);
  progress->stage("loading weights");
  std::unique_ptr<Session> session =
      report.check(Session::open(*backend, m.config, weights, m.checkpoint, w, so));
  progress->stage("timing every call");
  CallMeasurements calls = report.check(measure_calls(*session, weights, a.runs, a.warmup));
  const Plan plan = session->plan();
  const MemoryBudget memory = session->memory();
  const std::vector<Call> session_calls = session->calls();
  const std::vector<uint8_t> in_place = session->tier().in_place_groups(weights);
  const std::string second_pass =
      a.second_pass ? run_second_pass(a, m, w, so, plan, backend, session, *progress, calls)
                    : "none";
  const std::string map_pass =
      a.map_pass ? run_map_pass(a, m, w, so, in_place, plan, backend, session, *progress, calls)
                 : "none (--no-map-pass)";
  session.reset();
  progress.reset();
  double pipeline_ratio = 1;
  const Profile p = measured_profile(weights, copies.dma_s, calls, limits, backend->info().name,
                                     byte_path, w, &pipeline_ratio);
  report.check(check_profile(p, weights, session_calls));
  report.check(write_file_atomic(a.out, profile_to_json(p)));
  if (!a.timeline_out.empty()) {
    report.check(
        write_file_atomic(a.timeline_out, timelines_json(calls.timelines, weights).dump()));
  }
  ProfileReport r{.a = a,
                  .config = m.config,
                  .weights = weights,
                  .w = w,
                  .p = p,
                  .copies = copies,
                  .calls = calls,
                  .plan = plan,
                  .memory = memory,
                  .second_pass = second_pass,
                  .map_pass = map_pass,
                  .pipeline_ratio = pipeline_ratio};
  for (const GroupProfile& g : p.groups) r.dma_total += g.dma_s;
  for (const Call& c : session_calls) {
    const GroupProfile& g = p.groups[static_cast<size_t>(c.group)];
    r.exe[phase_index(c.phase)] += g.exe_s[phase_index(c.phase)].value_or(0);
  }
  if (a.json) {
    std::cout << profile_summary_json(r).dump(-1, ' ', false,
                                              nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  print_profile_summary(r);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto args = std::make_shared<ProfileArgs>();
  auto* cmd = app.add_subcommand("profile",
                                 "Measure copy and compute times per weight group for the planner");
  cmd->add_option("--model", args->model, "Checkpoint folder (config.json + safetensors)")
      ->check(not_empty())
      ->required();
  cmd->add_option("--backend", args->backend, "cpu or cuda (default: cuda when available)")
      ->check(not_empty());
  cmd->add_option("--out", args->out, "The profile file to write")->check(not_empty())->required();
  cmd->add_option("--timeline-out", args->timeline_out,
                  "Also write every timed run's copy and compute spans per call (JSON)")
      ->check(not_empty());
  add_int_option(cmd, "--runs", &args->runs, 1, 1000, "Runs each time is the median of")
      ->default_str(std::to_string(args->runs));
  add_int_option(cmd, "--warmup", &args->warmup, 0, 100, "Untimed inferences first")
      ->default_str(std::to_string(args->warmup));
  add_workload_options(cmd, &args->workload, WorkloadDefaults::reference);
  add_session_options(cmd, &args->session);
  cmd->add_flag("!--no-second-pass", args->second_pass,
                "Skip the second pass: the plan in sequential mode, timing every call with the "
                "link idle (when the plan streams), or beside background copies (when nothing "
                "streams); its times then come from the calls the first pass saw that way");
  cmd->add_flag("!--no-map-pass", args->map_pass,
                "Skip the map pass: every group kernels can read in place timed read from the "
                "host mapping (C_EXE mapped, what the planner weighs map by); without it the "
                "planner never maps a group");
  add_int_option(cmd, "--map-runs", &args->map_runs, 1, 1000,
                 "Timed runs of the map pass (after one untimed run)")
      ->default_str(std::to_string(args->map_runs));
  cmd->add_flag("--json", args->json, "Print a JSON summary");
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->callback([args] { profile(*args); });
}

}  // namespace ferry::cli
