// Qwen3-VL image preprocessing, as transformers' fast image processor does it (spec §4.2):
// decode -> smart_resize -> torchvision bicubic antialiased resize on uint8 -> fused rescale and
// normalize in f32 -> the still image repeated to temporal_patch_size frames -> patches in the
// 2×2-merge-window order of spec §3.1. The output is what the vision encoder's upload_pixels
// takes, the drop-in replacement for synthetic_pixel_values (model/vision_encoder.h).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "image/image.h"
#include "model/config.h"

namespace ferry {

// The processor parameters that change the pixels (preprocessor_config.json).
struct VisionPreprocessConfig {
  int64_t min_pixels = 65536;     // size.shortest_edge, or min_pixels when present
  int64_t max_pixels = 16777216;  // size.longest_edge, or max_pixels when present
  int64_t patch_size = 16;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  std::array<double, 3> image_mean{0.5, 0.5, 0.5};
  std::array<double, 3> image_std{0.5, 0.5, 0.5};
  double rescale_factor = 1.0 / 255.0;
  DecodeLimits limits;  // caps on the input files

  // Qwen3-VL's published processor (Qwen/Qwen3-VL-*-Instruct preprocessor_config.json).
  static VisionPreprocessConfig qwen3_vl() { return {}; }
  // What Alpamayo-R1's helper asks for (spec §4.2): Qwen3-VL's processor with
  // min_pixels = 163840, max_pixels = 196608, so 1080×1920 frames become 320×576.
  static VisionPreprocessConfig alpamayo_r1();

  int64_t factor() const { return patch_size * merge_size; }  // both sides are multiples of it
  int64_t patch_values() const { return 3 * temporal_patch_size * patch_size * patch_size; }
};

// Parses a preprocessor_config.json. Keys that do not change pixels are ignored; settings
// ferry does not implement (do_resize / do_rescale / do_normalize false, a resample other than
// bicubic) are ErrorCode::unsupported, out-of-range values ErrorCode::format.
Result<VisionPreprocessConfig> parse_preprocessor_config(std::string_view json_text,
                                                         const std::string& label);
// Reads DIR/preprocessor_config.json, or the "image_processor" object of
// DIR/processor_config.json, else returns Qwen3-VL's defaults.
Result<VisionPreprocessConfig> load_preprocessor_config(const std::string& model_dir);
// The processor and the vision tower must agree on patch, temporal patch and merge sizes.
Status check_preprocess_matches(const VisionPreprocessConfig& pre, const VisionConfig& vision);

// transformers' smart_resize: both sides multiples of factor(), the pixel count brought
// within [min_pixels, max_pixels] keeping the aspect ratio; errors on an aspect ratio above 200.
struct ResizedSize {
  int64_t height = 0;
  int64_t width = 0;
};
Result<ResizedSize> smart_resize(int64_t height, int64_t width, const VisionPreprocessConfig& cfg);

struct PreprocessedImages {
  int64_t patch_values = 0;         // 3 · temporal_patch_size · patch_size²
  std::vector<float> pixel_values;  // [num_patches, patch_values] row-major, images in order
  std::vector<std::array<int64_t, 3>> grid_thw;  // per image (t, h, w) in patches: image_grid_thw
  std::vector<ResizedSize> sizes;                // per image, after smart_resize

  int64_t num_patches() const;
};

// Decodes, resizes and patchifies every file, in order (images run on parallel threads; the
// result does not depend on how many). Errors name the file.
Result<PreprocessedImages> preprocess_images(std::span<const std::string> paths,
                                             const VisionPreprocessConfig& cfg);
// The same from decoded images.
Result<PreprocessedImages> preprocess_decoded(std::span<const RgbImage> images,
                                              const VisionPreprocessConfig& cfg);

// The resized uint8 image (smart_resize + resize_bicubic_aa): what torchvision produced before
// normalization, for tests and dumps.
Result<RgbImage> qwen_vl_resize(const RgbImage& image, const VisionPreprocessConfig& cfg);
// Normalizes and patchifies one resized image into `out` (exactly patches × patch_values floats,
// patches = (height / patch_size) · (width / patch_size)).
Status patchify_into(const RgbImage& resized, const VisionPreprocessConfig& cfg,
                     std::span<float> out);

}  // namespace ferry
