// ModelConfig -> config.json, and the size checks every config passes.
//
// The written fields mirror the public configs: Qwen/Qwen3-8B (transformers 4.51),
// Qwen/Qwen3-VL-8B-Instruct (transformers 4.57: rope_scaling + rope_theta inside text_config),
// meta-llama/Llama-2-7b-hf, and nvidia/Alpamayo-R1-10B (flat head keys, the VLM by name). For
// Alpamayo ferry also embeds the VLM as "vlm_config" so a checkpoint folder is self-contained.
#include <cmath>
#include <string>

#include "model/config_json.h"
#include "model/presets.h"

#include <nlohmann/json.hpp>

namespace ferry {
namespace {

using json = nlohmann::json;

Error bad(std::string_view label, const std::string& field, const std::string& msg) {
  return make_error(ErrorCode::format, std::string(label) + ": " + field + ": " + msg);
}

Status check_dim(std::string_view label, const std::string& field, int64_t v, int64_t max) {
  if (v < 1) return bad(label, field, "expected a positive integer, got " + std::to_string(v));
  if (v > max) {
    return bad(label, field,
               "expected at most " + std::to_string(max) + ", got " + std::to_string(v));
  }
  return Status();
}

// `p` prefixes field names: "", "text_config.", "expert_cfg.".
Status validate_text(const TextConfig& t, std::string_view label, const std::string& p,
                     bool needs_vocab) {
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "hidden_size", t.hidden_size, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "num_hidden_layers", t.num_layers, kMaxConfigLayers));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "num_attention_heads", t.num_heads, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "num_key_value_heads", t.num_kv_heads, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "head_dim", t.head_dim, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(
      check_dim(label, p + "intermediate_size", t.intermediate_size, kMaxConfigDim));
  if (needs_vocab) {
    FERRY_RETURN_IF_ERROR(check_dim(label, p + "vocab_size", t.vocab_size, kMaxConfigDim));
  }
  if (t.num_heads % t.num_kv_heads != 0) {
    return bad(label, p + "num_key_value_heads",
               std::to_string(t.num_kv_heads) + " does not divide num_attention_heads (" +
                   std::to_string(t.num_heads) + ")");
  }
  if (t.head_dim % 2 != 0) {
    return bad(label, p + "head_dim",
               "expected an even size (RoPE rotates halves), got " + std::to_string(t.head_dim));
  }
  if (int64_t{t.num_heads} * t.head_dim > kMaxConfigDim) {
    return bad(label, p + "num_attention_heads",
               "num_attention_heads * head_dim exceeds " + std::to_string(kMaxConfigDim));
  }
  if (!(t.rms_norm_eps > 0) || !std::isfinite(t.rms_norm_eps)) {
    return bad(label, p + "rms_norm_eps", "expected a positive number");
  }
  if (!(t.rope_theta > 0) || !std::isfinite(t.rope_theta)) {
    return bad(label, p + "rope_theta", "expected a positive number");
  }
  if (t.llama3_rope) {
    const Llama3RopeScaling& s = *t.llama3_rope;
    if (!t.mrope_section.empty()) {
      return bad(label, p + "rope_scaling", "llama3 scaling and mrope_section together");
    }
    if (!(s.factor > 0) || !std::isfinite(s.factor) || !(s.low_freq_factor > 0) ||
        !(s.high_freq_factor > s.low_freq_factor) || !std::isfinite(s.high_freq_factor)) {
      return bad(label, p + "rope_scaling",
                 "llama3 needs factor > 0 and 0 < low_freq_factor < high_freq_factor");
    }
    if (s.original_max_position_embeddings < 1) {
      return bad(label, p + "rope_scaling.original_max_position_embeddings", "must be >= 1");
    }
    if (t.head_dim > 512) {
      return bad(label, p + "head_dim", "at most 512 with llama3 RoPE scaling");
    }
  }
  if (!t.mrope_section.empty()) {
    int64_t sum = 0;
    for (int s : t.mrope_section) {
      if (s < 1) return bad(label, p + "rope_scaling.mrope_section", "entries must be positive");
      sum += s;
    }
    if (t.mrope_section.size() != 3 || sum != t.head_dim / 2) {
      return bad(label, p + "rope_scaling.mrope_section",
                 "sums to " + std::to_string(sum) +
                     ", expected head_dim/2 = " + std::to_string(t.head_dim / 2));
    }
  }
  return Status();
}

