// What the `ferry` subcommands share: how an error ends a command, which backend a --backend
// flag names, and opening a model folder (config, weight table, checkpoint, binding).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "core/status.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "model/weights.h"

namespace ferry::cli {

// Errors end the command: "ferry NAME: message" on stderr, exit status 2.
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
// load_config, describe_weights, Checkpoint::open, then bind_checkpoint.
Result<OpenModel> open_model(const std::string& dir);

}  // namespace ferry::cli
