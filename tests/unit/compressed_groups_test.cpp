// host/compressed_groups.h: the validated table of a model's compressed groups that plans with
// compressed forms read, and the BF16 ranges a group's layout gives the encoder.
#include "host/compressed_groups.h"

#include <gtest/gtest.h>

#include <memory>

#include "model/presets.h"
#include "model/synth.h"

namespace ferry {
namespace {

std::vector<uint8_t> synth_layout(const WeightGroup& g, uint64_t& tensor_index) {
  std::vector<uint8_t> bytes(g.bytes, 0);
  for (const WeightSpec& s : g.tensors) {
    synth_fill(
        5, tensor_index++, s, synth_init(g, s, SynthDistribution::normal), 0,
        std::span<std::byte>(reinterpret_cast<std::byte*>(bytes.data()) + s.offset, s.bytes));
  }
  return bytes;
}

struct Encoded {
  ModelWeights weights;
  std::shared_ptr<std::vector<std::vector<uint8_t>>> buffers;
  std::vector<std::span<const uint8_t>> spans;
};

// Every group of qwen3-tiny encoded; group `skip` left without a compressed form.
Encoded encode_tiny(size_t skip) {
  Encoded e;
  e.weights = describe_weights(preset("qwen3-tiny").value()).value();
  e.buffers = std::make_shared<std::vector<std::vector<uint8_t>>>();
  uint64_t index = 0;
  for (const WeightGroup& g : e.weights.groups) {
    const std::vector<uint8_t> raw = synth_layout(g, index);
    auto enc = compress::encode_group(raw, bf16_ranges(g));
    EXPECT_TRUE(enc.ok()) << g.name;
    e.buffers->push_back(enc.ok() ? std::move(*enc) : std::vector<uint8_t>{});
  }
  for (size_t g = 0; g < e.buffers->size(); ++g) {
    if (g == skip) {
      e.spans.emplace_back();
    } else {
      e.spans.emplace_back((*e.buffers)[g]);
    }
  }
  return e;
}

TEST(CompressedGroups, BF16RangesAreTheGroupsBf16TensorsInOffsetOrder) {
  const ModelWeights w = describe_weights(preset("qwen3-tiny").value()).value();
  for (const WeightGroup& g : w.groups) {
    const auto ranges = bf16_ranges(g);
    size_t bf16 = 0;
    for (const WeightSpec& s : g.tensors) bf16 += s.dtype == DType::bf16 && s.bytes > 0;
    EXPECT_EQ(ranges.size(), bf16) << g.name;
    for (size_t i = 1; i < ranges.size(); ++i) {
      EXPECT_GE(ranges[i].offset, ranges[i - 1].offset + ranges[i - 1].bytes) << g.name;
    }
    for (const auto& r : ranges) EXPECT_LE(r.offset + r.bytes, g.bytes) << g.name;
  }
}

TEST(CompressedGroups, MakeReadsEveryLayoutAndCountsTheBytes) {
  Encoded e = encode_tiny(1);
  auto groups = CompressedGroups::make(e.weights, e.spans, e.buffers);
  ASSERT_TRUE(groups.ok()) << groups.error().to_string();
  ASSERT_EQ(groups->size(), e.weights.groups.size());
  EXPECT_FALSE(groups->has(1));
  EXPECT_EQ(groups->compressed_bytes(1), 0u);
  uint64_t compressed = 0, decoded = 0;
  for (size_t g = 0; g < groups->size(); ++g) {
    if (g == 1) continue;
    ASSERT_TRUE(groups->has(g));
    EXPECT_EQ(groups->layout(g).decoded_size, e.weights.groups[g].bytes);
    EXPECT_EQ(groups->layout(g).compressed_size, (*e.buffers)[g].size());
    compressed += (*e.buffers)[g].size();
    decoded += e.weights.groups[g].bytes;
  }
  EXPECT_EQ(groups->total_compressed(), compressed);
  EXPECT_EQ(groups->total_decoded(), decoded);
  EXPECT_LT(compressed, decoded);
}

TEST(CompressedGroups, BytesOfTheWrongGroupOrDamagedOnesAreRefusedNamingTheGroup) {
  Encoded e = encode_tiny(size_t(-1));
  // A count that is not the model's.
  auto short_list = e.spans;
  short_list.pop_back();
  auto r = CompressedGroups::make(e.weights, short_list, e.buffers);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  // Group 0's bytes where group 2 belongs: the decoded size does not match the layout.
  size_t other = 0;
  while (other < e.weights.groups.size() &&
         e.weights.groups[other].bytes == e.weights.groups[0].bytes) {
    ++other;
  }
  ASSERT_LT(other, e.weights.groups.size());
  auto swapped = e.spans;
  swapped[other] = e.spans[0];
  r = CompressedGroups::make(e.weights, swapped, e.buffers);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::format);
  EXPECT_NE(r.error().message.find(e.weights.groups[other].name), std::string::npos)
      << r.error().message;
  // A damaged magic.
  std::vector<uint8_t> damaged((*e.buffers)[0]);
  damaged[0] ^= 0xff;
  auto bad = e.spans;
  bad[0] = damaged;
  r = CompressedGroups::make(e.weights, bad, e.buffers);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::format);
  EXPECT_NE(r.error().message.find(e.weights.groups[0].name), std::string::npos);
}

}  // namespace
}  // namespace ferry
