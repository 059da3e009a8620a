#include "model/vision_tables.h"

#include <cmath>
#include <cstddef>

#include "core/status.h"
#include "model/flow_matching.h"

namespace ferry {

std::vector<PatchCoord> window_order(int64_t grid_h, int64_t grid_w, int64_t merge) {
  FERRY_CHECK(merge > 0 && grid_h % merge == 0 && grid_w % merge == 0,
              "window_order: grid not a multiple of the merge size");
  std::vector<PatchCoord> out;
  out.reserve(static_cast<size_t>(grid_h * grid_w));
  for (int64_t bh = 0; bh < grid_h / merge; ++bh) {
    for (int64_t bw = 0; bw < grid_w / merge; ++bw) {
      for (int64_t mh = 0; mh < merge; ++mh) {
        for (int64_t mw = 0; mw < merge; ++mw) {
          out.push_back({bh * merge + mh, bw * merge + mw});
        }
      }
    }
  }
  return out;
}

PosEmbedTable pos_embed_table(int64_t grid_h, int64_t grid_w, int64_t merge, int64_t table_side) {
  FERRY_CHECK(table_side > 0, "pos_embed_table: empty table");
  const float last = static_cast<float>(table_side - 1);
  const std::vector<float> ys = linspace_f32(0.0f, last, grid_h);
  const std::vector<float> xs = linspace_f32(0.0f, last, grid_w);
  const auto max_index = static_cast<int32_t>(table_side - 1);
  const auto side = static_cast<int32_t>(table_side);

  PosEmbedTable t;
  const std::vector<PatchCoord> order = window_order(grid_h, grid_w, merge);
  t.idx.reserve(order.size() * 4);
  t.weight.reserve(order.size() * 4);
  for (const PatchCoord& p : order) {
    const float y = ys[static_cast<size_t>(p.row)];
    const float x = xs[static_cast<size_t>(p.col)];
    // Corner-aligned bilinear: trunc toward zero (the values are >= 0), upper corner clamped.
    const auto y0 = static_cast<int32_t>(y);
    const auto x0 = static_cast<int32_t>(x);
    const int32_t y1 = y0 + 1 < max_index ? y0 + 1 : max_index;
    const int32_t x1 = x0 + 1 < max_index ? x0 + 1 : max_index;
    const float dy = y - static_cast<float>(y0);
    const float dx = x - static_cast<float>(x0);
    t.idx.insert(t.idx.end(), {y0 * side + x0, y0 * side + x1, y1 * side + x0, y1 * side + x1});
    t.weight.insert(t.weight.end(),
                    {(1.0f - dy) * (1.0f - dx), (1.0f - dy) * dx, dy * (1.0f - dx), dy * dx});
  }
  return t;
}

RopeTables vision_rope_tables(int64_t grid_h, int64_t grid_w, int64_t merge, int64_t head_dim,
                              float theta) {
  FERRY_CHECK(head_dim > 0 && head_dim % 4 == 0, "vision_rope_tables: head_dim % 4 != 0");
  const int64_t half = head_dim / 2;     // the rotary dim of Qwen3VLVisionRotaryEmbedding
  const int64_t quarter = head_dim / 4;  // frequencies per axis
  std::vector<float> inv_freq(static_cast<size_t>(quarter));
  for (int64_t k = 0; k < quarter; ++k) {
    // fp32 as torch: arange(0, dim, 2).float() / dim, theta ** that, then the reciprocal.
    const float exponent = static_cast<float>(2 * k) / static_cast<float>(half);
    inv_freq[static_cast<size_t>(k)] = 1.0f / std::pow(theta, exponent);
  }
  RopeTables t;
  const std::vector<PatchCoord> order = window_order(grid_h, grid_w, merge);
  t.cos.reserve(order.size() * static_cast<size_t>(half));
  t.sin.reserve(order.size() * static_cast<size_t>(half));
  for (const PatchCoord& p : order) {
    for (int64_t j = 0; j < half; ++j) {
      const int64_t pos = j < quarter ? p.row : p.col;
      const float angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(j % quarter)];
      t.cos.push_back(std::cos(angle));
      t.sin.push_back(std::sin(angle));
    }
  }
  return t;
}

}  // namespace ferry
