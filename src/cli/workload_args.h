// The reference workload of `bench`, `profile` and `plan` (Alpamayo-R1: 16 images of 320x576
// from 4 cameras x 4 frames, a ~3000-token prompt, 21 tokens, 10 flow steps; Qwen3: a 1500-token
// prompt, 21 tokens), scaled down for tiny models so that the CPU finishes in seconds, and the
// flags that change it. A profile, a plan and a benchmark of one model agree on the workload when
// they are given the same flags.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/status.h"
#include "model/config.h"
#include "model/workload.h"

namespace ferry::cli {

struct WorkloadArgs {
  std::optional<int64_t> images;
  std::optional<int64_t> image_height;
  std::optional<int64_t> image_width;
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> tokens;
  std::optional<int64_t> steps;
};

void add_workload_options(CLI::App* cmd, WorkloadArgs* args);

// The workload for `config`: an error for a flag the model has no use for, or a prompt shorter
// than its fixed parts. Validated (validate_workload).
Result<Workload> reference_workload(const WorkloadArgs& args, const ModelConfig& config);

// "16 images 320x576, prompt 3007 tokens, 21 generated, 10 flow steps" and as JSON.
std::string describe_workload(const Workload& w, const ModelConfig& config);
nlohmann::ordered_json workload_json(const Workload& w);

}  // namespace ferry::cli
