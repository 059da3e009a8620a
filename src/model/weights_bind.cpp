// bind_checkpoint: kept apart from weights.cpp so code that only describes weights does not need
// the safetensors reader linked in.
#include "format/safetensors.h"
#include "model/weights.h"

namespace ferry {

Status bind_checkpoint(const ModelWeights& weights, const Checkpoint& checkpoint) {
  std::vector<TensorMeta> tensors;
  tensors.reserve(checkpoint.entries().size());
  for (const auto& e : checkpoint.entries()) {
    tensors.push_back(TensorMeta{e.info->name, e.info->dtype, e.info->shape});
  }
  return bind_tensors(weights, tensors, checkpoint.dir());
}

Status check_checkpoint_dtypes(const ModelConfig& config, const ModelWeights& weights,
                               const Checkpoint& checkpoint) {
  for (const WeightGroup& g : weights.groups) {
    for (const WeightSpec& s : g.tensors) {
      const Checkpoint::Entry* e = checkpoint.find(s.checkpoint_name);
      if (e == nullptr || e->info->dtype == s.dtype) continue;
      return make_error(ErrorCode::format, checkpoint.dir() + ": tensor " + s.checkpoint_name +
                                               " is " + std::string(dtype_name(e->info->dtype)) +
                                               " in the checkpoint, but config.json's dtype ('" +
                                               config.text().dtype + "') makes it " +
                                               std::string(dtype_name(s.dtype)) +
                                               ": the config and the weights disagree");
    }
  }
  return {};
}

}  // namespace ferry
