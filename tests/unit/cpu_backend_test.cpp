// The CPU backend: allocation, stream order, events under random injected delays, errors
// reported by synchronize, and bit-identical op results for every thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_ops.h"
#include "core/bf16.h"
#include "core/thread_pool.h"

namespace ferry {
namespace {

template <class T>
T* ptr(const DeviceBuffer& b) {
  return static_cast<T*>(b.data());
}

DeviceBuffer must_allocate(Backend& be, size_t bytes) {
  auto r = be.allocate(bytes);
  FERRY_CHECK(r.ok(), "allocation failed in a test");
  return std::move(r).value();
}

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(dist(rng));
  return v;
}

TEST(CpuBackend, AllocatesAlignedAndReportsFailure) {
  auto be = create_cpu_backend();
  EXPECT_EQ(be->name(), "cpu");
  for (size_t bytes : {size_t{1}, size_t{1000}, size_t{4096}, size_t{0}}) {
    auto r = be->allocate(bytes);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r->data()) % 256, 0u);
    EXPECT_EQ(r->bytes(), bytes);
  }
  auto huge = be->allocate(size_t{1} << 60);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::out_of_memory);
  auto max = be->allocate(SIZE_MAX);
  ASSERT_FALSE(max.ok());
  EXPECT_EQ(max.error().code, ErrorCode::out_of_memory);
}

TEST(CpuBackend, CopiesAndFillsInStreamOrder) {
  auto be = create_cpu_backend(CpuBackendOptions{2, 200, 9});
  auto stream = be->create_stream();
  std::vector<uint8_t> src(3000), back(3000, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  DeviceBuffer a = must_allocate(*be, src.size());
  DeviceBuffer b = must_allocate(*be, src.size());
  be->copy_to_device(*stream, a.data(), src.data(), src.size());
  be->copy_on_device(*stream, b.data(), a.data(), src.size());
  be->fill_zero(*stream, ptr<uint8_t>(b) + 1000, 500);  // after the copy, in stream order
  be->copy_to_host(*stream, back.data(), b.data(), back.size());
  ASSERT_TRUE(be->synchronize(*stream).ok());
  std::vector<uint8_t> expected = src;
  std::fill(expected.begin() + 1000, expected.begin() + 1500, uint8_t{0});
  EXPECT_EQ(back, expected);
}

TEST(CpuBackend, InvalidOpIsRejectedAndNothingRuns) {
  auto be = create_cpu_backend();
  auto stream = be->create_stream();
  DeviceBuffer x = must_allocate(*be, 64 * 2);
  DeviceBuffer y = must_allocate(*be, 64 * 2);
  std::memset(y.data(), 0x55, y.bytes());
  const Cast bad{make_view(x.data(), DType::bf16, 8, 8), make_view(y.data(), DType::i32, 8, 8)};
  Status s = be->run(*stream, bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("cast: y: expected dtype"), std::string::npos);
  EXPECT_TRUE(be->synchronize(*stream).ok());
  EXPECT_EQ(ptr<uint8_t>(y)[0], 0x55);  // untouched
}

TEST(CpuBackend, ErrorInsideTheStreamIsReturnedBySynchronize) {
  auto be = create_cpu_backend();
  auto stream = be->create_stream();
  DeviceBuffer table = must_allocate(*be, 4 * 8 * 2);
  DeviceBuffer ids = must_allocate(*be, 2 * 4);
  DeviceBuffer out = must_allocate(*be, 2 * 8 * 2);
  ptr<int32_t>(ids)[0] = 1;
  ptr<int32_t>(ids)[1] = 4;  // table has 4 rows
  const GatherRows op{make_view(table.data(), DType::bf16, 4, 8),
                      make_view(ids.data(), DType::i32, 2, 1),
                      make_view(out.data(), DType::bf16, 2, 8)};
  ASSERT_TRUE(be->run(*stream, op).ok());  // valid shapes: the index is only seen when it runs
  be->fill_zero(*stream, out.data(), out.bytes());  // later work still runs
  Status s = be->synchronize(*stream);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(s.error().message.find("gather_rows: ids: index 4"), std::string::npos);
  EXPECT_EQ(ptr<uint16_t>(out)[0], 0);
  EXPECT_TRUE(be->synchronize(*stream).ok());  // reported once
}

// A producer stream copies chunks into a two-slot ring; a consumer stream adds each slot into an
// accumulator. Slot reuse is ordered only by events: a "loaded" event per slot (copy -> compute)
// and a "free" event per slot (compute -> next copy). Under random delays on both streams the
// sum must still be exact; a missing or broken wait would add a wrong or overwritten chunk.
TEST(CpuBackend, DoubleBufferedPipelineIsExactUnderRandomDelays) {
  constexpr int kChunks = 24;
  constexpr int64_t kRows = 4;
  constexpr int64_t kCols = 16;
  constexpr size_t kElems = kRows * kCols;
  std::vector<std::vector<float>> chunks(kChunks, std::vector<float>(kElems));
  std::vector<float> expected(kElems, 0.0f);
  for (int i = 0; i < kChunks; ++i) {
    for (size_t e = 0; e < kElems; ++e) {
      // Small integers with distinct values per chunk: the f32 sum is exact in any order, and a
      // chunk added twice or missed changes it.
      chunks[i][e] = static_cast<float>((i + 1) * 1000 + static_cast<int>(e));
      expected[e] += chunks[i][e];
    }
  }
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    CpuBackendOptions opt;
    opt.threads = 2;
    opt.max_delay_us = 300;
    opt.delay_seed = seed;
    auto be = create_cpu_backend(opt);
    auto copy_stream = be->create_stream();
    auto compute_stream = be->create_stream();
    DeviceBuffer slots[2] = {must_allocate(*be, kElems * 4), must_allocate(*be, kElems * 4)};
    DeviceBuffer acc = must_allocate(*be, kElems * 4);
    std::unique_ptr<Event> loaded[2] = {be->create_event(), be->create_event()};
    std::unique_ptr<Event> freed[2] = {be->create_event(), be->create_event()};
    be->fill_zero(*compute_stream, acc.data(), acc.bytes());
    for (int i = 0; i < kChunks; ++i) {
      const int s = i % 2;
      be->wait(*copy_stream, *freed[s]);
      be->copy_to_device(*copy_stream, slots[s].data(), chunks[i].data(), kElems * 4);
      be->record(*loaded[s], *copy_stream);
      be->wait(*compute_stream, *loaded[s]);
      const Add add{make_view(acc.data(), DType::f32, kRows, kCols),
                    make_view(slots[s].data(), DType::f32, kRows, kCols)};
      ASSERT_TRUE(be->run(*compute_stream, add).ok());
      be->record(*freed[s], *compute_stream);
    }
    std::vector<float> result(kElems);
    be->copy_to_host(*compute_stream, result.data(), acc.data(), kElems * 4);
    ASSERT_TRUE(be->synchronize(*compute_stream).ok());
    ASSERT_TRUE(be->synchronize(*copy_stream).ok());
    EXPECT_EQ(result, expected) << "seed " << seed;
  }
}

