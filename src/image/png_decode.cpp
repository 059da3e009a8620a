// PNG through libpng's classic read API, giving the pixels transformers gets from a PIL image
// after convert_to_rgb (see image.h): palettes and low bit depths expanded by libpng, then
// 16-bit samples, colour keys and gray handled as PIL does (convert_row), and alpha composited
// over white. No gamma or colour management is applied (PIL applies none either).
//
// libpng reports errors through our error function, which longjmps back; as in the JPEG
// decoder, the setjmp functions hold only trivially destructible locals.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

#include <png.h>

#include "image/image.h"

namespace ferry {
namespace {

struct PngState {
  std::jmp_buf jump;
  char message[512] = {};
  char warning[256] = {};  // the last warning: libpng often explains an error in one just before
  const uint8_t* data = nullptr;
  size_t size = 0;
  size_t pos = 0;
};

[[noreturn]] void on_png_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  if (state->warning[0] != '\0') {
    std::snprintf(state->message, sizeof(state->message), "%.250s (%.250s)", message,
                  state->warning);
  } else {
    std::snprintf(state->message, sizeof(state->message), "%.500s", message);
  }
  std::longjmp(state->jump, 1);
}

// Warnings alone (ancillary-chunk trouble) do not stop decoding: PIL ignores them too.
void on_png_warning(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->warning, sizeof(state->warning), "%s", message);
}

void on_png_read(png_structp png, png_bytep out, size_t count) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (count > state->size - state->pos) png_error(png, "file is truncated");
  std::memcpy(out, state->data + state->pos, count);
  state->pos += count;
}

// One read struct and its info struct, destroyed by the destructor whatever happened.
struct PngDecoder {
  PngState state;
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngDecoder() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

struct PngHeader {
  png_uint_32 width = 0;
  png_uint_32 height = 0;
  int bit_depth = 0;  // of the source: 1, 2, 4, 8 or 16
  int color_type = 0;
  bool has_trns = false;
  png_color_16 trns{};  // tRNS colour key of gray and RGB images (raw sample values)
  size_t rowbytes = 0;  // after the transforms
  int channels = 0;     // after the transforms
};

// Phase 1: read every chunk up to the image data, set the transforms, report the output shape.
// libpng expands palettes (with tRNS into alpha) and 1/2/4-bit gray to 8 bits; 16-bit samples
// and the colour keys of gray and RGB images are left to convert_row, which follows PIL.
bool png_header_phase(PngDecoder* d, const DecodeLimits* limits, PngHeader* h) {
  if (setjmp(d->state.jump) != 0) return false;
  png_set_read_fn(d->png, &d->state, on_png_read);
  const auto side = static_cast<png_uint_32>(limits->max_side);
  png_set_user_limits(d->png, side, side);
  png_set_chunk_malloc_max(d->png, 64u << 20);  // one decompressed ancillary chunk (iCCP, zTXt)
  png_set_chunk_cache_max(d->png, 1000);        // sPLT, unknown chunks: bounded count
  png_read_info(d->png, d->info);

  h->width = png_get_image_width(d->png, d->info);
  h->height = png_get_image_height(d->png, d->info);
  h->bit_depth = png_get_bit_depth(d->png, d->info);
  h->color_type = png_get_color_type(d->png, d->info);
  h->has_trns = png_get_valid(d->png, d->info, PNG_INFO_tRNS) != 0;
  if (h->color_type == PNG_COLOR_TYPE_PALETTE) {
    png_set_palette_to_rgb(d->png);
    if (h->has_trns) png_set_tRNS_to_alpha(d->png);  // per-index alpha, as PIL's P -> RGBA
  } else if (h->has_trns) {
    png_color_16p key = nullptr;
    png_get_tRNS(d->png, d->info, nullptr, nullptr, &key);
    if (key != nullptr) h->trns = *key;
  }
  if (h->color_type == PNG_COLOR_TYPE_GRAY && h->bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(d->png);  // 1-bit 0/255, 2-bit ×85, 4-bit ×17, as PIL
  }
  png_set_interlace_handling(d->png);
  png_read_update_info(d->png, d->info);
  h->rowbytes = png_get_rowbytes(d->png, d->info);
  h->channels = png_get_channels(d->png, d->info);
  return true;
}

// Phase 2: the image data into `rows` (height pointers of rowbytes each).
bool png_pixels_phase(PngDecoder* d, png_bytepp rows) {
  if (setjmp(d->state.jump) != 0) return false;
  png_read_image(d->png, rows);
  return true;
}

// One decoded row (channels samples of 1 or 2 big-endian bytes per pixel) to RGBA, as PIL
// decodes it and convert("RGBA") converts it:
//   - 16-bit samples keep their high byte, except 16-bit gray, which PIL opens as I;16 and
//     clips to 255 when converting;
//   - a tRNS colour key makes matching pixels transparent (transformers 5 composites every image
//     that has a key); PIL compares 1-bit gray keys scaled to 255, 16-bit gray keys against the
//     16-bit sample, and every other key as stored (16-bit RGB keys too) against the 8-bit pixel.
void convert_row(const PngHeader& h, const uint8_t* in, uint8_t* rgba) {
  const bool wide = h.bit_depth == 16 && h.color_type != PNG_COLOR_TYPE_PALETTE;
  const size_t bytes = wide ? 2 : 1;
  auto sample = [&](size_t i) -> unsigned {
    return wide ? (in[2 * i] << 8) | in[2 * i + 1] : in[i];
  };
  auto high = [&](size_t i) -> uint8_t { return in[bytes * i]; };
  const auto n = static_cast<size_t>(h.width);
  for (size_t x = 0; x < n; ++x) {
    uint8_t* o = rgba + 4 * x;
    const auto ch = static_cast<size_t>(h.channels);
    bool keyed = false;
    if (h.color_type == PNG_COLOR_TYPE_GRAY) {
      const unsigned v = sample(x);
      const uint8_t g = wide ? static_cast<uint8_t>(std::min(v, 255u)) : static_cast<uint8_t>(v);
      const unsigned key = h.bit_depth == 1 ? h.trns.gray * 255u : h.trns.gray;
      keyed = h.has_trns && (wide ? v == h.trns.gray : g == key);
      o[0] = o[1] = o[2] = g;
      o[3] = 255;
    } else if (h.color_type == PNG_COLOR_TYPE_GRAY_ALPHA) {
      o[0] = o[1] = o[2] = high(2 * x);
      o[3] = high(2 * x + 1);
    } else {  // RGB, RGBA, or a palette expanded to RGB(A)
      for (size_t c = 0; c < 3; ++c) o[c] = high(ch * x + c);
      o[3] = ch == 4 ? high(ch * x + 3) : 255;
      keyed = h.has_trns && h.color_type == PNG_COLOR_TYPE_RGB && o[0] == h.trns.red &&
              o[1] == h.trns.green && o[2] == h.trns.blue;
    }
    if (keyed) o[3] = 0;
  }
}

Error png_error_value(const std::string& label, const char* message) {
  return make_error(ErrorCode::format, label + ": PNG: " + message);
}

}  // namespace

