// What-if re-pricing (plan/what_if.h) on made-up profiles: the --what-if parser and its errors,
// copies scaling with the link, each call's C_EXE with the resource that bounds it, host steps
// untouched, and a plan that changes when the target's balance of link and compute changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/what_if.h"
#include "plan_toy_model.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

std::string what_if_error(std::string_view spec) {
  const Result<WhatIfTarget> t = parse_what_if(spec);
  return t.ok() ? std::string("(parsed)") : t.error().message;
}

TEST(WhatIfParse, CardsKeysAndOverrides) {
  const Result<WhatIfTarget> card = parse_what_if("rtx-4080");
  ASSERT_TRUE(card.ok()) << card.error().message;
  ASSERT_NE(card->card, nullptr);
  EXPECT_EQ(card->label, "NVIDIA GeForce RTX 4080");
  EXPECT_DOUBLE_EQ(*card->figures.memory_bandwidth, 716.8e9);
  EXPECT_DOUBLE_EQ(*card->figures.peak_flops, 97.5e12);
  EXPECT_EQ(*card->figures.vram, uint64_t{16} << 30);
  EXPECT_FALSE(card->integrated);

  const Result<WhatIfTarget> keys = parse_what_if("link=25GB/s,hbm=717GB/s,tflops=97,vram=16GiB");
  ASSERT_TRUE(keys.ok()) << keys.error().message;
  EXPECT_EQ(keys->card, nullptr);
  EXPECT_DOUBLE_EQ(*keys->figures.link_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(*keys->figures.memory_bandwidth, 717e9);
  EXPECT_DOUBLE_EQ(*keys->figures.peak_flops, 97e12);
  EXPECT_EQ(*keys->figures.vram, uint64_t{16} << 30);

  const Result<WhatIfTarget> some = parse_what_if("link=900MiB/s");
  ASSERT_TRUE(some.ok()) << some.error().message;
  EXPECT_DOUBLE_EQ(*some->figures.link_bytes_per_s, 900.0 * (1 << 20));
  EXPECT_FALSE(some->figures.memory_bandwidth || some->figures.peak_flops || some->figures.vram);

  // A card, then a key over its figure: a 4060 Ti in a Gen4 x16 slot still trains x8, but a
  // user may know better.
  const Result<WhatIfTarget> over = parse_what_if("rtx-4060-ti-16gb,link=20GB/s");
  ASSERT_TRUE(over.ok()) << over.error().message;
  EXPECT_DOUBLE_EQ(*over->figures.link_bytes_per_s, 20e9);
  EXPECT_DOUBLE_EQ(*over->figures.memory_bandwidth, 288e9);
  EXPECT_EQ(over->label, "NVIDIA GeForce RTX 4060 Ti 16 GB with link=20GB/s");

  EXPECT_TRUE(parse_what_if("jetson-orin")->integrated);
  for (const NamedCard& c : named_cards()) {
    SCOPED_TRACE(c.key);
    EXPECT_GT(c.link_bytes_per_s, 0);
    EXPECT_GT(c.memory_bandwidth, c.link_bytes_per_s);
    EXPECT_GT(c.peak_flops, 1e13);
    EXPECT_GE(c.vram, uint64_t{12} << 30);
  }
}

TEST(WhatIfParse, OneLineErrorsNameTheItem) {
  EXPECT_EQ(what_if_error("fast=1"),
            "--what-if: unknown key \"fast\" (keys: link, hbm, tflops, vram)");
  EXPECT_EQ(what_if_error("rtx-9090")
                .rfind("--what-if: unknown card \"rtx-9090\" (known: rtx-3080-ti, ", 0),
            0u)
      << what_if_error("rtx-9090");
  EXPECT_NE(what_if_error("h200"), "(parsed)");  // a profile's machine, not a target
  EXPECT_EQ(what_if_error("link=25"),
            "--what-if: link=25 is not a rate: give bytes per second with a unit, e.g. "
            "link=25GB/s");
  EXPECT_EQ(what_if_error("link=25/s"), "--what-if: link=25/s has no unit: give e.g. link=25GB/s");
  EXPECT_EQ(what_if_error("hbm=fastGB/s"),
            "--what-if: hbm=fastGB/s is not a rate (e.g. 25GB/s, 900MiB/s)");
  EXPECT_EQ(what_if_error("tflops=97T"),
            "--what-if: tflops=97T is not a number of TFLOP/s (e.g. tflops=97)");
  EXPECT_EQ(what_if_error("tflops=0"), "--what-if: tflops=0 is outside 0.001 to 1000000");
  EXPECT_EQ(what_if_error("vram=lots"), "--what-if: vram=lots is not a size (e.g. vram=16GiB)");
  EXPECT_EQ(what_if_error("link=25GB/s,link=26GB/s"), "--what-if: \"link\" is given twice");
  EXPECT_EQ(what_if_error("link=25GB/s,,hbm=1TB/s"),
            "--what-if: an empty item in \"link=25GB/s,,hbm=1TB/s\"");
  EXPECT_EQ(what_if_error("link=25GB/s,rtx-4080"),
            "--what-if: the card \"rtx-4080\" must come first, before keys");
  EXPECT_EQ(what_if_error("link="), "--what-if: link= has no value");
  EXPECT_EQ(what_if_error("link=1B/s"), "--what-if: link=1B/s is outside 1MB/s to 100TB/s");
}

// Two groups: "mem" memory-bound (1 GB read, 1 GFLOP), "flop" compute-bound (1 TFLOP, 1 MB), on
// the toy machine (1 TFLOP/s, 100 GB/s, link 1 GB/s): C_EXE 10 ms and 1 s.
struct Roofline {
  Toy toy;
  std::vector<CallCost> costs;
};

Roofline roofline_toy() {
  ToyBuilder b(1e9);
  const int mem = b.group("text.layers.0", GroupKind::decoder_layer, 1'000'000, 1e-3);
  const int flop = b.group("text.layers.1", GroupKind::decoder_layer, 2'000'000, 2e-3);
  b.exe(mem, Phase::prefill, 10e-3).exe_copying(mem, Phase::prefill, 12e-3);
  b.exe(flop, Phase::prefill, 1.0);
  b.host(3e-4, 2e-5, 5e-6);
  b.step({mem, flop}, Phase::prefill, 0);
  Roofline r{b.build(), {}};
  r.toy.profile.host.inputs_s = 4e-3;
  r.costs = {CallCost{1e9, 1e9, 0}, CallCost{1e12, 1e6, 0}};
  return r;
}

Repricing reprice(const Roofline& r, std::string_view spec) {
  const Result<WhatIfTarget> t = parse_what_if(spec);
  EXPECT_TRUE(t.ok()) << t.error().message;
  Result<Repricing> out = reprice_profile(r.toy.profile, r.toy.weights, r.toy.calls, r.costs, *t);
  EXPECT_TRUE(out.ok()) << out.error().message;
  return std::move(out).value();
}

double exe(const Repricing& r, size_t g) {
  return *r.profile.groups[g].exe_s[phase_index(Phase::prefill)];
}

TEST(WhatIfReprice, DoublingTheLinkHalvesCopyTimesAndNothingElse) {
  const Roofline t = roofline_toy();
  const Repricing r = reprice(t, "link=2GB/s");
  EXPECT_DOUBLE_EQ(r.copy_scale, 0.5);
  EXPECT_DOUBLE_EQ(r.profile.groups[0].dma_s, 0.5e-3);
  EXPECT_DOUBLE_EQ(r.profile.groups[1].dma_s, 1e-3);
  EXPECT_DOUBLE_EQ(*r.profile.host.inputs_s, 2e-3);  // the pixels cross the link too
  EXPECT_DOUBLE_EQ(r.profile.link_bytes_per_s, 2e9);
  EXPECT_DOUBLE_EQ(exe(r, 0), 10e-3);
  EXPECT_DOUBLE_EQ(exe(r, 1), 1.0);
  // Host steps are the host's: as measured, whatever the target.
  EXPECT_EQ(r.profile.host.sampling_s, t.toy.profile.host.sampling_s);
  EXPECT_EQ(r.profile.host.euler_s, t.toy.profile.host.euler_s);
  EXPECT_EQ(r.profile.host.launch_s, t.toy.profile.host.launch_s);
  const std::string line = describe_repricing(r);
  EXPECT_NE(line.find("copies x0.5"), std::string::npos) << line;
  EXPECT_NE(line.find("host steps as measured"), std::string::npos) << line;
}

TEST(WhatIfReprice, EachCallScalesWithTheResourceThatBoundsIt) {
  const Roofline t = roofline_toy();
  // Twice the bandwidth: the memory-bound call halves (alone and copying), the other stays.
  Repricing r = reprice(t, "hbm=200GB/s");
  EXPECT_DOUBLE_EQ(exe(r, 0), 5e-3);
  EXPECT_DOUBLE_EQ(*r.profile.groups[0].exe_copying_s[phase_index(Phase::prefill)], 6e-3);
  EXPECT_DOUBLE_EQ(exe(r, 1), 1.0);
  EXPECT_DOUBLE_EQ(r.profile.groups[0].dma_s, 1e-3);  // the link as it was
  EXPECT_EQ(r.memory_bound_calls, 1);
  EXPECT_EQ(r.compute_bound_calls, 1);
  // Twice the TFLOPS: the compute-bound call halves, the memory-bound one stays.
  r = reprice(t, "tflops=2");
  EXPECT_DOUBLE_EQ(exe(r, 0), 10e-3);
  EXPECT_DOUBLE_EQ(exe(r, 1), 0.5);
  // A call that changes sides: the memory-bound one on a machine with 1/20 the TFLOPS takes
  // 1 GFLOP / 50 GFLOP/s = 20 ms against its 10 ms floor: x2 (the compute-bound one x20).
  r = reprice(t, "tflops=0.05");
  EXPECT_DOUBLE_EQ(exe(r, 0), 20e-3);
  EXPECT_DOUBLE_EQ(exe(r, 1), 20.0);
  EXPECT_EQ(r.compute_bound_calls, 2);
  EXPECT_DOUBLE_EQ(r.exe_scale_min, 2);
  EXPECT_DOUBLE_EQ(r.exe_scale_max, 20);
  // Σ C_EXE 1.01 s -> 20.02 s.
  EXPECT_NEAR(r.exe_scale_total, 20.02 / 1.01, 1e-12);
}

TEST(WhatIfReprice, TheSourceIsComparedAtItsPublishedFiguresWhereTheTableKnowsIt) {
  Roofline t = roofline_toy();
  t.toy.profile.device = "NVIDIA H200";
  t.toy.profile.memory_bandwidth = 4.2e12;  // measured, below the published 4.8 TB/s
  const Repricing r = reprice(t, "hbm=2.4TB/s");
  EXPECT_EQ(r.memory.from_what, "published");
  EXPECT_DOUBLE_EQ(r.memory.from, 4.8e12);
  // The memory-bound call: 1 GB at 4.8 TB/s against 1 GFLOP at 989 TFLOP/s, then at 2.4 TB/s.
  EXPECT_DOUBLE_EQ(exe(r, 0), 20e-3);
}

TEST(WhatIfReprice, AProfileWithoutBandwidthCannotBeScaledByIt) {
  Roofline t = roofline_toy();
  t.toy.profile.memory_bandwidth = 0;
  const Result<Repricing> r = reprice_profile(t.toy.profile, t.toy.weights, t.toy.calls, t.costs,
                                              *parse_what_if("hbm=1TB/s"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "--what-if: the profile has no memory bandwidth to scale from "
            "(compute.memory_bandwidth_bytes_per_s is 0)");
}

// Four vision blocks, compute-bound, called once (2 ms each), and four decoder layers,
// memory-bound, called in 5 decode steps (20 ms each); every group 10 MiB, copied in 10 ms. Room
// for four residents and two slots. On the source the layers' copies hide under their compute
// and the blocks' do not: the blocks are kept (three or four: a block streamed first in the
// inference costs little more than its copy's lead). With ten times the bandwidth the layers
// compute in 2 ms, their 20 copies no longer hide, and the layers are kept instead (three or
// four, the room left to a block).
TEST(WhatIfReprice, ThePlanChangesWhenTheBalanceDoes) {
  ToyBuilder b(1e9);
  const uint64_t mib10 = uint64_t{10} << 20;
  const auto vit =
      b.stack("vision.blocks", GroupKind::vision_block, 4, mib10, 10e-3, Phase::vision, 2e-3);
  const auto layers =
      b.stack("text.layers", GroupKind::decoder_layer, 4, mib10, 10e-3, Phase::decode, 20e-3);
  b.step(vit, Phase::vision, 0);
  for (int s = 0; s < 5; ++s) b.step(layers, Phase::decode, s);
  const Toy toy = b.build();
  std::vector<CallCost> costs;
  for (const Call& c : toy.calls) {
    costs.push_back(c.phase == Phase::vision ? CallCost{2e9, 1e6, 0} : CallCost{1e6, 2e9, 0});
  }
  const uint64_t budget = 6 * mib10;
  auto resident_kinds = [&](const Plan& plan) {
    int blocks = 0, decoder = 0;
    for (size_t g = 0; g < toy.weights.groups.size(); ++g) {
      if (plan.placement[g] != Placement::resident) continue;
      ++(toy.weights.groups[g].kind == GroupKind::vision_block ? blocks : decoder);
    }
    return std::pair{blocks, decoder};
  };
  const Result<PlannerResult> source = make_plan(toy.weights, toy.calls, toy.profile, budget);
  ASSERT_TRUE(source.ok()) << source.error().message;
  const auto [source_blocks, source_layers] = resident_kinds(source->plan);
  EXPECT_GE(source_blocks, 3);
  EXPECT_EQ(source_layers, 0);

  const Result<Repricing> r =
      reprice_profile(toy.profile, toy.weights, toy.calls, costs, *parse_what_if("hbm=1TB/s"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Result<PlannerResult> target = make_plan(toy.weights, toy.calls, r->profile, budget);
  ASSERT_TRUE(target.ok()) << target.error().message;
  const auto [target_blocks, target_layers] = resident_kinds(target->plan);
  EXPECT_GE(target_layers, 3);
  EXPECT_LE(target_blocks, 1);
  // And the re-planned plan is faster on the target than the source's plan would be there.
  const Schedule on_target = make_schedule(toy.weights, toy.calls, r->profile).value();
  EXPECT_LT(target->prediction.total_s, predict_total_s(on_target, source->plan));
}

}  // namespace
}  // namespace ferry
