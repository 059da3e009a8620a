// Format sniffing, size checks and file reading shared by the JPEG and PNG decoders.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "image/image.h"

namespace ferry {

ImageFormat sniff_image_format(std::span<const uint8_t> bytes) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 3 && bytes[0] == 0xff && bytes[1] == 0xd8 && bytes[2] == 0xff) {
    return ImageFormat::jpeg;
  }
  if (bytes.size() >= 8 && std::equal(kPng, kPng + 8, bytes.begin())) return ImageFormat::png;
  return ImageFormat::unknown;
}

Status check_image_size(int64_t height, int64_t width, const std::string& label,
                        const DecodeLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (height <= 0 || width <= 0) {
    return make_error(ErrorCode::format, label + ": image has no pixels (" + size + ")");
  }
  if (height > limits.max_side || width > limits.max_side ||
      height * width > limits.max_pixels) {  // both ≤ max_side ≤ 2^31: no overflow
    return make_error(ErrorCode::invalid_argument,
                      label + ": image is " + size + " pixels, over the limit of " +
                          std::to_string(limits.max_side) + " per side and " +
                          std::to_string(limits.max_pixels) + " in all");
  }
  return Status::ok_status();
}

bool image_codecs_available() {
#ifdef FERRY_HAVE_IMAGE_CODECS
  return true;
#else
  return false;
#endif
}

RgbImage planar_from_interleaved(std::span<const uint8_t> pixels, int64_t height, int64_t width,
                                 int channels) {
  RgbImage image{height, width, std::vector<uint8_t>(static_cast<size_t>(3 * height * width))};
  const size_t n = image.plane_size(), step = static_cast<size_t>(channels);
  for (size_t c = 0; c < 3; ++c) {
    uint8_t* out = image.plane(static_cast<int>(c));
    if (channels == 4) {
      for (size_t i = 0; i < n; ++i) {
        out[i] = composite_over_white(pixels[step * i + c], pixels[step * i + 3]);
      }
    } else {
      for (size_t i = 0; i < n; ++i) out[i] = pixels[step * i + c];
    }
  }
  return image;
}

Result<RgbImage> decode_image(std::span<const uint8_t> bytes, const std::string& label,
                              const DecodeLimits& limits) {
  if (limits.max_side <= 0 || limits.max_side > (1ll << 31) || limits.max_pixels <= 0) {
    return make_error(ErrorCode::invalid_argument, label + ": bad decode limits");
  }
  if (static_cast<int64_t>(bytes.size()) > limits.max_file_bytes) {
    return make_error(ErrorCode::invalid_argument,
                      label + ": file of " + std::to_string(bytes.size()) +
                          " bytes is over the limit of " + std::to_string(limits.max_file_bytes));
  }
  if (!image_codecs_available()) {
    return make_error(ErrorCode::unsupported,
                      label + ": this ferry was built without libjpeg/libpng (see docs/images.md)");
  }
  switch (sniff_image_format(bytes)) {
    case ImageFormat::jpeg:
      return decode_jpeg(bytes, label, limits);
    case ImageFormat::png:
      return decode_png(bytes, label, limits);
    case ImageFormat::unknown:
      break;
  }
  return make_error(ErrorCode::unsupported, label + ": not a JPEG or PNG file");
}

Result<RgbImage> read_image(const std::string& path, const DecodeLimits& limits) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return make_error(ErrorCode::io, path + ": cannot open");
  const std::streamoff size = f.tellg();
  if (size < 0) return make_error(ErrorCode::io, path + ": cannot read");
  if (size > limits.max_file_bytes) {
    return make_error(ErrorCode::invalid_argument, path + ": file of " + std::to_string(size) +
                                                       " bytes is over the limit of " +
                                                       std::to_string(limits.max_file_bytes));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(bytes.data()), size)) {
    return make_error(ErrorCode::io, path + ": cannot read");
  }
  return decode_image(bytes, path, limits);
}

}  // namespace ferry
