// `ferry bench`: the reference workload in one session (all weights resident, or under --vram
// with the rest streamed), median of several runs after a warm-up, each stage printed against its
// floor (FLOPs over the measured BF16 matrix peak, bytes over the measured device-memory
// bandwidth), against the predictor's time for the session's plan and the lower bound T_lb, and,
// when weights stream, the bytes it moved over the host link and what the copy engine did (one
// more run with timing events: busy time, the share hidden under compute, link busy per stage),
// all measured in the same run. With --op-profile, one more run after the timed ones breaks each
// stage down by op (cli/op_timing_report.h). With --sweep, one session per budget
// (bench_sweep.cpp).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/op_timing_backend.h"
#include "cli/bench.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/plan_report.h"
#include "cli/op_timing_report.h"
#include "cli/progress.h"
#include "api/session_args.h"
#include "cli/session_flags.h"
#include "cli/start_report.h"
#include "cli/timeline_json.h"
#include "core/stats.h"
#include "core/units.h"
#include "measure/machine_limits.h"
#include "measure/op_timing_provider.h"
#include "measure/peak_sampler.h"
#include "exec/session.h"
#include "exec/start_times.h"
#include "format/atomic_write.h"
#include "model/config_json.h"
#include "format/safetensors.h"
#include "model/call_sequence.h"
#include "model/cost.h"
#include "model/inference.h"
#include "model/weights.h"

namespace ferry::cli {

double TimedRuns::median_total() const {
  std::vector<double> t;
  for (const PhaseTimes& p : times) t.push_back(p.total_seconds);
  return upper_median(std::move(t));
}

double TimedRuns::median_of(Phase phase) const {
  std::vector<double> t;
  for (const PhaseTimes& p : times) t.push_back(p.of(phase));
  return upper_median(std::move(t));
}

TimedRuns time_runs(Session& session, const BenchArgs& a, const Checkpoint& checkpoint,
                    Progress& progress, bool say) {
  // The first timed run whole; of the others only their times, after checking that their outputs
  // equal the first's: keeping every result (its vocabulary-sized logits) grew bench by ~0.6 MB
  // per run.
  TimedRuns out;
  ProgressProvider tracked(session.provider(), progress);
  for (int i = 0; i < a.warmup + a.runs; ++i) {
    const bool warm = i < a.warmup;
    const std::string what = std::string(warm ? "warm-up " : "run ") +
                             std::to_string(warm ? i + 1 : i - a.warmup + 1) + "/" +
                             std::to_string(warm ? a.warmup : a.runs);
    if (say) std::fprintf(stderr, "bench: %s\n", what.c_str());
    progress.stage(what);
    InferenceResult r = kBenchReport.check(name_damage(session.run(&tracked), checkpoint));
    if (warm) continue;
    out.times.push_back(r.times);
    if (!out.first) {
      out.first = std::move(r);
    } else if (r.tokens != out.first->tokens || r.logits_hash != out.first->logits_hash ||
               r.actions_hash != out.first->actions_hash) {
      kBenchReport.fail("runs disagree: the same inputs gave different outputs (nondeterminism)");
    }
  }
  return out;
}

std::optional<TimelineSummary> timeline_run(Session& session, const Checkpoint& checkpoint) {
  if (session.plan().slots == 0) return std::nullopt;
  StreamingProvider& streaming = session.streaming_provider();
  streaming.set_timeline(true);
  Result<InferenceResult> r = name_damage(session.run(), checkpoint);
  Result<StreamTimeline> t = r.ok() ? streaming.timeline() : Result<StreamTimeline>(r.error());
  streaming.set_timeline(false);
  return summarize_timeline(kBenchReport.check(std::move(t)));
}

TimelineSummary dump_timeline(Session& session, const Checkpoint& checkpoint,
                              const ModelWeights& weights, const std::string& path) {
  StreamingProvider& streaming = session.streaming_provider();
  if (!streaming.records_timelines()) {
    kBenchReport.fail("--timeline-out: the bounce path records no timeline");
  }
  streaming.set_timeline(true);
  Result<InferenceResult> r = name_damage(session.run(), checkpoint);
  Result<StreamTimeline> t = r.ok() ? streaming.timeline() : Result<StreamTimeline>(r.error());
  streaming.set_timeline(false);
  const StreamTimeline timeline = kBenchReport.check(std::move(t));
  const InferenceResult& run = r.value();
  nlohmann::ordered_json j;
  j["format"] = "ferry-timeline";
  j["origin"] = kTimelineOrigin;
  for (size_t p = 0; p < kPhaseCount; ++p) {
    j["stage_wall_s"][phase_name(static_cast<Phase>(p))] = run.times.seconds[p];
  }
  j["total_wall_s"] = run.times.total_seconds;
  j.update(timeline_json(timeline, weights));
  const Status written = write_file_atomic(path, j.dump(1) + "\n");
  if (!written.ok()) kBenchReport.fail("--timeline-out: " + written.error().message);
  return summarize_timeline(timeline);
}

namespace {

const Reporter& report = kBenchReport;

struct StageStats {
  std::vector<double> seconds;  // one per timed run
  double floor = 0, flops = 0, bytes = 0;
  int64_t calls = 0;

