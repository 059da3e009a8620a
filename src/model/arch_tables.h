// Internal to model/weights.cpp and model/arch_*.cpp: building weight groups from the
// per-architecture name tables.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace ferry::arch {

// Collects a group's tensors in layout order; finish() assigns aligned offsets, checking every
// product and sum for overflow (config sizes are bounded, but the check is cheap).
class GroupBuilder {
 public:
  GroupBuilder(std::string name, GroupKind kind, int layer = -1, LayerPart part = LayerPart::whole);
  void add(std::string local_name, std::string checkpoint_name, std::vector<int64_t> shape);
  // Rows [row0, row0 + rows) of a checkpoint tensor of `shape` (an LM head chunk).
  void add_rows(std::string local_name, std::string checkpoint_name, std::vector<int64_t> shape,
                int64_t row0, int64_t rows);
  Result<WeightGroup> finish(DType dtype) &&;

 private:
  WeightGroup group_;
};

// The dtype of a config's "torch_dtype"/"dtype" string.
Result<DType> weight_dtype(const std::string& torch_dtype);

// One Qwen3/Llama decoder layer (text model or action expert), the table of arch_qwen3.cpp, as
// its three part groups (LayerPart) "<layer_name>.attn", ".gate_up", ".down", appended to `w`.
// `prefix` is the checkpoint prefix of the layer ("model.layers.3.").
Status append_decoder_layer(ModelWeights& w, const TextConfig& t, const std::string& layer_name,
                            GroupKind kind, int layer, const std::string& prefix, DType dtype);

// "text.embed", "text.layers.N.<part>" (append_decoder_layer), "text.head.K" of a decoder whose
// module lives at `model_prefix`
// ("model." or "model.language_model."), with the head at `lm_head_name`. The head is split
// along its rows into chunks no larger than a layer's largest part (`lm_head_chunks`), so the
// largest group a slot must hold is a layer part, whatever the vocabulary.
Status append_text_model(ModelWeights& w, const TextConfig& t, const std::string& model_prefix,
                         const std::string& lm_head_name);

// "vision.patch", "vision.blocks.N" with "vision.deepstack.K" after block
// deepstack_visual_indexes[K], then "vision.merger"; the tower lives at `prefix`
// ("model.visual."). The table of arch_qwen3_vl.cpp.
Status append_vision_tower(ModelWeights& w, const VisionConfig& v, const std::string& prefix,
                           DType dtype);

Result<ModelWeights> describe_qwen3(const ModelConfig& c);  // qwen3 and llama
Result<ModelWeights> describe_qwen3_vl(const ModelConfig& c);
Result<ModelWeights> describe_alpamayo(const ModelConfig& c);

}  // namespace ferry::arch
