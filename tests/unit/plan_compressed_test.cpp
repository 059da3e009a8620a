// Plans with compressed groups (plan/plan.h Form::compressed): what validate_plan accepts, what
// they take in device memory, the copy order's ring slots, staging buffers and decodes, and the
// plan file's forms.
#include <gtest/gtest.h>

#include <algorithm>

#include <vector>

#include "plan/forms.h"
#include "plan/lent_cache.h"
#include "plan/plan.h"
#include "plan/planner.h"
#include "plan/predictor.h"
#include "plan_toy_model.h"

namespace ferry {
namespace {

using testing::Toy;
using testing::ToyBuilder;

// Four layers of 40 KiB (compressed: 28 KiB), the embedding; prefill then two decode steps.
Toy four_layers() {
  ToyBuilder b(1e9);
  const int e = b.group("text.embed", GroupKind::embedding, 8192, 1e-5);
  b.exe(e, Phase::prefill, 1e-5).exe(e, Phase::decode, 1e-5);
  const auto layers =
      b.stack("text.layers", GroupKind::decoder_layer, 4, 40960, 4e-5, Phase::prefill, 1e-4);
  for (int g : layers) b.exe(g, Phase::decode, 1e-5);
  std::vector<int> all{e};
  all.insert(all.end(), layers.begin(), layers.end());
  b.step(all, Phase::prefill, 0).step(all, Phase::decode, 0).step(all, Phase::decode, 1);
  return b.build();
}

const std::vector<uint64_t> kSizes{0, 28672, 28672, 28672, 20480};

// Layer 0 resident compressed, 1 streamed compressed, 2 streamed raw, 3 resident raw.
Plan mixed(const Toy& t, StreamMode mode = StreamMode::pipelined) {
  Plan p = plan_with_resident(t.weights, {"text.layers.0", "text.layers.3"}, mode).value();
  return with_compressed(p, t.weights, {"text.layers.0", "text.layers.1"}, kSizes, 2).value();
}

TEST(PlanCompressed, WithCompressedSizesTheRingAndTheStagingBuffers) {
  const Toy t = four_layers();
  const Plan p = mixed(t);
  EXPECT_EQ(form_of(p, 1), Form::compressed);
  EXPECT_EQ(form_of(p, 2), Form::compressed);
  EXPECT_EQ(form_of(p, 3), Form::raw);
  EXPECT_TRUE(ring_group(p, 1));   // resident compressed: decoded into a slot
  EXPECT_FALSE(ring_group(p, 4));  // resident raw
  EXPECT_EQ(p.slots, 2);
  EXPECT_EQ(p.slot_bytes, 40960u);
  EXPECT_EQ(p.staging, 2);
  EXPECT_EQ(p.staging_bytes, 28672u);
  EXPECT_EQ(largest_streamed_group(p, t.weights), 40960u);
  EXPECT_EQ(largest_staged_group(p, kSizes), 28672u);
  // Resident: layer 0 at its compressed size, layer 3 raw.
  EXPECT_EQ(resident_bytes(p, t.weights, kSizes), 28672u + 40960u);
  EXPECT_EQ(plan_weight_device_bytes(p, t.weights, kSizes),
            28672u + 40960u + 2 * 40960u + 2 * 28672u);
  EXPECT_TRUE(validate_plan(p, t.weights, kSizes).ok());
  // Sequential mode: one slot and one staging buffer.
  const Plan seq = mixed(t, StreamMode::sequential);
  EXPECT_EQ(seq.slots, 1);
  EXPECT_EQ(seq.staging, 1);
  // Only resident compressed groups still need a ring.
  Plan all = all_resident_plan(t.weights);
  all = with_compressed(all, t.weights, {"text.layers.2"}, kSizes).value();
  EXPECT_EQ(all.slots, 2);
  EXPECT_EQ(all.slot_bytes, 40960u);
  EXPECT_EQ(all.staging, 0);
}

TEST(PlanCompressed, ValidatePlanChecksTheForms) {
  const Toy t = four_layers();
  const Plan good = mixed(t);
  auto refused = [&](Plan p, const std::vector<uint64_t>& sizes, const std::string& why) {
    const Status st = validate_plan(p, t.weights, sizes);
    ASSERT_FALSE(st.ok()) << why;
    EXPECT_EQ(st.error().message, "plan: " + why);
  };
  refused(good, {},
          "group text.layers.0 is compressed in the plan, but the model has no compressed form "
          "of it");
  std::vector<uint64_t> no_layer1 = kSizes;
  no_layer1[2] = 0;
  refused(good, no_layer1,
          "group text.layers.1 is compressed in the plan, but the model has no compressed form "
          "of it");
  Plan p = good;
  p.staging_bytes = 256;
  refused(p, kSizes,
          "staging buffers of 256 bytes cannot hold the largest streamed compressed group (28672 "
          "bytes)");
  p = good;
  p.staging = 0;
  refused(p, kSizes, "pipelined mode needs 1 to 64 staging buffers, not 0");
  p = good;
  p.form[2] = Form::raw;  // layer 1 raw now: nothing compressed streams
  refused(p, kSizes, "no compressed group is streamed, so there must be no staging buffers");
  p = good;
  p.form[0] = Form::compressed;  // the embedding, on the host
  refused(p, kSizes,
          "group text.embed is on the host and compressed (kernels read only raw groups in place)");
  p = good;
  p.form.pop_back();
  refused(p, kSizes, "4 forms for a model of 5 weight groups");
  p = good;
  p.slot_bytes = 28672;
  refused(p, kSizes,
          "slots of 28672 bytes cannot hold the largest streamed or decoded group (40960 bytes)");
  p = good;
  p.cached.push_back({2, 0});
  refused(p, kSizes, "group text.layers.1 is cached in the lent region but compressed");
  EXPECT_FALSE(with_compressed(plan_with_resident(t.weights, {}, StreamMode::pipelined).value(),
                               t.weights, {"text.embed"}, kSizes)
                   .ok());
  EXPECT_FALSE(
      with_compressed(all_resident_plan(t.weights), t.weights, {"text.layers.9"}, kSizes).ok());
}

// Ring calls are the streamed raw and the decoded calls in call order, slot k mod 2; staged
// copies take staging buffer j mod 2 and wait for the decode of its previous user; each decode
// waits for the slot's previous user and its copy.
TEST(PlanCompressed, TheCopyOrderRingsStagesAndDecodes) {
  const Toy t = four_layers();
  const Plan p = mixed(t);
  std::vector<uint64_t> bytes;
  for (const WeightGroup& g : t.weights.groups) bytes.push_back(g.bytes);
  auto order = copy_order(p, t.calls, bytes);
  ASSERT_TRUE(order.ok()) << order.error().message;
  // Per step: embed (host), layer 0 (decode), layer 1 (staged), layer 2 (ring), layer 3 (none).
  const std::vector<CopyKind> step{CopyKind::none, CopyKind::decode, CopyKind::staged,
                                   CopyKind::ring, CopyKind::none};
  for (size_t i = 0; i < t.calls.size(); ++i) EXPECT_EQ(order->kind[i], step[i % 5]) << i;
  ASSERT_EQ(order->decodes.size(), 6u);
  ASSERT_EQ(order->items.size(), 6u);  // staged and ring copies, 2 per step
  int ring = 0;
  std::vector<int> last_user(2, -1);
  int staged = 0;
  std::vector<int> staging_last(2, -1);
  for (size_t i = 0; i < t.calls.size(); ++i) {
    if (order->slot[i] < 0) continue;
    EXPECT_EQ(order->slot[i], ring % 2) << i;
    const int after = last_user[static_cast<size_t>(ring % 2)];
    last_user[static_cast<size_t>(ring % 2)] = static_cast<int>(i);
    ++ring;
    if (order->decode[i] >= 0) {
      const DecodeItem& d = order->decodes[static_cast<size_t>(order->decode[i])];
      EXPECT_EQ(d.call, i);
      EXPECT_EQ(d.slot, order->slot[i]);
      EXPECT_EQ(d.after, after) << i;
      EXPECT_EQ(d.copy, order->kind[i] == CopyKind::staged ? order->item[i] : -1);
      if (order->kind[i] == CopyKind::staged) {
        const CopyItem& c = order->items[static_cast<size_t>(order->item[i])];
        EXPECT_EQ(c.slot, -1);
        EXPECT_EQ(c.staging, staged % 2);
        EXPECT_EQ(c.after_decode, staging_last[static_cast<size_t>(staged % 2)]) << i;
        EXPECT_EQ(d.staging, c.staging);
        staging_last[static_cast<size_t>(staged % 2)] = order->decode[i];
        ++staged;
      }
    } else {
      EXPECT_EQ(order->items[static_cast<size_t>(order->item[i])].after, after) << i;
    }
  }
  EXPECT_EQ(ring, 9);
  EXPECT_EQ(staged, 3);
}

TEST(PlanCompressed, PlanFilesKeepTheForms) {
  const Toy t = four_layers();
  const Plan p = mixed(t);
  const std::string json = plan_to_json(p, t.weights);
  EXPECT_NE(json.find("\"form\": \"compressed\""), std::string::npos) << json;
  auto back = plan_from_json(json, t.weights);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, p);
  // A raw plan's file names no form and reads back with none.
  const Plan raw = plan_with_resident(t.weights, {}, StreamMode::pipelined).value();
  const std::string raw_json = plan_to_json(raw, t.weights);
  EXPECT_EQ(raw_json.find("\"form\""), std::string::npos);
  EXPECT_EQ(plan_from_json(raw_json, t.weights).value(), raw);
  std::string bad = json;
  bad.replace(bad.find("\"compressed\""), 12, "\"zipped\"");
  auto refused = plan_from_json(bad, t.weights);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("\"form\" must be"), std::string::npos);
}

