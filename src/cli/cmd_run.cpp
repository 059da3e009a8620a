// `ferry run`: one inference on synthetic inputs (seeded prompt ids, pixels, ego history) or on
// real ones (--frames and --ego-history for Alpamayo-R1, --prompt for text models: run_real.h),
// under a device budget when one is given (weights that do not fit are streamed). Prints the
// generated text as it comes (real inputs) or tokens, logits/actions hashes, the plan, device
// memory and time per stage; writes the trajectory and its picture when asked.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "api/npy.h"
#include "api/run_real.h"
#include "api/session_args.h"
#include "backend/backend.h"
#include "cli/cli_support.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/session_flags.h"
#include "cli/start_report.h"
#include "cli/workload_args.h"
#include "core/interrupt.h"
#include "core/units.h"
#include "exec/session.h"
#include "exec/start_times.h"
#include "format/safetensors.h"
#include "measure/peak_sampler.h"
#include "model/call_sequence.h"
#include "model/config_json.h"
#include "model/inference.h"
#include "model/weights.h"

namespace ferry::cli {

namespace {

struct RunArgs {
  std::string model;
  std::string backend;
  WorkloadArgs workload;
  uint64_t seed = 0;
  bool greedy = false;
  std::optional<float> temperature;
  std::optional<float> top_p;
  bool json = false;
  bool graphs = true;
  bool dry_run = false;
  SessionArgs session;
  std::string dump_logits;
  std::string dump_inputs;
  bool quiet = false;
  RealInputFlags real;
  std::optional<int64_t> max_tokens;
  bool no_thinking = false;
  std::string trajectory;
  std::string picture;
};

const Reporter report{"run"};

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// What synthetic and real runs share: flow steps, seed, sampling. Synthetic runs are greedy
// unless --temperature or --top-p is given; Alpamayo-R1 on real inputs samples as the official
// code does (temperature 0.6, top-p 0.98) unless --greedy.
void apply_settings(const RunArgs& a, const ModelConfig& config, bool real, Workload& w) {
  if (const AlpamayoConfig* ar = config.alpamayo()) {
    w.flow_steps = a.workload.steps.value_or(ar->diffusion.num_inference_steps);
  }
  w.seed = a.seed;
  const bool samples_by_default = real && config.alpamayo() != nullptr;
  w.sampling.greedy = a.greedy || (!a.temperature && !a.top_p && !samples_by_default);
  if (a.temperature) w.sampling.temperature = *a.temperature;
  if (a.top_p) w.sampling.top_p = *a.top_p;
}

// Flags of synthetic workloads are errors beside real inputs, and the other way round.
void check_input_flags(const RunArgs& a, const ModelConfig& config) {
  const bool real = a.real.any();
  auto refuse = [&](bool given, const char* flag) {
    if (given && real) {
      report.fail(std::string(flag) +
                  " shapes a synthetic workload; real inputs (--frames, --prompt) set it");
    }
  };
  refuse(a.workload.images.has_value(), "--images");
  refuse(a.workload.image_size.has_value(), "--image-size");
  refuse(a.workload.prompt_tokens.has_value(), "--prompt-tokens");
  refuse(a.workload.tokens.has_value(), "--tokens (use --max-tokens)");
  if (!real && a.no_thinking) report.fail("--no-thinking goes with --prompt");
  if (!real && a.max_tokens) {
    report.fail(
        "--max-tokens applies to real inputs (--frames, --prompt); --tokens sets how many "
        "tokens a synthetic run generates");
  }
  const bool alpamayo = config.alpamayo() != nullptr;
  if (!a.trajectory.empty()) {
    if (!alpamayo)
      report.fail("--trajectory: " + std::string(architecture_name(config.arch)) +
                  " makes no trajectory");
    report.check(check_output_path("--trajectory", a.trajectory, {".json", ".csv"}));
  }
  if (!a.picture.empty()) {
    if (!alpamayo || !real) {
      report.fail("--picture: draws Alpamayo-R1's trajectory on real inputs (--frames)");
    }
    report.check(check_output_path("--picture", a.picture, {".png", ".svg"}));
  }
}

std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? " " : "") + std::to_string(v[i]);
  return s;
}