Status validate_vision(const VisionConfig& v, const TextConfig& text, std::string_view label,
                       const std::string& p) {
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "depth", v.depth, kMaxConfigLayers));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "hidden_size", v.hidden_size, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "num_heads", v.num_heads, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(
      check_dim(label, p + "intermediate_size", v.intermediate_size, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "patch_size", v.patch_size, 1024));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "temporal_patch_size", v.temporal_patch_size, 64));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "spatial_merge_size", v.spatial_merge_size, 64));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "in_channels", v.in_channels, 64));
  FERRY_RETURN_IF_ERROR(check_dim(label, p + "out_hidden_size", v.out_hidden_size, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(
      check_dim(label, p + "num_position_embeddings", v.num_position_embeddings, kMaxConfigDim));
  if (v.hidden_size % v.num_heads != 0 || (v.hidden_size / v.num_heads) % 4 != 0) {
    return bad(label, p + "num_heads",
               "hidden_size / num_heads must be a whole multiple of 4 (2-D rotary), got " +
                   std::to_string(v.hidden_size) + " / " + std::to_string(v.num_heads));
  }
  auto side =
      static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(v.num_position_embeddings))));
  if (side * side != v.num_position_embeddings) {
    return bad(label, p + "num_position_embeddings",
               "expected a square (a side x side table), got " +
                   std::to_string(v.num_position_embeddings));
  }
  if (v.patch_values() * v.hidden_size > kMaxConfigDim * 64) {
    return bad(label, p + "patch_size", "patch embedding is larger than ferry accepts");
  }
  for (size_t i = 0; i < v.deepstack_visual_indexes.size(); ++i) {
    int64_t d = v.deepstack_visual_indexes[i];
    std::string f = p + "deepstack_visual_indexes[" + std::to_string(i) + "]";
    if (d < 0 || d >= v.depth) {
      return bad(
          label, f,
          std::to_string(d) + " is not a block index (depth " + std::to_string(v.depth) + ")");
    }
    if (i > 0 && d <= v.deepstack_visual_indexes[i - 1]) {
      return bad(label, f, "indexes must be strictly increasing");
    }
  }
  if (v.deepstack_visual_indexes.size() > static_cast<size_t>(text.num_layers)) {
    return bad(label, p + "deepstack_visual_indexes",
               "more deepstack features than text layers to add them to");
  }
  if (v.out_hidden_size != text.hidden_size) {
    return bad(label, p + "out_hidden_size",
               std::to_string(v.out_hidden_size) + " differs from text_config.hidden_size (" +
                   std::to_string(text.hidden_size) + ")");
  }
  return Status();
}

Status validate_vlm(const Qwen3VLConfig& c, std::string_view label, const std::string& p) {
  FERRY_RETURN_IF_ERROR(validate_text(c.text, label, p + "text_config.", true));
  if (c.text.mrope_section.empty()) {
    return bad(label, p + "text_config.rope_scaling.mrope_section", "missing");
  }
  FERRY_RETURN_IF_ERROR(validate_vision(c.vision, c.text, label, p + "vision_config."));
  for (auto [name, id] : {std::pair{"image_token_id", c.image_token_id},
                          std::pair{"vision_start_token_id", c.vision_start_token_id},
                          std::pair{"vision_end_token_id", c.vision_end_token_id}}) {
    if (id < 0 || id >= c.text.vocab_size) {
      return bad(label, p + name,
                 std::to_string(id) + " is outside the vocabulary (" +
                     std::to_string(c.text.vocab_size) + ")");
    }
  }
  if (c.image_token_id == c.vision_start_token_id || c.image_token_id == c.vision_end_token_id ||
      c.vision_start_token_id == c.vision_end_token_id) {
    return bad(label, p + "image_token_id",
               "image, vision-start and vision-end ids must be three different ids");
  }
  return Status();
}

