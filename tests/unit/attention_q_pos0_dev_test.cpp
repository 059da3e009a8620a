// Attention's device-side q_pos0 on the CPU backend (the reference the CUDA kernels are tested
// against): validate() accepts it only in the documented form, one op struct serves every
// position as a recorded graph would (the value is read when the op runs), the result is the
// same bits as the host q_pos0 over the same spans or over exactly the visible keys, and keys
// past q_pos0 + S − 1 are never read (they are NaN here).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "core/bf16.h"

namespace ferry {
namespace {

constexpr uint16_t kBf16NaN = 0x7FC0;

void expect_rejected(const Attention& op, const std::string& fragment) {
  const Status s = validate(op);
  ASSERT_FALSE(s.ok()) << "expected a rejection containing '" << fragment << "'";
  EXPECT_EQ(s.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(s.error().message.find(fragment), std::string::npos) << s.error().message;
}

TEST(AttentionQPos0Dev, ValidateAcceptsOnlyTheDocumentedForm) {
  std::vector<std::vector<double>> mem(6, std::vector<double>(1024));
  Attention good;
  good.q = make_view(mem[0].data(), DType::bf16, 2, 4 * 16);
  good.kv[0] = {make_view(mem[1].data(), DType::bf16, 20, 2 * 16),
                make_view(mem[2].data(), DType::bf16, 20, 2 * 16)};
  good.out = make_view(mem[3].data(), DType::bf16, 2, 4 * 16);
  good.num_heads = 4;
  good.num_kv_heads = 2;
  good.head_dim = 16;
  good.causal = true;
  good.q_pos0_dev = make_view(mem[4].data(), DType::i32, 1, 1);
  EXPECT_TRUE(validate(good).ok()) << validate(good).error().to_string();

  Attention bad = good;
  bad.causal = false;
  expect_rejected(bad, "attention: q_pos0_dev: needs causal attention");
  bad = good;
  bad.q_pos0 = 3;
  expect_rejected(bad, "attention: q_pos0: must be 0 when q_pos0_dev is given");
  bad = good;
  bad.q_pos0_dev.cols = 2;
  expect_rejected(bad, "attention: q_pos0_dev: expected shape [1, 1], got [1, 2]");
  bad = good;
  bad.q_pos0_dev.rows = 2;
  expect_rejected(bad, "attention: q_pos0_dev: expected shape [1, 1], got [2, 1]");
  bad = good;
  bad.q_pos0_dev.dtype = DType::f32;
  expect_rejected(bad, "attention: q_pos0_dev: expected dtype I32, got F32");
  bad = good;
  bad.q_pos0_dev.dtype = DType::bf16;
  expect_rejected(bad, "attention: q_pos0_dev: expected dtype I32, got BF16");
}

class CpuAttentionDevicePos : public ::testing::Test {
 protected:
  static constexpr int kHeads = 8;
  static constexpr int kKvHeads = 2;
  static constexpr int kDim = 32;
  static constexpr int64_t kCapacity = 300;
  static constexpr int64_t kQc = int64_t{kHeads} * kDim;
  static constexpr int64_t kKc = int64_t{kKvHeads} * kDim;

  void SetUp() override {
    std::mt19937 rng(4242);
    std::normal_distribution<float> dist(0.0f, 1.5f);
    auto fill = [&](std::vector<uint16_t>& v, size_t n) {
      v.resize(n);
      for (auto& x : v) x = f32_to_bf16(dist(rng));
    };
    fill(q_, static_cast<size_t>(kSeq * kQc));
    fill(k_, static_cast<size_t>(kCapacity * kKc));
    fill(v_, static_cast<size_t>(kCapacity * kKc));
  }

  // Runs attention with query 0 at position p, the spans `rows` keys long (K/V rows from
  // `first_nan` on replaced by NaN), q_pos0 from *pos_dev when given, else from the host field.
  std::vector<uint16_t> run(int64_t p, int64_t rows, int64_t first_nan, const int32_t* pos_dev,
                            Status* status = nullptr) {
    std::vector<uint16_t> k(k_), v(v_);
    for (int64_t i = first_nan * kKc; i < kCapacity * kKc; ++i) {
      k[static_cast<size_t>(i)] = kBf16NaN;
      v[static_cast<size_t>(i)] = kBf16NaN;
    }
    std::vector<uint16_t> out(static_cast<size_t>(kSeq * kQc), 0x7F7F);
    Attention op;
    op.q = make_view(q_.data(), DType::bf16, kSeq, kQc);
    op.kv[0] = {make_view(k.data(), DType::bf16, rows, kKc),
                make_view(v.data(), DType::bf16, rows, kKc)};
    op.out = make_view(out.data(), DType::bf16, kSeq, kQc);
    op.num_heads = kHeads;
    op.num_kv_heads = kKvHeads;
    op.head_dim = kDim;
    op.scale = 0.2f;
    op.causal = true;
    if (pos_dev != nullptr) {
      op.q_pos0_dev = make_view(const_cast<int32_t*>(pos_dev), DType::i32, 1, 1);
    } else {
      op.q_pos0 = p;
    }
    Status st = backend_->run(*stream_, op);
    if (st.ok()) st = backend_->synchronize(*stream_);
    if (status != nullptr) *status = st;
    EXPECT_TRUE(status != nullptr || st.ok()) << st.error().to_string();
    return out;
  }

  static constexpr int64_t kSeq = 3;
  std::unique_ptr<Backend> backend_ = create_cpu_backend();
  std::unique_ptr<Stream> stream_ = backend_->create_stream();
  std::vector<uint16_t> q_, k_, v_;
};

TEST_F(CpuAttentionDevicePos, MatchesHostPositionBitForBit) {
  // One device int, rewritten between runs as the executor does before replaying a graph.
  int32_t pos = 0;
  for (int64_t p : {int64_t{0}, int64_t{1}, int64_t{57}, int64_t{200}, kCapacity - kSeq}) {
    pos = static_cast<int32_t>(p);
    const int64_t visible = p + kSeq;
    const std::vector<uint16_t> dev = run(p, kCapacity, visible, &pos);
    const std::vector<uint16_t> host = run(p, kCapacity, visible, nullptr);
    const std::vector<uint16_t> tight = run(p, visible, visible, nullptr);
    EXPECT_EQ(dev, host) << "p = " << p;
    EXPECT_EQ(dev, tight) << "p = " << p;
    for (uint16_t x : dev) {
      ASSERT_FALSE(std::isnan(bf16_to_f32(x))) << "a NaN key past the visible ones was read";
    }
  }
}

TEST_F(CpuAttentionDevicePos, PositionPastTheCapacitySeesEveryKey) {
  const int32_t pos = 1000;
  EXPECT_EQ(run(1000, kCapacity, kCapacity, &pos), run(kCapacity, kCapacity, kCapacity, nullptr));
}

TEST_F(CpuAttentionDevicePos, NegativePositionIsAnError) {
  const int32_t pos = -1;
  Status st;
  run(0, kCapacity, kCapacity, &pos, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("q_pos0_dev < 0"), std::string::npos) << st.error().to_string();
}

}  // namespace
}  // namespace ferry
