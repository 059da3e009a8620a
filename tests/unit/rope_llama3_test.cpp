// Llama-3's RoPE frequency scaling (backend/ops.h RopeLlama3): the host's inv_freq table against
// transformers' _compute_llama3_parameters (5.25, torch 2.15, fp32 on the CPU) for
// Llama-3.1-8B's config, bit for bit, and the CPU RopeTable op built on it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/ops.h"
#include "core/tensor.h"

namespace ferry {
namespace {

// inv_freq of head_dim 128, theta 5e5, factor 8, low 1, high 4, original context 8192, as fp32
// bits (transformers' table: 29 entries kept, 29 divided by 8, 6 smoothed between).
constexpr uint32_t kLlama31InvFreq[64] = {
    0x3f800000, 0x3f508ac1, 0x3f29e1c6, 0x3f0a6384, 0x3ee177bc, 0x3eb7ab7d, 0x3e959ee3, 0x3e73c461,
    0x3e4693b0, 0x3e21c3a0, 0x3e03c6a0, 0x3dd6b19c, 0x3daee4ad, 0x3d8e7898, 0x3d681e67, 0x3d3d1684,
    0x3d1a08c8, 0x3cfaf53f, 0x3ccc6f49, 0x3ca68939, 0x3c87a9c3, 0x3c5d06ec, 0x3c340d6d, 0x3c12ac7f,
    0x3beef74f, 0x3bc2aa76, 0x3b9e9402, 0x3b812e35, 0x3b527720, 0x3b0dfd06, 0x3ab3d11d, 0x3a60979e,
    0x3a0995d2, 0x39a3f108, 0x393b2dd2, 0x38c86886, 0x38a3418d, 0x3884fdbf, 0x3858ac81, 0x38308199,
    0x380fc8f8, 0x37ea426f, 0x37bed4f4, 0x379b7475, 0x377d45c3, 0x374e51f5, 0x3728126b, 0x3708ea0f,
    0x36df10c4, 0x36b5b687, 0x369406cb, 0x36712b80, 0x36447610, 0x36200a69, 0x36025f34, 0x35d46808,
    0x35ad07a7, 0x358cf400, 0x3565a54d, 0x353b12c7, 0x351864a7, 0x34f848c2, 0x34ca41b0, 0x34a4c2ff};

RopeTable llama31_table() {
  RopeTable op;
  op.theta = 500000.0f;
  op.head_dim = 128;
  op.sections = {64, 0, 0};
  op.llama3 = {8.0f, 1.0f, 4.0f, 8192.0f};
  return op;
}

TEST(RopeLlama3, InvFreqIsTransformersBitForBit) {
  float got[64];
  rope_inv_freq(llama31_table(), got);
  int scaled = 0;
  RopeTable plain = llama31_table();
  plain.llama3 = {};
  float unscaled[64];
  rope_inv_freq(plain, unscaled);
  for (int j = 0; j < 64; ++j) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got[j]), kLlama31InvFreq[j]) << "j = " << j;
    scaled += got[j] != unscaled[j];
  }
  EXPECT_EQ(scaled, 64 - 29);  // the high frequencies are kept as they are
}

TEST(RopeLlama3, CpuTableUsesTheScaledFrequencies) {
  auto backend = create_cpu_backend(CpuBackendOptions{});
  auto stream = backend->create_stream();
  const int64_t rows = 3;
  std::vector<int32_t> pos = {0, 0, 0, 1, 1, 1, 5000, 5000, 5000};
  std::vector<float> cos(rows * 64), sin(rows * 64);
  RopeTable op = llama31_table();
  op.pos = make_view(pos.data(), DType::i32, rows, 3);
  op.cos = make_view(cos.data(), DType::f32, rows, 64);
  op.sin = make_view(sin.data(), DType::f32, rows, 64);
  ASSERT_TRUE(validate(op).ok());
  ASSERT_TRUE(backend->run(*stream, op).ok());
  ASSERT_TRUE(backend->synchronize(*stream).ok());
  for (int64_t r = 0; r < rows; ++r) {
    for (int j = 0; j < 64; ++j) {
      const float angle = static_cast<float>(pos[r * 3]) * std::bit_cast<float>(kLlama31InvFreq[j]);
      EXPECT_EQ(cos[r * 64 + j], std::cos(angle)) << r << " " << j;
      EXPECT_EQ(sin[r * 64 + j], std::sin(angle)) << r << " " << j;
    }
  }
}

TEST(RopeLlama3, BadScalingIsRefused) {
  RopeTable op = llama31_table();
  std::vector<int32_t> pos(3);
  std::vector<float> cos(64), sin(64);
  op.pos = make_view(pos.data(), DType::i32, 1, 3);
  op.cos = make_view(cos.data(), DType::f32, 1, 64);
  op.sin = make_view(sin.data(), DType::f32, 1, 64);
  op.llama3.high_freq_factor = 0.5f;
  EXPECT_FALSE(validate(op).ok());
  op = llama31_table();
  op.pos = make_view(pos.data(), DType::i32, 1, 3);
  op.cos = make_view(cos.data(), DType::f32, 1, 64);
  op.sin = make_view(sin.data(), DType::f32, 1, 64);
  op.llama3.factor = -1.0f;
  EXPECT_FALSE(validate(op).ok());
}

}  // namespace
}  // namespace ferry
