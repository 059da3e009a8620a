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

#include "api/session_args.h"
#include "backend/backend.h"
#include "backend/op_timing_backend.h"
#include "cli/bench.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/op_timing_report.h"
#include "cli/plan_report.h"
#include "cli/progress.h"
#include "cli/session_flags.h"
#include "cli/start_report.h"
#include "cli/timeline_json.h"
#include "core/stats.h"
#include "core/units.h"
#include "exec/session.h"
#include "exec/start_times.h"
#include "format/atomic_write.h"
#include "format/safetensors.h"
#include "measure/machine_limits.h"
#include "measure/op_timing_provider.h"
#include "measure/peak_sampler.h"
#include "model/call_sequence.h"
#include "model/config_json.h"
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
  OpTimingBackend profiler(backend);
  OpTimingProvider provider(resident, profiler);
  InferenceOptions options;
  options.exec.graphs = false;
  const InferenceResult r =
      report.check(run_inference(profiler, config, weights, provider, w, options));
  if (r.tokens != timed.tokens || r.logits_hash != timed.logits_hash ||
      r.actions_hash != timed.actions_hash) {
    report.fail("the profiled run's outputs differ from the timed runs'");
  }
  return summarize_op_times(profiler.buckets(), r.times);
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

// What one bench session measured: the report its two printers render (text and JSON). The
// backend and the session are the command's, alive while it prints; the rest are values.
struct BenchReport {
  const BenchArgs& a;
  const ModelConfig& config;
  const ModelWeights& weights;
  const Workload& w;
  const MachineLimits& limits;
  const StartTimes& start;
  const Backend& backend;
  const Session& session;
  const InferenceResult& first;                // the first timed run
  std::array<double, kPhaseCount> streamed{};  // bytes over the link per inference, by phase
  double streamed_total = 0;
  std::optional<TimelineSummary> timeline{};  // what the copy engine did (one more run)
  MemoryLedger ledger{};
  std::optional<uint64_t> outside{};                 // the driver's peak, seen from outside
  int64_t samples = 0;                               // the peak sampler's, at the end
  std::array<StageStats, kPhaseCount + 1> stages{};  // by phase, then the total
  std::vector<PhaseOpTimes> profile{};               // --op-profile
  int64_t decode_steps = 0;                          // distinct decode steps in the call sequence

  const StreamingStats& st() const { return session.streaming(); }
  const SessionPlan& planned() const { return session.planned(); }
  double predicted_of(size_t s) const {
    return s < kPhaseCount ? planned().prediction.phases[s].wall_s : planned().prediction.total_s;
  }
  // Measured copy-engine busy time of the copies serving a stage (and all of them), over the
  // stage's median time: the link's busy fraction from timing events.
  std::optional<double> copy_busy_of(size_t s) const {
    if (!timeline) return std::nullopt;
    return s < kPhaseCount ? timeline->phases[s].copy_busy_s : timeline->copy_busy_s;
  }
  double link_bytes_of(size_t s) const { return s < kPhaseCount ? streamed[s] : streamed_total; }
};

const char* const kStageNames[] = {"vision", "prefill", "decode", "expert", "total"};

// Floors (from the actual prompt length and the rows the expert saw) and the timed runs' times,
// per stage and in total.
std::array<StageStats, kPhaseCount + 1> stage_stats(const BenchReport& r,
                                                    const std::vector<Call>& calls,
                                                    const std::vector<PhaseTimes>& run_times) {
  const CostContext ctx = cost_context(r.config, r.w, static_cast<int64_t>(r.first.prompt.size()),
                                       r.first.expert_offset);
  const std::vector<CallCost> costs = call_costs(r.config, r.weights, calls, ctx);
  std::array<StageStats, kPhaseCount + 1> stages;  // by phase, then the total
  for (size_t i = 0; i < calls.size(); ++i) {
    for (size_t s : {phase_index(calls[i].phase), kPhaseCount}) {
      stages[s].floor += costs[i].floor_seconds(r.limits.gemm_flops, r.limits.copy_bandwidth);
      stages[s].flops += costs[i].flops;
      stages[s].bytes += costs[i].bytes();
      stages[s].calls += 1;
    }
  }
  for (const PhaseTimes& t : run_times) {
    for (size_t s = 0; s < kPhaseCount; ++s) stages[s].seconds.push_back(t.seconds[s]);
    stages[kPhaseCount].seconds.push_back(t.total_seconds);
  }
  return stages;
}

