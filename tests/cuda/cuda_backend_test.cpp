// The CUDA backend's own behavior (allocation errors, copies, events, op rejection) and the
// CUDA graph wrapper (capture, replay, in-place update).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_stream.h"
#include "core/bf16.h"
#include "harness.h"

namespace ferry::cuda_test {
namespace {

Backend& gpu() {
  return *backends(nullptr)->cuda;
}

TEST(CudaBackend, AbsurdAllocationIsOutOfMemoryAndRecoverable) {
  SKIP_WITHOUT_CUDA();
  auto huge = gpu().allocate(size_t{1} << 50);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().code, ErrorCode::out_of_memory) << huge.error().to_string();
  auto small = gpu().allocate(4096);
  ASSERT_TRUE(small.ok()) << small.error().to_string();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small->data()) % 256, 0u);
  EXPECT_EQ(gpu().info().name.empty(), false);
  EXPECT_GT(gpu().info().total_bytes, 0u);
}

TEST(CudaBackend, CopiesAndFillZero) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  const size_t n = 1 << 20;
  std::vector<uint8_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<uint8_t>(i * 7 + 3);
  auto a = gpu().allocate(n);
  auto b = gpu().allocate(n);
  ASSERT_TRUE(a.ok() && b.ok());
  gpu().copy_to_device(*stream, a->data(), host.data(), n);
  gpu().copy_on_device(*stream, b->data(), a->data(), n);
  gpu().fill_zero(*stream, static_cast<uint8_t*>(b->data()) + 1000, 24);
  std::vector<uint8_t> back(n, 0xEE);
  gpu().copy_to_host(*stream, back.data(), b->data(), n);
  ASSERT_TRUE(gpu().synchronize(*stream).ok());
  for (size_t i = 0; i < n; ++i) {
    const uint8_t want = (i >= 1000 && i < 1024) ? 0 : host[i];
    ASSERT_EQ(back[i], want) << "byte " << i;
  }
}

TEST(CudaBackend, EventOrdersTwoStreams) {
  SKIP_WITHOUT_CUDA();
  auto producer = gpu().create_stream();
  auto consumer = gpu().create_stream();
  auto ready = gpu().create_event();
  const size_t n = size_t{64} << 20;  // big enough that an unordered read would see old bytes
  std::vector<uint8_t> host(n, 0x5A);
  auto src = gpu().allocate(n);
  auto dst = gpu().allocate(n);
  ASSERT_TRUE(src.ok() && dst.ok());
  gpu().fill_zero(*producer, src->data(), n);
  ASSERT_TRUE(gpu().synchronize(*producer).ok());
  for (int round = 0; round < 3; ++round) {
    host.assign(n, static_cast<uint8_t>(0x10 + round));
    gpu().copy_to_device(*producer, src->data(), host.data(), n);
    gpu().record(*ready, *producer);
    gpu().wait(*consumer, *ready);
    gpu().copy_on_device(*consumer, dst->data(), src->data(), n);
    std::vector<uint8_t> back(n);
    gpu().copy_to_host(*consumer, back.data(), dst->data(), n);
    ASSERT_TRUE(gpu().synchronize(*consumer).ok());
    ASSERT_TRUE(gpu().synchronize(*ready).ok());
    // Every byte: an unordered copy could leave any part of the 64 MiB with the previous round's
    // (or the zero fill's) bytes, not only the ends.
    const auto mismatch = std::mismatch(back.begin(), back.end(), host.begin());
    EXPECT_TRUE(mismatch.first == back.end())
        << "round " << round << ": byte " << (mismatch.first - back.begin()) << " is "
        << int{*mismatch.first} << ", want " << int{*mismatch.second};
  }
}

