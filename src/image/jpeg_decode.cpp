// JPEG through libjpeg(-turbo)'s classic API, with the library's defaults (accurate integer
// IDCT, fancy upsampling), which are also PIL's: the same libjpeg-turbo gives the same pixels.
//
// libjpeg reports errors by calling error_exit, which must not return: we longjmp back. The
// functions that call setjmp hold only trivially destructible locals, and allocation happens
// between the two protected phases, so a longjmp never skips a C++ destructor.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "image/image.h"

namespace ferry {
namespace {

// Progressive files can carry thousands of tiny scans that each cost a pass over the whole
// coefficient buffer; libjpeg-turbo's own limit (TJFLAG_LIMITSCANS) is 500.
constexpr int kMaxScans = 500;

struct JpegErrorState {
  jpeg_error_mgr mgr;  // first member: libjpeg hands back cinfo->err
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_jpeg_error(j_common_ptr cinfo) {
  auto* state = reinterpret_cast<JpegErrorState*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, state->message);
  std::longjmp(state->jump, 1);
}

// Level -1 is a warning about the data (corrupt entropy data, premature end, extraneous
// bytes): the pixels would be partly invented, so it is an error here. Higher levels are trace.
void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level < 0) on_jpeg_error(cinfo);
}

void on_jpeg_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* state = reinterpret_cast<JpegErrorState*>(cinfo->err);
    std::snprintf(state->message, sizeof(state->message), "more than %d scans", kMaxScans);
    std::longjmp(state->jump, 1);
  }
}

// One decompressor: created once, destroyed by the destructor whatever happened.
struct JpegDecoder {
  jpeg_decompress_struct cinfo{};
  JpegErrorState err{};
  jpeg_progress_mgr progress{};
  bool created = false;
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// Phase 1: create, attach the bytes, read the header, choose the output colour space.
// Returns false on error (the message is in d->err.message).
bool jpeg_read_header_phase(JpegDecoder* d, const uint8_t* data, size_t size) {
  d->cinfo.err = jpeg_std_error(&d->err.mgr);
  d->err.mgr.error_exit = on_jpeg_error;
  d->err.mgr.emit_message = on_jpeg_message;
  if (setjmp(d->err.jump) != 0) return false;
  jpeg_create_decompress(&d->cinfo);
  d->created = true;
  d->progress.progress_monitor = on_jpeg_progress;
  d->cinfo.progress = &d->progress;
  jpeg_mem_src(&d->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d->cinfo, TRUE);
  return true;
}

// Phase 2: decode every scanline into `rgb` (height × width × 3 bytes, allocated by the caller).
bool jpeg_decode_phase(JpegDecoder* d, uint8_t* rgb) {
  if (setjmp(d->err.jump) != 0) return false;
  jpeg_start_decompress(&d->cinfo);
  if (d->cinfo.output_components != 3) {
    std::snprintf(d->err.message, sizeof(d->err.message), "decoder produced %d components",
                  d->cinfo.output_components);
    return false;
  }
  const size_t stride = static_cast<size_t>(d->cinfo.output_width) * 3;
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    JSAMPROW row = rgb + static_cast<size_t>(d->cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&d->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d->cinfo);
  return true;
}

Error jpeg_error(const std::string& label, const char* message) {
  return make_error(ErrorCode::format, label + ": JPEG: " + message);
}

}  // namespace

Result<RgbImage> decode_jpeg(std::span<const uint8_t> bytes, const std::string& label,
                             const DecodeLimits& limits) {
  auto d = std::make_unique<JpegDecoder>();
  if (!jpeg_read_header_phase(d.get(), bytes.data(), bytes.size())) {
    return jpeg_error(label, d->err.message);
  }
  const int64_t height = d->cinfo.image_height, width = d->cinfo.image_width;
  FERRY_RETURN_IF_ERROR(check_image_size(height, width, label, limits));
  switch (d->cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:  // replicated, as PIL's L -> RGB
    case JCS_YCbCr:
    case JCS_RGB:
      d->cinfo.out_color_space = JCS_RGB;
      break;
    default:
      return make_error(ErrorCode::unsupported,
                        label + ": JPEG: colour space " +
                            std::to_string(static_cast<int>(d->cinfo.jpeg_color_space)) +
                            " (CMYK or YCCK) is not supported");
  }
  std::vector<uint8_t> rgb(static_cast<size_t>(height * width * 3));
  if (!jpeg_decode_phase(d.get(), rgb.data())) return jpeg_error(label, d->err.message);
  if (static_cast<int64_t>(d->cinfo.output_height) != height ||
      static_cast<int64_t>(d->cinfo.output_width) != width) {
    return jpeg_error(label, "output size differs from the header");
  }

  return planar_from_interleaved(rgb, height, width, 3);
}

}  // namespace ferry
