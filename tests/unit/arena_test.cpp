// The device region's bookkeeping (Arena) and the backend's budget: every byte carved from one
// reservation, refused beyond it with a message, counted by purpose.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/arena.h"
#include "backend/cpu/cpu_backend.h"

namespace ferry {
namespace {

TEST(Arena, TakesAlignedRangesAndMergesFreedNeighbours) {
  Arena a(4096);
  EXPECT_EQ(a.capacity(), 4096u);
  const auto x = a.take(1);
  const auto y = a.take(300);  // two units
  const auto z = a.take(256);
  ASSERT_TRUE(x && y && z);
  EXPECT_EQ(*x, 0u);
  EXPECT_EQ(*y, 256u);
  EXPECT_EQ(*z, 768u);
  EXPECT_EQ(a.in_use(), 1024u);
  EXPECT_TRUE(a.give(*y));
  EXPECT_FALSE(a.give(*y));  // twice
  EXPECT_FALSE(a.give(12));  // never handed out
  // The hole of two units is reused first fit.
  const auto w = a.take(512);
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, 256u);
  EXPECT_TRUE(a.give(*x));
  EXPECT_TRUE(a.give(*w));
  EXPECT_TRUE(a.give(*z));
  EXPECT_EQ(a.in_use(), 0u);
  EXPECT_EQ(a.largest_free(), 4096u);  // all merged back into one range
  EXPECT_FALSE(a.take(4097).has_value());
  EXPECT_TRUE(a.take(4096).has_value());
  EXPECT_FALSE(a.take(1).has_value());
}

TEST(Arena, RandomTakeAndGiveKeepsTheBooksExact) {
  Arena a(1 << 20);
  std::mt19937_64 rng(7);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // offset, bytes
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t bytes = 1 + rng() % 20000;
      const auto off = a.take(bytes);
      if (!off) continue;
      const uint64_t rounded = (bytes + 255) / 256 * 256;
      for (const auto& [o, b] : live) {
        EXPECT_TRUE(*off + rounded <= o || o + b <= *off) << "overlap";
      }
      live.emplace_back(*off, rounded);
    } else {
      const size_t k = rng() % live.size();
      EXPECT_TRUE(a.give(live[k].first));
      live.erase(live.begin() + static_cast<long>(k));
    }
    uint64_t sum = 0;
    for (const auto& [o, b] : live) sum += b;
    ASSERT_EQ(a.in_use(), sum);
  }
  for (const auto& [o, b] : live) EXPECT_TRUE(a.give(o));
  EXPECT_EQ(a.largest_free(), uint64_t{1} << 20);
}

TEST(BackendBudget, EveryAllocationComesFromTheReservation) {
  auto be = create_cpu_backend();
  ASSERT_TRUE(be->reserve(1 << 20).ok());
  EXPECT_FALSE(be->reserve(1 << 20).ok());  // once
  auto a = be->allocate(300 << 10, "kv cache");
  auto b = be->allocate(500 << 10, "activations");
  ASSERT_TRUE(a.ok() && b.ok());
  const MemoryLedger l = be->ledger();
  EXPECT_EQ(l.reserved, 1u << 20);
  EXPECT_EQ(l.in_use, (300u + 500u) << 10);
  ASSERT_EQ(l.by_purpose.size(), 2u);
  EXPECT_EQ(l.by_purpose[0].first, "activations");
  EXPECT_EQ(l.by_purpose[1].first, "kv cache");
  // Inside the region.
  auto* base = static_cast<char*>(a.value().data());
  auto* other = static_cast<char*>(b.value().data());
  EXPECT_LT(std::abs(other - base), 1 << 20);
  // Over the budget: refused with a message that names the purpose and what is free.
  auto c = be->allocate(300 << 10, "slots");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(c.error().message.find("slots"), std::string::npos);
  // Freed bytes come back.
  b = Result<DeviceBuffer>(DeviceBuffer());
  EXPECT_TRUE(be->allocate(300 << 10, "slots").ok());
  EXPECT_EQ(be->ledger().peak, (300u + 500u) << 10);
}

TEST(BackendBudget, ReserveAfterAllocatingIsRefused) {
  auto be = create_cpu_backend();
  auto a = be->allocate(1024, "early");
  ASSERT_TRUE(a.ok());
  const Status st = be->reserve(1 << 20);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("before allocating"), std::string::npos);
}

}  // namespace
}  // namespace ferry