// The timeline of one more run: written out with --timeline-out (whatever the plan), else taken
// when weights stream and the provider records timelines (none through the bounce ring: the JSON
// then has no "streams").
std::optional<TimelineSummary> bench_timeline(const BenchArgs& a, Session& session,
                                              const Checkpoint& checkpoint,
                                              const ModelWeights& weights, bool say) {
  if (!a.timeline_out.empty()) {
    if (say) std::fprintf(stderr, "bench: one more run with timing events, written out...\n");
    TimelineSummary dumped = dump_timeline(session, checkpoint, weights, a.timeline_out);
    if (session.plan().slots > 0) return dumped;
    return std::nullopt;
  }
  if (a.timeline && session.streaming_provider().records_timelines()) {
    if (say && session.plan().slots > 0) {
      std::fprintf(stderr, "bench: one more run with timing events on both streams...\n");
    }
    return timeline_run(session, checkpoint);
  }
  return std::nullopt;
}

nlohmann::json stages_json(const BenchReport& r) {
  nlohmann::json j;
  for (size_t s = 0; s < kPhaseCount + 1; ++s) {
    const StageStats& st = r.stages[s];
    if (st.calls == 0) continue;
    nlohmann::json& stage = j[kStageNames[s]];
    stage = {{"median_s", st.median()}, {"min_s", st.min()},   {"max_s", st.max()},
             {"floor_s", st.floor},     {"flops", st.flops},   {"bytes", st.bytes},
             {"calls", st.calls},       {"runs_s", st.seconds}};
    const double link_bytes = r.link_bytes_of(s);
    stage["streamed_bytes"] = link_bytes;
    stage["link_busy"] = st.median() > 0 && r.limits.h2d_bandwidth > 0
                             ? link_bytes / r.limits.h2d_bandwidth / st.median()
                             : 0.0;
    stage["predicted_s"] = r.predicted_of(s);
    if (const std::optional<double> busy = r.copy_busy_of(s)) {
      stage["copy_busy_s"] = *busy;
      stage["link_busy_measured"] = st.median() > 0 ? *busy / st.median() : 0.0;
    }
  }
  return j;
}

