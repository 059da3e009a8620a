// libFuzzer target: image decoding (JPEG through libjpeg, PNG through libpng) and the Qwen3-VL
// resize of whatever decodes. Any input must give an image of consistent size or an error,
// never a crash, a leak or a sanitizer report; a decoded image must resize and patchify.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "image/image.h"
#include "image/qwen_vl_preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ferry::DecodeLimits limits;
  limits.max_side = 4096;  // keeps every run fast; the checks are the same at any bound
  limits.max_pixels = 1 << 20;
  auto image = ferry::decode_image(std::span<const uint8_t>(data, size), "fuzz", limits);
  if (!image.ok()) return 0;
  if (image->height < 1 || image->width < 1 ||
      image->planes.size() != 3 * static_cast<size_t>(image->height * image->width)) {
    std::abort();
  }
  ferry::VisionPreprocessConfig cfg;
  cfg.min_pixels = 1024;
  cfg.max_pixels = 16384;
  cfg.limits = limits;
  auto pre = ferry::preprocess_decoded(std::span<const ferry::RgbImage>(&*image, 1), cfg);
  if (pre.ok() && pre->num_patches() != pre->grid_thw[0][1] * pre->grid_thw[0][2]) std::abort();
  return 0;
}
