// The vision encoder and the action expert driven by the architecture's own
// weight table (describe_weights of the alpamayo-tiny preset): every group
// name, local tensor name and shape the table lays out is one the model code
// accepts, in call-sequence order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"
#include "model/action_expert.h"
#include "model/presets.h"
#include "model/vision_encoder.h"
#include "model/weights.h"

namespace ferry {
namespace {

// Every group of the table on the device, filled with small random bf16 values.
struct Resident {
  std::vector<DeviceBuffer> buffers;
  Resident(Backend& backend, Stream& stream, const ModelWeights& w) {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<float> u(-0.1f, 0.1f);
    std::vector<std::vector<uint16_t>> hosts;
    for (const WeightGroup& g : w.groups) {
      hosts.emplace_back(g.bytes / 2);
      for (auto& b : hosts.back()) b = f32_to_bf16(u(rng));
      auto buf = backend.allocate(g.bytes);
      EXPECT_TRUE(buf.ok());
      backend.copy_to_device(stream, buf->data(), hosts.back().data(), g.bytes);
      buffers.push_back(std::move(buf).value());
    }
    EXPECT_TRUE(backend.synchronize(stream).ok());
  }
};

bool all_finite(Backend& backend, Stream& stream, const TensorView& v) {
  std::vector<uint16_t> raw(static_cast<size_t>(v.numel()));
  backend.copy_to_host(stream, raw.data(), v.data, raw.size() * 2);
  EXPECT_TRUE(backend.synchronize(stream).ok());
  for (uint16_t b : raw) {
    if (!std::isfinite(bf16_to_f32(b))) return false;
  }
  return true;
}

TEST(VisionExpertTables, RunEveryGroupOfTheAlpamayoTinyTable) {
  auto cfg = preset("alpamayo-tiny");
  ASSERT_TRUE(cfg.ok()) << cfg.error().to_string();
  const AlpamayoConfig* a = cfg->alpamayo();
  ASSERT_NE(a, nullptr);
  auto weights = describe_weights(*cfg);
  ASSERT_TRUE(weights.ok()) << weights.error().to_string();
  auto backend = create_cpu_backend({.threads = 2});
  auto stream = backend->create_stream();
  Resident res(*backend, *stream, *weights);

  const VisionConfig& vc = a->vlm.vision;
  const int64_t unit = vc.patch_size * vc.spatial_merge_size;
  auto enc = VisionEncoder::create(vc, *backend, {{2 * unit, 3 * unit}, {unit, 2 * unit}});
  ASSERT_TRUE(enc.ok()) << enc.error().to_string();
  const std::vector<float> pixels =
      synthetic_pixel_values(1, {{2 * unit, 3 * unit}, {unit, 2 * unit}}, vc);
  ASSERT_TRUE(enc->upload_pixels(*stream, pixels).ok());

  auto expert = ActionExpert::create(*a, *backend);
  ASSERT_TRUE(expert.ok()) << expert.error().to_string();
  expert->begin(2);
  // A stand-in text cache with the expert's kv width.
  const int64_t kv = a->expert.num_kv_heads * a->expert.head_dim, rows = 16;
  std::vector<uint16_t> cache_host(static_cast<size_t>(rows * kv), f32_to_bf16(0.5f));
  auto kc = backend->allocate(cache_host.size() * 2),
       vcache = backend->allocate(cache_host.size() * 2);
  ASSERT_TRUE(kc.ok() && vcache.ok());
  backend->copy_to_device(*stream, kc->data(), cache_host.data(), cache_host.size() * 2);
  backend->copy_to_device(*stream, vcache->data(), cache_host.data(), cache_host.size() * 2);
  ExpertLayerContext ctx{make_view(kc->data(), DType::bf16, rows, kv),
                         make_view(vcache->data(), DType::bf16, rows, kv), rows, 12, 40};

  int vision_calls = 0, expert_layers = 0;
  for (size_t i = 0; i < weights->groups.size(); ++i) {
    const WeightGroup& g = weights->groups[i];
    void* base = res.buffers[i].data();
    Status st;
    switch (g.kind) {
      case GroupKind::vision_patch:
        st = enc->run_patch(*stream, g, base);
        break;
      case GroupKind::vision_block:
        st = enc->run_block(*stream, g.layer, g, base);
        break;
      case GroupKind::vision_merger:
        st = g.layer >= 0 ? enc->run_deepstack(*stream, g.layer, g, base)
                          : enc->run_merger(*stream, g, base);
        break;
      default:
        continue;
    }
    ASSERT_TRUE(st.ok()) << g.name << ": " << st.error().to_string();
    ++vision_calls;
  }
  EXPECT_EQ(vision_calls, 1 + vc.depth + static_cast<int>(vc.deepstack_visual_indexes.size()) + 1);
  EXPECT_TRUE(all_finite(*backend, *stream, enc->image_embeds()));
  for (int k = 0; k < enc->num_deepstack(); ++k) {
    EXPECT_TRUE(all_finite(*backend, *stream, enc->deepstack(k)));
  }

  for (int step = 0; step < expert->num_steps(); ++step) {
    for (size_t i = 0; i < weights->groups.size(); ++i) {
      const WeightGroup& g = weights->groups[i];
      void* base = res.buffers[i].data();
      Status st;
      if (g.kind == GroupKind::expert_in) {
        st = expert->run_in(*stream, step, g, base);
      } else if (g.kind == GroupKind::expert_layer) {
        st = expert->run_layer(*stream, g.layer, g, base, ctx);
        expert_layers += step == 0 && g.part == LayerPart::attention;  // a layer per 3 parts
      } else if (g.kind == GroupKind::expert_out) {
        st = expert->run_out(*stream, step, g, base);
        if (st.ok()) st = expert->finish_step(*stream, step);
      } else {
        continue;
      }
      ASSERT_TRUE(st.ok()) << g.name << ": " << st.error().to_string();
    }
  }
  EXPECT_EQ(expert_layers, a->expert.num_layers);
  for (float v : expert->actions()) EXPECT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace ferry
