#include "model/cost.h"

#include <algorithm>

namespace ferry {
namespace {

constexpr double kBf16 = 2.0;

// Elements of the group's matrices (rank >= 2): what a Linear multiplies by.
double matrix_params(const WeightGroup& g) {
  double n = 0;
  for (const auto& t : g.tensors) {
    if (t.shape.size() >= 2) n += static_cast<double>(t.numel());
  }
  return n;
}

// Attention score and value products: 4 · queries · keys · (heads · head_dim).
double attention_flops(double queries, double keys, const TextConfig& t) {
  return 4.0 * queries * keys * static_cast<double>(t.num_heads * t.head_dim);
}

double kv_row_bytes(const TextConfig& t) {
  return 2.0 * static_cast<double>(t.num_kv_heads * t.head_dim) * kBf16;  // k and v
}

}  // namespace

double CallCost::floor_seconds(double peak_flops, double bandwidth) const {
  return std::max(peak_flops > 0 ? flops / peak_flops : 0.0,
                  bandwidth > 0 ? bytes() / bandwidth : 0.0);
}

CostContext cost_context(const ModelConfig& config, const Workload& w, int64_t prompt_tokens,
                         int64_t expert_keys) {
  CostContext c;
  c.prompt_tokens = prompt_tokens;
  c.expert_keys = expert_keys;
  if (const Qwen3VLConfig* vlm = config.vlm(); vlm != nullptr && w.num_images > 0) {
    const int64_t p = vlm->vision.patch_size;
    c.patches_per_image = (w.image_height / p) * (w.image_width / p);
    c.image_patches = c.patches_per_image * w.num_images;
  }
  return c;
}

std::vector<CallCost> call_costs(const ModelConfig& config, const ModelWeights& weights,
                                 std::span<const Call> calls, const CostContext& ctx) {
  const TextConfig& text = config.text();
  const AlpamayoConfig* ar = config.alpamayo();
  const Qwen3VLConfig* vlm = config.vlm();
  const double hidden = static_cast<double>(text.hidden_size);
  const double s = static_cast<double>(ctx.prompt_tokens);
  std::vector<CallCost> out;
  out.reserve(calls.size());
  for (const Call& call : calls) {
    const WeightGroup& g = weights.groups[static_cast<size_t>(call.group)];
    const double mat = matrix_params(g);
    CallCost c;
    c.weight_bytes = static_cast<double>(g.bytes);
    // Rows each call pushes through its matrices, and its attention.
    double rows = 1;
    switch (g.kind) {
      case GroupKind::vision_patch:
      case GroupKind::vision_block: {
        rows = static_cast<double>(ctx.image_patches);
        if (g.kind == GroupKind::vision_block && vlm != nullptr) {
          const double per = static_cast<double>(ctx.patches_per_image);
          const double images = per > 0 ? rows / per : 0;
          c.flops += 4.0 * images * per * per * static_cast<double>(vlm->vision.hidden_size);
        }
        const double width = vlm != nullptr ? static_cast<double>(vlm->vision.hidden_size) : 0;
        c.other_bytes += 2.0 * rows * width * kBf16;  // the residual stream in and out
        break;
      }
      case GroupKind::vision_merger:
        rows = static_cast<double>(ctx.image_patches) / 4.0;
        break;
      case GroupKind::embedding: {
        // A gather: only the rows it reads.
        const double n = call.phase == Phase::prefill ? s : 1.0;
        c.weight_bytes = n * hidden * kBf16;
        c.other_bytes = n * hidden * kBf16;
        c.flops = 0;
        out.push_back(c);
        continue;
      }
      case GroupKind::decoder_layer: {
        // Attention and the KV cache belong to the attention part; every part moves the
        // residual stream's rows.
        const bool attention = g.part == LayerPart::attention || g.part == LayerPart::whole;
        if (call.phase == Phase::prefill) {
          rows = s;
          c.other_bytes += 2.0 * s * hidden * kBf16;
          if (!attention) break;
          c.flops += attention_flops(s, (s + 1) / 2.0, text);  // causal: half the keys on average
          c.other_bytes += s * kv_row_bytes(text);
        } else if (attention) {
          const double keys = s + static_cast<double>(call.step) + 1;
          c.flops += attention_flops(1, keys, text);
          c.other_bytes += keys * kv_row_bytes(text);
        }
        break;
      }
      case GroupKind::lm_head:
        rows = 1;  // the last position only, at prefill and at every step
        break;
      case GroupKind::expert_in:
      case GroupKind::expert_out:
        rows = ar != nullptr ? static_cast<double>(ar->action_space.num_waypoints) : 64;
        break;
      case GroupKind::expert_layer: {
        rows = ar != nullptr ? static_cast<double>(ar->action_space.num_waypoints) : 64;
        if (g.part != LayerPart::attention && g.part != LayerPart::whole) break;
        const TextConfig& e = ar != nullptr ? ar->expert : text;
        const double keys = static_cast<double>(ctx.expert_keys) + rows;
        c.flops += attention_flops(rows, keys, e);
        c.other_bytes += static_cast<double>(ctx.expert_keys) * kv_row_bytes(e);
        break;
      }
    }
    c.flops += 2.0 * rows * mat;
    out.push_back(c);
  }
  return out;
}

}  // namespace ferry
