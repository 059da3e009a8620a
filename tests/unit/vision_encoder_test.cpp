// The vision encoder on the CPU backend with a tiny random config, group by
// group against a float64 reference written from the spec (§3), fed with the
// encoder's own read-back input.
#include "model/vision_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "visexp_test_util.h"

namespace ferry {
namespace {

using namespace testing_visexp;

VisionConfig tiny_vision() {
  VisionConfig c;
  c.depth = 2;
  c.hidden_size = 32;
  c.num_heads = 2;  // head_dim 16: 4 row + 4 column frequencies
  c.intermediate_size = 48;
  c.patch_size = 4;
  c.temporal_patch_size = 2;
  c.spatial_merge_size = 2;
  c.in_channels = 3;
  c.out_hidden_size = 24;
  c.num_position_embeddings = 36;  // a 6 x 6 table
  c.deepstack_visual_indexes = {0};
  c.hidden_act = "gelu_pytorch_tanh";
  c.layer_norm_eps = 1e-6;
  return c;
}

const std::vector<ImageGeometry> kImages = {{16, 24}, {8, 16}};  // grids 4x6 and 2x4

struct Fixture {
  VisionConfig cfg = tiny_vision();
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  TestGroup patch, merger, deep;
  std::vector<TestGroup> blocks;

