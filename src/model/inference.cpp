#include "model/inference.h"

#include "model/alpamayo_runner.h"
#include "model/qwen3_runner.h"

namespace ferry {

Result<std::unique_ptr<ModelRunner>> create_runner(Backend& backend, const ModelConfig& config,
                                                   const ModelWeights& weights,
                                                   const Workload& workload,
                                                   const InferenceOptions& options) {
  FERRY_RETURN_IF_ERROR(check_runnable_dtypes(weights));
  switch (config.arch) {
    case Architecture::qwen3:
    case Architecture::llama:
      return create_qwen3_runner(backend, config, weights, workload, options);
    case Architecture::qwen3_vl:
    case Architecture::alpamayo_r1:
      return create_vision_language_runner(backend, config, weights, workload, options);
  }
  return make_error(ErrorCode::unsupported, std::string("run: ") + architecture_name(config.arch) +
                                                " is not supported yet");
}

}  // namespace ferry
