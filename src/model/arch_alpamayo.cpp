// Alpamayo-R1 name table (NVlabs/alpamayo AlpamayoR1: the Qwen3-VL model under "vlm.", the
// expert Qwen3VLTextModel under "expert." without embed_tokens, "action_in_proj." =
// PerWaypointActionInProjV2, "action_out_proj." = Linear(expert hidden, 2)).
#include <string>

#include "model/arch_tables.h"

namespace ferry::arch {
namespace {

// PerWaypointActionInProjV2: Fourier features of each action dim and of t (num_fourier_feats
// each) -> MLPEncoder trunk [Linear, SiLU, (RMSNorm, Linear, SiLU) x (L-1), RMSNorm, Linear]
// -> LayerNorm. Trunk indices: Linear 0, then RMSNorm 2+3i and Linear 3+3i for i < L.
Result<WeightGroup> action_in_proj(const AlpamayoConfig& a, DType dtype) {
  const ActionInProjConfig& p = a.action_in_proj;
  const int64_t in = (a.action_space.action_dims + 1) * p.num_fourier_feats;
  const int64_t hid = p.hidden_size;
  const std::string pre = "action_in_proj.encoder.trunk.";
  GroupBuilder g("expert.in", GroupKind::expert_in);
  g.add("trunk.0.weight", pre + "0.weight", {hid, in});
  g.add("trunk.0.bias", pre + "0.bias", {hid});
  for (int64_t i = 0; i < p.num_enc_layers; ++i) {
    const std::string norm = std::to_string(2 + 3 * i);
    const std::string lin = std::to_string(3 + 3 * i);
    const int64_t out = i + 1 < p.num_enc_layers ? hid : a.expert.hidden_size;
    g.add("trunk." + norm + ".weight", pre + norm + ".weight", {hid});
    g.add("trunk." + lin + ".weight", pre + lin + ".weight", {out, hid});
    g.add("trunk." + lin + ".bias", pre + lin + ".bias", {out});
  }
  g.add("norm.weight", "action_in_proj.norm.weight", {a.expert.hidden_size});
  g.add("norm.bias", "action_in_proj.norm.bias", {a.expert.hidden_size});
  return std::move(g).finish(dtype);
}

}  // namespace

Result<ModelWeights> describe_alpamayo(const ModelConfig& c) {
  const AlpamayoConfig* a = c.alpamayo();
  if (a == nullptr)
    return make_error(ErrorCode::internal, "describe_alpamayo: not an Alpamayo config");
  FERRY_ASSIGN_OR_RETURN(DType dtype, weight_dtype(a->vlm.text.dtype));
  FERRY_ASSIGN_OR_RETURN(DType expert_dtype, weight_dtype(a->expert.dtype));
  ModelWeights w;
  FERRY_RETURN_IF_ERROR(append_vision_tower(w, a->vlm.vision, "vlm.model.visual.", dtype));
  FERRY_RETURN_IF_ERROR(
      append_text_model(w, a->vlm.text, "vlm.model.language_model.", "vlm.lm_head.weight"));

  // keep_same_dtype: action_in_proj / action_out_proj take the expert's dtype.
  FERRY_ASSIGN_OR_RETURN(WeightGroup in, action_in_proj(*a, expert_dtype));
  w.groups.push_back(std::move(in));
  for (int i = 0; i < a->expert.num_layers; ++i) {
    const std::string n = std::to_string(i);
    FERRY_RETURN_IF_ERROR(append_decoder_layer(w, a->expert, "expert.layers." + n,
                                               GroupKind::expert_layer, i,
                                               "expert.layers." + n + ".", expert_dtype));
  }
  GroupBuilder out("expert.out", GroupKind::expert_out);
  out.add("norm", "expert.norm.weight", {a->expert.hidden_size});
  out.add("action_out_proj.weight", "action_out_proj.weight",
          {a->action_space.action_dims, a->expert.hidden_size});
  out.add("action_out_proj.bias", "action_out_proj.bias", {a->action_space.action_dims});
  FERRY_ASSIGN_OR_RETURN(WeightGroup og, std::move(out).finish(expert_dtype));
  w.groups.push_back(std::move(og));

  // Persistent buffers of the Python modules that the released safetensors omit and ferry
  // recomputes from the config; tolerated if a checkpoint does carry them.
  w.ignored = {"action_in_proj.sinus.0.freqs",
               "action_in_proj.sinus.1.freqs",
               "action_in_proj.timestep_fourier_encoder.freqs",
               "action_space.accel_mean",
               "action_space.accel_std",
               "action_space.curvature_mean",
               "action_space.curvature_std"};
  return w;
}

}  // namespace ferry::arch
