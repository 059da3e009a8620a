// Preset configurations. Every number of a real model is from its public config.json:
//   Qwen3-8B:        huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
//   Qwen3-VL-8B:     huggingface.co/Qwen/Qwen3-VL-8B-Instruct/blob/main/config.json
//   Llama-2-7B:      huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json (published as
//                    float16; the preset is BF16, the dtype ferry runs)
//   Llama-3.1-8B:    huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json (llama3 RoPE)
//   Alpamayo-R1-10B: huggingface.co/nvidia/Alpamayo-R1-10B/blob/main/config.json (expert_cfg,
//                    action_*_cfg, vocab_size 155697 = 151669 + 4000 <i*> + 28 specials, see
//                    /work/shared/spec §4.4) on top of Qwen3-VL-8B.
// The tiny presets keep every structural property of their real model (GQA ratio, q width !=
// hidden in the expert, deepstack, M-RoPE sections summing to head_dim/2, the special token ids)
// with widths small enough for a CPU.
#include "model/presets.h"

#include <string>

#include "model/config_json.h"

namespace ferry {
namespace {

TextConfig qwen3_8b_text() {
  TextConfig t;
  t.hidden_size = 4096;
  t.num_layers = 36;
  t.num_heads = 32;
  t.num_kv_heads = 8;
  t.head_dim = 128;
  t.intermediate_size = 12288;
  t.vocab_size = 151936;
  t.rms_norm_eps = 1e-6;
  t.rope_theta = 1000000.0;
  t.qk_norm = true;
  t.tie_word_embeddings = false;
  t.max_position_embeddings = 40960;
  return t;
}

TextConfig qwen3_tiny_text() {
  TextConfig t = qwen3_8b_text();
  t.hidden_size = 64;
  t.num_layers = 4;
  t.num_heads = 4;
  t.num_kv_heads = 2;
  t.head_dim = 16;
  t.intermediate_size = 128;
  return t;
}

TextConfig llama_2_7b_text() {
  TextConfig t;
  t.hidden_size = 4096;
  t.num_layers = 32;
  t.num_heads = 32;
  t.num_kv_heads = 32;
  t.head_dim = 128;
  t.intermediate_size = 11008;
  t.vocab_size = 32000;
  t.rms_norm_eps = 1e-5;
  t.rope_theta = 10000.0;
  t.qk_norm = false;
  t.tie_word_embeddings = false;
  t.max_position_embeddings = 4096;
  return t;
}

TextConfig llama_31_8b_text() {
  TextConfig t = llama_2_7b_text();
  t.num_kv_heads = 8;
  t.intermediate_size = 14336;
  t.vocab_size = 128256;
  t.rope_theta = 500000.0;
  t.llama3_rope = Llama3RopeScaling{8.0, 1.0, 4.0, 8192};
  t.max_position_embeddings = 131072;
  return t;
}

// Llama-3.1-8B's structure (GQA 4:1, llama3 RoPE scaling, untied head, no q/k norms) at CPU
// widths; original_max_position_embeddings 64 puts the frequencies of a short run's positions in
// all three of the scaling's bands.
TextConfig llama_tiny_text() {
  TextConfig t = llama_31_8b_text();
  t.hidden_size = 64;
  t.num_layers = 4;
  t.num_heads = 4;
  t.num_kv_heads = 1;
  t.head_dim = 16;
  t.intermediate_size = 128;
  t.vocab_size = 4096;
  t.llama3_rope->original_max_position_embeddings = 64;
  t.max_position_embeddings = 2048;
  return t;
}

// Qwen3-VL-8B's text config with `vocab` entries.
Qwen3VLConfig tiny_vlm(int64_t vocab) {
  Qwen3VLConfig c = qwen3_vl_8b_config();
  TextConfig& t = c.text;
  t.hidden_size = 64;
  t.num_layers = 4;
  t.num_heads = 4;
  t.num_kv_heads = 2;
  t.head_dim = 16;
  t.mrope_section = {4, 2, 2};  // sums to head_dim / 2
  t.intermediate_size = 128;
  t.vocab_size = vocab;
  VisionConfig& v = c.vision;
  v.depth = 4;
  v.hidden_size = 32;
  v.num_heads = 2;  // head_dim 16: a multiple of 4 for the 2-D rotary
  v.intermediate_size = 64;
  v.out_hidden_size = t.hidden_size;
  v.num_position_embeddings = 256;  // 16 x 16
  v.deepstack_visual_indexes = {1, 2, 3};
  return c;
}

AlpamayoConfig alpamayo_10b() {
  AlpamayoConfig a;
  a.vlm = qwen3_vl_8b_config();
  a.vlm.text.vocab_size = 155697;
  a.expert = a.vlm.text;  // AlpamayoR1.__init__: a copy of the text config, then expert_cfg
  a.expert.vocab_size = 0;
  a.expert.hidden_size = 2048;
  a.expert.num_heads = 16;
  a.expert.head_dim = 128;
  a.expert.intermediate_size = 8256;
  a.action_in_proj = ActionInProjConfig{};  // 20 Fourier features, max_freq 100, 512, 2 layers
  a.action_space = ActionSpaceConfig{};     // 64 waypoints, dt 0.1, the released statistics
  a.diffusion = DiffusionConfig{};          // 10 Euler steps (FlowMatching's default)
  return a;
}

AlpamayoConfig alpamayo_tiny() {
  AlpamayoConfig a = alpamayo_10b();
  a.vlm = tiny_vlm(155697);  // keeps the special ids (image pad 151655, traj_future_start 155681)
  a.expert = a.vlm.text;
  a.expert.vocab_size = 0;
  a.expert.hidden_size = 32;
  a.expert.num_heads = 4;
  a.expert.head_dim = 16;  // = the text head_dim and kv heads: it reads the text KV cache
  a.expert.intermediate_size = 64;
  a.action_in_proj.hidden_size = 32;
  return a;
}

}  // namespace

Qwen3VLConfig qwen3_vl_8b_config() {
  Qwen3VLConfig c;
  TextConfig& t = c.text;
  t.hidden_size = 4096;
  t.num_layers = 36;
  t.num_heads = 32;
  t.num_kv_heads = 8;
  t.head_dim = 128;
  t.intermediate_size = 12288;
  t.vocab_size = 151936;
  t.rms_norm_eps = 1e-6;
  t.rope_theta = 5000000.0;
  t.mrope_section = {24, 20, 20};
  t.mrope_interleaved = true;
  t.qk_norm = true;
  t.tie_word_embeddings = false;
  t.max_position_embeddings = 262144;
  VisionConfig& v = c.vision;
  v.depth = 27;
  v.hidden_size = 1152;
  v.num_heads = 16;
  v.intermediate_size = 4304;
  v.patch_size = 16;
  v.temporal_patch_size = 2;
  v.spatial_merge_size = 2;
  v.in_channels = 3;
  v.out_hidden_size = 4096;
  v.num_position_embeddings = 2304;
  v.deepstack_visual_indexes = {8, 16, 24};
  c.image_token_id = 151655;
  c.vision_start_token_id = 151652;
  c.vision_end_token_id = 151653;
  return c;
}

std::vector<std::string_view> preset_names() {
  return {"alpamayo-r1-10b", "alpamayo-tiny", "llama-2-7b",  "llama-3.1-8b", "llama-tiny",
          "qwen3-8b",        "qwen3-tiny",    "qwen3-vl-8b", "qwen3-vl-tiny"};
}

Result<ModelConfig> preset(std::string_view name) {
  ModelConfig c;
  if (name == "qwen3-8b") {
    c.arch = Architecture::qwen3;
    c.body = qwen3_8b_text();
  } else if (name == "qwen3-tiny") {
    c.arch = Architecture::qwen3;
    c.body = qwen3_tiny_text();
  } else if (name == "llama-2-7b") {
    c.arch = Architecture::llama;
    c.body = llama_2_7b_text();
  } else if (name == "llama-3.1-8b") {
    c.arch = Architecture::llama;
    c.body = llama_31_8b_text();
  } else if (name == "llama-tiny") {
    c.arch = Architecture::llama;
    c.body = llama_tiny_text();
  } else if (name == "qwen3-vl-8b") {
    c.arch = Architecture::qwen3_vl;
    c.body = qwen3_vl_8b_config();
  } else if (name == "qwen3-vl-tiny") {
    c.arch = Architecture::qwen3_vl;
    c.body = tiny_vlm(155697);
  } else if (name == "alpamayo-r1-10b") {
    c.arch = Architecture::alpamayo_r1;
    c.body = alpamayo_10b();
  } else if (name == "alpamayo-tiny") {
    c.arch = Architecture::alpamayo_r1;
    c.body = alpamayo_tiny();
  } else {
    std::string names;
    for (auto n : preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    return make_error(ErrorCode::invalid_argument,
                      "unknown preset '" + std::string(name) + "' (known: " + names + ")");
  }
  FERRY_RETURN_IF_ERROR(validate_config(c, "preset " + std::string(name)));
  return c;
}

}  // namespace ferry
