// Decoded images and the decoders (JPEG through libjpeg-turbo, PNG through libpng).
//
// Every decoded image is 8-bit RGB, planar [3, height, width]: the uint8 CHW tensor that
// transformers' fast image processor hands to torchvision. Files are hostile input: sizes are
// checked against DecodeLimits before anything is allocated, and every decoder error, warning
// or truncation comes back as one line (ErrorCode::format), never a crash.
//
// Conversion to RGB follows what transformers does with a PIL image (PIL's decoders, then
// `convert_to_rgb`: RGBA composited over white): gray is replicated, palettes are expanded,
// 16-bit samples keep their high byte, and any alpha (an alpha channel, a palette's or a tRNS
// color key) is composited over white with PIL's integer formula. docs/images.md lists the
// cases and what was compared.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry {

struct RgbImage {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> planes;  // [3, height, width]: R plane, G plane, B plane

  size_t plane_size() const { return static_cast<size_t>(height * width); }
  uint8_t* plane(int c) { return planes.data() + static_cast<size_t>(c) * plane_size(); }
  const uint8_t* plane(int c) const {
    return planes.data() + static_cast<size_t>(c) * plane_size();
  }
};

// Caps on what a decoder accepts; checked from the header, before pixels are allocated.
struct DecodeLimits {
  int64_t max_side = 32768;            // pixels, either dimension
  int64_t max_pixels = 1ll << 26;      // height × width (64 Mi pixels: 192 MiB of RGB)
  int64_t max_file_bytes = 1ll << 28;  // 256 MiB
};

// The container, from the first bytes.
enum class ImageFormat { unknown, jpeg, png };
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);

// Decodes JPEG or PNG bytes. `label` starts every error message (usually the file name).
Result<RgbImage> decode_image(std::span<const uint8_t> bytes, const std::string& label,
                              const DecodeLimits& limits = {});
// Reads and decodes one file.
Result<RgbImage> read_image(const std::string& path, const DecodeLimits& limits = {});

// An 8-bit RGB PNG of the image (libpng), for pictures ferry draws; unsupported without libpng.
Result<std::string> encode_png(const RgbImage& image);

// Whether this build has the decoders (CMake found libjpeg and libpng); without them
// decode_image returns ErrorCode::unsupported.
bool image_codecs_available();

// Internal to src/image: the per-format decoders behind decode_image (bytes already sniffed).
Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes, const std::string& label,
                             const DecodeLimits& limits);
Result<RgbImage> decode_png(std::span<const uint8_t> bytes, const std::string& label,
                            const DecodeLimits& limits);

// [height, width, channels] interleaved rows (3: RGB, 4: RGBA, composited over white) to a
// planar RgbImage.
RgbImage planar_from_interleaved(std::span<const uint8_t> pixels, int64_t height, int64_t width,
                                 int channels);

// Checks a header's dimensions against the limits: "label: image is 40000x10 pixels, ...".
Status check_image_size(int64_t height, int64_t width, const std::string& label,
                        const DecodeLimits& limits);

// PIL's Image.alpha_composite of (r, g, b, a) over opaque white, one channel: what
// transformers' convert_to_rgb produces for a pixel with alpha.
inline uint8_t composite_over_white(uint8_t value, uint8_t alpha) {
  if (alpha == 0) return 255;
  // PIL blends with 7 fractional bits (weights a·128 and (255 − a)·128 of 255·128) and divides
  // by 255 as (v + (v >> 8)) >> 8 after adding a half; both steps are integer, reproduced here.
  const uint32_t blended = 128u * (uint32_t{value} * alpha + 255u * (255u - alpha)) + (128u << 7);
  return static_cast<uint8_t>((((blended >> 8) + blended) >> 8) >> 7);
}

}  // namespace ferry
