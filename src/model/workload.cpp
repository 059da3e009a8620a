#include "model/workload.h"

#include <string>

namespace ferry {

namespace {
Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, msg);
}
}  // namespace

Status validate_workload(const Workload& w, const ModelConfig& config) {
  const bool vision =
      config.arch == Architecture::qwen3_vl || config.arch == Architecture::alpamayo_r1;
  if (w.gen_tokens < 1) return bad("workload: tokens must be at least 1");
  if (w.num_images < 0) return bad("workload: images must not be negative");
  if (w.num_images > 0 && !vision) {
    return bad(std::string("workload: ") + architecture_name(config.arch) +
               " is a text-only model; it takes no images");
  }
  if (w.num_images > 0) {
    if (w.image_height < 32 || w.image_width < 32 || w.image_height % 32 != 0 ||
        w.image_width % 32 != 0) {
      return bad("workload: image size " + std::to_string(w.image_height) + "x" +
                 std::to_string(w.image_width) + " is not a positive multiple of 32 on both sides");
    }
  }
  if (w.prompt_tokens < 1) return bad("workload: prompt tokens must be at least 1");
  if (config.arch == Architecture::alpamayo_r1 && w.flow_steps < 1) {
    return bad("workload: flow steps must be at least 1");
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