// The predictor's decode stream on a made-up plan: A (1000 bytes, 500 compressed) streamed
// compressed, B resident compressed, called A, B, A; C_DMA(A) 1 ms raw (0.5 ms compressed), C_DEC
// 0.2 ms (A) and 0.3 ms (B), C_EXE 1 ms each; two slots, one staging buffer.
//   copy A#0 [0, 0.5]; decode A#0 [0.5, 0.7]; decode B [0.7, 1.0];
//   copy A#2 waits for decode A#0 (its staging buffer's previous user): [0.7, 1.2];
//   compute A#0 [0.7, 1.7]; decode A#2 waits for compute A#0 (slot 0's previous user): [1.7, 1.9];
//   compute B [1.7, 2.7]; compute A#2 [2.7, 3.7].
// Sequential: copy, decode, compute one after another: 0.5 + 0.2 + 1 + 0.3 + 1 + 0.5 + 0.2 + 1.
TEST(PlanCompressed, ThePredictorSchedulesTheDecodeStream) {
  ToyBuilder b(1e6);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 1024, 1e-3);
  const int c = b.group("text.layers.1", GroupKind::decoder_layer, 1024, 1e-3);
  b.exe(a, Phase::prefill, 1e-3).exe(c, Phase::prefill, 1e-3);
  b.step({a, c, a}, Phase::prefill, 0);
  Toy t = b.build();
  t.profile.groups[0].decode_s = 0.2e-3;
  t.profile.groups[1].decode_s = 0.3e-3;
  Schedule s = t.schedule();
  const std::vector<uint64_t> sizes{512, 512};
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  EXPECT_DOUBLE_EQ(s.dma_compressed_s[0], 0.5e-3);
  Plan p = plan_with_resident(t.weights, {"text.layers.1"}, StreamMode::pipelined).value();
  p = with_compressed(p, t.weights, {"text.layers.0", "text.layers.1"}, sizes, 1).value();
  ASSERT_EQ(p.slots, 2);
  ASSERT_EQ(p.staging, 1);
  std::vector<CallTiming> trace;
  auto pred = predict(t.weights, s, p, &trace);
  ASSERT_TRUE(pred.ok()) << pred.error().message;
  EXPECT_NEAR(pred->total_s, 3.7e-3, 1e-12);
  ASSERT_EQ(trace.size(), 3u);
  EXPECT_NEAR(trace[0].decode_start, 0.5e-3, 1e-12);
  EXPECT_NEAR(trace[1].decode_start, 0.7e-3, 1e-12);
  EXPECT_NEAR(trace[2].copy_start, 0.7e-3, 1e-12);
  EXPECT_NEAR(trace[2].decode_start, 1.7e-3, 1e-12);
  EXPECT_NEAR(trace[2].compute_start, 2.7e-3, 1e-12);
  EXPECT_EQ(pred->decodes, 3);
  EXPECT_NEAR(pred->decode_busy_s, 0.7e-3, 1e-12);
  EXPECT_EQ(pred->copies, 2);
  EXPECT_EQ(pred->link_bytes, 2u * 512);
  Plan seq = plan_with_resident(t.weights, {"text.layers.1"}, StreamMode::sequential).value();
  seq = with_compressed(seq, t.weights, {"text.layers.0", "text.layers.1"}, sizes).value();
  auto sequential = predict(t.weights, s, seq);
  ASSERT_TRUE(sequential.ok()) << sequential.error().message;
  EXPECT_NEAR(sequential->total_s, 4.7e-3, 1e-12);
  // Without the compressed sizes in the schedule the plan is refused, not priced raw.
  EXPECT_FALSE(predict(t.weights, t.schedule(), p).ok());
}

