// config.json -> ModelConfig. Field names follow the public Hugging Face configs of
// Qwen/Qwen3-8B, meta-llama Llama 2, Qwen/Qwen3-VL-8B-Instruct and nvidia/Alpamayo-R1-10B
// (see tests/fixtures/ for copies and their sources).
#include "model/config_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/config_json_reader.h"
#include "model/presets.h"

namespace ferry {
namespace {

using config_json::json;
using config_json::Obj;
using config_json::show;

constexpr double kDoubleMax = std::numeric_limits<double>::max();
constexpr int kMaxNesting = 64;

enum class TextFlavor { qwen3, llama, qwen3_vl };

bool known_dtype(const std::string& s) {
  return s == "bfloat16" || s == "float16" || s == "float32";
}

// The rope block: rope_parameters (transformers 5) wins over rope_scaling (transformers 4).
Result<std::optional<Obj>> rope_block(const Obj& o) {
  FERRY_ASSIGN_OR_RETURN(auto params, o.object_opt("rope_parameters"));
  if (params) return params;
  return o.object_opt("rope_scaling");
}

Status parse_rope(const Obj& o, TextFlavor flavor, TextConfig& t) {
  FERRY_ASSIGN_OR_RETURN(auto rope, rope_block(o));
  // HF's default theta when a config names none.
  FERRY_ASSIGN_OR_RETURN(t.rope_theta, o.number_or("rope_theta", 10000.0, 1e-9, kDoubleMax));
  t.mrope_section.clear();
  t.mrope_interleaved = false;
  t.llama3_rope.reset();
  if (!rope) {
    if (flavor == TextFlavor::qwen3_vl)
      return o.error("rope_scaling", "missing (Qwen3-VL needs mrope_section)");
    return Status();
  }
  if (rope->has("rope_theta")) {
    FERRY_ASSIGN_OR_RETURN(t.rope_theta, rope->number("rope_theta", 1e-9, kDoubleMax));
  }
  std::string type = "default";
  if (rope->has("rope_type")) {
    FERRY_ASSIGN_OR_RETURN(type, rope->string("rope_type"));
  } else if (rope->has("type")) {
    FERRY_ASSIGN_OR_RETURN(type, rope->string("type"));
  }
  if (type == "llama3" && flavor == TextFlavor::llama) {
    Llama3RopeScaling s;
    FERRY_ASSIGN_OR_RETURN(s.factor, rope->number("factor", 1e-6, 1e6));
    FERRY_ASSIGN_OR_RETURN(s.low_freq_factor, rope->number("low_freq_factor", 1e-6, 1e6));
    FERRY_ASSIGN_OR_RETURN(s.high_freq_factor, rope->number("high_freq_factor", 1e-6, 1e6));
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      return rope->error("high_freq_factor", "must be larger than low_freq_factor");
    }
    FERRY_ASSIGN_OR_RETURN(
        s.original_max_position_embeddings,
        rope->integer("original_max_position_embeddings", 1, std::numeric_limits<int32_t>::max()));
    t.llama3_rope = s;
    return Status();
  }
  if (type != "default" && type != "mrope") {
    return make_error(ErrorCode::unsupported,
                      o.label() + ": " + rope->where("rope_type") + ": '" + type +
                          "' is not supported (default RoPE; llama3 for Llama models)");
  }
  if (rope->has("mrope_section")) {
    FERRY_ASSIGN_OR_RETURN(auto sec, rope->int_list("mrope_section", 1, kMaxConfigDim, 3));
    if (sec.size() != 3) {
      return rope->error("mrope_section",
                         "expected 3 entries (t, h, w), got " + std::to_string(sec.size()));
    }
    for (int64_t s : sec) t.mrope_section.push_back(static_cast<int>(s));
    FERRY_ASSIGN_OR_RETURN(t.mrope_interleaved,
                           rope->boolean_or("mrope_interleaved", flavor == TextFlavor::qwen3_vl));
  } else if (flavor == TextFlavor::qwen3_vl) {
    return rope->error("mrope_section", "missing");
  }
  return Status();
}

// A decoder's config from `o` (the top level of a Qwen3/Llama config, or a text_config).
Result<TextConfig> parse_text(const Obj& o, TextFlavor flavor) {
  TextConfig t;
  FERRY_ASSIGN_OR_RETURN(t.hidden_size, o.integer("hidden_size", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.num_layers, o.integer("num_hidden_layers", 1, kMaxConfigLayers));
  FERRY_ASSIGN_OR_RETURN(t.num_heads, o.integer("num_attention_heads", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.num_kv_heads,
                         o.integer_or("num_key_value_heads", t.num_heads, 1, kMaxConfigDim));
  if (o.has("head_dim")) {
    FERRY_ASSIGN_OR_RETURN(t.head_dim, o.integer("head_dim", 1, kMaxConfigDim));
  } else {
    if (t.hidden_size % t.num_heads != 0) {
      return o.error("hidden_size",
                     std::to_string(t.hidden_size) + " is not a multiple of num_attention_heads (" +
                         std::to_string(t.num_heads) + ") and head_dim is not given");
    }
    t.head_dim = t.hidden_size / t.num_heads;
    // Checked here, where it is derived: the validation later would report a head_dim the
    // config never gave.
    if (t.head_dim % 2 != 0) {
      return o.error("hidden_size", std::to_string(t.hidden_size) + " / num_attention_heads (" +
                                        std::to_string(t.num_heads) +
                                        ") = " + std::to_string(t.head_dim) +
                                        ", an odd head size (RoPE rotates halves); give an even "
                                        "head_dim");
    }
  }
  FERRY_ASSIGN_OR_RETURN(t.intermediate_size, o.integer("intermediate_size", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.vocab_size, o.integer("vocab_size", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.rms_norm_eps, o.number_or("rms_norm_eps", 1e-6, 1e-30, 1.0));
  FERRY_RETURN_IF_ERROR(parse_rope(o, flavor, t));
  t.qk_norm = flavor != TextFlavor::llama;
  FERRY_ASSIGN_OR_RETURN(t.attention_bias, o.boolean_or("attention_bias", false));
  if (t.attention_bias) {
    return make_error(ErrorCode::unsupported,
                      o.label() + ": " + o.where("attention_bias") +
                          ": true is not supported (ferry's q/k/v/o projections have no bias)");
  }
  FERRY_ASSIGN_OR_RETURN(bool mlp_bias, o.boolean_or("mlp_bias", false));
  if (mlp_bias) {
    return make_error(
        ErrorCode::unsupported,
        o.label() + ": " + o.where("mlp_bias") +
            ": true is not supported (ferry's gate/up/down projections have no bias)");
  }
  FERRY_ASSIGN_OR_RETURN(t.tie_word_embeddings, o.boolean_or("tie_word_embeddings", false));
  FERRY_ASSIGN_OR_RETURN(t.hidden_act, o.string_or("hidden_act", "silu"));
  if (t.hidden_act != "silu") {
    return make_error(ErrorCode::unsupported, o.label() + ": " + o.where("hidden_act") + ": '" +
                                                  t.hidden_act + "' is not supported (silu)");
  }
  // torch_dtype (transformers 4) or dtype (transformers 5).
  std::string dtype_key = o.has("dtype") ? "dtype" : "torch_dtype";
  FERRY_ASSIGN_OR_RETURN(t.dtype, o.string_or(dtype_key, "bfloat16"));
  if (!known_dtype(t.dtype)) {
    return o.error(dtype_key, "expected bfloat16, float16 or float32, got '" + t.dtype + "'");
  }
  FERRY_ASSIGN_OR_RETURN(
      t.max_position_embeddings,
      o.integer_or("max_position_embeddings", 0, 0, std::numeric_limits<int32_t>::max()));
  return t;
}

Result<VisionConfig> parse_vision(const Obj& o) {
  VisionConfig v;
  FERRY_ASSIGN_OR_RETURN(v.depth, o.integer("depth", 1, kMaxConfigLayers));
  FERRY_ASSIGN_OR_RETURN(v.hidden_size, o.integer("hidden_size", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(v.num_heads, o.integer("num_heads", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(v.intermediate_size, o.integer("intermediate_size", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(v.patch_size, o.integer_or("patch_size", 16, 1, 1024));
  FERRY_ASSIGN_OR_RETURN(v.temporal_patch_size, o.integer_or("temporal_patch_size", 2, 1, 64));
  FERRY_ASSIGN_OR_RETURN(v.spatial_merge_size, o.integer_or("spatial_merge_size", 2, 1, 64));
  FERRY_ASSIGN_OR_RETURN(v.in_channels, o.integer_or("in_channels", 3, 1, 64));
  FERRY_ASSIGN_OR_RETURN(v.out_hidden_size, o.integer("out_hidden_size", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(v.num_position_embeddings,
                         o.integer("num_position_embeddings", 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(v.deepstack_visual_indexes,
                         o.int_list("deepstack_visual_indexes", 0, kMaxConfigLayers, 64));
  FERRY_ASSIGN_OR_RETURN(v.hidden_act, o.string_or("hidden_act", "gelu_pytorch_tanh"));
  if (v.hidden_act != "gelu_pytorch_tanh") {
    return make_error(ErrorCode::unsupported, o.label() + ": " + o.where("hidden_act") + ": '" +
                                                  v.hidden_act +
                                                  "' is not supported (gelu_pytorch_tanh)");
  }
  v.layer_norm_eps = 1e-6;  // fixed in Qwen3VLVisionBlock, not a config field
  return v;
}

Result<Qwen3VLConfig> parse_qwen3_vl(const Obj& o) {
  Qwen3VLConfig c;
  FERRY_ASSIGN_OR_RETURN(Obj text, o.object("text_config"));
  FERRY_ASSIGN_OR_RETURN(c.text, parse_text(text, TextFlavor::qwen3_vl));
  // Qwen3-VL keeps tie_word_embeddings at the top level; a text_config copy is only a fallback.
  FERRY_ASSIGN_OR_RETURN(c.text.tie_word_embeddings,
                         o.boolean_or("tie_word_embeddings", c.text.tie_word_embeddings));
  if (!text.has("dtype") && !text.has("torch_dtype")) {
    std::string key = o.has("dtype") ? "dtype" : "torch_dtype";
    FERRY_ASSIGN_OR_RETURN(c.text.dtype, o.string_or(key, "bfloat16"));
    if (!known_dtype(c.text.dtype)) {
      return o.error(key, "expected bfloat16, float16 or float32, got '" + c.text.dtype + "'");
    }
  }
  FERRY_ASSIGN_OR_RETURN(Obj vision, o.object("vision_config"));
  FERRY_ASSIGN_OR_RETURN(c.vision, parse_vision(vision));
  FERRY_ASSIGN_OR_RETURN(c.image_token_id,
                         o.integer_or("image_token_id", 151655, 0, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(c.vision_start_token_id,
                         o.integer_or("vision_start_token_id", 151652, 0, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(c.vision_end_token_id,
                         o.integer_or("vision_end_token_id", 151653, 0, kMaxConfigDim));
  return c;
}

// expert_cfg keys override the VLM's text config (AlpamayoR1.__init__: deep copy, setattr).
Status apply_expert_cfg(const Obj& e, TextConfig& t) {
  FERRY_ASSIGN_OR_RETURN(t.hidden_size,
                         e.integer_or("hidden_size", t.hidden_size, 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.num_layers,
                         e.integer_or("num_hidden_layers", t.num_layers, 1, kMaxConfigLayers));
  FERRY_ASSIGN_OR_RETURN(t.num_heads,
                         e.integer_or("num_attention_heads", t.num_heads, 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.num_kv_heads,
                         e.integer_or("num_key_value_heads", t.num_kv_heads, 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.head_dim, e.integer_or("head_dim", t.head_dim, 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.intermediate_size,
                         e.integer_or("intermediate_size", t.intermediate_size, 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(t.rms_norm_eps, e.number_or("rms_norm_eps", t.rms_norm_eps, 1e-30, 1.0));
  std::string key = e.has("dtype") ? "dtype" : "torch_dtype";
  FERRY_ASSIGN_OR_RETURN(t.dtype, e.string_or(key, t.dtype));
  if (!known_dtype(t.dtype)) {
    return e.error(key, "expected bfloat16, float16 or float32, got '" + t.dtype + "'");
  }
  t.vocab_size = 0;  // the expert's embed_tokens is deleted
  t.tie_word_embeddings = false;
  return Status();
}

// The VLM of an Alpamayo config (see config_json.h for the three places it may be).
Result<Qwen3VLConfig> alpamayo_vlm(const Obj& o) {
  FERRY_ASSIGN_OR_RETURN(auto embedded, o.object_opt("vlm_config"));
  Qwen3VLConfig vlm;
  if (embedded) {
    FERRY_ASSIGN_OR_RETURN(vlm, parse_qwen3_vl(*embedded));
  } else if (o.has("text_config") || o.has("vision_config")) {
    FERRY_ASSIGN_OR_RETURN(vlm, parse_qwen3_vl(o));
  } else {
    FERRY_ASSIGN_OR_RETURN(std::string name, o.string_or("vlm_name_or_path", ""));
    if (name != kQwen3Vl8bName) {
      return o.error("vlm_config", "missing, and vlm_name_or_path '" + name +
                                       "' is not a VLM ferry knows (" + kQwen3Vl8bName + ")");
    }
    vlm = qwen3_vl_8b_config();
  }
  if (o.has("vocab_size")) {
    FERRY_ASSIGN_OR_RETURN(int64_t vocab, o.integer("vocab_size", 1, kMaxConfigDim));
    if (embedded && vocab != vlm.text.vocab_size) {
      return o.error("vocab_size", std::to_string(vocab) +
                                       " disagrees with vlm_config.text_config.vocab_size (" +
                                       std::to_string(vlm.text.vocab_size) + ")");
    }
    vlm.text.vocab_size = vocab;
  }
  return vlm;
}

Result<AlpamayoConfig> parse_alpamayo(const Obj& o) {
  AlpamayoConfig a;
  FERRY_ASSIGN_OR_RETURN(a.vlm, alpamayo_vlm(o));

  a.expert = a.vlm.text;
  FERRY_ASSIGN_OR_RETURN(Obj expert, o.object("expert_cfg"));
  FERRY_RETURN_IF_ERROR(apply_expert_cfg(expert, a.expert));

  // Missing keys take PerWaypointActionInProjV2's constructor defaults.
  FERRY_ASSIGN_OR_RETURN(Obj in, o.object("action_in_proj_cfg"));
  FERRY_ASSIGN_OR_RETURN(a.action_in_proj.hidden_size,
                         in.integer_or("hidden_size", 1024, 1, kMaxConfigDim));
  FERRY_ASSIGN_OR_RETURN(a.action_in_proj.num_enc_layers,
                         in.integer_or("num_enc_layers", 4, 1, 1024));
  FERRY_ASSIGN_OR_RETURN(a.action_in_proj.max_freq, in.number_or("max_freq", 100.0, 1e-9, 1e9));
  FERRY_ASSIGN_OR_RETURN(a.action_in_proj.num_fourier_feats,
                         in.integer_or("num_fourier_feats", 20, 2, 4096));
  if (a.action_in_proj.num_fourier_feats % 2 != 0) {
    return in.error("num_fourier_feats", "expected an even count (sin and cos halves), got " +
                                             std::to_string(a.action_in_proj.num_fourier_feats));
  }
  a.action_in_proj.norm_eps = 1e-5;  // fixed in MLPEncoder / the final LayerNorm

  FERRY_ASSIGN_OR_RETURN(Obj space, o.object("action_space_cfg"));
  FERRY_ASSIGN_OR_RETURN(a.action_space.num_waypoints, space.integer("n_waypoints", 1, 1 << 16));
  a.action_space.action_dims = 2;  // (acceleration, curvature): the unicycle action space
  FERRY_ASSIGN_OR_RETURN(a.action_space.dt, space.number("dt", 1e-9, 1e9));
  FERRY_ASSIGN_OR_RETURN(a.action_space.accel_mean, space.number("accel_mean", -1e9, 1e9));
  FERRY_ASSIGN_OR_RETURN(a.action_space.accel_std, space.number("accel_std", 1e-30, 1e9));
  FERRY_ASSIGN_OR_RETURN(a.action_space.curvature_mean, space.number("curvature_mean", -1e9, 1e9));
  FERRY_ASSIGN_OR_RETURN(a.action_space.curvature_std, space.number("curvature_std", 1e-30, 1e9));

  FERRY_ASSIGN_OR_RETURN(auto diffusion, o.object_opt("diffusion_cfg"));
  if (diffusion) {
    FERRY_ASSIGN_OR_RETURN(std::string method, diffusion->string_or("int_method", "euler"));
    if (method != "euler") {
      return make_error(ErrorCode::unsupported, o.label() + ": " + diffusion->where("int_method") +
                                                    ": '" + method + "' is not supported (euler)");
    }
    FERRY_ASSIGN_OR_RETURN(a.diffusion.num_inference_steps,
                           diffusion->integer_or("num_inference_steps", 10, 1, 100000));
  }

  int64_t vocab = a.vlm.text.vocab_size;
  FERRY_ASSIGN_OR_RETURN(a.traj_token_start_idx,
                         o.integer_or("traj_token_start_idx", 151669, 0, vocab - 1));
  FERRY_ASSIGN_OR_RETURN(a.traj_vocab_size, o.integer_or("traj_vocab_size", 4000, 0, vocab));
  if (a.traj_token_start_idx + a.traj_vocab_size > vocab) {
    return o.error("traj_vocab_size",
                   "traj_token_start_idx + traj_vocab_size (" +
                       std::to_string(a.traj_token_start_idx + a.traj_vocab_size) +
                       ") exceeds vocab_size (" + std::to_string(vocab) + ")");
  }
  FERRY_ASSIGN_OR_RETURN(a.tokens_per_history_traj,
                         o.integer_or("tokens_per_history_traj", 48, 0, 1 << 20));
  FERRY_ASSIGN_OR_RETURN(auto ids, o.object_opt("traj_token_ids"));
  if (ids) {
    FERRY_ASSIGN_OR_RETURN(a.traj_future_start_token_id,
                           ids->integer_or("future_start", 155681, 0, vocab - 1));
  } else if (vocab <= 155681) {
    return o.error("traj_token_ids",
                   "missing, and the default future_start id 155681 is outside vocab_size " +
                       std::to_string(vocab));
  }
  return a;
}

Result<Architecture> detect_architecture(const Obj& o) {
  std::string model_type;
  FERRY_ASSIGN_OR_RETURN(model_type, o.string_or("model_type", ""));
  std::string arch;
  if (const json* a = o.get("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string()) {
      return o.error("architectures", "expected a list of class names, got " + show(*a));
    }
    arch = (*a)[0].get<std::string>();
  }
  if (model_type == "qwen3" || (model_type.empty() && arch == "Qwen3ForCausalLM")) {
    return Architecture::qwen3;
  }
  if (model_type == "llama" || (model_type.empty() && arch == "LlamaForCausalLM")) {
    return Architecture::llama;
  }
  if (model_type == "qwen3_vl" ||
      (model_type.empty() && arch == "Qwen3VLForConditionalGeneration")) {
    return Architecture::qwen3_vl;
  }
  if (model_type == "alpamayo_r1" || (model_type.empty() && arch == "AlpamayoR1")) {
    return Architecture::alpamayo_r1;
  }
  if (model_type.empty() && arch.empty()) {
    return o.error_here("neither model_type nor architectures is given");
  }
  return make_error(ErrorCode::unsupported,
                    o.label() + ": model_type '" + model_type + "' (architectures '" + arch +
                        "') is not a model ferry runs (qwen3, llama, qwen3_vl, alpamayo_r1)");
}

Result<ModelConfig> parse_object(const json& root, const std::string& label) {
  if (!root.is_object()) {
    return make_error(ErrorCode::format, label + ": expected a JSON object, got " + show(root));
  }
  Obj o(&root, "", label);
  ModelConfig c;
  FERRY_ASSIGN_OR_RETURN(c.arch, detect_architecture(o));
  switch (c.arch) {
    case Architecture::qwen3: {
      FERRY_ASSIGN_OR_RETURN(TextConfig t, parse_text(o, TextFlavor::qwen3));
      c.body = std::move(t);
      break;
    }
    case Architecture::llama: {
      FERRY_ASSIGN_OR_RETURN(TextConfig t, parse_text(o, TextFlavor::llama));
      c.body = std::move(t);
      break;
    }
    case Architecture::qwen3_vl: {
      FERRY_ASSIGN_OR_RETURN(Qwen3VLConfig v, parse_qwen3_vl(o));
      c.body = std::move(v);
      break;
    }
    case Architecture::alpamayo_r1: {
      FERRY_ASSIGN_OR_RETURN(AlpamayoConfig a, parse_alpamayo(o));
      c.body = std::move(a);
      break;
    }
  }
  FERRY_RETURN_IF_ERROR(validate_config(c, label));
  return c;
}

}  // namespace

Result<ModelConfig> parse_config(std::string_view json_text, std::string_view label) {
  std::string lbl(label);
  if (json_text.size() > kMaxConfigBytes) {
    return make_error(ErrorCode::format, lbl + ": " + std::to_string(json_text.size()) +
                                             " bytes is larger than a config can be");
  }
  if (!config_json::nesting_within(json_text, kMaxNesting)) {
    return make_error(ErrorCode::format,
                      lbl + ": nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  try {
    json root = json::parse(json_text.begin(), json_text.end(), nullptr,
                            /*allow_exceptions=*/false);
    if (root.is_discarded()) return make_error(ErrorCode::format, lbl + ": not valid JSON");
    return parse_object(root, lbl);
  } catch (const std::exception& e) {
    return make_error(ErrorCode::format, lbl + ": " + e.what());
  }
}

Result<ModelConfig> load_config(const std::string& path) {
  std::string file = path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) file = path + "/config.json";
  // A weights file (what `inspect` takes too) names the config.json beside it.
  const std::string name = std::filesystem::path(path).filename().string();
  auto ends_with = [&](std::string_view suffix) {
    return name.size() > suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".safetensors") || ends_with(".safetensors.index.json")) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    file = ((dir.empty() ? std::filesystem::path(".") : dir) / "config.json").string();
  }
  // Only a regular file: reading a FIFO or a device could block or never end.
  if (::stat(file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return make_error(ErrorCode::io, file + ": not a regular file");
  }
  if (const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK); fd < 0) {
    return make_error(ErrorCode::io, file + ": cannot open: " + std::strerror(errno));
  } else {
    ::close(fd);
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return make_error(ErrorCode::io, file + ": cannot open");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigBytes) {
      return make_error(ErrorCode::format, file + ": larger than a config can be");
    }
  }
  if (in.bad()) return make_error(ErrorCode::io, file + ": read failed");
  return parse_config(text, file);
}

}  // namespace ferry
