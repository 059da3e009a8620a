// Backend::decode_group on the CUDA backend: the bytes the CPU reference gives, a damaged group
// reported by the next synchronize(stream) naming its group (the right one of several), and
// decodes refused inside a graph capture.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "compress/group_codec.h"
#include "harness.h"
#include "model/synth.h"

namespace ferry::cuda_test {
namespace {

Backend& gpu() {
  return *backends(nullptr)->cuda;
}

std::vector<uint8_t> normal_bf16(size_t n, uint64_t seed) {
  WeightSpec s;
  s.dtype = DType::bf16;
  s.shape = {static_cast<int64_t>(n)};
  std::vector<uint8_t> out(2 * n);
  synth_fill(seed, 0, s, SynthInit{false, 0.02f, SynthDistribution::normal}, 0,
             std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), out.size()));
  return out;
}

struct OnDevice {
  std::vector<uint8_t> raw, compressed;
  compress::GroupLayout layout;
  DeviceBuffer in, out;
};

OnDevice upload(Stream& stream, size_t elements, uint64_t seed) {
  OnDevice d;
  d.raw = normal_bf16(elements, seed);
  const compress::Bf16Range range{0, d.raw.size()};
  d.compressed = compress::encode_group(d.raw, std::span(&range, 1)).value();
  d.layout = compress::read_group_layout(d.compressed).value();
  d.in = gpu().allocate(d.compressed.size(), "test").value();
  d.out = gpu().allocate(d.raw.size(), "test").value();
  gpu().copy_to_device(stream, d.in.data(), d.compressed.data(), d.compressed.size());
  gpu().fill_byte(stream, d.out.data(), 0xff, d.out.bytes());
  return d;
}

TEST(CudaBackendDecode, DecodesToTheBytesEncoded) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  OnDevice d = upload(*stream, 3 * 8192 + 100, 1);
  ASSERT_TRUE(d.layout.coded);
  ASSERT_TRUE(gpu()
                  .decode_group(*stream, d.layout, d.in.data(), d.out.data(), d.out.bytes(),
                                "text.layers.0")
                  .ok());
  std::vector<uint8_t> back(d.raw.size());
  gpu().copy_to_host(*stream, back.data(), d.out.data(), back.size());
  ASSERT_TRUE(gpu().synchronize(*stream).ok());
  EXPECT_TRUE(back == d.raw);
}

TEST(CudaBackendDecode, ADamagedGroupIsReportedBySynchronizeNamingIt) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  OnDevice good = upload(*stream, 2 * 8192, 2);
  OnDevice bad = upload(*stream, 2 * 8192, 3);
  ASSERT_TRUE(bad.layout.coded);
  ASSERT_EQ(bad.layout.segments[0].kind, compress::SegmentKind::rans);
  // Lane 0's state of segment 0 below 2^16 on the device (the host layout is of the good bytes).
  std::vector<uint8_t> damaged = bad.compressed;
  const size_t state = bad.layout.payload_offset + bad.layout.segments[0].in_offset;
  std::memset(damaged.data() + state, 0, 4);
  gpu().copy_to_device(*stream, bad.in.data(), damaged.data(), damaged.size());
  ASSERT_TRUE(gpu()
                  .decode_group(*stream, good.layout, good.in.data(), good.out.data(),
                                good.out.bytes(), "text.layers.1")
                  .ok());
  ASSERT_TRUE(gpu()
                  .decode_group(*stream, bad.layout, bad.in.data(), bad.out.data(), bad.out.bytes(),
                                "text.layers.2")
                  .ok());
  const Status st = gpu().synchronize(*stream);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::format);
  EXPECT_EQ(st.error().message.rfind("group text.layers.2: ", 0), 0u) << st.error().message;
  // Reported once; the next decode of good bytes is clean.
  ASSERT_TRUE(gpu()
                  .decode_group(*stream, good.layout, good.in.data(), good.out.data(),
                                good.out.bytes(), "text.layers.1")
                  .ok());
  EXPECT_TRUE(gpu().synchronize(*stream).ok());
}

TEST(CudaBackendDecode, ManyDecodesBetweenSynchronizes) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  OnDevice d = upload(*stream, 8192, 4);
  for (int i = 0; i < 1200; ++i) {  // more than one chunk of error words
    ASSERT_TRUE(
        gpu().decode_group(*stream, d.layout, d.in.data(), d.out.data(), d.out.bytes(), "g").ok());
  }
  std::vector<uint8_t> back(d.raw.size());
  gpu().copy_to_host(*stream, back.data(), d.out.data(), back.size());
  ASSERT_TRUE(gpu().synchronize(*stream).ok());
  EXPECT_TRUE(back == d.raw);
}

TEST(CudaBackendDecode, ACapturingStreamRefusesADecode) {
  SKIP_WITHOUT_CUDA();
  auto stream = gpu().create_stream();
  OnDevice d = upload(*stream, 8192, 5);
  ASSERT_TRUE(gpu().synchronize(*stream).ok());
  ASSERT_TRUE(gpu().begin_capture(*stream).ok());
  const Status st =
      gpu().decode_group(*stream, d.layout, d.in.data(), d.out.data(), d.out.bytes(), "g");
  (void)gpu().end_capture(*stream);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace ferry::cuda_test
