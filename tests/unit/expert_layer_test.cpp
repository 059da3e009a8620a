// The action expert on the CPU backend with a tiny random config:
// action_in_proj, one decoder layer and action_out_proj against a float64
// reference from the spec (§6), fed with the expert's own read-back residual;
// and the text cache is only ever read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include "backend/cpu/cpu_backend.h"
#include "model/action_expert.h"
#include "visexp_test_util.h"

namespace ferry {
namespace {

using namespace testing_visexp;

constexpr int64_t kH = 32, kHeads = 4, kKv = 2, kHd = 8, kInter = 40, kMid = 16, kTok = 8;
constexpr int64_t kFeats = 8;  // 4 frequencies per scalar: 1, 10^(2/3), 10^(4/3), 100
constexpr int64_t kKvDim = kKv * kHd, kCacheRows = 12;

AlpamayoConfig tiny_alpamayo() {
  AlpamayoConfig c;
  TextConfig& x = c.expert;
  x.hidden_size = kH;
  x.num_layers = 2;
  x.num_heads = kHeads;
  x.num_kv_heads = kKv;
  x.head_dim = kHd;
  x.intermediate_size = kInter;
  x.vocab_size = 0;
  x.rms_norm_eps = 1e-6;
  x.rope_theta = 10000.0;
  x.mrope_section = {2, 1, 1};
  c.action_in_proj.num_fourier_feats = kFeats;
  c.action_in_proj.max_freq = 100.0;
  c.action_in_proj.hidden_size = kMid;
  c.action_in_proj.num_enc_layers = 2;
  c.action_in_proj.norm_eps = 1e-5;
  c.action_space.num_waypoints = kTok;
  c.action_space.action_dims = 2;
  c.diffusion.num_inference_steps = 3;
  return c;
}

struct Fixture {
  AlpamayoConfig cfg = tiny_alpamayo();
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Stream> stream;
  TestGroup in, out;
  std::vector<TestGroup> layers;
  DeviceBuffer k_cache, v_cache;
  std::vector<uint16_t> k_host, v_host;

  explicit Fixture(CpuBackendOptions options = {.threads = 2})
      : backend(create_cpu_backend(options)), stream(backend->create_stream()) {
    const int64_t f = 3 * kFeats;
    in = make_group(*backend, *stream, "expert.in", GroupKind::expert_in,
                    {{"trunk.0.weight", {kMid, f}},
                     {"trunk.0.bias", {kMid}},
                     {"trunk.2.weight", {kMid}},
                     {"trunk.3.weight", {kMid, kMid}},
                     {"trunk.3.bias", {kMid}},
                     {"trunk.5.weight", {kMid}},
                     {"trunk.6.weight", {kH, kMid}},
                     {"trunk.6.bias", {kH}},
                     {"norm.weight", {kH}},
                     {"norm.bias", {kH}}},
                    31);
    for (int l = 0; l < 2; ++l) {
      layers.push_back(make_group(*backend, *stream, "expert.layers." + std::to_string(l),
                                  GroupKind::expert_layer,
                                  {{"input_layernorm", {kH}},
                                   {"q_proj", {kHeads * kHd, kH}},
                                   {"k_proj", {kKvDim, kH}},
                                   {"v_proj", {kKvDim, kH}},
                                   {"q_norm", {kHd}},
                                   {"k_norm", {kHd}},
                                   {"o_proj", {kH, kHeads * kHd}},
                                   {"post_attention_layernorm", {kH}},
                                   {"gate_proj", {kInter, kH}},
                                   {"up_proj", {kInter, kH}},
                                   {"down_proj", {kH, kInter}}},
                                  40 + static_cast<uint64_t>(l)));
    }
    out = make_group(
        *backend, *stream, "expert.out", GroupKind::expert_out,
        {{"norm", {kH}}, {"action_out_proj.weight", {2, kH}}, {"action_out_proj.bias", {2}}}, 50);
    // A text cache with a few rows past cache_len, all random, kept on the host
    // for comparison.
    std::mt19937_64 rng(60);
    std::normal_distribution<double> nd(0.0, 1.0);
    for (auto* h : {&k_host, &v_host}) {
      h->resize(static_cast<size_t>(kCacheRows * kKvDim));
      for (auto& b : *h) b = f32_to_bf16(static_cast<float>(nd(rng)));
    }
    k_cache = std::move(backend->allocate(k_host.size() * 2)).value();
    v_cache = std::move(backend->allocate(v_host.size() * 2)).value();
    backend->copy_to_device(*stream, k_cache.data(), k_host.data(), k_host.size() * 2);
    backend->copy_to_device(*stream, v_cache.data(), v_host.data(), v_host.size() * 2);
    EXPECT_TRUE(backend->synchronize(*stream).ok());
  }

