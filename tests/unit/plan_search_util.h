// Test helper for the planner and lower-bound tests: random made-up models with repeated
// phases and host steps, and the best plan by exhaustive search over every resident subset
// and ring size.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "plan/plan.h"
#include "plan/predictor.h"
#include "plan_toy_model.h"

namespace ferry::testing {

// An embedding on the host side, `layers` decoder layers run in prefill and `decode_steps`
// decode steps, an LM head split into two chunks, and an expert of in/layers/out run for
// `flow_steps` steps; sizes and times drawn from `rng`.
inline Toy random_toy(std::mt19937& rng, int layers, int decode_steps, int flow_steps) {
  std::uniform_int_distribution<int> size_units(1, 24);
  std::uniform_real_distribution<double> ratio(0.5, 2.0), unit_exe(0.2e-3, 2e-3);
  ToyBuilder b(1e9);
  b.host(unit_exe(rng) * 0.5, unit_exe(rng) * 0.2, 0);
  auto make = [&](const std::string& name, GroupKind kind) {
    const int units = size_units(rng);  // C_DMA from 0.04 to 3.8 ms, beside C_EXE of 0.1 to 8
    return b.group(name, kind, 4096u * static_cast<uint64_t>(units), units * 8e-5 * ratio(rng));
  };
  const int embed = b.group("text.embed", GroupKind::embedding, 1 << 20, 1.0);
  b.exe(embed, Phase::prefill, 1e-5).exe(embed, Phase::decode, 1e-5);
  std::vector<int> text = {embed};
  for (int i = 0; i < layers; ++i) {
    text.push_back(make("text.layers." + std::to_string(i), GroupKind::decoder_layer));
    b.exe(text.back(), Phase::prefill, unit_exe(rng) * 4)
        .exe(text.back(), Phase::decode, unit_exe(rng) * 0.5);
  }
  for (int i = 0; i < 2; ++i) {
    text.push_back(make("text.head." + std::to_string(i), GroupKind::lm_head));
    b.exe(text.back(), Phase::prefill, unit_exe(rng))
        .exe(text.back(), Phase::decode, unit_exe(rng) * 0.3);
  }
  std::vector<int> expert;
  if (flow_steps > 0) {
    expert.push_back(make("expert.in", GroupKind::expert_in));
    expert.push_back(make("expert.layers.0", GroupKind::expert_layer));
    expert.push_back(make("expert.layers.1", GroupKind::expert_layer));
    expert.push_back(make("expert.out", GroupKind::expert_out));
    for (int g : expert) b.exe(g, Phase::expert, unit_exe(rng) * 0.5);
  }
  b.step(text, Phase::prefill, 0);
  for (int s = 0; s < decode_steps; ++s) b.step(text, Phase::decode, s);
  for (int s = 0; s < flow_steps; ++s) b.step(expert, Phase::expert, s);
  return b.build();
}

// A plan with the groups whose bit is set in `mask` (over the groups that cannot stay on the
// host, in order) resident, the rest streamed through `slots` slots (1 = sequential).
inline Plan mask_plan(const ModelWeights& w, uint64_t mask, int slots) {
  Plan p;
  p.placement.assign(w.groups.size(), Placement::host);
  int bit = 0;
  for (size_t g = 0; g < w.groups.size(); ++g) {
    if (host_placement_allowed(w.groups[g])) continue;
    p.placement[g] = (mask >> bit++) & 1u ? Placement::resident : Placement::streamed;
  }
  const uint64_t largest = largest_streamed_group(p, w);
  p.mode = slots == 1 ? StreamMode::sequential : StreamMode::pipelined;
  p.slots = largest > 0 ? slots : 0;
  p.slot_bytes = align_group_bytes(largest);
  return p;
}

inline int copyable_groups(const ModelWeights& w) {
  int n = 0;
  for (const WeightGroup& g : w.groups) n += host_placement_allowed(g) ? 0 : 1;
  return n;
}

// The fastest predicted latency over every resident subset and ring size 1..max_slots that
// fits the budget (infinity when none does).
inline double exhaustive_best(const Toy& t, const Schedule& s, uint64_t budget, int max_slots) {
  const int n = copyable_groups(t.weights);
  double best = std::numeric_limits<double>::infinity();
  if (t.weights.total_bytes() <= budget) {
    best = predict_total_s(s, all_resident_plan(t.weights));
  }
  for (uint64_t mask = 0; mask < (uint64_t{1} << n); ++mask) {
    for (int slots = 1; slots <= max_slots; ++slots) {
      const Plan p = mask_plan(t.weights, mask, slots);
      if (plan_weight_device_bytes(p, t.weights) > budget) continue;
      best = std::min(best, predict_total_s(s, p));
      if (p.slots == 0) break;  // nothing streams: the ring size does not matter
    }
  }
  return best;
}

}  // namespace ferry::testing