// Stream A runs a slow op (a large GEMV) into y; stream B waits on A's event and copies y out.
// The copy must see the finished result every time.
TEST(CpuBackend, WaitOrdersWorkAcrossStreams) {
  constexpr int64_t kN = 4096;
  constexpr int64_t kK = 1024;
  const std::vector<uint16_t> w = random_bf16(kN * kK, 7);
  const std::vector<uint16_t> x = random_bf16(kK, 8);
  std::vector<uint16_t> reference(kN);
  const Linear ref_op{make_view(const_cast<uint16_t*>(x.data()), DType::bf16, 1, kK),
                      make_view(const_cast<uint16_t*>(w.data()), DType::bf16, kN, kK),
                      {},
                      make_view(reference.data(), DType::bf16, 1, kN)};
  ASSERT_TRUE(cpu::run_op(ref_op).ok());

  for (uint64_t seed = 1; seed <= 6; ++seed) {
    CpuBackendOptions opt;
    opt.max_delay_us = 2000;
    opt.delay_seed = seed;
    auto be = create_cpu_backend(opt);
    auto a = be->create_stream();
    auto b = be->create_stream();
    auto done = be->create_event();
    DeviceBuffer dw = must_allocate(*be, w.size() * 2);
    DeviceBuffer dx = must_allocate(*be, x.size() * 2);
    DeviceBuffer dy = must_allocate(*be, kN * 2);
    be->copy_to_device(*a, dw.data(), w.data(), w.size() * 2);
    be->copy_to_device(*a, dx.data(), x.data(), x.size() * 2);
    be->fill_zero(*a, dy.data(), dy.bytes());
    const Linear op{make_view(dx.data(), DType::bf16, 1, kK),
                    make_view(dw.data(), DType::bf16, kN, kK),
                    {},
                    make_view(dy.data(), DType::bf16, 1, kN)};
    ASSERT_TRUE(be->run(*a, op).ok());
    be->record(*done, *a);
    std::vector<uint16_t> seen(kN, 0xffff);
    be->wait(*b, *done);
    be->copy_to_host(*b, seen.data(), dy.data(), kN * 2);
    ASSERT_TRUE(be->synchronize(*b).ok());
    EXPECT_EQ(seen, reference) << "seed " << seed;
    ASSERT_TRUE(be->synchronize(*a).ok());
  }
}