// C_DEC where the profile has none: the raw bytes over the profile's decode rate, or over
// kAssumedDecodeBytesPerS (a guess) when it has none either.
TEST(PlanCompressed, UnmeasuredDecodeTimesAreModelled) {
  ToyBuilder b(1e6);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 1024, 1e-3);
  b.exe(a, Phase::prefill, 1e-3).step({a}, Phase::prefill, 0);
  Toy t = b.build();
  Schedule s = t.schedule();
  const std::vector<uint64_t> sizes{512};
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  EXPECT_DOUBLE_EQ(s.decode_s[0], 1024 / kAssumedDecodeBytesPerS);
  t.profile.decode_bytes_per_s = 1e6;
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  EXPECT_DOUBLE_EQ(s.decode_s[0], 1024 / 1e6);
  EXPECT_FALSE(set_compressed(s, std::vector<uint64_t>{1, 2}, t.profile).ok());
}

// The planner's last step streams groups compressed only where the predictor says it is faster
// and the staging buffers fit: the toy above with A streamed raw takes 4.0 ms (two 1 ms copies);
// A compressed, 3.7 ms (above) with two staging buffers or one.
TEST(PlanCompressed, ThePlannerStreamsCompressedWhereItIsFasterAndFits) {
  ToyBuilder b(1e6);
  const int a = b.group("text.layers.0", GroupKind::decoder_layer, 1024, 1e-3);
  const int c = b.group("text.layers.1", GroupKind::decoder_layer, 1024, 1e-3);
  b.exe(a, Phase::prefill, 1e-3).exe(c, Phase::prefill, 1e-3);
  b.step({a, c, a}, Phase::prefill, 0);
  Toy t = b.build();
  t.profile.groups[0].decode_s = 0.2e-3;
  Schedule s = t.schedule();
  const std::vector<uint64_t> sizes{512, 512};
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  const Plan raw = plan_with_resident(t.weights, {"text.layers.1"}, StreamMode::pipelined).value();
  EXPECT_NEAR(predict(t.weights, s, raw)->total_s, 4.0e-3, 1e-12);
  ASSERT_EQ(plan_weight_device_bytes(raw, t.weights, sizes), 3072u);
  Plan got = with_streamed_compressed_if_faster(t.weights, s, raw, 4096).value();
  EXPECT_EQ(form_of(got, 0), Form::compressed);
  EXPECT_EQ(form_of(got, 1), Form::raw);  // resident: not considered yet
  EXPECT_EQ(got.staging, 2);
  EXPECT_NEAR(predict(t.weights, s, got)->total_s, 3.7e-3, 1e-12);
  got = with_streamed_compressed_if_faster(t.weights, s, raw, 3584).value();
  EXPECT_EQ(got.staging, 1);
  EXPECT_EQ(with_streamed_compressed_if_faster(t.weights, s, raw, 3583).value(), raw);
  // A decode slower than the copy it saves: raw stays.
  t.profile.groups[0].decode_s = 5e-3;
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  EXPECT_EQ(with_streamed_compressed_if_faster(t.weights, s, raw, 1 << 20).value(), raw);
  // No compressed sizes in the schedule: nothing to choose.
  EXPECT_EQ(with_streamed_compressed_if_faster(t.weights, t.schedule(), raw, 1 << 20).value(), raw);
}

