// Typed model configurations, built once from config.json (format/config_json.cpp) or from a
// preset (model/presets.cpp). Field comments give the Hugging Face key each comes from.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace ferry {

// Llama-3's RoPE frequency scaling (rope_scaling / rope_parameters with rope_type "llama3").
struct Llama3RopeScaling {
  double factor = 8.0;                              // factor
  double low_freq_factor = 1.0;                     // low_freq_factor
  double high_freq_factor = 4.0;                    // high_freq_factor
  int64_t original_max_position_embeddings = 8192;  // original_max_position_embeddings

  bool operator==(const Llama3RopeScaling&) const = default;
};

// A Qwen3 / Llama-style decoder (also Qwen3-VL's text model and Alpamayo's action expert).
struct TextConfig {
  int64_t hidden_size = 0;        // hidden_size
  int64_t num_layers = 0;         // num_hidden_layers
  int64_t num_heads = 0;          // num_attention_heads
  int64_t num_kv_heads = 0;       // num_key_value_heads
  int64_t head_dim = 0;           // head_dim (Llama: hidden_size / num_attention_heads)
  int64_t intermediate_size = 0;  // intermediate_size
  int64_t vocab_size = 0;         // vocab_size (0 for the expert: no embedding)
  double rms_norm_eps = 1e-6;     // rms_norm_eps
  double rope_theta = 1e6;        // rope_theta | rope_scaling/rope_parameters.rope_theta
  // rope_scaling/rope_parameters.mrope_section, with mrope_interleaved; empty = 1-D RoPE.
  std::vector<int> mrope_section;
  bool mrope_interleaved = false;
  // rope_type "llama3" (Llama-3.1 and later); absent: unscaled RoPE.
  std::optional<Llama3RopeScaling> llama3_rope;
  bool qk_norm = true;               // Qwen3 has q_norm/k_norm; Llama does not
  bool attention_bias = false;       // attention_bias
  bool tie_word_embeddings = false;  // tie_word_embeddings
  std::string hidden_act = "silu";   // hidden_act
  std::string dtype = "bfloat16";    // torch_dtype | dtype
  int64_t max_position_embeddings = 0;

  bool operator==(const TextConfig&) const = default;
};

// The Qwen3-VL vision tower.
struct VisionConfig {
  int64_t depth = 0;                              // depth
  int64_t hidden_size = 0;                        // hidden_size
  int64_t num_heads = 0;                          // num_heads
  int64_t intermediate_size = 0;                  // intermediate_size
  int64_t patch_size = 16;                        // patch_size
  int64_t temporal_patch_size = 2;                // temporal_patch_size
  int64_t spatial_merge_size = 2;                 // spatial_merge_size
  int64_t in_channels = 3;                        // in_channels
  int64_t out_hidden_size = 0;                    // out_hidden_size
  int64_t num_position_embeddings = 0;            // num_position_embeddings (a square, 48² = 2304)
  std::vector<int64_t> deepstack_visual_indexes;  // deepstack_visual_indexes
  std::string hidden_act = "gelu_pytorch_tanh";   // hidden_act
  double layer_norm_eps = 1e-6;

  int64_t head_dim() const { return num_heads > 0 ? hidden_size / num_heads : 0; }
  int64_t patch_values() const {
    return in_channels * temporal_patch_size * patch_size * patch_size;
  }

  bool operator==(const VisionConfig&) const = default;
};

struct Qwen3VLConfig {
  TextConfig text;
  VisionConfig vision;
  int64_t image_token_id = 151655;         // image_token_id
  int64_t vision_start_token_id = 151652;  // vision_start_token_id
  int64_t vision_end_token_id = 151653;    // vision_end_token_id

  bool operator==(const Qwen3VLConfig&) const = default;
};

// Alpamayo-R1: Qwen3-VL plus the diffusion action expert.
struct ActionInProjConfig {
  int64_t num_fourier_feats = 20;  // action_in_proj_cfg (features per scalar: 10 sin + 10 cos)
  double max_freq = 100.0;
  int64_t hidden_size = 512;
  int64_t num_enc_layers = 2;
  double norm_eps = 1e-5;

  bool operator==(const ActionInProjConfig&) const = default;
};

struct ActionSpaceConfig {
  int64_t num_waypoints = 64;  // action_space_cfg.n_waypoints
  int64_t action_dims = 2;     // (acceleration, curvature)
  double dt = 0.1;
  double accel_mean = 0.02902694707164455;
  double accel_std = 0.6810426736454882;
  double curvature_mean = 0.0002692167976330542;
  double curvature_std = 0.026148280660833106;

  bool operator==(const ActionSpaceConfig&) const = default;
};

struct DiffusionConfig {
  int64_t num_inference_steps = 10;  // diffusion_cfg

  bool operator==(const DiffusionConfig&) const = default;
};

struct AlpamayoConfig {
  Qwen3VLConfig vlm;
  TextConfig expert;  // text_config with expert_cfg applied, vocab_size = 0
  ActionInProjConfig action_in_proj;
  ActionSpaceConfig action_space;
  DiffusionConfig diffusion;
  int64_t traj_future_start_token_id = 155681;  // traj_token_ids.future_start
  int64_t traj_token_start_idx = 151669;        // traj_token_start_idx: id of <i0>
  int64_t traj_vocab_size = 4000;               // traj_vocab_size: the <i*> ids
  int64_t tokens_per_history_traj = 48;         // tokens_per_history_traj

  bool operator==(const AlpamayoConfig&) const = default;
};

enum class Architecture { qwen3, llama, qwen3_vl, alpamayo_r1 };
const char* architecture_name(Architecture a);

// What config.json describes.
struct ModelConfig {
  Architecture arch = Architecture::qwen3;
  std::variant<TextConfig, Qwen3VLConfig, AlpamayoConfig> body;

  // The language model's text config, whatever the architecture.
  const TextConfig& text() const;
  // The Qwen3-VL part (qwen3_vl and alpamayo_r1), else nullptr.
  const Qwen3VLConfig* vlm() const;
  // The Alpamayo part (alpamayo_r1), else nullptr.
  const AlpamayoConfig* alpamayo() const;

  bool operator==(const ModelConfig&) const = default;
};

}  // namespace ferry
