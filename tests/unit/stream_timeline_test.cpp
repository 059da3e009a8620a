// The streaming provider's timeline (plan/stream_timeline.h): on a tiny model streamed through a
// ring under random stream delays, the measured spans obey the schedule the predictor assumes
// (plan/plan.h) — copies one at a time in order, each before its call computes, a slot reused
// only after its previous call computed — and the outputs stay the all-resident run's. The summary
// (busy times, hidden copy time, stalls) is checked on made-up spans.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "exec/session.h"
#include "plan/stream_timeline.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

TEST(StreamTimeline, SummaryOfMadeUpSpans) {
  StreamTimeline t;
  t.calls = {{0, Phase::prefill, 0}, {1, Phase::prefill, 0}, {2, Phase::decode, 0}};
  t.compute = {{0.0, 1.0}, {1.5, 2.0}, {3.0, 4.0}};
  t.copy_of = {-1, 0, 1};
  // Copy 0 runs 0.5..1.5: half under call 0's compute, then the compute engine idles 1.0..1.5
  // waiting for it. Copy 1 runs 2.0..3.0 with nothing computing.
  t.copies = {{0.5, 1.5}, {2.0, 3.0}};
  t.copy_bytes = {100, 300};
  const TimelineSummary s = summarize_timeline(t);
  EXPECT_DOUBLE_EQ(s.copy_busy_s, 2.0);
  EXPECT_DOUBLE_EQ(s.hidden_copy_s, 0.5);
  EXPECT_DOUBLE_EQ(s.hidden_fraction, 0.25);
  EXPECT_DOUBLE_EQ(s.compute_busy_s, 2.5);
  EXPECT_DOUBLE_EQ(s.stall_s, 0.5 + 1.0);
  EXPECT_DOUBLE_EQ(s.span_s, 4.0);
  EXPECT_EQ(s.link_bytes, 400u);
  EXPECT_DOUBLE_EQ(s.phases[phase_index(Phase::prefill)].copy_busy_s, 1.0);
  EXPECT_EQ(s.phases[phase_index(Phase::decode)].link_bytes, 300u);
  EXPECT_EQ(s.phases[phase_index(Phase::decode)].copies, 1);
  // Nothing copied: everything counts as hidden.
  StreamTimeline none;
  none.calls = {{0, Phase::decode, 0}};
  none.compute = {{0, 1}};
  none.copy_of = {-1};
  EXPECT_DOUBLE_EQ(summarize_timeline(none).hidden_fraction, 1.0);
}

class Timelines : public ::testing::TestWithParam<int> {};

TEST_P(Timelines, SpansFollowTheExecutorsSchedule) {
  const int slots = GetParam();
  testing::TinyCheckpoint m("qwen3-tiny", "timeline");
  SessionOptions base;
  auto want = m.run(base);
  ASSERT_TRUE(want.ok());
  SessionOptions o;
  o.plan.resident = std::vector<std::string>{"text.layers.1"};
  o.plan.slots = slots;
  o.plan.lent_cache = false;  // every copy goes through the ring, in its order
  o.streaming.poison_slots = true;
  auto backend = create_cpu_backend(testing::hostile_streams());
  auto s = m.open(*backend, o);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  StreamingProvider& p = (*s)->streaming_provider();
  EXPECT_FALSE(p.timeline().ok()) << "nothing recorded yet";
  p.set_timeline(true);
  for (int run = 0; run < 2; ++run) {  // the second run reuses the events
    auto got = (*s)->run();
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    testing::expect_same(*got, *want, "timeline run");
    auto t = p.timeline();
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    ASSERT_EQ(t->calls.size(), (*s)->calls().size());
    ASSERT_FALSE(t->copies.empty());
    std::vector<size_t> call_of;  // streamed call k -> call index
    for (size_t i = 0; i < t->calls.size(); ++i) {
      const Span& c = t->compute[i];
      EXPECT_GE(c.start, 0.0);
      EXPECT_LE(c.start, c.end);
      if (i > 0) {
        EXPECT_GE(c.start, t->compute[i - 1].end) << "one call at a time, in order";
      }
      if (t->copy_of[i] >= 0) call_of.push_back(i);
    }
    ASSERT_EQ(call_of.size(), t->copies.size());
    for (size_t k = 0; k < t->copies.size(); ++k) {
      const Span& c = t->copies[k];
      EXPECT_GE(c.start, 0.0);
      EXPECT_LE(c.start, c.end);
      EXPECT_LE(c.end, t->compute[call_of[k]].start) << "copy " << k << " before its call";
      if (k > 0) {
        EXPECT_GE(c.start, t->copies[k - 1].end) << "copies one at a time";
      }
      if (k >= static_cast<size_t>(slots)) {
        EXPECT_GE(c.start, t->compute[call_of[k - static_cast<size_t>(slots)]].end)
            << "slot of copy " << k << " reused before its previous call computed";
      }
    }
    const TimelineSummary sum = summarize_timeline(*t);
    EXPECT_GT(sum.copy_busy_s, 0.0);
    EXPECT_LE(sum.hidden_copy_s, sum.copy_busy_s);
    EXPECT_GE(sum.hidden_fraction, 0.0);
    EXPECT_LE(sum.hidden_fraction, 1.0);
  }
  p.set_timeline(false);
  auto plain = (*s)->run();
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(p.timeline().ok()) << "the last run had no timeline";
}

INSTANTIATE_TEST_SUITE_P(Slots, Timelines, ::testing::Values(2, 3));

// The images' pixels go up before the first call, and the copy stream waits for them: no copy
// starts before the inputs are on the device (under random delays on every stream, a copy that
// did not wait would often start during the upload), and the outputs stay the all-resident
// run's.
TEST(Timelines, CopiesStartAfterTheInputs) {
  testing::TinyCheckpoint m("alpamayo-tiny", "inputs");
  auto want = m.run(SessionOptions{});
  ASSERT_TRUE(want.ok()) << want.error().to_string();
  for (const StreamMode mode : {StreamMode::pipelined, StreamMode::sequential}) {
    SessionOptions o;
    o.plan.resident = std::vector<std::string>{"vision.patch"};
    o.plan.mode = mode;
    o.plan.mode_given = true;
    o.plan.slots = mode == StreamMode::sequential ? 1 : 2;
    o.plan.lent_cache = false;
    o.streaming.poison_slots = true;
    CpuBackendOptions delays = testing::hostile_streams();
    delays.max_delay_us = 1000;
    auto backend = create_cpu_backend(delays);
    auto s = m.open(*backend, o);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    StreamingProvider& p = (*s)->streaming_provider();
    p.set_timeline(true);
    for (int run = 0; run < 3; ++run) {
      auto got = (*s)->run();
      ASSERT_TRUE(got.ok()) << got.error().to_string();
      testing::expect_same(*got, *want, "inputs first");
      auto t = p.timeline();
      ASSERT_TRUE(t.ok()) << t.error().to_string();
      ASSERT_FALSE(t->copies.empty());
      EXPECT_GT(t->inputs_end, 0.0) << "the upload took some time";
      EXPECT_GE(t->compute.front().start, t->inputs_end);
      EXPECT_GE(t->copies.front().start, t->inputs_end) << "a copy shared the link with the inputs";
    }
  }
}

}  // namespace
}  // namespace ferry