void dump_inputs(const std::string& dir, const InferenceResult& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) report.fail("cannot create " + dir + ": " + ec.message());
  const auto s = static_cast<int64_t>(r.prompt.size());
  std::vector<int64_t> ids(r.prompt.begin(), r.prompt.end());
  report.check(write_npy(dir + "/input_ids.npy", std::span<const int64_t>(ids), {1, s}));
  // position_ids as transformers takes them: [3, 1, S] (t, h, w rows).
  std::vector<int64_t> pos(static_cast<size_t>(3 * s));
  for (int64_t i = 0; i < s; ++i) {
    for (int64_t c = 0; c < 3; ++c)
      pos[static_cast<size_t>(c * s + i)] = r.positions[static_cast<size_t>(i * 3 + c)];
  }
  report.check(write_npy(dir + "/position_ids.npy", std::span<const int64_t>(pos), {3, 1, s}));
  std::vector<int64_t> gen(r.tokens.begin(), r.tokens.end());
  report.check(write_npy(dir + "/generated_ids.npy", std::span<const int64_t>(gen),
                         {static_cast<int64_t>(gen.size())}));
  if (!r.image_grids.empty()) {
    std::vector<int64_t> grids;
    for (const auto& g : r.image_grids) grids.insert(grids.end(), g.begin(), g.end());
    report.check(write_npy(dir + "/image_grid_thw.npy", std::span<const int64_t>(grids),
                           {static_cast<int64_t>(r.image_grids.size()), 3}));
    const int64_t cols = r.patch_values;
    const auto rows = static_cast<int64_t>(r.pixel_values.size()) / cols;
    report.check(
        write_npy(dir + "/pixel_values.npy", std::span<const float>(r.pixel_values), {rows, cols}));
  }
}

void dump_logits(const std::string& path, const InferenceResult& r) {
  const size_t vocab = r.prefill_logits.size();
  std::vector<float> all(r.prefill_logits);
  for (const auto& l : r.step_logits) all.insert(all.end(), l.begin(), l.end());
  report.check(
      write_npy(path, std::span<const float>(all),
                {static_cast<int64_t>(1 + r.step_logits.size()), static_cast<int64_t>(vocab)}));
}

// The workload: the real inputs' (loaded into `real`) or the synthetic one the flags shape, with
// flow steps, seed and sampling applied. Validated.
Workload run_workload(const RunArgs& a, const ModelConfig& config,
                      std::optional<RealInputs>& real) {
  Workload w;
  if (a.real.any()) {
    RealInputFlags flags = a.real;
    flags.max_tokens = a.max_tokens.value_or(0);
    flags.thinking = !a.no_thinking;
    real.emplace(report.check(load_real_inputs(a.model, config, flags)));
    w = real->workload;
  } else {
    w = report.check(make_workload(a.workload, config, WorkloadDefaults::quick));
  }
  apply_settings(a, config, real.has_value(), w);
  report.check(validate_workload(w, config));
  return w;
}

// --dry-run: the call sequence and the plan with its memory; no checkpoint is opened.
void dry_run(const RunArgs& a, const ModelDescription& model, const Workload& w,
             const std::vector<Call>& calls, const SessionOptions& so) {
  const ModelConfig& config = model.config;
  const ModelWeights& weights = model.weights;
  if (so.compress_at_open) {
    report.fail(
        "--dry-run opens no checkpoint, so it encodes no group: `ferry plan --compress-at-open` "
        "shows a plan with compressed groups");
  }
  std::unique_ptr<Backend> backend =
      report.check(backend_from_flag(a.backend, a.session.check_streams));
  // The runtime's share as it stands now (no checkpoint is opened: the host tier is assumed to
  // register, as it does on Linux with CUDA).
  const std::optional<uint64_t> held = backend->driver_device_bytes();
  const uint64_t runtime = held ? *held + kRuntimeMarginBytes : 0;
  auto planned =
      report.check(plan_session(*backend, config, weights, w, so, runtime, /*in_place=*/true));
  std::cout << "model " << architecture_name(config.arch) << " (" << a.model << "), "
            << weights.groups.size() << " groups, " << weights.total_bytes() << " bytes\n"
            << "workload: images " << w.num_images << " (" << w.image_height << "x" << w.image_width
            << "), prompt " << w.prompt_tokens << " tokens, generate " << w.gen_tokens
            << ", flow steps " << w.flow_steps << ", seed " << w.seed << "\n"
            << format_call_sequence(calls, weights) << std::flush;
  print_plan(stdout, planned.first, weights, planned.second);
}

