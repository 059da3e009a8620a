#include "model/rope_index.h"

#include <algorithm>
#include <string>

namespace ferry {

namespace {
Error bad(const std::string& msg) {
  return make_error(ErrorCode::invalid_argument, "rope index: " + msg);
}
}  // namespace

Result<RopePositions> rope_index(std::span<const int32_t> ids, int32_t image_token_id,
                                 std::span<const std::array<int64_t, 3>> grids) {
  const int64_t n = static_cast<int64_t>(ids.size());
  RopePositions out;
  out.pos.resize(static_cast<size_t>(n) * 3);
  auto set = [&](int64_t i, int64_t t, int64_t h, int64_t w) {
    out.pos[static_cast<size_t>(i) * 3 + 0] = static_cast<int32_t>(t);
    out.pos[static_cast<size_t>(i) * 3 + 1] = static_cast<int32_t>(h);
    out.pos[static_cast<size_t>(i) * 3 + 2] = static_cast<int32_t>(w);
  };
  int64_t st = 0;        // start of the current text segment
  int64_t next = 0;      // position of the next text token
  int64_t max_pos = -1;  // largest position assigned so far
  for (size_t img = 0; img < grids.size(); ++img) {
    const auto [gt, gh, gw] = grids[img];
    if (gt <= 0 || gh <= 0 || gw <= 0) return bad("image " + std::to_string(img) + ": empty grid");
    int64_t ed = st;
    while (ed < n && ids[static_cast<size_t>(ed)] != image_token_id) ++ed;
    if (ed == n) return bad("image " + std::to_string(img) + " has no image tokens in the prompt");
    for (int64_t i = st; i < ed; ++i) set(i, next + (i - st), next + (i - st), next + (i - st));
    const int64_t base = next + (ed - st);
    const int64_t count = gt * gh * gw;
    if (ed + count > n) return bad("image " + std::to_string(img) + ": prompt too short");
    for (int64_t k = 0; k < count; ++k) {
      if (ids[static_cast<size_t>(ed + k)] != image_token_id) {
        return bad("image " + std::to_string(img) + ": expected " + std::to_string(count) +
                   " consecutive image tokens");
      }
      const int64_t ti = k / (gh * gw), hi = (k / gw) % gh, wi = k % gw;
      set(ed + k, base + ti, base + hi, base + wi);
    }
    max_pos = base + std::max({gt, gh, gw}) - 1;
    if (ed > st) max_pos = std::max(max_pos, base - 1);
    next = max_pos + 1;
    st = ed + count;
  }
  for (int64_t i = st; i < n; ++i) {
    if (ids[static_cast<size_t>(i)] == image_token_id) {
      return bad("more image tokens than the images' grids account for");
    }
    set(i, next + (i - st), next + (i - st), next + (i - st));
  }
  if (n > st) max_pos = next + (n - st) - 1;
  out.rope_delta = max_pos + 1 - n;
  return out;
}

std::vector<int32_t> linear_positions(int64_t first, int64_t count) {
  std::vector<int32_t> pos(static_cast<size_t>(count) * 3);
  for (int64_t i = 0; i < count; ++i) {
    for (int c = 0; c < 3; ++c)
      pos[static_cast<size_t>(i * 3 + c)] = static_cast<int32_t>(first + i);
  }
  return pos;
}

}  // namespace ferry