Status validate_alpamayo(const AlpamayoConfig& a, std::string_view label) {
  FERRY_RETURN_IF_ERROR(validate_vlm(a.vlm, label, "vlm_config."));
  FERRY_RETURN_IF_ERROR(validate_text(a.expert, label, "expert_cfg.", false));
  const TextConfig& t = a.vlm.text;
  // The expert's layer i attends the text model's layer-i cache (spec §6.3), so the cache
  // geometry must be the same.
  if (a.expert.num_layers != t.num_layers) {
    return bad(label, "expert_cfg.num_hidden_layers",
               std::to_string(a.expert.num_layers) + " differs from the text model's " +
                   std::to_string(t.num_layers) +
                   " (each expert layer reads one text layer's cache)");
  }
  if (a.expert.num_kv_heads != t.num_kv_heads || a.expert.head_dim != t.head_dim) {
    return bad(label, "expert_cfg.num_key_value_heads",
               "the expert's kv heads x head_dim (" + std::to_string(a.expert.num_kv_heads) +
                   " x " + std::to_string(a.expert.head_dim) + ") must equal the text model's (" +
                   std::to_string(t.num_kv_heads) + " x " + std::to_string(t.head_dim) + ")");
  }
  if (a.expert.vocab_size != 0)
    return bad(label, "expert_cfg.vocab_size", "the expert has no vocabulary");
  FERRY_RETURN_IF_ERROR(check_dim(label, "action_in_proj_cfg.hidden_size",
                                  a.action_in_proj.hidden_size, kMaxConfigDim));
  FERRY_RETURN_IF_ERROR(
      check_dim(label, "action_in_proj_cfg.num_enc_layers", a.action_in_proj.num_enc_layers, 1024));
  FERRY_RETURN_IF_ERROR(check_dim(label, "action_in_proj_cfg.num_fourier_feats",
                                  a.action_in_proj.num_fourier_feats, 4096));
  if (a.action_in_proj.num_fourier_feats % 2 != 0) {
    return bad(label, "action_in_proj_cfg.num_fourier_feats", "expected an even count");
  }
  FERRY_RETURN_IF_ERROR(
      check_dim(label, "action_space_cfg.n_waypoints", a.action_space.num_waypoints, 1 << 16));
  if (a.action_space.action_dims != 2) {
    return bad(label, "action_space_cfg", "ferry runs the 2-D (acceleration, curvature) space");
  }
  FERRY_RETURN_IF_ERROR(check_dim(label, "diffusion_cfg.num_inference_steps",
                                  a.diffusion.num_inference_steps, 100000));
  if (a.traj_future_start_token_id < 0 || a.traj_future_start_token_id >= t.vocab_size) {
    return bad(label, "traj_token_ids.future_start", "outside the vocabulary");
  }
  if (a.traj_token_start_idx < 0 || a.traj_vocab_size < 0 ||
      a.traj_token_start_idx + a.traj_vocab_size > t.vocab_size) {
    return bad(label, "traj_vocab_size", "the trajectory ids do not fit the vocabulary");
  }
  // Sampling masks [traj_token_start_idx, + traj_vocab_size) at every step (spec §5.1): the
  // mask must leave tokens to sample, and <|traj_future_start|> must not be one it hides.
  if (a.traj_vocab_size >= t.vocab_size) {
    return bad(label, "traj_vocab_size", "masks the whole vocabulary");
  }
  if (a.traj_future_start_token_id >= a.traj_token_start_idx &&
      a.traj_future_start_token_id < a.traj_token_start_idx + a.traj_vocab_size) {
    return bad(
        label, "traj_token_ids.future_start",
        std::to_string(a.traj_future_start_token_id) + " lies inside the masked trajectory ids");
  }
  // The history tokenizer is fixed (spec §4.5: 16 points x (x, y, z)).
  if (a.tokens_per_history_traj != 48) {
    return bad(label, "tokens_per_history_traj",
               "ferry's history tokenizer makes 48 tokens, got " +
                   std::to_string(a.tokens_per_history_traj));
  }
  // Waypoints are integrated with this step; too small or large a step makes no trajectory.
  if (!(a.action_space.dt >= 1e-3 && a.action_space.dt <= 10.0)) {
    return bad(label, "action_space_cfg.dt", "expected a time step in [0.001, 10] s");
  }
  return Status();
}

json rope_scaling_json(const TextConfig& t) {
  json r;
  r["rope_type"] = "default";
  if (!t.mrope_section.empty()) {
    r["mrope_section"] = t.mrope_section;
    r["mrope_interleaved"] = t.mrope_interleaved;
  }
  return r;
}

