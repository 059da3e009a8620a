// Backend graphs on the CPU backend: recorded work does not run at capture, replays re-read
// device memory, and what cannot be recorded (host copies, events, synchronization) fails the
// capture with an error while leaving the stream usable. tests/cuda checks the CUDA backend.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"

namespace ferry {
namespace {

struct Floats {
  DeviceBuffer buffer;
  TensorView view;
};

Floats floats(Backend& be, int64_t n) {
  auto r = be.allocate(static_cast<size_t>(n) * sizeof(float));
  FERRY_CHECK(r.ok(), "allocation failed in a test");
  Floats f{std::move(r).value(), {}};
  f.view = make_view(f.buffer.data(), DType::f32, 1, n);
  return f;
}

std::vector<float> read(Backend& be, Stream& s, const Floats& f) {
  std::vector<float> out(static_cast<size_t>(f.view.cols));
  be.copy_to_host(s, out.data(), f.buffer.data(), out.size() * sizeof(float));
  EXPECT_TRUE(be.synchronize(s).ok());
  return out;
}

void write(Backend& be, Stream& s, const Floats& f, const std::vector<float>& v) {
  be.copy_to_device(s, f.buffer.data(), v.data(), v.size() * sizeof(float));
  EXPECT_TRUE(be.synchronize(s).ok());
}

TEST(Graph, RecordsWithoutRunningAndReplaysReadDeviceMemory) {
  auto be = create_cpu_backend(CpuBackendOptions{2, 50, 3});
  auto s = be->create_stream();
  Floats dst = floats(*be, 5);
  Floats src = floats(*be, 5);
  write(*be, *s, dst, {1, 2, 3, 4, 5});
  write(*be, *s, src, {10, 20, 30, 40, 50});

  ASSERT_TRUE(be->begin_capture(*s).ok());
  ASSERT_TRUE(be->run(*s, Add{dst.view, src.view}).ok());
  auto graph = be->end_capture(*s);
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  EXPECT_EQ(read(*be, *s, dst), (std::vector<float>{1, 2, 3, 4, 5}));  // nothing ran yet

  ASSERT_TRUE(be->launch(*s, **graph).ok());
  ASSERT_TRUE(be->launch(*s, **graph).ok());
  EXPECT_EQ(read(*be, *s, dst), (std::vector<float>{21, 42, 63, 84, 105}));

  // The replay reads src when it runs, not when it was recorded.
  write(*be, *s, src, {-1, -1, -1, -1, -1});
  ASSERT_TRUE(be->launch(*s, **graph).ok());
  EXPECT_EQ(read(*be, *s, dst), (std::vector<float>{20, 41, 62, 83, 104}));
}

TEST(Graph, HostCopiesEventsAndSyncFailTheCaptureAndLeaveTheStreamUsable) {
  auto be = create_cpu_backend();
  auto s = be->create_stream();
  Floats a = floats(*be, 4);
  std::vector<float> host(4, 7.0f);

  ASSERT_TRUE(be->begin_capture(*s).ok());
  be->copy_to_device(*s, a.buffer.data(), host.data(), 16);
  auto g1 = be->end_capture(*s);
  ASSERT_FALSE(g1.ok());
  EXPECT_NE(g1.error().message.find("copy from the host"), std::string::npos);

  ASSERT_TRUE(be->begin_capture(*s).ok());
  auto event = be->create_event();
  be->record(*event, *s);
  EXPECT_FALSE(be->end_capture(*s).ok());

  ASSERT_TRUE(be->begin_capture(*s).ok());
  EXPECT_FALSE(be->synchronize(*s).ok());
  EXPECT_FALSE(be->begin_capture(*s).ok());  // already capturing
  auto empty = be->end_capture(*s);
  EXPECT_TRUE(empty.ok());
  EXPECT_FALSE(be->end_capture(*s).ok());  // not capturing

  // The stream still works, and what the failed captures held never ran.
  write(*be, *s, a, {1, 2, 3, 4});
  EXPECT_EQ(read(*be, *s, a), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Graph, InvalidOpIsRefusedDuringCaptureAndNotRecorded) {
  auto be = create_cpu_backend();
  auto s = be->create_stream();
  Floats a = floats(*be, 4);
  Floats b = floats(*be, 3);
  write(*be, *s, a, {1, 1, 1, 1});
  ASSERT_TRUE(be->begin_capture(*s).ok());
  EXPECT_FALSE(be->run(*s, Add{a.view, b.view}).ok());  // shapes differ
  auto g = be->end_capture(*s);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(be->launch(*s, **g).ok());
  EXPECT_EQ(read(*be, *s, a), (std::vector<float>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace ferry
