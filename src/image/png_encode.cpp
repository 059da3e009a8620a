// PNG writing through libpng's classic write API: 8-bit RGB, no interlace, default compression.
// Errors longjmp back to the one setjmp function, which holds only trivially destructible locals
// (as the decoders do).
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <vector>

#include <png.h>

#include "image/image.h"

namespace ferry {
namespace {

struct PngWriteState {
  std::jmp_buf jump;
  char message[256] = {};
  std::string* out = nullptr;
};

[[noreturn]] void on_write_error(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngWriteState*>(png_get_error_ptr(png));
  std::snprintf(state->message, sizeof(state->message), "%s", message);
  std::longjmp(state->jump, 1);
}

void on_write_warning(png_structp, png_const_charp) {}

void on_write(png_structp png, png_bytep data, size_t count) {
  auto* state = static_cast<PngWriteState*>(png_get_io_ptr(png));
  state->out->append(reinterpret_cast<const char*>(data), count);
}

void on_flush(png_structp) {}

struct PngEncoder {
  PngWriteState state;
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngEncoder() {
    if (png != nullptr) png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
  }
};

bool png_write_phase(PngEncoder* e, png_uint_32 width, png_uint_32 height, png_bytepp rows) {
  if (setjmp(e->state.jump) != 0) return false;
  png_set_write_fn(e->png, &e->state, on_write, on_flush);
  png_set_IHDR(e->png, e->info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(e->png, e->info);
  png_write_image(e->png, rows);
  png_write_end(e->png, e->info);
  return true;
}

}  // namespace

Result<std::string> encode_png(const RgbImage& image) {
  if (image.height < 1 || image.width < 1 || image.height > (1 << 20) || image.width > (1 << 20) ||
      image.planes.size() != 3 * image.plane_size()) {
    return make_error(ErrorCode::invalid_argument, "png: not a whole RGB image");
  }
  const auto w = static_cast<size_t>(image.width);
  const auto h = static_cast<size_t>(image.height);
  std::vector<uint8_t> interleaved(w * h * 3);
  for (size_t i = 0; i < w * h; ++i) {
    for (int c = 0; c < 3; ++c) interleaved[i * 3 + static_cast<size_t>(c)] = image.plane(c)[i];
  }
  std::vector<png_bytep> rows(h);
  for (size_t y = 0; y < h; ++y) rows[y] = interleaved.data() + y * w * 3;
  std::string out;
  PngEncoder e;
  e.state.out = &out;
  e.png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &e.state, on_write_error, on_write_warning);
  if (e.png == nullptr) return make_error(ErrorCode::internal, "png: libpng could not start");
  e.info = png_create_info_struct(e.png);
  if (e.info == nullptr) return make_error(ErrorCode::internal, "png: libpng could not start");
  if (!png_write_phase(&e, static_cast<png_uint_32>(w), static_cast<png_uint_32>(h), rows.data())) {
    return make_error(ErrorCode::internal, std::string("png: ") + e.state.message);
  }
  return out;
}

}  // namespace ferry
