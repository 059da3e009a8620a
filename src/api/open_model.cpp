#include "api/open_model.h"

#include "backend/cpu/cpu_backend.h"
#include "format/nonfinite_scan.h"
#include "model/compressed_checkpoint.h"
#include "model/config_json.h"

namespace ferry::api {

Result<std::unique_ptr<Backend>> backend_from_flag(const std::string& flag, bool check_streams) {
  BackendKind kind = default_backend_kind();
  if (!flag.empty()) {
    auto k = parse_backend_kind(flag);
    if (!k)
      return make_error(ErrorCode::invalid_argument,
                        "--backend: expected cpu or cuda, got " + flag);
    kind = *k;
  }
  if (check_streams) {
    if (kind != BackendKind::cpu) {
      return make_error(ErrorCode::invalid_argument,
                        "--check-streams runs on the CPU backend (--backend cpu)");
    }
    CpuBackendOptions o;
    o.max_delay_us = 200;
    return std::unique_ptr<Backend>(create_cpu_backend(o));
  }
  return create_backend(kind);
}

Result<std::unique_ptr<Backend>> backend_from_flag(const std::string& flag, bool check_streams,
                                                   StartTimes& times) {
  const double t0 = seconds_since_process_start();
  auto backend = backend_from_flag(flag, check_streams);
  times.backend_s = seconds_since_process_start() - t0;
  if (backend.ok()) times.backend_parts = (*backend)->creation_seconds();
  return backend;
}

Result<ModelDescription> describe_model(const std::string& dir, StartTimes* times) {
  const double t0 = seconds_since_process_start();
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(dir));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  if (times != nullptr) times->config_s = seconds_since_process_start() - t0;
  return ModelDescription{std::move(config), std::move(weights)};
}

Result<OpenModel> open_checkpoint(const std::string& dir, ModelDescription model,
                                  StartTimes* times) {
  const double t0 = seconds_since_process_start();
  FERRY_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(dir));
  if (is_compressed_checkpoint(checkpoint)) {
    // Until the executor reads compressed groups (host/compressed_model.h opens them).
    return make_error(ErrorCode::unsupported,
                      dir + " is a compressed checkpoint (ferry pack --compress), which this " +
                          "command does not run yet: `ferry pack " + dir +
                          " OUT --decompress` gives back the raw one");
  }
  FERRY_RETURN_IF_ERROR(check_checkpoint_dtypes(model.config, model.weights, checkpoint));
  FERRY_RETURN_IF_ERROR(check_runnable_dtypes(model.weights));
  FERRY_RETURN_IF_ERROR(bind_checkpoint(model.weights, checkpoint));
  if (times != nullptr) times->checkpoint_s = seconds_since_process_start() - t0;
  return OpenModel{std::move(model.config), std::move(model.weights), std::move(checkpoint)};
}

Result<OpenModel> open_model(const std::string& dir, StartTimes* times) {
  FERRY_ASSIGN_OR_RETURN(ModelDescription model, describe_model(dir, times));
  return open_checkpoint(dir, std::move(model), times);
}

Error name_damage(const Error& error, const Checkpoint& checkpoint) {
  Error e = error;
  auto scan = scan_nonfinite(checkpoint);
  if (!scan.ok()) {
    e.message += " (scanning the checkpoint failed: " + scan.error().message + ")";
    return e;
  }
  // In place of the hint to run `ferry verify`: what it finds.
  const std::string_view hint = nonfinite_hint();
  if (e.message.size() >= hint.size() &&
      e.message.compare(e.message.size() - hint.size(), hint.size(), hint) == 0) {
    e.message.resize(e.message.size() - hint.size());
  }
  if (scan->damaged.empty()) {
    e.message += ", yet every weight in " + checkpoint.dir() +
                 " is finite: the values overflowed, or this is a bug in ferry";
    return e;
  }
  const size_t n = scan->damaged.size();
  e.message += ": " + std::to_string(n) + (n == 1 ? " tensor" : " tensors") + " of " +
               checkpoint.dir() + " hold NaN or Inf, " + describe_damage(scan->damaged.front()) +
               (n > 1 ? " (`ferry verify` lists them all)" : "");
  return e;
}

}  // namespace ferry::api
