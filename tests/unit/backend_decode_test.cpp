// Backend::decode_group on the CPU backend (the reference every backend matches): a compressed
// group decoded on a stream gives back exactly the bytes encoded, a damaged one is an error of
// the stream naming the group, and arguments that break the rules are refused up front.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_backend.h"
#include "compress/group_codec.h"

namespace ferry {
namespace {

// BF16 values of a normal distribution (std 0.02) with an F32-like raw tail: what a weight
// group holds.
std::vector<uint8_t> weight_like_bytes(size_t elements, size_t tail, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<uint8_t> bytes(elements * 2 + tail);
  for (size_t i = 0; i < elements; ++i) {
    const float f = normal(rng);
    uint32_t u = 0;
    std::memcpy(&u, &f, 4);
    const auto b = static_cast<uint16_t>(u >> 16);
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
  for (size_t i = 0; i < tail; ++i) bytes[elements * 2 + i] = static_cast<uint8_t>(rng());
  return bytes;
}

struct Encoded {
  std::vector<uint8_t> raw;
  DeviceBuffer compressed;  // 256-byte aligned, as a staging buffer or the arena gives
  compress::GroupLayout layout;
};

Encoded encode(Backend& backend, std::vector<uint8_t> raw, uint64_t bf16_bytes) {
  Encoded e;
  e.raw = std::move(raw);
  const compress::Bf16Range range{0, bf16_bytes};
  auto bytes = compress::encode_group(e.raw, std::span(&range, bf16_bytes > 0 ? 1 : 0));
  EXPECT_TRUE(bytes.ok());
  e.compressed = backend.allocate(bytes->size(), "test").value();
  std::memcpy(e.compressed.data(), bytes->data(), bytes->size());
  e.layout = compress::read_group_layout(*bytes).value();
  return e;
}

TEST(BackendDecode, ACodedGroupDecodesToTheBytesEncoded) {
  auto backend = create_cpu_backend({.threads = 3, .max_delay_us = 50});
  auto stream = backend->create_stream();
  Encoded e = encode(*backend, weight_like_bytes(50000, 300, 1), 100000);
  ASSERT_TRUE(e.layout.coded);
  ASSERT_GT(e.layout.segments.size(), 4u);
  DeviceBuffer out = backend->allocate(e.raw.size() + 512, "test").value();
  backend->fill_byte(*stream, out.data(), 0xab, out.bytes());
  ASSERT_TRUE(backend
                  ->decode_group(*stream, e.layout, e.compressed.data(), out.data(), out.bytes(),
                                 "text.layers.0")
                  .ok());
  ASSERT_TRUE(backend->synchronize(*stream).ok());
  EXPECT_EQ(std::memcmp(out.data(), e.raw.data(), e.raw.size()), 0);
  // Nothing past decoded_size is written.
  const auto* guard = static_cast<const uint8_t*>(out.data()) + e.raw.size();
  for (size_t i = 0; i < 512; ++i) ASSERT_EQ(guard[i], 0xab) << i;
}

TEST(BackendDecode, AStoredGroupDecodesToTheBytesEncoded) {
  auto backend = create_cpu_backend({.threads = 2});
  auto stream = backend->create_stream();
  std::vector<uint8_t> random(40000);
  std::mt19937_64 rng(7);
  for (auto& b : random) b = static_cast<uint8_t>(rng());
  Encoded e = encode(*backend, random, 40000);  // random 16-bit patterns do not shrink
  ASSERT_FALSE(e.layout.coded);
  DeviceBuffer out = backend->allocate(e.raw.size(), "test").value();
  ASSERT_TRUE(backend
                  ->decode_group(*stream, e.layout, e.compressed.data(), out.data(), out.bytes(),
                                 "vision.patch")
                  .ok());
  ASSERT_TRUE(backend->synchronize(*stream).ok());
  EXPECT_EQ(std::memcmp(out.data(), e.raw.data(), e.raw.size()), 0);
}

TEST(BackendDecode, ADamagedGroupIsAnErrorOfTheStreamNamingIt) {
  auto backend = create_cpu_backend({.threads = 2});
  auto stream = backend->create_stream();
  Encoded e = encode(*backend, weight_like_bytes(30000, 0, 3), 60000);
  ASSERT_TRUE(e.layout.coded);
  // A byte of the payload flipped after the layout was read: the rANS stream or the checksum
  // catches it when the stream runs the decode.
  static_cast<uint8_t*>(e.compressed.data())[e.layout.payload_offset + 200] ^= 0x5a;
  DeviceBuffer out = backend->allocate(e.raw.size(), "test").value();
  ASSERT_TRUE(backend
                  ->decode_group(*stream, e.layout, e.compressed.data(), out.data(), out.bytes(),
                                 "text.layers.7.mlp")
                  .ok());
  const Status st = backend->synchronize(*stream);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::format);
  EXPECT_NE(st.error().message.find("group text.layers.7.mlp: compressed group"), std::string::npos)
      << st.error().message;
  // The error is reported once; the stream works on.
  EXPECT_TRUE(backend->synchronize(*stream).ok());
}

TEST(BackendDecode, ArgumentsThatBreakTheRulesAreRefusedAndNothingRuns) {
  auto backend = create_cpu_backend({.threads = 1});
  auto stream = backend->create_stream();
  Encoded e = encode(*backend, weight_like_bytes(4096, 0, 4), 8192);
  DeviceBuffer out = backend->allocate(e.raw.size(), "test").value();
  Status st = backend->decode_group(*stream, e.layout, e.compressed.data(), out.data(),
                                    e.raw.size() - 2, "g0");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "decode of group g0: decodes to 8192 bytes, the output holds 8190");
  st = backend->decode_group(*stream, e.layout, static_cast<uint8_t*>(e.compressed.data()) + 8,
                             out.data(), out.bytes(), "g1");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "decode of group g1: the compressed bytes are not 16-byte aligned");
  st = backend->decode_group(*stream, e.layout, nullptr, out.data(), out.bytes(), "g2");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "decode of group g2: no compressed bytes");
  EXPECT_TRUE(backend->synchronize(*stream).ok());
}

TEST(BackendDecode, ACapturingStreamRefusesADecode) {
  auto backend = create_cpu_backend({.threads = 1});
  auto stream = backend->create_stream();
  Encoded e = encode(*backend, weight_like_bytes(4096, 0, 5), 8192);
  DeviceBuffer out = backend->allocate(e.raw.size(), "test").value();
  ASSERT_TRUE(backend->begin_capture(*stream).ok());
  const Status st =
      backend->decode_group(*stream, e.layout, e.compressed.data(), out.data(), out.bytes(), "g");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(st.error().message.find("cannot be recorded"), std::string::npos);
  ASSERT_TRUE(backend->end_capture(*stream).ok());
}

}  // namespace
}  // namespace ferry
