// config.json <-> ModelConfig, for Qwen3, Llama, Qwen3-VL and Alpamayo-R1.
//
// A config is hostile input: the parser never throws and never crashes; every missing field,
// wrong type, out-of-range or inconsistent size is an Error that names the field, e.g.
//   "config.json: text_config.num_attention_heads: expected a positive integer, got -3".
// Accepted spellings: rope_theta at the top level or inside rope_parameters (transformers 5) /
// rope_scaling (transformers 4); torch_dtype or dtype.
//
// Alpamayo-R1's released config.json names its VLM by `vlm_name_or_path` instead of embedding it.
// ferry reads the VLM from, in order: an embedded "vlm_config" object (what ferry writes), a
// top-level text_config + vision_config, or, for vlm_name_or_path "Qwen/Qwen3-VL-8B-Instruct",
// the built-in copy of that public config (presets.cpp) with the vocabulary resized to the
// top-level vocab_size, as AlpamayoR1 itself does.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "model/config.h"

namespace ferry {

// Largest accepted width, vocabulary, length or count in a config: products of two such sizes
// stay far below 2^63.
inline constexpr int64_t kMaxConfigDim = int64_t{1} << 24;
inline constexpr int64_t kMaxConfigLayers = 4096;
inline constexpr size_t kMaxConfigBytes = size_t{16} << 20;

// Parses config.json text. `label` names the file in errors.
Result<ModelConfig> parse_config(std::string_view json_text,
                                 std::string_view label = "config.json");

// Reads `path` (a config.json file, or a folder holding one) and parses it.
Result<ModelConfig> load_config(const std::string& path);

// The config.json text of a config, in the field names and structure of the real Hugging Face
// configs (keys sorted, 2-space indent). parse_config(write_config(c)) == c for every valid c.
std::string write_config(const ModelConfig& config);

// Checks sizes and their consistency (also applied by parse_config); presets use it too.
Status validate_config(const ModelConfig& config, std::string_view label = "config");

}  // namespace ferry