// The inference, real inputs set first (their text printed as it is generated, unless --json);
// the progress line is gone before the results. `text`: what real inputs generated.
InferenceResult infer(const RunArgs& a, Session& session, const Checkpoint& ckpt,
                      std::optional<RealInputs>& real, std::optional<Progress>& progress,
                      std::optional<GeneratedText>& text) {
  std::optional<TextPrinter> printer;
  StopRule stop;
  if (real) {
    ModelInputs inputs = std::move(real->inputs);  // the pixels are large: moved, not copied
    stop = inputs.stop;
    if (!a.json && real->tokenizer) {
      // Text as it is generated; the progress line goes away before the first piece.
      printer.emplace(*real->tokenizer, stdout);
      inputs.on_token = [&](int32_t id) {
        progress->stop();
        printer->push(id);
      };
    }
    report.check(session.set_inputs(std::move(inputs)));
  }
  ProgressProvider tracked(session.provider(), *progress);
  InferenceResult r = report.check(name_damage(session.run(&tracked), ckpt));
  progress.reset();  // its line is cleared before the results
  if (printer) printer->finish();
  if (real && real->tokenizer) text = report.check(generated_text(*real->tokenizer, stop, r));
  return r;
}

// The files the flags ask for: dumps, trajectory, picture.
void write_outputs(const RunArgs& a, const ModelConfig& config,
                   const std::optional<RealInputs>& real, const InferenceResult& r) {
  {
    InterruptScope interruptible;  // a signal stops the dumps between files, none half-written
    if (!a.dump_inputs.empty()) dump_inputs(a.dump_inputs, r);
    if (!a.dump_logits.empty()) dump_logits(a.dump_logits, r);
    if (const AlpamayoConfig* ar = config.alpamayo(); ar != nullptr && !a.trajectory.empty()) {
      report.check(write_trajectory(a.trajectory, r, ar->action_space.dt));
    }
    if (!a.picture.empty()) report.check(write_picture(a.picture, *real->scene, r));
  }
  report.check(check_interrupt(" after the dumps were written"));
}

// What one run gave: the report its two printers render. The backend and the session are the
// command's, alive while it prints.
struct RunReport {
  const RunArgs& a;
  const ModelConfig& config;
  const ModelWeights& weights;
  const Backend& backend;
  const Session& session;
  const StartTimes& start;
  const InferenceResult& r;
  const std::optional<GeneratedText>& text;
  MemoryLedger ledger{};
  std::optional<uint64_t> outside{};  // the driver's peak, seen from outside

  const StreamingStats& st() const { return session.streaming(); }
  static double rate(double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }
  double prefill_tps() const {
    return rate(static_cast<double>(r.prompt.size()), r.times.of(Phase::prefill));
  }
  double decode_tps() const {
    return rate(static_cast<double>(r.decode_steps), r.times.of(Phase::decode));
  }
  double load_gbps() const {
    return rate(static_cast<double>(st().resident_bytes) / 1e9, st().resident_load_seconds);
  }
};