nlohmann::json bench_json(const BenchReport& r) {
  const BenchArgs& a = r.a;
  const SessionPlan& planned = r.planned();
  const Session& session = r.session;
  nlohmann::json j;
  j["model"] = a.model;
  j["architecture"] = architecture_name(r.config.arch);
  j["backend"] = std::string(r.backend.name());
  j["device"] = r.backend.info().name;
  if (const size_t stack = r.backend.info().thread_stack_bytes; stack > 0) {
    j["thread_stack_bytes"] = stack;  // after the runs: more than asked means a launch grew it
  }
  j["runs"] = a.runs;
  j["warmup"] = a.warmup;
  j["workload"] = {{"images", r.w.num_images},       {"image_height", r.w.image_height},
                   {"image_width", r.w.image_width}, {"prompt_tokens", r.first.prompt.size()},
                   {"tokens", r.w.gen_tokens},       {"flow_steps", r.w.flow_steps}};
  j["machine"] = {{"bf16_gemm_tflops", r.limits.gemm_flops / 1e12},
                  {"gemm_size", r.limits.gemm_size},
                  {"copy_bandwidth_gbs", r.limits.copy_bandwidth / 1e9},
                  {"copy_bytes", r.limits.copy_bytes}};
  j["graphs"] = {{"on", a.graphs},
                 {"recorded_calls", r.first.times.recorded_calls()},
                 {"replayed_calls", r.first.times.replayed_calls()},
                 {"record_s", r.first.times.record_time()}};
  j["machine"]["h2d_gbs"] = r.limits.h2d_bandwidth / 1e9;
  j["weights_bytes"] = r.weights.total_bytes();
  j["load_s"] = r.st().resident_load_seconds;
  j["open_s"] = session.open_seconds();
  j["plan"] = plan_summary_json(session.plan(), r.weights, session.memory());
  j["plan"]["origin"] = planned.origin;
  if (!planned.device_note.empty()) j["device_note"] = planned.device_note;
  j["profile_source"] = planned.profile_source;
  j["prediction"] = prediction_json(planned.prediction);
  if (planned.on_path) {
    j["prediction_on_path"] = prediction_json(planned.on_path->prediction);
    j["prediction_on_path"]["copy_bytes_per_s"] = planned.on_path->bytes_per_s;
  }
  if (planned.link_check) j["link_check"] = link_check_json(*planned.link_check);
  if (planned.bound) j["lower_bound"] = bound_json(*planned.bound);
  if (r.timeline) j["streams"] = timeline_json(*r.timeline);
  j["host_path"] = session.tier().how();
  j["host_register_s"] = session.tier().register_seconds();
  j["start"] = start_json(r.start);
  j["graphs"]["kept"] = session.graphs();
  j["streamed_bytes_per_run"] = r.streamed_total;
  j["device_peak_bytes"] = {{"ferry_books", r.ledger.peak},
                            {"reserved", r.ledger.reserved},
                            {"outside", r.outside ? nlohmann::json(*r.outside) : nlohmann::json()},
                            {"outside_method", r.backend.driver_device_bytes_method()},
                            {"samples", r.samples}};
  if (nlohmann::json stages = stages_json(r); !stages.is_null()) j["stages"] = std::move(stages);
  j["tokens"] = r.first.tokens;
  if (a.op_profile) j["op_profile"] = op_times_json(r.profile);
  return j;
}

// The lines above the stage table: what ran, on what, with which plan and memory.
void print_bench_header(const BenchReport& r) {
  const BenchArgs& a = r.a;
  const Workload& w = r.w;
  const MachineLimits& limits = r.limits;
  const StreamingStats& st = r.st();
  const SessionPlan& planned = r.planned();
  std::printf("ferry bench: %s (%s) on %s (%s), median of %d runs after %d warm-up\n",
              a.model.c_str(), architecture_name(r.config.arch),
              std::string(r.backend.name()).c_str(), r.backend.info().name.c_str(), a.runs,
              a.warmup);
  std::printf("workload: ");
  if (w.num_images > 0) {
    std::printf("%lld images %lldx%lld, ", static_cast<long long>(w.num_images),
                static_cast<long long>(w.image_height), static_cast<long long>(w.image_width));
  }
  std::printf("prompt %zu tokens, %lld generated", r.first.prompt.size(),
              static_cast<long long>(w.gen_tokens));
  if (r.config.alpamayo() != nullptr) {
    std::printf(", %lld flow steps", static_cast<long long>(w.flow_steps));
  }
  std::printf("\nmachine:  BF16 GEMM %.3g TFLOP/s (%lld^3, measured), copy %.1f GB/s (measured)\n",
              limits.gemm_flops / 1e12, static_cast<long long>(limits.gemm_size),
              limits.copy_bandwidth / 1e9);
  if (a.graphs) {
    std::printf(
        "graphs:   on, per run %lld calls recorded (%.2f ms of host time, in the stage times), "
        "%lld replayed\n",
        static_cast<long long>(r.first.times.recorded_calls()), r.first.times.record_time() * 1e3,
        static_cast<long long>(r.first.times.replayed_calls()));
  } else {
    std::printf("graphs:   off (every op launched one by one)\n");
  }
  std::printf("link:     host -> device %.1f GB/s (page-locked, measured); host tier: %s\n",
              limits.h2d_bandwidth / 1e9, r.session.tier().how().c_str());
  std::printf("weights:  %.2f GB resident, loaded in %.2f s; %.2f GB streamed per run\n",
              static_cast<double>(st.resident_bytes) / 1e9, st.resident_load_seconds,
              r.streamed_total / 1e9);
  std::printf("start:    %s\n", start_text(r.start).c_str());
  std::printf("plan:     %s; predicted from the %s profile\n", planned.origin.c_str(),
              planned.profile_source.c_str());
  if (!planned.device_note.empty()) std::printf("unified:  %s\n", planned.device_note.c_str());
  print_plan(stdout, r.session.plan(), r.weights, r.session.memory());
  std::printf("device:   peak %s in ferry's books", binary_bytes(r.ledger.peak).c_str());
  if (r.outside) {
    std::printf(", %s seen by the driver (%s, %lld samples)", binary_bytes(*r.outside).c_str(),
                r.backend.driver_device_bytes_method().c_str(), static_cast<long long>(r.samples));
  }
  if (planned.vram) std::printf("; budget %s", binary_bytes(*planned.vram).c_str());
  std::printf("\n");
  if (r.timeline) {
    std::printf(
        "streams:  copy engine busy %.2f ms per run (measured), %.1f%% of it under compute; "
        "compute stalled %.2f ms waiting for copies\n",
        r.timeline->copy_busy_s * 1e3, 100.0 * r.timeline->hidden_fraction,
        r.timeline->stall_s * 1e3);
  }
  std::printf("\n");
}

