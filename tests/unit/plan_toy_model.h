// Test helper: made-up models for the planning tests. A toy is a list of weight groups (name,
// kind, bytes) with a profile (C_DMA, C_EXE per phase) and a call sequence built step by step,
// so a test can state a paper's setting (L uniform layers, R repetitions) or a random one.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "model/call_sequence.h"
#include "model/weights.h"
#include "plan/profile.h"
#include "plan/schedule.h"

namespace ferry::testing {

struct Toy {
  ModelWeights weights;
  std::vector<Call> calls;
  Profile profile;

  Schedule schedule() const {
    auto s = make_schedule(weights, calls, profile);
    FERRY_CHECK(s.ok(), s.ok() ? "" : s.error().message);
    return std::move(s).value();
  }
};

class ToyBuilder {
 public:
  explicit ToyBuilder(double link_bytes_per_s = 1e9) {
    toy_.profile.device = "toy";
    toy_.profile.byte_path = "pinned";
    toy_.profile.link_bytes_per_s = link_bytes_per_s;
    toy_.profile.peak_flops = 1e12;
    toy_.profile.memory_bandwidth = 1e11;
  }

  // A group; its C_EXE per phase is set with exe(). Returns its index.
  int group(const std::string& name, GroupKind kind, uint64_t bytes, double dma_s) {
    WeightGroup g;
    g.name = name;
    g.kind = kind;
    g.bytes = bytes;
    toy_.weights.groups.push_back(g);
    GroupProfile p;
    p.name = name;
    p.bytes = bytes;
    p.dma_s = dma_s;
    toy_.profile.groups.push_back(p);
    return static_cast<int>(toy_.weights.groups.size() - 1);
  }
  ToyBuilder& exe(int g, Phase phase, double seconds) {
    toy_.profile.groups[static_cast<size_t>(g)].exe_s[phase_index(phase)] = seconds;
    return *this;
  }
  // Its C_EXE in `phase` while a copy runs (absent: the same as exe()).
  ToyBuilder& exe_copying(int g, Phase phase, double seconds) {
    toy_.profile.groups[static_cast<size_t>(g)].exe_copying_s[phase_index(phase)] = seconds;
    return *this;
  }
  // `count` uniform groups "<prefix>.<i>" of one kind, timed in one phase; returns their indices.
  std::vector<int> stack(const std::string& prefix, GroupKind kind, int count, uint64_t bytes,
                         double dma_s, Phase phase, double exe_s) {
    std::vector<int> out;
    for (int i = 0; i < count; ++i) {
      out.push_back(group(prefix + "." + std::to_string(i), kind, bytes, dma_s));
      exe(out.back(), phase, exe_s);
    }
    return out;
  }
  // Calls `groups` in order, as one step of `phase`.
  ToyBuilder& step(const std::vector<int>& groups, Phase phase, int step_index) {
    for (int g : groups) toy_.calls.push_back(Call{g, phase, step_index});
    return *this;
  }
  ToyBuilder& host(double sampling_s, double euler_s, double launch_s) {
    toy_.profile.host = HostCosts{sampling_s, euler_s, launch_s, {}, {}, {}, {}};
    return *this;
  }
  Toy build() const { return toy_; }

 private:
  Toy toy_;
};

// The paper's Alpamayo on the RTX 5070 Ti as a toy (Table III times, Section IV-D sizes): 27 ViT
// blocks of 29.1 MB, 36 VLM layers of 368.0 MB (prefill once, then `decode_steps` decode
// steps), 36 expert layers of 120.8 MB (`flow_steps` steps); MB = 1e6 bytes. No embedding, head
// or host steps: only the layers the paper's tables price.
inline Toy paper_table3_toy(int decode_steps = 21, int flow_steps = 10) {
  ToyBuilder b(33.4e9);
  const auto vit = b.stack("vision.blocks", GroupKind::vision_block, 27, 29'100'000, 0.9e-3,
                           Phase::vision, 8.3e-3);
  const auto vlm = b.stack("text.layers", GroupKind::decoder_layer, 36, 368'000'000, 10.9e-3,
                           Phase::prefill, 16.6e-3);
  for (int g : vlm) b.exe(g, Phase::decode, 0.9e-3);
  const auto expert = b.stack("expert.layers", GroupKind::expert_layer, 36, 120'800'000, 3.6e-3,
                              Phase::expert, 1.0e-3);
  b.step(vit, Phase::vision, 0).step(vlm, Phase::prefill, 0);
  for (int s = 0; s < decode_steps; ++s) b.step(vlm, Phase::decode, s);
  for (int s = 0; s < flow_steps; ++s) b.step(expert, Phase::expert, s);
  return b.build();
}

}  // namespace ferry::testing
