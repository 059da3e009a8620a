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

}  // namespace ferry