void print_stage_table(const BenchReport& r) {
  std::printf("%-8s %10s %10s %10s %10s %8s %10s %10s %9s %9s %10s\n", "stage", "median", "min",
              "max", "floor", "floor/t", "TFLOP/s", "GB/s", "link GB", "link busy", "predicted");
  const double h2d = r.limits.h2d_bandwidth;
  for (size_t s = 0; s < kPhaseCount + 1; ++s) {
    const StageStats& st = r.stages[s];
    if (st.calls == 0) continue;
    const double t = st.median();
    const double link_bytes = r.link_bytes_of(s);
    // Measured (copy-engine busy time over the stage's time) when there is a timeline.
    const std::optional<double> copy_busy = r.copy_busy_of(s);
    const double busy =
        copy_busy ? (t > 0 ? *copy_busy / t : 0) : (t > 0 && h2d > 0 ? link_bytes / h2d / t : 0);
    std::printf(
        "%-8s %8.2fms %8.2fms %8.2fms %8.2fms %7.1f%% %10.3g %10.1f %9.2f %8.0f%% %8.2fms\n",
        kStageNames[s], t * 1e3, st.min() * 1e3, st.max() * 1e3, st.floor * 1e3,
        t > 0 ? 100.0 * st.floor / t : 0.0, t > 0 ? st.flops / t / 1e12 : 0,
        t > 0 ? st.bytes / t / 1e9 : 0, link_bytes / 1e9, 100.0 * busy, r.predicted_of(s) * 1e3);
  }
}

// Below the table: the predictions against the measured total, T_lb, the decode step.
void print_bench_footer(const BenchReport& r) {
  const SessionPlan& planned = r.planned();
  const double total = r.stages[kPhaseCount].median();
  auto off = [&](double t) { return total > 0 ? 100.0 * (t - total) / total : 0.0; };
  std::printf("\npredicted %.4f s (%+.2f%% of measured)", planned.prediction.total_s,
              off(planned.prediction.total_s));
  if (planned.bound) {
    std::printf("; T_lb %.4f s, measured %.3fx the bound", planned.bound->total_s,
                planned.bound->total_s > 0 ? total / planned.bound->total_s : 0.0);
  }
  if (planned.on_path) {
    const double t = planned.on_path->prediction.total_s;
    std::printf(
        "\npredicted %.4f s (%+.2f%% of measured) with copies at this host path's %.2f GB/s", t,
        off(t), planned.on_path->bytes_per_s / 1e9);
  }
  if (planned.link_check) {
    const double t = planned.link_check->prediction.total_s;
    std::printf(
        "\npredicted %.4f s (%+.2f%% of measured) with the link as found at open (copies %.3fx "
        "the profile's)",
        t, off(t), planned.link_check->factor);
  }
  std::printf("\nlink busy: %s\n", r.timeline
                                       ? "copy-engine busy time from timing events / stage time"
                                       : "streamed bytes / measured link peak / stage time");
  if (r.decode_steps > 0) {
    const double steps = static_cast<double>(r.decode_steps);
    const StageStats& decode = r.stages[2];
    std::printf("decode step: %.3f ms, floor %.3f ms (%.2fx the floor)\n",
                decode.median() / steps * 1e3, decode.floor / steps * 1e3,
                decode.floor > 0 ? decode.median() / decode.floor : 0.0);
  }
  if (r.a.op_profile) print_op_times(stdout, r.profile, static_cast<size_t>(r.a.op_profile_top));
}

