#include "model/workload.h"

#include <algorithm>
#include <string>

namespace ferry {

namespace {
Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, msg);
}
}  // namespace

int64_t image_size_unit(const ModelConfig& config) {
  const Qwen3VLConfig* vlm = config.vlm();
  return vlm != nullptr ? vlm->vision.patch_size * vlm->vision.spatial_merge_size : 0;
}

int64_t image_tokens(const Workload& w, const ModelConfig& config) {
  const int64_t unit = image_size_unit(config);
  if (unit <= 0 || w.num_images < 0 || w.num_images > kMaxImages || w.image_height < 0 ||
      w.image_height > kMaxImageSide || w.image_width < 0 || w.image_width > kMaxImageSide) {
    return 0;
  }
  return w.num_images * (w.image_height / unit) * (w.image_width / unit);  // < 2^8 · 2^16
}

Status validate_workload(const Workload& w, const ModelConfig& config) {
  const bool vision =
      config.arch == Architecture::qwen3_vl || config.arch == Architecture::alpamayo_r1;
  if (w.gen_tokens < 1) return bad("workload: tokens must be at least 1");
  if (w.num_images < 0) return bad("workload: images must not be negative");
  if (w.num_images > kMaxImages) {
    return bad("workload: at most " + std::to_string(kMaxImages) + " images, got " +
               std::to_string(w.num_images));
  }
  if (w.num_images > 0 && !vision) {
    return bad(std::string("workload: ") + architecture_name(config.arch) +
               " is a text-only model; it takes no images");
  }
  if (w.num_images > 0) {
    const int64_t unit = image_size_unit(config);
    if (w.image_height < unit || w.image_width < unit || w.image_height % unit != 0 ||
        w.image_width % unit != 0 || w.image_height > kMaxImageSide ||
        w.image_width > kMaxImageSide) {
      return bad("workload: image size " + std::to_string(w.image_height) + "x" +
                 std::to_string(w.image_width) + " must be a positive multiple of " +
                 std::to_string(unit) + " (patch x merge) on both sides, at most " +
                 std::to_string(kMaxImageSide));
    }
  }
  if (w.prompt_tokens < 1) return bad("workload: prompt tokens must be at least 1");
  const int64_t model_limit = config.text().max_position_embeddings;
  const int64_t limit = model_limit > 0 ? std::min(model_limit, kMaxSequence) : kMaxSequence;
  if (w.prompt_tokens > limit || w.gen_tokens > limit - w.prompt_tokens) {
    return bad("workload: prompt (" + std::to_string(w.prompt_tokens) + ") + generated (" +
               std::to_string(w.gen_tokens) + ") tokens exceed " + std::to_string(limit) +
               (model_limit > 0 && model_limit <= kMaxSequence
                    ? " (the model's max_position_embeddings)"
                    : ""));
  }
  if (config.arch == Architecture::alpamayo_r1 &&
      (w.flow_steps < 1 || w.flow_steps > kMaxFlowSteps)) {
    return bad("workload: flow steps must be in [1, " + std::to_string(kMaxFlowSteps) + "], got " +
               std::to_string(w.flow_steps));
  }
  if (!w.sampling.greedy) {
    if (!(w.sampling.temperature > 0.0f)) return bad("workload: temperature must be > 0");
    if (!(w.sampling.top_p > 0.0f && w.sampling.top_p <= 1.0f)) {
      return bad("workload: top-p must be in (0, 1]");
    }
  }
  return {};
}

int64_t decode_steps(const ModelConfig& config, const Workload& w) {
  return config.arch == Architecture::alpamayo_r1 ? w.gen_tokens : w.gen_tokens - 1;
}

}  // namespace ferry
