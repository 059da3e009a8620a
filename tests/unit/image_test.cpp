// src/image: smart_resize, the resampling taps, patch order, processor config parsing and the
// decoders' handling of hostile bytes. Exactness against torchvision and Pillow is checked by
// tests/python/test_images.py on the committed fixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "image/image.h"
#include "image/qwen_vl_preprocess.h"
#include "image/resize.h"
#include "model/vision_encoder.h"
#include "scratch_dir.h"

namespace ferry {
namespace {

const std::string kFixtures = std::string(FERRY_SOURCE_DIR) + "/tests/fixtures/images/inputs/";

RgbImage random_image(int64_t h, int64_t w, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage im{h, w, std::vector<uint8_t>(static_cast<size_t>(3 * h * w))};
  for (uint8_t& v : im.planes) v = static_cast<uint8_t>(rng() & 0xff);
  return im;
}

TEST(SmartResize, MatchesTheProcessorOnKnownSizes) {
  const auto ar1 = VisionPreprocessConfig::alpamayo_r1();
  const auto qwen = VisionPreprocessConfig::qwen3_vl();
  struct Case {
    int64_t h, w;
    const VisionPreprocessConfig& cfg;
    int64_t eh, ew;
  };
  const Case cases[] = {
      {1080, 1920, ar1, 320, 576},     // spec §4.2: 20×36 patches
      {1080, 1920, qwen, 1088, 1920},  // within bounds: nearest multiples of 32
      {1, 1, qwen, 256, 256},          // below min_pixels: scaled up
      {48, 2000, qwen, 64, 1984},      // 1.5 rounds to 2 and 62.5 to 62 (ties to even)...
      {80, 2000, qwen, 64, 1984},      // ...and 2.5 to 2
      {112, 2000, qwen, 128, 1984},    // ...and 3.5 to 4
      {48, 1000, qwen, 64, 1184},      // 64×992 is below min_pixels: scaled up, ceiled
      {4000, 6000, ar1, 352, 512},     // above max_pixels: scaled down, floored
  };
  for (const Case& c : cases) {
    Result<ResizedSize> r = smart_resize(c.h, c.w, c.cfg);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->height, c.eh) << c.h << "x" << c.w;
    EXPECT_EQ(r->width, c.ew) << c.h << "x" << c.w;
    EXPECT_LE(r->height * r->width, std::max(c.cfg.max_pixels, c.cfg.min_pixels * 2));
  }
  EXPECT_FALSE(smart_resize(1, 201, qwen).ok());  // aspect ratio over 200
  EXPECT_TRUE(smart_resize(1, 200, qwen).ok());
  EXPECT_FALSE(smart_resize(0, 10, qwen).ok());
}

TEST(ResizeTaps, NormalizedWithinBoundsForUpAndDownScaling) {
  for (auto [in, out] : {std::pair<int64_t, int64_t>{1, 256},
                         {7, 64},
                         {100, 99},
                         {1920, 576},
                         {1080, 320},
                         {5, 5},
                         {257, 32},
                         {3, 1}}) {
    const ResampleTaps t = bicubic_aa_taps(in, out);
    ASSERT_GE(t.precision, 1);
    ASSERT_LE(t.precision, 22);
    for (int64_t i = 0; i < out; ++i) {
      const int64_t first = t.first[static_cast<size_t>(i)], n = t.count[static_cast<size_t>(i)];
      ASSERT_GE(first, 0);
      ASSERT_GE(n, 1);
      ASSERT_LE(n, t.max_taps);
      ASSERT_LE(first + n, in);
      const int16_t* w = t.weights.data() + i * t.max_taps;
      const int64_t sum = std::accumulate(w, w + n, int64_t{0});
      // Each weight is rounded once: the sum is within n/2 of one (2^P).
      EXPECT_LE(std::abs(sum - (int64_t{1} << t.precision)), n) << in << "->" << out << " @" << i;
    }
  }
}

TEST(Resize, ConstantStaysConstantAndSameSizeIsIdentity) {
  RgbImage flat{37, 53, std::vector<uint8_t>(3 * 37 * 53)};
  for (int c = 0; c < 3; ++c) std::fill_n(flat.plane(c), flat.plane_size(), uint8_t(40 + 90 * c));
  for (auto [h, w] : {std::pair<int64_t, int64_t>{320, 576}, {5, 3}, {37, 200}, {1, 1}}) {
    Result<RgbImage> r = resize_bicubic_aa(flat, h, w);
    ASSERT_TRUE(r.ok());
    for (int c = 0; c < 3; ++c) {
      for (size_t i = 0; i < r->plane_size(); ++i) ASSERT_EQ(r->plane(c)[i], 40 + 90 * c);
    }
  }
  const RgbImage noise = random_image(20, 30, 1);
  Result<RgbImage> same = resize_bicubic_aa(noise, 20, 30);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->planes, noise.planes);
  EXPECT_FALSE(resize_bicubic_aa(noise, 0, 5).ok());
}