void print_bench(const BenchReport& r) {
  print_bench_header(r);
  print_stage_table(r);
  print_bench_footer(r);
}

// One session under the flags' budget: opened, timed, measured, then printed.
void bench_session(const BenchArgs& a, const OpenModel& m, const Workload& w,
                   const std::vector<Call>& calls, const MachineLimits& limits,
                   const SessionOptions& so, StartTimes& start, Backend& backend,
                   std::optional<Progress>& progress, bool say) {
  if (say) std::fprintf(stderr, "bench: loading %s...\n", a.model.c_str());
  progress->stage("loading weights");
  // The outside view of device memory from here on: the session and every run.
  PeakSampler sampler(backend);
  std::unique_ptr<Session> session =
      report.check(Session::open(backend, m.config, m.weights, m.checkpoint, w, so));
  start.take_session(session->start_times());
  start.total_s = seconds_since_process_start();
  const StreamingStats loaded = session->streaming();
  const TimedRuns timed = time_runs(*session, a, m.checkpoint, *progress, say);
  progress.reset();
  BenchReport r{.a = a,
                .config = m.config,
                .weights = m.weights,
                .w = w,
                .limits = limits,
                .start = start,
                .backend = backend,
                .session = *session,
                .first = *timed.first};
  const auto inferences = static_cast<double>(a.warmup + a.runs);
  for (size_t p = 0; p < kPhaseCount; ++p) {
    r.streamed[p] =
        static_cast<double>(r.st().bytes_by_phase[p] - loaded.bytes_by_phase[p]) / inferences;
    r.streamed_total += r.streamed[p];
  }
  r.timeline = bench_timeline(a, *session, m.checkpoint, m.weights, say);
  r.ledger = backend.ledger();
  r.outside = sampler.peak();
  r.stages = stage_stats(r, calls, timed.times);
  if (a.op_profile) {
    if (say) std::fprintf(stderr, "bench: profiling one more run, op by op...\n");
    r.profile = op_timing_run(backend, m.config, m.weights, session->provider(), w, r.first);
    for (PhaseOpTimes& p : r.profile) {
      for (size_t s = 0; s < kPhaseCount; ++s) {
        if (p.phase == kStageNames[s]) p.timed_seconds = r.stages[s].median();
      }
    }
  }
  for (const Call& c : calls) {
    if (c.phase == Phase::decode) r.decode_steps = std::max<int64_t>(r.decode_steps, c.step + 1);
  }
  r.samples = sampler.samples();
  if (a.json) {
    std::cout << bench_json(r).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
  } else {
    print_bench(r);
  }
}

// --op-profile, --sweep and --plot against each other and the budget; --no-link-check.
SessionOptions bench_session_options(const BenchArgs& a, const ModelWeights& weights) {
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
  return so;
}

void bench(const BenchArgs& a) {
  if (a.op_profile_top < 1 || a.op_profile_top > 10000) {
    report.fail("--op-profile-top must be in [1, 10000]");
  }
  StartTimes start;  // process start to the first inference ready (machine limits included)
  start.before_main_s = seconds_before_main();
  const OpenModel m = report.check(open_model(a.model, &start));
  const Workload w = report.check(reference_workload(a.workload, m.config));
  const std::vector<Call> calls = report.check(call_sequence(m.weights, m.config, w));
  SessionOptions so = bench_session_options(a, m.weights);
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
  bench_session(a, m, w, calls, limits, so, start, *backend, progress, say);
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
  add_workload_options(cmd, &args->workload, WorkloadDefaults::reference);
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
