// Runs ferry's image decoding and Qwen3-VL preprocessing on files and writes .npy dumps, for
// tests/python/test_images.py and scripts/compare_image_processor.py.
//
//   ferry_image_dump decode OUT_DIR IMAGE...
//     per image one line, "ok WIDTHxHEIGHT" or "error: MESSAGE", and on success
//     OUT_DIR/decoded_I.npy [3, H, W] u1
//   ferry_image_dump preprocess [--min-pixels N] [--max-pixels N] [--config JSON] OUT_DIR IMAGE...
//     OUT_DIR/resized_I.npy [3, h, w] u1 (before normalization), pixel_values.npy
//     [patches, patch_values] f4, image_grid_thw.npy [images, 3] i8; errors: one line, exit 2
#include <cstdio>
#include <string>
#include <vector>

#include "api/npy.h"
#include "image/image.h"
#include "image/qwen_vl_preprocess.h"

namespace ferry {
namespace {

Status write_planes(const std::string& path, const RgbImage& im) {
  return write_npy(path, std::span<const uint8_t>(im.planes), {3, im.height, im.width});
}

int run_decode(const std::string& out, const std::vector<std::string>& files) {
  for (size_t i = 0; i < files.size(); ++i) {
    Result<RgbImage> im = read_image(files[i]);
    if (!im.ok()) {
      std::printf("error: %s\n", im.error().message.c_str());
      continue;
    }
    std::printf("ok %lldx%lld\n", static_cast<long long>(im->width),
                static_cast<long long>(im->height));
    Status s = write_planes(out + "/decoded_" + std::to_string(i) + ".npy", *im);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
      return 2;
    }
  }
  return 0;
}

Status run_preprocess(const VisionPreprocessConfig& cfg, const std::string& out,
                      const std::vector<std::string>& files) {
  FERRY_ASSIGN_OR_RETURN(PreprocessedImages pre, preprocess_images(files, cfg));
  for (size_t i = 0; i < files.size(); ++i) {  // the uint8 stage, for diagnosing differences
    FERRY_ASSIGN_OR_RETURN(RgbImage im, read_image(files[i], cfg.limits));
    FERRY_ASSIGN_OR_RETURN(RgbImage resized, qwen_vl_resize(im, cfg));
    FERRY_RETURN_IF_ERROR(write_planes(out + "/resized_" + std::to_string(i) + ".npy", resized));
  }
  FERRY_RETURN_IF_ERROR(write_npy(out + "/pixel_values.npy",
                                  std::span<const float>(pre.pixel_values),
                                  {pre.num_patches(), pre.patch_values}));
  std::vector<int64_t> grid;
  for (const auto& g : pre.grid_thw) grid.insert(grid.end(), g.begin(), g.end());
  return write_npy(out + "/image_grid_thw.npy", std::span<const int64_t>(grid),
                   {static_cast<int64_t>(pre.grid_thw.size()), 3});
}

int usage() {
  std::fprintf(stderr,
               "usage: ferry_image_dump decode OUT_DIR IMAGE...\n"
               "       ferry_image_dump preprocess [--min-pixels N] [--max-pixels N] "
               "[--config JSON] OUT_DIR IMAGE...\n");
  return 2;
}

int main_impl(int argc, char** argv) {
  if (argc < 4) return usage();
  const std::string mode = argv[1];
  VisionPreprocessConfig cfg;
  int i = 2;
  for (; i + 1 < argc && std::string(argv[i]).rfind("--", 0) == 0; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--min-pixels") {
      cfg.min_pixels = std::stoll(value);
    } else if (flag == "--max-pixels") {
      cfg.max_pixels = std::stoll(value);
    } else if (flag == "--config") {
      Result<VisionPreprocessConfig> c = parse_preprocessor_config(value, "--config");
      if (!c.ok()) {
        std::fprintf(stderr, "error: %s\n", c.error().message.c_str());
        return 2;
      }
      cfg = *c;
    } else {
      return usage();
    }
  }
  if (argc - i < 2) return usage();
  const std::string out = argv[i];
  const std::vector<std::string> files(argv + i + 1, argv + argc);
  if (mode == "decode") return run_decode(out, files);
  if (mode != "preprocess") return usage();
  Status s = run_preprocess(cfg, out, files);
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.error().message.c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  return ferry::main_impl(argc, argv);
}