TEST(Patchify, FollowsTheSpecLayoutAndNormalization) {
  // Spec §3.1: row ((t·H/32 + bh)·W/32 + bw)·4 + mh·2 + mw holds patch (2bh+mh, 2bw+mw);
  // column ((c·2+τ)·16+py)·16+px holds pixel (16·row+py, 16·col+px) of channel c.
  VisionPreprocessConfig cfg;
  cfg.image_mean = {0.48145466, 0.4578275, 0.40821073};  // CLIP's: not the 127.5 shortcut
  cfg.image_std = {0.26862954, 0.26130258, 0.27577711};
  const RgbImage im = random_image(64, 96, 7);
  const int64_t gh = 4, gw = 6, cols = cfg.patch_values();
  std::vector<float> out(static_cast<size_t>(gh * gw * cols));
  ASSERT_TRUE(patchify_into(im, cfg, out).ok());
  for (int64_t bh = 0; bh < gh / 2; ++bh) {
    for (int64_t bw = 0; bw < gw / 2; ++bw) {
      for (int64_t mh = 0; mh < 2; ++mh) {
        for (int64_t mw = 0; mw < 2; ++mw) {
          const int64_t row = (bh * (gw / 2) + bw) * 4 + mh * 2 + mw;
          for (int64_t c = 0; c < 3; ++c) {
            const float mean = static_cast<float>(cfg.image_mean[c]) * 255.0f;
            const float stdev = static_cast<float>(cfg.image_std[c]) * 255.0f;
            for (int64_t tau = 0; tau < 2; ++tau) {
              for (int64_t py = 0; py < 16; ++py) {
                for (int64_t px = 0; px < 16; ++px) {
                  const int64_t y = 16 * (2 * bh + mh) + py, x = 16 * (2 * bw + mw) + px;
                  const float v = im.plane(static_cast<int>(c))[y * im.width + x];
                  const int64_t col = ((c * 2 + tau) * 16 + py) * 16 + px;
                  ASSERT_EQ(out[static_cast<size_t>(row * cols + col)], (v - mean) / stdev);
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(Preprocess, SizesMatchTheVisionEncoderLayout) {
  VisionConfig vision;  // patch 16, temporal 2, merge 2, 3 channels
  const auto cfg = VisionPreprocessConfig::alpamayo_r1();
  ASSERT_TRUE(check_preprocess_matches(cfg, vision).ok());
  const std::vector<RgbImage> images = {random_image(90, 160, 2), random_image(33, 31, 3)};
  Result<PreprocessedImages> pre = preprocess_decoded(images, cfg);
  ASSERT_TRUE(pre.ok()) << pre.error().message;
  std::vector<ImageGeometry> geoms;
  for (const ResizedSize& s : pre->sizes) geoms.push_back({s.height, s.width});
  EXPECT_EQ(static_cast<int64_t>(pre->pixel_values.size()), pixel_value_count(geoms, vision));
  ASSERT_EQ(pre->grid_thw.size(), 2u);
  EXPECT_EQ(pre->grid_thw[0][0], 1);
  EXPECT_EQ(pre->grid_thw[0][1] * 16, pre->sizes[0].height);
  EXPECT_EQ(pre->num_patches(),
            pre->grid_thw[0][1] * pre->grid_thw[0][2] + pre->grid_thw[1][1] * pre->grid_thw[1][2]);
  VisionConfig other = vision;
  other.patch_size = 14;
  EXPECT_FALSE(check_preprocess_matches(cfg, other).ok());
}

TEST(PreprocessorConfig, ParsesThePublishedQwen3VLFile) {
  const std::string published = R"({
    "size": {"longest_edge": 16777216, "shortest_edge": 65536},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast"})";
  Result<VisionPreprocessConfig> c = parse_preprocessor_config(published, "p");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->min_pixels, 65536);
  EXPECT_EQ(c->max_pixels, 16777216);
  EXPECT_EQ(c->patch_values(), 1536);

  c = parse_preprocessor_config(
      R"({"size": {"longest_edge": 16777216, "shortest_edge": 65536},
          "min_pixels": 163840, "max_pixels": 196608, "resample": 3, "do_resize": true,
          "rescale_factor": 0.00392156862745098})",
      "p");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->min_pixels, 163840);  // min_pixels / max_pixels win over size
  EXPECT_EQ(c->max_pixels, 196608);
}

TEST(PreprocessorConfig, RefusesWhatItCannotDo) {
  const std::pair<const char*, ErrorCode> bad[] = {
      {R"({"resample": 2})", ErrorCode::unsupported},
      {R"({"do_normalize": false})", ErrorCode::unsupported},
      {R"({"patch_size": 0})", ErrorCode::format},
      {R"({"patch_size": "16"})", ErrorCode::format},
      {R"({"image_std": [0.5, 0, 0.5]})", ErrorCode::format},
      {R"({"image_mean": [0.5, 0.5]})", ErrorCode::format},
      {R"({"min_pixels": 300000, "max_pixels": 200000})", ErrorCode::format},
      {R"({"max_pixels": 99999999999})", ErrorCode::format},
      {R"({"patch_size": 16, "patch_size": 14})", ErrorCode::format},  // duplicate key
      {R"([1, 2])", ErrorCode::format},
      {R"({"size": )", ErrorCode::format},
  };
  for (const auto& [text, code] : bad) {
    Result<VisionPreprocessConfig> c = parse_preprocessor_config(text, "cfg.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.error().code, code) << text << ": " << c.error().message;
    EXPECT_EQ(c.error().message.find('\n'), std::string::npos);
    EXPECT_EQ(c.error().message.rfind("cfg.json", 0), 0u) << c.error().message;
  }
}

TEST(PreprocessorConfig, LoadsFromAFolderOrDefaults) {
  const testing::ScratchDir scratch("ferry_image_cfg");
  const std::filesystem::path& dir = scratch.path();
  Result<VisionPreprocessConfig> c = load_preprocessor_config(dir.string());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->min_pixels, 65536);
  std::ofstream(dir / "preprocessor_config.json")
      << R"({"max_pixels": 196608, "min_pixels": 4096})";
  c = load_preprocessor_config(dir.string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->max_pixels, 196608);
  // The combined processor_config.json, used when preprocessor_config.json is absent.
  std::filesystem::remove(dir / "preprocessor_config.json");
  std::ofstream(dir / "processor_config.json") << R"({"image_processor": {"max_pixels": 200000}})";
  c = load_preprocessor_config(dir.string());
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->max_pixels, 200000);
  std::ofstream(dir / "preprocessor_config.json") << R"({"resample": 0})";
  EXPECT_FALSE(load_preprocessor_config(dir.string()).ok());
}

TEST(CompositeOverWhite, OpaqueIsIdentityTransparentIsWhite) {
  for (int v = 0; v < 256; ++v) {
    EXPECT_EQ(composite_over_white(static_cast<uint8_t>(v), 255), v);
    EXPECT_EQ(composite_over_white(static_cast<uint8_t>(v), 0), 255);
  }
  EXPECT_EQ(composite_over_white(0, 128), 127);  // half of white, rounded as PIL does
}

TEST(Decode, HostileBytesGiveOneLineErrors) {
  const std::vector<std::vector<uint8_t>> inputs = {
      {},
      {0xff, 0xd8, 0xff},
      {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'},
      {'G', 'I', 'F', '8', '9', 'a'},
      std::vector<uint8_t>(1000, 0xff),
  };
  for (const auto& bytes : inputs) {
    Result<RgbImage> r = decode_image(bytes, "x.bin");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message.rfind("x.bin: ", 0), 0u) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

TEST(Decode, FixturesDecodeAndLimitsApply) {
  if (!image_codecs_available()) GTEST_SKIP() << "built without libjpeg/libpng";
  Result<RgbImage> png = read_image(kFixtures + "rgb8_37x53.png");
  ASSERT_TRUE(png.ok()) << png.error().message;
  EXPECT_EQ(png->height, 37);
  EXPECT_EQ(png->width, 53);
  Result<RgbImage> jpg = read_image(kFixtures + "rgb_q90_99x101.jpg");
  ASSERT_TRUE(jpg.ok()) << jpg.error().message;
  EXPECT_EQ(jpg->height, 99);
  EXPECT_EQ(jpg->width, 101);
  DecodeLimits small;
  small.max_side = 50;
  for (const char* name : {"rgb8_37x53.png", "rgb_q90_99x101.jpg"}) {
    Result<RgbImage> r = read_image(kFixtures + name, small);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument) << r.error().message;
  }
  small = DecodeLimits{};
  small.max_file_bytes = 100;
  EXPECT_FALSE(read_image(kFixtures + "rgb8_37x53.png", small).ok());
  EXPECT_FALSE(read_image(kFixtures + "no_such_file.png").ok());
}

}  // namespace
}  // namespace ferry