TEST(CudaBackend, RejectsUnsupportedHeadDim) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  auto q = gpu().allocate(2 * 256 * 2);
  auto k = gpu().allocate(2 * 256 * 2);
  auto o = gpu().allocate(2 * 256 * 2);
  ASSERT_TRUE(q.ok() && k.ok() && o.ok());
  Attention op;
  op.q = make_view(q->data(), DType::bf16, 1, 256);
  op.kv[0].k = make_view(k->data(), DType::bf16, 1, 256);
  op.kv[0].v = make_view(k->data(), DType::bf16, 1, 256);
  op.out = make_view(o->data(), DType::bf16, 1, 256);
  op.num_heads = 1;
  op.num_kv_heads = 1;
  op.head_dim = 256;
  const Status st = gpu().run(*stream, op);
  ASSERT_FALSE(st.ok());
  // The op is valid (ferry::validate accepts it); only the CUDA limit head_dim <= 128 rejects it,
  // not a shape or argument error.
  EXPECT_EQ(st.error().code, ErrorCode::unsupported) << st.error().to_string();
  EXPECT_NE(st.error().message.find("head_dim"), std::string::npos) << st.error().to_string();
  EXPECT_NE(st.error().message.find("256"), std::string::npos) << st.error().to_string();
  EXPECT_TRUE(gpu().synchronize(*stream).ok());
}

// y = rms_norm(x) recorded once through the backend (as the executor records a call), replayed,
// then recorded again over other buffers, as the executor does for a group at another base (one
// graph per (group, base, phase)): each graph keeps replaying its own buffers.
TEST(CudaGraph, CaptureReplayAndRecordAgainElsewhere) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  const int64_t rows = 8;
  const int64_t cols = 512;
  const size_t bytes = static_cast<size_t>(rows * cols) * 2;
  Rng rng(77);
  const std::vector<uint8_t> x1 = rng.uniform(DType::bf16, rows * cols, 2.0f);
  const std::vector<uint8_t> x2 = rng.uniform(DType::bf16, rows * cols, 2.0f);
  const std::vector<uint8_t> w = rng.uniform(DType::bf16, cols, 1.0f);
  auto bx1 = gpu().allocate(bytes);
  auto bx2 = gpu().allocate(bytes);
  auto by1 = gpu().allocate(bytes);
  auto by2 = gpu().allocate(bytes);
  auto byd = gpu().allocate(bytes);
  auto bw = gpu().allocate(static_cast<size_t>(cols) * 2);
  ASSERT_TRUE(bx1.ok() && bx2.ok() && by1.ok() && by2.ok() && byd.ok() && bw.ok());
  gpu().copy_to_device(*stream, bx1->data(), x1.data(), bytes);
  gpu().copy_to_device(*stream, bx2->data(), x2.data(), bytes);
  gpu().copy_to_device(*stream, bw->data(), w.data(), w.size());
  ASSERT_TRUE(gpu().synchronize(*stream).ok());

  auto norm = [&](void* x, void* y) {
    RmsNorm op;
    op.x = make_view(x, DType::bf16, rows, cols);
    op.w = make_view(bw->data(), DType::bf16, 1, cols);
    op.y = make_view(y, DType::bf16, rows, cols);
    op.dim = cols;
    return op;
  };
  auto download = [&](void* p) {
    std::vector<uint8_t> h(bytes);
    gpu().copy_to_host(*stream, h.data(), p, bytes);
    FERRY_CHECK(gpu().synchronize(*stream).ok(), "download");
    return h;
  };

  // Direct runs are the expected results.
  ASSERT_TRUE(gpu().run(*stream, norm(bx1->data(), byd->data())).ok());
  const std::vector<uint8_t> want1 = download(byd->data());
  ASSERT_TRUE(gpu().run(*stream, norm(bx2->data(), byd->data())).ok());
  const std::vector<uint8_t> want2 = download(byd->data());
  ASSERT_NE(want1, want2);

  gpu().fill_zero(*stream, by1->data(), bytes);
  auto graph =
      record(gpu(), *stream, [&] { return gpu().run(*stream, norm(bx1->data(), by1->data())); });
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  EXPECT_EQ(download(by1->data()), std::vector<uint8_t>(bytes, 0)) << "capture must not run";
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  EXPECT_EQ(download(by1->data()), want1);
  gpu().fill_zero(*stream, by1->data(), bytes);
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  EXPECT_EQ(download(by1->data()), want1) << "replay";

  gpu().fill_zero(*stream, by2->data(), bytes);
  auto other =
      record(gpu(), *stream, [&] { return gpu().run(*stream, norm(bx2->data(), by2->data())); });
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_EQ(download(by2->data()), std::vector<uint8_t>(bytes, 0)) << "capture must not run";
  ASSERT_TRUE(gpu().launch(*stream, **other).ok());
  EXPECT_EQ(download(by2->data()), want2);
  gpu().fill_zero(*stream, by1->data(), bytes);
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  EXPECT_EQ(download(by1->data()), want1) << "the first graph is unchanged";

  // An error inside the body ends the capture cleanly and is returned.
  auto bad = record(gpu(), *stream, [&] {
    RmsNorm op = norm(bx1->data(), by1->data());
    op.dim = 3;  // 512 is not a multiple of 3: validate rejects it
    return gpu().run(*stream, op);
  });
  EXPECT_FALSE(bad.ok());
  // The stream is usable after the failed capture.
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  EXPECT_TRUE(gpu().synchronize(*stream).ok());
}