TEST(CpuBackend, SynchronizeEventWaitsForTheRecordedPoint) {
  CpuBackendOptions opt;
  opt.max_delay_us = 3000;
  auto be = create_cpu_backend(opt);
  auto stream = be->create_stream();
  auto ev = be->create_event();
  EXPECT_TRUE(be->synchronize(*ev).ok());  // never recorded: complete
  be->wait(*stream, *ev);                  // never recorded: no-op
  std::vector<int32_t> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<int32_t>(i * 3 + 1);
  for (int round = 0; round < 5; ++round) {
    std::vector<int32_t> dst(src.size(), -1);
    be->copy_to_host(*stream, dst.data(), src.data(), src.size() * 4);
    be->record(*ev, *stream);
    ASSERT_TRUE(be->synchronize(*ev).ok());
    EXPECT_EQ(dst, src);
  }
  ASSERT_TRUE(be->synchronize(*stream).ok());
}

TEST(CpuBackend, DestroyingAStreamFinishesItsWork) {
  auto be = create_cpu_backend(CpuBackendOptions{2, 500, 3});
  std::vector<uint8_t> src(4096, 0xab), dst(4096, 0);
  {
    auto stream = be->create_stream();
    for (int i = 0; i < 8; ++i) {
      be->copy_to_host(*stream, dst.data() + i * 512, src.data() + i * 512, 512);
    }
  }
  EXPECT_EQ(dst, src);
}

// Several streams run ops on the shared thread pool at the same time.
TEST(CpuBackend, ConcurrentStreamsShareThePool) {
  constexpr int64_t kN = 512;
  constexpr int64_t kK = 96;
  constexpr int kStreams = 3;
  auto be = create_cpu_backend(CpuBackendOptions{3, 50, 5});
  const std::vector<uint16_t> w = random_bf16(kN * kK, 11);
  std::vector<std::vector<uint16_t>> xs, ys(kStreams, std::vector<uint16_t>(2 * kN));
  std::vector<std::unique_ptr<Stream>> streams;
  for (int s = 0; s < kStreams; ++s) {
    xs.push_back(random_bf16(2 * kK, 100 + s));
    streams.push_back(be->create_stream());
  }
  for (int rep = 0; rep < 20; ++rep) {
    for (int s = 0; s < kStreams; ++s) {
      const Linear op{make_view(xs[s].data(), DType::bf16, 2, kK),
                      make_view(const_cast<uint16_t*>(w.data()), DType::bf16, kN, kK),
                      {},
                      make_view(ys[s].data(), DType::bf16, 2, kN),
                      Activation::gelu_erf};
      ASSERT_TRUE(be->run(*streams[s], op).ok());
    }
  }
  for (int s = 0; s < kStreams; ++s) {
    ASSERT_TRUE(be->synchronize(*streams[s]).ok());
    std::vector<uint16_t> ref(2 * kN);
    const Linear op{make_view(xs[s].data(), DType::bf16, 2, kK),
                    make_view(const_cast<uint16_t*>(w.data()), DType::bf16, kN, kK),
                    {},
                    make_view(ref.data(), DType::bf16, 2, kN),
                    Activation::gelu_erf};
    ASSERT_TRUE(cpu::run_op(op).ok());
    EXPECT_EQ(ys[s], ref) << "stream " << s;
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.threads(), 4);
  for (int64_t n : {1, 2, 7, 64, 1000, 12345}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
    });
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(CpuBackend, HostBuffersAreAlignedMovableAndCopyable) {
  auto be = create_cpu_backend();
  auto stream = be->create_stream();
  auto h = be->allocate_host(1000);
  ASSERT_TRUE(h.ok()) << h.error().to_string();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(h->data()) % 256, 0u);
  EXPECT_EQ(h->bytes(), 1000u);
  HostBuffer moved = std::move(h).value();
  ASSERT_NE(moved.data(), nullptr);
  auto* bytes = static_cast<uint8_t*>(moved.data());
  for (int i = 0; i < 1000; ++i) bytes[i] = static_cast<uint8_t>(i * 3);
  DeviceBuffer d = must_allocate(*be, 1000);
  std::vector<uint8_t> back(1000);
  be->copy_to_device(*stream, d.data(), moved.data(), 1000);
  be->copy_to_host(*stream, back.data(), d.data(), 1000);
  ASSERT_TRUE(be->synchronize(*stream).ok());
  EXPECT_EQ(std::memcmp(back.data(), moved.data(), 1000), 0);
  EXPECT_FALSE(be->allocate_host(SIZE_MAX).ok());
}

}  // namespace
}  // namespace ferry
