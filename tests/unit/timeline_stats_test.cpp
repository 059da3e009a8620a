// The timeline statistics (plan/timeline_stats.h) on made-up timelines: C_DMA as the pipeline
// sees it (copy spans per group, lone copy times scaled by the ratio measured on the groups that
// were streamed), host-step and stage gaps, C_EXE alone and copying, the inputs upload.
#include <gtest/gtest.h>

#include <optional>

#include "plan/schedule.h"
#include "plan/timeline_stats.h"

namespace ferry {
namespace {

WeightGroup group_of(const char* name, GroupKind kind, uint64_t bytes = 0) {
  WeightGroup g;
  g.name = name;
  g.kind = kind;
  g.bytes = bytes;
  return g;
}

Call call_of(int group) {
  Call c;
  c.group = group;
  c.phase = Phase::decode;
  return c;
}

TEST(PipelinedCopies, MedianSpanPerStreamedGroup) {
  StreamTimeline t;
  // Calls of groups 0, 1, 0, 2; group 1 is resident (no copy).
  for (int g : {0, 1, 0, 2}) t.calls.push_back(call_of(g));
  t.copy_of = {0, -1, 1, 2};
  t.copies = {{0.0, 1.0}, {2.0, 5.0}, {6.0, 8.0}};
  StreamTimeline u = t;
  u.copies = {{0.0, 2.0}, {2.0, 4.0}, {6.0, 7.0}};
  const auto got = pipelined_copy_times({t, u}, 3);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_TRUE(got[0].has_value());
  EXPECT_DOUBLE_EQ(*got[0], 2.0);  // spans 1, 3, 2, 2: median 2
  EXPECT_FALSE(got[1].has_value());
  ASSERT_TRUE(got[2].has_value());
  EXPECT_DOUBLE_EQ(*got[2], 1.5);  // spans 2, 1
}

TEST(PipelinedCopies, StreamedGroupsTheirOwnOthersScaledByTheRatio) {
  const std::vector<double> alone = {1.0, 2.0, 4.0, 0.5};
  // Groups 0 and 1 streamed: 1.1 and 2.2 in the pipeline against 1 and 2 alone -> ratio 1.1.
  const std::vector<std::optional<double>> piped = {1.1, 2.2, std::nullopt, std::nullopt};
  double ratio = 0;
  const std::vector<double> got = pipelined_dma(alone, piped, &ratio);
  EXPECT_NEAR(ratio, 1.1, 1e-12);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_DOUBLE_EQ(got[0], 1.1);
  EXPECT_DOUBLE_EQ(got[1], 2.2);
  EXPECT_NEAR(got[2], 4.4, 1e-12);
  EXPECT_NEAR(got[3], 0.55, 1e-12);
}

TEST(PipelinedCopies, NothingStreamedKeepsTheLoneTimes) {
  const std::vector<double> alone = {1.0, 2.0};
  double ratio = 0;
  const std::vector<double> got = pipelined_dma(alone, {std::nullopt, std::nullopt}, &ratio);
  EXPECT_DOUBLE_EQ(ratio, 1.0);
  EXPECT_EQ(got, alone);
}

// Host steps as the pipeline sees them: the gap between the compute span of the call a host
// step follows and the next call's, where the next call did not also wait for a copy.
TEST(HostStepGaps, MedianGapPerKindSkippingCopyWaits) {
  ModelWeights w;
  w.groups = {group_of("text.layers.0.attn", GroupKind::decoder_layer),
              group_of("text.head.0", GroupKind::lm_head),
              group_of("expert.out", GroupKind::expert_out)};
  StreamTimeline t;
  // layer, head | layer, head | layer, head | out | layer: sampling after each head, the Euler
  // update after out.
  for (int g : {0, 1, 0, 1, 0, 1, 2, 0}) t.calls.push_back(call_of(g));
  for (size_t i = 0; i < t.calls.size(); ++i) t.calls[i].step = static_cast<int>(i / 2);
  t.compute = {{0, 1}, {1, 2}, {2.5, 3.5}, {3.5, 4}, {4.75, 5}, {5, 6}, {9, 10}, {10.1, 11}};
  // Call 4 (after the second head) was streamed and its copy ended late, at 4.6: that gap mixes
  // the copy wait in and is skipped. Call 7's copy ended early.
  t.copy_of = {-1, -1, -1, -1, 0, -1, -1, 1};
  t.copies = {{3.0, 4.6}, {8.0, 9.5}};
  const auto gaps = host_step_gaps({t}, w);
  const StepGaps& sampling = gaps[static_cast<size_t>(HostStep::sampling)];
  ASSERT_TRUE(sampling.any.has_value());
  // Gaps after the heads: 0.5 (kept), 0.75 (skipped: copy wait), 3.0 (kept): median of 0.5, 3.
  EXPECT_DOUBLE_EQ(*sampling.any, 1.75);
  // [1, 1.5] had no copy running; [6, 9] had the copy [8, 9.5] for a third: neither.
  ASSERT_TRUE(sampling.alone.has_value());
  EXPECT_DOUBLE_EQ(*sampling.alone, 0.5);
  EXPECT_FALSE(sampling.copying.has_value());
  const StepGaps& euler = gaps[static_cast<size_t>(HostStep::euler)];
  ASSERT_TRUE(euler.any.has_value());
  EXPECT_NEAR(*euler.any, 0.1, 1e-12);
  // [10, 10.1] lies inside the copy [8, 9.5]? No: after it. Alone.
  ASSERT_TRUE(euler.alone.has_value());
  EXPECT_FALSE(gaps[static_cast<size_t>(HostStep::none)].any.has_value());
  // No timeline: nothing measured.
  EXPECT_FALSE(host_step_gaps({}, w)[static_cast<size_t>(HostStep::sampling)].any.has_value());
}

// C_EXE alone and with a copy running: calls split by how much of their span a copy covered;
// a group seen one way completed through its class's ratio (same kind, part and bytes).
TEST(ExeTimes, AloneAndCopyingWithTheClassRatioFillingTheGaps) {
  ModelWeights w;
  auto add = [&](const char* name, uint64_t bytes) {
    WeightGroup g;
    g.name = name;
    g.kind = GroupKind::decoder_layer;
    g.part = LayerPart::gate_up;
    g.bytes = bytes;
    w.groups.push_back(g);
  };
  add("text.layers.0.gate_up", 4096);
  add("text.layers.1.gate_up", 4096);
  add("text.layers.2.gate_up", 8192);  // another class: other bytes
  add("text.layers.3.gate_up", 4096);
  StreamTimeline t;
  // Group 0: twice with the link idle (1.0 s), twice under copies (1.2 s): ratio 1.2. Group 1
  // only under a copy (2.4 s); group 2 only alone (0.5 s); group 3 once, half covered (1.1 s).
  for (int g : {0, 0, 1, 0, 0, 2, 3}) t.calls.push_back(call_of(g));
  t.compute = {{0, 1}, {1, 2}, {10, 12.4}, {12.4, 13.6}, {13.6, 14.8}, {20, 20.5}, {30, 31.1}};
  t.copy_of.assign(t.calls.size(), -1);
  t.copies = {{9, 15}, {30.55, 32}};
  const ExeSplit split = split_exe_times({t}, w.groups.size());
  const size_t d = phase_index(Phase::decode);
  ASSERT_TRUE(split.cover[3][d].has_value());
  EXPECT_NEAR(*split.cover[3][d], 0.5, 1e-12);
  const ExeTimes e = exe_times(w, split);
  auto near = [&](const PhaseTimesOfGroups& v, size_t g, double want) {
    ASSERT_TRUE(v[g][d].has_value()) << g;
    EXPECT_NEAR(*v[g][d], want, 1e-12) << g;
  };
  near(e.alone, 0, 1.0);
  near(e.copying, 0, 1.2);
  near(e.copying, 1, 2.4);
  near(e.alone, 1, 2.0);  // 2.4 / 1.2
  near(e.alone, 2, 0.5);  // its class has no ratio: no slowdown assumed
  near(e.copying, 2, 0.5);
  near(e.alone, 3, 1.0);  // 1.1 = alone * (1 + 0.2 * 0.5)
  near(e.copying, 3, 1.2);
  EXPECT_FALSE(e.alone[0][phase_index(Phase::vision)].has_value());

  // With a sequential pass every call's alone time comes from it; group 3's copying time is
  // then solved from its half-covered call: 1.1 = 0.9 + (copying - 0.9) * 0.5.
  StreamTimeline seq;
  for (int g : {0, 1, 2, 3}) seq.calls.push_back(call_of(g));
  seq.compute = {{0, 0.95}, {1, 2.9}, {3, 3.5}, {4, 4.9}};
  seq.copy_of.assign(seq.calls.size(), -1);
  const ExeSplit alone = split_exe_times({seq}, w.groups.size());
  const ExeTimes f = exe_times(w, split, &alone);
  near(f.alone, 0, 0.95);
  near(f.copying, 0, 1.2);
  near(f.alone, 1, 1.9);
  near(f.copying, 1, 2.4);
  near(f.alone, 3, 0.9);
  near(f.copying, 3, 1.3);

  // Runs under background copies give the copying time where the pipelined runs had none
  // (group 2), and leave the ones they had (group 0).
  StreamTimeline under;
  for (int g : {0, 2}) under.calls.push_back(call_of(g));
  under.compute = {{0, 1.5}, {2, 2.65}};
  under.copy_of.assign(under.calls.size(), -1);
  const ExeSplit busy = split_exe_times({under}, w.groups.size());
  const ExeTimes u = exe_times(w, split, nullptr, &busy);
  near(u.copying, 0, 1.2);
  near(u.copying, 2, 0.65);
  near(u.alone, 2, 0.5);
}

// A call that starts on an idle engine takes longer: groups of one class seen both ways give the
// extra, which comes off the idle calls' times and is kept as idle_start.
TEST(ExeTimes, AnIdleStartIsTakenOffAndKeptPerClass) {
  ModelWeights w;
  for (const char* name : {"expert.layers.0.mlp", "expert.layers.1.mlp", "expert.layers.2.mlp"}) {
    WeightGroup g;
    g.name = name;
    g.kind = GroupKind::expert_layer;
    g.part = LayerPart::whole;
    g.bytes = name[14] == '2' ? 8192 : 4096;  // group 2: another class
    w.groups.push_back(g);
  }
  // The sequential pass: group 0 back to back after group 2 (1.0 s), group 1 after a gap
  // (1.25 s), twice each; group 2 always after a gap (0.5 s).
  StreamTimeline seq;
  for (int g : {2, 0, 1, 2, 0, 1}) seq.calls.push_back(call_of(g));
  seq.compute = {{0, 0.5}, {0.5, 1.5}, {2, 3.25}, {4, 4.5}, {4.5, 5.5}, {6, 7.25}};
  seq.copy_of.assign(seq.calls.size(), -1);
  const ExeSplit split = split_exe_times({seq}, w.groups.size());
  const size_t d = phase_index(Phase::decode);
  ASSERT_TRUE(split.alone_b2b[0][d].has_value());
  EXPECT_FALSE(split.alone_idle[0][d].has_value());
  EXPECT_NEAR(*split.alone_idle[1][d], 1.25, 1e-12);
  EXPECT_NEAR(*split.mean_idle_share[1][d], 1.0, 1e-12);
  const ExeTimes e = exe_times(w, split, &split);
  EXPECT_NEAR(*e.alone[0][d], 1.0, 1e-12);
  EXPECT_NEAR(*e.alone[1][d], 1.0, 1e-12);  // 1.25 less the class's 0.25
  EXPECT_NEAR(*e.idle_start[0][d], 0.25, 1e-12);
  EXPECT_NEAR(*e.idle_start[1][d], 0.25, 1e-12);
  // Group 2's class was never seen back to back: nothing known, nothing taken off.
  EXPECT_NEAR(*e.alone[2][d], 0.5, 1e-12);
  EXPECT_FALSE(e.idle_start[2][d].has_value());
}

// Timing events cost the engine: the gap between two calls back to back is one event's cost,
// and each span holds one more, which C_EXE must not keep.
TEST(ExeTimes, EachSpanLosesOneTimingEventsCost) {
  ModelWeights w;
  for (const char* name : {"text.layers.0.attn", "text.layers.1.attn"}) {
    w.groups.push_back(group_of(name, GroupKind::decoder_layer, 4096));
  }
  StreamTimeline t;
  // Four decode calls back to back, 1 us apart (the events), then one after a 50 us wait; two
  // prefill calls 2 us apart.
  for (int g : {0, 1, 0, 1, 0}) t.calls.push_back(call_of(g));
  t.compute = {{0, 10e-6}, {11e-6, 21e-6}, {22e-6, 32e-6}, {33e-6, 43e-6}, {93e-6, 103e-6}};
  Call p0 = call_of(0), p1 = call_of(1);
  p0.phase = p1.phase = Phase::prefill;
  t.calls.push_back(p0);
  t.calls.push_back(p1);
  t.compute.push_back({200e-6, 300e-6});
  t.compute.push_back({302e-6, 402e-6});
  t.copy_of.assign(t.calls.size(), -1);
  const auto cost = timing_event_cost({t});
  EXPECT_NEAR(cost[phase_index(Phase::decode)], 1e-6, 1e-12);
  EXPECT_NEAR(cost[phase_index(Phase::prefill)], 2e-6, 1e-12);
  // A phase without such a gap takes the median over all: gaps 1, 1, 1, 2 us.
  EXPECT_NEAR(cost[phase_index(Phase::vision)], 1e-6, 1e-12);
  const ExeSplit split = split_exe_times({t}, w.groups.size());
  const size_t d = phase_index(Phase::decode), p = phase_index(Phase::prefill);
  EXPECT_NEAR(split.event_s[d], 1e-6, 1e-12);
  ASSERT_TRUE(split.mean[0][d].has_value());
  EXPECT_NEAR(*split.mean[0][d], 9e-6, 1e-12);
  EXPECT_NEAR(*split.alone_b2b[1][d], 9e-6, 1e-12);
  EXPECT_NEAR(*split.mean[1][p], 98e-6, 1e-12);
  // No timeline: nothing to take off.
  EXPECT_EQ(timing_event_cost({})[d], 0.0);
}

// Stage boundaries are measured whole, where the first call did not wait for its copy, and
// stay out of the host steps' gaps.
TEST(HostStepGaps, StageBoundariesAreMeasuredApart) {
  ModelWeights w;
  w.groups = {group_of("vision.blocks.0", GroupKind::vision_block),
              group_of("text.layers.0", GroupKind::decoder_layer),
              group_of("text.head", GroupKind::lm_head)};
  auto at = [](int g, Phase ph, int step) {
    Call c;
    c.group = g;
    c.phase = ph;
    c.step = step;
    return c;
  };
  auto timeline = [&](double vision_to_prefill, double prefill_to_decode) {
    StreamTimeline t;
    t.calls = {at(0, Phase::vision, 0), at(1, Phase::prefill, 0), at(2, Phase::prefill, 0),
               at(1, Phase::decode, 0), at(2, Phase::decode, 0),  at(1, Phase::decode, 1),
               at(2, Phase::decode, 1)};
    const double a = 1.0 + vision_to_prefill;
    const double b = a + 2.0 + prefill_to_decode;
    t.compute = {{0, 1},         {a, a + 1},         {a + 1, a + 2},    {b, b + 1},
                 {b + 1, b + 2}, {b + 2.5, b + 3.5}, {b + 3.5, b + 4.5}};
    t.copy_of.assign(t.calls.size(), -1);
    return t;
  };
  StreamTimeline waited = timeline(9.0, 7.0);
  // Here the first prefill call waited for its copy: that boundary is not the host's alone.
  waited.copy_of[1] = 0;
  waited.copies = {{0.5, 9.5}};
  const auto entry = stage_entry_gaps({timeline(0.25, 3.0), timeline(0.75, 5.0), waited});
  ASSERT_TRUE(entry[phase_index(Phase::prefill)].has_value());
  EXPECT_NEAR(*entry[phase_index(Phase::prefill)], 0.5, 1e-12);  // 0.25, 0.75
  EXPECT_NEAR(*entry[phase_index(Phase::decode)], 5.0, 1e-12);   // 3, 5, 7
  EXPECT_FALSE(entry[phase_index(Phase::vision)].has_value());
  EXPECT_FALSE(entry[phase_index(Phase::expert)].has_value());
  // The sampling gap is the one inside decode (0.5); the boundary's 3-7 stay out of it.
  const auto gaps = host_step_gaps({timeline(0.25, 3.0)}, w);
  ASSERT_TRUE(gaps[static_cast<size_t>(HostStep::sampling)].any.has_value());
  EXPECT_NEAR(*gaps[static_cast<size_t>(HostStep::sampling)].any, 0.5, 1e-12);
}

// The inputs' upload time is the median of the timelines' inputs_end.
TEST(InputsUploadTime, TheMedianOverTheTimelines) {
  auto timeline = [](double inputs_end) {
    StreamTimeline t;
    t.calls = {call_of(0)};
    t.compute = {{inputs_end, inputs_end + 1}};
    t.copy_of = {-1};
    t.inputs_end = inputs_end;
    return t;
  };
  EXPECT_FALSE(inputs_upload_time({}).has_value());
  const auto got = inputs_upload_time({timeline(0.25), timeline(3.0), timeline(0.5)});
  ASSERT_TRUE(got.has_value());
  EXPECT_NEAR(*got, 0.5, 1e-12);
}

}  // namespace
}  // namespace ferry
