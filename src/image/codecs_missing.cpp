// Built instead of the decoders when CMake found no libjpeg or libpng: decode_image already
// answers "unsupported" before reaching these, which only keep the link complete.
#include "image/image.h"

namespace ferry {

Result<RgbImage> decode_jpeg(std::span<const uint8_t>, const std::string& label,
                             const DecodeLimits&) {
  return make_error(ErrorCode::unsupported, label + ": built without libjpeg");
}

Result<RgbImage> decode_png(std::span<const uint8_t>, const std::string& label,
                            const DecodeLimits&) {
  return make_error(ErrorCode::unsupported, label + ": built without libpng");
}

Result<std::string> encode_png(const RgbImage&) {
  return make_error(ErrorCode::unsupported, "png: built without libpng");
}

}  // namespace ferry