// Keys shared by every decoder config (Qwen3 top level, Llama top level, Qwen3-VL text_config).
void text_common(const TextConfig& t, json& j) {
  j["attention_bias"] = t.attention_bias;
  j["attention_dropout"] = 0.0;
  j["head_dim"] = t.head_dim;
  j["hidden_act"] = t.hidden_act;
  j["hidden_size"] = t.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = t.intermediate_size;
  j["max_position_embeddings"] = t.max_position_embeddings;
  j["num_attention_heads"] = t.num_heads;
  j["num_hidden_layers"] = t.num_layers;
  j["num_key_value_heads"] = t.num_kv_heads;
  j["rms_norm_eps"] = t.rms_norm_eps;
  j["rope_theta"] = t.rope_theta;
  j["use_cache"] = true;
  j["vocab_size"] = t.vocab_size;
}

json qwen3_json(const TextConfig& t) {
  json j;
  text_common(t, j);
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["model_type"] = "qwen3";
  j["bos_token_id"] = 151643;
  j["eos_token_id"] = 151645;
  j["max_window_layers"] = t.num_layers;
  j["rope_scaling"] = t.mrope_section.empty() ? json(nullptr) : rope_scaling_json(t);
  j["sliding_window"] = nullptr;
  j["use_sliding_window"] = false;
  j["tie_word_embeddings"] = t.tie_word_embeddings;
  j["torch_dtype"] = t.dtype;
  j["transformers_version"] = "4.51.0";
  return j;
}

json llama_json(const TextConfig& t) {
  json j;
  text_common(t, j);
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  j["mlp_bias"] = false;
  j["pretraining_tp"] = 1;
  if (t.llama3_rope) {
    const Llama3RopeScaling& s = *t.llama3_rope;
    j["rope_scaling"] = {{"factor", s.factor},
                         {"low_freq_factor", s.low_freq_factor},
                         {"high_freq_factor", s.high_freq_factor},
                         {"original_max_position_embeddings", s.original_max_position_embeddings},
                         {"rope_type", "llama3"}};
  } else {
    j["rope_scaling"] = t.mrope_section.empty() ? json(nullptr) : rope_scaling_json(t);
  }
  j["tie_word_embeddings"] = t.tie_word_embeddings;
  j["torch_dtype"] = t.dtype;
  j["transformers_version"] = "4.41.0";
  return j;
}

json vision_json(const VisionConfig& v) {
  json j;
  j["deepstack_visual_indexes"] = v.deepstack_visual_indexes;
  j["depth"] = v.depth;
  j["hidden_act"] = v.hidden_act;
  j["hidden_size"] = v.hidden_size;
  j["in_channels"] = v.in_channels;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = v.intermediate_size;
  j["model_type"] = "qwen3_vl";
  j["num_heads"] = v.num_heads;
  j["num_position_embeddings"] = v.num_position_embeddings;
  j["out_hidden_size"] = v.out_hidden_size;
  j["patch_size"] = v.patch_size;
  j["spatial_merge_size"] = v.spatial_merge_size;
  j["temporal_patch_size"] = v.temporal_patch_size;
  return j;
}

json qwen3_vl_json(const Qwen3VLConfig& c) {
  json text;
  text_common(c.text, text);
  text["model_type"] = "qwen3_vl_text";
  text["bos_token_id"] = 151643;
  text["eos_token_id"] = 151645;
  text["dtype"] = c.text.dtype;
  text["rope_scaling"] = rope_scaling_json(c.text);
  json j;
  j["architectures"] = {"Qwen3VLForConditionalGeneration"};
  j["model_type"] = "qwen3_vl";
  j["image_token_id"] = c.image_token_id;
  j["video_token_id"] = 151656;
  j["vision_start_token_id"] = c.vision_start_token_id;
  j["vision_end_token_id"] = c.vision_end_token_id;
  j["tie_word_embeddings"] = c.text.tie_word_embeddings;
  j["torch_dtype"] = c.text.dtype;
  j["transformers_version"] = "4.57.0";
  j["use_cache"] = true;
  j["text_config"] = std::move(text);
  j["vision_config"] = vision_json(c.vision);
  return j;
}