// A plan that fills its budget leaves no room for staging buffers: the planner searches again
// with two of them set aside and keeps the faster plan. Eight 1 KiB layers over a slow link
// (1 ms a copy, 0.01 ms of compute each), 4 KiB for weights: raw, three layers resident and one
// slot fill it (sequential, five 1 ms copies); with 512 bytes set aside for two staging buffers
// of the 256-byte compressed layers, the rest stream compressed (0.25 ms copies, 0.05 ms
// decodes) in under 2 ms.
TEST(PlanCompressed, ThePlannerLeavesRoomForStagingWhereCompressionPays) {
  ToyBuilder b(1e6);
  std::vector<int> layers;
  for (int i = 0; i < 8; ++i) {
    layers.push_back(
        b.group("text.layers." + std::to_string(i), GroupKind::decoder_layer, 1024, 1e-3));
    b.exe(layers.back(), Phase::prefill, 0.01e-3);
  }
  b.step(layers, Phase::prefill, 0);
  Toy t = b.build();
  for (auto& g : t.profile.groups) g.decode_s = 0.05e-3;
  Schedule raw_schedule = t.schedule();
  auto raw = make_plan(t.weights, raw_schedule, 4096);
  ASSERT_TRUE(raw.ok()) << raw.error().message;
  EXPECT_TRUE(raw->plan.form.empty() || std::all_of(raw->plan.form.begin(), raw->plan.form.end(),
                                                    [](Form f) { return f == Form::raw; }));
  Schedule s = t.schedule();
  const std::vector<uint64_t> sizes(8, 256);
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  auto got = make_plan(t.weights, s, 4096);
  ASSERT_TRUE(got.ok()) << got.error().message;
  int compressed = 0;
  for (size_t g = 0; g < 8; ++g) compressed += form_of(got->plan, g) == Form::compressed;
  EXPECT_GT(compressed, 0);
  EXPECT_GT(got->plan.staging, 0);
  EXPECT_LE(plan_weight_device_bytes(got->plan, t.weights, sizes), 4096u);
  EXPECT_LT(got->prediction.total_s, 2e-3);
  EXPECT_GT(raw->prediction.total_s, 4e-3);
  EXPECT_LT(got->prediction.total_s, raw->prediction.total_s)
      << got->prediction.total_s << " against raw " << raw->prediction.total_s;
  // Where decoding costs more than the link time it saves, the raw plan stands.
  for (auto& g : t.profile.groups) g.decode_s = 5e-3;
  ASSERT_TRUE(set_compressed(s, sizes, t.profile).ok());
  got = make_plan(t.weights, s, 4096);
  ASSERT_TRUE(got.ok()) << got.error().message;
  for (size_t g = 0; g < 8; ++g) EXPECT_EQ(form_of(got->plan, g), Form::raw);
  EXPECT_NEAR(got->prediction.total_s, raw->prediction.total_s, 1e-12);
}

}  // namespace
}  // namespace ferry
