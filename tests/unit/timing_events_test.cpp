// Timing events (Backend::create_timing_event, elapsed_seconds) on the CPU backend: intervals
// along a stream are non-negative and grow with the work between them; a plain event, an
// unrecorded one and one not yet completed are errors, not numbers; decorators forward them.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_timing_backend.h"

namespace ferry {
namespace {

constexpr size_t kBytes = size_t{16} << 20;

void check_monotonic(Backend& b) {
  auto stream = b.create_stream();
  auto buf = b.allocate(kBytes, "test");
  ASSERT_TRUE(buf.ok());
  std::vector<std::unique_ptr<Event>> events;
  for (int i = 0; i < 12; ++i) {
    events.push_back(b.create_timing_event());
    b.record(*events.back(), *stream);
    // Work between the marks: a fill that takes a measurable while.
    if (i % 3 != 2) b.fill_zero(*stream, buf->data(), kBytes);
  }
  ASSERT_TRUE(b.synchronize(*stream).ok());
  double last = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    auto t = b.elapsed_seconds(*events[0], *events[i]);
    ASSERT_TRUE(t.ok()) << t.error().to_string();
    EXPECT_GE(*t, last) << "event " << i;
    last = *t;
    if (i > 0) {
      auto step = b.elapsed_seconds(*events[i - 1], *events[i]);
      ASSERT_TRUE(step.ok());
      EXPECT_GE(*step, 0.0);
    }
  }
  EXPECT_GT(last, 0.0) << "eight 16 MiB fills take time";
  // Reversed order: the same interval, negative.
  auto back = b.elapsed_seconds(*events.back(), *events[0]);
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(*back, -last);
}

TEST(TimingEvents, IntervalsAlongAStreamGrowWithTheWork) {
  auto b = create_cpu_backend();
  check_monotonic(*b);
  CpuBackendOptions slow;
  slow.max_delay_us = 300;
  auto delayed = create_cpu_backend(slow);
  check_monotonic(*delayed);
}

TEST(TimingEvents, OpTimingBackendForwardsThem) {
  auto inner = create_cpu_backend();
  OpTimingBackend b(*inner);
  check_monotonic(b);
  EXPECT_EQ(b.device_free_bytes().has_value(), inner->device_free_bytes().has_value());
}

TEST(TimingEvents, PlainUnrecordedAndPendingEventsAreErrors) {
  auto b = create_cpu_backend();
  auto stream = b->create_stream();
  auto timed = b->create_timing_event();
  auto plain = b->create_event();
  b->record(*timed, *stream);
  b->record(*plain, *stream);
  ASSERT_TRUE(b->synchronize(*stream).ok());
  EXPECT_FALSE(b->elapsed_seconds(*timed, *plain).ok());
  EXPECT_FALSE(b->elapsed_seconds(*plain, *timed).ok());
  auto never = b->create_timing_event();
  EXPECT_FALSE(b->elapsed_seconds(*timed, *never).ok());

  // An event behind a wait that cannot end before a long fill on another stream has not
  // completed when asked at once.
  auto other = b->create_stream();
  const size_t big = size_t{256} << 20;
  auto buf = b->allocate(big, "test");
  ASSERT_TRUE(buf.ok());
  auto gate = b->create_event();
  for (int i = 0; i < 4; ++i) b->fill_zero(*other, buf->data(), big);
  b->record(*gate, *other);
  b->wait(*stream, *gate);
  auto pending = b->create_timing_event();
  b->record(*pending, *stream);
  auto early = b->elapsed_seconds(*timed, *pending);
  EXPECT_FALSE(early.ok());
  if (!early.ok()) {
    EXPECT_NE(early.error().message.find("not completed"), std::string::npos)
        << early.error().message;
  }
  ASSERT_TRUE(b->synchronize(*stream).ok());
  auto later = b->elapsed_seconds(*timed, *pending);
  ASSERT_TRUE(later.ok());
  EXPECT_GT(*later, 0.0);
}

TEST(TimingEvents, FreeMemoryOnTheCpu) {
  auto b = create_cpu_backend();
  const auto free = b->device_free_bytes();
  ASSERT_TRUE(free.has_value());
  EXPECT_GT(*free, 0u);
  EXPECT_LE(*free, b->info().total_bytes);
}

}  // namespace
}  // namespace ferry
