// Built-in model configurations: the real models (exact public shapes) and tiny ones with the
// same structure that a CPU runs in about a second. Each preset is a ModelConfig; its
// config.json comes from write_config (model/config_json.h).
#pragma once

#include <string_view>
#include <vector>

#include "core/status.h"
#include "model/config.h"

namespace ferry {

// The VLM Alpamayo-R1-10B names in its config.json (`vlm_name_or_path`).
inline constexpr const char* kQwen3Vl8bName = "Qwen/Qwen3-VL-8B-Instruct";

// Qwen/Qwen3-VL-8B-Instruct's config (vocabulary 151936).
Qwen3VLConfig qwen3_vl_8b_config();

// "alpamayo-r1-10b", "alpamayo-tiny", "qwen3-8b", "qwen3-tiny", "qwen3-vl-8b", "qwen3-vl-tiny".
std::vector<std::string_view> preset_names();

// The named preset, or an invalid_argument error listing the names.
Result<ModelConfig> preset(std::string_view name);

}  // namespace ferry
