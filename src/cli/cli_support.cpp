#include "cli/cli_support.h"

#include <iostream>

#include "backend/cpu/cpu_backend.h"
#include "format/config_json.h"

namespace ferry::cli {

void Reporter::fail(const std::string& message) const {
  std::cerr << "ferry " << command_ << ": " << message << '\n';
  throw CLI::RuntimeError(2);
}

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

Result<OpenModel> open_model(const std::string& dir) {
  FERRY_ASSIGN_OR_RETURN(ModelConfig config, load_config(dir));
  FERRY_ASSIGN_OR_RETURN(ModelWeights weights, describe_weights(config));
  FERRY_RETURN_IF_ERROR(check_runnable_dtypes(weights));
  FERRY_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(dir));
  FERRY_RETURN_IF_ERROR(bind_checkpoint(weights, checkpoint));
  return OpenModel{std::move(config), std::move(weights), std::move(checkpoint)};
}

void add_graphs_option(CLI::App* cmd, bool* graphs) {
  cmd->add_option_function<std::string>(
         "--graphs",
         [graphs](const std::string& v) {
           if (v != "on" && v != "off") throw CLI::ValidationError("--graphs", "on or off");
           *graphs = v == "on";
         },
         "Record decode and flow-step layers once and replay them: on (default) or off; the "
         "output is the same either way")
      ->type_name("on|off");
}

}  // namespace ferry::cli
