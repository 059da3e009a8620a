// Every CPU op gives the same bytes whatever the op thread count (1, 3 or 8 threads, with random
// stream delays): the ops split work only over independent outputs, never inside a reduction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/bf16.h"

namespace ferry {
namespace {

// Host arrays for one run of every op; inputs are the same for every instance (fixed seed).
struct Workload {
  explicit Workload(uint32_t seed) : rng(seed) {}

  TensorView bf16(int64_t rows, int64_t cols, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    auto& v = u16.emplace_back(static_cast<size_t>(rows * cols));
    for (auto& x : v) x = f32_to_bf16(d(rng));
    return make_view(v.data(), DType::bf16, rows, cols);
  }
  TensorView f32(int64_t rows, int64_t cols, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    auto& v = f32s.emplace_back(static_cast<size_t>(rows * cols));
    for (auto& x : v) x = d(rng);
    return make_view(v.data(), DType::f32, rows, cols);
  }
  TensorView i32(int64_t rows, int64_t cols, int32_t limit, bool distinct = false) {
    auto& v = i32s.emplace_back(static_cast<size_t>(rows * cols));
    std::vector<int32_t> perm(static_cast<size_t>(limit));
    for (int32_t i = 0; i < limit; ++i) perm[static_cast<size_t>(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::uniform_int_distribution<int32_t> d(0, limit - 1);
    for (size_t i = 0; i < v.size(); ++i) v[i] = distinct ? perm[i] : d(rng);
    return make_view(v.data(), DType::i32, rows, cols);
  }

  std::mt19937 rng;
  // Deques: emplace_back keeps earlier arrays where the views point.
  std::deque<std::vector<uint16_t>> u16;
  std::deque<std::vector<float>> f32s;
  std::deque<std::vector<int32_t>> i32s;
};

std::vector<uint8_t> bytes_of(const TensorView& v) {
  const size_t row = static_cast<size_t>(v.cols) * dtype_size(v.dtype);
  std::vector<uint8_t> out;
  for (int64_t r = 0; r < v.rows; ++r) {
    const auto* p = static_cast<const uint8_t*>(v.data) +
                    static_cast<size_t>(r * v.stride()) * dtype_size(v.dtype);
    out.insert(out.end(), p, p + row);
  }
  return out;
}

// Sets every byte of a (possibly strided) view to `fill`.
void fill_bytes(const TensorView& v, uint8_t fill) {
  const size_t row = static_cast<size_t>(v.cols) * dtype_size(v.dtype);
  for (int64_t r = 0; r < v.rows; ++r) {
    auto* p =
        static_cast<uint8_t*>(v.data) + static_cast<size_t>(r * v.stride()) * dtype_size(v.dtype);
    std::memset(p, fill, row);
  }
}

// Runs one instance of every op on a backend with `threads` op threads; returns each output.
// Outputs that the ops only write (not read) are first set to every byte `fill`, so an element an
// op leaves unwritten shows up as a difference between runs with different fills. Outputs that
// are also inputs (Rope, Add, AddRows in place) keep their seeded contents.
std::vector<std::vector<uint8_t>> run_every_op(int threads, uint64_t delay_seed, uint8_t fill) {
  CpuBackendOptions opt;
  opt.threads = threads;
  opt.max_delay_us = 100;
  opt.delay_seed = delay_seed;
  auto be = create_cpu_backend(opt);
  auto stream = be->create_stream();
  Workload w(1234);
  std::vector<Op> ops;
  ops.reserve(32);
  std::vector<TensorView> outs;

  const TensorView x = w.bf16(7, 300);
  const TensorView lin_y = w.bf16(7, 257);
  ops.push_back(Linear{x, w.bf16(257, 300, 0.05f), w.bf16(1, 257), lin_y, Activation::gelu_tanh});
  const TensorView lin_y32 = w.f32(7, 257);
  ops.push_back(Linear{w.f32(7, 300), w.bf16(257, 300, 0.05f), {}, lin_y32, Activation::silu});
  outs.insert(outs.end(), {lin_y, lin_y32});

  const TensorView rms_y = w.bf16(33, 256);
  ops.push_back(RmsNorm{w.bf16(33, 256), w.bf16(1, 128), rms_y, 128, 1e-6f});
  const TensorView rms_y32 = w.f32(33, 256);
  ops.push_back(RmsNorm{w.f32(33, 256), w.bf16(1, 256), rms_y32, 256, 1e-5f});
  const TensorView ln_y = w.f32(40, 1152);
  ops.push_back(LayerNorm{w.bf16(40, 1152), w.bf16(1, 1152), w.bf16(1, 1152), ln_y, 1e-6f});
  outs.insert(outs.end(), {rms_y, rms_y32, ln_y});

  const TensorView pos = w.i32(50, 3, 4000);
  const TensorView cos = w.f32(50, 64);
  const TensorView sin = w.f32(50, 64);
  ops.push_back(RopeTable{pos, cos, sin, 5e6f, 128, {24, 20, 20}, {}});
  const TensorView rq = w.bf16(50, 4 * 128);
  ops.push_back(Rope{rq, cos, sin, 4, 128, RopeMath::bf16});
  const TensorView rk = w.bf16(50, 2 * 128);
  ops.push_back(Rope{rk, cos, sin, 2, 128, RopeMath::f32});
  outs.insert(outs.end(), {cos, sin, rq, rk});

  Attention att;
  att.q = w.bf16(20, 8 * 64, 2.0f);
  att.kv[0] = {w.bf16(150, 2 * 64, 2.0f), w.bf16(150, 2 * 64)};
  att.kv[1] = {w.bf16(20, 2 * 64, 2.0f), w.bf16(20, 2 * 64)};
  att.num_spans = 2;
  att.out = w.bf16(20, 8 * 64);
  att.num_heads = 8;
  att.num_kv_heads = 2;
  att.head_dim = 64;
  att.scale = 0.125f;
  att.causal = true;
  att.q_pos0 = 150;
  ops.push_back(att);
  outs.push_back(att.out);

  const TensorView sw = w.bf16(30, 700);
  ops.push_back(SwiGlu{w.bf16(30, 700, 3.0f), w.bf16(30, 700), sw});
  const TensorView acc = w.f32(30, 700);
  ops.push_back(Add{acc, w.bf16(30, 700)});
  const TensorView dst = w.bf16(100, 64);
  ops.push_back(AddRows{dst, w.f32(40, 64), w.i32(40, 1, 100, true)});
  const TensorView gathered = w.bf16(60, 64);
  ops.push_back(GatherRows{w.bf16(500, 64), w.i32(60, 1, 500), gathered});
  const TensorView scattered = w.bf16(300, 64);
  const TensorView scatter_rows = w.i32(60, 1, 300, true);
  ops.push_back(ScatterRows{w.bf16(60, 64), scatter_rows, scattered});
  const TensorView casted = w.bf16(30, 700);
  ops.push_back(Cast{w.f32(30, 700), casted});
  const TensorView copied = w.bf16(30, 700);
  ops.push_back(Copy{w.bf16(30, 700), copied});
  const TensorView pe = w.bf16(70, 96);
  ops.push_back(PosEmbedInterp{w.bf16(48, 96), w.i32(70, 4, 48), w.f32(70, 4), pe});
  const TensorView am = w.i32(9, 1, 1);
  ops.push_back(Argmax{w.bf16(9, 5000), am});
  outs.insert(outs.end(), {sw, acc, dst, gathered, scattered, casted, copied, pe, am});

  // Write-only outputs get the run's fill; ScatterRows writes only its indexed rows of `scattered`
  // (the others keep the seeded bytes), so only those rows get the fill.
  for (const TensorView& v : {lin_y, lin_y32, rms_y, rms_y32, ln_y, cos, sin, att.out, sw, gathered,
                              casted, copied, pe, am}) {
    fill_bytes(v, fill);
  }
  for (int64_t i = 0; i < scatter_rows.rows; ++i) {
    const int32_t r = static_cast<const int32_t*>(scatter_rows.data)[i];
    fill_bytes(make_view(static_cast<uint16_t*>(scattered.data) +
                             static_cast<size_t>(r * scattered.stride()),
                         DType::bf16, 1, scattered.cols),
               fill);
  }

  for (const Op& op : ops) {
    Status s = be->run(*stream, op);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
  }
  Status s = be->synchronize(*stream);
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  std::vector<std::vector<uint8_t>> result;
  for (const auto& v : outs) result.push_back(bytes_of(v));
  return result;
}

TEST(CpuDeterminism, EveryOpGivesTheSameBytesForAnyThreadCount) {
  // The first run starts its outputs at 0x00 bytes, the others at 0xFF: an output element that an
  // op leaves unwritten differs between them.
  const auto one = run_every_op(1, 1, 0x00);
  ASSERT_EQ(one.size(), 19u);
  for (int threads : {3, 8}) {
    const auto many = run_every_op(threads, static_cast<uint64_t>(threads), 0xFF);
    ASSERT_EQ(many.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(many[i], one[i]) << "output " << i << " differs with " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace ferry
