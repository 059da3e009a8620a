// Qwen3-VL's get_rope_index (spec §2): the (t, h, w) rotary positions of every prompt token.
//
// Text tokens advance all three positions together; the tokens of an image with merged grid
// (T, H, W) (in LM tokens, i.e. patches / 2 per side) get t = base + ti, h = base + hi,
// w = base + wi in raster order, where base is the position the first image token would have had
// as text; text after the image resumes at 1 + the largest position so far.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace ferry {

struct RopePositions {
  std::vector<int32_t> pos;  // [S, 3] row-major: (t, h, w) per token
  int64_t rope_delta = 0;    // (max position + 1) - S; decode at cache index c uses c + delta
};

// `grids` are the merged grids of the images in prompt order. Every image must appear as one run
// of exactly T·H·W image tokens, in order; anything else is an error (invalid_argument).
Result<RopePositions> rope_index(std::span<const int32_t> ids, int32_t image_token_id,
                                 std::span<const std::array<int64_t, 3>> grids);

// Plain 1-D positions first, first+1, ... in all three columns.
std::vector<int32_t> linear_positions(int64_t first, int64_t count);

}  // namespace ferry
