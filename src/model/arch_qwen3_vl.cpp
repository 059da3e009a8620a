// Qwen3-VL name table (transformers Qwen3VLForConditionalGeneration: Qwen3VLVisionModel under
// "model.visual.", Qwen3VLTextModel under "model.language_model.", "lm_head.weight").
#include <string>

#include "model/arch_tables.h"

namespace ferry::arch {
namespace {

// A Qwen3VLVisionPatchMerger: the final merger normalizes each patch (width hidden) before the
// 2x2 shuffle; the deepstack mergers normalize after it (width hidden * merge^2).
Result<WeightGroup> merger(const VisionConfig& v, const std::string& group_name, int index,
                           const std::string& prefix, bool postshuffle_norm, DType dtype) {
  const int64_t merged = v.hidden_size * v.spatial_merge_size * v.spatial_merge_size;
  const int64_t norm = postshuffle_norm ? merged : v.hidden_size;
  GroupBuilder g(group_name, GroupKind::vision_merger, index);
  g.add("norm.weight", prefix + "norm.weight", {norm});
  g.add("norm.bias", prefix + "norm.bias", {norm});
  g.add("fc1.weight", prefix + "linear_fc1.weight", {merged, merged});
  g.add("fc1.bias", prefix + "linear_fc1.bias", {merged});
  g.add("fc2.weight", prefix + "linear_fc2.weight", {v.out_hidden_size, merged});
  g.add("fc2.bias", prefix + "linear_fc2.bias", {v.out_hidden_size});
  return std::move(g).finish(dtype);
}

}  // namespace

Status append_vision_tower(ModelWeights& w, const VisionConfig& v, const std::string& prefix,
                           DType dtype) {
  const int64_t h = v.hidden_size;
  GroupBuilder patch("vision.patch", GroupKind::vision_patch);
  // Conv3d weight [hidden, C, T, P, P]; viewed as [hidden, C·T·P·P] by the model.
  patch.add("proj.weight", prefix + "patch_embed.proj.weight",
            {h, v.in_channels, v.temporal_patch_size, v.patch_size, v.patch_size});
  patch.add("proj.bias", prefix + "patch_embed.proj.bias", {h});
  patch.add("pos_embed", prefix + "pos_embed.weight", {v.num_position_embeddings, h});
  FERRY_ASSIGN_OR_RETURN(WeightGroup pg, std::move(patch).finish(dtype));
  w.groups.push_back(std::move(pg));

  for (int i = 0; i < v.depth; ++i) {
    const std::string p = prefix + "blocks." + std::to_string(i) + ".";
    GroupBuilder b("vision.blocks." + std::to_string(i), GroupKind::vision_block, i);
    b.add("norm1.weight", p + "norm1.weight", {h});
    b.add("norm1.bias", p + "norm1.bias", {h});
    b.add("qkv.weight", p + "attn.qkv.weight", {3 * h, h});
    b.add("qkv.bias", p + "attn.qkv.bias", {3 * h});
    b.add("proj.weight", p + "attn.proj.weight", {h, h});
    b.add("proj.bias", p + "attn.proj.bias", {h});
    b.add("norm2.weight", p + "norm2.weight", {h});
    b.add("norm2.bias", p + "norm2.bias", {h});
    b.add("fc1.weight", p + "mlp.linear_fc1.weight", {v.intermediate_size, h});
    b.add("fc1.bias", p + "mlp.linear_fc1.bias", {v.intermediate_size});
    b.add("fc2.weight", p + "mlp.linear_fc2.weight", {h, v.intermediate_size});
    b.add("fc2.bias", p + "mlp.linear_fc2.bias", {h});
    FERRY_ASSIGN_OR_RETURN(WeightGroup bg, std::move(b).finish(dtype));
    w.groups.push_back(std::move(bg));
    // A deepstack merger reads the output of its block, so it runs right after it.
    for (size_t k = 0; k < v.deepstack_visual_indexes.size(); ++k) {
      if (v.deepstack_visual_indexes[k] != i) continue;
      const std::string kk = std::to_string(k);
      FERRY_ASSIGN_OR_RETURN(WeightGroup dg,
                             merger(v, "vision.deepstack." + kk, static_cast<int>(k),
                                    prefix + "deepstack_merger_list." + kk + ".", true, dtype));
      w.groups.push_back(std::move(dg));
    }
  }
  FERRY_ASSIGN_OR_RETURN(WeightGroup mg,
                         merger(v, "vision.merger", -1, prefix + "merger.", false, dtype));
  w.groups.push_back(std::move(mg));
  return Status();
}

Result<ModelWeights> describe_qwen3_vl(const ModelConfig& c) {
  const Qwen3VLConfig* vlm = c.vlm();
  if (vlm == nullptr)
    return make_error(ErrorCode::internal, "describe_qwen3_vl: not a Qwen3-VL config");
  FERRY_ASSIGN_OR_RETURN(DType dtype, weight_dtype(vlm->text.dtype));
  ModelWeights w;
  FERRY_RETURN_IF_ERROR(append_vision_tower(w, vlm->vision, "model.visual.", dtype));
  FERRY_RETURN_IF_ERROR(append_text_model(w, vlm->text, "model.language_model.", "lm_head.weight"));
  return w;
}

}  // namespace ferry::arch
