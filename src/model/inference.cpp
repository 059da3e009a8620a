#include "model/inference.h"

#include "model/alpamayo_runner.h"
#include "model/qwen3_runner.h"

namespace ferry {

Result<InferenceResult> run_inference(Backend& backend, const ModelConfig& config,
                                      const ModelWeights& weights, GroupProvider& provider,
                                      const Workload& workload, const InferenceOptions& options) {
  FERRY_RETURN_IF_ERROR(check_runnable_dtypes(weights));
  switch (config.arch) {
    case Architecture::qwen3:
    case Architecture::llama:
      return run_qwen3(backend, config, weights, provider, workload, options);
    case Architecture::qwen3_vl:
    case Architecture::alpamayo_r1:
      return run_vision_language(backend, config, weights, provider, workload, options);
  }
  return make_error(ErrorCode::unsupported, std::string("run: ") + architecture_name(config.arch) +
                                                " is not supported yet");
}

}  // namespace ferry
