// The synthetic workload of `run`, `bench`, `profile` and `plan`, and the one set of flags that
// shapes it: --images, --image-size HxW, --prompt-tokens, --tokens, --steps. Two sets of
// defaults fill what the flags leave out. The reference workload (`bench`, `profile`, `plan`;
// Alpamayo-R1: 16 images of 320x576 from 4 cameras x 4 frames, a ~3000-token prompt, 21 tokens,
// 10 flow steps; Qwen3: a 1500-token prompt, 21 tokens) and the quick one (`run`: 2 images, the
// prompt they need plus ~120 text tokens, 8 tokens), both scaled down for tiny models so that the
// CPU finishes in seconds. A profile, a plan and a benchmark of one model agree on the workload
// when they are given the same flags.
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

struct ImageSize {
  int64_t height = 0;
  int64_t width = 0;
};

struct WorkloadArgs {
  std::optional<int64_t> images;
  std::optional<ImageSize> image_size;  // --image-size HxW
  std::optional<int64_t> prompt_tokens;
  std::optional<int64_t> tokens;
  std::optional<int64_t> steps;
};

// Which defaults fill what the flags leave out.
enum class WorkloadDefaults {
  reference,  // bench, profile, plan
  quick,      // run: one short inference
};

void add_workload_options(CLI::App* cmd, WorkloadArgs* args, WorkloadDefaults defaults);

// The one test of "tiny" (the synthetic presets' sizes, for which the defaults scale down): a
// text model narrower than 1024.
bool tiny_model(const ModelConfig& config);

// The workload for `config`, seed 1: an error for a flag the model has no use for, or a prompt
// shorter than its fixed parts. Validated (validate_workload).
Result<Workload> make_workload(const WorkloadArgs& args, const ModelConfig& config,
                               WorkloadDefaults defaults);
inline Result<Workload> reference_workload(const WorkloadArgs& args, const ModelConfig& config) {
  return make_workload(args, config, WorkloadDefaults::reference);
}

// "16 images 320x576, prompt 3007 tokens, 21 generated, 10 flow steps" and as JSON.
std::string describe_workload(const Workload& w, const ModelConfig& config);
nlohmann::ordered_json workload_json(const Workload& w);

}  // namespace ferry::cli