  ExpertLayerContext context(int64_t offset, int64_t rope_pos0) const {
    ExpertLayerContext c;
    c.k_cache = make_view(k_cache.data(), DType::bf16, kCacheRows, kKvDim);
    c.v_cache = make_view(v_cache.data(), DType::bf16, kCacheRows, kKvDim);
    c.cache_len = 10;
    c.offset = offset;
    c.rope_pos0 = rope_pos0;
    return c;
  }
  Mat cache_rows(const std::vector<uint16_t>& h, int64_t rows) const {
    Mat m(static_cast<size_t>(rows * kKvDim));
    for (size_t i = 0; i < m.size(); ++i) m[i] = bf16_to_f32(h[i]);
    return m;
  }
};

double rms(const Mat& m) {
  double s = 0;
  for (double v : m) s += v * v;
  return std::sqrt(s / static_cast<double>(m.size()));
}

std::vector<float> test_x0() {
  std::vector<float> x(kTok * 2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.37f * static_cast<float>(i % 7) - 1.1f;
  return x;
}

// A layer's three part groups (LayerPart) over the whole layer's bytes: the same tensors at the
// same offsets from the same base, as the weight tables split a layer.
std::vector<WeightGroup> layer_parts(const WeightGroup& whole) {
  const std::vector<std::vector<std::string>> names = {
      {"input_layernorm", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "o_proj"},
      {"post_attention_layernorm", "gate_proj", "up_proj"},
      {"down_proj"}};
  std::vector<WeightGroup> parts;
  for (size_t k = 0; k < names.size(); ++k) {
    WeightGroup g;
    g.name = layer_group_name(whole.name, kLayerParts[k]);
    g.kind = whole.kind;
    g.layer = whole.layer;
    g.part = kLayerParts[k];
    for (const std::string& n : names[k]) g.tensors.push_back(*whole.find(n));
    g.bytes = whole.bytes;
    parts.push_back(std::move(g));
  }
  return parts;
}

// The whole layer: its parts in order.
Status run_expert_layer(ActionExpert& ex, Stream& s, int layer, const TestGroup& g,
                        const ExpertLayerContext& c) {
  for (const WeightGroup& part : layer_parts(g.group)) {
    FERRY_RETURN_IF_ERROR(ex.run_layer(s, layer, part, g.base(), c));
  }
  return {};
}

TEST(ExpertLayer, FourierFrequenciesOfTheRealConfig) {
  // spec §8.1: logspace(0, 2, 10) rounded to bf16.
  const std::vector<float> want = {1.0f,     1.671875f, 2.78125f, 4.65625f, 7.75f,
                                   12.9375f, 21.5f,     36.0f,    60.0f,    100.0f};
  EXPECT_EQ(fourier_frequencies(20, 100.0, FourierFreqs::bf16_rounded), want);
  const std::vector<float> f32 = fourier_frequencies(20, 100.0, FourierFreqs::f32);
  for (size_t k = 0; k < 10; ++k) {
    EXPECT_FLOAT_EQ(f32[k], static_cast<float>(std::pow(10.0, 2.0 * static_cast<double>(k) / 9)));
  }
}

TEST(ExpertLayer, GroupsMatchFloat64Reference) {
  Fixture f;
  auto made = ActionExpert::create(f.cfg, *f.backend);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  ActionExpert& ex = *made;
  Stream& s = *f.stream;
  ASSERT_EQ(ex.num_steps(), 3);
  // Features f32 [8, 24]; trunk bf16 2x[8, 16]; enc bf16, residual and norm f32 [8, 32]; q, k, v,
  // attn, o bf16; gate, up, act bf16 [8, 40]; positions i32 [8, 3]; cos/sin f32 [8, 4]; v bf16.
  EXPECT_EQ(ex.activation_bytes(),
            8u * (24 * 4 + 2 * 16 * 2 + 32 * 2 + 2 * 32 * 4 + (32 + 16 + 16 + 32 + 32) * 2 +
                  3 * 40 * 2 + 3 * 4 + 2 * 4 * 4 + 2 * 2));
  const std::vector<float> x0 = test_x0();
  ex.begin_with(x0);

  // action_in_proj at step 1 (t = linspace(0, 1, 4)[1] = 1/3 in fp32).
  ASSERT_TRUE(ex.run_in(s, 1, f.in.group, f.in.base()).ok());
  const double t = static_cast<double>(1.0f / 3.0f);
  Mat feats;
  for (int64_t i = 0; i < kTok; ++i) {
    for (double u : {static_cast<double>(x0[2 * i]), static_cast<double>(x0[2 * i + 1]), t}) {
      double fr[4];
      for (int k = 0; k < 4; ++k) fr[k] = bf(std::pow(10.0, 2.0 * k / 3.0));
      for (int k = 0; k < 4; ++k) feats.push_back(std::sqrt(2.0) * std::sin(2 * M_PI * u * fr[k]));
      for (int k = 0; k < 4; ++k) feats.push_back(std::sqrt(2.0) * std::cos(2 * M_PI * u * fr[k]));
    }
  }
  const TestGroup& g = f.in;
  const Mat b0 = g.get("trunk.0.bias"), b3 = g.get("trunk.3.bias");
  const Mat b6 = g.get("trunk.6.bias");
  Mat a = linear(feats, kTok, 3 * kFeats, g.get("trunk.0.weight"), kMid, &b0, Act::silu);
  a = rms_norm(a, kTok, kMid, kMid, g.get("trunk.2.weight"), 1e-5, false);
  a = linear(a, kTok, kMid, g.get("trunk.3.weight"), kMid, &b3, Act::silu);
  a = rms_norm(a, kTok, kMid, kMid, g.get("trunk.5.weight"), 1e-5, false);
  a = linear(a, kTok, kMid, g.get("trunk.6.weight"), kH, &b6);
  const Mat e_ref = layer_norm(a, kTok, kH, g.get("norm.weight"), g.get("norm.bias"), 1e-5, true);
  const Mat e = read_back(*f.backend, s, ex.residual());
  expect_close(e, e_ref, 0.005 * rms(e_ref), 0.008, "action_in_proj");

  // One decoder layer over text rows [0, 7) and its own 8 rows, positions 5 +
  // j.
  const int64_t offset = 7, pos0 = 5;
  ASSERT_TRUE(run_expert_layer(ex, s, 0, f.layers[0], f.context(offset, pos0)).ok());
  const TestGroup& L = f.layers[0];
  Mat r = e;
  const Mat n1 = rms_norm(r, kTok, kH, kH, L.get("input_layernorm"), 1e-6, true);
  Mat q = linear(n1, kTok, kH, L.get("q_proj"), kHeads * kHd, nullptr);
  Mat k = linear(n1, kTok, kH, L.get("k_proj"), kKvDim, nullptr);
  const Mat v = linear(n1, kTok, kH, L.get("v_proj"), kKvDim, nullptr);
  q = rms_norm(q, kTok, kHeads * kHd, kHd, L.get("q_norm"), 1e-6, false);
  k = rms_norm(k, kTok, kKvDim, kHd, L.get("k_norm"), 1e-6, false);
  Mat cos, sin;
  for (int64_t j = 0; j < kTok; ++j) {
    for (int64_t i = 0; i < kHd / 2; ++i) {
      const double ang =
          static_cast<double>(pos0 + j) *
          std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(kHd));
      cos.push_back(std::cos(ang));
      sin.push_back(std::sin(ang));
    }
  }
  rope(q, kTok, kHeads, kHd, cos, sin);
  rope(k, kTok, kKv, kHd, cos, sin);
  Mat keys = f.cache_rows(f.k_host, offset), vals = f.cache_rows(f.v_host, offset);
  keys.insert(keys.end(), k.begin(), k.end());
  vals.insert(vals.end(), v.begin(), v.end());
  const Mat att = attention(q, kTok, keys, vals, offset + kTok, kHeads, kKv, kHd);
  const Mat o = linear(att, kTok, kHeads * kHd, L.get("o_proj"), kH, nullptr);
  for (size_t i = 0; i < r.size(); ++i) r[i] = f32(r[i] + o[i]);
  const Mat n2 = rms_norm(r, kTok, kH, kH, L.get("post_attention_layernorm"), 1e-6, true);
  const Mat gt = linear(n2, kTok, kH, L.get("gate_proj"), kInter, nullptr);
  const Mat up = linear(n2, kTok, kH, L.get("up_proj"), kInter, nullptr);
  Mat act(gt.size());
  for (size_t i = 0; i < act.size(); ++i) act[i] = bf(bf(apply(Act::silu, gt[i])) * up[i]);
  const Mat d = linear(act, kTok, kInter, L.get("down_proj"), kH, nullptr);
  for (size_t i = 0; i < r.size(); ++i) r[i] = f32(r[i] + d[i]);
  const Mat r_got = read_back(*f.backend, s, ex.residual());
  expect_close(r_got, r, 0.005 * rms(r), 0.008, "expert layer 0");

  // action_out_proj and the Euler update at step 1.
  ASSERT_TRUE(ex.run_out(s, 1, f.out.group, f.out.base()).ok());
  ASSERT_TRUE(ex.finish_step(s, 1).ok());
  const Mat nf = rms_norm(r_got, kTok, kH, kH, f.out.get("norm"), 1e-6, true);
  const Mat ob = f.out.get("action_out_proj.bias");
  const Mat vel = linear(nf, kTok, kH, f.out.get("action_out_proj.weight"), 2, &ob);
  const auto got_v = ex.last_velocity();
  ASSERT_EQ(got_v.size(), vel.size());
  expect_close(Mat(got_v.begin(), got_v.end()), vel, 0.005 * rms(vel), 0.008, "velocity");
  const float delta = euler_time_grid(3).deltas[1];
  for (size_t i = 0; i < x0.size(); ++i) {
    EXPECT_EQ(ex.actions()[i], x0[i] + delta * got_v[i]) << i;  // fp32, bit for bit
  }
}

TEST(ExpertLayer, NeverWritesTheTextCache) {
  Fixture f;
  auto ex = ActionExpert::create(f.cfg, *f.backend);
  ASSERT_TRUE(ex.ok());
  ex->begin(9);
  Stream& s = *f.stream;
  for (int step = 0; step < ex->num_steps(); ++step) {
    ASSERT_TRUE(ex->run_in(s, step, f.in.group, f.in.base()).ok());
    for (int l = 0; l < 2; ++l) {
      ASSERT_TRUE(run_expert_layer(*ex, s, l, f.layers[l], f.context(10, 3)).ok());
    }
    ASSERT_TRUE(ex->run_out(s, step, f.out.group, f.out.base()).ok());
    ASSERT_TRUE(ex->finish_step(s, step).ok());
  }
  std::vector<uint16_t> k(f.k_host.size()), v(f.v_host.size());
  f.backend->copy_to_host(s, k.data(), f.k_cache.data(), k.size() * 2);
  f.backend->copy_to_host(s, v.data(), f.v_cache.data(), v.size() * 2);
  ASSERT_TRUE(f.backend->synchronize(s).ok());
  EXPECT_EQ(k, f.k_host);
  EXPECT_EQ(v, f.v_host);
}

std::vector<float> run_all(Fixture& f, uint64_t seed, int64_t offset, int64_t pos0,
                           int64_t pos0_per_step = 0) {
  auto ex = ActionExpert::create(f.cfg, *f.backend);
  EXPECT_TRUE(ex.ok());
  ex->begin(seed);
  for (int step = 0; step < ex->num_steps(); ++step) {
    EXPECT_TRUE(ex->run_in(*f.stream, step, f.in.group, f.in.base()).ok());
    for (int l = 0; l < 2; ++l) {
      EXPECT_TRUE(run_expert_layer(*ex, *f.stream, l, f.layers[l],
                                   f.context(offset, pos0 + step * pos0_per_step))
                      .ok());
    }
    EXPECT_TRUE(ex->run_out(*f.stream, step, f.out.group, f.out.base()).ok());
    EXPECT_TRUE(ex->finish_step(*f.stream, step).ok());
  }
  return std::vector<float>(ex->actions().begin(), ex->actions().end());
}

TEST(ExpertLayer, FlowIsDeterministicAndReadsItsInputs) {
  Fixture f;
  const std::vector<float> a = run_all(f, 1, 7, 5);
  for (float v : a) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(a, run_all(f, 1, 7, 5));   // bit for bit
  EXPECT_NE(a, run_all(f, 2, 7, 5));   // the seed
  EXPECT_NE(a, run_all(f, 1, 3, 5));   // the visible text prefix
  EXPECT_NE(a, run_all(f, 1, 7, 50));  // the rotary positions
  // No text prefix at all is valid: finite actions of the same size, which differ from those that
  // saw a prefix (the expert attends to its own tokens only).
  const std::vector<float> none = run_all(f, 1, 0, 5);
  ASSERT_EQ(none.size(), a.size());
  for (float v : none) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NE(none, a);
  EXPECT_NE(none, run_all(f, 1, 3, 5));
}

TEST(ExpertLayer, SameBitsUnderRandomStreamDelays) {
  Fixture plain;
  Fixture delayed({.threads = 2, .max_delay_us = 200, .delay_seed = 5});
  // Changing rope_pos0 between steps re-uploads positions while earlier work
  // may be queued.
  EXPECT_EQ(run_all(plain, 4, 7, 5), run_all(delayed, 4, 7, 5));
  EXPECT_EQ(run_all(plain, 4, 7, 5, 3), run_all(delayed, 4, 7, 5, 3));
}

TEST(ExpertLayer, BadContextIsAnErrorNotAnAbort) {
  Fixture f;
  auto ex = ActionExpert::create(f.cfg, *f.backend);
  ASSERT_TRUE(ex.ok());
  ex->begin(1);
  const WeightGroup attention = layer_parts(f.layers[0].group)[0];
  // The good context passes: what fails below fails for the reason named.
  EXPECT_TRUE(ex->run_layer(*f.stream, 0, attention, f.layers[0].base(), f.context(7, 0)).ok());
  ASSERT_TRUE(f.backend->synchronize(*f.stream).ok());  // its ops read the expert's buffers
  ExpertLayerContext c = f.context(11, 0);              // offset > cache_len
  EXPECT_EQ(ex->run_layer(*f.stream, 0, attention, f.layers[0].base(), c).error().code,
            ErrorCode::invalid_argument);
  c = f.context(7, 0);
  c.cache_len = 20;  // more rows than the view holds
  EXPECT_FALSE(ex->run_layer(*f.stream, 0, attention, f.layers[0].base(), c).ok());
  // A group that is not one part of a layer is refused.
  EXPECT_FALSE(
      ex->run_layer(*f.stream, 0, f.layers[0].group, f.layers[0].base(), f.context(7, 0)).ok());
  WeightGroup out_as_attention = f.out.group;  // tensors missing: a format error
  out_as_attention.part = LayerPart::attention;
  EXPECT_EQ(
      ex->run_layer(*f.stream, 0, out_as_attention, f.out.base(), f.context(7, 0)).error().code,
      ErrorCode::format);
  EXPECT_FALSE(ex->run_in(*f.stream, 3, f.in.group, f.in.base()).ok());  // only 3 steps
}

}  // namespace
}  // namespace ferry
