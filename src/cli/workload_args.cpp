#include "cli/workload_args.h"

#include "cli/flags.h"

namespace ferry::cli {

void add_workload_options(CLI::App* cmd, WorkloadArgs* a) {
  add_int_option(cmd, "--images", &a->images, 0, kMaxImages,
                 "Images (vision models; default 16 full-size)");
  add_int_option(cmd, "--image-height", &a->image_height, 1, kMaxImageSide,
                 "Image height in pixels (multiple of 32)");
  add_int_option(cmd, "--image-width", &a->image_width, 1, kMaxImageSide,
                 "Image width in pixels (multiple of 32)");
  add_int_option(cmd, "--prompt-tokens", &a->prompt_tokens, 1, kMaxSequence, "Total prompt length");
  add_int_option(cmd, "--tokens", &a->tokens, 1, kMaxSequence,
                 "Tokens to generate (default 21 full-size)");
  add_int_option(cmd, "--steps", &a->steps, 1, kMaxFlowSteps, "Flow-matching steps (Alpamayo)");
}

Result<Workload> reference_workload(const WorkloadArgs& a, const ModelConfig& config) {
  const bool full = config.text().hidden_size >= 1024;
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--images", a.images.has_value(), FlagNeeds::vision));
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--image-height", a.image_height.has_value(), FlagNeeds::vision));
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--image-width", a.image_width.has_value(), FlagNeeds::vision));
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--steps", a.steps.has_value(), FlagNeeds::action_expert));
  Workload w;
  w.seed = 1;
  w.gen_tokens = a.tokens.value_or(full ? 21 : 8);
  if (config.vlm() != nullptr) {
    w.num_images = a.images.value_or(full ? 16 : 2);
    w.image_height = a.image_height.value_or(full ? 320 : 128);
    w.image_width = a.image_width.value_or(full ? 576 : 192);
  }
  if (const AlpamayoConfig* ar = config.alpamayo()) {
    w.flow_steps = a.steps.value_or(ar->diffusion.num_inference_steps);
  }
  const int64_t fallback =
      config.vlm() != nullptr ? (full ? 3007 : image_tokens(w, config) + 120) : (full ? 1500 : 64);
  FERRY_ASSIGN_OR_RETURN(w.prompt_tokens, prompt_tokens_flag(config, w, a.prompt_tokens, fallback));
  FERRY_RETURN_IF_ERROR(validate_workload(w, config));
  return w;
}

std::string describe_workload(const Workload& w, const ModelConfig& config) {
  std::string s;
  if (w.num_images > 0) {
    s += std::to_string(w.num_images) + " images " + std::to_string(w.image_height) + "x" +
         std::to_string(w.image_width) + ", ";
  }
  s += "prompt " + std::to_string(w.prompt_tokens) + " tokens, " + std::to_string(w.gen_tokens) +
       " generated";
  if (config.alpamayo() != nullptr) s += ", " + std::to_string(w.flow_steps) + " flow steps";
  return s;
}

nlohmann::ordered_json workload_json(const Workload& w) {
  return {{"images", w.num_images},       {"image_height", w.image_height},
          {"image_width", w.image_width}, {"prompt_tokens", w.prompt_tokens},
          {"tokens", w.gen_tokens},       {"flow_steps", w.flow_steps}};
}

}  // namespace ferry::cli
