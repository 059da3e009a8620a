#include <gtest/gtest.h>

#include <vector>

#include "model/rope_index.h"

namespace ferry {
namespace {

constexpr int32_t kPad = 151655;

TEST(TextRopeIndex, TextOnlyIsLinear) {
  std::vector<int32_t> ids = {5, 6, 7, 8};
  auto r = rope_index(ids, kPad, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pos, linear_positions(0, 4));
  EXPECT_EQ(r->rope_delta, 0);
}

TEST(TextRopeIndex, OneImageGridAndResume) {
  // 2 text tokens, a 1x2x3 image (6 tokens), 2 text tokens.
  std::vector<int32_t> ids = {1, 2, kPad, kPad, kPad, kPad, kPad, kPad, 3, 4};
  const std::array<int64_t, 3> grid = {1, 2, 3};
  auto r = rope_index(ids, kPad, std::span(&grid, 1));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  const std::vector<int32_t> expected = {
      0, 0, 0, 1, 1, 1,                                      // text
      2, 2, 2, 2, 2, 3, 2, 2, 4, 2, 3, 2, 2, 3, 3, 2, 3, 4,  // (t, base+h, base+w)
      5, 5, 5, 6, 6, 6};  // resumes at base + max(1, 2, 3) = 2 + 3
  EXPECT_EQ(r->pos, expected);
  EXPECT_EQ(r->rope_delta, 7 - 10);
}

TEST(TextRopeIndex, SixteenAlpamayoImagesGiveDeltaMinus2592) {
  // Spec §2: each 10x18 image takes 180 tokens but advances positions by 18.
  std::vector<int32_t> ids = {1, 2, 3};
  std::vector<std::array<int64_t, 3>> grids;
  for (int i = 0; i < 16; ++i) {
    ids.push_back(151652);
    ids.insert(ids.end(), 180, kPad);
    ids.push_back(151653);
    grids.push_back({1, 10, 18});
  }
  ids.insert(ids.end(), 60, 9);
  auto r = rope_index(ids, kPad, grids);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rope_delta, -2592);
  // The token after the first image (<|vision_end|>) sits at base + 18, base = 4.
  EXPECT_EQ(r->pos[(4 + 180) * 3], 4 + 18);
}

TEST(TextRopeIndex, RejectsMismatchedImages) {
  std::vector<int32_t> ids = {1, kPad, kPad, 2};
  const std::array<int64_t, 3> grid = {1, 1, 3};  // needs 3 tokens, prompt has 2
  EXPECT_FALSE(rope_index(ids, kPad, std::span(&grid, 1)).ok());
  EXPECT_FALSE(rope_index(ids, kPad, {}).ok());  // image tokens but no image
}

}  // namespace
}  // namespace ferry