  double median() const { return upper_median(seconds); }
  double min() const {
    return seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end());
  }
  double max() const {
    return seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end());
  }
};

// One more run through OpTimingBackend, which times every op alone. Op timing times ops one by
// one, ungraphed: this run must take the executor's plain path, never a captured graph, because a
// replayed graph is one launch for many ops and leaves nothing to attribute to each. Its outputs
// must equal the timed runs'.
std::vector<PhaseOpTimes> op_timing_run(Backend& backend, const ModelConfig& config,
                                        const ModelWeights& weights, GroupProvider& resident,
                                        const Workload& w, const InferenceResult& timed) {
  OpTimingBackend timer(backend);
  OpTimingProvider provider(resident, timer);
  InferenceOptions options;
  options.exec.graphs = false;
  const InferenceResult r =
      report.check(run_inference(timer, config, weights, provider, w, options));
  if (r.tokens != timed.tokens || r.logits_hash != timed.logits_hash ||
      r.actions_hash != timed.actions_hash) {
    report.fail("the profiled run's outputs differ from the timed runs'");
  }
  return summarize_op_times(timer.buckets(), r.times);
}

// Measured stream statistics per stage, as JSON.
nlohmann::ordered_json timeline_json(const TimelineSummary& t) {
  nlohmann::ordered_json j;
  j["copy_busy_s"] = t.copy_busy_s;
  j["hidden_copy_s"] = t.hidden_copy_s;
  j["hidden_fraction"] = t.hidden_fraction;
  j["compute_busy_s"] = t.compute_busy_s;
  j["stall_s"] = t.stall_s;
  j["span_s"] = t.span_s;
  j["link_bytes"] = t.link_bytes;
  return j;
}

