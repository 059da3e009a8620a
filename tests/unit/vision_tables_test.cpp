#include "model/vision_tables.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace ferry {
namespace {

TEST(VisionTables, WindowOrderKeepsEachTwoByTwoWindowTogether) {
  const auto order = window_order(4, 6, 2);
  ASSERT_EQ(order.size(), 24u);
  // Spec §3.1: row index = ((bh·(w/2) + bw)·4 + mh·2 + mw at cell (2bh+mh, 2bw+mw).
  for (int64_t bh = 0; bh < 2; ++bh)
    for (int64_t bw = 0; bw < 3; ++bw)
      for (int64_t mh = 0; mh < 2; ++mh)
        for (int64_t mw = 0; mw < 2; ++mw) {
          const auto& p = order[static_cast<size_t>((bh * 3 + bw) * 4 + mh * 2 + mw)];
          EXPECT_EQ(p.row, 2 * bh + mh);
          EXPECT_EQ(p.col, 2 * bw + mw);
        }
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const auto& p : order) seen.insert({p.row, p.col});
  EXPECT_EQ(seen.size(), 24u);
}

TEST(VisionTables, PosEmbedOnTheTableGridIsOneHot) {
  const PosEmbedTable t = pos_embed_table(6, 6, 2, 6);
  const auto order = window_order(6, 6, 2);
  for (size_t r = 0; r < order.size(); ++r) {
    EXPECT_EQ(t.idx[4 * r], order[r].row * 6 + order[r].col);
    EXPECT_EQ(t.weight[4 * r], 1.0f);
    EXPECT_EQ(t.weight[4 * r + 1] + t.weight[4 * r + 2] + t.weight[4 * r + 3], 0.0f);
  }
}

TEST(VisionTables, PosEmbedInterpolatesLinearFunctionsExactly) {
  // Bilinear interpolation reproduces f(y, x) = 3y + 5x at the corner-aligned grid points
  // ys = linspace(0, G−1, h), computed here in float64.
  const int64_t h = 10, w = 18, side = 48;
  const PosEmbedTable t = pos_embed_table(h, w, 2, side);
  const auto order = window_order(h, w, 2);
  ASSERT_EQ(t.idx.size(), order.size() * 4);
  for (size_t r = 0; r < order.size(); ++r) {
    double f = 0, wsum = 0;
    for (size_t c = 0; c < 4; ++c) {
      const int32_t i = t.idx[4 * r + c];
      ASSERT_GE(i, 0);
      ASSERT_LT(i, side * side);
      f += t.weight[4 * r + c] * (3.0 * (i / side) + 5.0 * (i % side));
      wsum += t.weight[4 * r + c];
      EXPECT_GE(t.weight[4 * r + c], 0.0f);
    }
    const double y = 47.0 * static_cast<double>(order[r].row) / (h - 1);
    const double x = 47.0 * static_cast<double>(order[r].col) / (w - 1);
    EXPECT_NEAR(wsum, 1.0, 1e-6);
    EXPECT_NEAR(f, 3 * y + 5 * x, 1e-4) << r;
  }
}

TEST(VisionTables, RopeUsesRowThenColumnFrequencies) {
  const int64_t head_dim = 72, half = 36, quarter = 18;
  const RopeTables t = vision_rope_tables(4, 6, 2, head_dim);
  const auto order = window_order(4, 6, 2);
  ASSERT_EQ(t.cos.size(), order.size() * half);
  for (size_t r = 0; r < order.size(); ++r) {
    for (int64_t j = 0; j < half; ++j) {
      const int64_t k = j % quarter;
      const double inv = 1.0 / std::pow(10000.0, 2.0 * static_cast<double>(k) / half);
      const double pos = static_cast<double>(j < quarter ? order[r].row : order[r].col);
      EXPECT_NEAR(t.cos[r * half + j], std::cos(pos * inv), 2e-6);
      EXPECT_NEAR(t.sin[r * half + j], std::sin(pos * inv), 2e-6);
    }
  }
}

}  // namespace
}  // namespace ferry