// Backend::begin_capture / end_capture / launch: the same contract as the CPU backend's
// (tests/unit/graph_test.cpp): nothing runs at capture, replays re-read device memory, host copies
// and synchronization fail the capture and leave the stream usable.
TEST(CudaGraph, BackendCaptureReplaysAndRefusesHostWork) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  const int64_t n = 1000;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  auto bd = gpu().allocate(bytes);
  auto bs = gpu().allocate(bytes);
  ASSERT_TRUE(bd.ok() && bs.ok());
  std::vector<float> d0(static_cast<size_t>(n)), s0(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    d0[static_cast<size_t>(i)] = static_cast<float>(i % 13);
    s0[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  }
  gpu().copy_to_device(*stream, bd->data(), d0.data(), bytes);
  gpu().copy_to_device(*stream, bs->data(), s0.data(), bytes);
  ASSERT_TRUE(gpu().synchronize(*stream).ok());
  const TensorView dst = make_view(bd->data(), DType::f32, 1, n);
  const TensorView src = make_view(bs->data(), DType::f32, 1, n);
  auto download = [&] {
    std::vector<float> h(static_cast<size_t>(n));
    gpu().copy_to_host(*stream, h.data(), bd->data(), bytes);
    FERRY_CHECK(gpu().synchronize(*stream).ok(), "download");
    return h;
  };

  ASSERT_TRUE(gpu().begin_capture(*stream).ok());
  ASSERT_TRUE(gpu().run(*stream, Add{dst, src}).ok());
  auto graph = gpu().end_capture(*stream);
  ASSERT_TRUE(graph.ok()) << graph.error().to_string();
  EXPECT_EQ(download(), d0) << "capture must not run";
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  std::vector<float> want = d0;
  for (size_t i = 0; i < want.size(); ++i) want[i] += 2.0f * s0[i];
  EXPECT_EQ(download(), want);

  std::vector<float> ones(static_cast<size_t>(n), 1.0f);
  gpu().copy_to_device(*stream, bs->data(), ones.data(), bytes);
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());
  for (float& v : want) v += 1.0f;
  EXPECT_EQ(download(), want) << "a replay reads src when it runs";

  ASSERT_TRUE(gpu().begin_capture(*stream).ok());
  gpu().copy_to_device(*stream, bs->data(), ones.data(), bytes);
  EXPECT_FALSE(gpu().synchronize(*stream).ok());
  auto refused = gpu().end_capture(*stream);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("copy from the host"), std::string::npos)
      << refused.error().to_string();
  ASSERT_TRUE(gpu().launch(*stream, **graph).ok());  // usable after the failed capture
  for (float& v : want) v += 1.0f;
  EXPECT_EQ(download(), want);
}

}  // namespace
}  // namespace ferry::cuda_test