  explicit Fixture(CpuBackendOptions options = {.threads = 2})
      : backend(create_cpu_backend(options)), stream(backend->create_stream()) {
    const int64_t h = cfg.hidden_size, i = cfg.intermediate_size, o = cfg.out_hidden_size;
    patch = make_group(
        *backend, *stream, "vision.patch", GroupKind::vision_patch,
        {{"proj.weight", {h, 3, 2, 4, 4}}, {"proj.bias", {h}}, {"pos_embed", {36, h}}}, 1);
    for (int b = 0; b < cfg.depth; ++b) {
      blocks.push_back(make_group(*backend, *stream, "vision.blocks." + std::to_string(b),
                                  GroupKind::vision_block,
                                  {{"norm1.weight", {h}},
                                   {"norm1.bias", {h}},
                                   {"qkv.weight", {3 * h, h}},
                                   {"qkv.bias", {3 * h}},
                                   {"proj.weight", {h, h}},
                                   {"proj.bias", {h}},
                                   {"norm2.weight", {h}},
                                   {"norm2.bias", {h}},
                                   {"fc1.weight", {i, h}},
                                   {"fc1.bias", {i}},
                                   {"fc2.weight", {h, i}},
                                   {"fc2.bias", {h}}},
                                  10 + static_cast<uint64_t>(b)));
    }
    auto merger_tensors = [&](int64_t norm_dim) {
      return std::vector<std::pair<std::string, std::vector<int64_t>>>{
          {"norm.weight", {norm_dim}}, {"norm.bias", {norm_dim}},  {"fc1.weight", {4 * h, 4 * h}},
          {"fc1.bias", {4 * h}},       {"fc2.weight", {o, 4 * h}}, {"fc2.bias", {o}}};
    };
    merger = make_group(*backend, *stream, "vision.merger", GroupKind::vision_merger,
                        merger_tensors(h), 20);
    deep = make_group(*backend, *stream, "vision.deepstack.0", GroupKind::vision_merger,
                      merger_tensors(4 * h), 21);
  }
};

// Window-order (row, col) of every patch, straight from spec §3.1's index
// formula.
std::vector<std::pair<int64_t, int64_t>> patch_coords(int64_t gh, int64_t gw) {
  std::vector<std::pair<int64_t, int64_t>> rc(static_cast<size_t>(gh * gw));
  for (int64_t bh = 0; bh < gh / 2; ++bh)
    for (int64_t bw = 0; bw < gw / 2; ++bw)
      for (int64_t mh = 0; mh < 2; ++mh)
        for (int64_t mw = 0; mw < 2; ++mw)
          rc[static_cast<size_t>((bh * (gw / 2) + bw) * 4 + mh * 2 + mw)] = {2 * bh + mh,
                                                                             2 * bw + mw};
  return rc;
}

Mat reference_patch(const Fixture& f, const std::vector<float>& pixels) {
  const int64_t h = f.cfg.hidden_size, p = f.cfg.patch_values();
  const int64_t n = static_cast<int64_t>(pixels.size()) / p;
  const Mat px(pixels.begin(), pixels.end());
  const Mat w = f.patch.get("proj.weight"), b = f.patch.get("proj.bias");
  const Mat table = f.patch.get("pos_embed");
  Mat x = linear(px, n, p, w, h, &b);
  int64_t row0 = 0;
  for (const ImageGeometry& g : kImages) {
    const int64_t gh = g.height / 4, gw = g.width / 4;
    for (const auto& [r, c] : patch_coords(gh, gw)) {
      const double y = 5.0 * static_cast<double>(r) / static_cast<double>(gh - 1);
      const double xx = 5.0 * static_cast<double>(c) / static_cast<double>(gw - 1);
      const int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(xx);
      const int64_t y1 = std::min<int64_t>(y0 + 1, 5), x1 = std::min<int64_t>(x0 + 1, 5);
      const double dy = y - static_cast<double>(y0), dx = xx - static_cast<double>(x0);
      const int64_t idx[4] = {y0 * 6 + x0, y0 * 6 + x1, y1 * 6 + x0, y1 * 6 + x1};
      const double wt[4] = {bf((1 - dy) * (1 - dx)), bf((1 - dy) * dx), bf(dy * (1 - dx)),
                            bf(dy * dx)};
      for (int64_t j = 0; j < h; ++j) {
        double pe = 0;
        for (int k = 0; k < 4; ++k) {
          const double term = bf(table[static_cast<size_t>(idx[k] * h + j)] * wt[k]);
          pe = k == 0 ? term : bf(pe + term);
        }
        double& e = x[static_cast<size_t>(row0 * h + j)];
        e = bf(e + pe);
      }
      ++row0;
    }
  }
  return x;
}

Mat reference_block(const Fixture& f, const TestGroup& g, Mat x) {
  const int64_t h = f.cfg.hidden_size, inter = f.cfg.intermediate_size, hd = 16, heads = 2;
  const int64_t n = static_cast<int64_t>(x.size()) / h;
  const double eps = 1e-6;
  const Mat n1 = layer_norm(x, n, h, g.get("norm1.weight"), g.get("norm1.bias"), eps);
  const Mat qkv_b = g.get("qkv.bias");
  const Mat qkv = linear(n1, n, h, g.get("qkv.weight"), 3 * h, &qkv_b);
  Mat q = cols(qkv, n, 3 * h, 0, h), k = cols(qkv, n, 3 * h, h, h);
  const Mat v = cols(qkv, n, 3 * h, 2 * h, h);
  // 2-D rotary: dims [0, 4) row frequencies, [4, 8) column, inv_freq =
  // 10000^(−2k/8).
  Mat cos, sin;
  for (const ImageGeometry& im : kImages) {
    for (const auto& [r, c] : patch_coords(im.height / 4, im.width / 4)) {
      for (int64_t j = 0; j < hd / 2; ++j) {
        const double inv = std::pow(10000.0, -2.0 * static_cast<double>(j % 4) / 8.0);
        const double a = static_cast<double>(j < 4 ? r : c) * inv;
        cos.push_back(std::cos(a));
        sin.push_back(std::sin(a));
      }
    }
  }
  rope(q, n, heads, hd, cos, sin);
  rope(k, n, heads, hd, cos, sin);
  Mat att;
  int64_t row0 = 0;
  for (const ImageGeometry& im : kImages) {
    const int64_t m = (im.height / 4) * (im.width / 4);
    auto rows = [&](const Mat& a) { return Mat(a.begin() + row0 * h, a.begin() + (row0 + m) * h); };
    const Mat o = attention(rows(q), m, rows(k), rows(v), m, heads, heads, hd);
    att.insert(att.end(), o.begin(), o.end());
    row0 += m;
  }
  const Mat pb = g.get("proj.bias");
  const Mat proj = linear(att, n, h, g.get("proj.weight"), h, &pb);
  for (size_t i = 0; i < x.size(); ++i) x[i] = bf(x[i] + proj[i]);
  const Mat n2 = layer_norm(x, n, h, g.get("norm2.weight"), g.get("norm2.bias"), eps);
  const Mat b1 = g.get("fc1.bias"), b2 = g.get("fc2.bias");
  const Mat m1 = linear(n2, n, h, g.get("fc1.weight"), inter, &b1, Act::gelu_tanh);
  const Mat m2 = linear(m1, n, inter, g.get("fc2.weight"), h, &b2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = bf(x[i] + m2[i]);
  return x;
}

Mat reference_merger(const Fixture& f, const TestGroup& g, const Mat& x, bool postshuffle) {
  const int64_t h = f.cfg.hidden_size, o = f.cfg.out_hidden_size;
  const int64_t n = static_cast<int64_t>(x.size()) / h, t = n / 4;
  // Row-major [N, H] and [N/4, 4H] are the same bytes: the 4 window rows side
  // by side.
  const Mat nrm = postshuffle
                      ? layer_norm(x, t, 4 * h, g.get("norm.weight"), g.get("norm.bias"), 1e-6)
                      : layer_norm(x, n, h, g.get("norm.weight"), g.get("norm.bias"), 1e-6);
  const Mat b1 = g.get("fc1.bias"), b2 = g.get("fc2.bias");
  const Mat mid = linear(nrm, t, 4 * h, g.get("fc1.weight"), 4 * h, &b1, Act::gelu_erf);
  return linear(mid, t, 4 * h, g.get("fc2.weight"), o, &b2);
}

double rms(const Mat& m) {
  double s = 0;
  for (double v : m) s += v * v;
  return std::sqrt(s / static_cast<double>(m.size()));
}

TEST(VisionEncoder, GeometryAndTokenCounts) {
  Fixture f;
  auto enc = VisionEncoder::create(f.cfg, *f.backend, kImages);
  ASSERT_TRUE(enc.ok()) << enc.error().to_string();
  EXPECT_EQ(enc->num_patches(), 24 + 8);
  EXPECT_EQ(enc->num_tokens(), 8);
  EXPECT_EQ(enc->tokens_per_image(), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(enc->merged_grids(), (std::vector<std::array<int64_t, 3>>{{1, 2, 3}, {1, 1, 2}}));
  // Sides that are not multiples of patch · merge are user errors, not aborts.
  auto bad = VisionEncoder::create(f.cfg, *f.backend, {{16, 20}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_FALSE(VisionEncoder::create(f.cfg, *f.backend, {}).ok());
}

TEST(VisionEncoder, RealConfigGeometry) {
  // Qwen3-VL-8B's tower (spec §0) on one 320x576 image: a 20x36 grid, 720
  // patches, 180 tokens.
  VisionConfig c;
  c.depth = 27;
  c.hidden_size = 1152;
  c.num_heads = 16;
  c.intermediate_size = 4304;
  c.out_hidden_size = 4096;
  c.num_position_embeddings = 2304;
  c.deepstack_visual_indexes = {8, 16, 24};
  auto backend = create_cpu_backend({.threads = 1});
  auto enc = VisionEncoder::create(c, *backend, {{320, 576}});
  ASSERT_TRUE(enc.ok()) << enc.error().to_string();
  EXPECT_EQ(enc->num_patches(), 720);
  EXPECT_EQ(enc->num_tokens(), 180);
  EXPECT_EQ(enc->merged_grids(), (std::vector<std::array<int64_t, 3>>{{1, 10, 18}}));
  EXPECT_EQ(enc->num_deepstack(), 3);
  EXPECT_EQ(enc->image_embeds().cols, 4096);
  EXPECT_EQ(enc->deepstack(2).rows, 180);
  // bf16 pixels, i32/f32 corner tables, f32 cos/sin, the i32 image offsets {0, 720}; bf16 x,
  // norm, qkv, attn, mlp; the merger's fc1 output, and four [180, 4096] outputs.
  const uint64_t n = 720;
  EXPECT_EQ(enc->activation_bytes(), n * 1536 * 2 + 2 * n * 4 * 4 + 2 * n * 36 * 4 + 2 * 4 +
                                         n * (1152 * 3 + 3456 + 4304) * 2 + 180 * 4608 * 2 +
                                         4 * 180 * 4096 * 2);
}

TEST(VisionEncoder, SyntheticPixelsAreNormalizedStillImages) {
  const VisionConfig c = tiny_vision();
  const std::vector<float> a = synthetic_pixel_values(1, kImages, c);
  EXPECT_EQ(a, synthetic_pixel_values(1, kImages, c));
  EXPECT_NE(a, synthetic_pixel_values(2, kImages, c));
  const size_t cols = static_cast<size_t>(c.patch_values()),
               per_frame = 16;  // 4x4 pixels
  for (size_t r = 0; r < a.size() / cols; ++r) {
    for (size_t ch = 0; ch < 3; ++ch) {
      for (size_t i = 0; i < per_frame; ++i) {
        // Column ((c·2 + τ)·4 + py)·4 + px: both frames of a still image are
        // the same.
        const float t0 = a[r * cols + (ch * 2 + 0) * per_frame + i];
        const float t1 = a[r * cols + (ch * 2 + 1) * per_frame + i];
        EXPECT_EQ(t0, t1);
        const float q = t0 * 127.5f + 127.5f;  // back to the uint8 pixel
        EXPECT_EQ(q, std::round(q));
        EXPECT_GE(t0, -1.0f);
        EXPECT_LE(t0, 1.0f);
      }
    }
  }
}

TEST(VisionEncoder, EveryGroupMatchesFloat64Reference) {
  Fixture f;
  auto made = VisionEncoder::create(f.cfg, *f.backend, kImages);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  VisionEncoder& enc = *made;
  Stream& s = *f.stream;
  const std::vector<float> pixels = synthetic_pixel_values(7, kImages, f.cfg);
  ASSERT_EQ(static_cast<int64_t>(pixels.size()), enc.num_patches() * f.cfg.patch_values());

  ASSERT_TRUE(enc.upload_pixels(s, pixels).ok());
  ASSERT_TRUE(enc.run_patch(s, f.patch.group, f.patch.base()).ok());
  const Mat x0 = read_back(*f.backend, s, enc.hidden());
  const Mat x0_ref = reference_patch(f, pixels);
  expect_close(x0, x0_ref, 0.005 * rms(x0_ref), 0.008, "patch embed");

  ASSERT_TRUE(enc.run_block(s, 0, f.blocks[0].group, f.blocks[0].base()).ok());
  const Mat x1 = read_back(*f.backend, s, enc.hidden());
  const Mat x1_ref = reference_block(f, f.blocks[0], x0);
  expect_close(x1, x1_ref, 0.005 * rms(x1_ref), 0.008, "block 0");

  ASSERT_TRUE(enc.run_deepstack(s, 0, f.deep.group, f.deep.base()).ok());
  const Mat d_ref = reference_merger(f, f.deep, x1, /*postshuffle=*/true);
  expect_close(read_back(*f.backend, s, enc.deepstack(0)), d_ref, 0.005 * rms(d_ref), 0.008,
               "deepstack 0");

  ASSERT_TRUE(enc.run_block(s, 1, f.blocks[1].group, f.blocks[1].base()).ok());
  const Mat x2 = read_back(*f.backend, s, enc.hidden());
  ASSERT_TRUE(enc.run_merger(s, f.merger.group, f.merger.base()).ok());
  const Mat m_ref = reference_merger(f, f.merger, x2, /*postshuffle=*/false);
  expect_close(read_back(*f.backend, s, enc.image_embeds()), m_ref, 0.005 * rms(m_ref), 0.008,
               "merger");
}

// The host rounds the pixels to bf16 before the upload: exactly what the backend's Cast does (the
// patch embedding once cast them on the device), and the bf16 upload gives the f32 upload's
// hidden state bit for bit.
TEST(VisionEncoder, PixelsRoundedOnTheHostAsTheCastRoundsThem) {
  Fixture f;
  const std::vector<float> pixels = synthetic_pixel_values(5, kImages, f.cfg);
  std::vector<float> odd = pixels;  // ties, subnormals, signed zero, large values
  for (float v : {1.00390625f, 1.01171875f, -1.00390625f, 1e-40f, -0.0f, 3.0e38f, 0.1f}) {
    odd.push_back(v);
  }
  std::vector<uint16_t> rounded(odd.size());
  round_pixels_bf16(odd, rounded);
  const auto n = static_cast<int64_t>(odd.size());
  Backend& b = *f.backend;
  Stream& s = *f.stream;
  auto src = b.allocate(static_cast<size_t>(n) * sizeof(float), "test");
  auto dst = b.allocate(static_cast<size_t>(n) * sizeof(uint16_t), "test");
  ASSERT_TRUE(src.ok() && dst.ok());
  b.copy_to_device(s, src->data(), odd.data(), odd.size() * sizeof(float));
  ASSERT_TRUE(b.run(s, Cast{make_view(src->data(), DType::f32, 1, n),
                            make_view(dst->data(), DType::bf16, 1, n)})
                  .ok());
  std::vector<uint16_t> cast(odd.size());
  b.copy_to_host(s, cast.data(), dst->data(), cast.size() * sizeof(uint16_t));
  ASSERT_TRUE(b.synchronize(s).ok());
  EXPECT_EQ(rounded, cast);

  auto a = VisionEncoder::create(f.cfg, b, kImages);
  auto c = VisionEncoder::create(f.cfg, b, kImages);
  ASSERT_TRUE(a.ok() && c.ok());
  std::vector<uint16_t> bf16(pixels.size());
  round_pixels_bf16(pixels, bf16);
  ASSERT_TRUE(a->upload_pixels(s, pixels).ok());
  ASSERT_TRUE(c->upload_pixels(s, std::span<const uint16_t>(bf16)).ok());
  for (auto* e : {&*a, &*c}) ASSERT_TRUE(e->run_patch(s, f.patch.group, f.patch.base()).ok());
  EXPECT_EQ(read_back(b, s, a->hidden()), read_back(b, s, c->hidden()));
  // A wrong count is refused, not read past.
  bf16.pop_back();
  EXPECT_FALSE(c->upload_pixels(s, std::span<const uint16_t>(bf16)).ok());
  const std::vector<float> fewer(pixels.begin() + 1, pixels.end());
  EXPECT_FALSE(c->upload_pixels(s, fewer).ok());
}

TEST(VisionEncoder, AttentionStaysInsideEachImage) {
  Fixture f;
  auto a = VisionEncoder::create(f.cfg, *f.backend, kImages);
  auto b = VisionEncoder::create(f.cfg, *f.backend, kImages);
  ASSERT_TRUE(a.ok() && b.ok());
  Stream& s = *f.stream;
  const std::vector<float> pa = synthetic_pixel_values(3, kImages, f.cfg);
  std::vector<float> pb = pa;
  const size_t first_image = 24 * static_cast<size_t>(f.cfg.patch_values());
  for (size_t i = first_image; i < pb.size(); ++i) pb[i] = -pb[i];  // change image 1 only
  for (auto* e : {&*a, &*b}) {
    ASSERT_TRUE(e->upload_pixels(s, e == &*a ? pa : pb).ok());
    ASSERT_TRUE(e->run_patch(s, f.patch.group, f.patch.base()).ok());
    ASSERT_TRUE(e->run_block(s, 0, f.blocks[0].group, f.blocks[0].base()).ok());
  }
  const Mat ha = read_back(*f.backend, s, a->hidden()), hb = read_back(*f.backend, s, b->hidden());
  const size_t split = 24 * static_cast<size_t>(f.cfg.hidden_size);
  EXPECT_TRUE(std::equal(ha.begin(), ha.begin() + static_cast<std::ptrdiff_t>(split), hb.begin()))
      << "image 0 depends on image 1";
  EXPECT_FALSE(std::equal(ha.begin() + static_cast<std::ptrdiff_t>(split), ha.end(),
                          hb.begin() + static_cast<std::ptrdiff_t>(split)));
}

// Every group of a whole inference, in call-sequence order; returns merger and
// deepstack bytes.
Mat run_everything(Fixture& f, const std::vector<float>& pixels) {
  auto enc = VisionEncoder::create(f.cfg, *f.backend, kImages);
  EXPECT_TRUE(enc.ok());
  Stream& s = *f.stream;
  EXPECT_TRUE(enc->upload_pixels(s, pixels).ok());
  EXPECT_TRUE(enc->run_patch(s, f.patch.group, f.patch.base()).ok());
  for (int b = 0; b < f.cfg.depth; ++b) {
    EXPECT_TRUE(enc->run_block(s, b, f.blocks[static_cast<size_t>(b)].group,
                               f.blocks[static_cast<size_t>(b)].base())
                    .ok());
    if (b == 0) {
      EXPECT_TRUE(enc->run_deepstack(s, 0, f.deep.group, f.deep.base()).ok());
    }
  }
  EXPECT_TRUE(enc->run_merger(s, f.merger.group, f.merger.base()).ok());
  Mat out = read_back(*f.backend, s, enc->image_embeds());
  const Mat d = read_back(*f.backend, s, enc->deepstack(0));
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

TEST(VisionEncoder, SameBitsUnderRandomStreamDelays) {
  // Everything is enqueued without a host sync until the read-back; random
  // delays in the CPU backend's stream thread must not change a bit (host
  // tables and pixels stay alive).
  Fixture plain;
  Fixture delayed({.threads = 2, .max_delay_us = 200, .delay_seed = 77});
  const std::vector<float> pixels = synthetic_pixel_values(11, kImages, plain.cfg);
  const Mat a = run_everything(plain, pixels);
  const Mat b = run_everything(delayed, pixels);
  EXPECT_EQ(a, b);
  for (double v : a) ASSERT_TRUE(std::isfinite(v));
}

TEST(VisionEncoder, WrongWeightShapeIsAFormatError) {
  Fixture f;
  auto enc = VisionEncoder::create(f.cfg, *f.backend, kImages);
  ASSERT_TRUE(enc.ok());
  TestGroup wrong = make_group(*f.backend, *f.stream, "vision.merger", GroupKind::vision_merger,
                               {{"norm.weight", {32}}, {"norm.bias", {32}}}, 5);
  const Status st = enc->run_merger(*f.stream, wrong.group, wrong.base());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::format);
  EXPECT_NE(st.error().message.find("fc1.weight"), std::string::npos) << st.error().message;
  EXPECT_FALSE(enc->run_patch(*f.stream, f.patch.group, f.patch.base()).ok())
      << "run_patch before upload_pixels must fail";
}

}  // namespace
}  // namespace ferry