nlohmann::json run_json(const RunReport& rep) {
  const InferenceResult& r = rep.r;
  const Session& session = rep.session;
  const StreamingStats& st = rep.st();
  const PhaseTimes& t = r.times;
  nlohmann::json j;
  j["model"] = architecture_name(rep.config.arch);
  j["backend"] = std::string(rep.backend.name());
  j["prompt_tokens"] = r.prompt.size();
  j["tokens"] = r.tokens;
  if (rep.text) {
    j["text"] = rep.text->text;
    j["stop"] = rep.text->stop;
    if (rep.config.alpamayo() != nullptr) j["reasoning"] = rep.text->reasoning;
  }
  j["logits_hash"] = hex64(r.logits_hash);
  j["prefill_logits_hash"] = hex64(r.prefill_logits_hash);
  j["weights_bytes"] = rep.weights.total_bytes();
  j["load_s"] = st.resident_load_seconds;
  j["open_s"] = session.open_seconds();
  j["plan"] = plan_summary_json(session.plan(), rep.weights, session.memory());
  j["host_path"] = session.tier().how();
  j["host_register_s"] = session.tier().register_seconds();
  j["host_rate"] = host_rate_json(session);
  if (!session.planned().device_note.empty()) j["device_note"] = session.planned().device_note;
  j["start"] = start_json(rep.start);
  j["streamed_bytes"] = st.bytes_copied;
  j["streamed_groups"] = st.group_copies;
  j["device_peak_bytes"] = {
      {"ferry_books", rep.ledger.peak},
      {"reserved", rep.ledger.reserved},
      {"outside", rep.outside ? nlohmann::json(*rep.outside) : nlohmann::json()},
      {"outside_method", rep.backend.driver_device_bytes_method()}};
  j["time_s"] = {{"vision", t.of(Phase::vision)},
                 {"prefill", t.of(Phase::prefill)},
                 {"decode", t.of(Phase::decode)},
                 {"expert", t.of(Phase::expert)},
                 {"total", t.total_seconds}};
  j["prefill_tokens_per_s"] = rep.prefill_tps();
  j["decode_tokens_per_s"] = rep.decode_tps();
  if (rep.config.alpamayo() != nullptr) {
    j["actions_hash"] = hex64(r.actions_hash);
    j["actions"] = r.actions;
    j["trajectory_xyz"] = r.trajectory_xyz;
    j["trajectory_yaw"] = r.trajectory_yaw;
  }
  return j;
}

// The lines about the model, the weights, the host path, the start, the plan and memory.
void print_run_setup(const RunReport& rep) {
  const Session& session = rep.session;
  const StreamingStats& st = rep.st();
  const MemoryLedger& ledger = rep.ledger;
  std::printf("model      %s (%s), backend %s (%s)\n", architecture_name(rep.config.arch),
              rep.a.model.c_str(), std::string(rep.backend.name()).c_str(),
              rep.backend.info().name.c_str());
  std::printf("weights    %.1f MB resident, loaded in %.3f s (%.2f GB/s); host tier: %s\n",
              static_cast<double>(st.resident_bytes) / 1e6, st.resident_load_seconds,
              rep.load_gbps(), session.tier().how().c_str());
  std::printf("host path  %s\n", host_rate_text(session).c_str());
  if (!session.planned().device_note.empty()) {
    std::printf("unified    %s\n", session.planned().device_note.c_str());
  }
  std::printf("start      %s\n", start_text(rep.start).c_str());
  print_plan(stdout, session.plan(), rep.weights, session.memory());
  if (st.group_copies > 0) {
    std::printf("streamed   %.1f MB in %lld group copies\n",
                static_cast<double>(st.bytes_copied) / 1e6,
                static_cast<long long>(st.group_copies));
  }
  std::printf("device     peak %s in ferry's books", binary_bytes(ledger.peak).c_str());
  if (ledger.reserved > 0) std::printf(" (of a %s region)", binary_bytes(ledger.reserved).c_str());
  if (rep.outside) {
    std::printf(", %s seen by the driver (%s)", binary_bytes(*rep.outside).c_str(),
                rep.backend.driver_device_bytes_method().c_str());
  }
  std::printf("\n");
}

