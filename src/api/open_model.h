// Opening a model folder (config, weight table, checkpoint, binding) and the backend a
// --backend flag names: the one sequence every command, the Python module and LoadedModel use.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/status.h"
#include "exec/start_times.h"
#include "format/safetensors.h"
#include "model/config.h"
#include "model/weights.h"

namespace ferry::api {

// `flag` empty: CUDA when it is compiled in and a device is visible, else the CPU.
// `check_streams`: the CPU backend with random delays on every stream (--check-streams).
Result<std::unique_ptr<Backend>> backend_from_flag(const std::string& flag,
                                                   bool check_streams = false);

// A model folder's description: its config and weight table, no checkpoint opened yet.
struct ModelDescription {
  ModelConfig config;
  ModelWeights weights;
};
struct OpenModel {
  ModelConfig config;
  ModelWeights weights;
  Checkpoint checkpoint;
};
// The two halves of open_model, for a command that checks its flags against the config before
// it maps the checkpoint, or maps none (`run --dry-run`). describe_model: load_config, then
// describe_weights; `times` gets config_s. open_checkpoint: Checkpoint::open, the dtype checks,
// then bind_checkpoint; `times` gets checkpoint_s.
Result<ModelDescription> describe_model(const std::string& dir, StartTimes* times = nullptr);
Result<OpenModel> open_checkpoint(const std::string& dir, ModelDescription model,
                                  StartTimes* times = nullptr);
// describe_model, then open_checkpoint. `dir` may also be the checkpoint's .safetensors or index
// file, as `inspect` takes it. `times`, when given, gets config_s (config and weight table) and
// checkpoint_s (mapping, validation, binding).
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

}  // namespace ferry::api