void bench(const BenchArgs& a) {
  if (a.op_profile_top < 1 || a.op_profile_top > 10000) {
    report.fail("--op-profile-top must be in [1, 10000]");
  }
  StartTimes start;  // process start to the first inference ready (machine limits included)
  start.before_main_s = seconds_before_main();
  const OpenModel m = report.check(open_model(a.model, &start));
  const ModelConfig& config = m.config;
  const ModelWeights& weights = m.weights;
  const Workload w = report.check(reference_workload(a.workload, config));
  const std::vector<Call> calls = report.check(call_sequence(weights, config, w));
  InferenceOptions inference;
  inference.exec.graphs = a.graphs;
  SessionOptions so = report.check(session_options(a.session, weights, inference));
  so.link_check = a.link_check;
  if (a.op_profile && (so.vram || so.vram_auto)) {
    report.fail(
        "--op-profile runs every weight resident (its ops are timed one by one): drop --vram");
  }
  if (!a.sweep.empty() && a.op_profile) report.fail("--op-profile and --sweep: one at a time");
  if (a.sweep.empty() && !a.plot.empty()) report.fail("--plot draws the curve of --sweep");
  std::unique_ptr<Backend> backend =
      report.check(backend_from_flag(a.backend, a.session.check_streams, start));
  const bool say = !a.json && !a.quiet;
  std::optional<Progress> progress(std::in_place, "bench", !a.quiet);
  MachineLimits limits;
  {
    // Before the budget is reserved: its buffers are large and temporary.
    auto stream = backend->create_stream();
    if (say) std::fprintf(stderr, "bench: measuring the machine's limits...\n");
    progress->stage("measuring the machine's limits");
    const double t = seconds_since_process_start();
    limits = report.check(measure_machine_limits(*backend, *stream, so.vram.value_or(0)));
    start.machine_limits_s = seconds_since_process_start() - t;
  }
  // Without a profile, the planner's estimate uses the rates measured just now.
  so.rates = measured_machine_rates(*backend, limits);
  if (!a.sweep.empty()) {
    progress.reset();
    backend.reset();  // the sweep makes one per session
    bench_sweep(a, m, w, limits, so);
    return;
  }
  if (say) std::fprintf(stderr, "bench: loading %s...\n", a.model.c_str());
  progress->stage("loading weights");
  // The outside view of device memory from here on: the session and every run.
  PeakSampler sampler(*backend);
  std::unique_ptr<Session> session =
      report.check(Session::open(*backend, config, weights, m.checkpoint, w, so));
  start.take_session(session->start_times());
  start.total_s = seconds_since_process_start();
  const StreamingStats loaded = session->streaming();
  const TimedRuns timed = time_runs(*session, a, m.checkpoint, *progress, say);
  const std::vector<PhaseTimes>& run_times = timed.times;
  progress.reset();
  const InferenceResult& first = *timed.first;
  const StreamingStats& st = session->streaming();
  const auto inferences = static_cast<double>(a.warmup + a.runs);
  // Bytes over the link per inference, by phase, and the time they take at the measured peak.
  std::array<double, kPhaseCount> streamed{};
  double streamed_total = 0;
  for (size_t p = 0; p < kPhaseCount; ++p) {
    streamed[p] = static_cast<double>(st.bytes_by_phase[p] - loaded.bytes_by_phase[p]) / inferences;
    streamed_total += streamed[p];
  }
  // What the copy engine did, from timing events in one more run (not in the timed ones).
  std::optional<TimelineSummary> timeline;
  // None through the bounce ring (the JSON then has no "streams").
  if (!a.timeline_out.empty()) {
    if (say) std::fprintf(stderr, "bench: one more run with timing events, written out...\n");
    TimelineSummary dumped = dump_timeline(*session, m.checkpoint, weights, a.timeline_out);
    if (session->plan().slots > 0) timeline = dumped;
  } else if (a.timeline && session->streaming_provider().records_timelines()) {
    if (say && session->plan().slots > 0) {
      std::fprintf(stderr, "bench: one more run with timing events on both streams...\n");
    }
    timeline = timeline_run(*session, m.checkpoint);
  }
  const MemoryLedger ledger = backend->ledger();
  const std::optional<uint64_t> outside = sampler.peak();
  const SessionPlan& planned = session->planned();

  // Floors, from the actual prompt length and the rows the expert saw.
  const CostContext ctx =
      cost_context(config, w, static_cast<int64_t>(first.prompt.size()), first.expert_offset);
  const std::vector<CallCost> costs = call_costs(config, weights, calls, ctx);
  std::array<StageStats, kPhaseCount + 1> stages;  // by phase, then the total
  for (size_t i = 0; i < calls.size(); ++i) {
    for (size_t s : {phase_index(calls[i].phase), kPhaseCount}) {
      stages[s].floor += costs[i].floor_seconds(limits.gemm_flops, limits.copy_bandwidth);
      stages[s].flops += costs[i].flops;
      stages[s].bytes += costs[i].bytes();
      stages[s].calls += 1;
    }
  }
  for (const PhaseTimes& t : run_times) {
    for (size_t s = 0; s < kPhaseCount; ++s) stages[s].seconds.push_back(t.seconds[s]);
    stages[kPhaseCount].seconds.push_back(t.total_seconds);
  }
  const char* names[] = {"vision", "prefill", "decode", "expert", "total"};
  auto predicted_of = [&](size_t s) {
    return s < kPhaseCount ? planned.prediction.phases[s].wall_s : planned.prediction.total_s;
  };
  // Measured copy-engine busy time of the copies serving a stage (and all of them), over the
  // stage's median time: the link's busy fraction from timing events.
  auto copy_busy_of = [&](size_t s) -> std::optional<double> {
    if (!timeline) return std::nullopt;
    return s < kPhaseCount ? timeline->phases[s].copy_busy_s : timeline->copy_busy_s;
  };
  std::vector<PhaseOpTimes> op_times;
  if (a.op_profile) {
    if (say) std::fprintf(stderr, "bench: profiling one more run, op by op...\n");
    op_times = op_timing_run(*backend, config, weights, session->provider(), w, first);
    for (PhaseOpTimes& p : op_times) {
      for (size_t s = 0; s < kPhaseCount; ++s) {
        if (p.phase == names[s]) p.timed_seconds = stages[s].median();
      }
    }
  }
  int64_t decode_steps = 0;  // distinct decode steps in the call sequence
  for (const Call& c : calls) {
    if (c.phase == Phase::decode) decode_steps = std::max<int64_t>(decode_steps, c.step + 1);
  }

  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["architecture"] = architecture_name(config.arch);
    j["backend"] = std::string(backend->name());
    j["device"] = backend->info().name;
    if (const size_t stack = backend->info().thread_stack_bytes; stack > 0) {
      j["thread_stack_bytes"] = stack;  // after the runs: more than asked means a launch grew it
    }
    j["runs"] = a.runs;
    j["warmup"] = a.warmup;
    j["workload"] = {{"images", w.num_images},       {"image_height", w.image_height},
                     {"image_width", w.image_width}, {"prompt_tokens", first.prompt.size()},
                     {"tokens", w.gen_tokens},       {"flow_steps", w.flow_steps}};
    j["machine"] = {{"bf16_gemm_tflops", limits.gemm_flops / 1e12},
                    {"gemm_size", limits.gemm_size},
                    {"copy_bandwidth_gbs", limits.copy_bandwidth / 1e9},
                    {"copy_bytes", limits.copy_bytes}};
    j["graphs"] = {{"on", a.graphs},
                   {"recorded_calls", first.times.recorded_calls()},
                   {"replayed_calls", first.times.replayed_calls()},
                   {"record_s", first.times.record_time()}};
    j["machine"]["h2d_gbs"] = limits.h2d_bandwidth / 1e9;
    j["weights_bytes"] = weights.total_bytes();
    j["load_s"] = st.resident_load_seconds;
    j["open_s"] = session->open_seconds();
    j["plan"] = plan_summary_json(session->plan(), weights, session->memory());
    j["plan"]["origin"] = planned.origin;
    j["profile_source"] = planned.profile_source;
    j["prediction"] = prediction_json(planned.prediction);
    if (planned.on_path) {
      j["prediction_on_path"] = prediction_json(planned.on_path->prediction);
      j["prediction_on_path"]["copy_bytes_per_s"] = planned.on_path->bytes_per_s;
    }
    if (planned.link_check) j["link_check"] = link_check_json(*planned.link_check);
    if (planned.bound) j["lower_bound"] = bound_json(*planned.bound);
    if (timeline) j["streams"] = timeline_json(*timeline);
    j["host_path"] = session->tier().how();
    j["host_register_s"] = session->tier().register_seconds();
    j["start"] = start_json(start);
    j["graphs"]["kept"] = session->graphs();
    j["streamed_bytes_per_run"] = streamed_total;
    j["device_peak_bytes"] = {{"ferry_books", ledger.peak},
                              {"reserved", ledger.reserved},
                              {"outside", outside ? nlohmann::json(*outside) : nlohmann::json()},
                              {"outside_method", backend->driver_device_bytes_method()},
                              {"samples", sampler.samples()}};
    for (size_t s = 0; s < stages.size(); ++s) {
      if (stages[s].calls == 0) continue;
      j["stages"][names[s]] = {{"median_s", stages[s].median()}, {"min_s", stages[s].min()},
                               {"max_s", stages[s].max()},       {"floor_s", stages[s].floor},
                               {"flops", stages[s].flops},       {"bytes", stages[s].bytes},
                               {"calls", stages[s].calls},       {"runs_s", stages[s].seconds}};
      const double link_bytes = s < kPhaseCount ? streamed[s] : streamed_total;
      j["stages"][names[s]]["streamed_bytes"] = link_bytes;
      j["stages"][names[s]]["link_busy"] =
          stages[s].median() > 0 && limits.h2d_bandwidth > 0
              ? link_bytes / limits.h2d_bandwidth / stages[s].median()
              : 0.0;
      j["stages"][names[s]]["predicted_s"] = predicted_of(s);
      if (const std::optional<double> busy = copy_busy_of(s)) {
        j["stages"][names[s]]["copy_busy_s"] = *busy;
        j["stages"][names[s]]["link_busy_measured"] =
            stages[s].median() > 0 ? *busy / stages[s].median() : 0.0;
      }
    }
    j["tokens"] = first.tokens;
    if (a.op_profile) j["op_profile"] = op_times_json(op_times);
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return;
  }
  std::printf("ferry bench: %s (%s) on %s (%s), median of %d runs after %d warm-up\n",
              a.model.c_str(), architecture_name(config.arch), std::string(backend->name()).c_str(),
              backend->info().name.c_str(), a.runs, a.warmup);
  std::printf("workload: ");
  if (w.num_images > 0) {
    std::printf("%lld images %lldx%lld, ", static_cast<long long>(w.num_images),
                static_cast<long long>(w.image_height), static_cast<long long>(w.image_width));
  }
  std::printf("prompt %zu tokens, %lld generated", first.prompt.size(),
              static_cast<long long>(w.gen_tokens));
  if (config.alpamayo() != nullptr) {
    std::printf(", %lld flow steps", static_cast<long long>(w.flow_steps));
  }
  std::printf("\nmachine:  BF16 GEMM %.3g TFLOP/s (%lld^3, measured), copy %.1f GB/s (measured)\n",
              limits.gemm_flops / 1e12, static_cast<long long>(limits.gemm_size),
              limits.copy_bandwidth / 1e9);
  if (a.graphs) {
    std::printf(
        "graphs:   on, per run %lld calls recorded (%.2f ms of host time, in the stage times), "
        "%lld replayed\n",
        static_cast<long long>(first.times.recorded_calls()), first.times.record_time() * 1e3,
        static_cast<long long>(first.times.replayed_calls()));
  } else {
    std::printf("graphs:   off (every op launched one by one)\n");
  }
  std::printf("link:     host -> device %.1f GB/s (page-locked, measured); host tier: %s\n",
              limits.h2d_bandwidth / 1e9, session->tier().how().c_str());
  std::printf("weights:  %.2f GB resident, loaded in %.2f s; %.2f GB streamed per run\n",
              static_cast<double>(st.resident_bytes) / 1e9, st.resident_load_seconds,
              streamed_total / 1e9);
  std::printf("start:    %s\n", start_text(start).c_str());
  std::printf("plan:     %s; predicted from the %s profile\n", planned.origin.c_str(),
              planned.profile_source.c_str());
  print_plan(stdout, session->plan(), weights, session->memory());
  std::printf("device:   peak %s in ferry's books", binary_bytes(ledger.peak).c_str());
  if (outside) {
    std::printf(", %s seen by the driver (%s, %lld samples)", binary_bytes(*outside).c_str(),
                backend->driver_device_bytes_method().c_str(),
                static_cast<long long>(sampler.samples()));
  }
  if (planned.vram) std::printf("; budget %s", binary_bytes(*planned.vram).c_str());
  std::printf("\n");
  if (timeline) {
    std::printf(
        "streams:  copy engine busy %.2f ms per run (measured), %.1f%% of it under compute; "
        "compute stalled %.2f ms waiting for copies\n",
        timeline->copy_busy_s * 1e3, 100.0 * timeline->hidden_fraction, timeline->stall_s * 1e3);
  }
  std::printf("\n");
  std::printf("%-8s %10s %10s %10s %10s %8s %10s %10s %9s %9s %10s\n", "stage", "median", "min",
              "max", "floor", "floor/t", "TFLOP/s", "GB/s", "link GB", "link busy", "predicted");
  for (size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].calls == 0) continue;
    const double t = stages[s].median();
    const double link_bytes = s < kPhaseCount ? streamed[s] : streamed_total;
    // Measured (copy-engine busy time over the stage's time) when there is a timeline.
    const std::optional<double> copy_busy = copy_busy_of(s);
    const double busy =
        copy_busy ? (t > 0 ? *copy_busy / t : 0)
                  : (t > 0 && limits.h2d_bandwidth > 0 ? link_bytes / limits.h2d_bandwidth / t : 0);
    std::printf(
        "%-8s %8.2fms %8.2fms %8.2fms %8.2fms %7.1f%% %10.3g %10.1f %9.2f %8.0f%% %8.2fms\n",
        names[s], t * 1e3, stages[s].min() * 1e3, stages[s].max() * 1e3, stages[s].floor * 1e3,
        t > 0 ? 100.0 * stages[s].floor / t : 0.0, t > 0 ? stages[s].flops / t / 1e12 : 0,
        t > 0 ? stages[s].bytes / t / 1e9 : 0, link_bytes / 1e9, 100.0 * busy,
        predicted_of(s) * 1e3);
  }
  const double total = stages[kPhaseCount].median();
  std::printf("\npredicted %.4f s (%+.2f%% of measured)", planned.prediction.total_s,
              total > 0 ? 100.0 * (planned.prediction.total_s - total) / total : 0.0);
  if (planned.bound) {
    std::printf("; T_lb %.4f s, measured %.3fx the bound", planned.bound->total_s,
                planned.bound->total_s > 0 ? total / planned.bound->total_s : 0.0);
  }
  if (planned.on_path) {
    const double t = planned.on_path->prediction.total_s;
    std::printf(
        "\npredicted %.4f s (%+.2f%% of measured) with copies at this host path's %.2f GB/s", t,
        total > 0 ? 100.0 * (t - total) / total : 0.0, planned.on_path->bytes_per_s / 1e9);
  }
  if (planned.link_check) {
    const double t = planned.link_check->prediction.total_s;
    std::printf(
        "\npredicted %.4f s (%+.2f%% of measured) with the link as found at open (copies %.3fx "
        "the profile's)",
        t, total > 0 ? 100.0 * (t - total) / total : 0.0, planned.link_check->factor);
  }
  std::printf("\nlink busy: %s\n", timeline
                                       ? "copy-engine busy time from timing events / stage time"
                                       : "streamed bytes / measured link peak / stage time");
  if (decode_steps > 0) {
    const double steps = static_cast<double>(decode_steps);
    std::printf("decode step: %.3f ms, floor %.3f ms (%.2fx the floor)\n",
                stages[2].median() / steps * 1e3, stages[2].floor / steps * 1e3,
                stages[2].floor > 0 ? stages[2].median() / stages[2].floor : 0.0);
  }
  if (a.op_profile) print_op_times(stdout, op_times, static_cast<size_t>(a.op_profile_top));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand(
      "bench", "Time the reference workload, each stage against the machine's floor");
  cmd->add_option("--model", args->model, "Checkpoint folder (config.json + safetensors)")
      ->check(not_empty())
      ->required();
  cmd->add_option("--backend", args->backend, "cpu or cuda (default: cuda when available)")
      ->check(not_empty());
  add_int_option(cmd, "--runs", &args->runs, 1, 1000, "Timed runs (the median is reported)")
      ->default_str(std::to_string(args->runs));
  add_int_option(cmd, "--warmup", &args->warmup, 0, 100, "Untimed runs first")
      ->default_str(std::to_string(args->warmup));
  add_workload_options(cmd, &args->workload);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  add_graphs_option(cmd, &args->graphs);
  cmd->add_flag("--op-profile", args->op_profile,
                "One more run, every op timed alone (synchronized): time per op and shape");
  add_int_option(cmd, "--op-profile-top", &args->op_profile_top, 1, 10000,
                 "Ops shown per stage with --op-profile")
      ->default_str(std::to_string(args->op_profile_top));
  cmd->add_flag("!--no-timeline", args->timeline,
                "No extra run with timing events on the copy and compute streams when weights "
                "stream (the copy engine's busy time and overlap are then not measured)");
  cmd->add_flag("!--no-link-check", args->link_check,
                "No link check at the start: when weights stream, a sample of them (about 1 GiB) "
                "is copied three times to price the plan again with the link as this process "
                "finds it (both predictions are printed)");
  cmd->add_option("--timeline-out", args->timeline_out,
                  "Write one more run's timeline here (JSON; every call's compute span and copy "
                  "span, resident or streamed, with the run's stage times), for "
                  "scripts/timeline_gaps.py; with --sweep, one file per budget: FILE.BYTES.json")
      ->check(not_empty());
  cmd->add_option("--sweep", args->sweep,
                  "Measure the VRAM-latency curve, one session per budget: a list of budgets "
                  "(8GiB,12GiB,...) or auto (the smallest working budget to all-resident)")
      ->check(not_empty());
  add_int_option(cmd, "--sweep-points", &args->sweep_points, 2, 1000, "Budgets of --sweep auto")
      ->default_str(std::to_string(args->sweep_points));
  cmd->add_option("--plot", args->plot,
                  "With --sweep: an SVG of measured and predicted time and T_lb against budget")
      ->check(not_empty());
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  add_session_options(cmd, &args->session);
  cmd->callback([args] { bench(*args); });
}

}  // namespace ferry::cli