// The lines about what the inference gave: tokens, hashes, the trajectory, files, times.
void print_run_results(const RunReport& rep) {
  const RunArgs& a = rep.a;
  const InferenceResult& r = rep.r;
  std::printf("prompt     %zu tokens (rope delta %" PRId64 ")\n", r.prompt.size(), r.rope_delta);
  if (rep.text) {
    std::printf("generated  %zu tokens, stopped at %s\n", r.tokens.size(), rep.text->stop.c_str());
  } else {
    std::printf("generated  %s\n", join(r.tokens).c_str());
  }
  std::printf("logits     last %s, prefill %s (FNV-1a 64 of bf16 logits)\n",
              hex64(r.logits_hash).c_str(), hex64(r.prefill_logits_hash).c_str());
  if (rep.config.alpamayo() != nullptr && !r.trajectory_xyz.empty()) {
    std::printf("actions    %s (FNV-1a 64 of f32), expert sees %" PRId64 " cache rows\n",
                hex64(r.actions_hash).c_str(), r.expert_offset);
    std::printf("trajectory %zu waypoints (x, y, z m) at", r.trajectory_xyz.size());
    for (size_t i : {size_t{9}, size_t{19}, size_t{39}, r.trajectory_xyz.size() - 1}) {
      if (i >= r.trajectory_xyz.size()) continue;
      const auto& p = r.trajectory_xyz[i];
      std::printf(" %zu: (%.2f, %.2f, %.2f)", i, p[0], p[1], p[2]);
    }
    std::printf("\n");
  }
  if (!a.trajectory.empty()) std::printf("wrote      %s\n", a.trajectory.c_str());
  if (!a.picture.empty()) std::printf("wrote      %s\n", a.picture.c_str());
  const PhaseTimes& t = r.times;
  std::printf(
      "time       vision %.3f s, prefill %.3f s, decode %.3f s, expert %.3f s, total %.3f s\n",
      t.of(Phase::vision), t.of(Phase::prefill), t.of(Phase::decode), t.of(Phase::expert),
      t.total_seconds);
  std::printf("rates      prefill %.1f tokens/s, decode %.1f tokens/s\n", rep.prefill_tps(),
              rep.decode_tps());
}

// The checkpoint opened, a session under the budget, one inference, its files, then the report.
void run_session(const RunArgs& a, const OpenModel& m, const Workload& w, const SessionOptions& so,
                 StartTimes& start, std::optional<RealInputs>& real) {
  std::unique_ptr<Backend> backend =
      report.check(backend_from_flag(a.backend, a.session.check_streams, start));
  PeakSampler sampler(*backend);
  std::optional<Progress> progress(std::in_place, "run", !a.quiet);
  progress->stage("loading weights");
  std::unique_ptr<Session> session =
      report.check(Session::open(*backend, m.config, m.weights, m.checkpoint, w, so));
  start.take_session(session->start_times());
  start.total_s = seconds_since_process_start();
  progress->stage("");
  std::optional<GeneratedText> text;
  const InferenceResult r = infer(a, *session, m.checkpoint, real, progress, text);
  write_outputs(a, m.config, real, r);
  RunReport rep{.a = a,
                .config = m.config,
                .weights = m.weights,
                .backend = *backend,
                .session = *session,
                .start = start,
                .r = r,
                .text = text};
  rep.ledger = backend->ledger();
  rep.outside = sampler.peak();
  if (a.json) {
    std::cout << run_json(rep).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << '\n';
    return;
  }
  print_run_setup(rep);
  print_run_results(rep);
}