json alpamayo_json(const AlpamayoConfig& a) {
  json j;
  j["architectures"] = {"AlpamayoR1"};
  j["model_type"] = "alpamayo_r1";
  j["vlm_name_or_path"] = kQwen3Vl8bName;
  j["vlm_backend"] = "qwenvl3";
  j["vlm_config"] = qwen3_vl_json(a.vlm);
  j["vocab_size"] = a.vlm.text.vocab_size;
  j["dtype"] = a.vlm.text.dtype;
  j["model_dtype"] = a.vlm.text.dtype;
  j["add_special_tokens"] = true;
  j["keep_same_dtype"] = true;
  j["expert_non_causal_attention"] = true;
  j["attn_implementation"] = "sdpa";
  j["action_in_proj_cfg"] = {
      {"_target_", "alpamayo_r1.models.action_in_proj.PerWaypointActionInProjV2"},
      {"hidden_size", a.action_in_proj.hidden_size},
      {"max_freq", a.action_in_proj.max_freq},
      {"num_enc_layers", a.action_in_proj.num_enc_layers},
      {"num_fourier_feats", a.action_in_proj.num_fourier_feats}};
  j["action_out_proj_cfg"] = {{"_target_", "torch.nn.Linear"}};
  j["action_space_cfg"] = {
      {"_target_", "alpamayo_r1.action_space.UnicycleAccelCurvatureActionSpace"},
      {"accel_mean", a.action_space.accel_mean},
      {"accel_std", a.action_space.accel_std},
      {"curvature_mean", a.action_space.curvature_mean},
      {"curvature_std", a.action_space.curvature_std},
      {"dt", a.action_space.dt},
      {"n_waypoints", a.action_space.num_waypoints}};
  j["diffusion_cfg"] = {{"_target_", "alpamayo_r1.diffusion.flow_matching.FlowMatching"},
                        {"int_method", "euler"},
                        {"num_inference_steps", a.diffusion.num_inference_steps}};
  // The real expert_cfg names only what differs from the VLM's text config; so does ferry.
  json expert = {{"dtype", a.expert.dtype},
                 {"head_dim", a.expert.head_dim},
                 {"hidden_size", a.expert.hidden_size},
                 {"intermediate_size", a.expert.intermediate_size},
                 {"num_attention_heads", a.expert.num_heads}};
  if (a.expert.num_kv_heads != a.vlm.text.num_kv_heads) {
    expert["num_key_value_heads"] = a.expert.num_kv_heads;
  }
  if (a.expert.num_layers != a.vlm.text.num_layers) {
    expert["num_hidden_layers"] = a.expert.num_layers;
  }
  if (a.expert.rms_norm_eps != a.vlm.text.rms_norm_eps) {
    expert["rms_norm_eps"] = a.expert.rms_norm_eps;
  }
  j["expert_cfg"] = std::move(expert);
  j["traj_token_start_idx"] = a.traj_token_start_idx;
  j["traj_vocab_size"] = a.traj_vocab_size;
  j["tokens_per_history_traj"] = a.tokens_per_history_traj;
  // The ids of the released tokenizer (spec §4.4); future_start is the one ferry uses.
  j["traj_token_ids"] = {{"history", 155684},       {"future", 155685},
                         {"history_start", 155674}, {"future_start", a.traj_future_start_token_id},
                         {"history_end", 155676},   {"future_end", 155683}};
  return j;
}

}  // namespace

Status validate_config(const ModelConfig& c, std::string_view label) {
  switch (c.arch) {
    case Architecture::qwen3:
    case Architecture::llama: {
      const auto* t = std::get_if<TextConfig>(&c.body);
      if (t == nullptr) return make_error(ErrorCode::internal, "config: body is not a TextConfig");
      return validate_text(*t, label, "", true);
    }
    case Architecture::qwen3_vl: {
      const auto* v = std::get_if<Qwen3VLConfig>(&c.body);
      if (v == nullptr)
        return make_error(ErrorCode::internal, "config: body is not a Qwen3VLConfig");
      return validate_vlm(*v, label, "");
    }
    case Architecture::alpamayo_r1: {
      const auto* a = std::get_if<AlpamayoConfig>(&c.body);
      if (a == nullptr)
        return make_error(ErrorCode::internal, "config: body is not an AlpamayoConfig");
      return validate_alpamayo(*a, label);
    }
  }
  return make_error(ErrorCode::internal, "config: unknown architecture");
}

std::string write_config(const ModelConfig& c) {
  json j;
  switch (c.arch) {
    case Architecture::qwen3:
      j = qwen3_json(std::get<TextConfig>(c.body));
      break;
    case Architecture::llama:
      j = llama_json(std::get<TextConfig>(c.body));
      break;
    case Architecture::qwen3_vl:
      j = qwen3_vl_json(std::get<Qwen3VLConfig>(c.body));
      break;
    case Architecture::alpamayo_r1:
      j = alpamayo_json(std::get<AlpamayoConfig>(c.body));
      break;
  }
  return j.dump(2) + "\n";
}

}  // namespace ferry
