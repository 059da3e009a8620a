// Host tables of the vision tower (spec §3.1–§3.3), all per image in the 2×2-window patch order
// (t, bh, bw, mh, mw) with t = 0 for still images.
#pragma once

#include <cstdint>
#include <vector>

namespace ferry {

// Patch (row, col) in patch units for each patch of a grid_h × grid_w image, in window order.
struct PatchCoord {
  int64_t row = 0;
  int64_t col = 0;
};
std::vector<PatchCoord> window_order(int64_t grid_h, int64_t grid_w, int64_t merge);

// Bilinear position-embedding corners and weights (§3.2): [patches, 4] each, in window order.
// Weights are fp32 here; the PosEmbedInterp op rounds them to bf16.
struct PosEmbedTable {
  std::vector<int32_t> idx;
  std::vector<float> weight;
};
PosEmbedTable pos_embed_table(int64_t grid_h, int64_t grid_w, int64_t merge, int64_t table_side);

// 2-D rotary cos/sin (§3.3): [patches, head_dim/2] f32 each, in window order. Columns
// [0, head_dim/4) use row·inv_freq, [head_dim/4, head_dim/2) col·inv_freq, with
// inv_freq[k] = 1/theta^(2k/(head_dim/2)) in fp32.
struct RopeTables {
  std::vector<float> cos;
  std::vector<float> sin;
};
RopeTables vision_rope_tables(int64_t grid_h, int64_t grid_w, int64_t merge, int64_t head_dim,
                              float theta = 10000.0f);

}  // namespace ferry
