#include "cli/workload_args.h"

#include "cli/flags.h"

namespace ferry::cli {

namespace {

// "320x576" (or "320X576"): each side a decimal integer in [1, kMaxImageSide].
Result<ImageSize> parse_image_size(const std::string& text) {
  const size_t x = text.find_first_of("xX");
  if (x == std::string::npos) {
    return make_error(ErrorCode::invalid_argument,
                      "--image-size: expected HxW, e.g. 320x576, got " + text);
  }
  const Result<int64_t> h = parse_int_flag("--image-size", text.substr(0, x), 1, kMaxImageSide);
  const Result<int64_t> w = parse_int_flag("--image-size", text.substr(x + 1), 1, kMaxImageSide);
  if (!h.ok()) return h.error();
  if (!w.ok()) return w.error();
  return ImageSize{*h, *w};
}

}  // namespace

void add_workload_options(CLI::App* cmd, WorkloadArgs* a, WorkloadDefaults defaults) {
  const bool quick = defaults == WorkloadDefaults::quick;
  add_int_option(
      cmd, "--images", &a->images, 0, kMaxImages,
      quick ? "Images (vision models; default 2)" : "Images (vision models; default 16 full-size)");
  cmd->add_option_function<std::string>(
         "--image-size",
         [a](const std::string& text) {
           Result<ImageSize> s = parse_image_size(text);
           if (!s.ok()) throw CLI::ValidationError(s.error().message);
           a->image_size = *s;
         },
         "HxW in pixels, multiples of 32 (default 320x576 full-size, 128x192 tiny)")
      ->type_name("HxW");
  add_int_option(cmd, "--prompt-tokens", &a->prompt_tokens, 1, kMaxSequence,
                 "Total prompt length (text + image)");
  add_int_option(cmd, "--tokens", &a->tokens, 1, kMaxSequence,
                 quick ? "Tokens a synthetic run generates (default 8)"
                       : "Tokens to generate (default 21 full-size)");
  add_int_option(cmd, "--steps", &a->steps, 1, kMaxFlowSteps, "Flow-matching steps (Alpamayo)");
}

bool tiny_model(const ModelConfig& config) {
  return config.text().hidden_size < 1024;
}

Result<Workload> make_workload(const WorkloadArgs& a, const ModelConfig& config,
                               WorkloadDefaults defaults) {
  const bool full = !tiny_model(config);
  const bool reference = defaults == WorkloadDefaults::reference;
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--images", a.images.has_value(), FlagNeeds::vision));
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--image-size", a.image_size.has_value(), FlagNeeds::vision));
  FERRY_RETURN_IF_ERROR(
      check_flag_applies(config, "--steps", a.steps.has_value(), FlagNeeds::action_expert));
  Workload w;
  w.seed = 1;
  w.gen_tokens = a.tokens.value_or(full && reference ? 21 : 8);
  if (config.vlm() != nullptr) {
    w.num_images = a.images.value_or(full && reference ? 16 : 2);
    const ImageSize size = full ? ImageSize{320, 576} : ImageSize{128, 192};
    w.image_height = a.image_size.value_or(size).height;
    w.image_width = a.image_size.value_or(size).width;
  }
  if (const AlpamayoConfig* ar = config.alpamayo()) {
    w.flow_steps = a.steps.value_or(ar->diffusion.num_inference_steps);
  }
  // The reference prompt of a full-size model; else the image tokens plus ~120 text tokens (64
  // for a text-only model). A prompt given shorter than its fixed parts is an error, not
  // silently lengthened.
  const int64_t fallback = config.vlm() != nullptr
                               ? (full && reference ? 3007 : image_tokens(w, config) + 120)
                               : (full && reference ? 1500 : 64);
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
