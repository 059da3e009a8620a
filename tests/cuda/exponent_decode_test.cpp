// The CUDA decoder of compressed groups (backend/cuda/exponent_decode.cuh) against the CPU
// reference (compress::decode_group): the same bytes on normal, uniform and random BF16, odd
// sizes, mixed layouts and a misaligned output; hostile device bytes set the error word with the
// right fault and never write outside the output (guard bytes on both sides); random damage is
// accepted by the device exactly when the CPU accepts it, with the CPU's bytes.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "backend/cuda/cuda_resources.h"
#include "backend/cuda/exponent_decode.cuh"
#include "compress/group_codec.h"
#include "model/synth.h"

namespace ferry::cuda_test {
namespace {

using compress::Bf16Range;
using compress::EncodeOptions;
using compress::GroupLayout;
using cuda::DecodeErrorWord;
using cuda::DecodeFault;

bool has_device() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  return ok;
}

#define REQUIRE_DEVICE() \
  if (!has_device()) GTEST_SKIP() << "no CUDA device"

std::vector<uint8_t> synth_bf16(size_t n, SynthDistribution dist, uint64_t seed,
                                float std = 0.02f) {
  WeightSpec s;
  s.dtype = DType::bf16;
  s.shape = {static_cast<int64_t>(n)};
  std::vector<uint8_t> out(2 * n);
  synth_fill(seed, 0, s, SynthInit{false, std, dist}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()));
  return out;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

constexpr size_t kGuard = 4096;
constexpr uint8_t kGuardByte = 0xa5;

struct DeviceRun {
  Status launched;
  DecodeErrorWord error = 0;
  std::vector<uint8_t> out;
  bool guards_intact = true;
};

// Uploads `device_bytes`, decodes them with the host's `layout` into an output of `capacity`
// bytes placed `misalign` bytes after a 16-byte boundary, with guard bytes on both sides.
DeviceRun run_on_device(const std::vector<uint8_t>& device_bytes, const GroupLayout& layout,
                        uint64_t capacity, size_t misalign = 0,
                        uint64_t compressed_size_override = 0) {
  DeviceRun r;
  auto in = cuda::DeviceMemory::allocate(std::max<size_t>(device_bytes.size(), 16));
  auto out = cuda::DeviceMemory::allocate(2 * kGuard + capacity);
  auto err = cuda::DeviceMemory::allocate(sizeof(DecodeErrorWord));
  EXPECT_TRUE(in.ok() && out.ok() && err.ok());
  if (!in.ok() || !out.ok() || !err.ok()) return r;
  EXPECT_EQ(cudaMemcpy(in->get(), device_bytes.data(), device_bytes.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(cudaMemset(out->get(), kGuardByte, 2 * kGuard + capacity), cudaSuccess);
  EXPECT_EQ(cudaMemset(err->get(), 0xff, sizeof(DecodeErrorWord)), cudaSuccess);
  uint8_t* o = static_cast<uint8_t*>(out->get()) + kGuard + misalign;
  GroupLayout l = layout;
  if (compressed_size_override != 0) l.compressed_size = compressed_size_override;
  r.launched =
      cuda::decode_group_async(l, static_cast<const uint8_t*>(in->get()), o, capacity - misalign,
                               static_cast<DecodeErrorWord*>(err->get()), nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> all(2 * kGuard + capacity);
  EXPECT_EQ(cudaMemcpy(all.data(), out->get(), all.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&r.error, err->get(), sizeof r.error, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < kGuard + misalign; ++i) r.guards_intact &= all[i] == kGuardByte;
  const size_t end = kGuard + misalign + layout.decoded_size;
  for (size_t i = end; i < all.size(); ++i) r.guards_intact &= all[i] == kGuardByte;
  r.out.assign(all.begin() + static_cast<std::ptrdiff_t>(kGuard + misalign),
               all.begin() + static_cast<std::ptrdiff_t>(end));
  return r;
}

// Encodes, decodes on the CPU and on the device, and compares.
void check_same_bytes(const std::vector<uint8_t>& bytes, const std::vector<Bf16Range>& ranges,
                      const EncodeOptions& o = {}, size_t misalign = 0, bool expect_coded = true) {
  auto enc = compress::encode_group(bytes, ranges, o);
  ASSERT_TRUE(enc.ok()) << enc.error().to_string();
  auto layout = compress::read_group_layout(*enc);
  ASSERT_TRUE(layout.ok()) << layout.error().to_string();
  EXPECT_EQ(layout->coded, expect_coded) << bytes.size();
  std::vector<uint8_t> cpu(bytes.size());
  ASSERT_TRUE(compress::decode_group(*layout, *enc, cpu).ok());
  ASSERT_TRUE(cpu == bytes);
  const DeviceRun r = run_on_device(*enc, *layout, bytes.size() + misalign, misalign);
  ASSERT_TRUE(r.launched.ok()) << r.launched.error().to_string();
  EXPECT_EQ(r.error, 0u) << cuda::decode_error_status(r.error).error().to_string();
  EXPECT_TRUE(r.guards_intact);
  EXPECT_TRUE(r.out == cpu) << bytes.size() << " bytes, misalign " << misalign;
}

TEST(ExponentDecode, NormalBf16OfOddSizes) {
  REQUIRE_DEVICE();
  EncodeOptions coded_always;
  coded_always.max_ratio = 1e12;  // coded whatever the overhead (tiny groups too)
  for (size_t n : {1u, 255u, 256u, 257u, 8191u, 8192u, 8193u, 100000u, 3000001u}) {
    check_same_bytes(synth_bf16(n, SynthDistribution::normal, n), {{0, 2 * n}}, coded_always);
  }
}

TEST(ExponentDecode, SegmentSizesAndUniformInit) {
  REQUIRE_DEVICE();
  const auto normal = synth_bf16(1 << 20, SynthDistribution::normal, 5);
  const auto uniform = synth_bf16(1 << 20, SynthDistribution::uniform, 5);
  for (uint32_t seg : {256u, 1024u, 8192u}) {
    EncodeOptions o;
    o.segment_elements = seg;
    o.max_ratio = 1e12;  // 256-element segments are near 0.94: coded whatever the ratio
    check_same_bytes(normal, {{0, normal.size()}}, o);
    check_same_bytes(uniform, {{0, uniform.size()}}, o);
  }
}

TEST(ExponentDecode, LargeGroupManySegmentsPerWarp) {
  REQUIRE_DEVICE();
  const auto bytes = synth_bf16(size_t{40} << 20, SynthDistribution::normal, 9);  // 80 MB
  check_same_bytes(bytes, {{0, bytes.size()}});
}

TEST(ExponentDecode, MixedLayoutAndMisalignedOutput) {
  REQUIRE_DEVICE();
  std::vector<uint8_t> bytes;
  std::vector<Bf16Range> ranges;
  auto add_bf16 = [&](size_t n, uint64_t seed) {
    const auto t = synth_bf16(n, SynthDistribution::normal, seed);
    ranges.push_back({bytes.size(), t.size()});
    bytes.insert(bytes.end(), t.begin(), t.end());
  };
  auto add_raw = [&](size_t n, uint64_t seed) {
    const auto t = random_bytes(n, seed);
    bytes.insert(bytes.end(), t.begin(), t.end());
  };
  add_bf16(96 * 1024 + 5, 1);
  add_raw(246, 2);  // padding to 256 and a small F32 tensor
  add_raw(4000, 3);
  add_bf16(20000, 4);
  add_raw(1, 5);  // the next range at an odd offset
  add_bf16(9000, 6);
  add_raw(70001, 7);
  const auto noise = random_bytes(2 * 8192, 8);  // a segment that keeps raw exponents
  ranges.push_back({bytes.size(), noise.size()});
  bytes.insert(bytes.end(), noise.begin(), noise.end());
  for (size_t misalign : {0u, 2u, 1u, 8u}) check_same_bytes(bytes, ranges, {}, misalign);
}

TEST(ExponentDecode, StoredAndSplitGroups) {
  REQUIRE_DEVICE();
  const auto noise = random_bytes(1 << 20, 3);
  check_same_bytes(noise, {{0, noise.size()}}, {}, 0, /*expect_coded=*/false);  // a copy
  EncodeOptions o;
  o.max_ratio = 2.0;  // coded anyway: every segment keeps raw exponents (split)
  check_same_bytes(noise, {{0, noise.size()}}, o);
  check_same_bytes(noise, {}, o, 0, false);  // no BF16: stored
}

// --- hostile device bytes (the host's layout is of the good bytes) ---

void put16(std::vector<uint8_t>& v, size_t at, uint16_t x) {
  std::memcpy(v.data() + at, &x, 2);
}
void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  std::memcpy(v.data() + at, &x, 4);
}
void put64(std::vector<uint8_t>& v, size_t at, uint64_t x) {
  std::memcpy(v.data() + at, &x, 8);
}
uint64_t get64(const std::vector<uint8_t>& v, size_t at) {
  uint64_t x;
  std::memcpy(&x, v.data() + at, 8);
  return x;
}
size_t entry(size_t k, uint32_t field) {
  return compress::kHeaderBytes + compress::kTableBytes + 32 * k + field;
}

TEST(ExponentDecode, HostileBytesSetTheFaultAndStayInBounds) {
  REQUIRE_DEVICE();
  auto bytes = synth_bf16(4 * 8192 + 3000, SynthDistribution::normal, 12);
  const auto gap = random_bytes(512, 1);
  bytes.insert(bytes.begin() + 2 * 8192, gap.begin(), gap.end());
  const std::vector<Bf16Range> ranges{{0, 2 * 8192}, {2 * 8192 + 512, 2 * (3 * 8192 + 3000)}};
  const auto enc = compress::encode_group(bytes, ranges).value();
  const GroupLayout layout = compress::read_group_layout(enc).value();
  ASSERT_TRUE(layout.coded);
  ASSERT_EQ(layout.segments[1].kind, compress::SegmentKind::copy);
  ASSERT_EQ(layout.segments.size(), 6u);  // rans, copy, rans x 4 (the last 3000 elements)
  ASSERT_EQ(layout.segments[3].kind, compress::SegmentKind::rans);
  const size_t words3 =
      layout.payload_offset + layout.segments[3].in_offset + compress::kStateBytes;
  struct Case {
    const char* name;
    std::function<void(std::vector<uint8_t>&)> apply;
    DecodeFault fault;
    DecodeFault or_fault = DecodeFault::none;  // a lie another segment's check may see first
  };
  const std::vector<Case> cases = {
      {"magic", [](auto& v) { v[0] = 'X'; }, DecodeFault::header},
      {"mode stored", [](auto& v) { put16(v, compress::kHeaderMode, 0); }, DecodeFault::header},
      {"payload size", [](auto& v) { put64(v, compress::kHeaderPayloadSize, 1); },
       DecodeFault::header},
      {"segment count", [](auto& v) { put32(v, compress::kHeaderSegmentCount, 7); },
       DecodeFault::header},
      {"decoded size past the buffer",
       [](auto& v) {
         put64(v, compress::kHeaderDecodedSize, get64(v, compress::kHeaderDecodedSize) + 2);
       },
       DecodeFault::capacity},
      {"table sum", [](auto& v) { v[compress::kHeaderBytes + 2 * 200] += 1; }, DecodeFault::table},
      {"out offset huge", [](auto& v) { put64(v, entry(3, 0), 1ull << 50); }, DecodeFault::entry,
       DecodeFault::tiling},
      {"out offset wraps", [](auto& v) { put64(v, entry(3, 0), ~0ull - 1); }, DecodeFault::entry,
       DecodeFault::tiling},
      {"in offset huge", [](auto& v) { put64(v, entry(4, 8), 1ull << 40); }, DecodeFault::entry},
      {"in length huge", [](auto& v) { put32(v, entry(3, 16), 0xfffffff0u); }, DecodeFault::entry},
      {"count huge", [](auto& v) { put32(v, entry(1, 20), 0x7fffffffu); }, DecodeFault::entry,
       DecodeFault::tiling},
      {"kind", [](auto& v) { put16(v, entry(2, 24), 5); }, DecodeFault::entry},
      {"reserved", [](auto& v) { v[entry(2, 30)] = 1; }, DecodeFault::entry},
      {"out offset shifted", [](auto& v) { put64(v, entry(3, 0), get64(v, entry(3, 0)) + 2); },
       DecodeFault::tiling},
      {"in length shorter",
       [](auto& v) { put32(v, entry(3, 16), static_cast<uint32_t>(get64(v, entry(3, 16))) - 2); },
       DecodeFault::stream},
      {"word flipped", [words3](auto& v) { v[words3 + 100] ^= 0x20; }, DecodeFault::state},
      {"state below 2^16", [words3](auto& v) { put32(v, words3 - compress::kStateBytes + 4, 3); },
       DecodeFault::state},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> v = enc;
    c.apply(v);
    const DeviceRun r = run_on_device(v, layout, bytes.size());
    ASSERT_TRUE(r.launched.ok()) << c.name;
    EXPECT_TRUE(r.guards_intact) << c.name;
    EXPECT_NE(r.error, 0u) << c.name;
    // A fault can show first where another segment trips on the same lie; the kind must match
    // for faults that only one check can see.
    if (c.fault != DecodeFault::state && c.fault != DecodeFault::stream) {
      const auto got = static_cast<DecodeFault>(r.error >> 32);
      EXPECT_TRUE(got == c.fault || (c.or_fault != DecodeFault::none && got == c.or_fault))
          << c.name << ": " << cuda::decode_error_status(r.error).error().to_string();
    }
    EXPECT_FALSE(cuda::decode_error_status(r.error).ok());
  }
  // A truncated buffer: the host claims fewer bytes than the header needs.
  const DeviceRun r = run_on_device(enc, layout, bytes.size(), 0, enc.size() - 16);
  EXPECT_EQ(static_cast<DecodeFault>(r.error >> 32), DecodeFault::header);
  EXPECT_TRUE(r.guards_intact);
}

TEST(ExponentDecode, RandomDamageAgreesWithTheCpu) {
  REQUIRE_DEVICE();
  auto bytes = synth_bf16(4 * 8192 + 1000, SynthDistribution::normal, 13);
  const auto gap = random_bytes(300, 2);
  bytes.insert(bytes.begin() + 2 * 8192, gap.begin(), gap.end());
  const std::vector<Bf16Range> ranges{{0, 2 * 8192}, {2 * 8192 + 300, 2 * (2 * 8192 + 1000)}};
  const auto enc = compress::encode_group(bytes, ranges).value();
  const GroupLayout layout = compress::read_group_layout(enc).value();
  std::mt19937_64 rng(99);
  int accepted = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> v = enc;
    const size_t header_and_index = layout.payload_offset;
    for (int k = 0; k < 2; ++k) {  // half the flips in the header, table and index
      const size_t at = rng() % 2 ? rng() % header_and_index : rng() % v.size();
      v[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    // The CPU's verdict on the structure and the streams (the device does not checksum).
    std::vector<uint8_t> cpu(bytes.size());
    auto l = compress::read_group_layout(v);
    const bool cpu_ok = l.ok() && l->decoded_size == bytes.size() &&
                        l->segments.size() == layout.segments.size() &&
                        compress::decode_group(*l, v, cpu, {nullptr, false}).ok();
    const DeviceRun r = run_on_device(v, layout, bytes.size());
    ASSERT_TRUE(r.launched.ok());
    EXPECT_TRUE(r.guards_intact) << trial;
    EXPECT_EQ(r.error == 0, cpu_ok)
        << trial << ": "
        << (r.error ? cuda::decode_error_status(r.error).error().to_string()
                    : std::string("device accepted"));
    if (cpu_ok && r.error == 0) {
      EXPECT_TRUE(r.out == cpu) << trial;
      ++accepted;
    }
  }
  std::printf("random damage: %d of 300 accepted (padding or sign+mantissa bytes)\n", accepted);
}

TEST(ExponentDecode, MisalignedInputIsRefused) {
  REQUIRE_DEVICE();
  auto err = cuda::DeviceMemory::allocate(64);
  ASSERT_TRUE(err.ok());
  const uint8_t* p = static_cast<const uint8_t*>(err->get()) + 8;
  const Status s = cuda::launch_exponent_decode(p, 32, 1, nullptr, 0,
                                                static_cast<DecodeErrorWord*>(err->get()), nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace ferry::cuda_test
