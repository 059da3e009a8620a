// host/encode_groups.h: a raw checkpoint's groups encoded at open decode back to exactly the
// layout a raw copy gives, and a group the tier cannot place is an error naming it.
#include "host/encode_groups.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/thread_pool.h"
#include "tiny_checkpoint.h"

namespace ferry {
namespace {

using testing::TinyCheckpoint;

// The group's layout as the tier's copies lay it out over zeros.
std::vector<uint8_t> raw_layout(const HostTier& tier, const WeightGroup& g) {
  std::vector<uint8_t> out(g.bytes, 0);
  const auto copies = tier.copies(g);
  EXPECT_TRUE(copies.ok()) << g.name;
  if (!copies.ok()) return out;
  for (const HostCopy& c : *copies) {
    std::memcpy(out.data() + c.dst_offset, c.src, c.bytes);
  }
  return out;
}

void expect_round_trip(const char* preset, bool in_host_buffer) {
  TinyCheckpoint m(preset, "encode");
  auto backend = create_cpu_backend({.threads = 2});
  auto tier = HostTier::open(*backend, m.checkpoint(), HostPath::pageable);
  ASSERT_TRUE(tier.ok()) << tier.error().to_string();
  ThreadPool pool(2);
  auto groups =
      encode_groups(m.weights(), *tier, &pool, {}, in_host_buffer ? backend.get() : nullptr);
  ASSERT_TRUE(groups.ok()) << groups.error().to_string();
  ASSERT_EQ(groups->size(), m.weights().groups.size());
  int coded = 0;
  for (size_t g = 0; g < groups->size(); ++g) {
    const WeightGroup& group = m.weights().groups[g];
    ASSERT_TRUE(groups->has(g)) << group.name;
    EXPECT_EQ(groups->layout(g).decoded_size, group.bytes) << group.name;
    if (in_host_buffer) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(groups->bytes(g).data()) % 256, 0u) << group.name;
    }
    std::vector<uint8_t> decoded(group.bytes);
    ASSERT_TRUE(compress::decode_group(groups->bytes(g), decoded).ok()) << group.name;
    EXPECT_TRUE(decoded == raw_layout(*tier, group)) << group.name;
    coded += groups->layout(g).coded;
  }
  // The test checkpoint's weights are random BF16 of small spread: most groups shrink.
  EXPECT_GT(coded, 0);
  EXPECT_LT(groups->total_compressed(), groups->total_decoded());
}

TEST(EncodeGroups, EveryGroupOfQwen3TinyDecodesToItsLayout) {
  expect_round_trip("qwen3-tiny", false);
}

TEST(EncodeGroups, EveryGroupOfAlpamayoTinyDecodesToItsLayout) {
  expect_round_trip("alpamayo-tiny", false);
}

// In one buffer of the backend's host memory (page-locked on CUDA), each group 256-aligned.
TEST(EncodeGroups, InTheBackendsHostMemoryTheBytesAreTheSame) {
  expect_round_trip("qwen3-tiny", true);
}

TEST(EncodeGroups, ATensorTheTierCannotPlaceIsAnErrorNamingTheGroup) {
  TinyCheckpoint m("qwen3-tiny", "encode_bad");
  auto backend = create_cpu_backend({.threads = 1});
  auto tier = HostTier::open(*backend, m.checkpoint(), HostPath::pageable);
  ASSERT_TRUE(tier.ok());
  ModelWeights weights = m.weights();
  WeightGroup& g = weights.groups[1];
  g.tensors[0].checkpoint_name = "no.such.tensor";
  auto groups = encode_groups(weights, *tier, nullptr);
  ASSERT_FALSE(groups.ok());
  EXPECT_EQ(groups.error().message.rfind("encoding group " + g.name + ": ", 0), 0u)
      << groups.error().message;
  EXPECT_NE(groups.error().message.find("no.such.tensor is missing"), std::string::npos);
}

}  // namespace
}  // namespace ferry
