// What the `ferry` subcommands share: how an error ends a command, which backend a --backend
// flag names, and opening a model folder (config, weight table, checkpoint, binding).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "cli/flags.h"
#include "core/status.h"
#include "exec/start_times.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "model/weights.h"

namespace ferry::cli {

// Errors end the command: "ferry NAME: message" on stderr, exit status 2 (128 + the signal when
// SIGINT/SIGTERM stopped it, core/interrupt.h).
class Reporter {
 public:
  explicit Reporter(std::string command) : command_(std::move(command)) {}

  [[noreturn]] void fail(const std::string& message) const;
  template <class T>
  T check(Result<T> r) const {
    if (!r.ok()) fail(r.error().to_string());
    return std::move(r).value();
  }
  void check(const Status& s) const {
    if (!s.ok()) fail(s.error().to_string());
  }

 private:
  std::string command_;
};

// `flag` empty: CUDA when it is compiled in and a device is visible, else the CPU.
// `check_streams`: the CPU backend with random delays on every stream (--check-streams).
Result<std::unique_ptr<Backend>> backend_from_flag(const std::string& flag,
                                                   bool check_streams = false);

// --graphs on|off (default on): record replayable calls once and replay them.
void add_graphs_option(CLI::App* cmd, bool* graphs);

struct OpenModel {
  ModelConfig config;
  ModelWeights weights;
  Checkpoint checkpoint;
};
// load_config, describe_weights, Checkpoint::open, then bind_checkpoint. `dir` may also be the
// checkpoint's .safetensors or index file, as `inspect` takes it. `times`, when given, gets
// config_s (config and weight table) and checkpoint_s (mapping, validation, binding).
Result<OpenModel> open_model(const std::string& dir, StartTimes* times = nullptr);
// backend_from_flag, timed into `times` (backend_s, backend_parts).
Result<std::unique_ptr<Backend>> backend_from_flag(const std::string& flag, bool check_streams,
                                                   StartTimes& times);

// A `damaged` error of a run (non-finite activations, core/finite.h) completed with what a scan
// of the checkpoint finds: the tensors holding NaN or Inf, or that every weight is finite. Any
// other error, or a value, passes through.
Error name_damage(const Error& error, const Checkpoint& checkpoint);
template <class T>
Result<T> name_damage(Result<T> result, const Checkpoint& checkpoint) {
  if (result.ok() || result.error().code != ErrorCode::damaged) return result;
  return name_damage(result.error(), checkpoint);
}

}  // namespace ferry::cli