void run(const RunArgs& a) {
  StartTimes start;  // process start to the first inference ready
  start.before_main_s = seconds_before_main();
  ModelDescription model = report.check(describe_model(a.model, &start));
  check_input_flags(a, model.config);
  std::optional<RealInputs> real;
  const Workload w = run_workload(a, model.config, real);
  const std::vector<Call> calls = report.check(call_sequence(model.weights, model.config, w));
  InferenceOptions opts;
  opts.keep_all_logits = !a.dump_logits.empty();
  opts.keep_inputs = !a.dump_inputs.empty();
  opts.exec.graphs = a.graphs;
  const SessionOptions so = report.check(session_options(a.session, model.weights, opts));
  if (a.dry_run) {
    dry_run(a, model, w, calls, so);
    return;
  }
  const OpenModel m = report.check(open_checkpoint(a.model, std::move(model), &start));
  run_session(a, m, w, so, start, real);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run",
      "Run one inference: on camera frames and an ego history (Alpamayo-R1), a prompt "
      "(text models), or synthetic inputs");
  cmd->add_option("--model", args->model, "Checkpoint folder (config.json + safetensors)")
      ->check(not_empty())
      ->required();
  cmd->add_option("--backend", args->backend, "cpu or cuda (default: cuda when available)")
      ->check(not_empty());
  add_workload_options(cmd, &args->workload, WorkloadDefaults::quick);
  add_uint_option(cmd, "--seed", &args->seed, "Seed for every synthetic input")->default_str("0");
  auto* greedy = cmd->add_flag("--greedy", args->greedy,
                               "Argmax decoding (the default, except for Alpamayo-R1 on real "
                               "inputs: temperature 0.6, top-p 0.98)");
  auto* temp = add_number_option(cmd, "--temperature", &args->temperature, 1e-6, 1e6,
                                 "Sampling temperature");
  auto* top_p =
      add_number_option(cmd, "--top-p", &args->top_p, 1e-6, 1.0, "Top-p (nucleus) threshold");
  greedy->excludes(temp)->excludes(top_p);
  cmd->add_flag("--json", args->json, "Print one JSON object");
  add_graphs_option(cmd, &args->graphs);
  cmd->add_flag("--dry-run", args->dry_run,
                "Print the call sequence, the plan and its memory, and exit");
  add_session_options(cmd, &args->session);
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->add_option("--dump-logits", args->dump_logits,
                  "Write [1 + decode steps, vocab] f32 logits (.npy): prefill's last position, "
                  "then each decode step")
      ->check(not_empty());
  cmd->add_option("--frames", args->real.frames,
                  "Camera frames: a folder of images taken in name order, or a frames.json "
                  "manifest (Alpamayo-R1: 16, camera-major)")
      ->check(not_empty());
  cmd->add_option("--ego-history", args->real.ego_history,
                  "Alpamayo-R1's 16 past positions in the t0 ego frame: .json (xyz, rot or yaw) "
                  "or .npy [..., 16, 3]")
      ->check(not_empty());
  cmd->add_option("--ego-rotations", args->real.ego_rotations,
                  "The 16 past rotations, .npy [..., 16, 3, 3] or .json, for a history without")
      ->check(not_empty());
  cmd->add_option("--prompt", args->real.prompt, "The user's message (text and Qwen3-VL models)");
  cmd->add_option("--prompt-file", args->real.prompt_file, "The user's message from a file")
      ->check(not_empty());
  cmd->add_option("--system", args->real.system, "A system message before the user's");
  cmd->add_option("--prompt-ids", args->real.prompt_ids,
                  "The prompt as token ids, fed as they are (no chat template, no BOS added): "
                  "1,2,3 or a .npy / .json file; generates exactly --max-tokens")
      ->check(not_empty());
  cmd->add_flag("--no-thinking", args->no_thinking,
                "Qwen3: answer without a thinking block (enable_thinking=False)");
  add_int_option(cmd, "--max-tokens", &args->max_tokens, 1, kMaxSequence,
                 "Most tokens generated on real inputs (Alpamayo-R1: 256, text: 512); "
                 "generation stops earlier at its stop token");
  cmd->add_option("--trajectory", args->trajectory,
                  "Write the 64 predicted waypoints (.json or .csv)")
      ->check(not_empty());
  cmd->add_option("--picture", args->picture,
                  "Draw the trajectory over the front camera frame and in a bird's-eye view "
                  "(.png or .svg)")
      ->check(not_empty());
  cmd->add_option("--dump-inputs", args->dump_inputs,
                  "Write input_ids, position_ids, generated_ids (and pixel_values, "
                  "image_grid_thw) as .npy into this folder")
      ->check(not_empty());
  cmd->callback([args] { run(*args); });
}

}  // namespace ferry::cli