Result<RgbImage> decode_png(std::span<const uint8_t> bytes, const std::string& label,
                            const DecodeLimits& limits) {
  // IHDR is always the first chunk: check its size before libpng (whose own user limits stay
  // on as a second guard) so that an oversized file gets the same error as an oversized JPEG.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return (int64_t{bytes[at]} << 24) | (int64_t{bytes[at + 1]} << 16) |
             (int64_t{bytes[at + 2]} << 8) | int64_t{bytes[at + 3]};
    };
    const int64_t width = be32(16), height = be32(20);
    if (width > 0 && height > 0) {
      FERRY_RETURN_IF_ERROR(check_image_size(height, width, label, limits));
    }
  }
  auto d = std::make_unique<PngDecoder>();
  d->state.data = bytes.data();
  d->state.size = bytes.size();
  d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &d->state, on_png_error, on_png_warning);
  if (d->png == nullptr) return png_error_value(label, "cannot create a decoder");
  d->info = png_create_info_struct(d->png);
  if (d->info == nullptr) return png_error_value(label, "cannot create a decoder");

  PngHeader h;
  if (!png_header_phase(d.get(), &limits, &h)) return png_error_value(label, d->state.message);
  const int64_t height = h.height, width = h.width;
  FERRY_RETURN_IF_ERROR(check_image_size(height, width, label, limits));
  const size_t sample_bytes = h.bit_depth == 16 && h.color_type != PNG_COLOR_TYPE_PALETTE ? 2 : 1;
  if (h.channels < 1 || h.channels > 4 ||
      h.rowbytes != static_cast<size_t>(width) * static_cast<size_t>(h.channels) * sample_bytes) {
    return png_error_value(label, "unexpected row layout after the transforms");
  }

  std::vector<uint8_t> pixels(static_cast<size_t>(height) * h.rowbytes);
  std::vector<png_bytep> rows(static_cast<size_t>(height));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = pixels.data() + y * h.rowbytes;
  if (!png_pixels_phase(d.get(), rows.data())) return png_error_value(label, d->state.message);
  std::vector<uint8_t> rgba(static_cast<size_t>(height * width) * 4);
  for (size_t y = 0; y < rows.size(); ++y) {
    convert_row(h, rows[y], rgba.data() + y * static_cast<size_t>(width) * 4);
  }
  return planar_from_interleaved(rgba, height, width, 4);
}

}  // namespace ferry
